//! The engine's data path: every RC QP's transport state, the QPs that owe
//! READ responses (served a turn at a time: `turn.rs`), and the least local
//! ACK timeout a QP starts with. A QP's transport is made when it reaches
//! RTR (it answers requests; from RTS it also sends) and kept until it is
//! reset or destroyed ([`DataPath::start_ready`]).

use std::time::{Duration, Instant};

use super::port_agents::PortAgents;
use super::qp_error::log_qp_error;
use super::qp_map::QpMap;
use super::{DeviceQpEnv, EngineStats, MAX_QUEUED_SEND_WQES};
use crate::transport::{config, AckPolicy, RcConfig, RcQp};
use crate::verbs::db_record::RecordQueue;
use crate::verbs::qp::QpAttrs;
use crate::verbs::qp_state::QpState;
use crate::verbs::rkm_regs::RkmRegs;
use crate::verbs::Verbs;

/// The RC transport of the device's QPs.
#[derive(Default)]
pub(super) struct DataPath {
    /// Per QP in RTR or RTS (or in error after them): its transport.
    pub(super) rc: QpMap<RcQp>,
    /// QPs that owed responses after their last call into the transport.
    pub(super) owing: Vec<u32>,
    /// The least local ACK timeout a QP runs with (`set_min_ack_timeout`).
    pub(super) min_ack_timeout: Duration,
}

/// What [`DataPath::start_ready`] found: the QPs whose transport the
/// engine must flush, drain or forget.
#[derive(Default)]
pub(super) struct QpChanges {
    /// QPs not in Reset (every other QP's transport is gone).
    pub(super) live: Vec<u32>,
    /// QPs the driver (or a bad doorbell) moved to ERR whose transport is
    /// not in error yet: everything posted flushes.
    pub(super) to_flush: Vec<u32>,
    /// QPs in ERR that never reached RTR (no transport).
    pub(super) unstarted: Vec<u32>,
    /// QPs that went from RTR to RTS.
    pub(super) started: Vec<u32>,
}

/// The transport's configuration of QP `qpn` with the driver's attributes
/// `a`, on the port with LID `lid` where its P_Key index names `pkey`.
/// The local ACK timeout is `a.timeout`'s, raised to `min_ack_timeout`.
fn rc_config(
    qpn: u32,
    a: &QpAttrs,
    (lid, pkey): (u16, u16),
    min_ack_timeout: Duration,
) -> RcConfig {
    let mut cfg = RcConfig::new(qpn, a.dest_qpn);
    (cfg.slid, cfg.pkey) = (lid, pkey);
    cfg.dlid = a.dlid;
    cfg.sl = a.sl;
    cfg.path_mtu = config::mtu_from_code(a.path_mtu).unwrap_or(1024);
    cfg.send_window = RcConfig::send_window_for_mtu(cfg.path_mtu);
    cfg.sq_psn = a.sq_psn;
    cfg.rq_psn = a.rq_psn;
    cfg.retry_cnt = a.retry_cnt;
    cfg.rnr_retry = a.rnr_retry;
    cfg.min_rnr_timer = a.min_rnr_timer;
    cfg.ack_timeout = config::local_ack_timeout(a.timeout, min_ack_timeout);
    if cfg.ack_timeout != config::ack_timeout_from_exponent(a.timeout) {
        tracing::debug!(qpn, exponent = a.timeout, ack_timeout = ?cfg.ack_timeout, "ACK timeout raised to the device's minimum");
    }
    cfg.max_rd_atomic = a.max_rd_atomic.max(1);
    cfg.initial_msn = a.initial_msn;
    cfg.ack_policy = AckPolicy::from_abi(a.ack_mode, a.ack_every);
    if a.window != 0 {
        cfg.send_window = a.window.into();
    }
    cfg.max_dest_rd_atomic = a
        .max_dest_rd_atomic
        .unwrap_or(crate::verbs::qp::MAX_RD_ATOMIC);
    cfg
}

impl DataPath {
    /// Forgets every QP's transport (device reset).
    pub(super) fn clear(&mut self) {
        self.rc.clear();
        self.owing.clear();
    }

    /// Whether QP `qpn` has transport state.
    pub(super) fn has(&self, qpn: u32) -> bool {
        self.rc.contains_key(&qpn)
    }

    /// Whether QP `qpn`'s transport holds fewer than
    /// [`MAX_QUEUED_SEND_WQES`] send WQEs.
    pub(super) fn has_room(&self, qpn: u32) -> bool {
        self.rc
            .get(&qpn)
            .is_some_and(|rc| rc.send_queue_len() < MAX_QUEUED_SEND_WQES)
    }

    /// Send WQEs QP `qpn`'s transport holds (0 without one).
    pub(super) fn queued(&self, qpn: u32) -> usize {
        self.rc.get(&qpn).map_or(0, RcQp::send_queue_len)
    }

    /// Whether QP `qpn`'s transport is in error.
    pub(super) fn is_error(&self, qpn: u32) -> bool {
        self.rc.get(&qpn).is_some_and(RcQp::is_error)
    }

