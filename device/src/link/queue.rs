//! The send queue and the writer that drains it.
//!
//! [`TxQueue::send`] takes one lock, applies any fault plan and pushes the
//! packet; it wakes the writer only if the writer sleeps (a condvar notify is
//! a syscall). The writer moves up to [`BATCH_PACKETS`] packets (or
//! [`BATCH_BYTES`]) out under the lock, encodes them into one reused buffer
//! outside it, and writes that with one `write_all`.

use std::collections::VecDeque;
use std::io::Write;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Condvar, Mutex, MutexGuard};

use ibtca_protocol::link::{Frame, FRAME_HEADER_LEN};

use super::fault::{FaultInjector, FaultPlan};
use super::stats::{add, bump, Counters};
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

#[derive(Debug)]
struct TxState {
    packets: VecDeque<Vec<u8>>,
    /// A connection is up and its writer accepts packets.
    up: bool,
    /// The current writer is to exit.
    writer_stop: bool,
    /// The writer sleeps on the condvar.
    writer_waiting: bool,
    faults: Option<FaultInjector>,
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
                packets: VecDeque::with_capacity(capacity.min(super::QUEUE_CAPACITY)),
                up: false,
                writer_stop: false,
                writer_waiting: false,
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
        if packet.len() > MAX_BODY {
            bump(&counters.tx_dropped_oversize);
            return Err(LinkError::TooLarge {
                len: packet.len(),
                max: MAX_BODY,
            });
        }
        let mut guard = self.lock();
        let st = &mut *guard;
        let Some(faults) = st.faults.as_mut() else {
            return self.push(&mut st.packets, st.up, st.writer_waiting, packet, counters);
        };
        let mut result = Ok(());
        faults.apply(packet, counters, |p| {
            if let Err(e) = self.push(&mut st.packets, st.up, st.writer_waiting, p, counters) {
                result = Err(e);
            }
        });
        result
    }

    fn push(
        &self,
        packets: &mut VecDeque<Vec<u8>>,
        up: bool,
        writer_waiting: bool,
        packet: Vec<u8>,
        counters: &Counters,
    ) -> Result<(), LinkError> {
        if !up {
            bump(&counters.tx_dropped_down);
            return Err(LinkError::Down);
        }
        if packets.len() >= self.capacity {
            bump(&counters.tx_dropped_full);
            return Err(LinkError::QueueFull);
        }
        packets.push_back(packet);
        if writer_waiting && packets.len() == 1 {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Replaces the fault plan; a packet held back for a swap is queued now.
    pub fn set_faults(&self, plan: FaultPlan, counters: &Counters) {
        let mut guard = self.lock();
        let st = &mut *guard;
        if let Some(held) = st.faults.take().and_then(|mut f| f.take_held()) {
            let _ = self.push(&mut st.packets, st.up, st.writer_waiting, held, counters);
        }
        st.faults = (!plan.is_empty()).then(|| FaultInjector::new(plan));
    }

    pub fn is_up(&self) -> bool {
        self.lock().up
    }

    /// A connection is up: accept packets for a new writer.
    pub fn open(&self) {
        let mut st = self.lock();
        st.up = true;
        st.writer_stop = false;
    }

    /// The connection is ending: refuse packets, tell the writer to exit and
    /// drop (and count) what is still queued.
    pub fn close(&self, counters: &Counters) {
        let mut st = self.lock();
        st.up = false;
        st.writer_stop = true;
        add(&counters.tx_dropped_down, st.packets.len() as u64);
        st.packets.clear();
        self.ready.notify_all();
    }

    /// Moves the next batch into `out` (empty on entry), waiting for packets.
    /// False once the writer is to exit.
    pub(super) fn take_batch(&self, out: &mut VecDeque<Vec<u8>>) -> bool {
        let mut st = self.lock();
        loop {
            if st.writer_stop {
                return false;
            }
            if !st.packets.is_empty() {
                break;
            }
            st.writer_waiting = true;
            st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            st.writer_waiting = false;
        }
        let mut bytes = 0;
        while out.len() < BATCH_PACKETS && bytes < BATCH_BYTES {
            let Some(packet) = st.packets.pop_front() else {
                break;
            };
            bytes += packet.len();
            out.push_back(packet);
        }
        true
    }
}

/// The writer thread of one connection: drains `queue` into `stream` until
/// the connection closes or a write fails (then it shuts the stream down, so
/// the reader sees the end too).
pub(super) fn run_writer(queue: &TxQueue, mut stream: UnixStream, counters: &Counters) {
    let mut batch = VecDeque::with_capacity(BATCH_PACKETS);
    let mut buf = Vec::with_capacity(BATCH_BYTES + MAX_BODY + BATCH_PACKETS * FRAME_HEADER_LEN);
    while queue.take_batch(&mut batch) {
        buf.clear();
        let count = batch.len() as u64;
        let mut bytes = 0u64;
        for packet in batch.drain(..) {
            bytes += packet.len() as u64;
            // Cannot fail: `send` refused bodies over MAX_BODY.
            let _ = Frame::Packet(packet).encode(&mut buf);
        }
        if let Err(e) = stream.write_all(&buf) {
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
