//! A guestless CA: one port whose subnet management agent
//! ([`DeviceSma`], the device's own) and performance management agent
//! ([`Pma`]) answer the SM, and nothing else. Data packets for it are
//! counted and dropped (there is no guest to take them); one whose P_Key
//! the port's table does not hold is reported to the SM as the device
//! reports it (trap 257), sent when the hive asks for due traps.

use std::time::Instant;

use ibtca_agents::pma::{CaPort, PmPacket, Pma, PortTotals};
use ibtca_agents::sma::{DeviceSma, TrapCounts};
use ibtca_link::{LinkEvent, LocalPort, VL15};
use ibtca_protocol::mad::attr::PortState;
use ibtca_protocol::PacketView;
use ibtca_switch::Origin;

use crate::config::CaSpec;

/// Data VLs a hosted CA's port announces (as a device's default).
const DATA_VLS: u8 = 15;

/// One hosted CA.
#[derive(Debug)]
pub struct HostedCa {
    name: String,
    guid: u64,
    sma: DeviceSma,
    pma: Pma,
    totals: PortTotals,
    /// Data packets that no agent takes (no guest): dropped.
    pub dropped_data: u64,
}

impl HostedCa {
    /// The CA of `spec`; `managed`: an SM brings its port up.
    pub fn new(spec: &CaSpec, managed: bool) -> Self {
        let lid = if managed { 0 } else { spec.lid };
        let mut sma = DeviceSma::new(
            spec.guid,
            spec.port_guid,
            &spec.description,
            lid,
            DATA_VLS,
            managed,
        );
        // The hive stamps what leaves it on a wire (`Hive::send_from`).
        sma.leave_crcs_unstamped();
        HostedCa {
            name: spec.name.clone(),
            guid: spec.guid,
            sma,
            pma: Pma::default(),
            totals: PortTotals::default(),
            dropped_data: 0,
        }
    }

    /// The CA's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node GUID.
    pub fn guid(&self) -> u64 {
        self.guid
    }

    /// What its port says in a `Hello`.
    pub fn local(&self) -> LocalPort {
        LocalPort {
            node_guid: self.guid,
            port: 1,
            lid: self.sma.lid(),
        }
    }

    /// The port's LID (the SM's, once it set one).
    pub fn lid(&self) -> u16 {
        self.sma.lid()
    }

    /// The port's state.
    pub fn state(&self) -> PortState {
        self.sma.state()
    }

    /// The port's counters.
    pub fn totals(&self) -> PortTotals {
        self.totals
    }

    /// An event of the port's wire, a packet from `origin` (built in the
    /// hive: its CRCs are not computed again); returns the packet to send,
    /// if any (a CA answers a packet with one at most).
    pub fn on_event(&mut self, ev: LinkEvent, origin: Origin) -> Option<Vec<u8>> {
        match ev {
            LinkEvent::Up { .. } => {
                self.sma.link_changed(true);
                None
            }
            LinkEvent::Down { .. } => {
                self.sma.link_changed(false);
                self.totals.link_downed += 1;
                None
            }
            LinkEvent::Packet(packet) => {
                let out = self.on_packet(&packet, origin);
                self.count_tx(out.as_slice());
                out
            }
        }
    }

    fn on_packet(&mut self, packet: &[u8], origin: Origin) -> Option<Vec<u8>> {
        self.totals.rcv_pkts += 1;
        self.totals.rcv_bytes += packet.len() as u64;
        let Ok(view) = PacketView::parse_with(packet, &origin.crcs(packet)) else {
            self.totals.rcv_errors += 1;
            return None;
        };
        if view.lrh.vl == VL15 {
            return self.sma.on_packet(&view).reply;
        }
        // Data (QP1's GMPs too) only once the port takes data, and only
        // with a P_Key of the port's table (the device's checks, in its
        // order).
        if self.sma.state() == PortState::Init {
            self.dropped_data += 1;
            return None;
        }
        if !self.sma.admit_pkey(&view) {
            self.totals.rcv_constraint_errors += 1;
            self.dropped_data += 1;
            return None;
        }
        if view.bth.dest_qp == 1 {
            let port = CaPort(self.totals);
            if let PmPacket::Served(reply) = self.pma.serve_packet(&port, &view, self.sma.lid()) {
                return reply;
            }
        }
        self.dropped_data += 1;
        None
    }

    fn count_tx(&mut self, out: &[Vec<u8>]) {
        for p in out {
            self.totals.xmit_pkts += 1;
            self.totals.xmit_bytes += p.len() as u64;
        }
    }

    /// When the outstanding trap is next due (`None`: none is).
    pub fn next_trap_deadline(&self) -> Option<Instant> {
        self.sma.next_trap_deadline()
    }

    /// The traps due at `now`, as packets to send (counted as sent).
    pub fn due_traps(&mut self, now: Instant) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(p) = self.sma.due_trap(now) {
            out.push(p);
        }
        self.count_tx(&out);
        out
    }

    /// The port's trap counters.
    pub fn trap_counts(&self) -> TrapCounts {
        self.sma.trap_counts()
    }
}

#[cfg(test)]
mod tests {
    use ibtca_protocol::mad::attr::id;
    use ibtca_protocol::mad::{method, smp_packet, Smp, PERMISSIVE_LID};

    use super::*;
    use crate::config::WireSpec;

    /// A managed CA whose link is up.
    fn ca() -> HostedCa {
        let spec = CaSpec {
            name: "h1".into(),
            description: "h1".into(),
            guid: 0x10,
            port_guid: 0x10,
            lid: 0,
            port: WireSpec::None,
            sim: None,
        };
        let mut ca = HostedCa::new(&spec, true);
        let peer = LocalPort {
            node_guid: 0x20,
            port: 1,
            lid: 0,
        };
        assert_eq!(ca.on_event(LinkEvent::Up { peer }, Origin::Process), None);
        ca
    }

    #[test]
    fn a_packet_from_a_wire_is_crc_checked_and_one_built_in_the_hive_is_taken_as_built() {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
        smp.hop_ptr = 1;
        let mut packet = smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap();
        // A byte of the Get's data (which it ignores) changed behind the
        // CRCs: damage on a wire.
        packet[100] ^= 0x10;
        let mut ca = ca();
        let from_wire = ca.on_event(LinkEvent::Packet(packet.clone()), Origin::Wire);
        assert_eq!(from_wire, None, "dropped: its ICRC fails");
        assert_eq!(ca.totals().rcv_errors, 1);
        let built = ca.on_event(LinkEvent::Packet(packet), Origin::Process);
        assert!(built.is_some(), "answered");
        assert_eq!(ca.totals().rcv_errors, 1);
    }

    #[test]
    fn its_answers_leave_their_crcs_zero_for_the_hive_to_stamp() {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
        smp.hop_ptr = 1;
        let packet = smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap();
        let answer = ca()
            .on_event(LinkEvent::Packet(packet), Origin::Wire)
            .expect("answered");
        assert!(ibtca_protocol::encoded::icrc_unstamped(&answer));
        assert_eq!(answer[answer.len() - 2..], [0, 0], "VCRC");
    }
}
