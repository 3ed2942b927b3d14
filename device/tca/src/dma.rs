//! Guest memory as the client maps it (`DMA_MAP`/`DMA_UNMAP`), and the one
//! bounds-checked path through which the device touches it.
//!
//! Each map with a file descriptor is mmapped with vm-memory; the set of maps
//! is published through a [`GuestMemoryAtomic`], so threads that do DMA take a
//! cheap snapshot while the vfio-user thread changes the maps. A map without a
//! file descriptor (ROM, or guest RAM that is not `share=on`) is recorded but
//! cannot be reached: DMA there fails with [`DmaError::OutOfBounds`].
//!
//! Unmaps need not match earlier maps: QEMU maps and unmaps sub-ranges while
//! the firmware starts (PAM), so an unmap splits the maps it cuts and keeps
//! the parts outside it.
//!
//! A client may shrink a file it mapped. A memfd sealed against shrinking
//! cannot; any other file (an unsealed memfd, tmpfs, hugetlbfs, a disk
//! file) is guarded by [`crate::fault_guard`]: a shrink turns the map into
//! zero pages instead of a `SIGBUS`, and every access to it from then on
//! fails with [`DmaError::Truncated`]. A map's guard lives until no
//! snapshot ([`GuestMemory::pinned`]) can reach its mapping any more.
//! At most [`MAX_DMA_MAPS`] maps exist at once (`ENOSPC` past that; the
//! VERSION reply says so as `max_dma_maps`).

use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryAtomic, GuestMemoryMmap, GuestRegionMmap,
    MemoryRegionAddress, MmapRegion,
};

/// Maps a client may hold at once.
pub const MAX_DMA_MAPS: usize = 1024;

/// Why a map, unmap or access failed.
#[derive(Debug, thiserror::Error)]
pub enum DmaError {
    /// Zero size or an address range that wraps.
    #[error("invalid DMA range {iova:#x}+{size:#x}")]
    InvalidRange {
        /// Start address.
        iova: u64,
        /// Size in bytes.
        size: u64,
    },
    /// The new map overlaps an existing one.
    #[error("DMA map {iova:#x}+{size:#x} overlaps an existing map")]
    Overlap {
        /// Start address.
        iova: u64,
        /// Size in bytes.
        size: u64,
    },
    /// mmap of the client's file failed.
    #[error("cannot mmap DMA region {iova:#x}+{size:#x}: {reason}")]
    Mmap {
        /// Start address.
        iova: u64,
        /// Size in bytes.
        size: u64,
        /// What vm-memory said.
        reason: String,
    },
    /// [`MAX_DMA_MAPS`] maps exist already.
    #[error("more than {MAX_DMA_MAPS} DMA maps")]
    TooMany,
    /// The client shrank the file behind this guest memory after mapping
    /// it: the map is dead (zero pages) until the client unmaps it.
    #[error("DMA access {addr:#x}+{len:#x} hits a map whose file the client truncated")]
    Truncated {
        /// Guest address.
        addr: u64,
        /// Length in bytes.
        len: usize,
    },
    /// The device tried to touch guest memory that is not mapped.
    #[error("DMA access {addr:#x}+{len:#x} is outside mapped guest memory")]
    OutOfBounds {
        /// Guest address.
        addr: u64,
        /// Length in bytes.
        len: usize,
    },
}

/// One `DMA_MAP` as the client sent it (possibly trimmed by unmaps).
#[derive(Debug)]
struct Mapping {
    iova: u64,
    size: u64,
    /// The client's file and the offset of `iova` in it; `None` when the
    /// client sent no fd.
    backing: Option<(Arc<File>, u64)>,
    /// The `SIGBUS` guard of `region`, when its file can shrink. Declared
    /// before `region`: dropped first, once nothing else holds the region.
    guard: Option<crate::fault_guard::Guarded>,
    region: Option<Arc<GuestRegionMmap>>,
}

impl Mapping {
    fn end(&self) -> u64 {
        self.iova + self.size
    }

