//! A snapshot of the device for its control socket (`device_control.rs`):
//! the port (state, LIDs, GUIDs), its counters as the PMA reports them and
//! every QP (type, state, peer, PSNs). The engine builds it between two
//! bursts of events when the control thread asks ([`EngineEvent::Inspect`]),
//! so the control thread never touches state the engine owns and takes no
//! lock the data path holds.
//!
//! [`EngineEvent::Inspect`]: super::EngineEvent::Inspect

use super::{Engine, EngineStats};
use crate::pma::PortTotals;
use crate::transport::RcCounters;
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
                }
            })
            .collect();
        qps.sort_by_key(|q| q.qpn);
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
        }
    }
}
