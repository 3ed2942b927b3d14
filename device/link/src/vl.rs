//! Virtual lanes on a link (seed 003): per-VL send queues, credit-based
//! flow control and VL arbitration.
//!
//! - A packet's VL is the LRH VL field (`ibtca_protocol::encoded::vl`; VL 0
//!   for an empty packet frame), read when it is queued (a fault that later
//!   corrupts that byte does not move it).
//! - **Credits** are counted in packets, per VL. The receiver grants
//!   `Credit { vl, credits }` frames: right after the `Hello` its whole
//!   buffer ([`FlowControl::credits`] per VL), then more as it frees
//!   buffers. The sender sends a packet only while the VL has credit, so it
//!   never sends a packet the receiver has no buffer for; a VL out of credit
//!   stalls alone while the others go on. Grants are incremental; a new
//!   connection starts from zero.
//! - **VL15** (subnet management) is outside credit flow control, as IBA
//!   says: it is served first and never waits for credits, and the
//!   receiver grants none for it; it holds at most [`VL15_BUFFERS`]
//!   management packets and drops (and counts) the rest, which IBA allows
//!   for VL15.
//! - **Arbitration** (IBA §7.6.9): VL15 is served first. Then the
//!   high-priority table ([`HighPriority`], empty unless a subnet manager
//!   sets one); after `limit` × 4 KiB of high-priority bytes sent while a
//!   low-priority packet waited (limit 0: one packet; 255: no limit), one
//!   low-priority packet goes. Then the low-priority table: the port's
//!   configured weights as (VL n, weight n) entries, VL0 first, until a
//!   subnet manager sets a table ([`super::Link::set_low_priority`]). Both
//!   tables are served alike (`vl_table.rs`): entries in table order, each
//!   sending while its weight in 64-byte units lasts. With an empty
//!   high-priority table only the low one arbitrates.
//! - A device frees a buffer when its engine is done with the packet (drops
//!   its batch, [`FlowControl::auto_return`]); a switch frees it when the packet has
//!   left through the output port, so a congested output pushes back to the
//!   inputs instead of dropping.

use std::collections::VecDeque;

use crate::vl_table::TableTurns;

/// VLs on a link: data VLs 0–14 and VL15.
pub const NUM_VLS: usize = 16;
/// The management VL, served before every data VL.
pub const VL15: u8 = 15;

/// VL15 packets a receiver holds at once (outside flow control); more are
/// dropped and counted (`rx_vl15_dropped`).
pub const VL15_BUFFERS: u32 = 64;

/// Flow-control settings of one end of a link. Both ends of a link must
/// run flow control (every ibtca device and switch does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowControl {
    /// Receive buffer per VL, in packets: granted to the peer on connect.
    pub credits: u16,
    /// Weights of data VLs 0–14 in 64-byte units (0: never served): the
    /// low-priority table's entries (VL n, `weights[n]`), VL0 first, until
    /// [`super::Link::set_low_priority`] replaces them.
    pub weights: [u8; 15],
    /// Free a receive buffer (return its credit) when the batch that
    /// carries the packet is dropped; otherwise the owner calls
    /// [`super::Link::return_credits`].
    pub auto_return: bool,
}

/// Receive buffer per VL a device or switch port grants: one QP's full
/// send window at MTU 4096 (`RcConfig::send_window_for_mtu`), so a bulk
/// transfer is paced by its ACKs, not by credits coming back (with 256,
/// half the window, a 1 MiB stream stalled on credits hundreds of times a
/// second).
pub const DEFAULT_CREDITS: u16 = 1024;

impl Default for FlowControl {
    fn default() -> Self {
        FlowControl {
            credits: DEFAULT_CREDITS,
            weights: [1; 15],
            auto_return: true,
        }
    }
}

/// IBA's high-priority VL arbitration table and its limit (PortInfo
/// VLHighLimit).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HighPriority {
    /// (VL, weight in 64-byte units) entries, served in turn; entries of
    /// weight 0 or on VL15 are skipped.
    pub entries: Vec<(u8, u8)>,
    /// High-priority bytes, in 4 KiB units, sent while a low-priority
    /// packet waits before one low-priority packet goes (0: one packet;
    /// 255: unlimited).
    pub limit: u8,
}

/// A VLHighLimit of no limit.
pub const HIGH_LIMIT_UNBOUNDED: u8 = 255;

/// One queued packet: its bytes, its VL and the owner's tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Queued {
    pub packet: Vec<u8>,
    pub vl: u8,
    pub tag: Option<u64>,
}

