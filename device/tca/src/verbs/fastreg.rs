//! Fast-registration regions (IB's alloc_mr / IB_WR_REG_MR, which kernel
//! storage initiators use): ALLOC_MR makes a region with one key, lkey
//! and rkey alike, and reserves its page budget; it is **free** (no key
//! check passes) until an IBTCA_WR_REG_MR work request registers it in
//! send-queue order, copying the page table named in the WQE and taking
//! the WQE key's low byte as the key's new tag (`ib_update_fast_reg_key`).
//! LOCAL_INV or a SEND with Invalidate of the current key makes it free
//! again and runs the key-memory walk (seed 001), so operations in flight
//! through it fail. Windows cannot be bound to these regions (they never
//! carry IBTCA_ACCESS_MW_BIND).

use super::abi::{RegMrWqe, ACCESS_MW_BIND};
use super::keys::KeyMemory;
use super::mr::{make_key, split_key, FastReg, KeyObj, Mr, MrMap, MrTable};
use super::translate::{PageList, PageListError, MAX_MR_PAGES};
use super::VerbsError;
use crate::dma::GuestMemory;
use crate::transport::AccessError;

impl MrTable {
    /// Allocates a free fast-registration region in PD `pdn` that may be
    /// given up to `max_pages` pages; returns its key. `Invalid` for 0 or
    /// more than [`MAX_MR_PAGES`], `NoMemory` when the table or the page
    /// budget is full. The caller checks that the PD exists.
    pub fn alloc_fast(&mut self, pdn: u32, max_pages: u32) -> Result<u32, VerbsError> {
        if max_pages == 0 || max_pages > MAX_MR_PAGES {
            return Err(VerbsError::Invalid);
        }
        if !self.can_hold_pages(u64::from(max_pages)) {
            return Err(VerbsError::NoMemory);
        }
        let index = self.take_slot()?;
        let step = self.random_step(255);
        let slot = &mut self.slots[index];
        let tag = slot.last_tag.wrapping_add(step);
        slot.last_tag = tag;
        slot.obj = Some(KeyObj::Mr(Mr {
            pdn,
            access: 0,
            iova: 0,
            length: 0,
            map: MrMap::Pages(PageList::with_capacity(max_pages)),
            fast: Some(FastReg {
                max_pages,
                valid: false,
            }),
            windows: 0,
        }));
        self.pages_in_use += u64::from(max_pages);
        Ok(make_key(index, tag))
    }

    /// The fast-registration region on `key`'s slot, whatever the key's tag.
    fn fast_at(&mut self, key: u32) -> Option<(usize, &mut Mr)> {
        let (index, _) = split_key(key)?;
        match &mut self.slots.get_mut(index)?.obj {
            Some(KeyObj::Mr(mr)) if mr.fast.is_some() => Some((index, mr)),
            _ => None,
        }
    }

    /// True when `key` names a fast-registration region's slot.
    pub fn is_fast(&self, key: u32) -> bool {
        split_key(key)
            .and_then(|(i, _)| self.slots.get(i))
            .is_some_and(|s| matches!(&s.obj, Some(KeyObj::Mr(mr)) if mr.fast.is_some()))
    }

    /// Executes IBTCA_WR_REG_MR for a QP in PD `pdn`: the region must be
    /// free and in that PD; returns its key. Nothing changes on error:
    /// `BadKey` (no such region), `WrongPd`, `Invalid` (registered, bad
    /// rights or bounds, a bad page list), `Dma` (the table is not in
    /// guest memory).
    pub fn fast_register(
        &mut self,
        pdn: u32,
        mem: &GuestMemory,
        w: &RegMrWqe,
    ) -> Result<u32, AccessError> {
        let key = w.key.to_native();
        let (access, iova, length) = (
            w.access.to_native(),
            w.iova.to_native(),
            w.length.to_native(),
        );
        let (index, mr) = self.fast_at(key).ok_or(AccessError::BadKey)?;
        let Some(fast) = mr.fast else {
            return Err(AccessError::BadKey);
        };
        if mr.pdn != pdn {
            return Err(AccessError::WrongPd);
        }
        if fast.valid
            || access & ACCESS_MW_BIND != 0
            || MrTable::check_registration(access, iova, length).is_err()
        {
            return Err(AccessError::Invalid);
        }
        let MrMap::Pages(list) = &mut mr.map else {
            return Err(AccessError::Invalid);
        };
        list.load(
            mem,
            w.page_table.to_native(),
            w.npages.to_native(),
            u64::from(w.first_offset.to_native()),
            length,
            fast.max_pages,
        )
        .map_err(|e| match e {
            PageListError::Invalid => AccessError::Invalid,
            PageListError::Fault => AccessError::Dma,
        })?;
        mr.access = access;
        mr.iova = iova;
        mr.length = length;
        mr.fast = Some(FastReg {
            valid: true,
            ..fast
        });
        self.slots[index].last_tag = key as u8;
        Ok(key)
    }

