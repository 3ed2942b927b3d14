//! The switch's performance management agent (port 0): PM MADs (class
//! 0x04, a GMP to QP1 on a data VL) LID-routed to the switch's LID are
//! answered from each port's counters; the answer goes back by the
//! forwarding table to the requester's LID.
//!
//! What each IBA counter of a switch port counts:
//!
//! | IBA counter | the switch's count (`PortStats`, link) |
//! |---|---|
//! | PortXmitData / PortRcvData | `tx_bytes` / `rx_bytes` (LRH to VCRC), in words |
//! | PortXmitPkts / PortRcvPkts | `tx_packets` / `rx_packets` |
//! | PortMulticastXmitPkts / RcvPkts | `tx_multicast` / `rx_multicast` |
//! | PortRcvErrors | `drop_crc_error` + `drop_malformed` + link `rx_bad_frames` |
//! | PortRcvSwitchRelayErrors | `drop_unknown_lid` |
//! | PortXmitDiscards | `drop_queue_full` + `drop_link_down` + `drop_port_inactive` |
//! | PortRcvConstraintErrors | `drop_pkey_inbound` (partition enforcement) |
//! | PortXmitConstraintErrors | `drop_pkey_outbound` |
//! | ExcessiveBufferOverrunErrors | link `rx_credit_overruns` |
//! | VL15Dropped | link `rx_vl15_dropped` |
//! | LinkDownedCounter | `link_downs` |
//! | PortXmitWait | link `credit_stalls` |
//!
//! Port 0 has no link: its counters stay 0. PortSelect 0xFF sums ports
//! 1..=N.

use ibtca_protocol::encoded;
use ibtca_protocol::mad::pma::{gmp_packet, pma_of_packet, reply_address};
use ibtca_protocol::PacketView;

use super::Core;
use ibtca_agents::pma::{PortSource, PortTotals};

impl PortSource for Core {
    fn has_port(&self, port: u8) -> bool {
        usize::from(port) <= self.slots.len()
    }

    fn all_ports(&self) -> Vec<u8> {
        (1..=self.slots.len())
            .filter_map(|p| u8::try_from(p).ok())
            .collect()
    }

    fn totals(&self, port: u8) -> PortTotals {
        let Some(slot) = self.slot(port) else {
            return PortTotals::default();
        };
        let s = slot.stats();
        let link = self.wires.link_stats(port).unwrap_or_default();
        PortTotals {
            xmit_bytes: s.tx_bytes,
            rcv_bytes: s.rx_bytes,
            xmit_pkts: s.tx_packets,
            rcv_pkts: s.rx_packets,
            multicast_xmit_pkts: s.tx_multicast,
            multicast_rcv_pkts: s.rx_multicast,
            rcv_errors: s.drop_crc_error + s.drop_malformed + link.rx_bad_frames,
            rcv_switch_relay_errors: s.drop_unknown_lid,
            xmit_discards: s.drop_queue_full + s.drop_link_down + s.drop_port_inactive,
            buffer_overruns: link.rx_credit_overruns,
            vl15_dropped: link.rx_vl15_dropped,
            link_downed: s.link_downs,
            xmit_wait: link.credit_stalls,
            rcv_constraint_errors: s.drop_pkey_inbound,
            xmit_constraint_errors: s.drop_pkey_outbound,
        }
    }
}

impl Core {
    /// True if a data-VL packet to `dlid` is for port 0 (the switch's own
    /// LID, once it has one).
    pub(super) fn is_own_lid(&self, dlid: u16) -> bool {
        let own = self.sma().lid();
        own != 0 && dlid == own
    }

    /// Serves a GMP to the switch that came in on `in_port`: the answer
    /// to send and the port to send it from, or nothing (not a PM MAD, no
    /// answer due, no route back).
    pub(super) fn serve_gmp(&self, packet: &[u8]) -> Option<(u8, Vec<u8>)> {
        let view = PacketView::parse(packet).ok()?;
        let mad = pma_of_packet(&view).ok()?;
        let reply = self.pma().answer(self, mad)?;
        let to = reply_address(&view, self.sma().lid());
        let out = self.lft.lookup(to.dlid)?;
        let mut bytes = gmp_packet(&reply, &to).build().ok()?;
        let vl = self.slot(out)?.vl(to.sl);
        encoded::set_vl(&mut bytes, vl);
        encoded::restamp_vcrc(&mut bytes);
        Some((out, bytes))
    }
}
