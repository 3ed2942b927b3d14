//! The key memory of seed 001: for every QP, its PD and [`KEY_SLOTS`]
//! R_Keys of the remote operations in flight at its responder, each with a
//! Valid bit: slots 0-15 for RDMA READs and atomics ([`KeyUse::Read`]),
//! slot 16 for an RDMA WRITE of several packets ([`KeyUse::Write`]). The
//! seed's memory holds 3 READ slots and 1 WRITE slot per QP; here there
//! are 16 READ slots, the responder resources real HCAs offer (an SRP
//! target asks 4 of them per QP).
//!
//! The responder takes a slot when a request that presents an R_Key starts
//! (a READ when it is queued, a WRITE at its first packet), after checking
//! the key fully once (region or window, PD, rights, bounds), and keeps in
//! the slot what that check found: the region and the range of it the
//! operation may reach ([`RemoteTarget`]). Later packets of the operation
//! look no key up: [`KeyMemory::target`] gives their part of the checked
//! range while the slot is Valid. The slot is released with the
//! operation's last packet.
//!
//! Every invalidation (a window bound elsewhere or destroyed, LOCAL_INV,
//! SEND with Invalidate, deregistration, fast re-registration) runs the
//! seed's walk ([`KeyMemory::invalidate_walk`]): for each QP, skip it if
//! its PD differs, else clear Valid on every slot holding the key. The walk
//! is what stops an operation in flight: its slot still names the region
//! the key reached when it started, so nothing else would. An operation
//! whose slot was cleared stops with NAK remote access error. The walk's
//! state is in BAR0 ([`RkmRegs`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::remote_target::RemoteTarget;
use crate::rkm_regs::RkmRegs;

/// Outstanding remote keys per QP: [`READ_SLOTS`] READs and one WRITE (seed
/// 001 has 3 + 1).
pub const KEY_SLOTS: usize = READ_SLOTS + 1;

/// Slots for READs and atomics (0 to 15); the device's responder resources
/// (max_qp_rd_atom) are as many.
pub const READ_SLOTS: usize = 16;

/// The slot of an RDMA WRITE, after the READ slots.
pub const WRITE_SLOT: usize = READ_SLOTS;

/// What an operation holds a key for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// An RDMA READ or an atomic (slots 0 to [`READ_SLOTS`] - 1).
    Read,
    /// An RDMA WRITE ([`WRITE_SLOT`]).
    Write,
}

#[derive(Debug, Clone, Copy, Default)]
struct KeySlot {
    rkey: u32,
    valid: bool,
    busy: bool,
    /// What the key's check found when the operation started (`None`: the
    /// holder checks the key itself, e.g. an atomic's one packet).
    target: Option<RemoteTarget>,
}

#[derive(Debug, Clone, Copy, Default)]
struct QpKeys {
    pd: u32,
    slots: [KeySlot; KEY_SLOTS],
}

/// Per-QP outstanding remote keys and the invalidation walk.
#[derive(Debug, Default)]
pub struct KeyMemory {
    qps: BTreeMap<u32, QpKeys>,
    walks: u64,
    regs: Arc<RkmRegs>,
}

impl KeyMemory {
    /// An empty key memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports walks in `regs` (the device's BAR0) from now on.
    pub fn use_regs(&mut self, regs: Arc<RkmRegs>) {
        self.regs = regs;
    }

    /// The registers this key memory reports in.
    pub fn regs(&self) -> &Arc<RkmRegs> {
        &self.regs
    }

    /// Records that QP `qpn` (in PD `pd`) started a remote operation through
    /// `rkey`; returns the slot, or `None` when every slot for `use_` is
    /// busy (the responder must not start the operation).
    pub fn acquire(&mut self, qpn: u32, pd: u32, rkey: u32, use_: KeyUse) -> Option<usize> {
        self.acquire_checked(qpn, pd, rkey, use_, None)
    }

