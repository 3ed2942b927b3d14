//! The engine's side of the send queues: reading WQEs from guest memory
//! into the transport (at most [`MAX_QUEUED_SEND_WQES`] queued there, a
//! DRDMA WRITE held at the head until its range is full), and a QP's
//! doorbell record (`verbs/db_record.rs`): read on every visit, and kept
//! awake while the QP has send work in flight.

use std::time::Instant;

use super::qp_map::QpMap;
use super::{DeviceQpEnv, Engine, MAX_QUEUED_SEND_WQES};
use crate::drdma::{self, WriteReady};
use crate::transport::rc::flush_posted_sends;
use crate::transport::SendWr;
use crate::verbs::abi::WR_DRDMA_WRITE;
use crate::verbs::db_record::RecordQueue;
use crate::verbs::qp_state::QpState;

/// What the engine read from the send queues and could not hand to the
/// transport yet.
#[derive(Default)]
pub(super) struct SendQueues {
    /// Per QP: a DRDMA WRITE at the head of the send queue whose range is
    /// still being filled (the seed's bus router polling BR Valid).
    pub(super) held: QpMap<SendWr>,
    /// WQEs read from a send queue for one `post_sends` (kept for its
    /// allocation).
    pub(super) sq_wqes: Vec<SendWr>,
    /// QPs whose send queue still holds WQEs the engine left there because
    /// [`MAX_QUEUED_SEND_WQES`] were queued in the transport already.
    pub(super) capped: Vec<u32>,
}

impl SendQueues {
    /// Forgets what was read (device reset).
    pub(super) fn clear(&mut self) {
        self.held.clear();
        self.capped.clear();
    }

    /// Drops what is held for QPs not in `live`.
    pub(super) fn retain(&mut self, live: &[u32]) {
        self.held.retain(|qpn, _| live.contains(qpn));
    }

    /// QPs whose held DRDMA WRITE waits for range `arr` (any range if it is
    /// [`drdma::ALL_RANGES`]).
    pub(super) fn waiting_for(&self, arr: u32) -> Vec<u32> {
        self.held
            .iter()
            .filter(|(_, w)| arr == drdma::ALL_RANGES || drdma::direct_arr(&w.sge[0]) == Some(arr))
            .map(|(&q, _)| q)
            .collect()
    }

    /// Lists QP `qpn` as left at [`MAX_QUEUED_SEND_WQES`] (once).
    pub(super) fn cap(&mut self, qpn: u32) {
        if !self.capped.contains(&qpn) {
            self.capped.push(qpn);
        }
    }

    /// Whether a QP was left at [`MAX_QUEUED_SEND_WQES`].
    pub(super) fn any_capped(&self) -> bool {
        !self.capped.is_empty()
    }
}

impl Engine {
    /// Reads on from the send queues left at [`MAX_QUEUED_SEND_WQES`] once
    /// completions made room. Needed where room frees up without a drain
    /// of the QP: local work requests started by a timer (the end of an RNR
    /// wait; `tests/tests/capped_send_queue.rs`).
    pub(super) fn resume_capped(&mut self, now: Instant) {
        let capped = std::mem::take(&mut self.sends.capped);
        for qpn in capped {
            if self.data.has_room(qpn) {
                self.drain_sq(qpn, now);
            } else if self.data.has(qpn) {
                self.sends.cap(qpn);
            }
        }
    }

    /// Whether `wqe` must wait at the head of QP `qpn`'s send queue: a
    /// DRDMA WRITE whose range, owned by the QP's doorbell page, is still
    /// being filled. Another page's range holds nothing: its gather fails.
    fn must_hold(&self, qpn: u32, wqe: &SendWr) -> bool {
        let page = self.verbs.qps.get(qpn).map_or(0, |qp| qp.db_page);
        wqe.opcode == WR_DRDMA_WRITE
            && drdma::direct_arr(&wqe.sge[0]).is_some_and(|arr| {
                self.drdma.owned_by(arr, page) && self.drdma.write_ready(arr) == WriteReady::Filling
            })
    }