    fn new(iova: u64, size: u64, backing: Option<(Arc<File>, u64)>) -> Result<Self, DmaError> {
        let region = match &backing {
            None => None,
            Some((file, offset)) => {
                let mmap_err = |reason: String| DmaError::Mmap { iova, size, reason };
                // A mapping past the end of the file would SIGBUS on access.
                let meta = file.metadata().map_err(|e| mmap_err(e.to_string()))?;
                if !meta.file_type().is_file() {
                    return Err(mmap_err(
                        "not a regular file (memfd, tmpfs or hugetlbfs)".into(),
                    ));
                }
                if offset.checked_add(size).is_none_or(|end| end > meta.len()) {
                    return Err(mmap_err(format!(
                        "file is {} bytes, map needs {}",
                        meta.len(),
                        offset.saturating_add(size)
                    )));
                }
                let len = usize::try_from(size).map_err(|e| mmap_err(e.to_string()))?;
                let fo = FileOffset::from_arc(file.clone(), *offset);
                let mmap = MmapRegion::from_file(fo, len).map_err(|e| mmap_err(e.to_string()))?;
                let region = GuestRegionMmap::new(mmap, GuestAddress(iova))
                    .ok_or_else(|| mmap_err("address range overflows".into()))?;
                Some(Arc::new(region))
            }
        };
        let guard = match (&backing, &region) {
            (Some((file, _)), Some(r)) if !crate::memfd::shrink_is_sealed(file) => {
                use vm_memory::GuestMemoryRegion;
                let host =
                    r.get_host_address(MemoryRegionAddress(0))
                        .map_err(|e| DmaError::Mmap {
                            iova,
                            size,
                            reason: e.to_string(),
                        })?;
                Some(
                    crate::fault_guard::guard(host, r.len() as usize).map_err(|e| {
                        DmaError::Mmap {
                            iova,
                            size,
                            reason: e.to_string(),
                        }
                    })?,
                )
            }
            _ => None,
        };
        Ok(Mapping {
            iova,
            size,
            backing,
            guard,
            region,
        })
    }

    /// True when the client shrank this map's file under it.
    fn is_poisoned(&self) -> bool {
        self.guard.as_ref().is_some_and(|g| g.is_poisoned())
    }

    /// True while a snapshot still holds this map's region.
    fn in_use(&self) -> bool {
        self.region
            .as_ref()
            .is_some_and(|r| Arc::strong_count(r) > 1)
    }

    /// The part of this map in `[start, end)`, re-mapped on its own.
    fn slice(&self, start: u64, end: u64) -> Result<Self, DmaError> {
        let backing = self
            .backing
            .as_ref()
            .map(|(f, off)| (f.clone(), off + (start - self.iova)));
        Mapping::new(start, end - start, backing)
    }
}

/// Cloneable handle for DMA into guest memory. Every device access to guest
/// memory goes through [`GuestMemory::read`] or [`GuestMemory::write`].
///
/// Each access takes the current maps from the [`GuestMemoryAtomic`] (an
/// `arc_swap` load and release, which costs more than a small DMA). A
/// thread that makes many accesses in a row can take one snapshot for all
/// of them with [`GuestMemory::pinned`]: the handle it returns keeps the
/// maps of that moment (and their mmaps) alive until it is dropped.
#[derive(Clone)]
pub struct GuestMemory {
    mem: GuestMemoryAtomic<GuestMemoryMmap>,
    /// The maps of the moment [`GuestMemory::pinned`] was called.
    pinned: Option<Arc<GuestMemoryMmap>>,
}

impl std::fmt::Debug for GuestMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GuestMemory")
    }
}

