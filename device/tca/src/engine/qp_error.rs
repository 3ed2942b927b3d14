//! The one log line (and the counters) of an RC QP the transport put in
//! error.

use crate::transport::{QpFailure, RcQp};
use crate::verbs::abi::wc_status_name;

use super::EngineStats;

/// Logs (and counts) an RC QP that has just gone to error: why, after
/// how many ACK timeouts and retransmissions, and how many work requests
/// it flushed. A guest or a peer can fail QPs at will, so the lines are
/// rate-limited; the totals are in [`EngineStats`].
pub(super) fn log_qp_error(rc: &RcQp, stats: &mut EngineStats) {
    let cfg = rc.config();
    let c = rc.counters();
    let (qpn, peer_lid, peer_qpn) = (cfg.qpn, cfg.dlid, cfg.dest_qpn);
    let (timeouts, retransmits) = (c.timeouts, c.retransmits);
    let (flushed_sends, flushed_recvs) = (c.flushed_sends, c.flushed_recvs);
    let status = match rc.failure() {
        Some(QpFailure::Requested) | None => {
            tracing::debug!(
                qpn,
                peer_lid,
                peer_qpn,
                flushed_sends,
                flushed_recvs,
                "QP moved to error"
            );
            return;
        }
        Some(QpFailure::Responder) => "responder error",
        Some(QpFailure::Wqe(s)) => wc_status_name(s),
    };
    stats.qp_errors += 1;
    stats.retry_exceeded += c.retry_exceeded;
    crate::guest_warn!(
        qpn,
        peer_lid,
        peer_qpn,
        %status,
        timeouts,
        retransmits,
        retry_cnt = cfg.retry_cnt,
        ack_timeout_us = cfg.ack_timeout.map_or(0, |t| t.as_micros() as u64),
        flushed_sends,
        flushed_recvs,
        "QP error"
    );
}
