//! The send queue and the writer that drains it.
//!
//! Packets wait on their VL's queue (`vl.rs`): per-VL credits decide which
//! may go, VL15 goes first and the data VLs take weighted turns. Whoever
//! sends takes packets in that order, only while the peer has granted
//! credit, and frames them (plus any `Credit` frames this end owes the
//! peer) into a [`Batch`] of at most [`BATCH_PACKETS`] packets, grown
//! until its packets reach [`BATCH_BYTES`], written with one vectored
//! write: frame headers, `Credit` frames and packets shorter than
//! [`COPY_BELOW`] are copied into a reused byte buffer, longer packets go
//! out from their own buffers (one iovec each, no copy in user space).
//!
//! [`TxQueue::send`] and [`TxQueue::send_tagged`] take one lock, apply any
//! fault plan and queue the packet; they wake the writer only if the writer
//! sleeps and the packet gave it something to do (a condvar notify is a
//! syscall). [`TxQueue::send_batch`] queues many packets under one lock
//! and, when the writer sleeps (so it holds no batch and nothing can be
//! written out of order), frames what the credits allow and writes it to
//! the connection itself without waiting (`pipe.rs`: a non-blocking `send`
//! on the socket, or a copy into the shared ring): for a burst that fits
//! there is then no writer wake-up at all. Credits that
//! arrive from the peer, and credits this end returns, are written the same
//! way while the writer sleeps. A batch the socket takes only part of stays
//! with the queue as the *pending* batch, which the writer finishes with
//! blocking writes before anything else.
//!
//! The writer itself takes the pending batch, or the owed credits and the
//! next packets by arbitration under the lock, and frames the packets
//! outside it.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::fault::{FaultInjector, FaultPlan};
use super::pipe::{TxPipe, IOV_MAX};
use super::stats::{add, bump, sub, Counters};
use super::vl::{FlowControl, Queued, VlQueues, NUM_VLS};
use super::MAX_BODY;
use ibtca_protocol::encoded;
use ibtca_protocol::link::FRAME_HEADER_LEN;

/// Most packets one `write` carries.
pub(super) const BATCH_PACKETS: usize = 256;
/// A batch stops growing once its packets reach this many bytes.
pub(super) const BATCH_BYTES: usize = 256 * 1024;
/// Emptied batch buffers kept for reuse.
const SPARE_BATCHES: usize = 4;
/// Buffers of framed packets kept for senders to reuse ([`TxQueue::reclaim`]).
const EMPTIED_PACKETS: usize = 256;
/// Packets shorter than this are copied into a batch's byte buffer (an
/// iovec per tiny packet costs more than the copy); longer ones are written
/// from their own buffers.
pub(super) const COPY_BELOW: usize = 512;

/// The type byte of a `Packet` frame.
const PACKET_FRAME_TYPE: u8 = 2;
/// The type byte of a `Credit` frame.
const CREDIT_FRAME_TYPE: u8 = 4;

/// The header of a `Packet` frame around a packet of `len` bytes.
fn frame_header(len: usize) -> [u8; FRAME_HEADER_LEN] {
    let [a, b, c, d] = u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes();
    [a, b, c, d, PACKET_FRAME_TYPE]
}

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

/// Called with the tag of every tagged packet the queue accepted, once it
/// is sent or discarded (fault drop, connection end).
pub type DoneFn = Arc<dyn Fn(u64) + Send + Sync>;

struct OnDone(Option<DoneFn>);

impl fmt::Debug for OnDone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "Some(..)" } else { "None" })
    }
}

/// Frames for one vectored write: `Credit` frames first, then `Packet`
/// frames. The byte stream is `bytes` with each of `large`'s packets
/// inserted at the offset it is paired with.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// Frame headers, `Credit` frames and short packets, back to back.
    bytes: Vec<u8>,
    /// Packets written from their own buffers, each with the offset in
    /// `bytes` it follows (offsets never decrease).
    large: Vec<(usize, Vec<u8>)>,
    /// Total bytes of `large`'s packets.
    large_bytes: usize,
    /// Bytes of the stream already written (by a direct, non-blocking send
    /// or the writer).
    written: usize,
    /// Packets framed in `bytes`.
    pub packets: usize,
    /// Bytes of those packets (frame headers not counted).
    pub packet_bytes: usize,
    /// Tags of the tagged packets framed in `bytes`, reported once written.
    tags: Vec<u64>,
    /// Packets the writer took, framed outside the lock
    /// ([`Batch::frame_items`]).
    items: VecDeque<Queued>,
    /// Tags of packets discarded in `send` (fault drops) or written
    /// directly, for the writer to report.
    done: Vec<u64>,
    /// The tx counters already include the packets in `bytes` (counted
    /// before the direct send).
    counted: bool,
    /// Buffers of the packets framed by the writer, emptied, to hand back
    /// to the queue (and so to senders) at the next `take`.
    emptied: Vec<Vec<u8>>,
}

