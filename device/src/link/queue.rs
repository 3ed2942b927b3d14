//! The send queue and the writer that drains it.
//!
//! [`TxQueue::send`] takes one lock, applies any fault plan and pushes the
//! packet on its VL's queue (`vl.rs`); it wakes the writer only if the
//! writer sleeps (a condvar notify is a syscall). The writer takes up to
//! [`BATCH_PACKETS`] packets (or [`BATCH_BYTES`]) in arbitration order and
//! within the peer's credits, plus any credits this end owes the peer,
//! encodes them into one reused buffer outside the lock, and writes that
//! with one `write_all`.

use std::collections::VecDeque;
use std::fmt;
use std::io::Write;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use ibtca_protocol::link::{Frame, FRAME_HEADER_LEN};

use super::fault::{FaultInjector, FaultPlan};
use super::stats::{add, bump, Counters};
use super::vl::{packet_vl, FlowControl, Queued, VlQueues, NUM_VLS};
use super::MAX_BODY;

/// Most packets one `write` carries.
pub(super) const BATCH_PACKETS: usize = 256;
/// A batch stops growing once its packets reach this many bytes.
pub(super) const BATCH_BYTES: usize = 256 * 1024;

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
    /// The writer sleeps on the condvar.
    writer_waiting: bool,
    faults: Option<FaultInjector<Queued>>,
    /// Tags of packets discarded in `send` (fault drops), reported by the
    /// writer: never from inside a caller's `send`.
    done_later: Vec<u64>,
}

/// What the writer takes from the queue for one `write`.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub packets: VecDeque<Queued>,
    pub credits: Vec<(u8, u16)>,
    /// Tags of packets discarded in `send`, to report.
    pub done: Vec<u64>,
}

