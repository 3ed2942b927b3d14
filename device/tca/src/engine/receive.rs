//! The engine's receive path: one packet from the link (or looped back)
//! to the part of the engine it is for.

use std::time::Instant;

use ibtca_protocol::mad::QP0;
use ibtca_protocol::packet::ReceivedCrcs;
use ibtca_protocol::PacketView;

use super::Engine;

impl Engine {
    /// Handles one packet from the link (or looped back); `crcs` are its
    /// CRCs if the link reader computed them already.
    pub(super) fn receive(&mut self, bytes: &[u8], crcs: Option<&ReceivedCrcs>, now: Instant) {
        self.stats.rx_packets += 1;
        let parsed = match crcs {
            Some(crcs) => PacketView::parse_with(bytes, crcs),
            None => PacketView::parse(bytes),
        };
        let view = match parsed {
            Ok(v) => v,
            Err(e) => {
                self.stats.rx_malformed += 1;
                tracing::debug!(error = %e, "dropping a malformed packet");
                return;
            }
        };
        let qpn = view.bth.dest_qp;
        if qpn == QP0 {
            self.receive_smp(&view);
            return;
        }
        if self.data_on_vl15(&view) {
            return;
        }
        if !self.port_takes_data() {
            self.stats.rx_port_init += 1;
            return;
        }
        if !self.admit_pkey(&view) || self.receive_multicast(&view) || self.receive_datagram(&view)
        {
            return;
        }
        if !self.rc.contains_key(&qpn) {
            self.stats.rx_no_qp += 1;
            tracing::debug!(qpn, "packet for a QP that is not ready");
            return;
        }
        self.with_qp(qpn, |rc, env| rc.on_packet(&view, now, env));
        // A packet may have freed window space: send what is queued.
        self.drain_sq(qpn, now);
    }
}
