//! ibsim's sockets: Unix datagram sockets in the abstract namespace (no
//! files), named from a base name (`IBSIM_SOCKNAME`, default `sim`):
//!
//! - `BASE:ctl`, the server's control socket; a client sends from
//!   `BASE:ctlPID` and gets each answer back there;
//! - `BASE:outN`, the server's data socket of client slot N, connected at
//!   CONNECT to the client's `BASE:inPID`, which the client connects to
//!   it in turn: each slot's socket hears only its own client. What a
//!   free slot's socket holds when a client takes it is nobody's, and is
//!   dropped then ([`SimSockets::attach`]).
//!
//! Every socket is non-blocking: a client that does not read loses what
//! is sent to it, and the server never waits for it. One reader thread
//! waits on all of them with `poll(2)` and hands what it reads on, or an
//! owner with a `poll(2)` loop of its own ([`SimSockets::read_ctl`],
//! [`SimSockets::recv_slot`]: `ibtca-hive`) reads them itself. A slot's
//! datagrams are read up to [`READ_BATCH`] at a time in one `recvmmsg(2)`
//! ([`RecvBatch::with_limit`] takes fewer; one at a time, `recv(2)`), and
//! sent by `sendmmsg(2)`, or `send(2)` for one.

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
/// Datagrams one read of one socket takes at most
/// ([`SimSockets::read_ctl`], [`SimSockets::recv_slot`]).
pub const READ_BATCH: usize = 8;
/// Datagrams one `sendmmsg(2)` of [`SimSockets::send_batch`] sends at
/// most.
pub const SEND_BATCH: usize = 64;
/// Datagrams [`SimSockets::attach`] drops from a slot's socket at most
/// (its queue holds far fewer).
const STALE_LIMIT: usize = 4096;

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

    /// Connects slot `slot`'s socket to the client of `pid`, then drops
    /// what the socket held from before: sent to a free slot (by anyone)
    /// or by the slot's previous client, it is not the new client's, which
    /// sends nothing before it has CONNECT's answer and is from now on
    /// the only sender the socket accepts. Returns how many were dropped.
    pub fn attach(&self, slot: usize, pid: u32) -> io::Result<usize> {
        let s = self.slots.get(slot).ok_or(io::ErrorKind::InvalidInput)?;
        s.connect_addr(&abstract_addr(&format!("{}:in{pid}", self.base))?)?;
        let mut byte = [0u8; 1];
        let mut dropped = 0;
        // WouldBlock (emptied), or a pending error: nothing more to drop.
        while dropped < STALE_LIMIT && s.recv(&mut byte).is_ok() {
            dropped += 1;
        }
        Ok(dropped)
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
    /// datagrams, [`SEND_BATCH`] to a `sendmmsg(2)` (one system call and
    /// one wake-up of the client for a turn's answers); returns how many
    /// the socket took (fewer than offered when it filled up). An error
    /// only if it took none. The call's headers are on the stack: nothing
    /// is allocated.
    pub fn send_batch<'m>(
        &self,
        slot: usize,
        msgs: impl IntoIterator<Item = &'m [u8]>,
    ) -> io::Result<usize> {
        let s = self.slots.get(slot).ok_or(io::ErrorKind::InvalidInput)?;
        let mut msgs = msgs.into_iter().peekable();
        let mut sent = 0;
        while msgs.peek().is_some() {
            let mut batch: [&[u8]; SEND_BATCH] = [&[]; SEND_BATCH];
            let mut n = 0;
            for (b, m) in batch.iter_mut().zip(msgs.by_ref().take(SEND_BATCH)) {
                *b = m;
                n += 1;
            }
            // Most turns answer one MAD: `send(2)`, which costs the kernel
            // less than a `sendmmsg(2)` of one; headers for a few, not a
            // batch's.
            let result = match n {
                1 => send_one(s, batch[0]),
                ..=FEW => send_iovs::<FEW>(s, &batch[..n]),
                _ => send_iovs::<SEND_BATCH>(s, &batch[..n]),
            };
            match result {
                Ok(k) => {
                    sent += k;
                    if k < n {
                        break;
                    }
                }
                Err(e) if sent == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(sent)
    }

    /// The control socket's descriptor.
    pub fn ctl_fd(&self) -> RawFd {
        self.ctl.as_raw_fd()
    }

    /// Slot `slot`'s socket's descriptor.
    pub fn slot_fd(&self, slot: usize) -> Option<RawFd> {
        self.slots.get(slot).map(AsRawFd::as_raw_fd)
    }

    /// The slot whose socket has descriptor `fd`.
    pub fn slot_of_fd(&self, fd: RawFd) -> Option<usize> {
        self.slots.iter().position(|s| s.as_raw_fd() == fd)
    }

    /// Reads the control messages waiting into `out`, without blocking:
    /// at most [`READ_BATCH`], so that a client that keeps the socket full
    /// costs a bounded turn (`poll(2)` reports the rest).
    pub fn read_ctl(&self, buf: &mut [u8], out: &mut Vec<Datagram>) {
        read_ctl(&self.ctl, buf, out);
    }

    /// Reads what slot `slot`'s socket holds into `batch`, without
    /// blocking, in one `recvmmsg(2)`: at most [`READ_BATCH`] datagrams
    /// (`poll(2)` reports the rest), each whole (cut at 1,024 bytes) and in
    /// order. Returns how many ([`RecvBatch::len`]; 0: none waiting, or
    /// the socket's pending error, which the call clears).
    pub fn recv_slot(&self, slot: usize, batch: &mut RecvBatch) -> usize {
        batch.len = 0;
        match self.slots.get(slot) {
            Some(s) => recv_batch(s, batch),
            None => 0,
        }
    }
}

/// Messages [`SimSockets::send_batch`] sends with headers for only
/// this many (zeroing 64 headers, 4 KiB, for one message cost more than
/// the message).
const FEW: usize = 4;

/// Sends `msg` as one datagram with `send(2)`, without waiting: 1, or the
/// error (`WouldBlock` with the socket full).
fn send_one(s: &UnixDatagram, msg: &[u8]) -> io::Result<usize> {
    loop {
        match s.send(msg) {
            Ok(_) => return Ok(1),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Sends `msgs` (at most `N`), one datagram each, by [`send_mmsg`] with
/// `N` headers on the stack.
fn send_iovs<const N: usize>(s: &UnixDatagram, msgs: &[&[u8]]) -> io::Result<usize> {
    let empty = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    let mut iovs = [empty; N];
    // SAFETY: mmsghdr is plain data for which all-zero is a valid value
    // (no address, no control data, no iovec).
    let mut hdrs: [libc::mmsghdr; N] = unsafe { std::mem::zeroed() };
    let n = msgs.len().min(N);
    for ((h, iov), m) in hdrs.iter_mut().zip(iovs.iter_mut()).zip(msgs) {
        // The kernel only reads the message (`sendmmsg` takes `iov_base`
        // as `*mut` for both directions).
        *iov = libc::iovec {
            iov_base: m.as_ptr() as *mut libc::c_void,
            iov_len: m.len(),
        };
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    send_mmsg(s, &mut hdrs[..n])
}

/// Sends the datagrams `hdrs` describe on `s` with `sendmmsg(2)`, without
/// waiting; returns how many it took (fewer when the socket filled up),
/// an error only if it took none.
fn send_mmsg(s: &UnixDatagram, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < hdrs.len() {
        let left = u32::try_from(hdrs.len() - sent).unwrap_or(u32::MAX);
        // SAFETY: `hdrs[sent..]` are initialised mmsghdrs whose iovecs
        // point to buffers the caller keeps alive and unmoved for the
        // call; the kernel only reads them and writes each `msg_len`.
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

/// Up to [`READ_BATCH`] control messages, each with its sender.
fn read_ctl(ctl: &UnixDatagram, buf: &mut [u8], out: &mut Vec<Datagram>) {
    for _ in 0..READ_BATCH {
        // WouldBlock, or an error: nothing to read.
        match ctl.recv_from(buf) {
            Ok((len, from)) => out.push(Datagram::Ctl(buf[..len].to_vec(), from)),
            Err(_) => return,
        }
    }
}

/// Datagrams read by [`SimSockets::recv_slot`] into buffers that are
/// reused read after read, and what the reads took so far.
pub struct RecvBatch {
    bufs: Box<[[u8; READ_LEN]; READ_BATCH]>,
    lens: [usize; READ_BATCH],
    len: usize,
    limit: usize,
    /// Reads made (`recvmmsg(2)`, or `recv(2)` for a batch of one).
    pub calls: u64,
    /// Datagrams they read.
    pub datagrams: u64,
}

impl Default for RecvBatch {
    /// Up to [`READ_BATCH`] datagrams a read.
    fn default() -> Self {
        RecvBatch::with_limit(READ_BATCH)
    }
}

impl RecvBatch {
    /// Up to `limit` datagrams a read (1 to [`READ_BATCH`]; others are
    /// taken as the nearer bound).
    pub fn with_limit(limit: usize) -> Self {
        RecvBatch {
            bufs: Box::new([[0; READ_LEN]; READ_BATCH]),
            lens: [0; READ_BATCH],
            len: 0,
            limit: limit.clamp(1, READ_BATCH),
            calls: 0,
            datagrams: 0,
        }
    }

    /// Datagrams the last read took.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The last read took none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The last read's datagram `i` (empty past [`RecvBatch::len`]).
    pub fn get(&self, i: usize) -> &[u8] {
        if i < self.len {
            &self.bufs[i][..self.lens[i]]
        } else {
            &[]
        }
    }
}

/// One `recvmmsg(2)` of up to `batch`'s limit of datagrams from `s` into
/// `batch`; returns how many.
fn recv_batch(s: &UnixDatagram, batch: &mut RecvBatch) -> usize {
    batch.len = 0;
    if batch.limit == 1 {
        return recv_one(s, batch);
    }
    let mut iovs: [libc::iovec; READ_BATCH] = std::array::from_fn(|_| libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    });
    for (iov, buf) in iovs.iter_mut().zip(batch.bufs.iter_mut()) {
        iov.iov_base = buf.as_mut_ptr().cast();
        iov.iov_len = buf.len();
    }
    // SAFETY: mmsghdr is plain data for which all-zero is a valid value
    // (no address, no control data, no iovecs yet).
    let mut hdrs: [libc::mmsghdr; READ_BATCH] = unsafe { std::mem::zeroed() };
    for (h, iov) in hdrs.iter_mut().zip(iovs.iter_mut()) {
        h.msg_hdr.msg_iov = iov;
        h.msg_hdr.msg_iovlen = 1;
    }
    loop {
        batch.calls += 1;
        // SAFETY: `hdrs` are READ_BATCH initialised mmsghdrs, each with
        // one iovec in `iovs` that points to one READ_LEN-byte buffer of
        // `batch.bufs`; all are alive, unmoved and not otherwise used for
        // the call, which uses the first `limit` (at most READ_BATCH).
        // The kernel writes at most iov_len bytes into each buffer and
        // each header's `msg_len` and flags; no timeout.
        let n = unsafe {
            libc::recvmmsg(
                s.as_raw_fd(),
                hdrs.as_mut_ptr(),
                batch.limit.min(READ_BATCH) as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            // WouldBlock, or a connected peer that went away.
            return 0;
        }
        let n = (n as usize).min(batch.limit).min(READ_BATCH);
        for (len, h) in batch.lens.iter_mut().zip(&hdrs).take(n) {
            *len = (h.msg_len as usize).min(READ_LEN);
        }
        batch.len = n;
        batch.datagrams += n as u64;
        return n;
    }
}

/// One `recv(2)` of one datagram from `s` into `batch`'s first buffer
/// (a batch of one: the kernel's cheaper call than a `recvmmsg(2)` of
/// one); returns how many (0 or 1).
fn recv_one(s: &UnixDatagram, batch: &mut RecvBatch) -> usize {
    loop {
        batch.calls += 1;
        match s.recv(&mut batch.bufs[0]) {
            Ok(len) => {
                batch.lens[0] = len.min(READ_LEN);
                batch.len = 1;
                batch.datagrams += 1;
                return 1;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // WouldBlock, or a connected peer that went away.
            Err(_) => return 0,
        }
    }
}

/// What the reader thread reads from socket `index` (the control
/// socket's first, then slot 0's to slot 9's), on its clones.
fn read_socket(
    ctl: &UnixDatagram,
    slots: &[UnixDatagram],
    index: usize,
    buf: &mut [u8],
    batch: &mut RecvBatch,
    out: &mut Vec<Datagram>,
) {
    let Some(slot) = index.checked_sub(1) else {
        return read_ctl(ctl, buf, out);
    };
    if let Some(s) = slots.get(slot) {
        recv_batch(s, batch);
        out.extend((0..batch.len()).map(|i| Datagram::Data(slot, batch.get(i).to_vec())));
    }
}

/// A buffer for [`SimSockets::read_ctl`].
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
    let mut batch = RecvBatch::default();
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
                read_socket(ctl, slots, index, &mut buf, &mut batch, &mut read);
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
        server.read_ctl(&mut buf, &mut out);
        assert_eq!(out.len(), READ_BATCH);
        while out.len() < sent {
            let before = out.len();
            server.read_ctl(&mut buf, &mut out);
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

    /// A client of `server` in `slot` as umad2sim makes one: its data
    /// socket `BASE:inPID`, connected to the slot's socket and back.
    fn client(server: &SimSockets, base: &str, slot: usize, pid: u32) -> UnixDatagram {
        let c =
            UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:in{pid}")).unwrap()).unwrap();
        assert_eq!(server.attach(slot, pid).unwrap(), 0, "nothing stale");
        c.connect_addr(&abstract_addr(&format!("{base}:out{slot}")).unwrap())
            .unwrap();
        c
    }

    #[test]
    fn a_burst_is_read_a_batch_a_call_each_datagram_whole_on_its_senders_slot() {
        let base = format!("ibtca-sockets-burst-{}", std::process::id());
        let server = SimSockets::bind(&base).unwrap();
        let a = client(&server, &base, 0, 1);
        let b = client(&server, &base, 1, 2);
        // Datagrams of different lengths, each filled with its number.
        let burst = 2 * READ_BATCH + 3;
        let len = |j: usize| 1 + j * 13;
        for j in 0..burst {
            a.send(&vec![j as u8; len(j)]).unwrap();
        }
        for j in 0..3u8 {
            b.send(&[0xb0 + j; 288]).unwrap();
        }
        let mut batch = RecvBatch::default();
        let mut got = Vec::new();
        for want in [READ_BATCH, READ_BATCH, 3] {
            assert_eq!(server.recv_slot(0, &mut batch), want);
            got.extend((0..batch.len()).map(|i| batch.get(i).to_vec()));
        }
        assert_eq!(batch.calls, 3, "one system call a batch");
        assert_eq!(got.len(), burst);
        for (j, d) in got.iter().enumerate() {
            assert_eq!(d, &vec![j as u8; len(j)], "datagram {j} whole, in order");
        }
        // The other client's, on its own slot only.
        assert_eq!(server.recv_slot(1, &mut batch), 3);
        for j in 0..3u8 {
            assert_eq!(batch.get(usize::from(j)), &[0xb0 + j; 288][..]);
        }
        assert_eq!(server.recv_slot(0, &mut batch), 0, "slot 0 emptied");
        assert_eq!((batch.calls, batch.datagrams), (5, burst as u64 + 3));
    }

    #[test]
    fn a_batch_sent_arrives_whole_and_in_order_few_or_many() {
        let base = format!("ibtca-sockets-send-{}", std::process::id());
        let server = SimSockets::bind(&base).unwrap();
        let a = client(&server, &base, 0, 1);
        // Up to a few on the few headers, more on a batch's.
        for count in [1, FEW, FEW + 1, 9] {
            let msgs: Vec<Vec<u8>> = (0..count).map(|j| vec![j as u8; 1 + j * 31]).collect();
            let sent = server
                .send_batch(0, msgs.iter().map(Vec::as_slice))
                .unwrap();
            assert_eq!(sent, count);
            let mut buf = [0u8; 512];
            for (j, m) in msgs.iter().enumerate() {
                let n = a.recv(&mut buf).unwrap();
                assert_eq!(&buf[..n], &m[..], "{count}: datagram {j} whole, in order");
            }
        }
        let none = server.send_batch(MAX_CLIENTS, [&[1u8][..]]);
        assert_eq!(
            none.unwrap_err().kind(),
            io::ErrorKind::InvalidInput,
            "no such slot"
        );
    }

    #[test]
    fn a_batch_with_a_limit_reads_that_many_a_call() {
        let base = format!("ibtca-sockets-limit-{}", std::process::id());
        let server = SimSockets::bind(&base).unwrap();
        let a = client(&server, &base, 0, 1);
        for j in 0..3u8 {
            a.send(&[j; 288]).unwrap();
        }
        let mut batch = RecvBatch::with_limit(1);
        for j in 0..3u8 {
            assert_eq!(server.recv_slot(0, &mut batch), 1);
            assert_eq!(batch.get(0), &[j; 288][..], "in order");
        }
        assert_eq!(server.recv_slot(0, &mut batch), 0);
        assert_eq!((batch.calls, batch.datagrams), (4, 3));
        assert_eq!(RecvBatch::with_limit(0).limit, 1);
        assert_eq!(RecvBatch::with_limit(99).limit, READ_BATCH);
    }

    #[test]
    fn a_slot_taken_drops_what_its_socket_held_from_before() {
        let base = format!("ibtca-sockets-stale-{}", std::process::id());
        let server = SimSockets::bind(&base).unwrap();
        let stranger = UnixDatagram::unbound().unwrap();
        let out3 = abstract_addr(&format!("{base}:out3")).unwrap();
        for _ in 0..2 {
            stranger.send_to_addr(&[7; 288], &out3).unwrap();
        }
        let _c = UnixDatagram::bind_addr(&abstract_addr(&format!("{base}:in9")).unwrap()).unwrap();
        assert_eq!(server.attach(3, 9).unwrap(), 2, "both dropped");
        let mut batch = RecvBatch::default();
        assert_eq!(server.recv_slot(3, &mut batch), 0);
        assert!(
            stranger.send_to_addr(&[7; 288], &out3).is_err(),
            "a taken slot hears its client only"
        );
    }
}
