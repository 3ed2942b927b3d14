//! Memory windows (seed 001): a window is allocated in a PD with a key but
//! no memory; binding points it at a sub-range of a region that allows
//! IBTCA_ACCESS_MW_BIND, with remote rights that are a subset of the
//! region's. Moving (re-binding) or invalidating a window runs the key
//! memory walk for its old key, so operations in flight through it fail, and
//! the old key stops resolving: a bind gives the window a new key (tag + 1,
//! as `ibv_inc_rkey`), an invalidate leaves it unbound. Type 1 windows
//! (ALLOC_MW_TYPE1) bind the same way but cannot be invalidated (LOCAL_INV
//! or SEND with Invalidate): only a re-bind or DEALLOC_MW ends a binding.

use super::keys::KeyMemory;
use super::mr::{make_key, offset_in, split_key, Binding, KeyObj, MrTable, Mw, ACCESS_REMOTE};
use super::VerbsError;
use crate::transport::AccessError;

/// What to bind a window to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindRequest {
    /// The window's current key.
    pub mw_rkey: u32,
    /// lkey of the region to bind to.
    pub lkey: u32,
    /// First address of the window, in the region's address space.
    pub va: u64,
    /// Length in bytes (at least 1).
    pub length: u64,
    /// IBTCA_ACCESS_REMOTE_* rights.
    pub access: u32,
}

impl MrTable {
    fn mw_index(&self, rkey: u32) -> Option<usize> {
        let (index, tag) = split_key(rkey)?;
        match &self.slots.get(index)?.obj {
            Some(KeyObj::Mw(mw)) if mw.tag == tag => Some(index),
            _ => None,
        }
    }

    fn mw_mut(&mut self, index: usize) -> Option<&mut Mw> {
        match &mut self.slots.get_mut(index)?.obj {
            Some(KeyObj::Mw(mw)) => Some(mw),
            _ => None,
        }
    }

    fn adjust_windows(&mut self, mr_slot: usize, bound: bool) {
        if let Some(KeyObj::Mr(mr)) = self.slots.get_mut(mr_slot).and_then(|s| s.obj.as_mut()) {
            mr.windows = if bound {
                mr.windows.saturating_add(1)
            } else {
                mr.windows.saturating_sub(1)
            };
        }
    }

    /// Drops the window's binding and clears in-flight uses of its key.
    fn unbind(&mut self, index: usize, keys: &mut KeyMemory) {
        let Some(mw) = self.mw_mut(index) else { return };
        let (pdn, key) = (mw.pdn, make_key(index, mw.tag));
        if let Some(b) = mw.binding.take() {
            self.adjust_windows(b.mr_slot, false);
            keys.invalidate_walk(pdn, key);
        }
    }

    /// Allocates an unbound window (of type 1 if `type1`, else type 2) in
    /// PD `pdn` and returns its key. The caller checks that the PD exists.
    pub fn alloc_mw(&mut self, pdn: u32, type1: bool) -> Result<u32, VerbsError> {
        let index = self.take_slot()?;
        let step = self.random_step(255);
        let slot = &mut self.slots[index];
        let tag = slot.last_tag.wrapping_add(step);
        slot.last_tag = tag;
        slot.obj = Some(KeyObj::Mw(Mw {
            pdn,
            tag,
            binding: None,
            type1,
        }));
        Ok(make_key(index, tag))
    }

    /// Frees the window whose key is `rkey` with any low byte (unbinding
    /// it first) and returns its PD. Any tag, since binds posted from user
    /// space move the key where the driver, which allocated the window with
    /// its first key, cannot follow; the command queue is the driver's
    /// alone.
    pub fn dealloc_mw(&mut self, rkey: u32, keys: &mut KeyMemory) -> Result<u32, VerbsError> {
        let (index, _) = split_key(rkey).ok_or(VerbsError::NotFound)?;
        if !matches!(
            self.slots.get(index).map(|s| &s.obj),
            Some(Some(KeyObj::Mw(_)))
        ) {
            return Err(VerbsError::NotFound);
        }
        self.unbind(index, keys);
        match self.free_slot(index) {
            Some(KeyObj::Mw(mw)) => Ok(mw.pdn),
            _ => Err(VerbsError::NotFound),
        }
    }