impl GuestMemory {
    /// Reads `buf.len()` bytes at guest address `addr`.
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let oob = || DmaError::OutOfBounds {
            addr,
            len: buf.len(),
        };
        addr.checked_add(buf.len() as u64).ok_or_else(oob)?;
        let len = buf.len();
        self.with_maps(|mem| {
            match region_of(mem, addr, len) {
                Some((region, at)) => region.read_slice(buf, at),
                None => mem.read_slice(buf, GuestAddress(addr)),
            }
            .map_err(|_| DmaError::OutOfBounds { addr, len })?;
            check_truncated(mem, addr, len)
        })
    }

    /// Appends the `len` bytes at guest address `addr` to `out` (written
    /// once, not zero-filled first). Nothing is appended unless the whole
    /// range is mapped.
    pub fn read_append(&self, addr: u64, len: usize, out: &mut Vec<u8>) -> Result<(), DmaError> {
        use vm_memory::Bytes;
        let oob = || DmaError::OutOfBounds { addr, len };
        addr.checked_add(len as u64).ok_or_else(oob)?;
        let start = out.len();
        let r = self.with_maps(|mem| {
            match region_of(mem, addr, len) {
                Some((region, at)) => region.write_all_volatile_to(at, out, len).map_err(drop),
                None => mem
                    .write_all_volatile_to(GuestAddress(addr), out, len)
                    .map_err(drop),
            }
            .map_err(|()| oob())?;
            check_truncated(mem, addr, len)
        });
        if r.is_err() || out.len() != start + len {
            out.truncate(start);
            return Err(r.err().unwrap_or_else(oob));
        }
        Ok(())
    }

    /// A handle that uses the maps of this moment for every access until it
    /// is dropped (instead of loading the current maps per access). Maps
    /// added later are not visible through it; maps removed later stay
    /// mapped while it lives. For a burst of accesses, not for keeping.
    pub fn pinned(&self) -> GuestMemory {
        use vm_memory::GuestAddressSpace;
        GuestMemory {
            mem: self.mem.clone(),
            pinned: Some(self.mem.memory().into_inner()),
        }
    }

    /// Runs `f` on the pinned maps, or on the current ones.
    fn with_maps<R>(&self, f: impl FnOnce(&GuestMemoryMmap) -> R) -> R {
        use vm_memory::GuestAddressSpace;
        match &self.pinned {
            Some(maps) => f(maps),
            None => f(&self.mem.memory()),
        }
    }

    /// True when all of `addr..addr + len` is mapped guest memory now.
    pub fn is_mapped(&self, addr: u64, len: u64) -> bool {
        let Ok(n) = usize::try_from(len) else {
            return false;
        };
        if n == 0 {
            return true;
        }
        addr.checked_add(len - 1).is_some()
            && self.with_maps(|mem| {
                vm_memory::GuestMemoryBackend::check_range(mem, GuestAddress(addr), n)
            })
    }

    /// Stores the 16-bit `val` at `addr` as one store with release
    /// ordering, for a field the guest polls (a command's status): the
    /// guest sees the old value or the new one, never a byte of each, which
    /// [`GuestMemory::write`] does not promise (it copies a buffer of
    /// unknown alignment byte by byte). An odd `addr` cannot be stored at
    /// once and is written as bytes.
    pub fn store_u16(&self, addr: u64, val: u16) -> Result<(), DmaError> {
        if !addr.is_multiple_of(2) {
            return self.write(addr, &val.to_le_bytes());
        }
        self.store_atomic(addr, val.to_le())
    }

    /// Stores the 32-bit `val` at `addr` as one store with release
    /// ordering (a word the guest polls); an unaligned `addr` is written as
    /// bytes.
    pub fn store_u32(&self, addr: u64, val: u32) -> Result<(), DmaError> {
        if !addr.is_multiple_of(4) {
            return self.write(addr, &val.to_le_bytes());
        }
        self.store_atomic(addr, val.to_le())
    }

    /// Loads the 32-bit value at `addr` as one load with acquire ordering
    /// (a word the guest stores while the device reads); an unaligned
    /// `addr` is read as bytes.
    pub fn load_u32(&self, addr: u64) -> Result<u32, DmaError> {
        if !addr.is_multiple_of(4) {
            let mut b = [0; 4];
            self.read(addr, &mut b)?;
            return Ok(u32::from_le_bytes(b));
        }
        self.with_maps(|mem| {
            use vm_memory::Bytes;
            let v: u32 = mem
                .load(GuestAddress(addr), Ordering::Acquire)
                .map_err(|_| DmaError::OutOfBounds { addr, len: 4 })?;
            check_truncated(mem, addr, 4)?;
            Ok(u32::from_le(v))
        })
    }

    fn store_atomic<T: vm_memory::AtomicAccess>(&self, addr: u64, val: T) -> Result<(), DmaError> {
        let len = std::mem::size_of::<T>();
        self.with_maps(|mem| {
            use vm_memory::Bytes;
            mem.store(val, GuestAddress(addr), Ordering::Release)
                .map_err(|_| DmaError::OutOfBounds { addr, len })?;
            check_truncated(mem, addr, len)
        })
    }

    /// Writes `buf` at guest address `addr`. Nothing is written unless the
    /// whole range is mapped.
    pub fn write(&self, addr: u64, buf: &[u8]) -> Result<(), DmaError> {
        let oob = || DmaError::OutOfBounds {
            addr,
            len: buf.len(),
        };
        if buf.is_empty() {
            return Ok(());
        }
        addr.checked_add(buf.len() as u64 - 1).ok_or_else(oob)?;
        self.with_maps(|mem| {
            if let Some((region, at)) = region_of(mem, addr, buf.len()) {
                region.write_slice(buf, at).map_err(|_| oob())?;
                return check_truncated(mem, addr, buf.len());
            }
            // vm-memory writes region by region: check the whole range first
            // so that a write running off the end changes nothing.
            if !vm_memory::GuestMemoryBackend::check_range(mem, GuestAddress(addr), buf.len()) {
                return Err(oob());
            }
            mem.write_slice(buf, GuestAddress(addr))
                .map_err(|_| oob())?;
            check_truncated(mem, addr, buf.len())
        })
    }
}