/// The bounded queue between [`super::Link::send`] and the writer thread.
#[derive(Debug)]
pub(super) struct TxQueue {
    state: Mutex<TxState>,
    ready: Condvar,
    capacity: usize,
    flow: Option<FlowControl>,
    on_done: OnDone,
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
                faults: None,
                done_later: Vec::new(),
            }),
            ready: Condvar::new(),
            capacity,
            flow,
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
        if packet.len() > MAX_BODY {
            bump(&counters.tx_dropped_oversize);
            return Err(LinkError::TooLarge {
                len: packet.len(),
                max: MAX_BODY,
            });
        }
        let item = Queued {
            vl: packet_vl(&packet),
            packet,
            tag,
        };
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some(faults) = st.faults.as_mut() else {
            return self.push(&mut st.vls, st.up, st.writer_waiting, item, counters);
        };
        if !st.up {
            bump(&counters.tx_dropped_down);
            return Err(LinkError::Down);
        }
        // Under faults the queue owns what it was handed: a copy, or a
        // packet held back from an earlier call, may fail to queue; those
        // are counted and reported done, and the call succeeds.
        let mut lost = Vec::new();
        let dropped = faults.apply(item, counters, |q| {
            let tag = q.tag;
            if self
                .push(&mut st.vls, st.up, st.writer_waiting, q, counters)
                .is_err()
            {
                lost.push(tag);
            }
        });
        let before = st.done_later.len();
        st.done_later
            .extend(lost.into_iter().chain(dropped.map(|q| q.tag)).flatten());
        if st.done_later.len() > before && st.writer_waiting {
            self.ready.notify_one();
        }
        Ok(())
    }

    fn push(
        &self,
        vls: &mut VlQueues,
        up: bool,
        writer_waiting: bool,
        q: Queued,
        counters: &Counters,
    ) -> Result<(), LinkError> {
        if !up {
            bump(&counters.tx_dropped_down);
            return Err(LinkError::Down);
        }
        if vls.len() >= self.capacity {
            bump(&counters.tx_dropped_full);
            return Err(LinkError::QueueFull);
        }
        vls.push(q);
        if writer_waiting {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Replaces the fault plan; a packet held back for a swap is queued now.
    pub fn set_faults(&self, plan: FaultPlan, counters: &Counters) {
        let mut guard = self.lock();
        let st = &mut *guard;
        let mut lost = None;
        if let Some(held) = st.faults.take().and_then(|mut f| f.take_held()) {
            let tag = held.tag;
            if self
                .push(&mut st.vls, st.up, st.writer_waiting, held, counters)
                .is_err()
            {
                lost = Some(tag);
            }
        }
        st.faults = (!plan.is_empty()).then(|| FaultInjector::new(plan));
        drop(guard);
        self.done(lost);
    }

    pub fn is_up(&self) -> bool {
        self.lock().up
    }

    /// A connection is up: accept packets for a new writer; with flow
    /// control, owe the peer a whole buffer on every VL.
    pub fn open(&self) {
        let mut st = self.lock();
        st.up = true;
        st.writer_stop = false;
        if let Some(flow) = &self.flow {
            st.owed = [u32::from(flow.credits); NUM_VLS];
            st.owed_due = true;
        }
    }

    /// The connection is ending: refuse packets, tell the writer to exit and
    /// drop (and count) what is still queued; credits restart from zero.
    pub fn close(&self, counters: &Counters) {
        let mut st = self.lock();
        st.up = false;
        st.writer_stop = true;
        st.owed = [0; NUM_VLS];
        st.owed_due = false;
        let held = st.faults.as_mut().and_then(|f| f.take_held());
        let mut dropped = st.vls.clear();
        dropped.extend(held);
        add(&counters.tx_dropped_down, dropped.len() as u64);
        let later: Vec<u64> = st.done_later.drain(..).collect();
        self.ready.notify_all();
        drop(st);
        self.done(dropped.into_iter().map(|q| q.tag));
        self.done(later.into_iter().map(Some));
    }

    /// Credits granted by the peer.
    pub fn add_credits(&self, grants: &[u32; NUM_VLS]) {
        let mut st = self.lock();
        st.vls.add_credits(grants);
        if st.writer_waiting {
            self.ready.notify_one();
        }
    }

    /// Credits the peer has granted and this end not yet used.
    pub fn credits(&self) -> [u32; NUM_VLS] {
        self.lock().vls.credits()
    }

    /// This end freed `n` receive buffers on `vl`: owe the peer credits,
    /// sent once a quarter of the buffer is owed (or with the next batch).
    pub fn return_credits(&self, vl: u8, n: u32) {
        let Some(flow) = &self.flow else {
            return;
        };
        let mut st = self.lock();
        if !st.up {
            return;
        }
        let Some(owed) = st.owed.get_mut(usize::from(vl)) else {
            return;
        };
        *owed = owed.saturating_add(n);
        if *owed >= (u32::from(flow.credits) / 4).max(1) {
            st.owed_due = true;
            if st.writer_waiting {
                self.ready.notify_one();
            }
        }
    }

    /// Moves the next batch into `out` (empty on entry), waiting for
    /// packets that may be sent or credits to return. False once the
    /// writer is to exit.
    pub(super) fn take(&self, out: &mut Batch, counters: &Counters) -> bool {
        let mut st = self.lock();
        loop {
            if st.writer_stop {
                return false;
            }
            let sendable = !st.vls.is_empty() && !st.vls.stalled();
            if sendable || st.owed_due || !st.done_later.is_empty() {
                break;
            }
            if st.vls.stalled() {
                bump(&counters.credit_stalls);
            }
            st.writer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            st.writer_waiting = false;
        }
        // Any packets going out carry the credits owed so far too.
        for (vl, owed) in st.owed.iter_mut().enumerate() {
            let mut left = *owed;
            while left > 0 {
                let n = u16::try_from(left).unwrap_or(u16::MAX);
                out.credits.push((vl as u8, n));
                left -= u32::from(n);
            }
            *owed = 0;
        }
        st.owed_due = false;
        out.done.append(&mut st.done_later);
        let mut bytes = 0;
        while out.packets.len() < BATCH_PACKETS && bytes < BATCH_BYTES {
            let Some(q) = st.vls.pop() else {
                break;
            };
            bytes += q.packet.len();
            out.packets.push_back(q);
        }
        true
    }

    /// The packets of the next batch only (tests of the queue alone).
    #[cfg(test)]
    pub(super) fn take_batch(&self, out: &mut VecDeque<Vec<u8>>) -> bool {
        let mut batch = Batch::default();
        let more = self.take(&mut batch, &Counters::default());
        out.extend(batch.packets.into_iter().map(|q| q.packet));
        more
    }
}

/// The writer thread of one connection: drains `queue` into `stream` until
/// the connection closes or a write fails (then it shuts the stream down, so
/// the reader sees the end too).
pub(super) fn run_writer(queue: &TxQueue, mut stream: UnixStream, counters: &Counters) {
    let mut batch = Batch::default();
    let mut buf = Vec::with_capacity(BATCH_BYTES + MAX_BODY + BATCH_PACKETS * FRAME_HEADER_LEN);
    while queue.take(&mut batch, counters) {
        queue.done(batch.done.drain(..).map(Some));
        buf.clear();
        add(&counters.credit_frames_tx, batch.credits.len() as u64);
        for (vl, credits) in batch.credits.drain(..) {
            let _ = Frame::Credit { vl, credits }.encode(&mut buf);
        }
        let count = batch.packets.len() as u64;
        let mut bytes = 0u64;
        let mut tags = Vec::new();
        for q in batch.packets.drain(..) {
            bytes += q.packet.len() as u64;
            tags.push(q.tag);
            // Cannot fail: `send` refused bodies over MAX_BODY.
            let _ = Frame::Packet(q.packet).encode(&mut buf);
        }
        if buf.is_empty() {
            continue;
        }
        let written = stream.write_all(&buf);
        queue.done(tags);
        if let Err(e) = written {
            tracing::debug!(error = %e, "link write failed; closing the connection");
            add(&counters.tx_dropped_down, count);
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        add(&counters.tx_packets, count);
        add(&counters.tx_bytes, bytes);
        bump(&counters.tx_writes);
    }
}
