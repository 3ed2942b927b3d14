//! The translation and protection table (seed 001): memory regions and
//! memory windows behind 32-bit keys, and the checks every local and remote
//! access goes through. Window operations are in `mw.rs`.
//!
//! # Key format
//! `key = (index + 1) << 8 | tag`: bits 31:8 name a table slot (never 0, so
//! no key is below 0x100), bits 7:0 are a tag that changes whenever the slot
//! is reused, as on real HCAs. A region has two keys on one slot: the
//! **lkey has an even tag and the rkey the next odd tag**, so a local key is
//! never accepted remotely or the other way round. A window has one key
//! (its rkey); binding it again increments its tag (`ibv_inc_rkey`), so the
//! key of the previous binding stops working. Fresh tags are a random step
//! away from the slot's previous one, so keys are hard to guess.
//!
//! All range checks are overflow-safe: a range that wraps the 64-bit
//! address space is out of bounds.

use std::collections::VecDeque;

use super::abi::{
    ACCESS_LOCAL_WRITE, ACCESS_MW_BIND, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
};
use super::translate::{PageList, MAX_TOTAL_MR_PAGES, PAGE_SIZE};
use super::VerbsError;
use crate::transport::AccessError;

/// Every IBTCA_ACCESS_* bit.
pub const ACCESS_ALL: u32 = ACCESS_LOCAL_WRITE
    | ACCESS_REMOTE_WRITE
    | ACCESS_REMOTE_READ
    | ACCESS_REMOTE_ATOMIC
    | ACCESS_MW_BIND;

/// The IBTCA_ACCESS_REMOTE_* bits.
pub const ACCESS_REMOTE: u32 = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

/// Largest number of keyed objects (24 index bits, index + 1 must fit).
const MAX_KEY_SLOTS: usize = (1 << 24) - 1;

/// What a remote request wants to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteRight {
    /// RDMA READ.
    Read,
    /// RDMA WRITE (and WRITE with immediate).
    Write,
    /// Compare-and-swap or fetch-and-add on 8 aligned bytes.
    Atomic,
}

impl RemoteRight {
    /// The IBTCA_ACCESS_* bit this right needs.
    pub fn access_bit(self) -> u32 {
        match self {
            RemoteRight::Read => ACCESS_REMOTE_READ,
            RemoteRight::Write => ACCESS_REMOTE_WRITE,
            RemoteRight::Atomic => ACCESS_REMOTE_ATOMIC,
        }
    }
}

pub use super::remote_target::RemoteTarget;
pub use super::translate::{GpaRange, GpaRanges};

/// Where a region's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MrMap {
    /// One guest-physically contiguous range starting at `gpa`.
    Contiguous {
        /// Guest-physical address of the first byte.
        gpa: u64,
    },
    /// A page list copied at registration.
    Pages(PageList),
}

/// The state of a fast-registration region (ALLOC_MR): its one key serves
/// as lkey and rkey, and the IBTCA_WR_REG_MR work request gives it pages,
/// bounds, rights and the key's low byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FastReg {
    /// Pages the region may be given (reserved when allocated).
    pub(super) max_pages: u32,
    /// Registered (valid) rather than free (after ALLOC_MR or LOCAL_INV).
    pub(super) valid: bool,
}

/// A registered memory region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mr {
    /// Protection domain.
    pub pdn: u32,
    /// IBTCA_ACCESS_* rights.
    pub access: u32,
    /// First address in the region's own address space.
    pub iova: u64,
    /// Length in bytes (at least 1 once registered).
    pub length: u64,
    /// Where the bytes are.
    pub map: MrMap,
    /// `Some` for a fast-registration region.
    pub(super) fast: Option<FastReg>,
    /// Windows bound to this region.
    pub(super) windows: u32,
}

