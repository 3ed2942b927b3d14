//! The gateway's counters: the ATM receive port's, the engine's, and the
//! cell queues', as one JSON object (control socket `stats`, the log at
//! exit and on SIGUSR1).

use ibtca_agents::sma::SmaStats;
use ibtca_protocol::atm::RxCounters;

/// What the engine counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineCounters {
    /// IB packets from the link.
    pub ib_rx_packets: u64,
    /// IB packets that did not parse (bad CRC, malformed).
    pub ib_rx_malformed: u64,
    /// IB packets for a QP the gateway does not run (or not yet).
    pub ib_rx_no_qp: u64,
    /// ATM messages posted as IB SENDs.
    pub messages_to_ib: u64,
    /// IB SENDs the peer acknowledged.
    pub messages_sent: u64,
    /// IB work requests that failed (retries exhausted, flushed).
    pub send_failures: u64,
    /// ATM messages dropped: their VC has no remote QPN yet.
    pub dropped_no_qp: u64,
    /// ATM messages dropped: their VC's backlog toward IB was full.
    pub dropped_backlog: u64,
    /// IB messages received on mapped QPs.
    pub messages_from_ib: u64,
    /// IB messages that could not be segmented for their VC (an empty
    /// frame, an AAL0 message not 48 bytes, AAL1 not whole blocks).
    pub segment_errors: u64,
    /// QPs restarted after they went to the error state.
    pub qp_restarts: u64,
    /// IB data packets dropped because the port was not Armed or Active.
    pub ib_rx_port_inactive: u64,
    /// IB data packets not sent because the port was not Active.
    pub ib_tx_port_inactive: u64,
    /// PM requests to QP1 the performance management agent answered.
    pub pm_answers: u64,
    /// The subnet management agent's.
    pub sma: SmaStats,
}

/// Everything counted, at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// The ATM receive port.
    pub atm_rx: RxCounters,
    /// Cells written to the ATM port.
    pub cells_out: u64,
    /// ATM messages dropped because the engine had not taken the earlier
    /// ones (`handoff.rs`).
    pub atm_overrun_dropped: u64,
    /// IB messages dropped because their class's cell queue was full.
    pub queue_dropped_messages: u64,
    /// Their cells.
    pub queue_dropped_cells: u64,
    /// The engine.
    pub engine: EngineCounters,
}

impl Counters {
    /// The counters as a JSON object, names as in the issue.
    pub fn to_json(&self) -> serde_json::Value {
        let (a, e) = (&self.atm_rx, &self.engine);
        serde_json::json!({
            "cells_in": a.cells,
            "cells_out": self.cells_out,
            "hec_corrected": a.hec_corrected,
            "hec_dropped": a.hec_dropped,
            "idle_cells": a.idle,
            "oam_rm_cells": a.management,
            "unknown_vc": a.unknown_vc,
            "atm_messages_in": a.messages,
            "atm_overrun_dropped": self.atm_overrun_dropped,
            "aal5_crc_errors": a.aal5_crc,
            "aal5_length_errors": a.aal5_length,
            "aal5_aborts": a.aal5_abort,
            "aal5_oversize": a.aal5_oversize,
            "aal5_timeouts": a.aal5_timeout,
            "aal1_lost_cells": a.aal1_lost,
            "aal1_misordered": a.aal1_misordered,
            "aal1_snp_errors": a.aal1_snp_errors,
            "aal1_snp_corrected": a.aal1_corrected,
            "messages_to_ib": e.messages_to_ib,
            "messages_sent": e.messages_sent,
            "send_failures": e.send_failures,
            "dropped_no_qp": e.dropped_no_qp,
            "dropped_backlog": e.dropped_backlog,
            "messages_from_ib": e.messages_from_ib,
            "segment_errors": e.segment_errors,
            "queue_dropped_messages": self.queue_dropped_messages,
            "queue_dropped_cells": self.queue_dropped_cells,
            "ib_rx_packets": e.ib_rx_packets,
            "ib_rx_malformed": e.ib_rx_malformed,
            "ib_rx_no_qp": e.ib_rx_no_qp,
            "qp_restarts": e.qp_restarts,
            "ib_rx_port_inactive": e.ib_rx_port_inactive,
            "ib_tx_port_inactive": e.ib_tx_port_inactive,
            "pm_answers": e.pm_answers,
            "smps": e.sma.smps,
            "smp_replies": e.sma.replies,
            "smps_dropped": e.sma.dropped,
        })
    }
}
