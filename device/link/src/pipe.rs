//! The byte pipes under one connection's frame stream: the Unix socket
//! itself, or a shared-memory ring per direction (`ring.rs`).
//!
//! A side whose peer announced [`FEATURE_SHARED_RING`] in its `Hello`
//! offers it a ring for its own direction right after the `Hello`s: a
//! `RingOffer` frame carrying, out of band (`SCM_RIGHTS`), the ring's two
//! size-sealed memfds (control page, and the data the writer alone may
//! write: `ring.rs`) and two eventfds, *data* (the writer wakes a reader
//! that said it sleeps) and *room* (the reader wakes a writer that said it
//! waits). From then on that side writes its frames into the ring and
//! nothing more into the socket; the socket stays open only so that each
//! side sees the other go away (hang-up), and so that closing it wakes a
//! sleeping end. The two directions are independent: a peer that does not
//! offer keeps writing to the socket.
//!
//! A frame stream in a ring costs one copy on each side, like the socket
//! (the sender builds its packets in the ring, the receiving engine copies
//! them out of it: `session/walk.rs`), but no system call while both ends
//! are awake, no socket buffer
//! allocation, and a wake-up only when the reader really sleeps (after
//! polling for an adaptive idle budget of at most
//! [`LinkConfig::rx_spin`](super::LinkConfig::rx_spin), by default not at
//! all). A peer's ring is checked like any input: a
//! memfd whose size is not sealed, eventfds that are none, indices out of
//! order, or bytes on the socket after the offer drop the peer.

use super::socket::LinkSocket;
use std::fs::File;
use std::io::{self, IoSlice, Read, Write};
use std::net::Shutdown;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ibtca_protocol::link::Frame;
use ibtca_sched::IdleBudget;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use super::ring::{RingError, RingReader, RingWriter};
use super::stats::{bump, Counters};

/// Files a `RingOffer` carries: the control and data memfds, then the data
/// and room eventfds.
pub(super) const OFFER_FDS: usize = 4;

/// Where a connection's outgoing frame bytes go; shared by the writer
/// thread and the direct sends of the queue (never both at once).
#[derive(Debug)]
pub(super) enum TxPipe {
    /// Straight into the socket.
    Socket(LinkSocket),
    /// Into the ring this side offered.
    Ring(RingTx),
}

impl TxPipe {
    /// Takes what it can of `slices` without waiting: the bytes taken, or
    /// `WouldBlock` if none fit.
    pub fn try_send(&self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            TxPipe::Socket(s) => send_nonblocking(s.as_raw_fd(), slices),
            TxPipe::Ring(r) => r.try_send(slices),
        }
    }

    /// Takes some of `slices`, waiting for room; an error once the
    /// connection is gone (peer hung up, or [`TxPipe::shutdown`]).
    pub fn send(&self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            TxPipe::Socket(s) => {
                let mut s = s;
                s.write_vectored(slices)
            }
            TxPipe::Ring(r) => r.send(slices),
        }
    }

    /// Ends the connection (both directions): wakes whoever waits on it,
    /// here and at the peer.
    pub fn shutdown(&self) {
        let socket = match self {
            TxPipe::Socket(s) => s,
            TxPipe::Ring(r) => &r.socket,
        };
        let _ = socket.shutdown(Shutdown::Both);
    }
}

