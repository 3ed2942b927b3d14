//! Where a memory region's bytes are in guest memory: one guest-physically
//! contiguous range, or a page list (a translation table of 4 KiB pages the
//! driver builds, as the seed's TPT has it) copied into the device when the
//! region is registered. A region's offset `off` is byte `first_offset +
//! off` of the concatenated pages.
//!
//! The table is **copied** at registration (REG_MR) or at fast
//! registration (the IBTCA_WR_REG_MR work request) and never read again: a
//! guest that rewrites its table afterwards changes nothing the device
//! does, so a translation checked once stays the translation used.
//! Every page is checked to be 4 KiB-aligned when copied; whether a page is
//! in guest memory is checked by the DMA accessor on every access (the
//! client's maps can change after registration), which fails the access.

use super::abi::MAX_SGE;
use crate::dma::GuestMemory;
use crate::transport::AccessError;

/// The page size of page-list regions.
pub const PAGE_SIZE: u64 = 4096;

/// Most pages of one page-list region (1 GiB); QUERY_DEVICE reports it.
pub const MAX_MR_PAGES: u32 = 1 << 18;

/// Most pages of all page-list regions of one device together (4 GiB of
/// guest memory, 8 MiB of the device's): bounds what a guest can make the
/// device hold. QUERY_DEVICE reports it.
pub const MAX_TOTAL_MR_PAGES: u64 = 1 << 20;

/// A checked local access: `len` bytes of guest-physically contiguous
/// memory at `gpa`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GpaRange {
    /// Guest-physical address of the first byte.
    pub gpa: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Ranges kept inline: one packet (at most 4 KiB) through [`MAX_SGE`]
/// elements crosses at most one page boundary per element.
const INLINE_RANGES: usize = 2 * MAX_SGE;

/// The guest-physical ranges of an access, in order, contiguous neighbours
/// merged. Up to [`INLINE_RANGES`] are kept inline (the send engine
/// resolves one packet at a time, so that path allocates nothing); more
/// spill into a vector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpaRanges {
    inline: [GpaRange; INLINE_RANGES],
    len: usize,
    spill: Vec<GpaRange>,
}

impl GpaRanges {
    /// Appends `r`, merged into the last range when it continues it.
    pub fn push(&mut self, r: GpaRange) {
        let last = if self.spill.is_empty() {
            self.len.checked_sub(1).map(|i| &mut self.inline[i])
        } else {
            self.spill.last_mut()
        };
        if let Some(last) = last {
            if last.gpa.checked_add(last.len) == Some(r.gpa) {
                last.len += r.len;
                return;
            }
        }
        if self.spill.is_empty() && self.len < INLINE_RANGES {
            self.inline[self.len] = r;
            self.len += 1;
            return;
        }
        if self.spill.is_empty() {
            self.spill.extend_from_slice(&self.inline[..self.len]);
        }
        self.spill.push(r);
    }

    /// True when every range is mapped guest memory now (checked before a
    /// write of several ranges, so that a write that cannot complete
    /// changes nothing).
    pub fn all_mapped(&self, mem: &GuestMemory) -> bool {
        self.iter().all(|r| mem.is_mapped(r.gpa, r.len))
    }
}

impl std::ops::Deref for GpaRanges {
    type Target = [GpaRange];

    fn deref(&self) -> &[GpaRange] {
        if self.spill.is_empty() {
            &self.inline[..self.len]
        } else {
            &self.spill
        }
    }
}

/// Why a page list was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PageListError {
    /// Zero pages, more than allowed, a table not 8-byte aligned, a first
    /// offset of a page or more, a page count that does not cover the
    /// region exactly, or a page not 4 KiB-aligned.
    #[error("invalid page list")]
    Invalid,
    /// The table is not in guest memory.
    #[error("page table not in guest memory")]
    Fault,
}

/// A region's pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageList {
    /// Offset of the region's first byte in the first page.
    pub first_offset: u64,
    /// Guest-physical address of each page, 4 KiB-aligned.
    pub pages: Vec<u64>,
}

/// The number of 4 KiB pages bytes `[first_offset, first_offset + length)`
/// cover, if that is computable.
pub fn pages_covering(first_offset: u64, length: u64) -> Option<u64> {
    Some(first_offset.checked_add(length)?.div_ceil(PAGE_SIZE))
}

impl PageList {
    /// An empty list that can hold `max` pages without reallocating.
    pub fn with_capacity(max: u32) -> Self {
        PageList {
            first_offset: 0,
            pages: Vec::with_capacity(max as usize),
        }
    }

