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
//! [`BATCH_PACKETS`]: batch::BATCH_PACKETS
//! [`BATCH_BYTES`]: batch::BATCH_BYTES
//! [`COPY_BELOW`]: batch::COPY_BELOW
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
//!
//! Here the queue's state; `send.rs` queues packets (and builds them in
//! place), `credits.rs` keeps the credits granted and owed, `connection.rs`
//! opens and closes the queue with each connection, `writer.rs` hands
//! batches to the writer and writes them, `batch.rs` frames a batch.

mod batch;
mod connection;
mod credits;
mod send;
mod writer;

use std::fmt;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::fault::FaultInjector;
use super::pipe::TxPipe;
use super::vl::{FlowControl, Queued, VlQueues, NUM_VLS};

pub(super) use batch::Batch;
#[cfg(test)]
pub(super) use batch::{BATCH_BYTES, BATCH_PACKETS};
pub(super) use writer::run_writer;

/// Emptied batch buffers kept for reuse.
const SPARE_BATCHES: usize = 4;
/// Buffers of framed packets kept for senders to reuse ([`TxQueue::reclaim`]).
const EMPTIED_PACKETS: usize = 256;

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
        /// The limit, [`MAX_BODY`](super::MAX_BODY).
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
}