/// The send side's per-VL queues, credits and arbiter.
#[derive(Debug)]
pub(super) struct VlQueues {
    queues: [VecDeque<Queued>; NUM_VLS],
    len: usize,
    /// Credits per VL; `None` without flow control (unlimited).
    credits: Option<[u32; NUM_VLS]>,
    /// The low-priority table and its turn.
    low: TableTurns,
    /// The high-priority table (entries that can send) and its turn.
    high: TableTurns,
    high_limit: u8,
    /// High-priority bytes sent since a low-priority packet last went or
    /// none waited.
    high_sent: u64,
}

/// The length of the packet at the head of `vl` if it may go now: queued,
/// and a credit for it (VL15 and links without flow control need none).
fn head(
    queues: &[VecDeque<Queued>; NUM_VLS],
    credits: &Option<[u32; NUM_VLS]>,
    vl: u8,
) -> Option<usize> {
    let i = usize::from(vl);
    let len = queues.get(i)?.front()?.packet.len();
    let credit = vl == VL15
        || credits
            .as_ref()
            .is_none_or(|c| c.get(i).is_some_and(|n| *n > 0));
    credit.then_some(len)
}

/// The low-priority table of configured weights: (VL n, `weights[n]`),
/// weight 0 left out.
pub fn weight_table(weights: &[u8; 15]) -> Vec<(u8, u8)> {
    (0u8..)
        .zip(weights.iter().copied())
        .filter(|e| e.1 > 0)
        .collect()
}

impl VlQueues {
    pub fn new(flow: Option<&FlowControl>) -> Self {
        let weights = flow.map_or([1; 15], |f| f.weights);
        VlQueues {
            queues: Default::default(),
            len: 0,
            credits: flow.map(|_| [0; NUM_VLS]),
            low: TableTurns::new(&weight_table(&weights)),
            high: TableTurns::default(),
            high_limit: 0,
            high_sent: 0,
        }
    }

    /// Replaces the high-priority table and limit (its turn starts over).
    pub fn set_high_priority(&mut self, table: &HighPriority) {
        self.high = TableTurns::new(&table.entries);
        self.high_limit = table.limit;
        self.high_sent = 0;
    }

    /// Replaces the low-priority table (its turn starts over).
    pub fn set_low_priority(&mut self, entries: &[(u8, u8)]) {
        self.low = TableTurns::new(entries);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, q: Queued) {
        // Without flow control there are no VLs to arbitrate: one FIFO.
        let vl = if self.credits.is_some() { q.vl } else { 0 };
        if let Some(queue) = self.queues.get_mut(usize::from(vl)) {
            queue.push_back(q);
            self.len += 1;
        }
    }

    /// Removes everything (a connection ended); credits restart at zero.
    pub fn clear(&mut self) -> Vec<Queued> {
        self.len = 0;
        if let Some(c) = self.credits.as_mut() {
            *c = [0; NUM_VLS];
        }
        self.queues.iter_mut().flat_map(|q| q.drain(..)).collect()
    }

    /// Adds credits granted by the peer.
    pub fn add_credits(&mut self, grants: &[u32; NUM_VLS]) {
        if let Some(c) = self.credits.as_mut() {
            for (have, more) in c.iter_mut().zip(grants) {
                *have = have.saturating_add(*more);
            }
        }
    }

    /// Takes one credit of `vl` for a packet sent past the queues (they
    /// are empty, so arbitration has nothing to choose); false if `vl` has
    /// none (always true without flow control, and for VL15).
    pub fn take_credit(&mut self, vl: u8) -> bool {
        if vl == VL15 {
            return true;
        }
        match self.credits.as_mut().map(|c| c.get_mut(usize::from(vl))) {
            None => true,
            Some(Some(c)) if *c > 0 => {
                *c -= 1;
                true
            }
            Some(_) => false,
        }
    }

    /// Gives back a credit [`Self::take_credit`] took for a packet that was
    /// not sent after all.
    pub fn return_credit(&mut self, vl: u8) {
        if vl == VL15 {
            return;
        }
        if let Some(c) = self
            .credits
            .as_mut()
            .and_then(|c| c.get_mut(usize::from(vl)))
        {
            *c = c.saturating_add(1);
        }
    }

    /// Credits the peer has granted on each VL (unlimited: `u32::MAX`).
    pub fn credits(&self) -> [u32; NUM_VLS] {
        self.credits.unwrap_or([u32::MAX; NUM_VLS])
    }