/// After an access to `addr..addr + len`: an error if any map it touched
/// was poisoned (its file truncated by the client), now or before. Costs
/// one atomic load while no map has ever been poisoned.
fn check_truncated(mem: &GuestMemoryMmap, addr: u64, len: usize) -> Result<(), DmaError> {
    use vm_memory::{GuestMemoryBackend, GuestMemoryRegion};
    if crate::fault_guard::poisoned_count() == 0 {
        return Ok(());
    }
    let end = addr.saturating_add(len as u64);
    let hit = mem.iter().any(|r| {
        let (start, rend) = (r.start_addr().0, r.start_addr().0 + r.len());
        start < end
            && addr < rend
            && r.get_host_address(MemoryRegionAddress(0))
                .is_ok_and(|p| crate::fault_guard::poisoned_at(p, r.len() as usize))
    });
    if hit {
        crate::guest_warn!(
            addr = format_args!("{addr:#x}"),
            len,
            "DMA into a map whose file the client truncated: failed"
        );
        return Err(DmaError::Truncated { addr, len });
    }
    Ok(())
}

/// The one region that holds all of `addr..addr + len`, and the offset of
/// `addr` in it: the common case, accessed without vm-memory's walk over
/// regions (an iterator and a range check per access, which costs more
/// than a CQE's copy). `None` when the range is not inside one region.
fn region_of(
    mem: &GuestMemoryMmap,
    addr: u64,
    len: usize,
) -> Option<(&GuestRegionMmap, MemoryRegionAddress)> {
    use vm_memory::{GuestMemoryBackend, GuestMemoryRegion};
    let region = mem.find_region(GuestAddress(addr))?;
    let offset = addr.checked_sub(region.start_addr().0)?;
    let end = offset.checked_add(u64::try_from(len).ok()?)?;
    (end <= region.len()).then_some((region, MemoryRegionAddress(offset)))
}

/// The client's DMA maps. Owned by the transport thread; hands out
/// [`GuestMemory`] handles to whoever does DMA.
pub struct DmaMaps {
    maps: Vec<Mapping>,
    mem: GuestMemoryAtomic<GuestMemoryMmap>,
    /// Maps removed while a snapshot still held their region: kept (with
    /// their guards) until it lets go.
    retired: Vec<Mapping>,
}

impl Default for DmaMaps {
    fn default() -> Self {
        DmaMaps {
            maps: Vec::new(),
            mem: GuestMemoryAtomic::new(GuestMemoryMmap::new()),
            retired: Vec::new(),
        }
    }
}

impl DmaMaps {
    /// A handle for DMA through the current and future maps.
    pub fn guest_memory(&self) -> GuestMemory {
        GuestMemory {
            mem: self.mem.clone(),
            pinned: None,
        }
    }

    /// Number of maps (including ones without a file).
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// True when nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// True when at least one map can be reached by DMA.
    pub fn has_accessible(&self) -> bool {
        self.maps.iter().any(|m| m.region.is_some())
    }