impl Batch {
    fn is_full(&self) -> bool {
        self.packets + self.items.len() >= BATCH_PACKETS || self.packet_bytes >= BATCH_BYTES
    }

    /// Frames `packet`; returns its buffer, emptied, when it was copied
    /// (the batch keeps a long packet's buffer until it is written:
    /// [`Batch::release`]).
    fn push_packet(&mut self, mut packet: Vec<u8>, tag: Option<u64>) -> Option<Vec<u8>> {
        self.bytes.extend_from_slice(&frame_header(packet.len()));
        self.packets += 1;
        self.packet_bytes += packet.len();
        self.tags.extend(tag);
        if packet.len() >= COPY_BELOW {
            self.large_bytes += packet.len();
            self.large.push((self.bytes.len(), packet));
            return None;
        }
        self.bytes.extend_from_slice(&packet);
        packet.clear();
        Some(packet)
    }

    /// Length of the whole stream.
    fn len(&self) -> usize {
        self.bytes.len() + self.large_bytes
    }

    /// Everything is written (or there was nothing).
    pub fn is_written(&self) -> bool {
        self.written >= self.len()
    }

    /// The stream's pieces in order: the bytes before each long packet,
    /// the packet, and after the last one the rest of `bytes`.
    fn pieces(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.large.iter().map(|(at, _)| *at));
        let tail = self.large.last().map_or(0, |(at, _)| *at);
        starts
            .zip(&self.large)
            .flat_map(|(from, (at, packet))| {
                [self.bytes.get(from..*at).unwrap_or_default(), packet]
            })
            .chain(std::iter::once(self.bytes.get(tail..).unwrap_or_default()))
    }

    /// Slices of the stream from byte `written` on, in order, for one
    /// vectored write.
    fn unwritten_slices(&self) -> Vec<io::IoSlice<'_>> {
        let mut skip = self.written;
        let mut out = Vec::with_capacity(2 * self.large.len() + 1);
        for piece in self.pieces() {
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            out.push(io::IoSlice::new(piece.get(skip..).unwrap_or_default()));
            skip = 0;
        }
        out
    }

    /// Takes the buffers of the long packets out (emptied), for reuse once
    /// the batch is written or abandoned.
    fn release(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.large_bytes = 0;
        self.large.drain(..).map(|(_, mut p)| {
            p.clear();
            p
        })
    }

    fn push_credit(&mut self, vl: u8, credits: u16) {
        self.bytes.extend_from_slice(&3u32.to_be_bytes());
        self.bytes.push(CREDIT_FRAME_TYPE);
        self.bytes.push(vl);
        self.bytes.extend_from_slice(&credits.to_be_bytes());
    }

    /// Frames the packets the writer took.
    fn frame_items(&mut self) {
        while let Some(q) = self.items.pop_front() {
            if let Some(packet) = self.push_packet(q.packet, q.tag) {
                self.emptied.push(packet);
            }
        }
    }

    /// Empties the batch, keeping its buffers (long packets' buffers move
    /// to `emptied`).
    pub fn clear(&mut self) {
        let large: Vec<Vec<u8>> = self.release().collect();
        self.emptied.extend(large);
        self.bytes.clear();
        self.written = 0;
        self.packets = 0;
        self.packet_bytes = 0;
        self.tags.clear();
        self.items.clear();
        self.done.clear();
        self.counted = false;
    }

    /// The whole stream in one buffer (tests).
    #[cfg(test)]
    pub fn stream(&self) -> Vec<u8> {
        self.pieces().flatten().copied().collect()
    }

    /// The packets of the batch, decoded again (for tests; `Credit` frames
    /// are skipped).
    #[cfg(test)]
    pub fn decode(&self) -> Vec<Vec<u8>> {
        use ibtca_protocol::link::{Frame, FrameDecoder};
        let mut decoder = FrameDecoder::new(MAX_BODY);
        decoder
            .feed(&self.stream())
            .filter_map(|f| match f {
                Ok(Frame::Packet(p)) => Some(p),
                Ok(Frame::Credit { .. }) => None,
                other => panic!("not a packet frame: {other:?}"),
            })
            .collect()
    }
}