impl Mr {
    /// Pages of the device-wide page budget this region holds.
    pub fn reserved_pages(&self) -> u64 {
        match (&self.fast, &self.map) {
            (Some(f), _) => u64::from(f.max_pages),
            (None, MrMap::Pages(l)) => l.pages.len() as u64,
            (None, MrMap::Contiguous { .. }) => 0,
        }
    }

    /// Where region byte `off` is, one byte at a time (a reference for
    /// checks; `u64::MAX` past a page list's end).
    pub fn translation(&self) -> impl Fn(u64) -> u64 + '_ {
        move |off| match &self.map {
            MrMap::Contiguous { gpa } => gpa.wrapping_add(off),
            MrMap::Pages(l) => {
                let pos = l.first_offset.saturating_add(off);
                usize::try_from(pos / PAGE_SIZE)
                    .ok()
                    .and_then(|i| l.pages.get(i))
                    .map_or(u64::MAX, |p| p + pos % PAGE_SIZE)
            }
        }
    }

    /// Pushes the guest-physical ranges of region bytes `[off, off + len)`
    /// (checked to be inside the region) to `out`.
    pub(super) fn translate(
        &self,
        off: u64,
        len: u64,
        out: &mut GpaRanges,
    ) -> Result<(), AccessError> {
        match &self.map {
            MrMap::Contiguous { gpa } => {
                out.push(GpaRange {
                    gpa: gpa.wrapping_add(off),
                    len,
                });
                Ok(())
            }
            MrMap::Pages(l) => l.translate(off, len, out),
        }
    }
}

/// Where a bound window points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Binding {
    pub(super) mr_slot: usize,
    pub(super) va: u64,
    pub(super) length: u64,
    pub(super) access: u32,
}

/// A memory window: a PD, its current key tag and, when bound, its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mw {
    pub(super) pdn: u32,
    pub(super) tag: u8,
    pub(super) binding: Option<Binding>,
    /// A type 1 window: only a re-bind or DEALLOC_MW ends its binding.
    pub(super) type1: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyObj {
    Mr(Mr),
    Mw(Mw),
}

#[derive(Debug, Default)]
pub(super) struct KeySlot {
    /// Tag last handed out on this slot.
    pub(super) last_tag: u8,
    pub(super) obj: Option<KeyObj>,
}

/// Memory regions and windows of one device.
pub struct MrTable {
    pub(super) slots: Vec<KeySlot>,
    free: VecDeque<usize>,
    capacity: usize,
    rng: u64,
    /// Pages page-list regions hold, against [`MAX_TOTAL_MR_PAGES`].
    pub(super) pages_in_use: u64,
}

/// Splits a key into its slot index and tag.
pub(super) fn split_key(key: u32) -> Option<(usize, u8)> {
    let index = ((key >> 8) as usize).checked_sub(1)?;
    Some((index, key as u8))
}

/// Builds a key from a slot index and tag.
pub(super) fn make_key(index: usize, tag: u8) -> u32 {
    ((index as u32 + 1) << 8) | u32::from(tag)
}

/// Offset of `[va, va + len)` inside `[start, start + length)`, if it fits.
pub(super) fn offset_in(start: u64, length: u64, va: u64, len: u64) -> Option<u64> {
    let off = va.checked_sub(start)?;
    (off <= length && len <= length - off).then_some(off)
}

impl MrTable {
    /// A table of at most `capacity` regions and windows together; `seed`
    /// seeds the key tags.
    pub fn new(capacity: usize, seed: u64) -> Self {
        MrTable {
            slots: Vec::new(),
            free: VecDeque::new(),
            capacity: capacity.min(MAX_KEY_SLOTS),
            rng: seed | 1,
            pages_in_use: 0,
        }
    }

    /// The most regions and windows (together) the table holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// A random step in `1..=max`.
    pub(super) fn random_step(&mut self, max: u8) -> u8 {
        // xorshift64: keys need to be hard to guess, not cryptographic.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % u64::from(max)) as u8 + 1
    }