    /// [`Self::acquire`], keeping `target`, what the full check of `rkey`
    /// found, for the operation's later packets ([`Self::target`]).
    pub fn acquire_checked(
        &mut self,
        qpn: u32,
        pd: u32,
        rkey: u32,
        use_: KeyUse,
        target: Option<RemoteTarget>,
    ) -> Option<usize> {
        let q = self.qps.entry(qpn).or_default();
        if q.slots.iter().all(|s| !s.busy) {
            q.pd = pd;
        }
        if q.pd != pd {
            ibtca_log::guest_warn!(
                qpn,
                pd,
                old = q.pd,
                "key memory: QP changed PD with keys in flight"
            );
            return None;
        }
        let range = match use_ {
            KeyUse::Read => 0..READ_SLOTS,
            KeyUse::Write => WRITE_SLOT..WRITE_SLOT + 1,
        };
        let i = range.clone().find(|&i| !q.slots[i].busy)?;
        q.slots[i] = KeySlot {
            rkey,
            valid: true,
            busy: true,
            target,
        };
        Some(i)
    }

    /// What the full check found when the operation holding `slot` of
    /// `qpn` started, while the slot is Valid: only the Valid bit is
    /// checked here (the caller takes its packet's part, [`RemoteTarget::part`]).
    /// `None` once the walk cleared the slot, for a slot not held, or one
    /// held without a target.
    pub fn target(&self, qpn: u32, slot: usize) -> Option<RemoteTarget> {
        self.qps
            .get(&qpn)
            .and_then(|q| q.slots.get(slot))
            .filter(|s| s.busy && s.valid)
            .and_then(|s| s.target)
    }

    /// True while `slot` of `qpn` is held and its key has not been
    /// invalidated.
    pub fn still_valid(&self, qpn: u32, slot: usize) -> bool {
        self.qps
            .get(&qpn)
            .and_then(|q| q.slots.get(slot))
            .is_some_and(|s| s.busy && s.valid)
    }

    /// Slots of `qpn` held now (tests, and the bound of [`KEY_SLOTS`]).
    pub fn held(&self, qpn: u32) -> usize {
        self.qps
            .get(&qpn)
            .map_or(0, |q| q.slots.iter().filter(|s| s.busy).count())
    }

    /// Frees `slot` of `qpn` (the operation finished or failed).
    pub fn release(&mut self, qpn: u32, slot: usize) {
        if let Some(s) = self.qps.get_mut(&qpn).and_then(|q| q.slots.get_mut(slot)) {
            if s.busy && !s.valid {
                self.regs.stopped();
            }
            *s = KeySlot::default();
        }
    }

    /// Forgets a QP (destroyed or reset).
    pub fn remove_qp(&mut self, qpn: u32) {
        if let Some(q) = self.qps.remove(&qpn) {
            for _ in q.slots.iter().filter(|s| s.busy && !s.valid) {
                self.regs.stopped();
            }
        }
    }

    /// The seed's walk: clears Valid on every held slot of a QP in `pd`
    /// whose key is `rkey`; returns how many it cleared.
    pub fn invalidate_walk(&mut self, pd: u32, rkey: u32) -> usize {
        self.walks += 1;
        let mut cleared = 0;
        for q in self.qps.values_mut().filter(|q| q.pd == pd) {
            for s in q.slots.iter_mut() {
                if s.busy && s.valid && s.rkey == rkey {
                    s.valid = false;
                    cleared += 1;
                }
            }
        }
        self.regs.walked(cleared as u32);
        if cleared > 0 {
            tracing::debug!(pd, rkey, cleared, "key memory walk cleared in-flight keys");
        }
        cleared
    }

