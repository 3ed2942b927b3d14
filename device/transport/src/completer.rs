//! The completer: consumes responses (ACK, NAK, RDMA READ responses,
//! ATOMIC ACKNOWLEDGE) against the requester's in-flight WQEs and retires
//! WQEs in order.
//!
//! WQEs complete by the MSN in the responses' AETH ([`super::msn`], seed
//! 002 items 2–3), one per MSN advance, cross-checked against the PSN. The
//! PSN moves the send window: an ACK, a NAK or a response for PSN `p`
//! implies every earlier request was executed, so a lost ACK costs nothing
//! once a later one arrives. The one exception is a READ or atomic: an
//! acknowledgement past it without its responses means the responses were
//! lost, and the requester goes back to re-ask for them. Timers and retry
//! counting live in [`super::rc`]; this file only says what a response
//! means.

use ibtca_protocol::headers::{AckKind, NakCode};
use ibtca_protocol::opcode::{Direction, OpClass};
use ibtca_protocol::PacketView;

use super::config::{RcConfig, RcCounters};
use super::msn::MsnViolation;
use super::psn;
use super::requester::{Requester, WrKind};
use super::segmenter;
use super::{CqKind, QpEnv};
use ibtca_abi::verbs::*;

/// What a response means for the requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// Stale, duplicate or unexpected: nothing changed.
    Ignored,
    /// Accepted; the requester may have made progress.
    Accepted,
    /// Go back N to the oldest unacknowledged PSN (PSN sequence NAK, or
    /// READ/atomic responses missing).
    Retry,
    /// Receiver not ready: wait the timer with this code, then go back.
    Rnr {
        /// RNR NAK timer code.
        timer: u8,
    },
    /// A WQE failed (its error status is set): the QP goes to error.
    Fatal,
}

impl Requester {
    /// Takes the responder's word that every request up to and including
    /// `p` was executed, and acknowledges through the newest such PSN,
    /// except that a READ or atomic still waiting for responses stops the
    /// acknowledgement at its first missing response. Returns true when it
    /// stopped there. What was executed past it is kept: once those
    /// responses land, `una` moves on to it (by then the MSN may have
    /// completed the SENDs and WRITEs in between, whose PSNs go-back-N
    /// could not resend).
    pub(crate) fn ack_through(&mut self, p: u32) -> bool {
        if psn::before(self.executed, psn::add(p, 1)) {
            self.executed = psn::add(p, 1);
        }
        let mut target = self.executed;
        let mut stopped = false;
        if let Some(f) = self.first_awaiting().and_then(|i| self.inflight.get(i)) {
            let resume = psn::add(f.first_psn, f.received);
            if psn::before(resume, target) {
                target = resume;
                stopped = true;
            }
        }
        if psn::before(self.una, target) {
            self.una = target;
        }
        if psn::before(self.tx_psn, self.una) {
            self.tx_psn = self.una;
            // Acknowledged past what was resent since an ACK timeout: the
            // first transmission is arriving after all. Let it: a loss in
            // it still shows as a PSN sequence NAK or another timeout.
            if self.allowance.take().is_some() {
                self.tx_psn = self.tx_high;
            }
        }
        stopped
    }

    /// Handles one response packet.
    pub(crate) fn on_response<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Event {
        let info = v.info();
        if info.direction != Direction::Response {
            return Event::Ignored;
        }
        let event = match info.class {
            OpClass::Ack => self.on_ack(v, counters),
            OpClass::Read => self.on_read_response(v, cfg, env),
            OpClass::Atomic => self.on_atomic_ack(v, env),
            _ => Ok(Event::Ignored),
        };
        let event = event.unwrap_or_else(|e| self.bad_msn(e, cfg.qpn));
        if event == Event::Ignored {
            counters.duplicate_responses += 1;
        }
        event
    }