    /// Takes a free slot (FIFO, so slots are not reused immediately).
    pub(super) fn take_slot(&mut self) -> Result<usize, VerbsError> {
        if let Some(i) = self.free.pop_front() {
            return Ok(i);
        }
        if self.slots.len() < self.capacity {
            self.slots.push(KeySlot::default());
            return Ok(self.slots.len() - 1);
        }
        Err(VerbsError::NoMemory)
    }

    /// Empties a slot and queues it for reuse.
    pub(super) fn free_slot(&mut self, index: usize) -> Option<KeyObj> {
        let obj = self.slots.get_mut(index)?.obj.take();
        if obj.is_some() {
            self.free.push_back(index);
        }
        obj
    }

    /// Registers `length` bytes at guest-physical `gpa`, addressed as
    /// `iova`, in PD `pdn` with IBTCA_ACCESS_* `access`; returns
    /// `(lkey, rkey)`. `Invalid` for unknown access bits, remote write or
    /// atomic without local write, zero length, or a range that wraps.
    /// The caller checks that the PD exists.
    pub fn register(
        &mut self,
        pdn: u32,
        access: u32,
        iova: u64,
        length: u64,
        gpa: u64,
    ) -> Result<(u32, u32), VerbsError> {
        if length == 0 || gpa.checked_add(length - 1).is_none() {
            return Err(VerbsError::Invalid);
        }
        self.insert_mr(pdn, access, iova, length, MrMap::Contiguous { gpa })
    }

    /// Registers a page-list region of `length` bytes (the list covers
    /// exactly them; see [`PageList::load`]) addressed as `iova`; returns
    /// `(lkey, rkey)`. `NoMemory` when the device's page budget cannot take
    /// the list ([`Self::can_hold_pages`] says so beforehand).
    pub fn register_pages(
        &mut self,
        pdn: u32,
        access: u32,
        iova: u64,
        length: u64,
        list: PageList,
    ) -> Result<(u32, u32), VerbsError> {
        let n = list.pages.len() as u64;
        if !self.can_hold_pages(n) {
            return Err(VerbsError::NoMemory);
        }
        let keys = self.insert_mr(pdn, access, iova, length, MrMap::Pages(list))?;
        self.pages_in_use += n;
        Ok(keys)
    }

    /// True when the device's page budget can take `n` more pages.
    pub fn can_hold_pages(&self, n: u64) -> bool {
        self.pages_in_use.saturating_add(n) <= MAX_TOTAL_MR_PAGES
    }

    /// The checks every registration makes (`Invalid`): known access bits,
    /// remote write or atomic only with local write, at least one byte,
    /// no wrap of the region's address space.
    pub(super) fn check_registration(
        access: u32,
        iova: u64,
        length: u64,
    ) -> Result<(), VerbsError> {
        let needs_local_write = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
        if access & !ACCESS_ALL != 0
            || (access & needs_local_write != 0 && access & ACCESS_LOCAL_WRITE == 0)
            || length == 0
            || iova.checked_add(length - 1).is_none()
        {
            return Err(VerbsError::Invalid);
        }
        Ok(())
    }

    fn insert_mr(
        &mut self,
        pdn: u32,
        access: u32,
        iova: u64,
        length: u64,
        map: MrMap,
    ) -> Result<(u32, u32), VerbsError> {
        Self::check_registration(access, iova, length)?;
        let index = self.take_slot()?;
        let step = self.random_step(127) << 1;
        let slot = &mut self.slots[index];
        let ltag = (slot.last_tag & 0xfe).wrapping_add(step);
        slot.last_tag = ltag | 1;
        slot.obj = Some(KeyObj::Mr(Mr {
            pdn,
            access,
            iova,
            length,
            map,
            fast: None,
            windows: 0,
        }));
        Ok((make_key(index, ltag), make_key(index, ltag | 1)))
    }

