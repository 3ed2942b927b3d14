//! Anonymous shared-memory files (`memfd_create`): the DRDMA packet memory
//! blocks that QEMU maps, and the link's shared rings.

use std::fs::File;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// A new memfd named `name` (for `/proc/PID/fd` and `/proc/PID/maps`) of
/// `size` zero bytes, closed on exec.
pub fn create(name: &str, size: u64) -> io::Result<File> {
    let cname =
        std::ffi::CString::new(name).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `cname` is a valid NUL-terminated string; the call has no
    // other memory effects.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
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
    }
}
