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
use crate::wire::{SimRequest, STATUS_TIMED_OUT};

/// Where one message goes. The port's methods push these onto a `Vec`
/// their owner keeps and drains turn after turn, so a MAD's envelope is
/// held inline (not boxed: no allocation per answer).
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)]
pub enum Out {
    /// A packet onto the link.
    Link(Vec<u8>),
    /// A MAD to the client in this slot.
    Client(usize, SimRequest),
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
}

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
        out: &mut Vec<Out>,
    ) {
        if self.clients.get(slot).is_none() {
            self.counts.dropped += 1;
            ibtca_log::guest_warn!(slot, "MAD from a slot no client holds: dropped");
            return;
        }
        let Some(req) = SimRequest::parse(bytes) else {
            self.counts.dropped += 1;
            ibtca_log::guest_warn!(
                slot,
                len = bytes.len(),
                "malformed MAD envelope from a client: dropped"
            );
            return;
        };
        let h = MadHeader::read(&req.mad);
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
            return self.timed_out(slot, req, out);
        }
        let routed = match h.mgmt_class {
            class::SUBN_DIRECTED_ROUTE | class::SUBN_LID_ROUTED => self.client_smp(slot, &req),
            _ => self.client_gmp(slot, &req, &h, totals),
        };
        let Some(first) = routed else {
            return self.timed_out(slot, req, out);
        };
        // Answered at once to the client itself, or sent on (onto the
        // link, or to the port's SM client) to wait for its response.
        let answered_here = matches!(&first, Out::Client(s, _) if *s == slot);
        let to_link = matches!(first, Out::Link(_));
        out.push(first);
        if answered_here {
            self.counts.local += 1;
        } else {
            if to_link {
                self.counts.to_link += 1;
            }
            if !h.is_response() && !matches!(h.method, method::TRAP | method::TRAP_REPRESS) {
                // One for the port's SM client has left the fabric's reach.
                self.clients
                    .sent(wire_tid(h.tid, slot), slot, h.tid, req, now, !to_link);
            }
        }
    }

    /// Sends `req` back to its client unanswered.
    fn timed_out(&mut self, slot: usize, mut req: SimRequest, out: &mut Vec<Out>) {
        self.counts.timed_out += 1;
        req.status = STATUS_TIMED_OUT;
        out.push(Out::Client(slot, req));
    }

    /// A client's SMP: the port's agent's, or onto the link.
    fn client_smp(&mut self, slot: usize, req: &SimRequest) -> Option<Out> {
        if let Some(sent) = self.client_dr_request(slot, req) {
            return sent;
        }
        let mut smp = Smp::parse(&req.mad).ok()?;
        let lid = self.sma.lid();
        let tid = smp.tid;
        smp.tid = wire_tid(tid, slot);
        let local = match smp.route {
            SmpRoute::Directed => smp.hop_cnt == 0,
            SmpRoute::Lid => req.dlid == lid || req.dlid == 0,
        };
        if local {
            return self.local_client_smp(slot, req, smp, tid);
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
                (lid, req.dlid)
            }
        };
        Some(Out::Link(encoded::smp_packet(&smp, slid, dlid, self.stamp)))
    }

    /// A client's directed request into the fabric (the D bit clear, a
    /// hop count above 0), most of what an SM sends: its TID given the
    /// slot and its route begun (C14-9:1) in its bytes, not decoded, and
    /// sent by port 1 (`Some(None)`: its route does not leave by port 1).
    /// `None` for any other SMP, which [`Self::client_smp`] decodes.
    fn client_dr_request(&self, slot: usize, req: &SimRequest) -> Option<Option<Out>> {
        let mut mad = req.mad;
        let dr = DrBytes(&mut mad);
        if !dr.is_directed() || dr.direction() || dr.hop_cnt() == 0 {
            return None;
        }
        let tid = u64::from_be_bytes(*mad[8..].first_chunk()?);
        mad[8..16].copy_from_slice(&wire_tid(tid, slot).to_be_bytes());
        let begun = directed::begin(&mut DrBytes(&mut mad)) == Ok(1);
        let packet = || encoded::mad_packet(&mad, PERMISSIVE_LID, PERMISSIVE_LID, self.stamp);
        Some(begun.then(|| Out::Link(packet())))
    }

    /// A client's SMP to the port itself: an answer to a request of
    /// another client of the port (to the port's SM), else the agent's,
    /// else (SMInfo) the SM client's to answer.
    fn local_client_smp(
        &mut self,
        slot: usize,
        req: &SimRequest,
        mut smp: Smp,
        tid: u64,
    ) -> Option<Out> {
        let lid = self.sma.lid();
        let envelope = |mad: [u8; MAD_LEN]| SimRequest {
            dlid: lid,
            slid: lid,
            dqp: QP0,
            sqp: QP0,
            status: 0,
            length: MAD_LEN as u64,
            mad,
        };
        if smp.method & method::RESPONSE != 0 {
            smp.tid = tid;
            let (waiting, client_tid) = self.clients.answered(tid)?;
            smp.tid = client_tid;
            return Some(Out::Client(waiting, envelope(smp.to_bytes())));
        }
        smp.tid = tid;
        let for_sm = self.sma.stats().for_sm;
        if let Some(reply) = self.local_smp(smp.clone()) {
            return Some(Out::Client(slot, self.answer_to(req, &reply)));
        }
        if self.sma.stats().for_sm == for_sm {
            return None;
        }
        let sm = self.clients.sm().filter(|&sm| sm != slot)?;
        smp.tid = wire_tid(tid, slot);
        Some(Out::Client(sm, envelope(smp.to_bytes())))
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

    /// The envelope of `reply`, the answer to `req` from the port itself.
    fn answer_to(&self, req: &SimRequest, reply: &Smp) -> SimRequest {
        let lid = self.sma.lid();
        SimRequest {
            dlid: lid,
            slid: if req.dlid == PERMISSIVE_LID {
                PERMISSIVE_LID
            } else {
                lid
            },
            dqp: req.sqp,
            sqp: req.dqp,
            status: 0,
            length: MAD_LEN as u64,
            mad: reply.to_bytes(),
        }
    }

    /// A client's GMP: the port's PMA's, the SM client's, or onto the link.
    fn client_gmp(
        &mut self,
        slot: usize,
        req: &SimRequest,
        h: &MadHeader,
        totals: &PortTotals,
    ) -> Option<Out> {
        let lid = self.sma.lid();
        let mut mad = req.mad;
        if !h.is_response() {
            mad[8..16].copy_from_slice(&wire_tid(h.tid, slot).to_be_bytes());
        }
        let deth = Deth {
            qkey: QP1_QKEY,
            src_qp: req.sqp,
        };
        let p = Packet::datagram(lid, req.dlid, req.dqp, deth, mad.to_vec());
        let packet = p.build().ok()?;
        if req.dlid != lid || lid == 0 {
            if self.sma.state() != PortState::Active {
                return None;
            }
            return Some(Out::Link(packet));
        }
        // To the port itself: its PMA, or its SM client.
        let view = PacketView::parse(&packet).ok()?;
        if let PmPacket::Served(reply) = self.pma.serve_packet(&CaPort(*totals), &view, lid) {
            let reply = reply?;
            let reply = PacketView::parse(&reply).ok()?;
            let mut mad: [u8; MAD_LEN] = reply.payload.try_into().ok()?;
            mad[8..16].copy_from_slice(&h.tid.to_be_bytes());
            return Some(Out::Client(
                slot,
                SimRequest {
                    dlid: lid,
                    slid: lid,
                    dqp: req.sqp,
                    sqp: req.dqp,
                    status: 0,
                    length: MAD_LEN as u64,
                    mad,
                },
            ));
        }
        self.deliver(sender(&view, req.dqp), req.dqp, mad, h.is_response())
    }

    /// A packet from the link, its CRCs checked: what it sends is pushed
    /// onto `out`.
    pub fn on_link(&mut self, bytes: &[u8], totals: &PortTotals, out: &mut Vec<Out>) {
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
    pub fn on_built_link(&mut self, bytes: &[u8], totals: &PortTotals, out: &mut Vec<Out>) {
        let response = encoded::checked_smp_mad_at(bytes)
            .and_then(|at| bytes.get(at..at + MAD_LEN))
            .filter(|mad| mad[3] & method::RESPONSE != 0);
        let from = encoded::slid(bytes).zip(encoded::smp_src_qp(bytes));
        let (Some(mad), Some(from)) = (response, from) else {
            return self.on_link_with(bytes, &ReceivedCrcs::trusted(bytes), totals, out);
        };
        match self.fabric_smp_response(mad, from) {
            Some(sent) => out.extend(sent),
            None => self.drop_with("MAD for no client"),
        }
    }

    fn on_link_with(
        &mut self,
        bytes: &[u8],
        crcs: &ReceivedCrcs,
        totals: &PortTotals,
        out: &mut Vec<Out>,
    ) {
        let Ok(view) = PacketView::parse_with(bytes, crcs) else {
            return self.drop_with("unparsable packet from the link");
        };
        if view.opcode() != Opcode::UdSendOnly || view.ext.deth.is_none() {
            return self.drop_with("not a UD datagram");
        }
        let served = match view.bth.dest_qp {
            QP0 => self.fabric_qp0(&view),
            QP1 => self.fabric_qp1(&view, totals),
            _ => None,
        };
        match served {
            Some(sent) => out.extend(sent),
            None => self.drop_with("MAD for no client"),
        }
    }

    /// An SMP from the link: `None` if it is for no one (dropped),
    /// `Some(None)` if taken with nothing to send, else what to send.
    fn fabric_qp0(&mut self, view: &PacketView<'_>) -> Option<Option<Out>> {
        // The MAD's method, its response bit included.
        let m = view.payload.get(3).copied().unwrap_or(0);
        if m & method::RESPONSE != 0 {
            return self.fabric_smp_response(view.payload, sender(view, QP0));
        }
        let for_sm = self.sma.stats().for_sm;
        let before = self.lid_and_state();
        let outcome = self.sma.on_packet(view);
        if self.lid_and_state() != before {
            tracing::info!(lid = self.sma.lid(), state = ?self.sma.state(), "port set by the subnet manager");
        }
        if let Some(reply) = outcome.reply {
            return Some(Some(Out::Link(reply)));
        }
        if self.sma.stats().for_sm == for_sm {
            return Some(None);
        }
        let mut smp = ibtca_protocol::mad::smp_of_packet(view).ok()?;
        if smp.route == SmpRoute::Directed {
            directed::on_receive(&mut smp, false, 1, 1);
        }
        let mad = smp.to_bytes();
        self.deliver(
            sender(view, QP0),
            QP0,
            mad,
            smp.method & method::RESPONSE != 0,
        )
        .map(Some)
    }

    /// An SMP response from the link: never the agent's (it answers, it
    /// does not ask), but the client's that waits for it. Handed on as it
    /// came, a directed one's last step taken in its bytes (not decoded);
    /// dropped, as the agent drops it, if it is not an SMP or its directed
    /// route does not end here.
    fn fabric_smp_response(&mut self, payload: &[u8], from: (u16, u32)) -> Option<Option<Out>> {
        let Ok(mut mad) = <[u8; MAD_LEN]>::try_from(payload) else {
            return Some(None);
        };
        let delivered = match mad[1] {
            class::SUBN_LID_ROUTED => true,
            class::SUBN_DIRECTED_ROUTE => {
                directed::on_receive(&mut DrBytes(&mut mad), false, 1, 1) == DrStep::Deliver
            }
            _ => false,
        };
        if !delivered {
            return Some(None);
        }
        self.deliver(from, QP0, mad, true).map(Some)
    }

    fn fabric_qp1(&mut self, view: &PacketView<'_>, totals: &PortTotals) -> Option<Option<Out>> {
        let lid = self.sma.lid();
        match self.pma.serve_packet(&CaPort(*totals), view, lid) {
            PmPacket::Served(reply) => return Some(reply.map(Out::Link)),
            PmPacket::NotForAgent => {}
        }
        let mad: [u8; MAD_LEN] = view.payload.try_into().ok()?;
        let h = MadHeader::read(&mad);
        self.deliver(sender(view, QP1), QP1, mad, h.is_response())
            .map(Some)
    }

    /// Hands `mad`, from `from` (its source LID and QP) to QP `qp` of the
    /// port, to its client: a response to the client that waits for it
    /// (its TID restored), a request to the SM client.
    fn deliver(
        &mut self,
        from: (u16, u32),
        qp: u32,
        mut mad: [u8; MAD_LEN],
        response: bool,
    ) -> Option<Out> {
        let tid = u64::from_be_bytes(mad[8..16].try_into().ok()?);
        let slot = if response {
            let (slot, client_tid) = self.clients.answered(tid)?;
            mad[8..16].copy_from_slice(&client_tid.to_be_bytes());
            slot
        } else {
            self.clients.sm()?
        };
        self.counts.to_clients += 1;
        let (slid, sqp) = from;
        Some(Out::Client(
            slot,
            SimRequest {
                dlid: self.sma.lid(),
                slid,
                dqp: qp,
                sqp,
                status: 0,
                length: MAD_LEN as u64,
                mad,
            },
        ))
    }

    /// Requests out of time, back to their clients; the trap to the SM
    /// that is due: pushed onto `out`.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<Out>) {
        let before = out.len();
        self.clients
            .expire(now, |slot, r| out.push(Out::Client(slot, r)));
        self.counts.timed_out += (out.len() - before) as u64;
        if let Some(trap) = self.sma.due_trap(now) {
            out.push(Out::Link(trap));
        }
    }

    /// Requests sent onto the link that the owner saw neither leave its
    /// reach ([`SimPort::mark_left`]) nor answered: back to their clients
    /// with ETIMEDOUT now ([`Clients::stranded`]), pushed onto `out`.
    pub fn stranded(&mut self, out: &mut Vec<Out>) {
        let before = out.len();
        self.clients
            .stranded(|slot, r| out.push(Out::Client(slot, r)));
        self.counts.undeliverable += (out.len() - before) as u64;
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