    fn eligible(&self, vl: u8) -> bool {
        head(&self.queues, &self.credits, vl).is_some()
    }

    /// True if packets wait but no VL may send (credit stall).
    pub fn stalled(&self) -> bool {
        !self.is_empty() && !self.any_eligible()
    }

    /// True if some packet may be sent now.
    pub fn sendable(&self) -> bool {
        !self.is_empty() && self.any_eligible()
    }

    fn any_eligible(&self) -> bool {
        match &self.credits {
            // One FIFO on VL 0.
            None => true,
            Some(_) => (0..NUM_VLS as u8).any(|vl| self.eligible(vl) && self.served(vl)),
        }
    }

    /// True if arbitration ever serves `vl`: VL15, or a VL of an entry of
    /// weight above 0 in either table (packets on another VL wait, and do
    /// not wake the writer for nothing).
    fn served(&self, vl: u8) -> bool {
        vl == VL15 || self.low.serves(vl) || self.high.serves(vl)
    }

    /// The next packet by arbitration: VL15 first, then the high-priority
    /// table (but one low-priority packet past its limit), then the
    /// low-priority table; consumes one credit (none for VL15).
    pub fn pop(&mut self) -> Option<Queued> {
        let vl = if self.eligible(VL15) {
            VL15
        } else {
            self.next_arbitrated_vl()?
        };
        let q = self.queues.get_mut(usize::from(vl))?.pop_front()?;
        self.len -= 1;
        if vl != VL15 {
            if let Some(c) = self
                .credits
                .as_mut()
                .and_then(|c| c.get_mut(usize::from(vl)))
            {
                *c -= 1;
            }
        }
        Some(q)
    }

    fn next_arbitrated_vl(&mut self) -> Option<u8> {
        if self.high.is_empty() {
            return self.next_low_vl();
        }
        let low_waits = (0..VL15).any(|vl| self.low.serves(vl) && self.eligible(vl));
        if !low_waits {
            self.high_sent = 0;
        } else if self.high_limit_reached() {
            if let Some(vl) = self.next_low_vl() {
                self.high_sent = 0;
                return Some(vl);
            }
        }
        let (high, queues, credits) = (&mut self.high, &self.queues, &self.credits);
        match high.next(|vl| head(queues, credits, vl)) {
            Some((vl, bytes)) => {
                if low_waits {
                    self.high_sent = self.high_sent.saturating_add(bytes as u64);
                }
                Some(vl)
            }
            None => {
                self.high_sent = 0;
                self.next_low_vl()
            }
        }
    }

    fn high_limit_reached(&self) -> bool {
        let limit = u64::from(self.high_limit) * 4096;
        self.high_limit != HIGH_LIMIT_UNBOUNDED && self.high_sent >= limit.max(1)
    }