#[derive(Debug)]
struct TxState {
    vls: VlQueues,
    /// Credits this end owes the peer, per VL.
    owed: [u32; NUM_VLS],
    /// `owed` is to be sent now.
    owed_due: bool,
    /// A connection is up and its writer accepts packets.
    up: bool,
    /// The current writer is to exit.
    writer_stop: bool,
    /// The writer sleeps on the condvar (and so holds no batch).
    writer_waiting: bool,
    /// A batch a direct send wrote only part of: its credits are spent and
    /// its rest goes out before anything else, by the writer.
    pending: Option<Batch>,
    /// Emptied buffers to reuse.
    spare: Vec<Batch>,
    /// The connection, for direct writes while the writer sleeps.
    stream: Option<Arc<TxPipe>>,
    faults: Option<FaultInjector<Queued>>,
    /// Tags of packets discarded in `send` (fault drops) or written
    /// directly, reported by the writer: never from inside a caller's
    /// `send`.
    done_later: Vec<u64>,
    /// The queue is in a credit stall that `credit_stalls` has counted.
    in_stall: bool,
    /// Buffers of framed packets, emptied, for [`TxQueue::reclaim`].
    emptied: Vec<Vec<u8>>,
    /// The connection: bumped by every [`TxQueue::open`], so that receive
    /// buffers of an earlier connection freed late return no credits.
    conn: u64,
}

impl TxState {
    /// The writer has something to do.
    fn has_work(&self) -> bool {
        self.pending.is_some()
            || self.owed_due
            || !self.done_later.is_empty()
            || self.vls.sendable()
    }

    /// Counts a credit stall (packets queued, none may go) once, when it
    /// begins.
    fn note_stall(&mut self, counters: &Counters) {
        let stalled = self.vls.stalled();
        if stalled && !self.in_stall {
            bump(&counters.credit_stalls);
        }
        self.in_stall = stalled;
    }

    /// Frames every credit owed into `batch`; nothing is owed after.
    fn take_owed(&mut self, batch: &mut Batch, counters: &Counters) {
        let mut frames = 0;
        for (vl, owed) in self.owed.iter_mut().enumerate() {
            while *owed > 0 {
                let n = u16::try_from(*owed).unwrap_or(u16::MAX);
                batch.push_credit(vl as u8, n);
                *owed -= u32::from(n);
                frames += 1;
            }
        }
        self.owed_due = false;
        add(&counters.credit_frames_tx, frames);
    }

    /// Keeps the buffer of a framed packet for a sender to reuse.
    fn keep_emptied(&mut self, mut packet: Vec<u8>) {
        if self.emptied.len() < EMPTIED_PACKETS {
            packet.clear();
            self.emptied.push(packet);
        }
    }

    /// Keeps an emptied batch for reuse, and its long packets' buffers for
    /// senders.
    fn recycle(&mut self, mut batch: Batch) {
        for packet in batch.release() {
            self.keep_emptied(packet);
        }
        for packet in batch.emptied.drain(..) {
            self.keep_emptied(packet);
        }
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
    flow: Option<FlowControl>,
    on_done: OnDone,
    /// Receive buffers per VL of the current connection that hold a packet
    /// (received, not yet freed): the reader adds, frees take away (under
    /// the lock, for the connection they belong to). A peer that sends on
    /// a VL whose buffers are all held ignores its credits.
    rx_held: [AtomicU32; NUM_VLS],
}

impl TxQueue {
    /// A queue without flow control.
    #[cfg(test)]
    pub fn new(capacity: usize) -> Self {
        TxQueue::with(capacity, None, None)
    }

