//! The packet memory block pool (seed 000, Figure 4 and Figure 17).
//!
//! Each PMB is one range of payload (4096 bytes). The payloads live in one
//! shared-memory file, page `n` for PMB `n`, so the mapped window can hand
//! QEMU the same pages the device sends from. The seed's header area in
//! front of the payload has no counterpart: the transport builds each
//! packet's headers in the packet itself (docs/drdma.md, "No header area in
//! the PMB").
//!
//! At init the driver dedicates some PMBs to DRDMA (the rest stay with
//! ordinary traffic); a submit takes a dedicated PMB from the free list (or
//! the one the driver names) and the ARR holds it until the transfer ends.
//! Free PMBs return to the back of the list, so the range → PMB mapping
//! wanders over time, as in the seed's Figure 19b.
//!
//! Isolation (docs/drdma-isolation.md): a PMB is all zeros whenever a
//! range takes it ([`PmbPool::alloc`]), so a transfer can only ever hold
//! its own bytes or zeros; a device reset zeroes every PMB
//! ([`PmbPool::zero_all`]); a new client gets payloads in a new file
//! ([`PmbPool::renew`]), so that a client that has gone, and may still
//! map the old file, shares no page with the next one.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;

use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryMmap, GuestRegionMmap, MmapRegion};

use super::decode::{pmb_payload_byte, RANGE_SIZE};

/// Why the pool could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PmbError {
    /// memfd_create, ftruncate or mmap failed.
    #[error("PMB memory: {0}")]
    Memory(String),
}

/// The pool.
pub struct PmbPool {
    file: Arc<File>,
    mem: GuestMemoryMmap,
    count: u32,
    dedicated: u32,
    free: VecDeque<u32>,
}

impl std::fmt::Debug for PmbPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmbPool")
            .field("count", &self.count)
            .field("dedicated", &self.dedicated)
            .field("free", &self.free.len())
            .finish()
    }
}

impl PmbPool {
    /// A pool of `count` PMBs with the first `dedicated` of them given to
    /// DRDMA.
    pub fn new(count: u32, dedicated: u32) -> Result<Self, PmbError> {
        let count = count.max(1);
        let (file, mem) = payload_memory(count)?;
        let mut pool = PmbPool {
            file,
            mem,
            count,
            dedicated: 0,
            free: VecDeque::new(),
        };
        pool.dedicate(dedicated);
        Ok(pool)
    }

    /// PMBs in the pool.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// PMBs dedicated to DRDMA.
    pub fn dedicated(&self) -> u32 {
        self.dedicated
    }

    /// The shared-memory file holding every payload (page `n` = PMB `n`).
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// Dedicates PMBs `0..n` (clamped to 1..=count) to DRDMA; every one of
    /// them is free afterwards. Call only while no range is busy.
    pub fn dedicate(&mut self, n: u32) {
        self.dedicated = n.clamp(1, self.count);
        self.free = (0..self.dedicated).collect();
    }

    /// Takes a free dedicated PMB, `want` or the next in the free list,
    /// and zeroes its payload: whatever an earlier transfer left there is
    /// gone before the new one can store, load or send a byte of it.
    pub fn alloc(&mut self, want: Option<u32>) -> Option<u32> {
        let pmb = match want {
            Some(p) => {
                let i = self.free.iter().position(|&f| f == p)?;
                self.free.remove(i)
            }
            None => self.free.pop_front(),
        }?;
        self.zero(pmb);
        Some(pmb)
    }

    /// Zeroes the payload of `pmb`.
    fn zero(&self, pmb: u32) {
        self.write(pmb, 0, &[0; RANGE_SIZE as usize]);
    }

    /// Zeroes every PMB's payload (device reset).
    pub fn zero_all(&self) {
        for pmb in 0..self.count {
            self.zero(pmb);
        }
    }

    /// Moves the payloads to a new, zeroed file (a new client). Whoever
    /// still maps the old file, a client that has gone included, reaches
    /// no page the device uses from now on. If no new file can be made,
    /// the old one is zeroed instead and the error returned.
    pub fn renew(&mut self) -> Result<(), PmbError> {
        match payload_memory(self.count) {
            Ok((file, mem)) => {
                self.file = file;
                self.mem = mem;
                Ok(())
            }
            Err(e) => {
                self.zero_all();
                Err(e)
            }
        }
    }

    /// Returns `pmb` to the free list.
    pub fn release(&mut self, pmb: u32) {
        if pmb < self.dedicated && !self.free.contains(&pmb) {
            self.free.push_back(pmb);
        }
    }

    /// Free dedicated PMBs.
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Copies payload bytes of `pmb` at `offset` into `out`.
    pub fn read(&self, pmb: u32, offset: u32, out: &mut [u8]) -> bool {
        self.in_payload(pmb, offset, out.len())
            && self
                .mem
                .read_slice(out, GuestAddress(pmb_payload_byte(pmb, offset)))
                .is_ok()
    }

