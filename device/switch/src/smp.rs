//! SMPs at a switch: what comes in on VL15 for the switch itself (DLID
//! the permissive LID or port 0's LID) is a directed-route SMP to pass on
//! (C14-9, C14-13: hop pointer, return path) or one for port 0's agent
//! (`sma.rs`), whose answer goes back the way the request came. A
//! directed SMP with LID-routed parts leaves the switch LID-routed (from
//! the switch's LID) toward DrDLID or DrSLID where its directed part ends
//! or began here.
//! LID-routed SMPs for other LIDs are forwarded like any packet, on VL15.
//! A TrapRepress for the switch goes to its traps (`trap.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use ibtca_protocol::encoded;
use ibtca_protocol::mad::directed::{self, DrBytes, DrStep};
use ibtca_protocol::mad::{class, method, Smp, MAD_LEN, PERMISSIVE_LID, QP0};
use ibtca_protocol::packet::{ReceivedCrcs, ICRC_LEN, VCRC_LEN};
use ibtca_protocol::{Opcode, PacketView};

use super::Core;
use ibtca_agents::sma::{answer, Answer};
use ibtca_link::VL15;

/// SMPs for the switch: answered or passed on, and dropped (malformed, a
/// directed route that does not go on, no answer due, no route back).
/// Outside the agent's lock: an SMP passing through takes no lock.
#[derive(Debug, Default)]
pub(super) struct SmpCounts {
    pub served: AtomicU64,
    pub dropped: AtomicU64,
}

impl SmpCounts {
    /// (served, dropped).
    pub fn get(&self) -> (u64, u64) {
        (
            self.served.load(Ordering::Relaxed),
            self.dropped.load(Ordering::Relaxed),
        )
    }
}

impl Core {
    /// True if a VL15 packet to `dlid` is the switch's own.
    pub(super) fn is_for_sma(&self, dlid: u16) -> bool {
        if dlid == PERMISSIVE_LID {
            return true;
        }
        let own = self.sma().lid();
        own != 0 && dlid == own
    }

    /// Serves an SMP for the switch that came in on `in_port` (`crcs` its
    /// CRCs, already checked): the packet to send and the port to send it
    /// from (a directed SMP passed on, or the agent's answer), or nothing
    /// (dropped, counted).
    pub(super) fn serve_smp(
        &self,
        in_port: u8,
        packet: Vec<u8>,
        crcs: &ReceivedCrcs,
    ) -> Option<(u8, Vec<u8>)> {
        let out = self.smp_step(in_port, packet, crcs);
        let count = match out {
            Some(_) => &self.smps.served,
            None => &self.smps.dropped,
        };
        // Relaxed: counters order nothing.
        count.fetch_add(1, Ordering::Relaxed);
        out
    }