    /// A queue with optional flow control and a callback for tagged packets.
    pub fn with(capacity: usize, flow: Option<FlowControl>, on_done: Option<DoneFn>) -> Self {
        TxQueue {
            state: Mutex::new(TxState {
                vls: VlQueues::new(flow.as_ref()),
                owed: [0; NUM_VLS],
                owed_due: false,
                up: false,
                writer_stop: false,
                writer_waiting: false,
                pending: None,
                spare: Vec::new(),
                stream: None,
                faults: None,
                done_later: Vec::new(),
                in_stall: false,
                emptied: Vec::new(),
                conn: 0,
            }),
            ready: Condvar::new(),
            capacity,
            flow,
            rx_held: Default::default(),
            on_done: OnDone(on_done),
        }
    }

    fn lock(&self) -> MutexGuard<'_, TxState> {
        // Nothing panics while holding the lock; recover anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn done(&self, tags: impl IntoIterator<Item = Option<u64>>) {
        if let Some(f) = &self.on_done.0 {
            tags.into_iter().flatten().for_each(|t| f(t));
        }
    }

    /// Queues `packet` (through the fault plan, if any) or drops and counts
    /// it. Never blocks beyond the queue lock.
    pub fn send(&self, packet: Vec<u8>, counters: &Counters) -> Result<(), LinkError> {
        self.send_tagged(packet, None, counters)
    }

    /// [`Self::send`] with a tag reported to the done callback once the
    /// packet is sent or discarded (not when this returns an error).
    pub fn send_tagged(
        &self,
        packet: Vec<u8>,
        tag: Option<u64>,
        counters: &Counters,
    ) -> Result<(), LinkError> {
        let mut st = self.lock();
        // If the writer sleeps with work, it has been woken already.
        let woken = !st.writer_waiting || st.has_work();
        let result = self.queue_one(&mut st, packet, tag, counters);
        if !woken && st.has_work() {
            self.ready.notify_one();
        }
        st.note_stall(counters);
        result
    }

    /// Queues every packet of `packets` as [`Self::send`] would, under one
    /// lock, and writes what the credits allow directly if the writer
    /// sleeps. Returns how many were refused (counted like refusals of
    /// `send`).
    pub fn send_batch(
        &self,
        packets: impl IntoIterator<Item = Vec<u8>>,
        counters: &Counters,
    ) -> usize {
        let mut st = self.lock();
        let woken = !st.writer_waiting || st.has_work();
        let mut refused = 0;
        for packet in packets {
            if self.queue_one(&mut st, packet, None, counters).is_err() {
                refused += 1;
            }
        }
        self.kick(&mut st, woken, counters);
        refused
    }

    /// Builds one packet of `len` bytes on `vl` straight into the shared
    /// ring, framed, when nothing can be ahead of it: the connection writes
    /// into a ring this end offered, the writer sleeps with nothing queued,
    /// pending or owed, no fault plan is set, `vl` has a credit, and the
    /// frame fits in the ring in one piece. Then `build` writes the packet
    /// (all `len` bytes) where the peer will read it, and returns false to
    /// give up (nothing is sent, the credit is kept). Otherwise `None`,
    /// `build` is not called, and the caller sends a buffer as usual.
    ///
    /// `build` runs under the queue lock: it must not call into this link.
    pub fn send_in_place(
        &self,
        len: usize,
        vl: u8,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
        counters: &Counters,
    ) -> Option<bool> {
        if len > MAX_BODY {
            return None;
        }
        let mut st = self.lock();
        let idle = st.up
            && st.writer_waiting
            && st.pending.is_none()
            && !st.owed_due
            && st.done_later.is_empty()
            && st.vls.is_empty()
            && st.faults.is_none();
        if !idle {
            return None;
        }
        if !matches!(st.stream.as_deref(), Some(TxPipe::Ring(_))) {
            return None;
        }
        if !st.vls.take_credit(vl) {
            st.note_stall(counters);
            return None;
        }
        let st = &mut *st;
        let Some(TxPipe::Ring(ring)) = st.stream.as_deref() else {
            st.vls.return_credit(vl);
            return None;
        };
        let header = frame_header(len);
        let built = ring.build_in_place(header.len() + len, |frame| {
            let (head, packet) = frame.split_at_mut(header.len());
            head.copy_from_slice(&header);
            build(packet)
        });
        match built {
            Ok(Some(true)) => {
                add(&counters.tx_packets, 1);
                add(&counters.tx_bytes, len as u64);
                bump(&counters.tx_built_in_place);
                Some(true)
            }
            Ok(outcome) => {
                st.vls.return_credit(vl);
                outcome
            }
            Err(e) => {
                // A broken ring: the writer meets it on its next write and
                // closes the connection; the packet goes its way.
                tracing::trace!(error = %e, "in-place link write failed; left to the writer");
                st.vls.return_credit(vl);
                None
            }
        }
    }