    /// Number of walks run so far.
    pub fn walks(&self) -> u64 {
        self.walks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walk_clears_same_pd_slots_only() {
        let mut km = KeyMemory::new();
        let (pd_a, pd_b, key) = (7, 9, 0x1234_5601);
        let a0 = km.acquire(100, pd_a, key, KeyUse::Read).unwrap();
        let a1 = km.acquire(100, pd_a, 0x9999_0001, KeyUse::Read).unwrap();
        let a2 = km.acquire(101, pd_a, key, KeyUse::Write).unwrap();
        let b0 = km.acquire(200, pd_b, key, KeyUse::Read).unwrap();
        assert_eq!(km.invalidate_walk(pd_a, key), 2);
        assert!(!km.still_valid(100, a0), "same PD, same key: cleared");
        assert!(!km.still_valid(101, a2));
        assert!(km.still_valid(100, a1), "other key untouched");
        assert!(km.still_valid(200, b0), "other PD untouched");
        assert_eq!(km.invalidate_walk(pd_a, key), 0, "already cleared");
        assert_eq!(km.walks(), 2);
    }

    #[test]
    fn sixteen_read_slots_one_write_slot_then_release() {
        let mut km = KeyMemory::new();
        let reads: Vec<_> = (0..16)
            .map(|k| km.acquire(1, 3, k, KeyUse::Read).unwrap())
            .collect();
        assert_eq!(reads, (0..16).collect::<Vec<_>>());
        assert_eq!(km.acquire(1, 3, 99, KeyUse::Read), None, "16 READs busy");
        assert_eq!(km.acquire(1, 3, 99, KeyUse::Write), Some(16));
        assert_eq!(km.acquire(1, 3, 98, KeyUse::Write), None, "one WRITE");
        assert_eq!(km.held(1), 17);
        km.release(1, 2);
        assert!(!km.still_valid(1, 2));
        assert_eq!(km.acquire(1, 3, 99, KeyUse::Read), Some(2));
        assert_eq!(
            km.acquire(1, 4, 9, KeyUse::Read),
            None,
            "PD differs while keys in flight"
        );
        km.release(1, 99);
        assert!(!km.still_valid(1, 99));
        assert!(!km.still_valid(77, 0));
        km.remove_qp(1);
        assert!(!km.still_valid(1, 0));
        assert_eq!(km.held(1), 0);
    }

    #[test]
    fn a_slot_keeps_its_checked_range_until_the_walk() {
        let mut km = KeyMemory::new();
        let t = RemoteTarget::mock(0x100, 0x40);
        let s = km
            .acquire_checked(1, 3, 0x55, KeyUse::Write, Some(t))
            .unwrap();
        let kept = km.target(1, s).expect("held and Valid");
        assert_eq!(kept.part(0x10, 0x30), Some(RemoteTarget::mock(0x110, 0x30)));
        assert_eq!(kept.part(0x10, 0x31), None, "past the checked range");
        assert_eq!(kept.part(u64::MAX, 2), None);
        assert_eq!(km.target(2, s), None, "other QP");
        assert_eq!(km.invalidate_walk(3, 0x55), 1);
        assert_eq!(km.target(1, s), None, "cleared by the walk");
        let r = km.acquire(1, 3, 0x56, KeyUse::Read).unwrap();
        assert_eq!(km.target(1, r), None, "held without a target");
    }

    #[test]
    fn registers_follow_walks_and_stopped_operations() {
        let mut km = KeyMemory::new();
        let regs = km.regs().clone();
        assert_eq!((regs.status(), regs.walks(), regs.cleared()), (0, 0, 0));
        let r = km.acquire(5, 1, 0x77, KeyUse::Read).unwrap();
        let w = km.acquire(5, 1, 0x77, KeyUse::Write).unwrap();
        assert_eq!(km.invalidate_walk(1, 0x77), 2);
        assert_eq!((regs.walks(), regs.cleared()), (1, 2));
        assert_eq!(regs.status(), ibtca_abi::regs::RKM_STATUS_BUSY);
        km.release(5, r);
        assert_eq!(
            regs.status(),
            ibtca_abi::regs::RKM_STATUS_BUSY,
            "WRITE holds"
        );
        km.release(5, w);
        assert_eq!(regs.status(), ibtca_abi::regs::RKM_STATUS_DONE);
        assert_eq!(km.invalidate_walk(1, 0x77), 0);
        assert_eq!((regs.walks(), regs.cleared()), (2, 2));
        regs.reset();
        assert_eq!((regs.status(), regs.walks()), (0, 0));
    }
}