    /// Replaces the list with the `npages` 8-byte page addresses of the
    /// table at guest-physical `table`, for a region of `length` bytes
    /// starting `first_offset` bytes into the first page. `max` bounds
    /// `npages`. On error the list is left empty.
    pub fn load(
        &mut self,
        mem: &GuestMemory,
        table: u64,
        npages: u32,
        first_offset: u64,
        length: u64,
        max: u32,
    ) -> Result<(), PageListError> {
        self.pages.clear();
        let covered = pages_covering(first_offset, length).ok_or(PageListError::Invalid)?;
        if npages == 0
            || npages > max
            || !table.is_multiple_of(8)
            || first_offset >= PAGE_SIZE
            || length == 0
            || covered != u64::from(npages)
        {
            return Err(PageListError::Invalid);
        }
        let mut raw = vec![0u8; npages as usize * 8];
        mem.read(table, &mut raw)
            .map_err(|_| PageListError::Fault)?;
        for b in raw.chunks_exact(8) {
            let page = u64::from_le_bytes(b.try_into().unwrap_or_default());
            if !page.is_multiple_of(PAGE_SIZE) || page.checked_add(PAGE_SIZE - 1).is_none() {
                self.pages.clear();
                return Err(PageListError::Invalid);
            }
            self.pages.push(page);
        }
        self.first_offset = first_offset;
        Ok(())
    }

    /// Pushes the ranges of region bytes `[off, off + len)` to `out`.
    /// `OutOfBounds` past the last page (the caller checked the region's
    /// bounds, so only for an inconsistent list).
    pub fn translate(&self, off: u64, len: u64, out: &mut GpaRanges) -> Result<(), AccessError> {
        let mut pos = self
            .first_offset
            .checked_add(off)
            .ok_or(AccessError::OutOfBounds)?;
        let mut left = len;
        while left > 0 {
            let page = usize::try_from(pos / PAGE_SIZE).map_err(|_| AccessError::OutOfBounds)?;
            let base = *self.pages.get(page).ok_or(AccessError::OutOfBounds)?;
            let within = pos % PAGE_SIZE;
            let n = left.min(PAGE_SIZE - within);
            out.push(GpaRange {
                gpa: base + within,
                len: n,
            });
            pos += n;
            left -= n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testmem::TestMem;
    use super::*;

    fn r(gpa: u64, len: u64) -> GpaRange {
        GpaRange { gpa, len }
    }

    fn table(m: &TestMem, at: u64, pages: &[u64]) {
        let bytes: Vec<u8> = pages.iter().flat_map(|p| p.to_le_bytes()).collect();
        m.mem.write(at, &bytes).unwrap();
    }

    #[test]
    fn ranges_merge_and_spill_past_the_inline_slots() {
        let mut g = GpaRanges::default();
        g.push(r(0x1000, 0x10));
        g.push(r(0x1010, 0x10));
        assert_eq!(*g, [r(0x1000, 0x20)]);
        for i in 0..20u64 {
            g.push(r(0x10_0000 + 0x2000 * i, 8));
        }
        assert_eq!(g.len(), 21);
        assert_eq!(g[20], r(0x10_0000 + 0x2000 * 19, 8));
        g.push(r(0x10_0000 + 0x2000 * 19 + 8, 8));
        assert_eq!(g.len(), 21, "merged after the spill too");
    }

    #[test]
    fn a_page_list_translates_across_pages() {
        let m = TestMem::new(1 << 20);
        table(&m, 0x100, &[0x5000, 0x2000, 0x3000]);
        let mut l = PageList::with_capacity(4);
        l.load(&m.mem, 0x100, 3, 0x800, 0x2000, 4).unwrap();
        let mut g = GpaRanges::default();
        l.translate(0x700, 0x1200, &mut g).unwrap();
        // 0x800 + 0x700 = 0xf00 in page 0, then page 1 whole-ish, merged
        // with page 2 (0x2000 and 0x3000 are contiguous).
        assert_eq!(*g, [r(0x5f00, 0x100), r(0x2000, 0x1100)]);
        let mut g = GpaRanges::default();
        assert_eq!(
            l.translate(0x2000, 0x1801, &mut g),
            Err(AccessError::OutOfBounds)
        );
    }

    #[test]
    fn bad_page_lists_are_refused() {
        let m = TestMem::new(1 << 20);
        table(&m, 0x100, &[0x5000, 0x2001]);
        let mut l = PageList::with_capacity(4);
        let e = |l: &mut PageList, table, n, first, len, max| {
            l.load(&m.mem, table, n, first, len, max).unwrap_err()
        };
        assert_eq!(e(&mut l, 0x100, 2, 0, 0x2000, 4), PageListError::Invalid);
        assert!(l.pages.is_empty(), "nothing kept of a refused list");
        assert_eq!(e(&mut l, 0x100, 0, 0, 0, 4), PageListError::Invalid);
        assert_eq!(e(&mut l, 0x100, 1, 0, 0x1000, 0), PageListError::Invalid);
        assert_eq!(e(&mut l, 0x104, 1, 0, 0x1000, 4), PageListError::Invalid);
        assert_eq!(e(&mut l, 0x100, 1, 0x1000, 1, 4), PageListError::Invalid);
        assert_eq!(e(&mut l, 0x100, 2, 0, 0x1000, 4), PageListError::Invalid);
        assert_eq!(e(&mut l, 0x100, 1, 1, u64::MAX, 4), PageListError::Invalid);
        assert_eq!(e(&mut l, 0xffff8, 2, 0, 0x2000, 4), PageListError::Fault);
        assert_eq!(e(&mut l, 1 << 40, 1, 0, 1, 4), PageListError::Fault);
        l.load(&m.mem, 0x100, 1, 0xfff, 1, 1).unwrap();
        assert_eq!(l.pages, [0x5000]);
    }
}