    /// Adds a map of `size` bytes at `iova`, backed by `file` at `offset`.
    pub fn map(
        &mut self,
        iova: u64,
        size: u64,
        file: Option<File>,
        offset: u64,
    ) -> Result<(), DmaError> {
        if size == 0 || iova.checked_add(size).is_none() {
            return Err(DmaError::InvalidRange { iova, size });
        }
        if self.maps.len() >= MAX_DMA_MAPS {
            return Err(DmaError::TooMany);
        }
        if self
            .maps
            .iter()
            .any(|m| iova < m.end() && m.iova < iova + size)
        {
            return Err(DmaError::Overlap { iova, size });
        }
        if file.is_none() {
            tracing::debug!(
                iova,
                size,
                "DMA map without fd: not reachable by the device"
            );
        }
        self.reap();
        let m = Mapping::new(iova, size, file.map(|f| (Arc::new(f), offset)))?;
        self.maps.push(m);
        self.maps.sort_by_key(|m| m.iova);
        self.publish();
        Ok(())
    }

    /// Removes `[iova, iova + size)` from the maps, splitting any map it cuts.
    /// Returns the number of bytes that were mapped in that range.
    pub fn unmap(&mut self, iova: u64, size: u64) -> Result<u64, DmaError> {
        let end = iova
            .checked_add(size)
            .filter(|_| size != 0)
            .ok_or(DmaError::InvalidRange { iova, size })?;
        let mut kept = Vec::with_capacity(self.maps.len() + 1);
        let mut removed = 0;
        let mut gone = Vec::new();
        for m in self.maps.drain(..) {
            if m.end() <= iova || end <= m.iova {
                kept.push(m);
                continue;
            }
            removed += m.end().min(end) - m.iova.max(iova);
            if m.iova < iova {
                push_slice(&mut kept, &m, m.iova, iova);
            }
            if end < m.end() {
                push_slice(&mut kept, &m, end, m.end());
            }
            gone.push(m);
        }
        self.maps = kept;
        self.publish();
        self.retired.extend(gone);
        self.reap();
        Ok(removed)
    }

    /// Removes every map.
    pub fn clear(&mut self) {
        let gone = std::mem::take(&mut self.maps);
        self.publish();
        self.retired.extend(gone);
        self.reap();
    }

    /// Maps removed earlier and still held by a snapshot.
    pub fn retired(&self) -> usize {
        self.retired.len()
    }

    /// Drops the retired maps no snapshot holds any more.
    fn reap(&mut self) {
        self.retired.retain(Mapping::in_use);
    }

    /// True when the client shrank the file of a map it still has.
    pub fn any_truncated(&self) -> bool {
        self.maps.iter().any(Mapping::is_poisoned)
    }

    fn publish(&self) {
        let regions: Vec<_> = self.maps.iter().filter_map(|m| m.region.clone()).collect();
        let mem = if regions.is_empty() {
            GuestMemoryMmap::new()
        } else {
            // Maps never overlap and are sorted, so this cannot fail.
            GuestMemoryMmap::from_arc_regions(regions).unwrap_or_default()
        };
        self.mem
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(mem);
    }
}

