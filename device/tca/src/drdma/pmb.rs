//! The packet memory block pool (seed 000, Figure 4 and Figure 17).
//!
//! Each PMB is one range of payload (4096 bytes). The payloads live in one
//! shared-memory file, page `n` for PMB `n`, so the mapped window can hand
//! QEMU the same pages the device sends from. The seed's header area in
//! front of the payload has no counterpart: the transport builds each
//! packet's headers in the packet itself (ARCHITECTURE.md, "Direct RDMA").
//!
//! At init the driver dedicates some PMBs to DRDMA (the rest stay with
//! ordinary traffic); a submit takes a dedicated PMB from the free list (or
//! the one the driver names) and the ARR holds it until the transfer ends.
//! Free PMBs return to the back of the list, so the range → PMB mapping
//! wanders over time, as in the seed's Figure 19b.

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
        let size = u64::from(count) * u64::from(RANGE_SIZE);
        let file = Arc::new(
            crate::memfd::create_size_sealed("ibtca-pmb", size)
                .map_err(|e| PmbError::Memory(format!("memfd: {e}")))?,
        );
        let region = MmapRegion::from_file(FileOffset::from_arc(file.clone(), 0), size as usize)
            .map_err(|e| PmbError::Memory(e.to_string()))?;
        let region = GuestRegionMmap::new(region, GuestAddress(0))
            .ok_or_else(|| PmbError::Memory("region".into()))?;
        let mem = GuestMemoryMmap::from_regions(vec![region])
            .map_err(|e| PmbError::Memory(e.to_string()))?;
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

    /// Takes a free dedicated PMB: `want`, or the next in the free list.
    pub fn alloc(&mut self, want: Option<u32>) -> Option<u32> {
        match want {
            Some(p) => {
                let i = self.free.iter().position(|&f| f == p)?;
                self.free.remove(i)
            }
            None => self.free.pop_front(),
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
}