    /// Publishes the packets [`Self::send_in_place`] built and has not
    /// published yet (it publishes every [`IN_PLACE_BATCH`] bytes; anything
    /// written after them publishes them too).
    ///
    /// [`IN_PLACE_BATCH`]: super::pipe::IN_PLACE_BATCH
    pub fn publish(&self) {
        let st = self.lock();
        if let Some(TxPipe::Ring(ring)) = st.stream.as_deref() {
            ring.publish();
        }
    }

    /// After new work: if the writer sleeps, writes what may go directly,
    /// and wakes the writer for whatever is left (unless `woken`: it was
    /// woken for earlier work already).
    fn kick(&self, st: &mut TxState, woken: bool, counters: &Counters) {
        if st.writer_waiting {
            if st.up && st.pending.is_none() {
                write_direct(st, counters);
            }
            if !woken && st.has_work() {
                self.ready.notify_one();
            }
        }
        st.note_stall(counters);
    }

    fn queue_one(
        &self,
        st: &mut TxState,
        packet: Vec<u8>,
        tag: Option<u64>,
        counters: &Counters,
    ) -> Result<(), LinkError> {
        if packet.len() > MAX_BODY {
            bump(&counters.tx_dropped_oversize);
            return Err(LinkError::TooLarge {
                len: packet.len(),
                max: MAX_BODY,
            });
        }
        let item = Queued {
            vl: encoded::vl(&packet).unwrap_or(0),
            packet,
            tag,
        };
        if st.faults.is_none() {
            return self.push(st, item, counters);
        }
        if !st.up {
            bump(&counters.tx_dropped_down);
            return Err(LinkError::Down);
        }
        let Some(mut faults) = st.faults.take() else {
            return self.push(st, item, counters);
        };
        // Under faults the queue owns what it was handed: a copy, or a
        // packet held back from an earlier call, may fail to queue; those
        // are counted and reported done, and the call succeeds.
        let mut lost = Vec::new();
        let dropped = faults.apply(item, counters, |q| {
            let tag = q.tag;
            if self.push(st, q, counters).is_err() {
                lost.push(tag);
            }
        });
        st.faults = Some(faults);
        st.done_later
            .extend(lost.into_iter().chain(dropped.map(|q| q.tag)).flatten());
        Ok(())
    }

    fn push(&self, st: &mut TxState, q: Queued, counters: &Counters) -> Result<(), LinkError> {
        if !st.up {
            bump(&counters.tx_dropped_down);
            return Err(LinkError::Down);
        }
        if st.vls.len() >= self.capacity {
            bump(&counters.tx_dropped_full);
            return Err(LinkError::QueueFull);
        }
        st.vls.push(q);
        Ok(())
    }

    /// Replaces the fault plan; a packet held back for a swap is queued now.
    pub fn set_faults(&self, plan: FaultPlan, counters: &Counters) {
        let mut guard = self.lock();
        let st = &mut *guard;
        let woken = !st.writer_waiting || st.has_work();
        let mut lost = None;
        if let Some(held) = st.faults.take().and_then(|mut f| f.take_held()) {
            let tag = held.tag;
            if self.push(st, held, counters).is_err() {
                lost = Some(tag);
            }
        }
        st.faults = (!plan.is_empty()).then(|| FaultInjector::new(plan));
        if !woken && st.has_work() {
            self.ready.notify_one();
        }
        drop(guard);
        self.done(lost);
    }

    pub fn is_up(&self) -> bool {
        self.lock().up
    }

    /// A connection is up: accept packets for a new writer, which writes to
    /// its own clone of the connection (`stream` serves direct writes);
    /// with flow control, owe the peer a whole buffer on every VL.
    /// Returns the connection's number, for [`Self::free_rx`].
    pub fn open(&self, stream: Option<Arc<TxPipe>>) -> u64 {
        let mut st = self.lock();
        st.conn += 1;
        for held in &self.rx_held {
            held.store(0, Ordering::Relaxed);
        }
        st.up = true;
        st.writer_stop = false;
        st.stream = stream;
        if let Some(flow) = &self.flow {
            st.owed = [u32::from(flow.credits); NUM_VLS];
            st.owed_due = true;
        }
        st.conn
    }

