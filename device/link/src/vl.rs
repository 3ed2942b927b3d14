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
//! - **Arbitration**: VL15 is served first; data VLs 0–14 take turns, each
//!   sending up to its weight in packets per turn.
//! - A device frees a buffer when its engine is done with the packet (drops
//!   its batch, [`FlowControl::auto_return`]); a switch frees it when the packet has
//!   left through the output port, so a congested output pushes back to the
//!   inputs instead of dropping.

use std::collections::VecDeque;

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
    /// Packets per arbitration turn of data VLs 0–14 (0: never served).
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
    weights: [u8; 15],
    /// Data VL whose turn it is, and packets left in its turn.
    turn: u8,
    left: u8,
}

impl VlQueues {
    pub fn new(flow: Option<&FlowControl>) -> Self {
        let weights = flow.map_or([1; 15], |f| f.weights);
        VlQueues {
            queues: Default::default(),
            len: 0,
            credits: flow.map(|_| [0; NUM_VLS]),
            weights,
            turn: 0,
            left: weights[0],
        }
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

    /// Replaces the data VLs' weights (the arbiter keeps its place).
    pub fn set_weights(&mut self, weights: [u8; 15]) {
        self.weights = weights;
        let turn = self
            .weights
            .get(usize::from(self.turn))
            .copied()
            .unwrap_or(0);
        self.left = self.left.min(turn);
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
        let i = usize::from(vl);
        let queued = self.queues.get(i).is_some_and(|q| !q.is_empty());
        queued
            && (vl == VL15
                || self
                    .credits
                    .as_ref()
                    .is_none_or(|c| c.get(i).is_some_and(|n| *n > 0)))
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
            Some(_) => (0..NUM_VLS as u8).any(|vl| self.eligible(vl)),
        }
    }

    /// The next packet by arbitration: VL15 first, then the data VLs by
    /// weighted round robin; consumes one credit (none for VL15).
    pub fn pop(&mut self) -> Option<Queued> {
        let vl = if self.eligible(VL15) {
            VL15
        } else {
            self.next_data_vl()?
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

    fn next_data_vl(&mut self) -> Option<u8> {
        let (mut turn, mut left) = (self.turn, self.left);
        // At most one full round (plus the rest of the current turn); the
        // arbiter keeps its place when nothing may send.
        for _ in 0..=15 {
            if left > 0 && self.eligible(turn) {
                self.turn = turn;
                self.left = left - 1;
                return Some(turn);
            }
            turn = (turn + 1) % 15;
            left = self.weights.get(usize::from(turn)).copied().unwrap_or(0);
        }
        None
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
}
