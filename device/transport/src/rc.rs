//! [`RcQp`]: one RC queue pair's transport state — requester, completer and
//! responder — plus its two timers (ACK timeout and RNR wait) and retry
//! counters. Sans-I/O: time comes in as `now`, effects go out through
//! [`QpEnv`]; the caller wakes the QP at [`RcQp::next_deadline`].

use std::time::Instant;

use ibtca_protocol::headers::Bth;
use ibtca_protocol::opcode::{Direction, Service};
use ibtca_protocol::PacketView;

use super::completer::Event;
use super::config::{rnr_delay, ConfigError, RcConfig, RcCounters};
use super::psn;
use super::requester::Requester;
use super::responder::Responder;
use super::{CqKind, QpEnv};
use crate::SendWr;
use ibtca_abi::verbs::{Cqe, WC_RECV, WC_RETRY_EXC_ERR, WC_RNR_RETRY_EXC_ERR, WC_WR_FLUSH_ERR};

/// Why an RC QP went to the error state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpFailure {
    /// A send WQE failed with this completion status (WC_RETRY_EXC_ERR:
    /// the peer stopped answering; a NAK's status; a local error).
    Wqe(u8),
    /// An inbound request the responder could not take.
    Responder,
    /// Moved to error from outside ([`RcQp::flush`]: the driver, a bad
    /// doorbell).
    Requested,
}

/// An RC queue pair's transport.
#[derive(Debug)]
pub struct RcQp {
    cfg: RcConfig,
    req: Requester,
    resp: Responder,
    error: bool,
    /// Why the QP is in error.
    failure: Option<QpFailure>,
    /// Retransmit from the oldest unacknowledged PSN at this time.
    ack_deadline: Option<Instant>,
    /// Sending paused by an RNR NAK until this time.
    rnr_until: Option<Instant>,
    retry_left: u8,
    rnr_left: u8,
    /// The requester went back to this PSN because of a response and has
    /// not made progress since: further NAKs or gaps for it are not acted
    /// on again (the ACK timer covers a lost retransmission).
    rewound_at: Option<u32>,
    /// The QP reached RTS: the requester may send (an RTR QP only answers).
    sending: bool,
    counters: RcCounters,
}

