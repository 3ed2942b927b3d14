//! The channel adapter a host client owns: one port on the fabric with the
//! device's own agents (a [`DeviceSma`] and a [`Pma`]), whose QP0 and QP1
//! the attached clients use as a guest's SM and diagnostics use a port's
//! QP0 and QP1 through `ib_umad`.
//!
//! From a client (a [`SimRequest`]):
//! - a directed-route SMP of no hops, or a LID-routed one to the port's
//!   own LID, is served by the port's agent, as a real HCA's driver hands
//!   its own SM's SMPs to its firmware (`process_mad`);
//! - another directed-route SMP leaves by port 1 with the hop pointer at 1
//!   (IBA C14-9:1), a LID-routed SMP or a GMP to its LID (GMPs only while
//!   the port is Active, IBA vol 1 §7.2);
//! - a PerfMgt request to the port's own LID is the port's PMA's; another
//!   GMP to its own LID goes to the port's SM client;
//! - a request waits for its response ([`Clients`]), or returns with
//!   status ETIMEDOUT.
//!
//! From the link: the agents serve what is theirs; responses go to the
//! client that waits for them, SMInfo, traps, reports and other classes'
//! requests to the SM client; the rest is dropped and counted.

use std::collections::BTreeMap;
use std::time::Instant;

use ibtca_agents::pma::{CaPort, PmPacket, Pma, PortTotals};
use ibtca_agents::sma::DeviceSma;
use ibtca_protocol::headers::Deth;
use ibtca_protocol::mad::attr::PortState;
use ibtca_protocol::mad::directed::{self, DrBytes, DrFields, DrStep};
use ibtca_protocol::mad::pma::{QP1, QP1_QKEY};
use ibtca_protocol::mad::{
    class, method, smp_packet_bytes, MadHeader, Smp, SmpRoute, MAD_LEN, PERMISSIVE_LID, QP0,
};
use ibtca_protocol::opcode::Opcode;
use ibtca_protocol::packet::ReceivedCrcs;
use ibtca_protocol::{encoded, Packet, PacketView};

use crate::clients::{wire_tid, Clients};
use crate::wire::{mad_of, set_timed_out, Envelope, REQUEST_LEN};

/// What the port sends, pushed by its methods: packets onto the link,
/// and MADs to clients as ibsim's wire carries them, each in its envelope.
/// The owner keeps it and drains both turn after turn (the same buffers:
/// no allocation per MAD). A MAD is written into its envelope once, where
/// it lies in `clients`, and edited there (its TID restored, a directed
/// route's last step): no copy of it per step.
#[derive(Debug, Default)]
pub struct Sends {
    /// Packets onto the link, in order.
    pub link: Vec<Vec<u8>>,
    /// MADs to the client in each slot, in order: its slot and the
    /// datagram.
    pub clients: Vec<(usize, [u8; REQUEST_LEN])>,
}

impl Sends {
    /// Nothing to send.
    pub fn new() -> Self {
        Sends::default()
    }

    /// Nothing is waiting in either.
    pub fn is_empty(&self) -> bool {
        self.link.is_empty() && self.clients.is_empty()
    }

    /// `mad` in `envelope` for the client in `slot`, pushed: its datagram,
    /// to edit in place.
    fn client(
        &mut self,
        slot: usize,
        envelope: &Envelope,
        mad: &[u8; MAD_LEN],
    ) -> &mut (usize, [u8; REQUEST_LEN]) {
        let at = self.clients.len();
        self.clients.push((slot, [0; REQUEST_LEN]));
        let sent = &mut self.clients[at];
        envelope.write(mad, &mut sent.1);
        sent
    }

    /// `request`, as the client in `slot` sent it, back to it unanswered
    /// (status ETIMEDOUT).
    fn unanswered(&mut self, slot: usize, request: &[u8; REQUEST_LEN]) {
        let mut back = *request;
        set_timed_out(&mut back);
        self.clients.push((slot, back));
    }
}

/// Where a client's MAD went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Onto the link.
    Link,
    /// To the client in this slot.
    Client(usize),
}

