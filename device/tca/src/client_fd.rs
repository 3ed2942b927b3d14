//! Descriptors a vfio-user client hands over, checked for what they must be
//! before the device uses them.
//!
//! - Interrupt triggers (`SET_IRQS`) must be eventfds. Anything else (a pipe
//!   nobody reads, a directory, a read-only file) is refused with `EINVAL`.
//!   An accepted eventfd is made non-blocking, so a client that fills its
//!   counter (an eventfd write blocks when the counter would pass
//!   `u64::MAX - 1`) costs it that interrupt, never the device a thread.
//!   QEMU creates its event notifiers non-blocking already.
//! - Memory (`DMA_MAP`) must be a regular file (memfd, tmpfs, hugetlbfs or a
//!   disk file) at least as long as the map; see [`crate::dma`] for what
//!   happens when such a file later shrinks.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};

use vmm_sys_util::eventfd::EventFd;

/// What `/proc/self/fd/N` links to for an eventfd.
const EVENTFD_LINK: &str = "anon_inode:[eventfd]";

/// Why a descriptor was refused.
#[derive(Debug, thiserror::Error)]
pub enum FdError {
    /// Not an eventfd (what it is instead).
    #[error("descriptor is not an eventfd ({0})")]
    NotEventfd(String),
    /// Looking at the descriptor failed.
    #[error("cannot inspect descriptor: {0}")]
    Inspect(io::Error),
}

/// `file` as an eventfd the device can signal without ever blocking, or why
/// not.
pub fn eventfd(file: File) -> Result<EventFd, FdError> {
    let fd = file.as_raw_fd();
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(FdError::Inspect)?;
    let link = link.to_string_lossy();
    if link != EVENTFD_LINK {
        return Err(FdError::NotEventfd(link.into_owned()));
    }
    // SAFETY: F_GETFL/F_SETFL on a descriptor `file` owns; no memory is
    // passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(FdError::Inspect(io::Error::last_os_error()));
    }
    // SAFETY: `into_raw_fd` gives up `file`'s sole ownership of a valid
    // descriptor, which the EventFd now owns and closes.
    Ok(unsafe { EventFd::from_raw_fd(file.into_raw_fd()) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmm_sys_util::eventfd::EFD_NONBLOCK;

    fn as_file(e: EventFd) -> File {
        // SAFETY: `into_raw_fd` hands over sole ownership of the descriptor.
        unsafe { File::from_raw_fd(e.into_raw_fd()) }
    }

    #[test]
    fn an_eventfd_is_taken_and_made_non_blocking() {
        let e = eventfd(as_file(EventFd::new(0).unwrap())).unwrap();
        // Fill the counter: the next write must fail at once, not block.
        e.write(u64::MAX - 1).unwrap();
        let err = e.write(1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EAGAIN));
        assert_eq!(e.read().unwrap(), u64::MAX - 1);
        // One made non-blocking by its creator is taken too.
        assert!(eventfd(as_file(EventFd::new(EFD_NONBLOCK).unwrap())).is_ok());
    }

    #[test]
    fn other_descriptors_are_refused_with_what_they_are() {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`, which we own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: fresh descriptors from pipe2, each owned by one File.
        let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
        drop(r);
        let err = eventfd(w).unwrap_err();
        assert!(
            matches!(&err, FdError::NotEventfd(what) if what.starts_with("pipe:")),
            "{err}"
        );
        let dir = File::open("/").unwrap();
        assert!(matches!(eventfd(dir).unwrap_err(), FdError::NotEventfd(what) if what == "/"));
        let memfd = crate::memfd::create("ibtca-test", 4096).unwrap();
        assert!(matches!(eventfd(memfd), Err(FdError::NotEventfd(_))));
    }
}
