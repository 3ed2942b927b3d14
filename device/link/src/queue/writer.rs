//! The hand-off to the writer thread and the writing itself: the writer
//! takes a pending batch, or owed credits and the next packets by
//! arbitration, frames them outside the lock and writes them; a sender
//! writes directly while the writer sleeps; buffers of framed packets go
//! back to senders ([`TxQueue::reclaim`]).

use std::io;
use std::sync::Arc;

use super::super::pipe::{TxPipe, IOV_MAX};
use super::super::stats::{add, bump, sub, Counters};
use super::batch::{Batch, BATCH_BYTES, BATCH_PACKETS};
use super::{TxQueue, TxState};

impl TxQueue {
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

    /// Moves the next batch into `out` (empty on entry; its buffer is kept
    /// for reuse), waiting for a pending batch, packets that may be sent,
    /// credits to return or tags to report. The packets are left in
    /// `out.items`, to frame outside the lock. False once the writer is to
    /// exit.
    pub fn take(&self, out: &mut Batch, counters: &Counters) -> bool {
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
    pub(crate) fn writer_sleeps(&self) -> bool {
        let st = self.lock();
        st.writer_waiting && !st.has_work()
    }

    /// The next batch, framed (tests of the queue alone).
    #[cfg(test)]
    pub(crate) fn take_batch(&self, out: &mut Batch) -> bool {
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
pub(super) fn write_direct(st: &mut TxState, counters: &Counters) {
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
pub(crate) fn run_writer(queue: &TxQueue, pipe: Arc<TxPipe>, counters: &Counters) {
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
