//! ibsim's sockets: Unix datagram sockets in the abstract namespace (no
//! files), named from a base name (`IBSIM_SOCKNAME`, default `sim`):
//!
//! - `BASE:ctl`, the server's control socket; a client sends from
//!   `BASE:ctlPID` and gets each answer back there;
//! - `BASE:outN`, the server's data socket of client slot N, connected at
//!   CONNECT to the client's `BASE:inPID`, which the client connects to
//!   it in turn: each slot's socket hears only its own client.
//!
//! Every socket is non-blocking: a client that does not read loses what
//! is sent to it, and the server never waits for it. One reader thread
//! waits on all of them with `poll(2)` and hands what it reads on, or an
//! owner with a `poll(2)` loop of its own ([`SimSockets::fds`],
//! [`SimSockets::read_ready`]: `ibtca-hive`) reads them itself.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::mpsc::SyncSender;

use crate::clients::MAX_CLIENTS;

/// The base name ibsim and umad2sim use without `IBSIM_SOCKNAME`.
pub const DEFAULT_BASE: &str = "sim";
/// Largest datagram read; longer ones are cut here and refused as
/// malformed by their parser.
const READ_LEN: usize = 1024;
/// Datagrams one [`SimSockets::read_ready`] reads from one socket at most.
pub const READ_BATCH: usize = 8;

/// A datagram the reader thread read.
#[derive(Debug)]
pub enum Datagram {
    /// On the control socket, from this address.
    Ctl(Vec<u8>, SocketAddr),
    /// On the data socket of this slot.
    Data(usize, Vec<u8>),
}

/// The abstract-namespace address of `name` as ibsim and umad2sim make
/// it: the name's terminating NUL is part of the address.
pub fn abstract_addr(name: &str) -> io::Result<SocketAddr> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    SocketAddr::from_abstract_name(&bytes)
}

/// The server's sockets.
pub struct SimSockets {
    base: String,
    ctl: UnixDatagram,
    slots: Vec<UnixDatagram>,
}

impl SimSockets {
    /// Binds `BASE:ctl` and `BASE:out0..9` (an error if another server,
    /// ibsim or ibtca-simport, holds the name).
    pub fn bind(base: &str) -> io::Result<Self> {
        let bind = |name: String| {
            let s = UnixDatagram::bind_addr(&abstract_addr(&name)?)
                .map_err(|e| io::Error::new(e.kind(), format!("@{name}: {e}")))?;
            s.set_nonblocking(true)?;
            Ok::<_, io::Error>(s)
        };
        let ctl = bind(format!("{base}:ctl"))?;
        let slots = (0..MAX_CLIENTS)
            .map(|i| bind(format!("{base}:out{i}")))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(SimSockets {
            base: base.to_owned(),
            ctl,
            slots,
        })
    }

    /// Starts the reader thread, which sends what it reads to `tx` until
    /// `tx` is gone.
    pub fn start_reader(&self, tx: SyncSender<Datagram>) -> io::Result<()> {
        let ctl = self.ctl.try_clone()?;
        let slots = self
            .slots
            .iter()
            .map(UnixDatagram::try_clone)
            .collect::<io::Result<Vec<_>>>()?;
        std::thread::Builder::new()
            .name("ibtca-sim-rx".into())
            .spawn(move || {
                ibtca_sandbox::enter(ibtca_sandbox::Role::SimportReader);
                read_loop(&ctl, &slots, &tx)
            })?;
        Ok(())
    }

    /// Connects slot `slot`'s socket to the client of `pid`.
    pub fn attach(&self, slot: usize, pid: u32) -> io::Result<()> {
        let s = self.slots.get(slot).ok_or(io::ErrorKind::InvalidInput)?;
        s.connect_addr(&abstract_addr(&format!("{}:in{pid}", self.base))?)
    }

    /// Sends a control answer to `to`.
    pub fn reply(&self, bytes: &[u8], to: &SocketAddr) -> io::Result<()> {
        self.ctl.send_to_addr(bytes, to).map(drop)
    }

    /// Sends to slot `slot`'s client.
    pub fn send(&self, slot: usize, bytes: &[u8]) -> io::Result<()> {
        let s = self.slots.get(slot).ok_or(io::ErrorKind::InvalidInput)?;
        s.send(bytes).map(drop)
    }

