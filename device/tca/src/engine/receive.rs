//! The engine's receive demultiplexer: every inbound packet (from the link
//! or looped back) is classified once, by [`Engine::route`], into the one
//! part of the engine it is for, or dropped for a reason that is counted:
//!
//! | in this order | route |
//! |---|---|
//! | does not parse (CRC, length, header) | dropped: `rx_malformed` |
//! | destination QP0 | [`Route::Smp`]: the port's agent (`smp.rs`) |
//! | any other QP on VL15 | dropped: `ud.rx_vl15_data` |
//! | the port is in Init | dropped: `rx_port_init` |
//! | the port's or the QP's P_Key table refuses it | dropped: `rx_bad_pkey` (`partition.rs`) |
//! | a multicast DLID | [`Route::Multicast`]: each attached QP (`multicast.rs`) |
//! | destination QP1 | [`Route::Gmp`]: the device's PMA or the guest's QP1 (`datagram.rs`) |
//! | a UD QP of this device | [`Route::Ud`] (`datagram.rs`) |
//! | an RC QP with transport state (RTR, RTS, or in error after them) | [`Route::Rc`]: its transport, which tells requests from responses and ACKs |
//! | anything else | dropped: `rx_no_qp` |

use std::time::Instant;

use ibtca_protocol::mad::QP0;
use ibtca_protocol::opcode::Direction;
use ibtca_protocol::packet::ReceivedCrcs;
use ibtca_protocol::PacketView;

use super::datagram::QP1;
use super::Engine;
use crate::verbs::multicast::is_multicast_lid;
use crate::verbs::qp::QpType;

/// The part of the engine an inbound packet is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Route {
    /// An SMP to QP0.
    Smp,
    /// A GMP to QP1.
    Gmp,
    /// A datagram to a multicast LID.
    Multicast,
    /// A datagram to UD QP `.0`.
    Ud(u32),
    /// A packet for RC QP `.0`.
    Rc(u32),
    /// Dropped for this reason.
    Drop(DropReason),
}