    /// The connection is ending: refuse packets, tell the writer to exit and
    /// drop (and count) what is still queued; credits restart from zero.
    pub fn close(&self, counters: &Counters) {
        let mut st = self.lock();
        st.up = false;
        st.writer_stop = true;
        st.stream = None;
        st.owed = [0; NUM_VLS];
        st.owed_due = false;
        let held = st.faults.as_mut().and_then(|f| f.take_held());
        let mut dropped = st.vls.clear();
        dropped.extend(held);
        add(&counters.tx_dropped_down, dropped.len() as u64);
        let mut later: Vec<u64> = st.done_later.drain(..).collect();
        if let Some(mut pending) = st.pending.take() {
            // Counted when the direct send began; most of it never left.
            let (packets, bytes) = (pending.packets as u64, pending.packet_bytes as u64);
            if pending.counted {
                sub(&counters.tx_packets, packets);
                sub(&counters.tx_bytes, bytes);
            }
            add(&counters.tx_dropped_down, packets);
            later.append(&mut pending.tags);
            later.append(&mut pending.done);
            st.recycle(pending);
        }
        self.ready.notify_all();
        drop(st);
        self.done(dropped.into_iter().map(|q| q.tag));
        self.done(later.into_iter().map(Some));
    }

    /// Credits granted by the peer; what they let go is written directly
    /// if the writer sleeps.
    pub fn add_credits(&self, grants: &[u32; NUM_VLS], counters: &Counters) {
        let mut st = self.lock();
        let woken = !st.writer_waiting || st.has_work();
        st.vls.add_credits(grants);
        self.kick(&mut st, woken, counters);
    }

    /// Moves emptied buffers of framed packets into `spare`, up to `max`
    /// in all.
    pub fn reclaim(&self, spare: &mut Vec<Vec<u8>>, max: usize) {
        let want = max.saturating_sub(spare.len());
        if want == 0 {
            return;
        }
        let mut st = self.lock();
        let n = want.min(st.emptied.len());
        let from = st.emptied.len() - n;
        spare.extend(st.emptied.drain(from..));
    }

    /// Credits the peer has granted and this end not yet used.
    pub fn credits(&self) -> [u32; NUM_VLS] {
        self.lock().vls.credits()
    }

    /// This end freed `n` receive buffers on `vl` of the current
    /// connection: owe the peer credits (see [`Self::free_rx`]).
    pub fn return_credits(&self, vl: u8, n: u32, counters: &Counters) {
        let mut freed = [0; NUM_VLS];
        if let Some(f) = freed.get_mut(usize::from(vl)) {
            *f = u16::try_from(n).unwrap_or(u16::MAX);
        }
        let st = self.lock();
        let conn = st.conn;
        self.free_locked(st, conn, &freed, counters);
    }

    /// This end freed receive buffers (`freed[vl]` per VL) of connection
    /// `conn` (from [`Self::open`]): owe the peer credits, unless that
    /// connection has ended (its buffers went with it).
    /// Whatever is owed rides along with the next packets sent; a `Credit`
    /// frame of its own goes once half the buffer is owed. (Half, not a
    /// quarter: with request/response traffic the answer usually carries
    /// the credits, so the peer's reader is not woken by a frame of credits
    /// alone; half a buffer still in hand keeps a sender going.)
    pub fn free_rx(&self, conn: u64, freed: &[u16; NUM_VLS], counters: &Counters) {
        self.free_locked(self.lock(), conn, freed, counters);
    }

