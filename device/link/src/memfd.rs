//! Anonymous shared-memory files (`memfd_create`): the DRDMA packet memory
//! blocks that QEMU maps, and the link's shared rings.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A new memfd named `name` (for `/proc/PID/fd` and `/proc/PID/maps`) of
/// `size` zero bytes, closed on exec.
pub fn create(name: &str, size: u64) -> io::Result<File> {
    create_with(name, size, libc::MFD_CLOEXEC)
}

/// Seals that fix a memfd's size for good: whoever maps it (another
/// process too) can never be cut short, so no access within the size it
/// had can fault with `SIGBUS`.
const SIZE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Like [`create`], and the size is sealed: a process that receives the
/// file can check that with [`size_is_sealed`] before it maps it.
pub fn create_size_sealed(name: &str, size: u64) -> io::Result<File> {
    let file = create_sealable(name, size)?;
    seal(&file, SIZE_SEALS)?;
    Ok(file)
}

/// Like [`create`], with sealing allowed: map it, then [`seal_writes`].
pub fn create_sealable(name: &str, size: u64) -> io::Result<File> {
    create_with(name, size, libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
}

/// Seals `file`'s size, and its contents against every writer but the
/// mappings that exist now (`F_SEAL_FUTURE_WRITE`): a process that
/// receives the file can only map it read-only, while this one keeps
/// writing through the mapping it made before. No seal can be added after.
pub fn seal_writes(file: &File) -> io::Result<()> {
    seal(file, SIZE_SEALS | libc::F_SEAL_FUTURE_WRITE)
}

fn seal(file: &File, seals: libc::c_int) -> io::Result<()> {
    // SAFETY: F_ADD_SEALS on a descriptor we own; no memory is passed.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The seals of `file` (0 for a file that is no memfd).
fn seals(file: &File) -> libc::c_int {
    // SAFETY: F_GET_SEALS on a descriptor we own; no memory is passed. A
    // file that is no memfd fails with EINVAL.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    seals.max(0)
}

/// Whether `file` is a memfd whose size can no longer change (see
/// [`create_size_sealed`]).
pub fn size_is_sealed(file: &File) -> bool {
    seals(file) & SIZE_SEALS == SIZE_SEALS
}

/// Whether `file` is a memfd that can no longer shrink (mapped, it can
/// never fault with `SIGBUS` within the size it has).
pub fn shrink_is_sealed(file: &File) -> bool {
    seals(file) & libc::F_SEAL_SHRINK != 0
}

/// Whether `file` is a memfd sealed by [`seal_writes`].
pub fn writes_are_sealed(file: &File) -> bool {
    let want = SIZE_SEALS | libc::F_SEAL_FUTURE_WRITE;
    seals(file) & want == want
}

fn create_with(name: &str, size: u64, flags: libc::c_uint) -> io::Result<File> {
    let cname =
        std::ffi::CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `cname` is a valid NUL-terminated string; the call has no
    // other memory effects.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a fresh descriptor that nothing else owns.
    let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.set_len(size)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_memfd_has_the_size_asked_and_reads_zero() {
        use std::io::Read;
        let mut f = super::create("ibtca-test", 8192).unwrap();
        assert_eq!(f.metadata().unwrap().len(), 8192);
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).unwrap();
        assert!(buf.len() == 8192 && buf.iter().all(|b| *b == 0));
        assert!(super::create("bad\0name", 1).is_err());
        assert!(!super::size_is_sealed(&f), "a plain memfd can be resized");
    }

    #[test]
    fn a_size_sealed_memfd_cannot_be_resized() {
        let f = super::create_size_sealed("ibtca-test", 8192).unwrap();
        assert!(super::size_is_sealed(&f));
        assert!(f.set_len(4096).is_err(), "shrinking is sealed");
        assert!(f.set_len(16384).is_err(), "growing is sealed");
        assert_eq!(f.metadata().unwrap().len(), 8192);
        // Another handle on the same file sees the seals too.
        assert!(super::size_is_sealed(&f.try_clone().unwrap()));
        assert!(!super::writes_are_sealed(&f));
    }

    #[test]
    fn a_write_sealed_memfd_keeps_its_mapping_writable_and_refuses_new_ones() {
        use std::io::Write;
        use vm_memory::{Bytes, FileOffset, MmapRegion, VolatileMemory};
        let f = super::create_sealable("ibtca-test", 4096).unwrap();
        let before =
            MmapRegion::<()>::from_file(FileOffset::new(f.try_clone().unwrap(), 0), 4096).unwrap();
        super::seal_writes(&f).unwrap();
        assert!(super::writes_are_sealed(&f) && super::size_is_sealed(&f));
        // The mapping made before the seal still writes.
        before.as_volatile_slice().write_slice(&[7], 0).unwrap();
        let ro = MmapRegion::<()>::build(
            Some(FileOffset::new(f.try_clone().unwrap(), 0)),
            4096,
            libc::PROT_READ,
            libc::MAP_SHARED,
        )
        .unwrap();
        let mut b = [0u8; 1];
        ro.as_volatile_slice().read_slice(&mut b, 0).unwrap();
        assert_eq!(b, [7], "a read-only mapping sees it");
        // Nobody else can write: no new writable mapping, no write().
        assert!(
            MmapRegion::<()>::from_file(FileOffset::new(f.try_clone().unwrap(), 0), 4096).is_err()
        );
        assert!((&f).write(&[1]).is_err());
    }
}