    fn smp_step(
        &self,
        in_port: u8,
        mut packet: Vec<u8>,
        crcs: &ReceivedCrcs,
    ) -> Option<(u8, Vec<u8>)> {
        // Its LRH, length and CRCs passed the input check: the MAD is found
        // from the headers where they lie, or by a full parse (a GRH).
        let mad_at = encoded::smp_mad_at(&packet).or_else(|| parsed_mad_at(&packet, crcs))?;
        let slid = encoded::slid(&packet)?;
        let ports = u8::try_from(self.slots.len()).unwrap_or(u8::MAX);
        let mad = packet.get_mut(mad_at..)?.first_chunk_mut::<MAD_LEN>()?;
        // A directed SMP takes its step in the bytes that came in (only the
        // hop pointer and the return path change); one passing through is
        // sent on as it is, never decoded.
        let step = (mad[1] == class::SUBN_DIRECTED_ROUTE)
            .then(|| directed::on_receive(&mut DrBytes(mad), true, in_port, ports));
        if let Some(DrStep::Forward(out)) = step {
            let stamp = !self.wires.in_process(out);
            pass_on(&mut packet, stamp);
            return Some((out, packet));
        }
        if !matches!(mad[1], class::SUBN_LID_ROUTED | class::SUBN_DIRECTED_ROUTE) {
            return None;
        }
        match step {
            Some(DrStep::ForwardByLid(dlid)) => {
                let smp = Smp::parse(mad).ok()?;
                return self.smp_by_lid(&smp, dlid);
            }
            Some(why @ (DrStep::BackToSource | DrStep::Discard(_))) => {
                tracing::debug!(switch = %self.name, port = in_port, ?why, "directed SMP dropped");
                return None;
            }
            Some(DrStep::Deliver | DrStep::Forward(_)) | None => {}
        }
        if mad[3] == method::TRAP_REPRESS {
            // The SM's answer to a trap (`trap.rs`); nothing goes back. Only
            // the holder of the M_Key may silence a trap.
            let smp = Smp::parse(mad).ok()?;
            if self.sma().passes_m_key(&smp) {
                self.trap_repress(&smp);
            }
            return None;
        }
        // A PortInfo Set re-gates the port it names (`sma.rs`); nothing
        // else an SMP does changes a port's gate. The answer is written
        // over the request where it lies, and goes back in its buffer.
        let mut sma = self.sma();
        let mut agent = sma.agent((&self.lft, &self.mft), &self.slots, self.wires.as_ref());
        if answer(&mut agent, mad, in_port) != Answer::Reply {
            return None;
        }
        drop(sma);
        if mad[1] == class::SUBN_LID_ROUTED {
            return self.answer_by_lid(packet, mad_at, slid);
        }
        match directed::respond(&mut DrBytes(mad), ports) {
            DrStep::Forward(out) => {
                let stamp = !self.wires.in_process(out);
                let answer = answer_packet(packet, mad_at, PERMISSIVE_LID, PERMISSIVE_LID, stamp)?;
                Some((out, answer))
            }
            DrStep::BackToSource => self.answer_by_lid(packet, mad_at, slid),
            _ => None,
        }
    }

    /// A directed SMP built in this process ([`Origin::Process`]) in on
    /// `in_port` that the switch passes on as it is
    /// ([`DrStep::Forward`]) out of a port the owner takes it from at once
    /// ([`Wires::passes_at_once`](crate::Wires::passes_at_once)), to a
    /// node in this process: takes its step in place, counts it as
    /// [`Core::forward`] and [`Core::serve_smp`] count it (in, out,
    /// served) and returns the port it leaves by. `None`, the packet as
    /// it came and nothing counted, for every other packet: the owner
    /// hands that one to [`Core::on_packet`]. Neither port may capture
    /// (a capture records each packet where `forward` does).
    ///
    /// [`Origin::Process`]: crate::Origin::Process
    pub(super) fn pass_directed(&self, in_port: u8, packet: &mut [u8]) -> Option<u8> {
        let in_slot = self.slot(in_port)?;
        if in_slot.capture.is_some() || encoded::vl(packet)? != VL15 {
            return None;
        }
        // The input check `forward` makes of a packet built here (its CRCs
        // not read), and the SMP's own (`smp_step`): an SMP without a GRH.
        let mad_at = encoded::checked_smp_mad_at(packet)?;
        if encoded::dlid(packet)? != PERMISSIVE_LID {
            return None;
        }
        let ports = u8::try_from(self.slots.len()).unwrap_or(u8::MAX);
        let mad = packet.get_mut(mad_at..)?.first_chunk_mut::<MAD_LEN>()?;
        if mad[1] != class::SUBN_DIRECTED_ROUTE {
            return None;
        }
        let (step, edit) = directed::plan(&DrBytes(mad), true, in_port, ports);
        let DrStep::Forward(out) = step else {
            return None;
        };
        let out_slot = self.slot(out)?;
        if out_slot.capture.is_some()
            || !self.wires.in_process(out)
            || !self.wires.passes_at_once(out)
        {
            return None;
        }
        edit.apply(&mut DrBytes(mad));
        pass_on(packet, false);
        let len = packet.len();
        in_slot.counters.rx(len);
        self.smps.served.fetch_add(1, Ordering::Relaxed);
        out_slot.counters.tx(len);
        Some(out)
    }