    /// Binds (or moves) a window for a QP in PD `pdn`; returns the window's
    /// new key. Nothing changes on error.
    pub fn bind_mw(
        &mut self,
        pdn: u32,
        req: BindRequest,
        keys: &mut KeyMemory,
    ) -> Result<u32, AccessError> {
        let index = self.mw_index(req.mw_rkey).ok_or(AccessError::BadKey)?;
        let (mr_slot, mr) = self.lookup_lkey(req.lkey).ok_or(AccessError::BadKey)?;
        let mw_pd = match &self.slots[index].obj {
            Some(KeyObj::Mw(mw)) => mw.pdn,
            _ => return Err(AccessError::BadKey),
        };
        if mw_pd != pdn || mr.pdn != pdn {
            return Err(AccessError::WrongPd);
        }
        if req.access & !ACCESS_REMOTE != 0 || req.length == 0 {
            return Err(AccessError::Invalid);
        }
        // Fast-registration regions never carry MW_BIND (see `fastreg.rs`).
        if mr.access & super::abi::ACCESS_MW_BIND == 0 || req.access & !mr.access != 0 {
            return Err(AccessError::NoRight);
        }
        offset_in(mr.iova, mr.length, req.va, req.length).ok_or(AccessError::OutOfBounds)?;
        self.unbind(index, keys);
        self.adjust_windows(mr_slot, true);
        let slot = &mut self.slots[index];
        let tag = slot.last_tag.wrapping_add(1);
        slot.last_tag = tag;
        if let Some(KeyObj::Mw(mw)) = &mut slot.obj {
            mw.tag = tag;
            mw.binding = Some(Binding {
                mr_slot,
                va: req.va,
                length: req.length,
                access: req.access,
            });
        }
        Ok(make_key(index, tag))
    }

