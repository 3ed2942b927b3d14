//! A snapshot of the device for its control socket (`device_control.rs`):
//! the port (state, LIDs, GUIDs), its counters as the PMA reports them,
//! every QP (type, state, peer, PSNs, queue indexes, doorbell record) and
//! every CQ (indexes, errors): enough to tell a WQE the device never read
//! from a completion the driver never took. The engine builds it between two
//! bursts of events when the control thread asks ([`EngineEvent::Inspect`]),
//! so the control thread never touches state the engine owns and takes no
//! lock the data path holds.
//!
//! [`EngineEvent::Inspect`]: super::EngineEvent::Inspect

use super::{Engine, EngineStats};
use crate::pma::PortTotals;
use crate::transport::RcCounters;
use crate::verbs::db_record::RecordWords;
use crate::verbs::qp::QueueIndexes;
use crate::verbs::qp_state::{QpState, QpType};

/// QPs a snapshot lists at most (the rest are only counted).
pub const MAX_LISTED_QPS: usize = 4096;

/// One QP as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpSnapshot {
    /// Its number.
    pub qpn: u32,
    /// RC, UD, SMI or GSI.
    pub qp_type: QpType,
    /// Its state.
    pub state: QpState,
    /// The destination QP (connected QPs).
    pub dest_qpn: u32,
    /// The destination LID (connected QPs).
    pub dlid: u16,
    /// The next PSN it sends: the transport's once an RC QP sends, else
    /// what MODIFY_QP set.
    pub sq_psn: u32,
    /// The next PSN it expects: the transport's once an RC QP receives,
    /// else what MODIFY_QP set.
    pub rq_psn: u32,
    /// True while an RC QP has transport state (RTR or RTS, or in error
    /// after them).
    pub transport: bool,
    /// The RC transport's counters while it has transport state (NAKs,
    /// timeouts, retransmissions, duplicates).
    pub rc: Option<RcCounters>,
    /// Send WQEs the transport holds and has not completed (RC).
    pub send_wqes_in_flight: usize,
    /// Its send and receive CQs.
    pub send_cqn: u32,
    /// See `send_cqn`.
    pub recv_cqn: u32,
    /// The SQ's indexes.
    pub sq: QueueIndexes,
    /// The RQ's indexes (none on an SRQ).
    pub rq: Option<QueueIndexes>,
    /// Its doorbell record's words in guest memory now, if it has one.
    pub db_record: Option<RecordWords>,
}

/// One CQ as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqSnapshot {
    /// Its number.
    pub cqn: u32,
    /// Its size.
    pub entries: u32,
    /// The next index the device writes.
    pub pi: u32,
    /// The consumer index the driver last reported.
    pub ci: u32,
    /// The consumer index in its doorbell record now, if it has one.
    pub record_ci: Option<u32>,
    /// Armed for an interrupt.
    pub armed: bool,
    /// Overran or lost its ring.
    pub error: bool,
}

/// What the device's control socket shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSnapshot {
    /// IBTCA_PORT_* state (BAR0's PORT_STATE).
    pub port_state: u32,
    /// The port's LID (the SM's once it set one; 0 before).
    pub lid: u16,
    /// The master SM's LID and the port's LMC, as the SM set them.
    pub sm_lid: u16,
    /// The port's LMC.
    pub lmc: u8,
    /// The node GUID.
    pub node_guid: u64,
    /// The port GUID.
    pub port_guid: u64,
    /// True if a subnet manager brings the port up.
    pub sm_managed: bool,
    /// The NodeDescription the subnet management agent answers.
    pub node_description: String,
    /// The port's counters since the device started (the PMA's sources).
    pub totals: PortTotals,
    /// The engine's counters.
    pub engine: EngineStats,
    /// Where events ran and the inbox's back-pressure (the engine's handle
    /// counts them: the engine leaves them zero).
    pub handoffs: super::Handoffs,
    /// Every QP that exists, lowest number first, at most
    /// [`MAX_LISTED_QPS`].
    pub qps: Vec<QpSnapshot>,
    /// How many QPs exist.
    pub qp_count: usize,
    /// Every CQ, lowest number first, at most [`MAX_LISTED_QPS`].
    pub cqs: Vec<CqSnapshot>,
}

impl Engine {
    /// The device as it is now.
    pub fn snapshot(&self) -> DeviceSnapshot {
        let (sm_lid, lmc) = self.agents.sma.sm_lid_and_lmc();
        let mut qps: Vec<QpSnapshot> = self
            .verbs
            .qps
            .iter()
            .take(MAX_LISTED_QPS)
            .map(|(qpn, qp)| {
                let a = qp.attrs();
                let rc = self.data.rc.get(&qpn);
                QpSnapshot {
                    qpn,
                    qp_type: qp.qp_type,
                    state: qp.state(),
                    dest_qpn: a.dest_qpn,
                    dlid: a.dlid,
                    sq_psn: rc
                        .filter(|rc| rc.is_sending())
                        .map_or(a.sq_psn, |rc| rc.sq_psn()),
                    rq_psn: rc.map_or(a.rq_psn, |rc| rc.expected_psn()),
                    transport: rc.is_some(),
                    rc: rc.map(|rc| *rc.counters()),
                    send_wqes_in_flight: rc.map_or(0, |rc| rc.send_queue_len()),
                    send_cqn: qp.send_cqn,
                    recv_cqn: qp.recv_cqn,
                    sq: qp.sq_indexes(),
                    rq: qp.rq_indexes(),
                    db_record: qp.db_record().and_then(|r| r.words(&self.mem)),
                }
            })
            .collect();
        qps.sort_by_key(|q| q.qpn);
        let mut cqs: Vec<CqSnapshot> = self
            .verbs
            .cqs
            .iter()
            .take(MAX_LISTED_QPS)
            .map(|(cqn, cq)| CqSnapshot {
                cqn,
                entries: cq.entries(),
                pi: cq.producer_index(),
                ci: cq.consumer_index(),
                record_ci: cq.record_ci(&self.mem),
                armed: cq.armed(),
                error: cq.in_error(),
            })
            .collect();
        cqs.sort_by_key(|c| c.cqn);
        DeviceSnapshot {
            port_state: self.agents.port_state.get(),
            lid: self.verbs.port.lid,
            sm_lid,
            lmc,
            node_guid: self.agents.port.node_guid,
            port_guid: self.agents.port.guid,
            sm_managed: self.agents.sma.managed(),
            node_description: self.agents.sma.description().to_owned(),
            totals: self.port_totals(),
            engine: self.stats(),
            handoffs: super::Handoffs::default(),
            qps,
            qp_count: self.verbs.qps.len(),
            cqs,
        }
    }
}