    /// Deregisters the region whose lkey is `lkey` (a fast-registration
    /// region: its key with any low byte, registered or free, since a
    /// driver's key and the device's part ways when a REG_MR work request
    /// that would have changed it fails) and returns it:
    /// `NotFound` for anything else, `Busy` while windows are bound to it.
    pub fn deregister(&mut self, lkey: u32) -> Result<Mr, VerbsError> {
        let index = self.mr_index(lkey).ok_or(VerbsError::NotFound)?;
        match &self.slots[index].obj {
            Some(KeyObj::Mr(mr)) if mr.windows > 0 => return Err(VerbsError::Busy),
            _ => {}
        }
        match self.free_slot(index) {
            Some(KeyObj::Mr(mr)) => {
                self.pages_in_use = self.pages_in_use.saturating_sub(mr.reserved_pages());
                Ok(mr)
            }
            _ => Err(VerbsError::NotFound),
        }
    }

    /// The key remote peers present for the region that `lkey` names for
    /// deregistration (its rkey, or a fast-registration region's current
    /// key).
    pub fn current_rkey(&self, lkey: u32) -> Option<u32> {
        let index = self.mr_index(lkey)?;
        Some(make_key(index, self.slots[index].last_tag))
    }

    /// The region whose lkey is `lkey`.
    pub fn mr(&self, lkey: u32) -> Option<&Mr> {
        self.lookup_lkey(lkey).map(|(_, mr)| mr)
    }

    /// The region whose rkey is `rkey` (not a window's key).
    pub fn mr_by_rkey(&self, rkey: u32) -> Option<&Mr> {
        self.lookup_key(rkey, true).map(|(_, mr)| mr)
    }

    /// Every live region, registered or free.
    pub fn regions(&self) -> impl Iterator<Item = &Mr> {
        self.slots.iter().filter_map(|s| match &s.obj {
            Some(KeyObj::Mr(mr)) => Some(mr),
            _ => None,
        })
    }

    /// Pages of the device-wide budget that page-list and
    /// fast-registration regions hold.
    pub fn pages_in_use(&self) -> u64 {
        self.pages_in_use
    }

    /// The slot of the region that `key` names for deregistration: a
    /// region's lkey, or a fast-registration region's key with any low
    /// byte, whether it is registered or free.
    pub(super) fn mr_index(&self, key: u32) -> Option<usize> {
        let (index, _) = split_key(key)?;
        let slot = self.slots.get(index)?;
        match &slot.obj {
            Some(KeyObj::Mr(mr)) if mr.fast.is_some() => Some(index),
            _ => self.lookup_lkey(key).map(|(i, _)| i),
        }
    }

    /// The region `key` names as an lkey (`remote`: as an rkey): a region's
    /// even-tagged lkey or odd-tagged rkey, or the one current key of a
    /// registered fast-registration region.
    fn lookup_key(&self, key: u32, remote: bool) -> Option<(usize, &Mr)> {
        let (index, tag) = split_key(key)?;
        let slot = self.slots.get(index)?;
        let Some(KeyObj::Mr(mr)) = &slot.obj else {
            return None;
        };
        let ok = match mr.fast {
            Some(f) => f.valid && slot.last_tag == tag,
            None if remote => tag & 1 == 1 && slot.last_tag == tag,
            None => tag & 1 == 0 && slot.last_tag == tag | 1,
        };
        ok.then_some((index, mr))
    }

    pub(super) fn lookup_lkey(&self, lkey: u32) -> Option<(usize, &Mr)> {
        self.lookup_key(lkey, false)
    }

    fn mr_at(&self, index: usize) -> Option<&Mr> {
        match &self.slots.get(index)?.obj {
            Some(KeyObj::Mr(mr)) => Some(mr),
            _ => None,
        }
    }