    /// `smp` LID-routed from the switch's LID to `dlid` through the
    /// forwarding table (none while the switch has no LID or no route).
    pub(super) fn smp_by_lid(&self, smp: &Smp, dlid: u16) -> Option<(u8, Vec<u8>)> {
        let (own, out) = self.lid_route(dlid)?;
        let stamp = !self.wires.in_process(out);
        Some((out, encoded::smp_packet(smp, own, dlid, stamp)))
    }

    /// The agent's answer, written over its request at `mad_at` in
    /// `packet`, LID-routed from the switch's LID to `dlid` in that
    /// buffer ([`answer_packet`]).
    fn answer_by_lid(&self, packet: Vec<u8>, mad_at: usize, dlid: u16) -> Option<(u8, Vec<u8>)> {
        let (own, out) = self.lid_route(dlid)?;
        let stamp = !self.wires.in_process(out);
        Some((out, answer_packet(packet, mad_at, own, dlid, stamp)?))
    }

    /// The switch's LID and the port the forwarding table sends `dlid`
    /// out of (none while the switch has no LID or no route). A packet
    /// leaving by a port to a node in this process keeps its CRCs zero
    /// ([`Wires::in_process`](crate::Wires::in_process); the hive stamps
    /// such a packet if a hop further on sends it onto a wire).
    fn lid_route(&self, dlid: u16) -> Option<(u16, u8)> {
        let own = self.sma().lid();
        if own == 0 {
            return None;
        }
        Some((own, self.lft.lookup(dlid)?))
    }
}

/// `packet`, whose MAD at `mad_at` the agent answered in place, made the
/// answer's packet from `slid` to `dlid` (CRCs stamped with `stamp`):
/// in the same buffer ([`encoded::readdress_smp`]), or built anew of the
/// MAD for a request that came with a GRH or a pad.
fn answer_packet(
    mut packet: Vec<u8>,
    mad_at: usize,
    slid: u16,
    dlid: u16,
    stamp: bool,
) -> Option<Vec<u8>> {
    if encoded::readdress_smp(&mut packet, slid, dlid, stamp) {
        return Some(packet);
    }
    let mad: &[u8; MAD_LEN] = packet.get(mad_at..)?.first_chunk()?;
    Some(encoded::mad_packet(mad, slid, dlid, stamp))
}

/// Where the MAD starts in an SMP's `packet` that
/// [`encoded::smp_mad_at`] leaves to a full parse (one with a GRH),
/// checked against `crcs`: `None` if it is no UD SEND Only to QP0 with a
/// MAD.
fn parsed_mad_at(packet: &[u8], crcs: &ReceivedCrcs) -> Option<usize> {
    let view = PacketView::parse_with(packet, crcs).ok()?;
    if view.opcode() != Opcode::UdSendOnly || view.bth.dest_qp != QP0 {
        return None;
    }
    (view.payload.len() == MAD_LEN)
        .then(|| packet.len() - (VCRC_LEN + ICRC_LEN + usize::from(view.bth.pad_cnt) + MAD_LEN))
}

/// Addresses `packet`, a directed SMP that took its step here in place,
/// between permissive LIDs (the directed part's wire hops) and, with
/// `stamp` (it leaves on a wire,
/// [`Wires::in_process`](crate::Wires::in_process)), stamps both CRCs
/// anew.
fn pass_on(packet: &mut [u8], stamp: bool) {
    encoded::set_lids(packet, PERMISSIVE_LID, PERMISSIVE_LID);
    if stamp {
        encoded::restamp_crcs(packet);
    }
}
