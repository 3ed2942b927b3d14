//! Wires that keep what a switch sends instead of sending it: the test
//! double of the switch's own tests and of the crates that host a switch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ibtca_link::{HighPriority, LinkError, LinkStats};

use crate::Wires;

/// Every packet a switch sent, with its output port, in order. Links
/// have no credits, statistics or priorities here. Every port is a wire
/// unless [`CollectWires::set_in_process`] says otherwise, and takes
/// packets only through [`Wires::send_tagged`] unless
/// [`CollectWires::set_passes_at_once`] says otherwise.
#[derive(Default)]
pub struct CollectWires {
    sent: Mutex<Vec<(u8, Vec<u8>)>>,
    /// Bit `p - 1`: port `p` leads to a node in this process.
    in_process: AtomicU64,
    /// Bit `p - 1`: port `p` takes a packet at once
    /// ([`Wires::passes_at_once`]).
    at_once: AtomicU64,
}

/// Bit `port - 1` (none but for ports 1-64).
fn bit(port: u8) -> u64 {
    if (1..=64).contains(&port) {
        1 << (port - 1)
    } else {
        0
    }
}

impl CollectWires {
    /// Wires whose buffer holds `packets` before it grows, so that a
    /// sender that pushes no more than that allocates nothing.
    pub fn with_capacity(packets: usize) -> Self {
        CollectWires {
            sent: Mutex::new(Vec::with_capacity(packets)),
            in_process: AtomicU64::new(0),
            at_once: AtomicU64::new(0),
        }
    }

    /// Makes `port` (1-64) one that leads to a node in this process
    /// ([`Wires::in_process`]).
    pub fn set_in_process(&self, port: u8) {
        self.in_process.fetch_or(bit(port), Ordering::Relaxed);
    }

    /// Makes `port` (1-64) one that takes a packet at once
    /// ([`Wires::passes_at_once`]).
    pub fn set_passes_at_once(&self, port: u8) {
        self.at_once.fetch_or(bit(port), Ordering::Relaxed);
    }

    /// What was sent since the last call; the buffer keeps its capacity.
    pub fn take(&self) -> Vec<(u8, Vec<u8>)> {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        let out = sent.clone();
        sent.clear();
        out
    }
}

impl Wires for CollectWires {
    fn send_tagged(&self, port: u8, packet: Vec<u8>, _tag: u64) -> Result<(), LinkError> {
        self.sent
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
    fn in_process(&self, port: u8) -> bool {
        self.in_process.load(Ordering::Relaxed) & bit(port) != 0
    }
    fn passes_at_once(&self, port: u8) -> bool {
        self.at_once.load(Ordering::Relaxed) & bit(port) != 0
    }
}
