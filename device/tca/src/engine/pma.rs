//! The engine's side of the device's performance management agent: PM
//! MADs (class 0x04) to QP1 go to the [`Pma`] with the port's totals, its
//! answers back to the requester's QP. Other MADs to QP1 are not its
//! business: [`Engine::receive_pma`] says so, and the caller hands them on.
//!
//! Where the port's totals come from (each IBA counter):
//!
//! | IBA counter | the device's count (the link's: `PortTotals::of_link`) |
//! |---|---|
//! | PortXmitData / PortRcvData | the link's `tx_bytes` / `rx_bytes` (LRH to VCRC), in words |
//! | PortXmitPkts / PortRcvPkts | the link's `tx_packets` / `rx_packets` |
//! | PortRcvErrors | engine `rx_malformed` + link `rx_bad_frames` |
//! | PortXmitDiscards | link `tx_dropped_down` + `tx_dropped_full` + `tx_dropped_oversize` |
//! | PortRcvConstraintErrors | engine `rx_bad_pkey` |
//! | ExcessiveBufferOverrunErrors | link `rx_credit_overruns` |
//! | VL15Dropped | link `rx_vl15_dropped` |
//! | LinkDownedCounter | link `reconnects` |
//! | PortXmitWait | link `credit_stalls` |
//!
//! A device without a link (loopback only) counts its looped packets.

use ibtca_protocol::PacketView;

use super::Engine;
use crate::pma::{CaPort, PmPacket, PortTotals};

impl Engine {
    /// A packet to QP1: true if it was a PM MAD for the agent (answered,
    /// or dropped as no agent's business); false if it is some other GMP,
    /// or a PM MAD for a manager (a response to the guest's `perfquery`,
    /// a trap), which the caller hands to the guest's QP1.
    pub(super) fn receive_pma(&mut self, view: &PacketView<'_>) -> bool {
        let port = CaPort(self.port_totals());
        match self
            .agents
            .pma
            .serve_packet(&port, view, self.agents.port.lid)
        {
            PmPacket::NotForAgent => false,
            PmPacket::Served(reply) => {
                self.outbox.packets.extend(reply);
                true
            }
        }
    }

    /// The port's counters since the device started.
    pub(super) fn port_totals(&self) -> PortTotals {
        let s = &self.stats;
        let mut t = match self.outbox.link.link_stats() {
            Some(l) => PortTotals::of_link(&l),
            None => PortTotals {
                xmit_pkts: s.loopback,
                rcv_pkts: s.loopback,
                ..PortTotals::default()
            },
        };
        t.rcv_errors += s.rx_malformed;
        t.rcv_constraint_errors = s.rx_bad_pkey;
        t
    }
}
