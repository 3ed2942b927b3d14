//! Fault injection on the send side, before the queue: for tests of the IB
//! transport's loss, duplicate and reorder handling.
//!
//! Packets are numbered by [`super::Link::send`] call, from 0 for the first
//! call after [`super::Link::set_faults`]. Faults are applied in this order:
//! drop (nothing else happens to a dropped packet), corrupt, then reorder
//! (hold the packet back until the next `send`, which goes out first), then
//! duplicate (the copy follows the original at once). A held packet is sent
//! after the next packet even if that one is dropped, and is released when
//! the plan is replaced; with no further `send` it stays held. A packet both
//! swapped and duplicated goes out once before its successor and once after.

use std::collections::{BTreeMap, BTreeSet};

use super::stats::{bump, Counters};

/// What to do to sent packets. The default plan does nothing.
///
/// ```
/// use ibtca_link::FaultPlan;
/// let plan = FaultPlan::default().drop(3).duplicate(5).swap_with_next(7).corrupt(10, 0);
/// assert!(!plan.is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Sequence numbers of packets to drop.
    pub drop: BTreeSet<u64>,
    /// Sequence numbers of packets to send twice.
    pub duplicate: BTreeSet<u64>,
    /// Sequence numbers of packets to send after the packet that follows them.
    pub swap_with_next: BTreeSet<u64>,
    /// Sequence number → offset of the byte to invert (taken modulo the
    /// packet length; an empty packet is left alone).
    pub corrupt: BTreeMap<u64, usize>,
    /// Random faults, on top of the ones above.
    pub rates: FaultRates,
}

/// Random fault rates in per-mille (0 = never, 1000 = always), drawn from a
/// xorshift generator seeded with `seed`, so a run can be repeated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultRates {
    /// Chance of dropping a packet.
    pub drop: u16,
    /// Chance of sending a packet twice.
    pub duplicate: u16,
    /// Chance of swapping a packet with the next one.
    pub reorder: u16,
    /// Chance of inverting one byte at a random offset.
    pub corrupt: u16,
    /// Generator seed.
    pub seed: u64,
}

impl FaultPlan {
    /// Drops packet `seq`.
    pub fn drop(mut self, seq: u64) -> Self {
        self.drop.insert(seq);
        self
    }

    /// Sends packet `seq` twice.
    pub fn duplicate(mut self, seq: u64) -> Self {
        self.duplicate.insert(seq);
        self
    }

    /// Sends packet `seq` after packet `seq + 1`.
    pub fn swap_with_next(mut self, seq: u64) -> Self {
        self.swap_with_next.insert(seq);
        self
    }

    /// Inverts the byte at `offset` of packet `seq` (at offset 0 only its
    /// low nibble: the high one is the VL the link counts credits on).
    pub fn corrupt(mut self, seq: u64, offset: usize) -> Self {
        self.corrupt.insert(seq, offset);
        self
    }

    /// Sets the random fault rates.
    pub fn with_rates(mut self, rates: FaultRates) -> Self {
        self.rates = rates;
        self
    }

    /// True if the plan injects nothing.
    pub fn is_empty(&self) -> bool {
        let r = self.rates;
        self.drop.is_empty()
            && self.duplicate.is_empty()
            && self.swap_with_next.is_empty()
            && self.corrupt.is_empty()
            && r.drop == 0
            && r.duplicate == 0
            && r.reorder == 0
            && r.corrupt == 0
    }
}

/// xorshift64* (Vigna): small, fast, good enough for fault dice.
#[derive(Debug, Clone)]
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // The state must never be zero.
        XorShift(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// True with probability `per_mille / 1000`.
    fn roll(&mut self, per_mille: u16) -> bool {
        per_mille > 0 && self.next() % 1000 < u64::from(per_mille)
    }
}

/// What the injector works on: bytes to corrupt and a way to copy.
pub(super) trait FaultItem: Sized {
    /// The packet's bytes.
    fn bytes_mut(&mut self) -> &mut [u8];
    /// A duplicate to send as well (untagged: the original carries any
    /// owner's tag).
    fn copy(&self) -> Self;
}

impl FaultItem for Vec<u8> {
    fn bytes_mut(&mut self) -> &mut [u8] {
        self
    }

    fn copy(&self) -> Self {
        self.clone()
    }
}

impl FaultItem for super::vl::Queued {
    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.packet
    }

    fn copy(&self) -> Self {
        super::vl::Queued {
            packet: self.packet.clone(),
            vl: self.vl,
            tag: None,
        }
    }
}

/// A plan being applied: the plan, the next sequence number, the generator
/// and the packet held back for a swap.
#[derive(Debug)]
pub(super) struct FaultInjector<T = Vec<u8>> {
    plan: FaultPlan,
    seq: u64,
    rng: XorShift,
    held: Option<T>,
}

impl<T: FaultItem> FaultInjector<T> {
    pub fn new(plan: FaultPlan) -> Self {
        let rng = XorShift::new(plan.rates.seed);
        FaultInjector {
            plan,
            seq: 0,
            rng,
            held: None,
        }
    }

    /// The packet held back for a swap, if any.
    pub fn take_held(&mut self) -> Option<T> {
        self.held.take()
    }

    /// Applies the plan to the next packet; passes what is to be sent, in
    /// order, to `emit`. Returns the packet if it was dropped.
    pub fn apply(
        &mut self,
        mut packet: T,
        counters: &Counters,
        mut emit: impl FnMut(T),
    ) -> Option<T> {
        let seq = self.seq;
        self.seq += 1;
        let rates = self.plan.rates;
        let released = self.held.take();
        let mut dropped = None;
        if self.plan.drop.contains(&seq) || self.rng.roll(rates.drop) {
            bump(&counters.fault_dropped);
            dropped = Some(packet);
        } else {
            let offset = match self.plan.corrupt.get(&seq) {
                Some(&offset) => Some(offset),
                None if self.rng.roll(rates.corrupt) => {
                    Some(usize::try_from(self.rng.next()).unwrap_or(0))
                }
                None => None,
            };
            if let Some(offset) = offset {
                let bytes = packet.bytes_mut();
                if let Some(byte) = offset.checked_rem(bytes.len()) {
                    if let Some(b) = bytes.get_mut(byte) {
                        // The first byte's high nibble is the LRH's VL, on
                        // which both ends of the link count credits: the
                        // sender charged it before this corruption, so a
                        // receiver reading another VL would return the
                        // credit there and the sender's VL would lose it
                        // for good (seen in the soak: after ~10 minutes at
                        // 1 % corrupt a switch's VL0 credits ran out and it
                        // stopped forwarding). Only the LVer nibble flips
                        // there; the packet still fails its CRCs.
                        *b ^= if byte == 0 { 0x0f } else { 0xff };
                        bump(&counters.fault_corrupted);
                    }
                }
            }
            let dup = self.plan.duplicate.contains(&seq) || self.rng.roll(rates.duplicate);
            let copy = dup.then(|| packet.copy());
            let swap = self.plan.swap_with_next.contains(&seq) || self.rng.roll(rates.reorder);
            if swap && released.is_none() {
                bump(&counters.fault_reordered);
                self.held = Some(packet);
            } else {
                emit(packet);
            }
            if let Some(copy) = copy {
                bump(&counters.fault_duplicated);
                emit(copy);
            }
        }
        if let Some(held) = released {
            emit(held);
        }
        dropped
    }
}