    fn next_low_vl(&mut self) -> Option<u8> {
        let (low, queues, credits) = (&mut self.low, &self.queues, &self.credits);
        low.next(|vl| head(queues, credits, vl)).map(|e| e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(vl: u8, n: u8) -> Queued {
        Queued {
            packet: vec![vl << 4, n],
            vl,
            tag: None,
        }
    }

    #[test]
    fn vl15_first_then_weighted_turns() {
        let mut weights = [1; 15];
        weights[0] = 3;
        let mut v = VlQueues::new(Some(&FlowControl {
            weights,
            ..FlowControl::default()
        }));
        for n in 0..8 {
            v.push(q(0, n));
            v.push(q(1, n));
        }
        assert!(v.stalled(), "no credits yet");
        assert_eq!(v.pop(), None);
        v.push(q(15, 0));
        v.add_credits(&[100; NUM_VLS]);
        let order: Vec<u8> = std::iter::from_fn(|| v.pop()).map(|q| q.vl).collect();
        assert_eq!(order, [15, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 1, 1, 1, 1]);
    }

    #[test]
    fn a_vl_without_credit_stalls_alone() {
        let mut v = VlQueues::new(Some(&FlowControl::default()));
        let mut grants = [0; NUM_VLS];
        grants[1] = 2;
        v.add_credits(&grants);
        for n in 0..3 {
            v.push(q(0, n));
            v.push(q(1, n));
        }
        assert_eq!(v.pop().map(|q| (q.vl, q.packet[1])), Some((1, 0)));
        assert_eq!(v.pop().map(|q| (q.vl, q.packet[1])), Some((1, 1)));
        assert_eq!(v.pop(), None);
        assert!(v.stalled());
        assert_eq!(v.credits()[1], 0);
    }

    #[test]
    fn vl15_needs_no_credits() {
        let mut v = VlQueues::new(Some(&FlowControl::default()));
        for n in 0..3 {
            v.push(q(0, n));
            v.push(q(15, n));
        }
        let got: Vec<(u8, u8)> = std::iter::from_fn(|| v.pop())
            .map(|q| (q.vl, q.packet[1]))
            .collect();
        assert_eq!(got, [(15, 0), (15, 1), (15, 2)], "VL0 waits for credits");
        assert!(v.stalled());
        assert!(v.take_credit(VL15));
        assert!(!v.take_credit(0));
    }

    #[test]
    fn without_flow_control_everything_goes_in_order() {
        let mut v = VlQueues::new(None);
        for n in 0..4 {
            v.push(q(3 * (n % 2) + 12 * (n / 3), n));
        }
        let got: Vec<u8> = std::iter::from_fn(|| v.pop())
            .map(|q| q.packet[1])
            .collect();
        assert_eq!(got, [0, 1, 2, 3]);
        assert!(!v.stalled());
    }

    fn sized(vl: u8, n: u8, len: usize) -> Queued {
        let mut packet = vec![0; len];
        packet[0] = vl << 4;
        packet[1] = n;
        Queued {
            packet,
            vl,
            tag: None,
        }
    }

    /// Arbitration by `entries` in the high table, every other data VL
    /// weight 1 in the low one.
    fn high(entries: &[(u8, u8)], limit: u8) -> VlQueues {
        let mut weights = [1; 15];
        for (vl, _) in entries {
            weights[usize::from(*vl)] = 0;
        }
        let mut v = VlQueues::new(Some(&FlowControl {
            weights,
            ..FlowControl::default()
        }));
        v.set_high_priority(&HighPriority {
            entries: entries.to_vec(),
            limit,
        });
        v.add_credits(&[1000; NUM_VLS]);
        v
    }

    fn drain(v: &mut VlQueues) -> Vec<(u8, u8)> {
        std::iter::from_fn(|| v.pop())
            .map(|q| (q.vl, q.packet[1]))
            .collect()
    }

    #[test]
    fn high_priority_vls_go_first_and_vl15_before_them() {
        let mut v = high(&[(2, 255)], HIGH_LIMIT_UNBOUNDED);
        for n in 0..3 {
            v.push(sized(0, n, 256));
            v.push(sized(2, n, 256));
        }
        v.push(sized(15, 9, 256));
        assert_eq!(
            drain(&mut v),
            [(15, 9), (2, 0), (2, 1), (2, 2), (0, 0), (0, 1), (0, 2)]
        );
    }

    #[test]
    fn past_the_high_limit_one_low_packet_goes() {
        // Limit 1: 4 KiB of high-priority bytes while VL0 waits, then one
        // VL0 packet; 1 KiB packets: four high, one low.
        let mut v = high(&[(1, 255)], 1);
        for n in 0..10 {
            v.push(sized(1, n, 1024));
        }
        for n in 0..3 {
            v.push(sized(0, n, 1024));
        }
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).collect();
        assert_eq!(order, [1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0]);
    }

    #[test]
    fn high_limit_zero_lets_a_low_packet_through_after_each_high_one() {
        let mut v = high(&[(1, 255)], 0);
        for n in 0..3 {
            v.push(sized(1, n, 64));
            v.push(sized(0, n, 64));
        }
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).collect();
        assert_eq!(order, [1, 0, 1, 0, 1, 0]);
    }