    /// Invalidates the bound window whose key is `rkey` for a QP in PD
    /// `pdn` (LOCAL_INV): unbinds it and runs the key walk. `Invalid` for a
    /// region's key, an unbound window or a type 1 window.
    pub fn invalidate_mw(
        &mut self,
        pdn: u32,
        rkey: u32,
        keys: &mut KeyMemory,
    ) -> Result<(), AccessError> {
        let Some(index) = self.mw_index(rkey) else {
            let names_mr = split_key(rkey)
                .and_then(|(i, _)| self.slots.get(i))
                .is_some_and(|s| matches!(s.obj, Some(KeyObj::Mr(_))));
            return Err(if names_mr {
                AccessError::Invalid
            } else {
                AccessError::BadKey
            });
        };
        let mw = self.mw_mut(index).ok_or(AccessError::BadKey)?;
        if mw.pdn != pdn {
            return Err(AccessError::WrongPd);
        }
        if mw.binding.is_none() || mw.type1 {
            return Err(AccessError::Invalid);
        }
        self.unbind(index, keys);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::abi::{
        ACCESS_LOCAL_WRITE, ACCESS_MW_BIND, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
    };
    use super::super::mr::RemoteRight;
    use super::*;
    use crate::verbs::keys::KeyUse;

    const PD: u32 = 0x401;
    const OTHER_PD: u32 = 0x802;

    struct Fixture {
        t: MrTable,
        keys: KeyMemory,
        lkey: u32,
        mw: u32,
    }

    fn fixture() -> Fixture {
        let mut t = MrTable::new(16, 7);
        let acc = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_MW_BIND;
        let (lkey, _) = t.register(PD, acc, 0x10_0000, 0x1_0000, 0x20_0000).unwrap();
        let mw = t.alloc_mw(PD, false).unwrap();
        Fixture {
            t,
            keys: KeyMemory::new(),
            lkey,
            mw,
        }
    }

    fn req(f: &Fixture, va: u64, length: u64, access: u32) -> BindRequest {
        BindRequest {
            mw_rkey: f.mw,
            lkey: f.lkey,
            va,
            length,
            access,
        }
    }

    #[test]
    fn unbound_window_grants_nothing() {
        let f = fixture();
        assert_eq!(
            f.t.check_remote(PD, f.mw, 0x10_0000, 1, RemoteRight::Read),
            Err(AccessError::BadKey)
        );
    }

    #[test]
    fn bind_grants_exactly_the_sub_range_and_rights() {
        let mut f = fixture();
        let r = req(&f, 0x10_1000, 5, ACCESS_REMOTE_READ);
        let key = f.t.bind_mw(PD, r, &mut f.keys).unwrap();
        assert_ne!(key, f.mw, "bind changes the key");
        assert_eq!(key >> 8, f.mw >> 8);
        let chk = |va, len, right| f.t.check_remote(PD, key, va, len, right).map(|g| g[0].gpa);
        assert_eq!(chk(0x10_1000, 5, RemoteRight::Read), Ok(0x20_1000));
        assert_eq!(chk(0x10_1004, 1, RemoteRight::Read), Ok(0x20_1004));
        assert_eq!(
            chk(0x10_1004, 2, RemoteRight::Read),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            chk(0x10_0fff, 1, RemoteRight::Read),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            chk(0x10_1000, 1, RemoteRight::Write),
            Err(AccessError::NoRight)
        );
        assert_eq!(
            f.t.check_remote(OTHER_PD, key, 0x10_1000, 1, RemoteRight::Read),
            Err(AccessError::WrongPd)
        );
        assert_eq!(
            f.t.check_remote(PD, f.mw, 0x10_1000, 1, RemoteRight::Read),
            Err(AccessError::BadKey),
            "the pre-bind key is dead"
        );
    }

    #[test]
    fn bind_is_checked() {
        let mut f = fixture();
        let good = req(&f, 0x10_0000, 0x10, ACCESS_REMOTE_READ);
        let cases = [
            (
                PD,
                BindRequest {
                    mw_rkey: f.mw ^ 1,
                    ..good
                },
                AccessError::BadKey,
            ),
            (
                PD,
                BindRequest {
                    lkey: f.lkey | 1,
                    ..good
                },
                AccessError::BadKey,
            ),
            (OTHER_PD, good, AccessError::WrongPd),
            (
                PD,
                BindRequest {
                    access: ACCESS_LOCAL_WRITE,
                    ..good
                },
                AccessError::Invalid,
            ),
            (PD, BindRequest { length: 0, ..good }, AccessError::Invalid),
            (
                PD,
                BindRequest {
                    va: 0x10_fff8,
                    ..good
                },
                AccessError::OutOfBounds,
            ),
            (
                PD,
                BindRequest {
                    va: u64::MAX,
                    ..good
                },
                AccessError::OutOfBounds,
            ),
        ];
        for (pd, r, want) in cases {
            assert_eq!(f.t.bind_mw(pd, r, &mut f.keys), Err(want), "{r:?}");
        }
        // Rights beyond the region's, and regions without MW_BIND.
        let (ro, _) = f.t.register(PD, ACCESS_REMOTE_READ, 0, 0x100, 0).unwrap();
        let r = BindRequest { lkey: ro, ..good };
        assert_eq!(f.t.bind_mw(PD, r, &mut f.keys), Err(AccessError::NoRight));
        let (nb, _) =
            f.t.register(PD, ACCESS_MW_BIND | ACCESS_REMOTE_READ, 0x10_0000, 0x100, 0)
                .unwrap();
        let r = BindRequest {
            lkey: nb,
            access: ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE,
            ..good
        };
        assert_eq!(f.t.bind_mw(PD, r, &mut f.keys), Err(AccessError::NoRight));
        // A window of another PD cannot be bound to this PD's region.
        let other = f.t.alloc_mw(OTHER_PD, false).unwrap();
        let r = BindRequest {
            mw_rkey: other,
            ..good
        };
        assert_eq!(f.t.bind_mw(PD, r, &mut f.keys), Err(AccessError::WrongPd));
        // Nothing was bound by the failures.
        assert_eq!(f.t.deregister(f.lkey).map(|m| m.pdn), Ok(PD));
    }

    #[test]
    fn deregister_refused_while_bound() {
        let mut f = fixture();
        let r = req(&f, 0x10_0000, 0x10, ACCESS_REMOTE_READ);
        let key = f.t.bind_mw(PD, r, &mut f.keys).unwrap();
        assert_eq!(f.t.deregister(f.lkey), Err(VerbsError::Busy));
        f.t.invalidate_mw(PD, key, &mut f.keys).unwrap();
        f.t.deregister(f.lkey).unwrap();
    }

    #[test]
    fn invalidate_runs_the_walk_and_kills_the_key() {
        let mut f = fixture();
        let r = req(&f, 0x10_0000, 0x1_0000, ACCESS_REMOTE_WRITE);
        let key = f.t.bind_mw(PD, r, &mut f.keys).unwrap();
        // Two QPs of the window's PD and one of another PD have the key in
        // flight (the other PD's request would have failed its check, but
        // the walk must not touch it either way).
        let s1 = f.keys.acquire(10, PD, key, KeyUse::Read).unwrap();
        let s2 = f.keys.acquire(11, PD, key, KeyUse::Read).unwrap();
        let s3 = f.keys.acquire(12, OTHER_PD, key, KeyUse::Read).unwrap();
        let s4 = f.keys.acquire(10, PD, 0xabcd_0001, KeyUse::Read).unwrap();
        assert_eq!(
            f.t.invalidate_mw(OTHER_PD, key, &mut f.keys),
            Err(AccessError::WrongPd)
        );
        assert!(f.keys.still_valid(10, s1));
        f.t.invalidate_mw(PD, key, &mut f.keys).unwrap();
        assert!(!f.keys.still_valid(10, s1));
        assert!(!f.keys.still_valid(11, s2));
        assert!(f.keys.still_valid(12, s3), "other PD untouched");
        assert!(f.keys.still_valid(10, s4), "other key untouched");
        assert_eq!(
            f.t.check_remote(PD, key, 0x10_0000, 1, RemoteRight::Write),
            Err(AccessError::BadKey),
            "old key fails afterwards"
        );
        assert_eq!(
            f.t.invalidate_mw(PD, key, &mut f.keys),
            Err(AccessError::Invalid)
        );
        assert_eq!(
            f.t.invalidate_mw(PD, f.lkey, &mut f.keys),
            Err(AccessError::Invalid)
        );
        assert_eq!(
            f.t.invalidate_mw(PD, 0xdead_0000, &mut f.keys),
            Err(AccessError::BadKey)
        );
    }

    #[test]
    fn moving_a_window_runs_the_walk() {
        let mut f = fixture();
        let r = req(&f, 0x10_0000, 0x100, ACCESS_REMOTE_WRITE);
        let k1 = f.t.bind_mw(PD, r, &mut f.keys).unwrap();
        let slot = f.keys.acquire(5, PD, k1, KeyUse::Read).unwrap();
        let r2 = BindRequest {
            mw_rkey: k1,
            va: 0x10_8000,
            ..r
        };
        let k2 = f.t.bind_mw(PD, r2, &mut f.keys).unwrap();
        assert_ne!(k1, k2);
        assert!(!f.keys.still_valid(5, slot));
        assert_eq!(
            f.t.check_remote(PD, k1, 0x10_0000, 1, RemoteRight::Write),
            Err(AccessError::BadKey)
        );
        assert_eq!(
            f.t.check_remote(PD, k2, 0x10_8000, 1, RemoteRight::Write)
                .map(|g| g[0].gpa),
            Ok(0x20_8000)
        );
        assert_eq!(
            f.t.check_remote(PD, k2, 0x10_0000, 1, RemoteRight::Write),
            Err(AccessError::OutOfBounds)
        );
        // Dealloc while bound unbinds (walk) and frees the MR for dereg;
        // it takes the key the window was allocated with (the driver's),
        // which binds have moved on from.
        let s = f.keys.acquire(5, PD, k2, KeyUse::Read).unwrap();
        assert_eq!(f.t.dealloc_mw(k1, &mut f.keys), Ok(PD));
        assert!(!f.keys.still_valid(5, s));
        assert_eq!(
            f.t.check_remote(PD, k2, 0x10_8000, 1, RemoteRight::Write),
            Err(AccessError::BadKey)
        );
        assert_eq!(f.t.dealloc_mw(k2, &mut f.keys), Err(VerbsError::NotFound));
        f.t.deregister(f.lkey).unwrap();
    }

    #[test]
    fn a_type1_window_is_not_invalidated() {
        let mut f = fixture();
        let w1 = f.t.alloc_mw(PD, true).unwrap();
        let r = BindRequest {
            mw_rkey: w1,
            ..req(&f, 0x10_0000, 0x100, ACCESS_REMOTE_WRITE)
        };
        let k = f.t.bind_mw(PD, r, &mut f.keys).unwrap();
        let slot = f.keys.acquire(5, PD, k, KeyUse::Read).unwrap();
        assert_eq!(
            f.t.invalidate_mw(PD, k, &mut f.keys),
            Err(AccessError::Invalid)
        );
        assert!(f.keys.still_valid(5, slot));
        assert_eq!(
            f.t.check_remote(PD, k, 0x10_0000, 0x100, RemoteRight::Write)
                .map(|g| g[0].gpa),
            Ok(0x20_0000)
        );
        // A re-bind moves it (the old key stops resolving); dealloc frees it.
        let k2 =
            f.t.bind_mw(PD, BindRequest { mw_rkey: k, ..r }, &mut f.keys)
                .unwrap();
        assert!(!f.keys.still_valid(5, slot));
        assert_eq!(
            f.t.check_remote(PD, k, 0x10_0000, 1, RemoteRight::Write),
            Err(AccessError::BadKey)
        );
        assert_eq!(f.t.dealloc_mw(k2, &mut f.keys), Ok(PD));
        f.t.deregister(f.lkey).unwrap();
    }

    #[test]
    fn dealloc_names_only_windows() {
        let mut f = fixture();
        assert_eq!(
            f.t.dealloc_mw(f.lkey, &mut f.keys),
            Err(VerbsError::NotFound)
        );
        assert_eq!(f.t.dealloc_mw(0, &mut f.keys), Err(VerbsError::NotFound));
        assert_eq!(
            f.t.dealloc_mw(0xdead_0000, &mut f.keys),
            Err(VerbsError::NotFound)
        );
        assert_eq!(f.t.dealloc_mw(f.mw ^ 0x5a, &mut f.keys), Ok(PD));
        assert!(f.t.mr(f.lkey).is_some());
    }
}