fn push_slice(kept: &mut Vec<Mapping>, m: &Mapping, start: u64, end: u64) {
    match m.slice(start, end) {
        Ok(s) => kept.push(s),
        Err(e) => {
            tracing::error!(error = %e, "cannot keep the rest of a split DMA map; dropping it")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};
    use vmm_sys_util::tempfile::TempFile;

    fn backing(len: u64) -> File {
        let f = TempFile::new().unwrap().into_file();
        f.set_len(len).unwrap();
        f
    }

    fn file_bytes(f: &File, off: u64, len: usize) -> Vec<u8> {
        let mut f = f.try_clone().unwrap();
        f.seek(SeekFrom::Start(off)).unwrap();
        let mut v = vec![0; len];
        f.read_exact(&mut v).unwrap();
        v
    }

    #[test]
    fn write_lands_in_the_clients_file() {
        let f = backing(0x4000);
        let mut maps = DmaMaps::default();
        maps.map(0x10_0000, 0x2000, Some(f.try_clone().unwrap()), 0x1000)
            .unwrap();
        let gm = maps.guest_memory();
        gm.write(0x10_0ff0, b"hello, guest").unwrap();
        assert_eq!(file_bytes(&f, 0x1ff0, 12), b"hello, guest");
        let mut back = [0; 12];
        gm.read(0x10_0ff0, &mut back).unwrap();
        assert_eq!(&back, b"hello, guest");
    }

    #[test]
    fn read_append_appends_exactly_the_range_or_nothing() {
        // Two adjacent maps (two regions): a range across both reads too.
        let (f1, f2) = (backing(0x1000), backing(0x1000));
        let mut maps = DmaMaps::default();
        maps.map(0x1000, 0x1000, Some(f1.try_clone().unwrap()), 0)
            .unwrap();
        maps.map(0x2000, 0x1000, Some(f2.try_clone().unwrap()), 0)
            .unwrap();
        let gm = maps.guest_memory();
        let data: Vec<u8> = (0..0x40u8).collect();
        gm.write(0x1fe0, &data).unwrap();
        let mut out = vec![9, 9];
        gm.read_append(0x1fe0, 0x20, &mut out).unwrap();
        gm.read_append(0x2000, 0x20, &mut out).unwrap();
        gm.read_append(0x1ff0, 0x20, &mut out).unwrap();
        let mut want = vec![9, 9];
        want.extend_from_slice(&data);
        want.extend_from_slice(&data[0x10..0x30]);
        assert_eq!(out, want);
        // Past the maps, wrapping, or unmapped: nothing appended.
        for (addr, len) in [(0x2ff0, 0x20), (u64::MAX - 2, 8), (0x8000, 1)] {
            assert!(gm.read_append(addr, len, &mut out).is_err(), "{addr:#x}");
            assert_eq!(out, want);
        }
    }

    #[test]
    fn out_of_bounds_is_an_error_and_writes_nothing() {
        let f = backing(0x1000);
        let mut maps = DmaMaps::default();
        maps.map(0x1000, 0x1000, Some(f.try_clone().unwrap()), 0)
            .unwrap();
        let gm = maps.guest_memory();
        assert!(matches!(
            gm.write(0x1ffc, &[1; 8]),
            Err(DmaError::OutOfBounds { .. })
        ));
        assert_eq!(
            file_bytes(&f, 0xffc, 4),
            [0; 4],
            "partial write must not happen"
        );
        assert!(gm.write(u64::MAX - 2, &[1; 8]).is_err());
        let mut b = [0; 4];
        assert!(gm.read(0, &mut b).is_err());
        assert!(gm.read(u64::MAX, &mut b).is_err());
    }

    #[test]
    fn overlapping_and_empty_maps_are_rejected() {
        let mut maps = DmaMaps::default();
        maps.map(0x1000, 0x2000, Some(backing(0x2000)), 0).unwrap();
        assert!(matches!(
            maps.map(0x2000, 0x1000, Some(backing(0x1000)), 0),
            Err(DmaError::Overlap { .. })
        ));
        assert!(matches!(
            maps.map(0x5000, 0, None, 0),
            Err(DmaError::InvalidRange { .. })
        ));
        assert!(matches!(
            maps.map(u64::MAX - 0xfff, 0x2000, None, 0),
            Err(DmaError::InvalidRange { .. })
        ));
    }

    #[test]
    fn unmap_in_the_middle_splits_the_map() {
        let f = backing(0x3000);
        let mut maps = DmaMaps::default();
        maps.map(0x0, 0x3000, Some(f.try_clone().unwrap()), 0)
            .unwrap();
        assert_eq!(maps.unmap(0x1000, 0x1000).unwrap(), 0x1000);
        assert_eq!(maps.len(), 2);
        let gm = maps.guest_memory();
        assert!(gm.write(0x1800, &[7]).is_err(), "hole is unmapped");
        gm.write(0x2000, &[9]).unwrap();
        assert_eq!(file_bytes(&f, 0x2000, 1), [9], "tail keeps its file offset");
        gm.write(0x0fff, &[5]).unwrap();
        assert_eq!(file_bytes(&f, 0xfff, 1), [5]);
        // Re-map the hole from another file and unmap across everything.
        maps.map(0x1000, 0x1000, Some(backing(0x1000)), 0).unwrap();
        assert_eq!(maps.unmap(0x800, 0x2000).unwrap(), 0x2000);
        assert_eq!(
            maps.unmap(0x10_0000, 0x1000).unwrap(),
            0,
            "unmapping nothing is fine"
        );
    }

    #[test]
    fn map_past_end_of_file_is_refused() {
        let mut maps = DmaMaps::default();
        assert!(matches!(
            maps.map(0, 0x2000, Some(backing(0x1000)), 0),
            Err(DmaError::Mmap { .. })
        ));
        assert!(matches!(
            maps.map(0, 0x1000, Some(backing(0x1000)), 0x800),
            Err(DmaError::Mmap { .. })
        ));
        assert!(maps.is_empty());
    }

    #[test]
    fn maps_without_fd_are_recorded_but_unreachable() {
        let mut maps = DmaMaps::default();
        maps.map(0xc0000, 0x20000, None, 0).unwrap();
        assert_eq!(maps.len(), 1);
        assert!(!maps.has_accessible());
        assert!(maps.guest_memory().write(0xc0000, &[1]).is_err());
        assert_eq!(maps.unmap(0xc8000, 0x8000).unwrap(), 0x8000);
        assert_eq!(maps.len(), 2);
    }

    #[test]
    fn a_file_shrunk_under_its_map_fails_accesses_instead_of_killing_the_device() {
        // A disk file (TempFile) and an unsealed memfd are guarded alike.
        for f in [
            backing(0x10000),
            crate::memfd::create("ibtca-test", 0x10000).unwrap(),
        ] {
            let mut maps = DmaMaps::default();
            maps.map(0x10_0000, 0x10000, Some(f.try_clone().unwrap()), 0)
                .unwrap();
            let gm = maps.guest_memory();
            gm.write(0x10_1000, b"before").unwrap();
            f.set_len(0).unwrap();
            assert!(matches!(
                gm.write(0x10_2000, b"after"),
                Err(DmaError::Truncated {
                    addr: 0x10_2000,
                    len: 5
                })
            ));
            let mut back = [0; 6];
            assert!(matches!(
                gm.read(0x10_1000, &mut back),
                Err(DmaError::Truncated { .. })
            ));
            let mut out = Vec::new();
            assert!(gm.read_append(0x10_1000, 6, &mut out).is_err() && out.is_empty());
            assert!(maps.any_truncated());
            // The client unmaps the dead map and maps fresh memory there.
            maps.unmap(0x10_0000, 0x10000).unwrap();
            let fresh = backing(0x10000);
            maps.map(0x10_0000, 0x10000, Some(fresh.try_clone().unwrap()), 0)
                .unwrap();
            maps.guest_memory().write(0x10_2000, b"again").unwrap();
            assert_eq!(file_bytes(&fresh, 0x2000, 5), b"again");
            assert!(!maps.any_truncated());
        }
    }

    #[test]
    fn a_memfd_sealed_against_shrinking_needs_no_guard() {
        let f = crate::memfd::create_size_sealed("ibtca-test", 0x4000).unwrap();
        let mut maps = DmaMaps::default();
        maps.map(0, 0x4000, Some(f), 0).unwrap();
        assert!(maps.maps[0].guard.is_none());
        let g = backing(0x4000);
        maps.map(0x4000, 0x4000, Some(g), 0).unwrap();
        assert!(maps.maps[1].guard.is_some(), "a disk file can shrink");
    }

    #[test]
    fn a_removed_map_keeps_its_guard_while_a_snapshot_holds_it() {
        let f = backing(0x4000);
        let mut maps = DmaMaps::default();
        maps.map(0, 0x4000, Some(f.try_clone().unwrap()), 0)
            .unwrap();
        let pinned = maps.guest_memory().pinned();
        maps.unmap(0, 0x4000).unwrap();
        assert_eq!(maps.retired(), 1, "the snapshot still reaches it");
        // The snapshot still works, and a shrink under it is still caught.
        pinned.write(0x1000, b"x").unwrap();
        f.set_len(0).unwrap();
        assert!(matches!(
            pinned.write(0x1000, b"y"),
            Err(DmaError::Truncated { .. })
        ));
        drop(pinned);
        maps.map(0x8000, 0x1000, None, 0).unwrap();
        assert_eq!(maps.retired(), 0, "reaped once nothing holds it");
    }

    #[test]
    fn maps_are_bounded() {
        let mut maps = DmaMaps::default();
        for i in 0..MAX_DMA_MAPS as u64 {
            maps.map(i * 0x1000, 0x1000, None, 0).unwrap();
        }
        let next = MAX_DMA_MAPS as u64 * 0x1000;
        assert!(matches!(
            maps.map(next, 0x1000, None, 0),
            Err(DmaError::TooMany)
        ));
        maps.unmap(0, 0x1000).unwrap();
        maps.map(next, 0x1000, None, 0).unwrap();
    }
}