/// Why an inbound packet was dropped; each has its counter in
/// [`super::EngineStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DropReason {
    /// Data on VL15 (IBA 7.6.5: only QP0's SMPs use it).
    Vl15Data,
    /// The port is in Init (IBA vol 1 §7.2 drops data packets there).
    PortInit,
    /// The port's or the QP's P_Key table does not hold its P_Key.
    BadPkey,
    /// No QP of this device takes it.
    NoQp,
}

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
        match self.route(&view) {
            Route::Smp => self.receive_smp(&view),
            Route::Gmp => self.receive_gmp(&view),
            Route::Multicast => self.receive_multicast(&view),
            Route::Ud(qpn) => self.deliver_datagram(qpn, &view),
            Route::Rc(qpn) => {
                let mut failed = false;
                self.with_qp(qpn, |rc, env| {
                    rc.on_packet(&view, now, env);
                    failed = rc.is_error();
                });
                // A response may have freed window space (send what is
                // queued), and a QP in error flushes what is posted. A
                // request frees nothing of the QP's own sends: its SQ
                // and doorbell record are left alone.
                if failed || view.info().direction == Direction::Response {
                    self.drain_sq(qpn, now);
                }
            }
            Route::Drop(reason) => self.count_drop(reason, &view),
        }
    }

    /// Classifies an inbound packet (see the module's table). A P_Key
    /// refusal is recorded with the port's agent here (P_KeyViolations,
    /// trap 257).
    pub(super) fn route(&mut self, view: &PacketView<'_>) -> Route {
        let qpn = view.bth.dest_qp;
        if qpn == QP0 {
            return Route::Smp;
        }
        if self.is_data_on_vl15(view) {
            return Route::Drop(DropReason::Vl15Data);
        }
        if !self.agents.takes_data() {
            return Route::Drop(DropReason::PortInit);
        }
        if !self.admits_pkey(view) {
            return Route::Drop(DropReason::BadPkey);
        }
        if is_multicast_lid(view.lrh.dlid) {
            return Route::Multicast;
        }
        if qpn == QP1 {
            return Route::Gmp;
        }
        if self.datagram_type(qpn) == Some(QpType::Ud) {
            return Route::Ud(qpn);
        }
        match self.data.has(qpn) {
            true => Route::Rc(qpn),
            false => Route::Drop(DropReason::NoQp),
        }
    }

    /// Counts a packet dropped for `reason`.
    fn count_drop(&mut self, reason: DropReason, view: &PacketView<'_>) {
        match reason {
            DropReason::Vl15Data => self.stats.ud.rx_vl15_data += 1,
            DropReason::PortInit => self.stats.rx_port_init += 1,
            DropReason::BadPkey => self.count_bad_pkey(view),
            DropReason::NoQp => {
                self.stats.rx_no_qp += 1;
                tracing::debug!(qpn = view.bth.dest_qp, "packet for a QP that is not ready");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use ibtca_protocol::headers::{Deth, Grh};
    use ibtca_protocol::{Opcode, Packet};

    use super::*;
    use crate::drdma::{Drdma, DrdmaConfig};
    use crate::engine::{PacketSink, PortState};
    use crate::regs;
    use crate::tca::Tca;
    use crate::verbs::multicast::MULTICAST_QPN;
    use crate::verbs::PortAttrs;

    struct Nowhere;

    impl PacketSink for Nowhere {
        fn send(&mut self, _packet: Vec<u8>) {}
    }

    fn engine() -> Engine {
        let tca = Tca::new();
        Engine::new(
            tca.guest_memory(),
            tca.msix().clone(),
            Box::new(Nowhere),
            PortAttrs::default(),
            PortState::new(regs::PORT_ACTIVE),
            Drdma::new(DrdmaConfig::default()).unwrap(),
        )
    }

    fn packet(opcode: Opcode, dest_qp: u32) -> Packet {
        let mut p = Packet::new(opcode);
        p.lrh.dlid = PortAttrs::default().lid;
        p.bth.dest_qp = dest_qp;
        p.bth.pkey = 0xffff;
        p.payload = vec![0; 256];
        if opcode == Opcode::UdSendOnly {
            p.ext.deth = Some(Deth::default());
        }
        p
    }

    fn route(e: &mut Engine, p: &Packet) -> Route {
        let bytes = p.build().unwrap();
        e.route(&PacketView::parse(&bytes).unwrap())
    }

    #[test]
    fn each_kind_of_packet_has_its_route() {
        let mut e = engine();
        assert_eq!(route(&mut e, &packet(Opcode::UdSendOnly, QP0)), Route::Smp);
        assert_eq!(route(&mut e, &packet(Opcode::UdSendOnly, QP1)), Route::Gmp);
        let mut mc = packet(Opcode::UdSendOnly, MULTICAST_QPN);
        mc.lrh.dlid = 0xc001;
        mc.grh = Some(Grh::default());
        assert_eq!(route(&mut e, &mc), Route::Multicast);
        let rc = packet(Opcode::RcSendOnly, 0x40);
        assert_eq!(route(&mut e, &rc), Route::Drop(DropReason::NoQp));
        let mut vl15 = packet(Opcode::UdSendOnly, QP1);
        vl15.lrh.vl = 15;
        assert_eq!(route(&mut e, &vl15), Route::Drop(DropReason::Vl15Data));
        let mut bad_pkey = packet(Opcode::UdSendOnly, QP1);
        bad_pkey.bth.pkey = 0x8123;
        assert_eq!(route(&mut e, &bad_pkey), Route::Drop(DropReason::BadPkey));
    }

    /// Every drop is counted once, under its own reason.
    #[test]
    fn drops_are_counted_by_reason() {
        let mut e = engine();
        let now = Instant::now();
        let receive = |e: &mut Engine, p: &Packet| e.receive(&p.build().unwrap(), None, now);
        receive(&mut e, &packet(Opcode::RcSendOnly, 0x40));
        let mut vl15 = packet(Opcode::UdSendOnly, 0x40);
        vl15.lrh.vl = 15;
        receive(&mut e, &vl15);
        let mut bad_pkey = packet(Opcode::RcSendOnly, 0x40);
        bad_pkey.bth.pkey = 0x8123;
        receive(&mut e, &bad_pkey);
        e.receive(&[0u8; 7], None, now);
        let s = e.stats();
        assert_eq!(s.rx_packets, 4);
        assert_eq!(
            (s.rx_no_qp, s.ud.rx_vl15_data, s.rx_bad_pkey, s.rx_malformed),
            (1, 1, 1, 1)
        );
    }
}
