//! The gateway's performance management agent: the device's own
//! ([`ibtca_agents::pma::Pma`], not a copy) on the gateway's one IB port,
//! so `perfquery` and a PerfMgr read a gateway like a channel adapter:
//! ClassPortInfo, PortCounters and PortCountersExtended of port 1 from the
//! port's link counters ([`PortTotals::of_link`]) with the packets the
//! engine could not parse as PortRcvErrors; counter resets by Set.

use ibtca_agents::pma::{CaPort, PmPacket, Pma, PortTotals};
use ibtca_link::LinkStats;
use ibtca_protocol::PacketView;

use crate::counters::EngineCounters;

/// The agent and the resets it keeps.
#[derive(Debug, Clone, Default)]
pub struct GatewayPma {
    pma: Pma,
}

impl GatewayPma {
    /// Serves a packet to QP1 at a gateway whose port has LID `lid`, its
    /// link having counted `link` and its engine `counters`.
    pub fn serve(
        &mut self,
        view: &PacketView<'_>,
        link: &LinkStats,
        counters: &EngineCounters,
        lid: u16,
    ) -> PmPacket {
        let mut totals = PortTotals::of_link(link);
        totals.rcv_errors += counters.ib_rx_malformed;
        self.pma.serve_packet(&CaPort(totals), view, lid)
    }

    /// PM requests answered.
    pub fn answered(&self) -> u64 {
        self.pma.answered
    }
}