/// One non-blocking `sendmsg` of `slices` on `fd` (MSG_DONTWAIT; a closed
/// peer is EPIPE, not SIGPIPE).
fn send_nonblocking(fd: RawFd, slices: &[IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: `msghdr` is a plain C struct of pointers and integers, for
    // which all-zero bytes is a valid value: no name, no control data.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    // `IoSlice` is ABI-compatible with `struct iovec` on Unix (std docs).
    msg.msg_iov = slices.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = slices.len().min(IOV_MAX);
    // SAFETY: `msg` points at `slices`, live iovecs valid for reads for the
    // whole call (at most IOV_MAX of them; a short count is a partial send
    // the caller continues); `fd` is an open socket the caller holds.
    let n = unsafe { libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Bytes built in place in a ring that are published together: the reader
/// takes them in one read, as it would one batch written by the queue
/// (published one by one, packets reached the peer's engine a few at a
/// time, and every small batch cost it and its reader a hand-over).
pub(super) const IN_PLACE_BATCH: u64 = 128 * 1024;

/// Bytes built in place that may be published to a sleeping reader
/// without waking it while the burst that built them goes on: the
/// reader is woken once per this many, and at the burst's end
/// ([`RingTx::publish`]).
pub(super) const WAKE_BATCH: u64 = 512 * 1024;

/// Most iovecs one `sendmsg`/`writev` takes (Linux UIO_MAXIOV).
pub(super) const IOV_MAX: usize = 1024;

/// The writing end of a ring this side offered.
#[derive(Debug)]
pub(super) struct RingTx {
    writer: Mutex<RingWriter>,
    /// Wakes the peer's reader.
    data: EventFd,
    /// The peer's reader wakes us here.
    room: EventFd,
    /// The connection, watched for the peer's hang-up.
    socket: LinkSocket,
    /// The published head when the reader was last woken (or found awake
    /// by a write): bytes after it may wait for their wake-up.
    woken: AtomicU64,
    /// The link's counters: `ring_wakes_tx`.
    counters: Arc<Counters>,
}

impl TxPipe {
    /// Whether the peer's reader said it sleeps (tests).
    #[cfg(test)]
    pub fn reader_asleep(&self) -> bool {
        matches!(self, TxPipe::Ring(r) if r.writer().reader_asleep())
    }

    /// Publishes `head` in the ring as a broken or hostile peer might,
    /// and wakes the reader to look (tests).
    #[cfg(test)]
    pub fn scribble_head(&self, head: u64) {
        if let TxPipe::Ring(r) = self {
            r.writer().scribble_head(head);
            let _ = r.data.write(1);
        }
    }
}

impl RingTx {
    fn writer(&self) -> MutexGuard<'_, RingWriter> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn try_send(&self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut writer = self.writer();
        match writer.write(slices).map_err(ring_io_error)? {
            0 => Err(io::ErrorKind::WouldBlock.into()),
            n => {
                self.wake_reader(&writer);
                Ok(n)
            }
        }
    }

    /// Builds a frame of `len` bytes straight into the ring if it fits in
    /// one piece now (`None`, `build` not called, otherwise): see
    /// [`RingWriter::build_in_place`]. What was built is published once
    /// [`IN_PLACE_BATCH`] bytes wait, and a sleeping reader woken once per
    /// [`WAKE_BATCH`] bytes published (the rest at [`Self::publish`]).
    pub fn build_in_place(
        &self,
        len: usize,
        build: impl FnOnce(&mut [u8]) -> bool,
    ) -> io::Result<Option<bool>> {
        let mut writer = self.writer();
        let built = writer.build_in_place(len, build).map_err(ring_io_error)?;
        if writer.unpublished() >= IN_PLACE_BATCH {
            writer.publish();
            if writer.published() - self.woken.load(Ordering::Relaxed) >= WAKE_BATCH {
                self.wake_reader(&writer);
            }
        }
        Ok(built)
    }

    /// Publishes what was built in place and wakes the reader if it sleeps
    /// with bytes it was not woken for.
    pub fn publish(&self) {
        let mut writer = self.writer();
        writer.publish();
        if writer.published() > self.woken.load(Ordering::Relaxed) {
            self.wake_reader(&writer);
        }
    }

    /// Wakes the reader if it sleeps; either way it will see everything
    /// published so far.
    fn wake_reader(&self, writer: &RingWriter) {
        self.woken.store(writer.published(), Ordering::Relaxed);
        if writer.reader_asleep() {
            bump(&self.counters.ring_wakes_tx);
            let _ = self.data.write(1);
        }
    }

    fn send(&self, slices: &[IoSlice<'_>]) -> io::Result<usize> {
        loop {
            match self.try_send(slices) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done,
            }
            // Full: say we wait, look once more (the reader may have made
            // room before it could see the mark), then sleep; a reader
            // asleep over bytes it was not woken for must make that room.
            {
                let writer = self.writer();
                if writer.published() > self.woken.load(Ordering::Relaxed) {
                    self.wake_reader(&writer);
                }
                writer.set_waiting(true);
            }
            let again = self.try_send(slices);
            if !matches!(&again, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
                self.writer().set_waiting(false);
                return again;
            }
            let [room, socket] = wait(&self.room, &self.socket, libc::POLLRDHUP)?;
            self.writer().set_waiting(false);
            if room {
                let _ = self.room.read();
            }
            if socket {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
        }
    }
}

/// Where a connection's incoming frame bytes come from.
#[derive(Debug)]
pub(super) enum RxPipe {
    /// The socket, read with `recvmsg` so that the files of a `RingOffer`
    /// arrive too (held until the frame is decoded).
    Socket {
        /// Files received and not yet claimed by a `RingOffer`.
        fds: Vec<OwnedFd>,
    },
    /// The socket, read with plain `read`s: no `RingOffer` can come (the
    /// two `Hello`s did not both announce rings), so no files are kept
    /// (any the peer sends are closed by the kernel).
    Plain,
    /// The ring the peer offered, read as a byte stream: one too small to
    /// hold the longest frame whole.
    Ring(RingRx),
    /// The ring the peer offered, which the session walks itself
    /// (`session/walk.rs`): nothing to `recv` here.
    Walked,
}

impl Default for RxPipe {
    fn default() -> Self {
        RxPipe::Socket { fds: Vec::new() }
    }
}

impl RxPipe {
    /// Reads some bytes of the stream into `out`, waiting for them; 0 once
    /// the peer hung up (and, with a ring, everything it wrote was read).
    pub fn recv(&mut self, socket: &LinkSocket, out: &mut [u8]) -> io::Result<usize> {
        match self {
            RxPipe::Socket { fds } => recv_with_fds(socket, out, fds),
            RxPipe::Plain => {
                let mut socket = socket;
                socket.read(out)
            }
            RxPipe::Ring(r) => r.recv(socket, out),
            RxPipe::Walked => Err(io::Error::other("the frames are walked in the ring")),
        }
    }

    /// The files received so far (for a `RingOffer`).
    pub fn take_fds(&mut self) -> Vec<OwnedFd> {
        match self {
            RxPipe::Socket { fds } => std::mem::take(fds),
            RxPipe::Plain | RxPipe::Ring(_) | RxPipe::Walked => Vec::new(),
        }
    }

    /// The peer writes into a ring.
    pub fn is_ring(&self) -> bool {
        matches!(self, RxPipe::Ring(_) | RxPipe::Walked)
    }
}

/// One `recvmsg` into `out`, keeping the files that come along (at most
/// [`OFFER_FDS`] may wait for their frame; more is a broken peer).
fn recv_with_fds(socket: &LinkSocket, out: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    let mut raw = [-1 as RawFd; OFFER_FDS];
    let mut iov = [libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    }];
    // SAFETY: the one iovec covers `out`, which we borrow mutably, so the
    // kernel may write anything into it.
    let (n, count) = unsafe { socket.recv_with_fds(&mut iov, &mut raw) }
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
    for fd in raw.iter().take(count) {
        // SAFETY: the kernel just installed these descriptors for us;
        // nothing else owns them.
        fds.push(unsafe { OwnedFd::from_raw_fd(*fd) });
    }
    if fds.len() > OFFER_FDS {
        fds.clear();
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "peer sent more files than a RingOffer carries",
        ));
    }
    Ok(n)
}

