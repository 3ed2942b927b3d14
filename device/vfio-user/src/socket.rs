//! Socket plumbing for the server: one `recvmsg` that takes bytes and file
//! descriptors (blocking or not), and the handle that stops a server from
//! another thread.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use vmm_sys_util::eventfd::EventFd;

use super::wire::MAX_MSG_FDS;

/// Control-message buffer for `MAX_MSG_FDS` descriptors, aligned for
/// `cmsghdr` (`CMSG_SPACE(16 * 4)` is 80 bytes on 64-bit Linux).
#[repr(C, align(8))]
struct CmsgBuf([u8; 128]);

/// Receives into `buf` and collects any descriptors that came with it.
/// With `nonblocking`, returns `WouldBlock` instead of waiting.
pub fn recv_with_fds(
    sock: &UnixStream,
    buf: &mut [u8],
    nonblocking: bool,
) -> io::Result<(usize, Vec<File>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cmsg = CmsgBuf([0; 128]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    msg.msg_controllen = cmsg.0.len();
    let flags = libc::MSG_CMSG_CLOEXEC | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    // SAFETY: `msg` points at `iov` (covering `buf`, which may take any
    // bytes) and at `cmsg`, both alive and writable for the whole call; the
    // kernel writes at most their lengths.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, flags) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut files = Vec::new();
    // SAFETY: `msg` was filled by recvmsg; CMSG_FIRSTHDR/NXTHDR only walk
    // inside `msg_control[..msg_controllen]`, which the kernel set.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !c.is_null() {
        // SAFETY: `c` is non-null and points at a header inside `cmsg`.
        let hdr = unsafe { &*c };
        if hdr.cmsg_level == libc::SOL_SOCKET && hdr.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: CMSG_LEN(0) is a constant computation.
            let data_len = hdr.cmsg_len as usize - unsafe { libc::CMSG_LEN(0) } as usize;
            // SAFETY: the data of an SCM_RIGHTS header is `data_len` bytes of
            // RawFd inside `cmsg`; read_unaligned copes with any alignment.
            let data = unsafe { libc::CMSG_DATA(c) }.cast::<RawFd>();
            for i in 0..data_len / std::mem::size_of::<RawFd>() {
                // SAFETY: i < data_len / size_of::<RawFd>() (see above).
                let fd = unsafe { data.add(i).read_unaligned() };
                // SAFETY: the kernel just installed this descriptor for us;
                // nothing else owns it.
                files.push(unsafe { File::from_raw_fd(fd) });
            }
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        // More descriptors than MAX_MSG_FDS: the rest were closed by the
        // kernel and the stream cannot be trusted.
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("more than {MAX_MSG_FDS} file descriptors in one message"),
        ));
    }
    Ok((n as usize, files))
}

/// Sends `data` with `fd` attached (SCM_RIGHTS); returns the bytes sent.
pub fn send_with_fd(sock: &UnixStream, data: &[u8], fd: RawFd) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut cmsg = CmsgBuf([0; 128]);
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a constant computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
    // SAFETY: msg_control points at `cmsg`, large enough for one header
    // with one descriptor (CMSG_SPACE(4) = 24 <= 128), so CMSG_FIRSTHDR is
    // non-null and the writes below stay inside `cmsg`.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
        libc::CMSG_DATA(c).cast::<RawFd>().write_unaligned(fd);
    }
    // SAFETY: `msg` points at `iov` (the kernel only reads `data` through
    // it) and at `cmsg`, both alive for the call.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Stops a running [`super::Server`] from another thread (e.g. a signal
/// handler thread): wakes the accept loop and shuts the active connection
/// down, so a blocked receive returns at once.
#[derive(Clone)]
pub struct ShutdownHandle {
    pub(super) stopped: Arc<AtomicBool>,
    pub(super) wake: Arc<EventFd>,
    pub(super) active: Arc<Mutex<Option<UnixStream>>>,
}

impl ShutdownHandle {
    /// Requests shutdown; `serve` returns soon after.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        let _ = self.wake.write(1);
        if let Some(s) = self
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    /// True once shutdown was requested.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }
}
