//! Test helper: guest memory backed by a temporary file, mapped at 0.

use vm_memory::ByteValued;
use vmm_sys_util::tempfile::TempFile;

use crate::dma::{DmaMaps, GuestMemory};

/// `size` bytes of guest memory at guest-physical 0.
pub struct TestMem {
    _maps: DmaMaps,
    /// The accessor under test.
    pub mem: GuestMemory,
}

impl TestMem {
    /// Maps `size` zeroed bytes at 0.
    pub fn new(size: u64) -> Self {
        let f = TempFile::new().unwrap().into_file();
        f.set_len(size).unwrap();
        let mut maps = DmaMaps::default();
        maps.map(0, size, Some(f), 0).unwrap();
        let mem = maps.guest_memory();
        TestMem { _maps: maps, mem }
    }

    /// Reads a `T` at `gpa`.
    pub fn read_obj<T: ByteValued + Default>(&self, gpa: u64) -> T {
        let mut v = T::default();
        self.mem.read(gpa, v.as_mut_slice()).unwrap();
        v
    }

    /// Writes a `T` at `gpa`.
    pub fn write_obj<T: ByteValued>(&self, gpa: u64, v: &T) {
        self.mem.write(gpa, v.as_slice()).unwrap();
    }
}