    /// Takes what the send queue holds. A QP with a doorbell record reads
    /// its index there too, and is awake while it has send work in flight
    /// (the ACKs, responses or timers of that work bring the engine back
    /// here); before it sleeps it reads the record once more.
    pub(super) fn drain_sq(&mut self, qpn: u32, now: Instant) {
        if self.drain_datagram_sq(qpn) {
            return;
        }
        // In ERR without ever reaching RTR: what is posted flushes.
        if !self.data.has(qpn)
            && self
                .verbs
                .qps
                .get(qpn)
                .is_some_and(|qp| qp.state() == QpState::Err)
        {
            self.flush_unstarted_sends(qpn);
            return;
        }
        // Not before RTS (an RTR QP only answers).
        if !self.data.is_sending_or_error(qpn) {
            return;
        }
        loop {
            let read = match self.verbs.qps.get_mut(qpn) {
                Some(qp) => qp.from_record(&self.mem, RecordQueue::Sq),
                None => return,
            };
            if let Err(e) = read {
                crate::guest_warn!(qpn, error = %e, "doorbell record");
                self.sync_qps(); // the QP is in error now: flush
                return;
            }
            self.take_send_wqes(qpn, now);
            let busy = self.sends.held.contains_key(&qpn) || self.data.has_send_work(qpn);
            let more = match self.verbs.qps.get_mut(qpn) {
                Some(qp) => qp.set_awake(&self.mem, RecordQueue::Sq, busy),
                None => return,
            };
            match more {
                Ok(true) => continue,
                Ok(false) => return,
                Err(e) => {
                    crate::guest_warn!(qpn, error = %e, "doorbell record");
                    self.sync_qps();
                    return;
                }
            }
        }
    }

    /// What QP `qpn`'s work reaches: the device's memory, CQs and link.
    pub(super) fn qp_env(&mut self, qpn: u32) -> DeviceQpEnv<'_> {
        DeviceQpEnv {
            qpn,
            verbs: &mut self.verbs,
            mem: &self.mem,
            msix: &self.msix,
            sink: &mut self.outbox,
            drdma: &self.drdma,
        }
    }

    /// Send WQEs posted to a QP that went to ERR before it reached RTR
    /// (no transport state) complete at once with a flush error (IBA
    /// 10.3.1): the kernel's ib_drain_sq waits for one without a bound.
    fn flush_unstarted_sends(&mut self, qpn: u32) {
        loop {
            let mut wqes = Vec::new();
            let Some(qp) = self.verbs.qps.get_mut(qpn) else {
                return;
            };
            if let Err(e) = qp.from_record(&self.mem, RecordQueue::Sq) {
                crate::guest_warn!(qpn, error = %e, "doorbell record");
                return;
            }
            loop {
                match qp.next_send_wqe(&self.mem) {
                    Ok(Some(wqe)) => wqes.push(wqe),
                    Ok(None) => break,
                    Err(e) => {
                        crate::guest_warn!(qpn, error = %e, "send queue");
                        break;
                    }
                }
            }
            let more = qp.set_awake(&self.mem, RecordQueue::Sq, false);
            let flushed = flush_posted_sends(qpn, wqes, &mut self.qp_env(qpn));
            self.stats.flushed_sends += flushed;
            if !matches!(more, Ok(true)) {
                return;
            }
        }
    }

    /// Hands the transport the send queue's new WQEs (held and capped as
    /// [`MAX_QUEUED_SEND_WQES`] and DRDMA say).
    fn take_send_wqes(&mut self, qpn: u32, now: Instant) {
        if let Some(wqe) = self.sends.held.remove(&qpn) {
            if self.must_hold(qpn, &wqe) {
                self.sends.held.insert(qpn, wqe);
                return;
            }
            self.with_qp(qpn, |rc, env| rc.post_send(wqe, now, env));
        }
        // Every new WQE up to a held one goes to the transport in one call,
        // at most MAX_QUEUED_SEND_WQES queued there; a QP in error flushes
        // what it is given at once, so its queue is read to the end.
        let mut wqes = std::mem::take(&mut self.sends.sq_wqes);
        loop {
            let queued = self.data.queued(qpn);
            let mut capped = false;
            while let Some(qp) = self.verbs.qps.get_mut(qpn) {
                if queued + wqes.len() >= MAX_QUEUED_SEND_WQES {
                    capped = qp.send_pending();
                    break;
                }
                match qp.next_send_wqe(&self.mem) {
                    Ok(Some(wqe)) if self.must_hold(qpn, &wqe) => {
                        self.sends.held.insert(qpn, wqe);
                        break;
                    }
                    Ok(Some(wqe)) => wqes.push(wqe),
                    Ok(None) => break,
                    Err(e) => {
                        crate::guest_warn!(qpn, error = %e, "send queue");
                        break;
                    }
                }
            }
            if !wqes.is_empty() {
                self.with_qp(qpn, |rc, env| rc.post_sends(wqes.drain(..), now, env));
            }
            let room = self.data.has_room(qpn);
            if !capped || !room {
                if capped {
                    self.sends.cap(qpn);
                }
                break;
            }
        }
        self.sends.sq_wqes = wqes;
    }
}