    /// LOCAL_INV (or SEND with Invalidate) of a fast-registration region's
    /// current key by a QP in PD `pdn`: the region becomes free and the
    /// key walk runs. Invalidating a free region's current key is allowed
    /// and changes nothing.
    fn invalidate_fast(
        &mut self,
        pdn: u32,
        key: u32,
        keys: &mut KeyMemory,
    ) -> Result<(), AccessError> {
        let (index, _) = split_key(key).ok_or(AccessError::BadKey)?;
        if self.slots.get(index).map(|s| s.last_tag) != Some(key as u8) {
            return Err(AccessError::BadKey);
        }
        let (_, mr) = self.fast_at(key).ok_or(AccessError::BadKey)?;
        if mr.pdn != pdn {
            return Err(AccessError::WrongPd);
        }
        if let Some(f) = &mut mr.fast {
            f.valid = false;
        }
        if let MrMap::Pages(list) = &mut mr.map {
            list.pages.clear();
        }
        mr.length = 0;
        keys.invalidate_walk(pdn, key);
        Ok(())
    }

    /// LOCAL_INV or SEND with Invalidate of `key` by a QP in PD `pdn`: a
    /// bound window (see [`MrTable::invalidate_mw`]) or a
    /// fast-registration region.
    pub fn invalidate(
        &mut self,
        pdn: u32,
        key: u32,
        keys: &mut KeyMemory,
    ) -> Result<(), AccessError> {
        if self.is_fast(key) {
            self.invalidate_fast(pdn, key, keys)
        } else {
            self.invalidate_mw(pdn, key, keys)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::abi::{
        ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, WR_REG_MR,
    };
    use super::super::mr::RemoteRight;
    use super::super::testmem::TestMem;
    use super::super::translate::{GpaRange, MAX_TOTAL_MR_PAGES};
    use super::*;
    use crate::verbs::keys::KeyUse;

    const PD: u32 = 0x401;
    const TABLE: u64 = 0x100;

    fn wqe(key: u32, npages: u32, first: u32, iova: u64, length: u64, access: u32) -> RegMrWqe {
        RegMrWqe {
            opcode: WR_REG_MR,
            key: key.into(),
            npages: npages.into(),
            first_offset: first.into(),
            iova: iova.into(),
            length: length.into(),
            access: access.into(),
            page_table: TABLE.into(),
            ..Default::default()
        }
    }

    fn fixture() -> (MrTable, TestMem, KeyMemory) {
        let m = TestMem::new(1 << 20);
        let pages: Vec<u8> = [0x8000u64, 0x3000, 0x20000]
            .iter()
            .flat_map(|p| p.to_le_bytes())
            .collect();
        m.mem.write(TABLE, &pages).unwrap();
        (MrTable::new(16, 9), m, KeyMemory::new())
    }

    #[test]
    fn free_until_registered_then_lkey_and_rkey_alike() {
        let (mut t, m, mut keys) = fixture();
        let key = t.alloc_fast(PD, 3).unwrap();
        assert_eq!(
            t.check_local(PD, key, 0, 1, false),
            Err(AccessError::BadKey)
        );
        let acc = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ;
        let new_key = (key & !0xff) | ((key + 1) & 0xff);
        let w = wqe(new_key, 3, 0x100, 0x7000_0000, 0x2000, acc);
        assert_eq!(t.fast_register(PD, &m.mem, &w), Ok(new_key));
        let got = t
            .check_local(PD, new_key, 0x7000_0e00, 0x400, true)
            .unwrap();
        assert_eq!(
            *got,
            [
                GpaRange {
                    gpa: 0x8f00,
                    len: 0x100
                },
                GpaRange {
                    gpa: 0x3000,
                    len: 0x300
                }
            ]
        );
        let r = t.check_remote(PD, new_key, 0x7000_1f00, 0x100, RemoteRight::Read);
        assert_eq!(r.map(|g| g[0].gpa), Ok(0x20000));
        assert_eq!(
            t.check_remote(PD, new_key, 0x7000_0000, 1, RemoteRight::Write),
            Err(AccessError::NoRight)
        );
        assert_eq!(
            t.check_local(PD, key, 0x7000_0000, 1, false),
            Err(AccessError::BadKey),
            "old tag"
        );
        assert_eq!(
            t.fast_register(PD, &m.mem, &w),
            Err(AccessError::Invalid),
            "already valid"
        );
        let slot = keys.acquire(3, PD, new_key, KeyUse::Read).unwrap();
        assert_eq!(
            t.invalidate(PD + 1, new_key, &mut keys),
            Err(AccessError::WrongPd)
        );
        t.invalidate(PD, new_key, &mut keys).unwrap();
        assert!(!keys.still_valid(3, slot), "the walk ran");
        assert_eq!(
            t.check_local(PD, new_key, 0x7000_0000, 1, false),
            Err(AccessError::BadKey)
        );
        t.invalidate(PD, new_key, &mut keys).unwrap();
        assert_eq!(t.invalidate(PD, key, &mut keys), Err(AccessError::BadKey));
        assert_eq!(t.fast_register(PD, &m.mem, &w), Ok(new_key), "free again");
        t.deregister(new_key).unwrap();
        assert_eq!(t.pages_in_use, 0);
    }

    #[test]
    fn bad_fast_registrations_change_nothing() {
        let (mut t, m, _) = fixture();
        let key = t.alloc_fast(PD, 2).unwrap();
        let (plain, _) = t.register(PD, 0, 0, 1, 0x1000).unwrap();
        let acc = ACCESS_LOCAL_WRITE;
        let cases = [
            (wqe(plain, 1, 0, 0, 1, acc), PD, AccessError::BadKey),
            (wqe(0xff, 1, 0, 0, 1, acc), PD, AccessError::BadKey),
            (wqe(key, 1, 0, 0, 1, acc), PD + 1, AccessError::WrongPd),
            (wqe(key, 3, 0, 0, 0x3000, acc), PD, AccessError::Invalid),
            (wqe(key, 0, 0, 0, 0, acc), PD, AccessError::Invalid),
            (
                wqe(key, 1, 0, 0, 1, ACCESS_MW_BIND),
                PD,
                AccessError::Invalid,
            ),
            (
                wqe(key, 1, 0, 0, 1, ACCESS_REMOTE_WRITE),
                PD,
                AccessError::Invalid,
            ),
            (wqe(key, 1, 0, u64::MAX, 2, acc), PD, AccessError::Invalid),
            (wqe(key, 1, 0, 0, 0x1001, acc), PD, AccessError::Invalid),
            (
                RegMrWqe {
                    page_table: (1u64 << 40).into(),
                    ..wqe(key, 1, 0, 0, 1, acc)
                },
                PD,
                AccessError::Dma,
            ),
        ];
        for (w, pd, want) in cases {
            assert_eq!(t.fast_register(pd, &m.mem, &w), Err(want), "{w:?}");
            assert_eq!(
                t.check_local(PD, key, 0, 1, false),
                Err(AccessError::BadKey)
            );
        }
        assert_eq!(t.alloc_fast(PD, 0), Err(VerbsError::Invalid));
        assert_eq!(t.alloc_fast(PD, MAX_MR_PAGES + 1), Err(VerbsError::Invalid));
    }

    #[test]
    fn the_page_budget_bounds_allocations() {
        let mut t = MrTable::new(16, 9);
        let n = (MAX_TOTAL_MR_PAGES / u64::from(MAX_MR_PAGES)) as usize;
        let keys: Vec<u32> = (0..n)
            .map(|_| t.alloc_fast(PD, MAX_MR_PAGES).unwrap())
            .collect();
        assert_eq!(t.alloc_fast(PD, 1), Err(VerbsError::NoMemory));
        t.deregister(keys[0]).unwrap();
        t.alloc_fast(PD, 1).unwrap();
    }
}