impl RcQp {
    /// A QP in RTS with `cfg`.
    pub fn new(cfg: RcConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Self {
            req: Requester::new(cfg.sq_psn, cfg.initial_msn),
            resp: Responder::new(&cfg),
            error: false,
            failure: None,
            ack_deadline: None,
            rnr_until: None,
            retry_left: cfg.retry_cnt,
            rnr_left: cfg.rnr_retry,
            rewound_at: None,
            sending: true,
            counters: RcCounters::default(),
            cfg,
        })
    }

    /// A QP in RTR with `cfg`: its responder answers requests; it sends
    /// nothing until [`RcQp::start_sending`] (RTS).
    pub fn new_receiving(cfg: RcConfig) -> Result<Self, ConfigError> {
        let mut qp = Self::new(cfg)?;
        qp.sending = false;
        Ok(qp)
    }

    /// Whether the QP reached RTS.
    pub fn is_sending(&self) -> bool {
        self.sending
    }

    /// RTR to RTS: the requester starts at `rts.sq_psn` with `rts`'s retry
    /// counts, ACK timeout, outstanding reads, send window, ACK policy and
    /// MSN start (seed 002: the MSN it expects the peer's responses to
    /// count from). The responder takes `rts`'s minimum RNR timer, which
    /// verbs may set on this step too (`IBV_QP_MIN_RNR_TIMER` is optional
    /// at RTR to RTS); the rest of `rts` is ignored: the responder keeps
    /// what RTR gave it (its MSN counts on from RTR's start).
    pub fn start_sending(&mut self, rts: &RcConfig) -> Result<(), ConfigError> {
        rts.validate()?;
        self.cfg.min_rnr_timer = rts.min_rnr_timer;
        self.cfg.sq_psn = rts.sq_psn;
        self.cfg.retry_cnt = rts.retry_cnt;
        self.cfg.rnr_retry = rts.rnr_retry;
        self.cfg.ack_timeout = rts.ack_timeout;
        self.cfg.max_rd_atomic = rts.max_rd_atomic;
        self.cfg.send_window = rts.send_window;
        self.cfg.ack_policy = rts.ack_policy;
        self.req = Requester::new(rts.sq_psn, rts.initial_msn);
        self.retry_left = rts.retry_cnt;
        self.rnr_left = rts.rnr_retry;
        self.sending = true;
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &RcConfig {
        &self.cfg
    }

    /// Counters.
    pub fn counters(&self) -> &RcCounters {
        &self.counters
    }

    /// Whether the QP is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// Why the QP is in the error state (`None` while it is not).
    pub fn failure(&self) -> Option<QpFailure> {
        self.failure
    }

    /// The PSN the next new request will get.
    pub fn sq_psn(&self) -> u32 {
        self.req.next_psn
    }

    /// The PSN the responder expects next.
    pub fn expected_psn(&self) -> u32 {
        self.resp.epsn
    }

    /// The responder's MSN (messages completed, counted from
    /// [`RcConfig::initial_msn`]).
    pub fn msn(&self) -> u32 {
        self.resp.msn
    }

    /// Send WQEs posted and not completed yet.
    pub fn send_queue_len(&self) -> usize {
        self.req.queued()
    }

    /// When [`Self::on_timer`] must run next.
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.ack_deadline, self.rnr_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Posts a send WQE; it goes out now if the window allows, later
    /// otherwise. On a QP in error it completes at once with
    /// WC_WR_FLUSH_ERR.
    pub fn post_send<E: QpEnv + ?Sized>(
        &mut self,
        wqe: impl Into<SendWr>,
        now: Instant,
        env: &mut E,
    ) {
        self.post_sends(std::iter::once(wqe.into()), now, env);
    }

    /// Posts several send WQEs, in order, then makes progress once (the
    /// same packets as one [`Self::post_send`] each, with one pass over
    /// the in-flight list instead of one per WQE).
    pub fn post_sends<E: QpEnv + ?Sized>(
        &mut self,
        wqes: impl IntoIterator<Item = SendWr>,
        now: Instant,
        env: &mut E,
    ) {
        for wqe in wqes {
            self.req.post(wqe);
        }
        if self.error {
            let (_, flushed) = self.req.flush(self.cfg.qpn, env);
            self.counters.flushed_sends += flushed;
            return;
        }
        self.progress(now, env);
    }

    /// Handles one packet from the link. Packets for another QP, LID or
    /// partition, non-RC packets and anything arriving in the error state
    /// are dropped (counted).
    pub fn on_packet<E: QpEnv + ?Sized>(&mut self, v: &PacketView<'_>, now: Instant, env: &mut E) {
        if self.error || !self.accepts(v) {
            self.counters.packets_dropped += 1;
            return;
        }
        self.counters.packets_received += 1;
        if v.info().direction == Direction::Request {
            if self
                .resp
                .on_request(v, &self.cfg, &mut self.counters, env)
                .is_err()
            {
                self.enter_error(QpFailure::Responder, env);
            }
            return;
        }
        let una = self.req.una;
        let event = self.req.on_response(v, &self.cfg, &mut self.counters, env);
        self.note_progress(una, now);
        match event {
            Event::Ignored | Event::Accepted => {}
            Event::Retry => {
                // Once per PSN until progress: a second NAK or gap for the
                // same PSN is a duplicate of the first.
                if self.rewound_at != Some(self.req.una) {
                    self.retry(now, env);
                    return;
                }
            }
            Event::Rnr { timer } => {
                self.rnr(timer, now, env);
                return;
            }
            Event::Fatal => {
                self.req.retire(self.cfg.qpn, env);
                self.enter_error(QpFailure::Requested, env);
                return;
            }
        }
        self.progress(now, env);
    }

    /// Whether the responder owes responses (READ responses, and the
    /// acknowledgements queued behind them) that [`Self::serve_responses`]
    /// sends.
    pub fn owes_responses(&self) -> bool {
        !self.error && self.resp.owes()
    }

    /// One turn of the shared send engine for the responder (seed 004):
    /// sends up to `budget` owed packets, in PSN order; returns how many
    /// went. A READ stopped by an invalidated key (or a fault) sends its
    /// NAK and puts the QP in error.
    pub fn serve_responses<E: QpEnv + ?Sized>(&mut self, budget: usize, env: &mut E) -> usize {
        if self.error {
            return 0;
        }
        match self.resp.serve(budget, &self.cfg, &mut self.counters, env) {
            Ok(n) => n,
            Err(_) => {
                self.enter_error(QpFailure::Responder, env);
                0
            }
        }
    }

    /// Runs expired timers: the end of an RNR wait resends; an ACK timeout
    /// resends from the oldest unacknowledged PSN, or fails the QP with
    /// WC_RETRY_EXC_ERR when the retries are used up.
    pub fn on_timer<E: QpEnv + ?Sized>(&mut self, now: Instant, env: &mut E) {
        if self.error {
            return;
        }
        if self.rnr_until.is_some_and(|t| t <= now) {
            self.rnr_until = None;
            self.req.rewind();
            self.rewound_at = Some(self.req.una);
        }
        if self.ack_deadline.is_some_and(|t| t <= now) {
            self.ack_deadline = None;
            if self.req.outstanding() {
                if self.retry_left == 0 {
                    self.fail_oldest(WC_RETRY_EXC_ERR, env);
                    return;
                }
                self.retry_left -= 1;
                self.counters.timeouts += 1;
                self.req.restart_slowly();
                self.rewound_at = Some(self.req.una);
            }
        }
        self.progress(now, env);
    }

    /// Moves the QP to error: every outstanding and pending send WQE and a
    /// receive in progress complete with WC_WR_FLUSH_ERR (a WQE that failed
    /// with its own status); so do the receive WQEs still posted.
    pub fn flush<E: QpEnv + ?Sized>(&mut self, env: &mut E) {
        self.enter_error(QpFailure::Requested, env);
    }

    /// [`RcQp::flush`], with `held` — a WQE the device read from the send
    /// queue but had not handed over yet — flushed after the posted ones.
    pub fn flush_with<E: QpEnv + ?Sized>(&mut self, held: SendWr, env: &mut E) {
        self.req.post(held);
        self.enter_error(QpFailure::Requested, env);
    }

    fn accepts(&self, v: &PacketView<'_>) -> bool {
        let pkey_ok = Bth::pkey_admits(self.cfg.pkey, v.bth.pkey);
        v.info().service == Service::Rc
            && v.bth.dest_qp == self.cfg.qpn
            && v.lrh.dlid == self.cfg.slid
            && v.lrh.slid == self.cfg.dlid
            && pkey_ok
    }

    /// Resets the retry counters and re-arms the ACK timer when the oldest
    /// unacknowledged PSN moved past `una_before`.
    fn note_progress(&mut self, una_before: u32, now: Instant) {
        if psn::before(una_before, self.req.una) {
            self.req.widen(self.cfg.send_window);
            self.retry_left = self.cfg.retry_cnt;
            self.rnr_left = self.cfg.rnr_retry;
            self.rewound_at = None;
            self.ack_deadline = None;
            self.arm(now);
        }
    }

    /// A WQE whose completion waited outside the transport
    /// ([`QpEnv::completion_waits`]: a DRDMA READ's range drained) may
    /// complete now: retires what is finished and goes on.
    pub fn completion_ready<E: QpEnv + ?Sized>(&mut self, now: Instant, env: &mut E) {
        if !self.error {
            self.progress(now, env);
        }
    }

    /// Retires finished WQEs, sends what may go, keeps the ACK timer armed
    /// while anything is unacknowledged.
    fn progress<E: QpEnv + ?Sized>(&mut self, now: Instant, env: &mut E) {
        if self.req.retire(self.cfg.qpn, env) {
            self.enter_error(QpFailure::Requested, env);
            return;
        }
        if self.rnr_until.is_none() {
            self.req.pump(&self.cfg, &mut self.counters, env);
        }
        if self.req.retire(self.cfg.qpn, env) {
            self.enter_error(QpFailure::Requested, env);
            return;
        }
        self.arm(now);
    }

    fn arm(&mut self, now: Instant) {
        if !self.req.outstanding() || self.rnr_until.is_some() {
            self.ack_deadline = None;
        } else if self.ack_deadline.is_none() {
            self.ack_deadline = self.cfg.ack_timeout.map(|t| now + t);
        }
    }

    /// Go back N now (PSN sequence NAK, missing READ/atomic responses).
    fn retry<E: QpEnv + ?Sized>(&mut self, now: Instant, env: &mut E) {
        if self.retry_left == 0 {
            self.fail_oldest(WC_RETRY_EXC_ERR, env);
            return;
        }
        self.retry_left -= 1;
        self.req.rewind();
        self.rewound_at = Some(self.req.una);
        self.ack_deadline = None;
        self.progress(now, env);
    }

    fn rnr<E: QpEnv + ?Sized>(&mut self, timer: u8, now: Instant, env: &mut E) {
        if self.cfg.rnr_retry != 7 {
            if self.rnr_left == 0 {
                self.fail_oldest(WC_RNR_RETRY_EXC_ERR, env);
                return;
            }
            self.rnr_left -= 1;
        }
        // Retire what the RNR NAK implicitly acknowledged, then wait.
        if self.req.retire(self.cfg.qpn, env) {
            self.enter_error(QpFailure::Requested, env);
            return;
        }
        self.req.rewind();
        self.ack_deadline = None;
        self.rnr_until = Some(now + rnr_delay(timer));
    }

    /// Fails the oldest unfinished WQE with `status` and the QP with it.
    fn fail_oldest<E: QpEnv + ?Sized>(&mut self, status: u8, env: &mut E) {
        self.req.retire(self.cfg.qpn, env);
        if let Some(f) = self.req.inflight.front_mut() {
            f.error.get_or_insert(status);
        }
        self.enter_error(QpFailure::Wqe(status), env);
    }

    /// Moves the QP to error for `cause`, unless a send WQE failed: then
    /// that WQE's status is the cause.
    fn enter_error<E: QpEnv + ?Sized>(&mut self, cause: QpFailure, env: &mut E) {
        self.error = true;
        self.ack_deadline = None;
        self.rnr_until = None;
        let (failed, flushed) = self.req.flush(self.cfg.qpn, env);
        if failed == Some(WC_RETRY_EXC_ERR) {
            self.counters.retry_exceeded += 1;
        }
        self.failure
            .get_or_insert(failed.map_or(cause, QpFailure::Wqe));
        self.counters.flushed_sends += flushed;
        self.counters.flushed_recvs += u64::from(self.resp.flush(&self.cfg, env));
        self.counters.flushed_recvs += flush_posted_recvs(self.cfg.qpn, env);
    }

    /// Receive WQEs posted while the QP is in error complete at once with
    /// WC_WR_FLUSH_ERR, as those posted before it failed did: a work
    /// request posted to a QP in the error state is flushed (IBA 10.3.1).
    /// A QP not in error keeps them.
    pub fn flush_recvs<E: QpEnv + ?Sized>(&mut self, env: &mut E) {
        if self.error {
            self.counters.flushed_recvs += flush_posted_recvs(self.cfg.qpn, env);
        }
    }
}

/// Completes send WQEs posted to QP `qpn` in the error state before the
/// QP ever had transport state (it went to ERR from INIT) with
/// WC_WR_FLUSH_ERR, in order; returns how many.
pub fn flush_posted_sends<E: QpEnv + ?Sized>(
    qpn: u32,
    wqes: impl IntoIterator<Item = SendWr>,
    env: &mut E,
) -> u64 {
    let mut n = 0;
    for wqe in wqes {
        n += 1;
        crate::requester::flush_unstarted(qpn, wqe, env);
    }
    n
}

/// Completes every receive WQE posted to QP `qpn` with WC_WR_FLUSH_ERR, in
/// order; returns how many.
pub fn flush_posted_recvs<E: QpEnv + ?Sized>(qpn: u32, env: &mut E) -> u64 {
    let mut n = 0;
    while let Some(recv) = env.next_recv() {
        n += 1;
        env.complete(
            CqKind::Recv,
            Cqe {
                wr_id: recv.wr_id.into(),
                qpn: qpn.into(),
                opcode: WC_RECV,
                status: WC_WR_FLUSH_ERR,
                ..Cqe::default()
            },
        );
    }
    n
}