    /// Whether QP `qpn`'s transport sends (RTS) or is in error: its send
    /// queue is read.
    pub(super) fn is_sending_or_error(&self, qpn: u32) -> bool {
        self.rc
            .get(&qpn)
            .is_some_and(|rc| rc.is_sending() || rc.is_error())
    }

    /// Whether QP `qpn`'s transport, not in error, has send WQEs in flight.
    pub(super) fn has_send_work(&self, qpn: u32) -> bool {
        self.rc
            .get(&qpn)
            .is_some_and(|rc| !rc.is_error() && rc.send_queue_len() > 0)
    }

    /// The earliest deadline of any QP's transport.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.rc.values().filter_map(RcQp::next_deadline).min()
    }

    /// QPs whose transport has a deadline at or before `now`.
    pub(super) fn due(&self, now: Instant) -> Vec<u32> {
        self.rc
            .iter()
            .filter(|(_, q)| q.next_deadline().is_some_and(|d| d <= now))
            .map(|(&n, _)| n)
            .collect()
    }

    /// Whether a QP owes responses and the budget in `rkm` lets them go.
    pub(super) fn responses_due(&self, rkm: &RkmRegs) -> bool {
        rkm.read_budget() > 0 && !self.owing.is_empty()
    }

    /// Runs `f` on QP `env.qpn`'s transport, if it has one, and records
    /// what it did: owed responses, quasi-WQE mismatches (in `rkm`), a QP
    /// the transport put in error (in `stats`; the verbs QP moves to ERR,
    /// and receives posted on its doorbell record flush).
    pub(super) fn with_qp(
        &mut self,
        env: &mut DeviceQpEnv<'_>,
        rkm: &RkmRegs,
        stats: &mut EngineStats,
        f: impl FnOnce(&mut RcQp, &mut DeviceQpEnv<'_>),
    ) {
        let qpn = env.qpn;
        let Some(rc) = self.rc.get_mut(&qpn) else {
            return;
        };
        let was_error = rc.is_error();
        let flushed = (rc.counters().flushed_sends, rc.counters().flushed_recvs);
        let mismatches = rc.counters().quasi_mismatches;
        f(rc, env);
        let mismatched = rc.counters().quasi_mismatches - mismatches;
        if mismatched > 0 {
            rkm.quasi_mismatched(mismatched as u32);
        }
        if rc.owes_responses() && !self.owing.contains(&qpn) {
            self.owing.push(qpn);
        }
        if rc.is_error() {
            let c = rc.counters();
            stats.flushed_sends += c.flushed_sends - flushed.0;
            stats.flushed_recvs += c.flushed_recvs - flushed.1;
            if !was_error {
                log_qp_error(rc, stats);
            }
            if let Some(qp) = env.verbs.qps.get_mut(qpn) {
                qp.set_error();
                // Receives posted on the doorbell record before the device
                // stopped reading it flush too.
                if qp.set_awake(env.mem, RecordQueue::Rq, false) == Ok(true) {
                    let before = rc.counters().flushed_recvs;
                    rc.flush_recvs(env);
                    stats.flushed_recvs += rc.counters().flushed_recvs - before;
                }
            }
        }
    }

    /// Creates transport state for QPs that reached RTR or RTS, starts
    /// sending on those that reached RTS, drops it for QPs that were reset
    /// or destroyed, and says which QPs the engine must flush or drain.
    pub(super) fn start_ready(&mut self, verbs: &Verbs, agents: &PortAgents) -> QpChanges {
        let lid = verbs.port.lid;
        let mut changes = QpChanges::default();
        for (qpn, qp) in verbs.qps.iter() {
            let state = qp.state();
            // RTR answers requests; RTS also sends.
            let ready = state == QpState::Rtr || state == QpState::Rts;
            let starting =
                state == QpState::Rts && self.rc.get(&qpn).is_some_and(|rc| !rc.is_sending());
            if (ready && !self.rc.contains_key(&qpn)) || starting {
                let path = (lid, agents.pkey_at(qp.attrs().pkey_index));
                let cfg = rc_config(qpn, qp.attrs(), path, self.min_ack_timeout);
                let made = match self.rc.get_mut(&qpn) {
                    Some(rc) => {
                        changes.started.push(qpn);
                        rc.start_sending(&cfg)
                    }
                    None if state == QpState::Rts => RcQp::new(cfg).map(|rc| {
                        self.rc.insert(qpn, rc);
                    }),
                    None => RcQp::new_receiving(cfg).map(|rc| {
                        self.rc.insert(qpn, rc);
                    }),
                };
                if let Err(e) = made {
                    crate::guest_warn!(qpn, error = %e, "cannot start the RC transport");
                }
            }
            if state != QpState::Reset {
                changes.live.push(qpn);
            }
            if state == QpState::Err && self.rc.get(&qpn).is_some_and(|rc| !rc.is_error()) {
                changes.to_flush.push(qpn);
            }
            if state == QpState::Err && !self.rc.contains_key(&qpn) {
                changes.unstarted.push(qpn);
            }
        }
        let live = &changes.live;
        self.rc.retain(|qpn, _| live.contains(qpn));
        changes
    }
}
