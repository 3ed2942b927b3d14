//! The send queue and the writer that drains it.
//!
//! Packets are encoded into frames as they are queued, straight into
//! [`Batch`]es: byte buffers of at most [`BATCH_PACKETS`] packets, grown
//! until their packets reach [`BATCH_BYTES`]. The writer takes the oldest
//! batch and writes it with one `write_all`; emptied buffers are reused, so
//! a packet costs one copy into the batch and no allocation on the link's
//! side.
//!
//! [`TxQueue::send`] takes one lock, applies any fault plan, appends the
//! frame and wakes the writer only if the writer sleeps (a condvar notify is
//! a syscall). [`TxQueue::send_batch`] queues many packets under one lock
//! and, when the writer sleeps (so it holds no batch and nothing can be
//! written out of order), writes them to the socket itself with a
//! non-blocking `send`: for a burst that fits in the socket buffer there is
//! then no writer wake-up at all. What the socket does not take stays
//! queued for the writer, which finishes it with blocking writes.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Condvar, Mutex, MutexGuard};

use ibtca_protocol::link::FRAME_HEADER_LEN;

use super::fault::{FaultInjector, FaultPlan};
use super::stats::{add, bump, sub, Counters};
use super::MAX_BODY;

/// Most packets one `write` carries.
pub(super) const BATCH_PACKETS: usize = 256;
/// A batch stops growing once its packets reach this many bytes.
pub(super) const BATCH_BYTES: usize = 256 * 1024;
/// Emptied batch buffers kept for reuse.
const SPARE_BATCHES: usize = 4;

/// Why [`super::Link::send`] dropped a packet. The packet is gone either way;
/// the IB transport above retransmits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// The link is not up (no peer, or the `Hello` exchange is not done).
    #[error("link is down")]
    Down,
    /// The send queue is full: the peer or the socket is slower than the
    /// sender.
    #[error("link send queue is full")]
    QueueFull,
    /// The packet exceeds the frame body limit.
    #[error("packet of {len} bytes exceeds the link limit of {max}")]
    TooLarge {
        /// The packet's length.
        len: usize,
        /// The limit, [`MAX_BODY`].
        max: usize,
    },
}

/// Encoded `Packet` frames for one `write`.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// The frames, back to back.
    pub bytes: Vec<u8>,
    /// Bytes of `bytes` already written (by a direct, non-blocking send).
    pub written: usize,
    /// Packets in the batch.
    pub packets: usize,
    /// Bytes of those packets (frame headers not counted).
    pub packet_bytes: usize,
}

impl Batch {
    fn is_full(&self) -> bool {
        self.packets >= BATCH_PACKETS || self.packet_bytes >= BATCH_BYTES
    }

    fn push(&mut self, packet: &[u8]) {
        let len = u32::try_from(packet.len()).unwrap_or(u32::MAX);
        self.bytes.reserve(FRAME_HEADER_LEN + packet.len());
        self.bytes.extend_from_slice(&len.to_be_bytes());
        self.bytes.push(PACKET_FRAME_TYPE);
        self.bytes.extend_from_slice(packet);
        self.packets += 1;
        self.packet_bytes += packet.len();
    }

    /// Empties the batch, keeping its buffer.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.written = 0;
        self.packets = 0;
        self.packet_bytes = 0;
    }

    /// The bytes still to write.
    pub fn unwritten(&self) -> &[u8] {
        self.bytes.get(self.written..).unwrap_or_default()
    }

    /// The packets of the batch, decoded again (for tests).
    #[cfg(test)]
    pub fn decode(&self) -> Vec<Vec<u8>> {
        use ibtca_protocol::link::{Frame, FrameDecoder};
        let mut decoder = FrameDecoder::new(MAX_BODY);
        decoder
            .feed(&self.bytes)
            .map(|f| match f {
                Ok(Frame::Packet(p)) => p,
                other => panic!("not a packet frame: {other:?}"),
            })
            .collect()
    }
}

/// The type byte of a `Packet` frame.
const PACKET_FRAME_TYPE: u8 = 2;

#[derive(Debug)]
struct TxState {
    /// Queued frames, oldest first; only the last one grows.
    batches: VecDeque<Batch>,
    /// Packets in `batches`.
    queued: usize,
    /// Emptied buffers to reuse.
    spare: Vec<Batch>,
    /// A connection is up and its writer accepts packets.
    up: bool,
    /// The current writer is to exit.
    writer_stop: bool,
    /// The writer sleeps on the condvar (and so holds no batch).
    writer_waiting: bool,
    /// The connection, for direct writes while the writer sleeps.
    stream: Option<UnixStream>,
    faults: Option<FaultInjector>,
}

