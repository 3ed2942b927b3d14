//! Credit bookkeeping: credits the peer grants (what they let go is sent),
//! and receive buffers this end holds and frees (what it owes the peer,
//! sent in `Credit` frames).

use std::sync::atomic::Ordering;
use std::sync::MutexGuard;

use super::super::stats::{add, bump, Counters};
use super::super::vl::{NUM_VLS, VL15};
use super::batch::Batch;
use super::{TxQueue, TxState};

impl TxState {
    /// Counts a credit stall (packets queued, none may go) once, when it
    /// begins.
    pub(super) fn note_stall(&mut self, counters: &Counters) {
        let stalled = self.vls.stalled();
        if stalled && !self.in_stall {
            bump(&counters.credit_stalls);
        }
        self.in_stall = stalled;
    }

    /// Frames every credit owed into `batch`; nothing is owed after.
    pub(super) fn take_owed(&mut self, batch: &mut Batch, counters: &Counters) {
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
}

impl TxQueue {
    /// Credits granted by the peer; what they let go is written directly
    /// if the writer sleeps.
    pub fn add_credits(&self, grants: &[u32; NUM_VLS], counters: &Counters) {
        let mut st = self.lock();
        let woken = !st.writer_waiting || st.has_work();
        st.vls.add_credits(grants);
        self.kick(&mut st, woken, counters);
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
        for (vl, ((owed, held), n)) in st.owed.iter_mut().zip(&self.rx_held).zip(freed).enumerate()
        {
            if *n == 0 {
                continue;
            }
            let n = u32::from(*n);
            // Never below zero: a caller may free more than it was sent.
            let _ = held.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |h| {
                Some(h.saturating_sub(n))
            });
            if vl == usize::from(VL15) {
                // Outside flow control: a freed VL15 buffer owes nothing.
                continue;
            }
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
}
