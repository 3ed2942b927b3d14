//! The simulated RAM mapped into the test process, for a simulated guest's
//! fast paths: bounds-checked loads and stores the device may race with.

use std::os::fd::AsRawFd;

use vm_memory::ByteValued;

use super::RAM_BASE;

/// The simulated RAM mapped into this process, as a guest sees its RAM: the
/// fast paths ([`SimGuest::try_poll_cq`], [`SimGuest::post_send_batch`], …)
/// load and store through it instead of `pread`/`pwrite` on the memfd.
pub(super) struct RamMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; nothing in
// it is tied to the thread that created it.
unsafe impl Send for RamMap {}

impl RamMap {
    pub(super) fn new(file: &std::fs::File, len: u64) -> Self {
        let len = usize::try_from(len).expect("RAM size fits in usize");
        // SAFETY: a fresh shared mapping of `len` bytes of a memfd we own
        // (sized to `len`); the kernel picks the address. Checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert!(
            ptr != libc::MAP_FAILED,
            "mmap of the simulated RAM: {}",
            std::io::Error::last_os_error()
        );
        RamMap {
            ptr: ptr.cast(),
            len,
        }
    }

    /// Pointer to `size` bytes at guest-physical `gpa` (bounds checked).
    pub(super) fn at(&self, gpa: u64, size: usize) -> *mut u8 {
        let off = gpa
            .checked_sub(RAM_BASE)
            .and_then(|o| usize::try_from(o).ok())
            .filter(|&o| o.checked_add(size).is_some_and(|end| end <= self.len))
            .unwrap_or_else(|| panic!("{gpa:#x}+{size} outside the simulated RAM"));
        // SAFETY: `off + size <= len`, inside the mapping.
        unsafe { self.ptr.add(off) }
    }

    pub(super) fn store<T: ByteValued>(&self, gpa: u64, v: &T) {
        let bytes = v.as_slice();
        let dst = self.at(gpa, bytes.len());
        // SAFETY: `dst` has room for `bytes` (checked by `at`); the device
        // may read the same memory concurrently, as real hardware would, but
        // not before the doorbell that follows this store.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) };
    }

    /// Volatile load of the byte at `gpa` (the device writes it concurrently).
    pub(super) fn load_u8(&self, gpa: u64) -> u8 {
        // SAFETY: in bounds (checked by `at`); a byte load is always aligned.
        unsafe { std::ptr::read_volatile(self.at(gpa, 1)) }
    }

    /// One 16-bit load at the even `gpa` with acquire ordering: a field the
    /// device stores at once (a command's status) is seen whole.
    pub(super) fn load_u16(&self, gpa: u64) -> u16 {
        assert!(gpa.is_multiple_of(2), "{gpa:#x} is odd");
        let p = self.at(gpa, 2).cast::<u16>();
        // SAFETY: in bounds (checked by `at`) and 2-byte aligned (the map
        // is page-aligned and `gpa` even); the device stores this field with
        // one atomic store, so an atomic load of it is the right pair.
        let v = unsafe { std::sync::atomic::AtomicU16::from_ptr(p) }
            .load(std::sync::atomic::Ordering::Acquire);
        u16::from_le(v)
    }

    pub(super) fn load<T: ByteValued + Default>(&self, gpa: u64) -> T {
        let mut v = T::default();
        let out = v.as_mut_slice();
        let src = self.at(gpa, out.len());
        for (i, b) in out.iter_mut().enumerate() {
            // SAFETY: `src + i` is in bounds (checked by `at`); volatile
            // because the device writes this memory behind our back.
            *b = unsafe { std::ptr::read_volatile(src.add(i)) };
        }
        v
    }
}

impl Drop for RamMap {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping created in `new`; no reference
        // into it outlives `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
