//! The key memory of seed 001: for every QP, its PD and up to
//! [`KEY_SLOTS`] R_Keys of the remote operations in flight at its
//! responder, each with a Valid bit.
//!
//! The responder records a slot when a request that presents an R_Key starts
//! and releases it when the request is done; between packets it asks
//! [`KeyMemory::still_valid`]. Invalidating or moving a memory window runs
//! the seed's walk ([`KeyMemory::invalidate_walk`]): for each QP, skip it if
//! its PD differs from the window's, else clear Valid on every slot holding
//! the window's key. An operation whose slot was cleared fails with a bad
//! key, and the window's old key fails everywhere afterwards because the
//! bind or invalidate changed the window itself (see `mr.rs`).

use std::collections::BTreeMap;

/// Outstanding remote keys per QP (seed 001: 3 RDMA READs + 1 WRITE).
pub const KEY_SLOTS: usize = 4;

#[derive(Debug, Clone, Copy, Default)]
struct KeySlot {
    rkey: u32,
    valid: bool,
    busy: bool,
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
}

impl KeyMemory {
    /// An empty key memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that QP `qpn` (in PD `pd`) started a remote operation through
    /// `rkey`; returns the slot, or `None` when all slots are busy (the
    /// responder must not start the operation).
    pub fn acquire(&mut self, qpn: u32, pd: u32, rkey: u32) -> Option<usize> {
        let q = self.qps.entry(qpn).or_default();
        if q.slots.iter().all(|s| !s.busy) {
            q.pd = pd;
        }
        if q.pd != pd {
            crate::guest_warn!(
                qpn,
                pd,
                old = q.pd,
                "key memory: QP changed PD with keys in flight"
            );
            return None;
        }
        let (i, slot) = q.slots.iter_mut().enumerate().find(|(_, s)| !s.busy)?;
        *slot = KeySlot {
            rkey,
            valid: true,
            busy: true,
        };
        Some(i)
    }

    /// True while `slot` of `qpn` is held and its key has not been
    /// invalidated.
    pub fn still_valid(&self, qpn: u32, slot: usize) -> bool {
        self.qps
            .get(&qpn)
            .and_then(|q| q.slots.get(slot))
            .is_some_and(|s| s.busy && s.valid)
    }

    /// Frees `slot` of `qpn` (the operation finished or failed).
    pub fn release(&mut self, qpn: u32, slot: usize) {
        if let Some(s) = self.qps.get_mut(&qpn).and_then(|q| q.slots.get_mut(slot)) {
            *s = KeySlot::default();
        }
    }

    /// Forgets a QP (destroyed or reset).
    pub fn remove_qp(&mut self, qpn: u32) {
        self.qps.remove(&qpn);
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
        let a0 = km.acquire(100, pd_a, key).unwrap();
        let a1 = km.acquire(100, pd_a, 0x9999_0001).unwrap();
        let a2 = km.acquire(101, pd_a, key).unwrap();
        let b0 = km.acquire(200, pd_b, key).unwrap();
        assert_eq!(km.invalidate_walk(pd_a, key), 2);
        assert!(!km.still_valid(100, a0), "same PD, same key: cleared");
        assert!(!km.still_valid(101, a2));
        assert!(km.still_valid(100, a1), "other key untouched");
        assert!(km.still_valid(200, b0), "other PD untouched");
        assert_eq!(km.invalidate_walk(pd_a, key), 0, "already cleared");
        assert_eq!(km.walks(), 2);
    }

    #[test]
    fn four_slots_then_release() {
        let mut km = KeyMemory::new();
        let slots: Vec<_> = (0..4).map(|k| km.acquire(1, 3, k).unwrap()).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        assert_eq!(km.acquire(1, 3, 9), None, "all four busy");
        km.release(1, 2);
        assert!(!km.still_valid(1, 2));
        assert_eq!(km.acquire(1, 3, 9), Some(2));
        assert_eq!(km.acquire(1, 4, 9), None, "PD differs while keys in flight");
        km.release(1, 99);
        assert!(!km.still_valid(1, 99));
        assert!(!km.still_valid(77, 0));
        km.remove_qp(1);
        assert!(!km.still_valid(1, 0));
    }
}