    #[test]
    fn high_entries_share_by_weight_in_64_byte_units() {
        // VL1 weight 4 = 256 bytes: two 128-byte packets a turn; VL2
        // weight 2: one; a weight 0 entry (VL3) is skipped.
        let mut v = high(&[(1, 4), (3, 0), (2, 2)], HIGH_LIMIT_UNBOUNDED);
        for n in 0..6 {
            v.push(sized(1, n, 128));
            v.push(sized(2, n, 128));
            v.push(sized(3, n, 128));
        }
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).take(9).collect();
        assert_eq!(order, [1, 1, 2, 1, 1, 2, 1, 1, 2]);
        // A packet goes while any weight is left: a 1 KiB packet on a
        // weight 1 entry ends its turn.
        let mut v = high(&[(1, 1), (2, 1)], HIGH_LIMIT_UNBOUNDED);
        for n in 0..2 {
            v.push(sized(1, n, 1024));
            v.push(sized(2, n, 1024));
        }
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).collect();
        assert_eq!(order, [1, 2, 1, 2]);
    }

    #[test]
    fn low_weights_still_apply_beside_the_high_table() {
        // VL3 only in the high table: VLs 0 and 1 share the low side 3:1
        // once VL3 is drained; the low side is not in the high table's
        // way (VL3 has nothing left).
        let mut weights = [1; 15];
        weights[0] = 3;
        weights[3] = 0;
        let mut v = VlQueues::new(Some(&FlowControl {
            weights,
            ..FlowControl::default()
        }));
        v.set_high_priority(&HighPriority {
            entries: vec![(3, 10)],
            limit: HIGH_LIMIT_UNBOUNDED,
        });
        v.add_credits(&[100; NUM_VLS]);
        for n in 0..8 {
            v.push(sized(0, n, 64));
            v.push(sized(1, n, 64));
        }
        v.push(sized(3, 0, 64));
        v.push(sized(3, 1, 64));
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).take(10).collect();
        assert_eq!(order, [3, 3, 0, 0, 0, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn an_empty_high_table_keeps_the_low_only_order() {
        let mut weights = [1; 15];
        weights[0] = 3;
        let flow = FlowControl {
            weights,
            ..FlowControl::default()
        };
        let mut plain = VlQueues::new(Some(&flow));
        let mut emptied = VlQueues::new(Some(&flow));
        emptied.set_high_priority(&HighPriority {
            entries: vec![(1, 0), (15, 255)],
            limit: 0,
        });
        for v in [&mut plain, &mut emptied] {
            v.add_credits(&[100; NUM_VLS]);
            for n in 0..8 {
                v.push(q(0, n));
                v.push(q(1, n));
            }
        }
        let want = drain(&mut plain);
        assert_eq!(want.len(), 16);
        assert_eq!(drain(&mut emptied), want);
    }

    #[test]
    fn a_high_vl_without_credit_lets_the_low_side_go() {
        let mut v = VlQueues::new(Some(&FlowControl::default()));
        v.set_high_priority(&HighPriority {
            entries: vec![(1, 255)],
            limit: HIGH_LIMIT_UNBOUNDED,
        });
        let mut grants = [0; NUM_VLS];
        grants[0] = 5;
        v.add_credits(&grants);
        v.push(sized(1, 0, 64));
        v.push(sized(0, 0, 64));
        assert_eq!(v.pop().map(|q| q.vl), Some(0));
        assert_eq!(v.pop(), None);
        assert!(v.stalled());
    }

    #[test]
    fn packets_on_a_vl_no_table_serves_wait_without_being_sendable() {
        let mut weights = [1; 15];
        weights[2] = 0;
        let mut v = VlQueues::new(Some(&FlowControl {
            weights,
            ..FlowControl::default()
        }));
        v.add_credits(&[10; NUM_VLS]);
        v.push(q(2, 0));
        assert!(!v.sendable(), "weight 0: never served");
        assert!(v.stalled());
        assert_eq!(v.pop(), None);
        v.set_high_priority(&HighPriority {
            entries: vec![(2, 1)],
            limit: 0,
        });
        assert!(v.sendable(), "in the high-priority table");
        assert_eq!(v.pop().map(|q| q.vl), Some(2));
    }

    #[test]
    fn the_low_table_serves_bytes_in_table_order_and_skips_what_cannot_go() {
        let mut v = VlQueues::new(Some(&FlowControl::default()));
        // VL0 512 bytes a turn, VL1 128, VL2 256; VL3 in no entry.
        v.set_low_priority(&[(0, 8), (1, 2), (3, 0), (2, 4)]);
        let mut grants = [0; NUM_VLS];
        grants[0] = 100;
        grants[1] = 100;
        grants[3] = 100;
        v.add_credits(&grants);
        for n in 0..4 {
            v.push(sized(0, n, 256));
            v.push(sized(1, n, 64));
            v.push(sized(2, n, 64));
            v.push(sized(3, n, 64));
        }
        // VL2 has no credit: its entry passes; VL3 is never served.
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).collect();
        assert_eq!(order, [0, 0, 1, 1, 0, 0, 1, 1]);
        assert!(v.stalled());
        let mut grants = [0; NUM_VLS];
        grants[2] = 3;
        v.add_credits(&grants);
        let order: Vec<u8> = drain(&mut v).iter().map(|e| e.0).collect();
        assert_eq!(order, [2, 2, 2], "three credits; VL3 still waits");
        assert_eq!(v.len(), 5);
    }
}