/// How [`SimPort::deliver`] handed a MAD on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// To the client in this slot.
    To(usize),
    /// It is for no client: no one waits for the response, or no SM
    /// client takes the request (dropped, counted).
    NoClient,
    /// Its edit refused it: a directed route that does not end here
    /// (dropped as the agent drops it, not counted).
    Refused,
}

/// What the port counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounts {
    /// MADs clients sent (well-formed envelopes from attached clients).
    pub requests: u64,
    /// MADs from clients sent onto the link.
    pub to_link: u64,
    /// MADs from clients the port's own agents answered.
    pub local: u64,
    /// MADs from the link handed to a client.
    pub to_clients: u64,
    /// Requests returned with ETIMEDOUT: refused, or out of time.
    pub timed_out: u64,
    /// Requests returned with ETIMEDOUT at once because the fabric
    /// dropped them ([`SimPort::stranded`]).
    pub undeliverable: u64,
    /// Messages dropped: malformed, for no client, or not allowed.
    pub dropped: u64,
    /// Clients' MADs of a (class, attribute, method) first seen after
    /// [`MAX_REQUEST_KINDS`] others: counted here, not by kind.
    pub other_kinds: u64,
}

/// How many (class, attribute, method) kinds of clients' MADs the port
/// counts one by one; a client that sends more kinds (any attribute ID
/// it likes) cannot grow the table past this.
pub const MAX_REQUEST_KINDS: usize = 256;

/// How the port starts.
#[derive(Debug, Clone)]
pub struct PortSettings {
    /// Node GUID.
    pub node_guid: u64,
    /// Port GUID.
    pub port_guid: u64,
    /// NodeDescription.
    pub description: String,
    /// The LID the port starts with (0 when an SM assigns it).
    pub lid: u16,
    /// An SM brings the port up (Init on link up).
    pub managed: bool,
    /// The node id clients may ask for (`SIM_HOST`).
    pub node_id: String,
}

/// The port and its clients.
#[derive(Debug)]
pub struct SimPort {
    pub(crate) sma: DeviceSma,
    pma: Pma,
    pub(crate) clients: Clients,
    pub(crate) settings: PortSettings,
    counts: PortCounts,
    /// Clients' MADs by (management class, attribute, method).
    kinds: BTreeMap<(u8, u16, u8), u64>,
    /// The SMPs it sends onto the link carry their CRCs (the default);
    /// false once [`SimPort::leave_crcs_unstamped`].
    stamp: bool,
    /// Buffers of packets handled, for the next requests' packets
    /// ([`SimPort::recycle`]): at most [`SPARE_BUFFERS`].
    spare: Vec<Vec<u8>>,
}

/// Packet buffers a port keeps for its clients' next requests: as many
/// as an SM keeps on the wire (OpenSM: 4) and some.
pub const SPARE_BUFFERS: usize = 8;

impl SimPort {
    /// A port with these settings whose clients' requests wait `timeout`.
    pub fn new(settings: PortSettings, timeout: std::time::Duration) -> Self {
        let s = &settings;
        let sma = DeviceSma::new(
            s.node_guid,
            s.port_guid,
            &s.description,
            s.lid,
            1,
            s.managed,
        );
        SimPort {
            sma,
            pma: Pma::default(),
            clients: Clients::new(timeout),
            settings,
            counts: PortCounts::default(),
            kinds: BTreeMap::new(),
            stamp: true,
            spare: Vec::new(),
        }
    }

    /// Leaves the ICRC and VCRC of the SMPs it sends onto the link (its
    /// clients' and its agent's) zero from now on
    /// ([`encoded::smp_packet`]): for a port whose owner hosts its peer,
    /// which reads neither, and stamps what leaves the process on a wire
    /// ([`encoded::stamp_unstamped`]).
    pub fn leave_crcs_unstamped(&mut self) {
        self.stamp = false;
        self.sma.leave_crcs_unstamped();
    }

    /// Keeps `packet`'s buffer, a packet handled ([`SimPort::on_link`],
    /// [`SimPort::on_built_link`]), for a client's next request: most
    /// requests' packets are then built with no allocation.
    pub fn recycle(&mut self, packet: Vec<u8>) {
        if self.spare.len() < SPARE_BUFFERS {
            self.spare.push(packet);
        }
    }