    /// Copies `data` into the payload of `pmb` at `offset`.
    pub fn write(&self, pmb: u32, offset: u32, data: &[u8]) -> bool {
        self.in_payload(pmb, offset, data.len())
            && self
                .mem
                .write_slice(data, GuestAddress(pmb_payload_byte(pmb, offset)))
                .is_ok()
    }

    fn in_payload(&self, pmb: u32, offset: u32, len: usize) -> bool {
        pmb < self.count && u64::from(offset) + len as u64 <= u64::from(RANGE_SIZE)
    }
}

/// A sealed shared-memory file of `count` zeroed payloads and the device's
/// mapping of it.
fn payload_memory(count: u32) -> Result<(Arc<File>, GuestMemoryMmap), PmbError> {
    let size = u64::from(count) * u64::from(RANGE_SIZE);
    let file = Arc::new(
        crate::memfd::create_size_sealed("ibtca-pmb", size)
            .map_err(|e| PmbError::Memory(format!("memfd: {e}")))?,
    );
    let region = MmapRegion::from_file(FileOffset::from_arc(file.clone(), 0), size as usize)
        .map_err(|e| PmbError::Memory(e.to_string()))?;
    let region = GuestRegionMmap::new(region, GuestAddress(0))
        .ok_or_else(|| PmbError::Memory("region".into()))?;
    let mem =
        GuestMemoryMmap::from_regions(vec![region]).map_err(|e| PmbError::Memory(e.to_string()))?;
    Ok((file, mem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_any_order_and_release_to_the_back() {
        let mut p = PmbPool::new(64, 32).unwrap();
        assert_eq!(p.dedicated(), 32);
        assert_eq!(p.alloc(Some(31)), Some(31));
        assert_eq!(p.alloc(Some(31)), None, "taken");
        assert_eq!(p.alloc(Some(40)), None, "not dedicated");
        assert_eq!(p.alloc(None), Some(0));
        p.release(0);
        assert_eq!(p.alloc(None), Some(1));
        assert_eq!(p.free_count(), 30);
        p.release(31);
        p.release(31);
        assert_eq!(p.free_count(), 31, "double release is harmless");
        p.release(50);
        assert_eq!(p.free_count(), 31, "non-dedicated never enters the list");
    }

    #[test]
    fn payloads_are_separate_pages_of_one_file() {
        let p = PmbPool::new(4, 4).unwrap();
        assert!(p.write(1, 4090, &[1, 2, 3, 4, 5, 6]));
        assert!(!p.write(1, 4091, &[0; 6]), "past the payload");
        assert!(!p.write(4, 0, &[0]), "no such PMB");
        let mut b = [0u8; 6];
        assert!(p.read(1, 4090, &mut b));
        assert_eq!(b, [1, 2, 3, 4, 5, 6]);
        assert!(p.read(2, 0, &mut b));
        assert_eq!(b, [0; 6], "PMB 2 untouched");
        use std::io::{Read, Seek, SeekFrom};
        let mut f = p.file().as_ref();
        f.seek(SeekFrom::Start(4096 + 4090)).unwrap();
        let mut c = [0u8; 6];
        f.read_exact(&mut c).unwrap();
        assert_eq!(c, [1, 2, 3, 4, 5, 6], "page 1 of the file is PMB 1");
    }

    #[test]
    fn a_pmb_is_zeroed_when_taken_and_by_zero_all() {
        let mut p = PmbPool::new(4, 4).unwrap();
        for pmb in 0..4 {
            assert!(p.write(pmb, 0, &[0xab; 4096]));
        }
        assert_eq!(p.alloc(Some(2)), Some(2));
        let mut b = vec![0xffu8; 4096];
        assert!(p.read(2, 0, &mut b));
        assert_eq!(b, vec![0; 4096], "taken: zeroed");
        assert!(p.read(3, 0, &mut b));
        assert_eq!(b, vec![0xab; 4096], "not taken: untouched");
        p.zero_all();
        for pmb in 0..4 {
            assert!(p.read(pmb, 0, &mut b));
            assert_eq!(b, vec![0; 4096], "PMB {pmb} after zero_all");
        }
    }

    #[test]
    fn renew_leaves_the_old_file_to_whoever_maps_it() {
        use std::os::unix::fs::FileExt;
        let mut p = PmbPool::new(4, 4).unwrap();
        assert!(p.write(1, 0, &[7; 16]));
        let old = p.file().clone();
        p.renew().unwrap();
        assert!(!Arc::ptr_eq(&old, p.file()), "a new file");
        let mut b = [0xffu8; 16];
        assert!(p.read(1, 0, &mut b));
        assert_eq!(b, [0; 16], "the new file starts zeroed");
        // A departed client writing through its old mapping (here: the
        // old file) reaches nothing the pool uses.
        old.write_all_at(&[9; 16], 4096).unwrap();
        assert!(p.read(1, 0, &mut b));
        assert_eq!(b, [0; 16]);
        assert!(p.write(1, 0, &[5; 16]));
        let mut o = [0u8; 16];
        old.read_exact_at(&mut o, 4096).unwrap();
        assert_eq!(o, [9; 16], "and the pool writes nothing there");
    }
}
