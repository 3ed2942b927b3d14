//! Queueing packets to send: one at a time, a burst under one lock
//! (written directly while the writer sleeps), or built in place in the
//! shared ring; the fault plan on the way.

use ibtca_protocol::encoded;

use super::super::fault::{FaultInjector, FaultPlan};
use super::super::pipe::TxPipe;
use super::super::stats::{add, bump, Counters};
use super::super::vl::Queued;
use super::super::MAX_BODY;
use super::batch::frame_header;
use super::writer::write_direct;
use super::{LinkError, TxQueue, TxState};

impl TxQueue {
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
    pub(super) fn kick(&self, st: &mut TxState, woken: bool, counters: &Counters) {
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

    /// Replaces the low-priority arbitration table; a VL it lets go again
    /// wakes the writer.
    pub fn set_low_priority(&self, entries: &[(u8, u8)], counters: &Counters) {
        let mut st = self.lock();
        let woken = !st.writer_waiting || st.has_work();
        st.vls.set_low_priority(entries);
        self.kick(&mut st, woken, counters);
    }

    /// Replaces the high-priority arbitration table and limit; a VL it
    /// lets go again wakes the writer.
    pub fn set_high_priority(&self, table: &crate::vl::HighPriority, counters: &Counters) {
        let mut st = self.lock();
        let woken = !st.writer_waiting || st.has_work();
        st.vls.set_high_priority(table);
        self.kick(&mut st, woken, counters);
    }
}