    /// An MSN that claims more messages than its PSN covers: the oldest
    /// unconfirmed WQE fails with WC_BAD_RESP_ERR and the QP goes to error.
    fn bad_msn(&mut self, e: MsnViolation, qpn: u32) -> Event {
        ibtca_log::guest_warn!(
            qpn,
            msn = e.msn,
            psn = e.covered,
            last_msn = self.msn.acked,
            "ACK MSN claims more messages than its PSN covers: failing the QP (WC_BAD_RESP_ERR)"
        );
        match self.first_unconfirmed() {
            Some(f) => {
                f.error.get_or_insert(WC_BAD_RESP_ERR);
                Event::Fatal
            }
            None => Event::Ignored,
        }
    }

    fn on_ack(
        &mut self,
        v: &PacketView<'_>,
        counters: &mut RcCounters,
    ) -> Result<Event, MsnViolation> {
        let Some(aeth) = v.ext.aeth else {
            return Ok(Event::Ignored);
        };
        let p = v.bth.psn;
        if let AckKind::Ack { .. } = aeth.kind() {
            // The PSN before `una` too: the answer to a probe for a missing
            // MSN (`Requester::restart_slowly`) repeats it.
            if !psn::in_window(p, psn::sub(self.una, 1), self.tx_high) {
                return Ok(Event::Ignored);
            }
            let una = self.una;
            let confirmed = self.take_msn(aeth.msn, p)?;
            return Ok(if self.ack_through(p) {
                Event::Retry
            } else if confirmed || self.una != una || p != psn::sub(una, 1) {
                Event::Accepted
            } else {
                Event::Ignored
            });
        }
        // A NAK names the PSN the responder expects (or refused): it may be
        // one past the last PSN sent, never more.
        if !psn::in_window(p, self.una, psn::add(self.tx_high, 1)) {
            return Ok(Event::Ignored);
        }
        let kind = aeth.kind();
        if matches!(kind, AckKind::Reserved(_)) {
            return Ok(Event::Ignored);
        }
        // Everything before the NAK'd PSN was executed, and the MSN counts
        // the messages that ended there.
        self.take_msn(aeth.msn, psn::sub(p, 1))?;
        self.ack_through(psn::sub(p, 1));
        Ok(match kind {
            AckKind::RnrNak { timer } => {
                counters.naks_received.rnr += 1;
                Event::Rnr { timer }
            }
            AckKind::Nak(NakCode::PsnSequenceError) => {
                counters.naks_received.psn_seq += 1;
                Event::Retry
            }
            AckKind::Nak(code) => {
                let status = match code {
                    NakCode::RemoteAccessError => {
                        counters.naks_received.remote_access += 1;
                        WC_REM_ACCESS_ERR
                    }
                    NakCode::InvalidRequest | NakCode::InvalidRdRequest => {
                        counters.naks_received.invalid_request += 1;
                        WC_REM_INV_REQ_ERR
                    }
                    _ => {
                        counters.naks_received.remote_op += 1;
                        WC_REM_OP_ERR
                    }
                };
                let victim = self
                    .find(p)
                    .or_else(|| self.inflight.iter().position(|f| f.error.is_none()));
                match victim.and_then(|i| self.inflight.get_mut(i)) {
                    Some(f) => {
                        f.error = Some(status);
                        Event::Fatal
                    }
                    None => Event::Ignored,
                }
            }
            AckKind::Ack { .. } | AckKind::Reserved(_) => Event::Ignored,
        })
    }

    /// Where a response for the oldest waiting READ/atomic must be: its
    /// index and the PSN expected next. Later responses mean a gap.
    fn expected_response(&self, p: u32, read: bool) -> Result<usize, Event> {
        let Some(i) = self.first_awaiting() else {
            return Err(Event::Ignored);
        };
        let f = &self.inflight[i];
        if (f.kind == WrKind::Read) != read || !psn::before(p, self.tx_high) {
            return Err(Event::Ignored);
        }
        let expected = psn::add(f.first_psn, f.received);
        match psn::diff(p, expected) {
            0 => Ok(i),
            d if d > 0 && f.contains(p) => Err(Event::Retry),
            _ => Err(Event::Ignored),
        }
    }

