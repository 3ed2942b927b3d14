//! Inbound multicast datagrams (IBA 10.5.2): a UD packet to a multicast
//! LID goes to every QP of this device attached to the group its GRH's
//! DGID names (`verbs::multicast`), each through the same checks as a
//! unicast datagram (P_Key at the port and at the QP's P_Key index, Q_Key
//! and state at the QP). The device's own multicast sends come back here
//! too (`flush_outbox` loops them back as well as sending them), so a QP
//! attached to the group on the sending port gets a copy, the sending QP
//! itself only if attached.

use ibtca_protocol::PacketView;

use super::Engine;
use crate::verbs::multicast::MULTICAST_QPN;

/// Counters of inbound multicast datagrams.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MulticastStats {
    /// Packets to a multicast LID taken by at least one attached QP's
    /// delivery (each QP's own outcome is counted with the datagrams').
    pub delivered: u64,
    /// Copies handed to attached QPs.
    pub copies: u64,
    /// Dropped: no GRH (the group is named by its DGID).
    pub no_grh: u64,
    /// Dropped: the BTH's destination QP is not 0xFFFFFF.
    pub bad_dest_qp: u64,
    /// Dropped: no QP of this device is attached to the group.
    pub no_group: u64,
}

impl Engine {
    /// Takes an inbound packet to a multicast LID: delivered to each QP
    /// attached to its group, or dropped and counted.
    pub(super) fn receive_multicast(&mut self, view: &PacketView<'_>) {
        let stats = &mut self.stats.multicast;
        let Some(grh) = &view.grh else {
            stats.no_grh += 1;
            return;
        };
        if view.bth.dest_qp != MULTICAST_QPN {
            stats.bad_dest_qp += 1;
            return;
        }
        let members = self.verbs.mcast.members(&grh.dgid).to_vec();
        if members.is_empty() {
            stats.no_group += 1;
            return;
        }
        stats.delivered += 1;
        stats.copies += members.len() as u64;
        for qpn in members {
            self.deliver_datagram(qpn, view);
        }
    }
}