/// The reading end of the ring the peer offered.
#[derive(Debug)]
pub(super) struct RingRx {
    reader: RingReader,
    data: EventFd,
    /// The peer hung up: what is left in the ring is all there is.
    hung_up: bool,
    /// How long to poll an empty ring before sleeping: adaptive, at most
    /// [`LinkConfig::rx_spin`](super::LinkConfig::rx_spin).
    budget: IdleBudget,
    /// The link's counters: `ring_sleeps_rx`.
    counters: Arc<Counters>,
}

impl RingRx {
    /// The ring, to walk and take frames from once [`Self::wait_for_more`]
    /// counted them.
    pub fn reader(&mut self) -> &mut RingReader {
        &mut self.reader
    }

    /// Waits until the ring holds more than `have` bytes not yet walked
    /// and returns how many it holds; `have` once the peer hung up and
    /// wrote nothing more.
    pub fn wait_for_more(&mut self, socket: &LinkSocket, have: u64) -> io::Result<u64> {
        // When the ring was first seen empty; untimed when it never spins.
        let mut idle_since: Option<Instant> = None;
        loop {
            let n = self.reader.available().map_err(ring_io_error)?;
            if n > have || self.hung_up {
                if let Some(since) = idle_since.filter(|_| n > have) {
                    self.budget.work_after(since.elapsed());
                }
                return Ok(n);
            }
            if !self.budget.never_spins() {
                let now = Instant::now();
                let since = *idle_since.get_or_insert(now);
                if now.duration_since(since) < self.budget.spin() {
                    std::hint::spin_loop();
                    continue;
                }
            }
            // Nothing new: say we sleep, look once more (the writer may
            // have published before it could see the mark), then sleep.
            self.reader.set_asleep(true);
            match self.reader.available() {
                Ok(n) if n <= have => {}
                n => {
                    self.reader.set_asleep(false);
                    return n.map_err(ring_io_error);
                }
            }
            bump(&self.counters.ring_sleeps_rx);
            let [data, socket_ready] = wait(&self.data, socket, libc::POLLIN | libc::POLLRDHUP)?;
            self.reader.set_asleep(false);
            if data {
                let _ = self.data.read();
            }
            if socket_ready {
                self.hung_up = peer_hung_up(socket)?;
            }
        }
    }