    fn on_read_response<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        env: &mut E,
    ) -> Result<Event, MsnViolation> {
        let p = v.bth.psn;
        let i = match self.expected_response(p, true) {
            Ok(i) => i,
            Err(e) => return Ok(e),
        };
        // FIRST, LAST and ONLY carry the MSN, which counts the READ itself.
        if let Some(aeth) = v.ext.aeth {
            self.take_msn(aeth.msn, p)?;
        }
        let f = &mut self.inflight[i];
        let seg = segmenter::segment(f.len, cfg.path_mtu, f.received);
        // Responses are segmented like requests: any other length, or a
        // LAST where more is due, is a bad response.
        if v.payload.len() != seg.len || v.info().position.ends() != seg.position.ends() {
            f.error = Some(WC_BAD_RESP_ERR);
            return Ok(Event::Fatal);
        }
        if !v.payload.is_empty() {
            let sges = f.sges();
            if env.scatter(sges, seg.offset, v.payload).is_err() {
                f.error = Some(WC_LOC_PROT_ERR);
                return Ok(Event::Fatal);
            }
        }
        f.received += 1;
        let done = f.received >= f.npsn;
        Ok(self.responses_through(p, done))
    }

    /// A response for `p` landed (`done`: the last its READ or atomic
    /// needed). Stopped at a later READ or atomic that the responder has
    /// executed past, the requester asks for its responses again at once:
    /// the responder sent them before (in PSN order), so they were lost,
    /// or ignored for coming while this one was awaited.
    fn responses_through(&mut self, p: u32, done: bool) -> Event {
        if self.ack_through(p) && done {
            Event::Retry
        } else {
            Event::Accepted
        }
    }

    fn on_atomic_ack<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        env: &mut E,
    ) -> Result<Event, MsnViolation> {
        let p = v.bth.psn;
        let i = match self.expected_response(p, false) {
            Ok(i) => i,
            Err(e) => return Ok(e),
        };
        let (Some(orig), Some(aeth)) = (v.ext.atomic_ack_eth.map(|a| a.orig), v.ext.aeth) else {
            return Ok(Event::Ignored);
        };
        self.take_msn(aeth.msn, p)?;
        let f = &mut self.inflight[i];
        // The original value lands in the first SGE in guest (little-endian)
        // byte order.
        if env
            .scatter(&f.wqe.sge[..1], 0, &orig.to_le_bytes())
            .is_err()
        {
            f.error = Some(WC_LOC_PROT_ERR);
            return Ok(Event::Fatal);
        }
        f.received = f.npsn;
        Ok(self.responses_through(p, true))
    }

    /// Completes finished WQEs from the front, in order (one CQE per
    /// signaled WQE): messages the MSN confirmed (a READ or atomic once its
    /// responses landed too), and local operations that reached the front.
    /// Returns true when the front WQE has failed: the QP must go to error.
    pub(crate) fn retire<E: QpEnv + ?Sized>(&mut self, qpn: u32, env: &mut E) -> bool {
        while let Some(f) = self.inflight.front() {
            if f.error.is_some() {
                return true;
            }
            let message = f.npsn > 0;
            let done = if !message {
                !psn::before(self.una, f.end_psn())
            } else {
                self.msn.confirmed > 0
                    && (!f.kind.needs_response() || f.received >= f.npsn)
                    && !(f.kind == WrKind::Read && env.completion_waits(&f.wqe))
            };
            if !done {
                break;
            }
            if message {
                self.msn.confirmed -= 1;
                self.msn.messages -= 1;
            }
            // Retired before its completion is written: a guest that sees
            // the completion may reuse what the work request held (a DRDMA
            // range) at once.
            env.retired(&f.wqe, WC_SUCCESS);
            if f.signaled() {
                env.complete(CqKind::Send, f.cqe(qpn, WC_SUCCESS));
            }
            self.inflight.pop_front();
        }
        false
    }
}