    /// The link came up or went down.
    pub fn link_changed(&mut self, up: bool) {
        if self.sma.link_changed(up) {
            tracing::info!(state = ?self.sma.state(), "port state");
        }
    }

    /// The port's LID and state.
    pub fn lid_and_state(&self) -> (u16, PortState) {
        (self.sma.lid(), self.sma.state())
    }

    /// What the port counted.
    pub fn counts(&self) -> PortCounts {
        self.counts
    }

    /// Clients' MADs so far by (management class, attribute, method).
    pub fn request_kinds(&self) -> &BTreeMap<(u8, u16, u8), u64> {
        &self.kinds
    }

    /// The client in `slot`, if one is attached.
    pub fn client(&self, slot: usize) -> Option<crate::clients::Client> {
        self.clients.get(slot)
    }

    /// Clients attached.
    pub fn clients_attached(&self) -> usize {
        self.clients.attached()
    }

    /// `n` datagrams that `slot`'s socket held when a client took it
    /// (sent to a free slot, or by its previous client): dropped.
    pub fn drop_stale(&mut self, slot: usize, n: usize) {
        if n > 0 {
            self.counts.dropped += n as u64;
            ibtca_log::guest_warn!(slot, n, "MADs on a free slot dropped when a client took it");
        }
    }

    fn drop_with(&mut self, why: &str) {
        self.counts.dropped += 1;
        tracing::debug!("dropped: {why}");
    }

    /// A datagram from the client in `slot`: what it sends is pushed onto
    /// `out`.
    pub fn on_client(
        &mut self,
        slot: usize,
        bytes: &[u8],
        totals: &PortTotals,
        now: Instant,
        out: &mut Sends,
    ) {
        if self.clients.get(slot).is_none() {
            self.counts.dropped += 1;
            ibtca_log::guest_warn!(slot, "MAD from a slot no client holds: dropped");
            return;
        }
        let (Ok(request), Some((env, mad))) = (
            <&[u8; REQUEST_LEN]>::try_from(bytes),
            Envelope::split(bytes),
        ) else {
            self.counts.dropped += 1;
            ibtca_log::guest_warn!(
                slot,
                len = bytes.len(),
                "malformed MAD envelope from a client: dropped"
            );
            return;
        };
        let h = MadHeader::read(mad);
        self.counts.requests += 1;
        let kind = (h.mgmt_class, h.attr_id, h.method);
        if let Some(n) = self.kinds.get_mut(&kind) {
            *n += 1;
        } else if self.kinds.len() < MAX_REQUEST_KINDS {
            self.kinds.insert(kind, 1);
        } else {
            self.counts.other_kinds += 1;
        }
        if h.base_version != 1 {
            return self.timed_out(slot, request, out);
        }
        let routed = match h.mgmt_class {
            class::SUBN_DIRECTED_ROUTE | class::SUBN_LID_ROUTED => {
                self.client_smp(slot, &env, mad, out)
            }
            _ => self.client_gmp(slot, &env, mad, &h, totals, out),
        };
        let Some(sent) = routed else {
            return self.timed_out(slot, request, out);
        };
        // Answered at once to the client itself, or sent on (onto the
        // link, or to the port's SM client) to wait for its response.
        if sent == Sent::Client(slot) {
            self.counts.local += 1;
            return;
        }
        let to_link = sent == Sent::Link;
        if to_link {
            self.counts.to_link += 1;
        }
        if !h.is_response() && !matches!(h.method, method::TRAP | method::TRAP_REPRESS) {
            // One for the port's SM client has left the fabric's reach.
            self.clients
                .sent(wire_tid(h.tid, slot), slot, h.tid, request, now, !to_link);
        }
    }

    /// Sends `request` back to its client unanswered.
    fn timed_out(&mut self, slot: usize, request: &[u8; REQUEST_LEN], out: &mut Sends) {
        self.counts.timed_out += 1;
        out.unanswered(slot, request);
    }

