//! What a hosted switch sends: its [`Outbox`] (the switch's [`Wires`])
//! puts each packet in one buffer that every hosted switch of the hive
//! shares ([`Sent`]), for the loop to carry.
//!
//! The hive calls one node at a time on its one thread and takes what a
//! switch sent right after each call (a delivery, its due traps), so the
//! shared buffer holds only that switch's packets when taken, and is
//! empty again before the next call. Every hop through a switch then finds
//! the buffer and its lock where the last hop left them (in cache); a
//! switch's own outbox is one small object: its ports' up bits, inline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ibtca_link::{HighPriority, LinkError, LinkStats};
use ibtca_switch::Wires;

/// Packets as a switch sends them: (port, packet).
pub(super) type Packets = Vec<(u8, Vec<u8>)>;

/// The buffer every hosted switch's outbox sends into.
#[derive(Debug, Default)]
pub(super) struct Sent(Mutex<Packets>);

/// One hosted switch's wires, as the hive carries them.
#[derive(Debug)]
#[repr(C)]
pub(super) struct Outbox {
    sent: Arc<Sent>,
    /// Bit `(p - 1) % 64` of word `(p - 1) / 64`: port `p`'s link is up
    /// (ports 1..=254).
    up: [AtomicU64; 4],
    /// The same bits: port `p`'s peer is a hosted node
    /// ([`Wires::in_process`]).
    in_process: [AtomicU64; 4],
    /// Packets refused on a port whose link is down.
    pub refused: AtomicU64,
}

/// The word and bit of `port`'s up flag (none for port 0).
fn bit(port: u8) -> Option<(usize, u64)> {
    let i = usize::from(port).checked_sub(1)?;
    Some((i / 64, 1 << (i % 64)))
}

impl Outbox {
    /// An outbox sending into `sent`, every port down.
    pub fn new(sent: Arc<Sent>) -> Self {
        Outbox {
            sent,
            up: Default::default(),
            in_process: Default::default(),
            refused: AtomicU64::new(0),
        }
    }

    /// Moves what was sent into `out` (empty), leaving `out`'s buffer in
    /// its place: the two buffers take turns, so none is allocated anew.
    pub fn take_into(&self, out: &mut Packets) {
        std::mem::swap(
            out,
            &mut *self.sent.0.lock().unwrap_or_else(|e| e.into_inner()),
        );
    }

    pub fn set_up(&self, port: u8, up: bool) {
        if let Some((word, mask)) = bit(port) {
            if up {
                self.up[word].fetch_or(mask, Ordering::Relaxed);
            } else {
                self.up[word].fetch_and(!mask, Ordering::Relaxed);
            }
        }
    }

    /// Marks `port` as wired to a hosted node: what the switch sends on it
    /// is taken as built in the hive (its CRCs unread).
    pub fn set_in_process(&self, port: u8) {
        if let Some((word, mask)) = bit(port) {
            self.in_process[word].fetch_or(mask, Ordering::Relaxed);
        }
    }

    fn is_up(&self, port: u8) -> bool {
        bit(port).is_some_and(|(word, mask)| self.up[word].load(Ordering::Relaxed) & mask != 0)
    }
}

/// The hive frees a packet's input buffer as soon as the packet is handed
/// on, so tags, generations and credits are not its switches' business.
impl Wires for Outbox {
    fn send_tagged(&self, port: u8, packet: Vec<u8>, _tag: u64) -> Result<(), LinkError> {
        if !self.is_up(port) {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(LinkError::Down);
        }
        self.sent
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((port, packet));
        Ok(())
    }

    fn generation(&self, _port: u8) -> u64 {
        0
    }

    fn return_credit(&self, _port: u8, _vl: u8, _generation: Option<u64>) {}

    fn link_stats(&self, _port: u8) -> Option<LinkStats> {
        None
    }

    fn set_low_priority(&self, _port: u8, _table: &[(u8, u8)]) {}

    fn set_high_priority(&self, _port: u8, _table: &HighPriority) {}

    /// A port whose link is up takes a packet at once: the hive keeps no
    /// credits.
    fn passes_at_once(&self, port: u8) -> bool {
        self.is_up(port)
    }

    fn in_process(&self, port: u8) -> bool {
        bit(port)
            .is_some_and(|(word, mask)| self.in_process[word].load(Ordering::Relaxed) & mask != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_sends_only_while_its_link_is_up() {
        let sent = Arc::new(Sent::default());
        let outbox = Outbox::new(Arc::clone(&sent));
        for port in [1u8, 64, 65, 254] {
            assert!(outbox.send_tagged(port, vec![port], 0).is_err(), "{port}");
            outbox.set_up(port, true);
            assert!(outbox.send_tagged(port, vec![port], 0).is_ok(), "{port}");
        }
        assert!(outbox.send_tagged(0, vec![0], 0).is_err(), "no port 0");
        outbox.set_up(64, false);
        assert!(outbox.send_tagged(64, vec![64], 0).is_err());
        assert!(outbox.send_tagged(65, vec![65], 0).is_ok(), "65 stays up");
        assert_eq!(outbox.refused.load(Ordering::Relaxed), 6);
        let mut out = Vec::new();
        outbox.take_into(&mut out);
        let ports: Vec<u8> = out.iter().map(|(p, _)| *p).collect();
        assert_eq!(ports, [1, 64, 65, 254, 65]);
    }

    #[test]
    fn a_port_is_in_process_once_marked_so() {
        let outbox = Outbox::new(Arc::new(Sent::default()));
        for port in [1u8, 64, 65, 254] {
            assert!(!outbox.in_process(port), "{port}");
            outbox.set_in_process(port);
            assert!(outbox.in_process(port), "{port}");
        }
        assert!(!outbox.in_process(2) && !outbox.in_process(0));
    }

    #[test]
    fn every_outbox_sends_into_the_one_buffer() {
        let sent = Arc::new(Sent::default());
        let (a, b) = (Outbox::new(Arc::clone(&sent)), Outbox::new(sent));
        a.set_up(1, true);
        b.set_up(2, true);
        a.send_tagged(1, vec![1], 0).unwrap();
        let mut out = Vec::new();
        b.take_into(&mut out);
        assert_eq!(out, vec![(1u8, vec![1u8])]);
        out.clear();
        b.send_tagged(2, vec![2], 0).unwrap();
        a.take_into(&mut out);
        assert_eq!(out, vec![(2u8, vec![2u8])]);
    }
}