    /// Copies some bytes of the stream into `out` (freeing their room),
    /// waiting for them; 0 once the peer hung up and all was read.
    pub fn recv(&mut self, socket: &LinkSocket, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        self.wait_for_more(socket, 0)?;
        self.reader.read(out).map_err(ring_io_error)
    }
}

/// After a `RingOffer` the peer's socket carries nothing: true once it
/// shows the end of the stream, an error if it carries bytes.
fn peer_hung_up(socket: &LinkSocket) -> io::Result<bool> {
    let mut byte = [0u8; 1];
    // SAFETY: `byte` is valid for writes of its one byte for the call.
    let n = unsafe {
        libc::recv(
            socket.as_raw_fd(),
            byte.as_mut_ptr().cast(),
            byte.len(),
            libc::MSG_DONTWAIT | libc::MSG_PEEK,
        )
    };
    match n {
        0 => Ok(true),
        n if n > 0 => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "peer wrote to the socket after offering a ring",
        )),
        _ => {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
                // Reset, or shut down here: the connection is over.
                _ => Ok(true),
            }
        }
    }
}

/// Sleeps until `event` is readable or `socket` reports `socket_events`
/// (or a hang-up or error, which `poll` always reports); returns which of
/// the two is ready.
fn wait(
    event: &EventFd,
    socket: &LinkSocket,
    socket_events: libc::c_short,
) -> io::Result<[bool; 2]> {
    let mut fds = [
        libc::pollfd {
            fd: event.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: socket.as_raw_fd(),
            events: socket_events,
            revents: 0,
        },
    ];
    loop {
        // SAFETY: `fds` is a live array of two pollfds for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if n >= 0 {
            return Ok(fds.map(|f| f.revents != 0));
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn ring_io_error(e: RingError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Why [`offer`] offered no ring.
#[derive(Debug, thiserror::Error)]
pub(super) enum OfferError {
    /// This process could not make a ring (memfds, seals, mappings,
    /// eventfds; e.g. a kernel without `F_SEAL_FUTURE_WRITE`, before 5.1):
    /// nothing was sent, and this side can go on writing to the socket.
    #[error("{0}")]
    Local(String),
    /// The offer did not go out whole: the connection is broken.
    #[error("{0}")]
    Send(String),
}

/// Offers the peer a ring of `capacity` bytes for this side's frames: sends
/// the `RingOffer` with its files on `socket`; from now on this side's
/// frames go into the returned pipe, which counts its wake-ups of the
/// peer's reader in `counters`.
pub(super) fn offer(
    socket: &LinkSocket,
    capacity: u64,
    counters: Arc<Counters>,
) -> Result<TxPipe, OfferError> {
    let local = |e: String| OfferError::Local(e);
    let ring = RingWriter::create(capacity).map_err(|e| local(e.to_string()))?;
    let event = || EventFd::new(EFD_NONBLOCK).map_err(|e| local(format!("eventfd: {e}")));
    let (data, room) = (event()?, event()?);
    let socket_for_hang_up = socket
        .try_clone()
        .map_err(|e| local(format!("preparing the ring: {e}")))?;
    let frame = Frame::RingOffer {
        capacity: ring.capacity(),
    }
    .to_bytes()
    .map_err(|e| local(e.to_string()))?;
    let [control, ring_data] = ring.files();
    let files = [
        control.as_raw_fd(),
        ring_data.as_raw_fd(),
        data.as_raw_fd(),
        room.as_raw_fd(),
    ];
    let sent = socket
        .send_with_fds(&[frame.as_slice()], &files)
        .map_err(|e| OfferError::Send(format!("sending RingOffer: {e}")))?;
    if sent != frame.len() {
        return Err(OfferError::Send(format!(
            "RingOffer: sent {sent} of {} bytes",
            frame.len()
        )));
    }
    Ok(TxPipe::Ring(RingTx {
        writer: Mutex::new(ring),
        data,
        room,
        socket: socket_for_hang_up,
        woken: AtomicU64::new(0),
        counters,
    }))
}

/// Why [`accept`] took no ring.
#[derive(Debug, thiserror::Error)]
pub(super) enum AcceptError {
    /// The files are not a ring's: the peer is broken or hostile.
    #[error("{0}")]
    Peer(String),
    /// This process could not map the ring (memory limits; or a file
    /// sealed against the mapping a ring needs).
    #[error("{0}")]
    Local(String),
}

/// Maps the ring a peer offered (`capacity` from its `RingOffer`, `fds` the
/// files that came with it) after checking every file; the reader counts
/// its sleeps in `counters`.
pub(super) fn accept(
    capacity: u64,
    fds: Vec<OwnedFd>,
    spin: Duration,
    counters: Arc<Counters>,
) -> Result<RingRx, AcceptError> {
    let Ok([control, ring_data, data, room]) = <[OwnedFd; OFFER_FDS]>::try_from(fds) else {
        return Err(AcceptError::Peer(format!(
            "RingOffer without its {OFFER_FDS} files"
        )));
    };
    let ring = RingReader::open(File::from(control), File::from(ring_data)).map_err(|e| {
        let what = format!("peer's ring: {e}");
        match e {
            RingError::Memory(_) => AcceptError::Local(what),
            _ => AcceptError::Peer(what),
        }
    })?;
    if ring.capacity() != capacity {
        return Err(AcceptError::Peer(format!(
            "peer's ring holds {} bytes, its RingOffer says {capacity}",
            ring.capacity()
        )));
    }
    ring.wake_writer_with(peer_eventfd(room).map_err(AcceptError::Peer)?);
    Ok(RingRx {
        reader: ring,
        data: peer_eventfd(data).map_err(AcceptError::Peer)?,
        hung_up: false,
        budget: IdleBudget::new(spin),
        counters,
    })
}

/// An eventfd the peer passed, made non-blocking (a peer's file must never
/// block a thread of ours).
fn peer_eventfd(fd: OwnedFd) -> Result<EventFd, String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|e| format!("peer's eventfd: {e}"))?;
    if link.as_os_str() != "anon_inode:[eventfd]" {
        return Err(format!(
            "peer passed {} where an eventfd belongs",
            link.display()
        ));
    }
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own; no memory is passed.
    let ok = unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
    };
    if !ok {
        return Err(format!("peer's eventfd: {}", io::Error::last_os_error()));
    }
    // SAFETY: `fd` is an eventfd (checked above) that we own; the EventFd
    // takes it over.
    Ok(unsafe { EventFd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(fd)) })
}