    /// A client's SMP: the port's agent's, or onto the link.
    fn client_smp(
        &mut self,
        slot: usize,
        env: &Envelope,
        mad: &[u8; MAD_LEN],
        out: &mut Sends,
    ) -> Option<Sent> {
        if let Some(sent) = self.client_dr_request(slot, mad, out) {
            return sent;
        }
        let mut smp = Smp::parse(mad).ok()?;
        let lid = self.sma.lid();
        let tid = smp.tid;
        smp.tid = wire_tid(tid, slot);
        let local = match smp.route {
            SmpRoute::Directed => smp.hop_cnt == 0,
            SmpRoute::Lid => env.dlid == lid || env.dlid == 0,
        };
        if local {
            return self.local_client_smp(slot, env, smp, tid, out);
        }
        let (slid, dlid) = match smp.route {
            SmpRoute::Directed if smp.direction => {
                // The client's answer to a directed request (SMInfo).
                smp.tid = tid;
                if directed::respond(&mut smp, 1) != DrStep::Forward(1) {
                    return None;
                }
                (PERMISSIVE_LID, PERMISSIVE_LID)
            }
            SmpRoute::Directed => {
                if directed::begin(&mut smp) != Ok(1) {
                    return None;
                }
                (PERMISSIVE_LID, PERMISSIVE_LID)
            }
            SmpRoute::Lid => {
                if smp.method & method::RESPONSE != 0 {
                    smp.tid = tid;
                }
                (lid, env.dlid)
            }
        };
        out.link
            .push(encoded::smp_packet(&smp, slid, dlid, self.stamp));
        Some(Sent::Link)
    }

    /// A client's directed request into the fabric (the D bit clear, a
    /// hop count above 0), most of what an SM sends: its packet built from
    /// the MAD as it lies in the client's datagram (one copy, into a
    /// recycled buffer when the port holds one), then its
    /// TID given the slot and its route begun (C14-9:1) in the packet's
    /// bytes, not decoded, and sent by port 1 (`Some(None)`: its route
    /// does not leave by port 1). `None` for any other SMP, which
    /// [`Self::client_smp`] decodes.
    fn client_dr_request(
        &mut self,
        slot: usize,
        mad: &[u8; MAD_LEN],
        out: &mut Sends,
    ) -> Option<Option<Sent>> {
        let buf = self.spare.pop().unwrap_or_default();
        let mut packet = encoded::mad_packet_in(mad, PERMISSIVE_LID, PERMISSIVE_LID, false, buf);
        let at = encoded::smp_mad_at(&packet)?;
        let mut dr = DrBytes(packet.get_mut(at..)?.first_chunk_mut::<MAD_LEN>()?);
        if !dr.is_directed() || dr.direction() || dr.hop_cnt() == 0 {
            self.recycle(packet);
            return None;
        }
        let tid = u64::from_be_bytes(*dr.0[8..].first_chunk()?);
        dr.0[8..16].copy_from_slice(&wire_tid(tid, slot).to_be_bytes());
        if directed::begin(&mut dr) != Ok(1) {
            return Some(None);
        }
        if self.stamp {
            encoded::restamp_crcs(&mut packet);
        }
        out.link.push(packet);
        Some(Some(Sent::Link))
    }

    /// A client's SMP to the port itself: an answer to a request of
    /// another client of the port (to the port's SM), else the agent's,
    /// else (SMInfo) the SM client's to answer.
    fn local_client_smp(
        &mut self,
        slot: usize,
        env: &Envelope,
        mut smp: Smp,
        tid: u64,
        out: &mut Sends,
    ) -> Option<Sent> {
        let lid = self.sma.lid();
        let envelope = Envelope::mad(lid, lid, QP0, QP0);
        if smp.method & method::RESPONSE != 0 {
            smp.tid = tid;
            let (waiting, client_tid) = self.clients.answered(tid)?;
            smp.tid = client_tid;
            out.client(waiting, &envelope, &smp.to_bytes());
            return Some(Sent::Client(waiting));
        }
        smp.tid = tid;
        let for_sm = self.sma.stats().for_sm;
        if let Some(reply) = self.local_smp(smp.clone()) {
            let slid = if env.dlid == PERMISSIVE_LID {
                PERMISSIVE_LID
            } else {
                lid
            };
            let envelope = Envelope::mad(lid, slid, env.sqp, env.dqp);
            out.client(slot, &envelope, &reply.to_bytes());
            return Some(Sent::Client(slot));
        }
        if self.sma.stats().for_sm == for_sm {
            return None;
        }
        let sm = self.clients.sm().filter(|&sm| sm != slot)?;
        smp.tid = wire_tid(tid, slot);
        out.client(sm, &envelope, &smp.to_bytes());
        Some(Sent::Client(sm))
    }