    /// Checks a local access of `len` bytes at `va` through `lkey` by a QP
    /// in PD `pdn` (`write`: the device writes, needs LOCAL_WRITE) and
    /// pushes where the bytes are to `out`.
    pub fn check_local_into(
        &self,
        pdn: u32,
        lkey: u32,
        va: u64,
        len: u64,
        write: bool,
        out: &mut GpaRanges,
    ) -> Result<(), AccessError> {
        let (_, mr) = self.lookup_lkey(lkey).ok_or(AccessError::BadKey)?;
        if mr.pdn != pdn {
            return Err(AccessError::WrongPd);
        }
        if write && mr.access & ACCESS_LOCAL_WRITE == 0 {
            return Err(AccessError::NoRight);
        }
        let off = offset_in(mr.iova, mr.length, va, len).ok_or(AccessError::OutOfBounds)?;
        mr.translate(off, len, out)
    }

    /// [`Self::check_local_into`], returning the ranges.
    pub fn check_local(
        &self,
        pdn: u32,
        lkey: u32,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<GpaRanges, AccessError> {
        let mut out = GpaRanges::default();
        self.check_local_into(pdn, lkey, va, len, write, &mut out)?;
        Ok(out)
    }

    /// Checks a remote access of `len` bytes at `va` through `rkey` (a
    /// region's rkey or a bound window's key) arriving on a QP in PD `pdn`,
    /// and says which region bytes it reaches (see [`Self::translate`]).
    /// Atomics must be 8 bytes, 8-byte aligned (`Invalid`).
    pub fn remote_target(
        &self,
        pdn: u32,
        rkey: u32,
        va: u64,
        len: u64,
        right: RemoteRight,
    ) -> Result<RemoteTarget, AccessError> {
        let (index, tag) = split_key(rkey).ok_or(AccessError::BadKey)?;
        let slot = self.slots.get(index).ok_or(AccessError::BadKey)?;
        let (owner_pd, start, length, access, mr_slot, mr) = match &slot.obj {
            Some(KeyObj::Mr(_)) => {
                let (i, mr) = self.lookup_key(rkey, true).ok_or(AccessError::BadKey)?;
                (mr.pdn, mr.iova, mr.length, mr.access, i, mr)
            }
            Some(KeyObj::Mw(mw)) if mw.tag == tag => {
                let b = mw.binding.ok_or(AccessError::BadKey)?;
                let mr = self.mr_at(b.mr_slot).ok_or(AccessError::BadKey)?;
                (mw.pdn, b.va, b.length, b.access, b.mr_slot, mr)
            }
            _ => return Err(AccessError::BadKey),
        };
        if owner_pd != pdn {
            return Err(AccessError::WrongPd);
        }
        if right == RemoteRight::Atomic && (len != 8 || !va.is_multiple_of(8)) {
            return Err(AccessError::Invalid);
        }
        if access & right.access_bit() == 0 {
            return Err(AccessError::NoRight);
        }
        offset_in(start, length, va, len).ok_or(AccessError::OutOfBounds)?;
        // Inside the window, hence inside the region.
        Ok(RemoteTarget {
            mr_slot,
            offset: va - mr.iova,
            len,
        })
    }

    /// Where the bytes of a checked remote access are.
    pub fn translate(&self, t: RemoteTarget) -> Result<GpaRanges, AccessError> {
        let mr = self.mr_at(t.mr_slot).ok_or(AccessError::BadKey)?;
        let mut out = GpaRanges::default();
        mr.translate(t.offset, t.len, &mut out)?;
        Ok(out)
    }

    /// [`Self::remote_target`] and [`Self::translate`] in one.
    pub fn check_remote(
        &self,
        pdn: u32,
        rkey: u32,
        va: u64,
        len: u64,
        right: RemoteRight,
    ) -> Result<GpaRanges, AccessError> {
        let t = self.remote_target(pdn, rkey, va, len, right)?;
        self.translate(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PD: u32 = 0x401;
    const ALL: u32 = ACCESS_ALL;

    fn table() -> MrTable {
        MrTable::new(16, 0x1234_5678)
    }

    /// The one range of a contiguous region's access.
    fn one(r: Result<GpaRanges, AccessError>) -> Result<GpaRange, AccessError> {
        r.map(|g| {
            assert_eq!(g.len(), 1, "{g:?}");
            g[0]
        })
    }

    /// The guest-physical address of a contiguous region's remote access.
    fn gpa(r: Result<GpaRanges, AccessError>) -> Result<u64, AccessError> {
        one(r).map(|g| g.gpa)
    }

    #[test]
    fn keys_are_distinct_and_change_on_reuse() {
        let mut t = MrTable::new(1, 42);
        let (l, r) = t.register(PD, ALL, 0x1000, 0x100, 0x8000).unwrap();
        assert_ne!(l, r);
        assert_eq!(l >> 8, r >> 8, "one slot");
        assert_eq!((l & 1, r & 1), (0, 1));
        assert!(l >= 0x100);
        assert_eq!(t.register(PD, ALL, 0, 1, 0), Err(VerbsError::NoMemory));
        t.deregister(l).unwrap();
        let (l2, r2) = t.register(PD, ALL, 0x1000, 0x100, 0x8000).unwrap();
        assert_eq!(l2 >> 8, l >> 8, "slot reused");
        assert_ne!((l2, r2), (l, r), "tag changed");
        assert_eq!(
            t.check_local(PD, l, 0x1000, 1, false),
            Err(AccessError::BadKey)
        );
        assert_eq!(
            t.check_remote(PD, r, 0x1000, 1, RemoteRight::Read),
            Err(AccessError::BadKey)
        );
    }

    #[test]
    fn lkey_and_rkey_are_not_interchangeable() {
        let mut t = table();
        let (l, r) = t.register(PD, ALL, 0, 0x100, 0x8000).unwrap();
        assert_eq!(t.check_local(PD, r, 0, 1, false), Err(AccessError::BadKey));
        assert_eq!(
            t.check_remote(PD, l, 0, 1, RemoteRight::Read),
            Err(AccessError::BadKey)
        );
        assert_eq!(t.deregister(r), Err(VerbsError::NotFound));
        for k in [0, 0xff, u32::MAX, l ^ 0x100] {
            assert_eq!(t.check_local(PD, k, 0, 1, false), Err(AccessError::BadKey));
            assert_eq!(
                t.check_remote(PD, k, 0, 1, RemoteRight::Read),
                Err(AccessError::BadKey)
            );
        }
    }

    #[test]
    fn registration_is_validated() {
        let mut t = table();
        let bad = [
            (1 << 5, 0, 1, 0),
            (ACCESS_REMOTE_WRITE, 0, 1, 0),
            (ACCESS_REMOTE_ATOMIC, 0, 1, 0),
            (0, 0, 0, 0),
            (0, u64::MAX, 2, 0),
            (0, 0, 2, u64::MAX),
            (0, 2, u64::MAX, 0),
        ];
        for (access, iova, length, gpa) in bad {
            assert_eq!(
                t.register(PD, access, iova, length, gpa),
                Err(VerbsError::Invalid),
                "{access:#x} {iova:#x} {length:#x} {gpa:#x}"
            );
        }
        // The very last byte of both address spaces is fine.
        t.register(PD, 0, u64::MAX, 1, u64::MAX).unwrap();
        t.register(PD, 0, 0, u64::MAX, 1).unwrap();
    }

    #[test]
    fn local_check_boundaries() {
        let mut t = table();
        let (l, _) = t
            .register(PD, ACCESS_LOCAL_WRITE, 0x1000, 0x100, 0x8_0000)
            .unwrap();
        let ok = |va, len| one(t.check_local(PD, l, va, len, true));
        assert_eq!(
            ok(0x1000, 1),
            Ok(GpaRange {
                gpa: 0x8_0000,
                len: 1
            })
        );
        assert_eq!(ok(0x10ff, 1).unwrap().gpa, 0x8_00ff, "last byte");
        assert_eq!(ok(0x1000, 0x100).unwrap().len, 0x100, "whole region");
        assert_eq!(ok(0x10ff, 2), Err(AccessError::OutOfBounds), "one past");
        assert_eq!(ok(0x1100, 1), Err(AccessError::OutOfBounds));
        assert_eq!(ok(0x0fff, 1), Err(AccessError::OutOfBounds), "one before");
        assert_eq!(ok(0x1000, 0x101), Err(AccessError::OutOfBounds));
        assert_eq!(ok(0x1001, u64::MAX), Err(AccessError::OutOfBounds), "wraps");
        assert_eq!(ok(u64::MAX, 2), Err(AccessError::OutOfBounds), "wraps");
        assert!(ok(0x1100, 0).is_ok(), "empty access at the end");
        assert_eq!(
            t.check_local(PD + 1, l, 0x1000, 1, false),
            Err(AccessError::WrongPd)
        );
        let (ro, _) = t.register(PD, 0, 0, 0x10, 0).unwrap();
        assert_eq!(t.check_local(PD, ro, 0, 1, true), Err(AccessError::NoRight));
        assert!(t.check_local(PD, ro, 0, 1, false).is_ok());
    }

    #[test]
    fn remote_check_boundaries_rights_and_pd() {
        let mut t = table();
        let acc = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
        let (_, r) = t.register(PD, acc, 0xffff_0000, 0x1000, 0x4000).unwrap();
        let chk = |va, len, right| gpa(t.check_remote(PD, r, va, len, right));
        assert_eq!(chk(0xffff_0000, 0x1000, RemoteRight::Write), Ok(0x4000));
        assert_eq!(chk(0xffff_0fff, 1, RemoteRight::Write), Ok(0x4fff));
        assert_eq!(
            chk(0xffff_0fff, 2, RemoteRight::Write),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            chk(0xffff_1000, 1, RemoteRight::Write),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            chk(0xfffe_ffff, 1, RemoteRight::Write),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            chk(0xffff_0800, u64::MAX, RemoteRight::Write),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            chk(0xffff_0000, 1, RemoteRight::Read),
            Err(AccessError::NoRight)
        );
        assert_eq!(chk(0xffff_0ff8, 8, RemoteRight::Atomic), Ok(0x4ff8));
        assert_eq!(
            chk(0xffff_0ffc, 8, RemoteRight::Atomic),
            Err(AccessError::Invalid)
        );
        assert_eq!(
            chk(0xffff_0000, 4, RemoteRight::Atomic),
            Err(AccessError::Invalid)
        );
        assert_eq!(
            chk(0xffff_1000, 8, RemoteRight::Atomic),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            gpa(t.check_remote(PD + 1, r, 0xffff_0000, 1, RemoteRight::Write)),
            Err(AccessError::WrongPd)
        );
        let (_, top) = t
            .register(PD, ACCESS_REMOTE_READ, u64::MAX - 7, 8, 0x100)
            .unwrap();
        assert_eq!(
            gpa(t.check_remote(PD, top, u64::MAX, 1, RemoteRight::Read)),
            Ok(0x107)
        );
        assert_eq!(
            gpa(t.check_remote(PD, top, u64::MAX, 2, RemoteRight::Read)),
            Err(AccessError::OutOfBounds),
            "va + len wraps"
        );
    }

    #[test]
    fn deregister_returns_the_region() {
        let mut t = table();
        let (l, _) = t.register(PD, 0, 5, 10, 20).unwrap();
        let mr = t.deregister(l).unwrap();
        assert_eq!((mr.pdn, mr.iova, mr.length), (PD, 5, 10));
        assert_eq!(mr.map, MrMap::Contiguous { gpa: 20 });
        assert_eq!(t.deregister(l), Err(VerbsError::NotFound));
        assert!(t.mr(l).is_none());
    }
}