impl TxState {
    /// Appends one packet's frame (the caller checked up and capacity).
    fn append(&mut self, packet: &[u8]) {
        let grow = self.batches.back().is_some_and(|b| !b.is_full());
        if !grow {
            let fresh = self.spare.pop().unwrap_or_default();
            self.batches.push_back(fresh);
        }
        if let Some(batch) = self.batches.back_mut() {
            batch.push(packet);
            self.queued += 1;
        }
    }

    /// Keeps an emptied buffer for reuse.
    fn recycle(&mut self, mut batch: Batch) {
        if self.spare.len() < SPARE_BATCHES && batch.bytes.capacity() > 0 {
            batch.clear();
            self.spare.push(batch);
        }
    }
}

/// The bounded queue between [`super::Link::send`] and the writer thread.
#[derive(Debug)]
pub(super) struct TxQueue {
    state: Mutex<TxState>,
    ready: Condvar,
    capacity: usize,
}

impl TxQueue {
    pub fn new(capacity: usize) -> Self {
        TxQueue {
            state: Mutex::new(TxState {
                batches: VecDeque::new(),
                queued: 0,
                spare: Vec::new(),
                up: false,
                writer_stop: false,
                writer_waiting: false,
                stream: None,
                faults: None,
            }),
            ready: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, TxState> {
        // Nothing panics while holding the lock; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `packet` (through the fault plan, if any) or drops and counts
    /// it. Never blocks beyond the queue lock.
    pub fn send(&self, packet: Vec<u8>, counters: &Counters) -> Result<(), LinkError> {
        let mut st = self.lock();
        let was_empty = st.queued == 0;
        let result = self.queue_one(&mut st, packet, counters);
        if was_empty && st.queued > 0 && st.writer_waiting {
            self.ready.notify_one();
        }
        result
    }

    /// Queues every packet of `packets` as [`Self::send`] would, under one
    /// lock, and writes them out directly if the writer sleeps. Returns how
    /// many were refused (counted like refusals of `send`).
    pub fn send_batch(
        &self,
        packets: impl IntoIterator<Item = Vec<u8>>,
        counters: &Counters,
    ) -> usize {
        let mut st = self.lock();
        let mut refused = 0;
        for packet in packets {
            if self.queue_one(&mut st, packet, counters).is_err() {
                refused += 1;
            }
        }
        if st.queued > 0 && st.writer_waiting {
            write_direct(&mut st, counters);
            if st.queued > 0 {
                self.ready.notify_one();
            }
        }
        refused
    }

    fn queue_one(
        &self,
        st: &mut TxState,
        packet: Vec<u8>,
        counters: &Counters,
    ) -> Result<(), LinkError> {
        if packet.len() > MAX_BODY {
            bump(&counters.tx_dropped_oversize);
            return Err(LinkError::TooLarge {
                len: packet.len(),
                max: MAX_BODY,
            });
        }
        let Some(mut faults) = st.faults.take() else {
            return self.push(st, &packet, counters);
        };
        let mut result = Ok(());
        faults.apply(packet, counters, |p| {
            if let Err(e) = self.push(st, &p, counters) {
                result = Err(e);
            }
        });
        st.faults = Some(faults);
        result
    }

    fn push(&self, st: &mut TxState, packet: &[u8], counters: &Counters) -> Result<(), LinkError> {
        if !st.up {
            bump(&counters.tx_dropped_down);
            return Err(LinkError::Down);
        }
        if st.queued >= self.capacity {
            bump(&counters.tx_dropped_full);
            return Err(LinkError::QueueFull);
        }
        st.append(packet);
        Ok(())
    }

    /// Replaces the fault plan; a packet held back for a swap is queued now.
    pub fn set_faults(&self, plan: FaultPlan, counters: &Counters) {
        let mut st = self.lock();
        if let Some(held) = st.faults.take().and_then(|mut f| f.take_held()) {
            let was_empty = st.queued == 0;
            let _ = self.push(&mut st, &held, counters);
            if was_empty && st.queued > 0 && st.writer_waiting {
                self.ready.notify_one();
            }
        }
        st.faults = (!plan.is_empty()).then(|| FaultInjector::new(plan));
    }

    pub fn is_up(&self) -> bool {
        self.lock().up
    }

    /// A connection is up: accept packets for a new writer, which writes to
    /// `stream` (a clone of it serves direct writes).
    pub fn open(&self, stream: Option<UnixStream>) {
        let mut st = self.lock();
        st.up = true;
        st.writer_stop = false;
        st.stream = stream;
    }

    /// The connection is ending: refuse packets, tell the writer to exit and
    /// drop (and count) what is still queued.
    pub fn close(&self, counters: &Counters) {
        let mut st = self.lock();
        st.up = false;
        st.writer_stop = true;
        st.stream = None;
        add(&counters.tx_dropped_down, st.queued as u64);
        st.queued = 0;
        while let Some(batch) = st.batches.pop_front() {
            st.recycle(batch);
        }
        self.ready.notify_all();
    }

    /// Swaps the oldest batch into `out` (empty on entry; its buffer is kept
    /// for reuse), waiting for packets. False once the writer is to exit.
    pub(super) fn take_batch(&self, out: &mut Batch) -> bool {
        let mut st = self.lock();
        loop {
            if st.writer_stop {
                return false;
            }
            if let Some(batch) = st.batches.pop_front() {
                st.queued -= batch.packets;
                let empty = std::mem::replace(out, batch);
                st.recycle(empty);
                return true;
            }
            st.writer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            st.writer_waiting = false;
        }
    }
}

/// Writes queued batches with non-blocking sends while the socket takes
/// them; called with the lock held and the writer asleep, so nothing else
/// writes to the socket meanwhile. Whatever is left (socket full, or an
/// error the writer will meet and act on) stays queued.
fn write_direct(st: &mut TxState, counters: &Counters) {
    let Some(fd) = st.stream.as_ref().map(AsRawFd::as_raw_fd) else {
        return;
    };
    while let Some(batch) = st.batches.front_mut() {
        // Counted before the peer can see the bytes (so whoever sees the
        // peer react sees the counters too); taken back if the send falls
        // short, as the writer then counts the batch.
        let (packets, packet_bytes) = (batch.packets as u64, batch.packet_bytes as u64);
        add(&counters.tx_packets, packets);
        add(&counters.tx_bytes, packet_bytes);
        let uncount = || {
            sub(&counters.tx_packets, packets);
            sub(&counters.tx_bytes, packet_bytes);
        };
        let bytes = batch.unwritten();
        // SAFETY: `bytes` is a live slice, valid for reads of its length for
        // the whole call; `fd` belongs to the `UnixStream` held in `st`,
        // which stays open while the lock is held. MSG_DONTWAIT makes the
        // call return at once; MSG_NOSIGNAL turns a closed peer into EPIPE.
        let n = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        let Ok(n) = usize::try_from(n) else {
            let e = io::Error::last_os_error();
            uncount();
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::trace!(error = %e, "direct link write failed; left to the writer");
            }
            return;
        };
        bump(&counters.tx_writes);
        batch.written += n;
        if batch.written < batch.bytes.len() {
            uncount();
            return;
        }
        st.queued -= batch.packets;
        if let Some(done) = st.batches.pop_front() {
            st.recycle(done);
        }
    }
}

/// The writer thread of one connection: drains `queue` into `stream` until
/// the connection closes or a write fails (then it shuts the stream down, so
/// the reader sees the end too).
pub(super) fn run_writer(queue: &TxQueue, mut stream: UnixStream, counters: &Counters) {
    let mut batch = Batch::default();
    while queue.take_batch(&mut batch) {
        let count = batch.packets as u64;
        let bytes = batch.packet_bytes as u64;
        // Counted before the peer can see the bytes (see `write_direct`).
        add(&counters.tx_packets, count);
        add(&counters.tx_bytes, bytes);
        if let Err(e) = stream.write_all(batch.unwritten()) {
            tracing::debug!(error = %e, "link write failed; closing the connection");
            sub(&counters.tx_packets, count);
            sub(&counters.tx_bytes, bytes);
            add(&counters.tx_dropped_down, count);
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        bump(&counters.tx_writes);
        batch.clear();
    }
}

// The frame layout written by `Batch::push` is the protocol crate's.
#[cfg(test)]
#[test]
fn batch_frames_match_the_protocol_encoding() {
    let mut batch = Batch::default();
    batch.push(&[1, 2, 3]);
    let mut want = Vec::new();
    ibtca_protocol::link::Frame::Packet(vec![1, 2, 3])
        .encode(&mut want)
        .unwrap();
    assert_eq!(batch.bytes, want);
}