    /// Serves an SMP from the port itself by its agent, as the engine
    /// serves its guest's SM (`engine/smp.rs`): a directed SMP of no hops
    /// is the end of a one-hop path, its answer back with no hops.
    pub(crate) fn local_smp(&mut self, mut smp: Smp) -> Option<Smp> {
        let lid = self.sma.lid();
        let local_dr = smp.route == SmpRoute::Directed;
        if local_dr {
            (smp.hop_cnt, smp.hop_ptr, smp.initial_path[1]) = (1, 1, 1);
        }
        let dlid = if local_dr { PERMISSIVE_LID } else { lid };
        let packet = smp_packet_bytes(&smp, lid, dlid).ok()?;
        let view = PacketView::parse(&packet).ok()?;
        let before = self.lid_and_state();
        let outcome = self.sma.on_packet(&view);
        if self.lid_and_state() != before {
            tracing::info!(lid = self.sma.lid(), state = ?self.sma.state(), "port set by the subnet manager");
        }
        // The agent's own packet: its CRCs are zero once unstamped.
        let reply = outcome.reply.as_deref()?;
        let reply = PacketView::parse_with(reply, &ReceivedCrcs::trusted(reply)).ok()?;
        let mut answer = Smp::parse(reply.payload).ok()?;
        if local_dr {
            (answer.hop_cnt, answer.hop_ptr) = (0, 0);
        }
        Some(answer)
    }

    /// A client's GMP: the port's PMA's, the SM client's, or onto the link.
    fn client_gmp(
        &mut self,
        slot: usize,
        env: &Envelope,
        mad: &[u8; MAD_LEN],
        h: &MadHeader,
        totals: &PortTotals,
        out: &mut Sends,
    ) -> Option<Sent> {
        let lid = self.sma.lid();
        let mut mad = *mad;
        if !h.is_response() {
            mad[8..16].copy_from_slice(&wire_tid(h.tid, slot).to_be_bytes());
        }
        let deth = Deth {
            qkey: QP1_QKEY,
            src_qp: env.sqp,
        };
        let p = Packet::datagram(lid, env.dlid, env.dqp, deth, mad.to_vec());
        let packet = p.build().ok()?;
        if env.dlid != lid || lid == 0 {
            if self.sma.state() != PortState::Active {
                return None;
            }
            out.link.push(packet);
            return Some(Sent::Link);
        }
        // To the port itself: its PMA, or its SM client.
        let view = PacketView::parse(&packet).ok()?;
        if let PmPacket::Served(reply) = self.pma.serve_packet(&CaPort(*totals), &view, lid) {
            let reply = reply?;
            let reply = PacketView::parse(&reply).ok()?;
            let mut mad: [u8; MAD_LEN] = reply.payload.try_into().ok()?;
            mad[8..16].copy_from_slice(&h.tid.to_be_bytes());
            out.client(slot, &Envelope::mad(lid, lid, env.sqp, env.dqp), &mad);
            return Some(Sent::Client(slot));
        }
        let from = sender(&view, env.dqp);
        match self.deliver(from, env.dqp, &mad, h.is_response(), out, |_| true) {
            Delivery::To(slot) => Some(Sent::Client(slot)),
            Delivery::NoClient | Delivery::Refused => None,
        }
    }

    /// A packet from the link, its CRCs checked: what it sends is pushed
    /// onto `out`.
    pub fn on_link(&mut self, bytes: &[u8], totals: &PortTotals, out: &mut Sends) {
        self.on_link_with(bytes, &ReceivedCrcs::of(bytes), totals, out);
    }

