//! A connection's start and end as the send queue sees them: packets are
//! accepted from [`TxQueue::open`] to [`TxQueue::close`], and whatever is
//! still queued at the end is dropped and counted.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::super::pipe::TxPipe;
use super::super::stats::{add, sub, Counters};
use super::super::vl::{NUM_VLS, VL15};
use super::TxQueue;

impl TxQueue {
    /// True from [`Self::open`] to [`Self::close`].
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
            // VL15 is outside flow control: no credits.
            st.owed[usize::from(VL15)] = 0;
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
}