    fn free_locked(
        &self,
        mut st: MutexGuard<'_, TxState>,
        conn: u64,
        freed: &[u16; NUM_VLS],
        counters: &Counters,
    ) {
        let Some(flow) = &self.flow else {
            return;
        };
        if !st.up || st.conn != conn {
            return;
        }
        let half = (u32::from(flow.credits) / 2).max(1);
        let mut due = false;
        for ((owed, held), n) in st.owed.iter_mut().zip(&self.rx_held).zip(freed) {
            if *n == 0 {
                continue;
            }
            let n = u32::from(*n);
            // Never below zero: a caller may free more than it was sent.
            let _ = held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                Some(h.saturating_sub(n))
            });
            *owed = owed.saturating_add(n);
            due |= *owed >= half;
        }
        if due && !st.owed_due {
            let woken = !st.writer_waiting || st.has_work();
            st.owed_due = true;
            self.kick(&mut st, woken, counters);
        }
    }

    /// Receive buffers of `vl` that hold a packet on this connection.
    pub fn rx_held(&self, vl: u8) -> u32 {
        self.rx_held
            .get(usize::from(vl))
            .map_or(0, |h| h.load(Ordering::Relaxed))
    }

    /// The reader put packets into receive buffers (`taken[vl]` per VL);
    /// called on the reader's thread before the sink gets them.
    pub fn hold_rx(&self, taken: &[u16; NUM_VLS]) {
        for (held, n) in self.rx_held.iter().zip(taken) {
            if *n > 0 {
                held.fetch_add(u32::from(*n), Ordering::Relaxed);
            }
        }
    }

    /// Moves the next batch into `out` (empty on entry; its buffer is kept
    /// for reuse), waiting for a pending batch, packets that may be sent,
    /// credits to return or tags to report. The packets are left in
    /// `out.items`, to frame outside the lock. False once the writer is to
    /// exit.
    pub(super) fn take(&self, out: &mut Batch, counters: &Counters) -> bool {
        let mut st = self.lock();
        for packet in out.emptied.drain(..) {
            st.keep_emptied(packet);
        }
        loop {
            if st.writer_stop {
                return false;
            }
            if st.has_work() {
                break;
            }
            st.note_stall(counters);
            st.writer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            st.writer_waiting = false;
        }
        let st = &mut *st;
        if let Some(pending) = st.pending.take() {
            // Its rest goes first: the direct send began it.
            let empty = std::mem::replace(out, pending);
            st.recycle(empty);
            out.done.append(&mut st.done_later);
            return true;
        }
        out.done.append(&mut st.done_later);
        // Any packets going out carry the credits owed so far too.
        let sendable = st.vls.sendable();
        if sendable || st.owed_due {
            st.take_owed(out, counters);
        }
        let mut bytes = 0;
        while out.items.len() < BATCH_PACKETS && bytes < BATCH_BYTES {
            let Some(q) = st.vls.pop() else {
                break;
            };
            bytes += q.packet.len();
            out.items.push_back(q);
        }
        true
    }

    /// The writer sleeps (tests: the next burst is written directly).
    #[cfg(test)]
    pub(super) fn writer_sleeps(&self) -> bool {
        let st = self.lock();
        st.writer_waiting && !st.has_work()
    }

    /// The next batch, framed (tests of the queue alone).
    #[cfg(test)]
    pub(super) fn take_batch(&self, out: &mut Batch) -> bool {
        let more = self.take(out, &Counters::default());
        out.frame_items();
        more
    }
}

/// Frames and writes what may go (owed credits, packets by arbitration
/// within the credits) with non-blocking sends while the socket takes it;
/// called with the lock held, the writer asleep and no pending batch, so
/// nothing else writes to the socket meanwhile. A batch the socket takes
/// only part of (socket full, or an error the writer will meet and act on)
/// becomes the pending batch. Tags of packets written go to `done_later`.
fn write_direct(st: &mut TxState, counters: &Counters) {
    let Some(pipe) = st.stream.clone() else {
        return;
    };
    loop {
        let sendable = st.vls.sendable();
        if !sendable && !st.owed_due {
            return;
        }
        let mut batch = st.spare.pop().unwrap_or_default();
        st.take_owed(&mut batch, counters);
        while !batch.is_full() {
            let Some(q) = st.vls.pop() else {
                break;
            };
            if let Some(packet) = batch.push_packet(q.packet, q.tag) {
                st.keep_emptied(packet);
            }
        }
        // Counted before the peer can see the bytes (so whoever sees the
        // peer react sees the counters too).
        add(&counters.tx_packets, batch.packets as u64);
        add(&counters.tx_bytes, batch.packet_bytes as u64);
        batch.counted = true;
        let n = match pipe.try_send(&batch.unwritten_slices()) {
            Ok(n) => n,
            Err(e) => {
                if e.kind() != io::ErrorKind::WouldBlock {
                    tracing::trace!(error = %e, "direct link write failed; left to the writer");
                }
                st.pending = Some(batch);
                return;
            }
        };
        bump(&counters.tx_writes);
        batch.written += n;
        if !batch.is_written() {
            st.pending = Some(batch);
            return;
        }
        st.done_later.append(&mut batch.tags);
        st.recycle(batch);
    }
}