    /// A packet from the link that the owner's own process built (a node
    /// it hosts sent it, or passed it on after its own input check):
    /// handled as [`Self::on_link`] handles one, its CRCs taken as right,
    /// not computed. Never for bytes read from a socket.
    ///
    /// An SMP response, the most of what an SM's port hears, is taken
    /// from its headers where they lie, not parsed
    /// ([`encoded::checked_smp_mad_at`]: exactly the packets a parse
    /// would take as an SMP's).
    pub fn on_built_link(&mut self, bytes: &[u8], totals: &PortTotals, out: &mut Sends) {
        let response = encoded::checked_smp_mad_at(bytes)
            .and_then(|at| bytes.get(at..)?.first_chunk::<MAD_LEN>())
            .filter(|mad| mad[3] & method::RESPONSE != 0);
        let from = encoded::slid(bytes).zip(encoded::smp_src_qp(bytes));
        let (Some(mad), Some(from)) = (response, from) else {
            return self.on_link_with(bytes, &ReceivedCrcs::trusted(bytes), totals, out);
        };
        if !self.fabric_smp_response(mad, from, out) {
            self.drop_with("MAD for no client");
        }
    }

    fn on_link_with(
        &mut self,
        bytes: &[u8],
        crcs: &ReceivedCrcs,
        totals: &PortTotals,
        out: &mut Sends,
    ) {
        let Ok(view) = PacketView::parse_with(bytes, crcs) else {
            return self.drop_with("unparsable packet from the link");
        };
        if view.opcode() != Opcode::UdSendOnly || view.ext.deth.is_none() {
            return self.drop_with("not a UD datagram");
        }
        let taken = match view.bth.dest_qp {
            QP0 => self.fabric_qp0(&view, out),
            QP1 => self.fabric_qp1(&view, totals, out),
            _ => false,
        };
        if !taken {
            self.drop_with("MAD for no client");
        }
    }

    /// An SMP from the link, what it sends pushed onto `out`: false if it
    /// is for no one (dropped).
    fn fabric_qp0(&mut self, view: &PacketView<'_>, out: &mut Sends) -> bool {
        // The MAD's method, its response bit included.
        let m = view.payload.get(3).copied().unwrap_or(0);
        if m & method::RESPONSE != 0 {
            let Ok(mad) = <&[u8; MAD_LEN]>::try_from(view.payload) else {
                return true;
            };
            return self.fabric_smp_response(mad, sender(view, QP0), out);
        }
        let for_sm = self.sma.stats().for_sm;
        let before = self.lid_and_state();
        let outcome = self.sma.on_packet(view);
        if self.lid_and_state() != before {
            tracing::info!(lid = self.sma.lid(), state = ?self.sma.state(), "port set by the subnet manager");
        }
        if let Some(reply) = outcome.reply {
            out.link.push(reply);
            return true;
        }
        if self.sma.stats().for_sm == for_sm {
            return true;
        }
        let Ok(mut smp) = ibtca_protocol::mad::smp_of_packet(view) else {
            return false;
        };
        if smp.route == SmpRoute::Directed {
            directed::on_receive(&mut smp, false, 1, 1);
        }
        let response = smp.method & method::RESPONSE != 0;
        let delivery = self.deliver(
            sender(view, QP0),
            QP0,
            &smp.to_bytes(),
            response,
            out,
            |_| true,
        );
        delivery != Delivery::NoClient
    }

    /// An SMP response from the link: never the agent's (it answers, it
    /// does not ask), but the client's that waits for it. Handed on as it
    /// came, a directed one's last step taken in its bytes where they lie
    /// in its client's datagram (not decoded); dropped, as the agent drops
    /// it, if it is not an SMP or its directed route does not end here.
    /// False if no client waits for it.
    fn fabric_smp_response(
        &mut self,
        mad: &[u8; MAD_LEN],
        from: (u16, u32),
        out: &mut Sends,
    ) -> bool {
        let last_step = |mad: &mut [u8; MAD_LEN]| match mad[1] {
            class::SUBN_LID_ROUTED => true,
            class::SUBN_DIRECTED_ROUTE => {
                directed::on_receive(&mut DrBytes(mad), false, 1, 1) == DrStep::Deliver
            }
            _ => false,
        };
        self.deliver(from, QP0, mad, true, out, last_step) != Delivery::NoClient
    }

