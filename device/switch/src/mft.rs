//! The multicast forwarding table: multicast LID (0xC000..=0xFFFE) → the
//! set of output ports, as port masks of 16 ports per position (the
//! MulticastForwardingTable blocks the subnet manager sets, `sma.rs`), and
//! the forwarding of a multicast packet to each port of its set.
//!
//! A multicast packet goes out of every port of its LID's set that is up
//! and Active, except the port it came in by (IBA vol 1 §18.2.4.3.3: a
//! switch never sends a multicast packet back where it came from), each
//! copy on the VL its output port maps the SL to. A LID with no set, or a
//! set of only the input port, drops the packet (PortRcvSwitchRelayErrors,
//! counted as `drop_unknown_lid`). The copies share the input buffer's
//! credit: it is freed when the first copy leaves.

use std::collections::HashMap;
use std::sync::RwLock;

use ibtca_protocol::encoded;

use super::{Core, DropReason, PortSlot};

pub use ibtca_protocol::headers::is_multicast_lid as is_multicast;
/// Port-mask positions of 16 ports each (ports 0..=255).
pub const POSITIONS: usize = 16;

/// The table, shared by every port's reader thread.
#[derive(Debug, Default)]
pub struct Mft {
    masks: RwLock<HashMap<u16, [u16; POSITIONS]>>,
}

impl Mft {
    /// The mask of ports 16·`position` .. 16·`position` + 15 for `mlid`.
    pub fn mask(&self, mlid: u16, position: usize) -> u16 {
        let masks = self.masks.read().unwrap_or_else(|e| e.into_inner());
        masks
            .get(&mlid)
            .and_then(|m| m.get(position).copied())
            .unwrap_or(0)
    }

    /// Sets that mask (a LID whose masks are all 0 has no entry).
    pub fn set_mask(&self, mlid: u16, position: usize, mask: u16) {
        let mut masks = self.masks.write().unwrap_or_else(|e| e.into_inner());
        let entry = masks.entry(mlid).or_insert([0; POSITIONS]);
        if let Some(m) = entry.get_mut(position) {
            *m = mask;
        }
        if entry.iter().all(|m| *m == 0) {
            masks.remove(&mlid);
        }
    }

    /// The highest multicast LID with ports (MulticastFDBTop), 0 if none.
    pub fn top(&self) -> u16 {
        let masks = self.masks.read().unwrap_or_else(|e| e.into_inner());
        masks.keys().max().copied().unwrap_or(0)
    }

    /// The ports of `mlid`'s set, lowest first.
    pub fn ports(&self, mlid: u16) -> Vec<u8> {
        let masks = self.masks.read().unwrap_or_else(|e| e.into_inner());
        let Some(m) = masks.get(&mlid) else {
            return Vec::new();
        };
        (0..POSITIONS * 16)
            .filter(|p| m[p / 16] & (1 << (p % 16)) != 0)
            .filter_map(|p| u8::try_from(p).ok())
            .collect()
    }
}

impl Core {
    /// Forwards a multicast packet that came in on `in_port` (on `in_vl`)
    /// to every port of its LID's set but that one.
    pub(super) fn forward_multicast(
        &self,
        in_port: u8,
        in_slot: &PortSlot,
        in_vl: u8,
        dlid: u16,
        packet: Vec<u8>,
    ) {
        in_slot.counters.rx_multicast();
        let sl = encoded::sl(&packet).unwrap_or(0);
        let mut tag = Some(self.credit_tag(in_port, in_vl));
        for out_port in self.mft.ports(dlid) {
            if out_port == in_port {
                continue;
            }
            let Some(out_slot) = self.slot(out_port) else {
                continue;
            };
            if !self.partitions_admit(in_slot, out_slot, &packet) {
                continue;
            }
            if !(in_slot.is_active() && out_slot.is_active()) {
                out_slot.counters.dropped(DropReason::PortInactive);
                continue;
            }
            let mut copy = packet.clone();
            encoded::set_vl(&mut copy, out_slot.vl(sl));
            encoded::restamp_vcrc(&mut copy);
            // The first copy carries the input buffer's credit; the others
            // a tag that frees nothing (port 0 has no link).
            if self.send(out_port, out_slot, copy, tag.take().unwrap_or(0)) {
                out_slot.counters.tx_multicast();
            }
        }
        match tag {
            None => {}
            Some(tag) => {
                tracing::debug!(switch = %self.name, port = in_port, dlid, "no multicast ports; packet dropped");
                in_slot.counters.dropped(DropReason::UnknownLid);
                self.credit_done(tag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_make_port_sets_and_empty_sets_go() {
        let mft = Mft::default();
        assert!(mft.ports(0xc000).is_empty());
        mft.set_mask(0xc001, 0, 0b1010);
        mft.set_mask(0xc001, 1, 0b1);
        assert_eq!(mft.ports(0xc001), [1, 3, 16]);
        assert_eq!((mft.mask(0xc001, 0), mft.top()), (0b1010, 0xc001));
        mft.set_mask(0xc001, 0, 0);
        mft.set_mask(0xc001, 1, 0);
        assert_eq!((mft.ports(0xc001), mft.top()), (vec![], 0));
        assert!(is_multicast(0xc000) && is_multicast(0xfffe));
        assert!(!is_multicast(0xffff) && !is_multicast(0xbfff));
    }
}