/// Writes all of `batch` (from its `written` offset) to `pipe`, waiting
/// for room as needed.
fn write_batch(pipe: &TxPipe, batch: &mut Batch) -> io::Result<()> {
    while !batch.is_written() {
        let slices = batch.unwritten_slices();
        let slices = &slices[..slices.len().min(IOV_MAX)];
        match pipe.send(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => batch.written += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The writer thread of one connection: drains `queue` into `pipe` until
/// the connection closes or a write fails (then it shuts the connection
/// down, so the reader sees the end too).
pub(super) fn run_writer(queue: &TxQueue, pipe: Arc<TxPipe>, counters: &Counters) {
    let mut batch = Batch::default();
    while queue.take(&mut batch, counters) {
        queue.done(batch.done.drain(..).map(Some));
        batch.frame_items();
        if batch.is_written() {
            batch.clear();
            continue;
        }
        let count = batch.packets as u64;
        let bytes = batch.packet_bytes as u64;
        // Counted before the peer can see the bytes (see `write_direct`).
        if !batch.counted {
            add(&counters.tx_packets, count);
            add(&counters.tx_bytes, bytes);
        }
        let written = write_batch(&pipe, &mut batch);
        queue.done(batch.tags.drain(..).map(Some));
        if let Err(e) = written {
            tracing::debug!(error = %e, "link write failed; closing the connection");
            sub(&counters.tx_packets, count);
            sub(&counters.tx_bytes, bytes);
            add(&counters.tx_dropped_down, count);
            pipe.shutdown();
            return;
        }
        bump(&counters.tx_writes);
        batch.clear();
    }
}

// The frame layout written by `Batch` is the protocol crate's.
#[cfg(test)]
#[test]
fn batch_frames_match_the_protocol_encoding() {
    use ibtca_protocol::link::Frame;
    let mut batch = Batch::default();
    batch.push_credit(3, 0x1234);
    batch.push_packet(vec![1, 2, 3], None);
    let mut want = Vec::new();
    Frame::Credit {
        vl: 3,
        credits: 0x1234,
    }
    .encode(&mut want)
    .unwrap();
    Frame::Packet(vec![1, 2, 3]).encode(&mut want).unwrap();
    assert_eq!(batch.stream(), want);
}

// Long packets are written from their own buffers; a write that stops
// anywhere resumes at the right byte.
#[cfg(test)]
#[test]
fn long_packets_go_out_from_their_buffers_and_partial_writes_resume() {
    use ibtca_protocol::link::Frame;
    let long: Vec<u8> = (0..COPY_BELOW + 7).map(|i| i as u8).collect();
    let mut batch = Batch::default();
    batch.push_credit(1, 5);
    assert_eq!(batch.push_packet(long.clone(), Some(9)), None, "kept");
    let short = batch.push_packet(vec![1, 2, 3], None).expect("copied");
    assert!(
        short.is_empty() && short.capacity() >= 3,
        "emptied for reuse"
    );
    assert_eq!(batch.push_packet(long.clone(), None), None);
    let mut want = Vec::new();
    Frame::Credit { vl: 1, credits: 5 }
        .encode(&mut want)
        .unwrap();
    for p in [&long, &vec![1, 2, 3], &long] {
        Frame::Packet(p.clone()).encode(&mut want).unwrap();
    }
    assert_eq!(batch.stream(), want);
    assert_eq!((batch.packets, batch.len()), (3, want.len()));
    for written in [0, 1, 9, 14, 15, 600, want.len() - 1, want.len()] {
        batch.written = written;
        let got: Vec<u8> = batch
            .unwritten_slices()
            .iter()
            .flat_map(|s| s.iter().copied())
            .collect();
        assert_eq!(got, want[written..], "from byte {written}");
        assert!(batch.unwritten_slices().iter().all(|s| !s.is_empty()));
        assert_eq!(batch.is_written(), written == want.len());
    }
    batch.clear();
    assert_eq!(batch.emptied.len(), 2, "both long buffers back");
    assert!(batch.emptied.iter().all(Vec::is_empty));
    assert_eq!((batch.len(), batch.packets), (0, 0));
}