    fn fabric_qp1(&mut self, view: &PacketView<'_>, totals: &PortTotals, out: &mut Sends) -> bool {
        let lid = self.sma.lid();
        match self.pma.serve_packet(&CaPort(*totals), view, lid) {
            PmPacket::Served(reply) => {
                out.link.extend(reply);
                return true;
            }
            PmPacket::NotForAgent => {}
        }
        let Ok(mad) = <&[u8; MAD_LEN]>::try_from(view.payload) else {
            return false;
        };
        let h = MadHeader::read(mad);
        self.deliver(sender(view, QP1), QP1, mad, h.is_response(), out, |_| true)
            != Delivery::NoClient
    }

    /// Hands `mad`, from `from` (its source LID and QP) to QP `qp` of the
    /// port, to its client: a response to the client that waits for it
    /// (its TID restored), a request to the SM client. The MAD is written
    /// into its datagram in `out` first, where `edit` takes its step
    /// (false: refused, the datagram taken back).
    fn deliver(
        &mut self,
        from: (u16, u32),
        qp: u32,
        mad: &[u8; MAD_LEN],
        response: bool,
        out: &mut Sends,
        edit: impl FnOnce(&mut [u8; MAD_LEN]) -> bool,
    ) -> Delivery {
        let (slid, sqp) = from;
        let envelope = Envelope::mad(self.sma.lid(), slid, qp, sqp);
        let sent = out.client(0, &envelope, mad);
        let in_place = mad_of(&mut sent.1);
        if !edit(in_place) {
            out.clients.pop();
            return Delivery::Refused;
        }
        let tid = u64::from_be_bytes(*in_place[8..].first_chunk().unwrap_or(&[0; 8]));
        let to = if response {
            self.clients.answered(tid).map(|(slot, client_tid)| {
                in_place[8..16].copy_from_slice(&client_tid.to_be_bytes());
                slot
            })
        } else {
            self.clients.sm()
        };
        let Some(slot) = to else {
            out.clients.pop();
            return Delivery::NoClient;
        };
        sent.0 = slot;
        self.counts.to_clients += 1;
        Delivery::To(slot)
    }

    /// Requests out of time, back to their clients; the trap to the SM
    /// that is due: pushed onto `out`.
    pub fn tick(&mut self, now: Instant, out: &mut Sends) {
        let before = out.clients.len();
        self.clients.expire(now, |slot, r| out.unanswered(slot, r));
        self.counts.timed_out += (out.clients.len() - before) as u64;
        if let Some(trap) = self.sma.due_trap(now) {
            out.link.push(trap);
        }
    }

    /// Requests sent onto the link that the owner saw neither leave its
    /// reach ([`SimPort::mark_left`]) nor answered: back to their clients
    /// with ETIMEDOUT now ([`Clients::stranded`]), pushed onto `out`.
    pub fn stranded(&mut self, out: &mut Sends) {
        let before = out.clients.len();
        self.clients.stranded(|slot, r| out.unanswered(slot, r));
        self.counts.undeliverable += (out.clients.len() - before) as u64;
    }

    /// The request that went out with TID `tid` (as on the wire) left the
    /// owner's reach: only its response or its timeout ends it.
    pub fn mark_left(&mut self, tid: u64) {
        self.clients.mark_left(tid);
    }

    /// How long a client's request waits for its response from now on.
    pub fn set_request_timeout(&mut self, timeout: std::time::Duration) {
        self.clients.set_timeout(timeout);
    }

    /// When [`SimPort::tick`] has something to do next.
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.clients.next_deadline(), self.sma.next_trap_deadline()]
            .into_iter()
            .flatten()
            .min()
    }
}

/// Who sent `view`: its source LID, and its source QP (its DETH's, else
/// `qp`).
fn sender(view: &PacketView<'_>, qp: u32) -> (u16, u32) {
    (view.lrh.slid, view.ext.deth.map_or(qp, |d| d.src_qp))
}

#[cfg(test)]
#[path = "port_tests.rs"]
mod tests;