    /// Sends `msgs`, in order, to slot `slot`'s client as separate
    /// datagrams in one `sendmmsg(2)` (one system call and one wake-up of
    /// the client for the lot); returns how many the socket took (fewer
    /// than `msgs.len()` when it filled up). An error only if it took none.
    pub fn send_batch(&self, slot: usize, msgs: &[&[u8]]) -> io::Result<usize> {
        let s = self.slots.get(slot).ok_or(io::ErrorKind::InvalidInput)?;
        let mut iovs: Vec<libc::iovec> = msgs
            .iter()
            .map(|m| libc::iovec {
                iov_base: m.as_ptr() as *mut libc::c_void,
                iov_len: m.len(),
            })
            .collect();
        let mut hdrs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: mmsghdr is plain data for which all-zero is a
                // valid value (no address, no control data).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        let mut sent = 0;
        while sent < hdrs.len() {
            let left = u32::try_from(hdrs.len() - sent).unwrap_or(u32::MAX);
            // SAFETY: `hdrs[sent..]` are initialised mmsghdrs whose iovecs
            // point into `iovs` and `msgs`, alive and unmoved for the call;
            // the kernel only reads them and writes each `msg_len`.
            let n = unsafe {
                libc::sendmmsg(
                    s.as_raw_fd(),
                    hdrs[sent..].as_mut_ptr(),
                    left,
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return if sent == 0 { Err(e) } else { Ok(sent) };
            }
            if n == 0 {
                break;
            }
            sent += n as usize;
        }
        Ok(sent)
    }

    /// Every socket's descriptor: the control socket's first, then slot
    /// 0's to slot 9's (the indexes [`SimSockets::read_ready`] takes).
    pub fn fds(&self) -> Vec<RawFd> {
        std::iter::once(&self.ctl)
            .chain(&self.slots)
            .map(AsRawFd::as_raw_fd)
            .collect()
    }

    /// Reads the datagrams waiting on socket `index` of [`SimSockets::fds`]
    /// into `out`, without blocking: at most [`READ_BATCH`], so that a
    /// client that keeps its socket full costs a bounded turn (`poll(2)`
    /// reports the rest).
    pub fn read_ready(&self, index: usize, buf: &mut [u8], out: &mut Vec<Datagram>) {
        read_socket(&self.ctl, &self.slots, index, buf, out);
    }
}

/// What [`SimSockets::read_ready`] does, on the reader thread's clones.
fn read_socket(
    ctl: &UnixDatagram,
    slots: &[UnixDatagram],
    index: usize,
    buf: &mut [u8],
    out: &mut Vec<Datagram>,
) {
    for _ in 0..READ_BATCH {
        // WouldBlock, or a connected peer that went away: nothing to read.
        let d = if index == 0 {
            match ctl.recv_from(buf) {
                Ok((len, from)) => Datagram::Ctl(buf[..len].to_vec(), from),
                Err(_) => return,
            }
        } else {
            match slots.get(index - 1).map(|s| s.recv(buf)) {
                Some(Ok(len)) => Datagram::Data(index - 1, buf[..len].to_vec()),
                _ => return,
            }
        };
        out.push(d);
    }
}

/// A buffer for [`SimSockets::read_ready`].
pub fn read_buffer() -> Vec<u8> {
    vec![0u8; READ_LEN]
}

fn read_loop(ctl: &UnixDatagram, slots: &[UnixDatagram], tx: &SyncSender<Datagram>) {
    let mut fds: Vec<libc::pollfd> = std::iter::once(ctl)
        .chain(slots)
        .map(|s| libc::pollfd {
            fd: s.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut buf = read_buffer();
    let mut read = Vec::new();
    loop {
        // SAFETY: `fds` is a live, exclusively borrowed array of
        // `fds.len()` pollfd structures for the call's duration.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!("poll: {}", io::Error::last_os_error());
            return;
        }
        for (index, fd) in fds.iter().enumerate() {
            if fd.revents != 0 {
                read_socket(ctl, slots, index, &mut buf, &mut read);
            }
        }
        for d in read.drain(..) {
            if tx.send(d).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_read_takes_a_bounded_batch_and_leaves_the_rest_queued() {
        let base = format!("ibtca-sockets-test-{}", std::process::id());
        let server = SimSockets::bind(&base).unwrap();
        let client = UnixDatagram::unbound().unwrap();
        client.set_nonblocking(true).unwrap();
        client
            .connect_addr(&abstract_addr(&format!("{base}:ctl")).unwrap())
            .unwrap();
        // As many as the socket queues (net.unix.max_dgram_qlen).
        let mut sent = 0;
        while sent < 4 * READ_BATCH && client.send(&[sent as u8; 80]).is_ok() {
            sent += 1;
        }
        assert!(sent > READ_BATCH, "the socket queued only {sent}");
        let mut buf = read_buffer();
        let mut out = Vec::new();
        server.read_ready(0, &mut buf, &mut out);
        assert_eq!(out.len(), READ_BATCH);
        while out.len() < sent {
            let before = out.len();
            server.read_ready(0, &mut buf, &mut out);
            assert!(out.len() > before, "{} of {sent} read", out.len());
        }
        let firsts: Vec<u8> = out
            .iter()
            .map(|d| match d {
                Datagram::Ctl(b, _) => b[0],
                Datagram::Data(..) => panic!("on the control socket"),
            })
            .collect();
        assert_eq!(firsts, (0..sent as u8).collect::<Vec<_>>(), "in order");
    }
}
