//! Performance management agents (IBA vol 1 §16.1): what a node answers to
//! the PM MADs (class 0x04) that reach its QP1, from the node's real
//! counters. The device's engine (`engine/pma.rs`), the gateway's and the
//! switch's port 0 (`switch/pma.rs`) each keep one [`Pma`] and hand it
//! their ports' [`PortTotals`]; a channel adapter's one port is a
//! [`CaPort`], whose totals start from its link's ([`PortTotals::of_link`]).
//!
//! Counters never go back: a Set with a CounterSelect mask moves the
//! selected counters' baseline to their current totals, and what a Get
//! reports is the total since that baseline, saturated at the field's
//! width (IBA: PM counters stop at their largest value).
//!
//! The codec is `ibtca_protocol::mad::pma`.

mod iba_names;
#[cfg(test)]
mod tests;

pub use iba_names::{iba_counters, iba_json};

use std::collections::HashMap;

use ibtca_protocol::mad::pma::{
    counter_select as sel, counter_select_ext as sel_ext, pma_cap, pma_id, ClassPortInfo, PmaMad,
    PortCounters, PortCountersExt, ALL_PORTS, PMA_CLASS_VERSION,
};
use ibtca_protocol::mad::pma::{gmp_packet, pma_of_packet, reply_address};
use ibtca_protocol::mad::{method, MadStatus, BASE_VERSION};
use ibtca_protocol::PacketView;

use ibtca_link::LinkStats;

/// RespTimeValue reported in ClassPortInfo: 4.096 µs × 2^18, about a
/// second (generous: a debug build beside TCG guests).
const RESP_TIME: u8 = 18;

/// A port's counters since the node started, as the node counts them. The
/// IBA counter each feeds is named on the field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortTotals {
    /// Bytes sent, LRH to VCRC (PortXmitData, in words).
    pub xmit_bytes: u64,
    /// Bytes received, LRH to VCRC (PortRcvData, in words).
    pub rcv_bytes: u64,
    /// Packets sent (PortXmitPkts).
    pub xmit_pkts: u64,
    /// Packets received (PortRcvPkts).
    pub rcv_pkts: u64,
    /// Of those sent, to a multicast LID (PortMulticastXmitPkts; the rest
    /// are PortUnicastXmitPkts).
    pub multicast_xmit_pkts: u64,
    /// Of those received, to a multicast LID (PortMulticastRcvPkts).
    pub multicast_rcv_pkts: u64,
    /// Received packets dropped as malformed or with a bad CRC, and link
    /// frames that dropped a connection (PortRcvErrors).
    pub rcv_errors: u64,
    /// Received packets a switch could not forward: no route for the DLID
    /// (PortRcvSwitchRelayErrors).
    pub rcv_switch_relay_errors: u64,
    /// Packets dropped on the way out: link down, queue full, no route
    /// (PortXmitDiscards).
    pub xmit_discards: u64,
    /// Received packets whose P_Key the port does not hold
    /// (PortRcvConstraintErrors).
    pub rcv_constraint_errors: u64,
    /// Packets a switch port did not send, their P_Key not in its table
    /// (PortXmitConstraintErrors).
    pub xmit_constraint_errors: u64,
    /// Packets sent on a VL the peer had given no credit for
    /// (ExcessiveBufferOverrunErrors).
    pub buffer_overruns: u64,
    /// VL15 packets dropped, every management buffer held (VL15Dropped).
    pub vl15_dropped: u64,
    /// Times the link went down after having been up (LinkDownedCounter).
    pub link_downed: u64,
    /// Times the port had packets queued and no credit to send them
    /// (PortXmitWait).
    pub xmit_wait: u64,
}

impl PortTotals {
    /// What a port's link counted, each as the IBA counter it feeds:
    /// PortXmitData/PortRcvData its bytes (LRH to VCRC), PortXmitPkts/
    /// PortRcvPkts its packets, PortRcvErrors its bad frames,
    /// PortXmitDiscards what it dropped (down, full, oversize),
    /// ExcessiveBufferOverrunErrors its credit overruns, VL15Dropped,
    /// LinkDownedCounter its reconnects, PortXmitWait its credit stalls.
    /// The node adds what it counts itself.
    pub fn of_link(l: &LinkStats) -> PortTotals {
        PortTotals {
            xmit_bytes: l.tx_bytes,
            rcv_bytes: l.rx_bytes,
            xmit_pkts: l.tx_packets,
            rcv_pkts: l.rx_packets,
            rcv_errors: l.rx_bad_frames,
            xmit_discards: l.tx_dropped_down + l.tx_dropped_full + l.tx_dropped_oversize,
            buffer_overruns: l.rx_credit_overruns,
            vl15_dropped: l.rx_vl15_dropped,
            link_downed: l.reconnects,
            xmit_wait: l.credit_stalls,
            ..PortTotals::default()
        }
    }

    /// The sum of two ports' totals (PortSelect 0xFF).
    pub fn plus(&self, o: &PortTotals) -> PortTotals {
        PortTotals {
            xmit_bytes: self.xmit_bytes + o.xmit_bytes,
            rcv_bytes: self.rcv_bytes + o.rcv_bytes,
            xmit_pkts: self.xmit_pkts + o.xmit_pkts,
            rcv_pkts: self.rcv_pkts + o.rcv_pkts,
            multicast_xmit_pkts: self.multicast_xmit_pkts + o.multicast_xmit_pkts,
            multicast_rcv_pkts: self.multicast_rcv_pkts + o.multicast_rcv_pkts,
            rcv_errors: self.rcv_errors + o.rcv_errors,
            rcv_switch_relay_errors: self.rcv_switch_relay_errors + o.rcv_switch_relay_errors,
            xmit_discards: self.xmit_discards + o.xmit_discards,
            rcv_constraint_errors: self.rcv_constraint_errors + o.rcv_constraint_errors,
            xmit_constraint_errors: self.xmit_constraint_errors + o.xmit_constraint_errors,
            buffer_overruns: self.buffer_overruns + o.buffer_overruns,
            vl15_dropped: self.vl15_dropped + o.vl15_dropped,
            link_downed: self.link_downed + o.link_downed,
            xmit_wait: self.xmit_wait + o.xmit_wait,
        }
    }

    /// Each field minus the baseline's (a counter never reads below 0).
    fn since(&self, b: &PortTotals) -> PortTotals {
        let d = |now: u64, then: u64| now.saturating_sub(then);
        PortTotals {
            xmit_bytes: d(self.xmit_bytes, b.xmit_bytes),
            rcv_bytes: d(self.rcv_bytes, b.rcv_bytes),
            xmit_pkts: d(self.xmit_pkts, b.xmit_pkts),
            rcv_pkts: d(self.rcv_pkts, b.rcv_pkts),
            multicast_xmit_pkts: d(self.multicast_xmit_pkts, b.multicast_xmit_pkts),
            multicast_rcv_pkts: d(self.multicast_rcv_pkts, b.multicast_rcv_pkts),
            rcv_errors: d(self.rcv_errors, b.rcv_errors),
            rcv_switch_relay_errors: d(self.rcv_switch_relay_errors, b.rcv_switch_relay_errors),
            xmit_discards: d(self.xmit_discards, b.xmit_discards),
            rcv_constraint_errors: d(self.rcv_constraint_errors, b.rcv_constraint_errors),
            xmit_constraint_errors: d(self.xmit_constraint_errors, b.xmit_constraint_errors),
            buffer_overruns: d(self.buffer_overruns, b.buffer_overruns),
            vl15_dropped: d(self.vl15_dropped, b.vl15_dropped),
            link_downed: d(self.link_downed, b.link_downed),
            xmit_wait: d(self.xmit_wait, b.xmit_wait),
        }
    }
}

/// The ports a node's agent reports on and their totals.
pub trait PortSource {
    /// True if `port` is one of the node's ports PortSelect may name.
    fn has_port(&self, port: u8) -> bool;
    /// The port PortSelect `select` (not 0xFF) names, if any.
    fn port_of(&self, select: u8) -> Option<u8> {
        self.has_port(select).then_some(select)
    }
    /// Every port PortSelect 0xFF covers (empty: 0xFF not supported).
    fn all_ports(&self) -> Vec<u8>;
    /// The totals of `port`.
    fn totals(&self, port: u8) -> PortTotals;
}

/// A channel adapter's one port (1) and its totals. A CA has a PMA per
/// port (IBA 16.1.1), and PortSelect names a port of the node: 1, or 0,
/// which no CA port has and which `perfquery LID` sends when no port is
/// given, is the port the agent serves (as a switch's PMA reads its
/// management port 0). PortSelect 0xFF is not supported (no
/// AllPortSelect in ClassPortInfo), so `perfquery -a` reads port 1 alone.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CaPort(pub PortTotals);

impl PortSource for CaPort {
    fn has_port(&self, port: u8) -> bool {
        port == 1
    }

    fn port_of(&self, select: u8) -> Option<u8> {
        matches!(select, 0 | 1).then_some(1)
    }

    fn all_ports(&self) -> Vec<u8> {
        Vec::new()
    }

    fn totals(&self, _port: u8) -> PortTotals {
        self.0
    }
}

/// What a packet to QP1 was to an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PmPacket {
    /// Not a PM MAD, or one for a manager (a response, a trap): the
    /// agent's node hands it on (a guest's QP1) or drops it.
    NotForAgent,
    /// A request the agent served: the packet of its answer (none for a
    /// TrapRepress, or if it could not be built).
    Served(Option<Vec<u8>>),
}

/// Saturates `v` into a counter of `T`'s width.
fn sat<T: TryFrom<u64> + Bounded>(v: u64) -> T {
    T::try_from(v).unwrap_or(T::MAX)
}

/// The largest value of a counter type.
trait Bounded {
    const MAX: Self;
}
impl Bounded for u8 {
    const MAX: u8 = u8::MAX;
}
impl Bounded for u16 {
    const MAX: u16 = u16::MAX;
}
impl Bounded for u32 {
    const MAX: u32 = u32::MAX;
}

/// Moves a baseline's selected fields to the current totals.
type Reset = dyn Fn(&mut PortTotals, &PortTotals);

/// One node's performance management agent: the baselines its counter
/// resets left, per port.
#[derive(Debug, Clone, Default)]
pub struct Pma {
    baselines: HashMap<u8, PortTotals>,
    /// PM MADs answered.
    pub answered: u64,
}

/// True if a PM MAD with `method` is for a performance manager, not for
/// an agent: a response (to `perfquery` or OpenSM's PerfMgr in the node's
/// own guest), a trap or a report.
pub fn for_manager(method: u8) -> bool {
    method & method::RESPONSE != 0 || matches!(method, method::TRAP | method::REPORT)
}

impl Pma {
    /// Serves a packet to QP1 at a node whose LID is `own_lid`: a PM
    /// request is answered from `src` back to its sender's QP.
    pub fn serve_packet(
        &mut self,
        src: &impl PortSource,
        view: &PacketView<'_>,
        own_lid: u16,
    ) -> PmPacket {
        let Ok(mad) = pma_of_packet(view) else {
            return PmPacket::NotForAgent;
        };
        if for_manager(mad.header.method) {
            return PmPacket::NotForAgent;
        }
        let reply = self.answer(src, mad).and_then(|reply| {
            let to = reply_address(view, own_lid);
            gmp_packet(&reply, &to)
                .build()
                .map_err(|e| tracing::debug!(error = %e, "PM answer not built"))
                .ok()
        });
        PmPacket::Served(reply)
    }

    /// Answers one PM request (`None`: a response, trap or other MAD that
    /// gets no answer from an agent).
    pub fn answer(&mut self, src: &impl PortSource, mut mad: PmaMad) -> Option<PmaMad> {
        let h = mad.header;
        if for_manager(h.method) || h.method == method::TRAP_REPRESS {
            return None;
        }
        self.answered += 1;
        if h.base_version != BASE_VERSION || h.class_version != PMA_CLASS_VERSION {
            mad.make_response(MadStatus::BAD_VERSION);
            return Some(mad);
        }
        if !matches!(h.method, method::GET | method::SET) {
            mad.make_response(MadStatus::UNSUPPORTED_METHOD);
            return Some(mad);
        }
        let set = h.method == method::SET;
        let result = match h.attr_id {
            pma_id::CLASS_PORT_INFO if set => Err(MadStatus::UNSUPPORTED_METHOD_ATTR),
            pma_id::CLASS_PORT_INFO => Ok(self.class_port_info(src).encode()),
            pma_id::PORT_COUNTERS => {
                let req = PortCounters::decode(&mad.data);
                self.port_counters(src, req, set).map(|c| c.encode())
            }
            pma_id::PORT_COUNTERS_EXT => {
                let req = PortCountersExt::decode(&mad.data);
                self.port_counters_ext(src, req, set).map(|c| c.encode())
            }
            _ => Err(MadStatus::UNSUPPORTED_METHOD_ATTR),
        };
        let status = match result {
            Ok(data) => {
                mad.data = data;
                MadStatus::OK
            }
            Err(status) => status,
        };
        mad.make_response(status);
        Some(mad)
    }

    fn class_port_info(&self, src: &impl PortSource) -> ClassPortInfo {
        let all = if src.all_ports().is_empty() {
            0
        } else {
            pma_cap::ALL_PORT_SELECT
        };
        ClassPortInfo {
            base_version: BASE_VERSION,
            class_version: PMA_CLASS_VERSION,
            capability_mask: pma_cap::EXT_WIDTH | all,
            capability_mask2: 0,
            resp_time_value: RESP_TIME,
        }
    }

    /// The ports PortSelect names.
    fn selected(src: &impl PortSource, port_select: u8) -> Result<Vec<u8>, MadStatus> {
        let ports = if port_select == ALL_PORTS {
            src.all_ports()
        } else {
            src.port_of(port_select).into_iter().collect()
        };
        if ports.is_empty() {
            return Err(MadStatus::INVALID_ATTR_VALUE);
        }
        Ok(ports)
    }

    /// The counters of `ports` since their baselines, summed; a Set first
    /// moves the baselines of the fields `reset` picks.
    fn read(&mut self, src: &impl PortSource, ports: &[u8], reset: Option<&Reset>) -> PortTotals {
        let mut sum = PortTotals::default();
        for &port in ports {
            let now = src.totals(port);
            let base = self.baselines.entry(port).or_default();
            if let Some(reset) = reset {
                reset(base, &now);
            }
            sum = sum.plus(&now.since(base));
        }
        sum
    }

    fn port_counters(
        &mut self,
        src: &impl PortSource,
        req: PortCounters,
        set: bool,
    ) -> Result<PortCounters, MadStatus> {
        let ports = Self::selected(src, req.port_select)?;
        let mask = req.counter_select;
        let reset = move |b: &mut PortTotals, now: &PortTotals| {
            let pick = |bit: u16, base: &mut u64, now: u64| {
                if mask & bit != 0 {
                    *base = now;
                }
            };
            pick(sel::LINK_DOWNED, &mut b.link_downed, now.link_downed);
            pick(sel::RCV_ERRORS, &mut b.rcv_errors, now.rcv_errors);
            pick(
                sel::RCV_SWITCH_RELAY_ERRORS,
                &mut b.rcv_switch_relay_errors,
                now.rcv_switch_relay_errors,
            );
            pick(sel::XMIT_DISCARDS, &mut b.xmit_discards, now.xmit_discards);
            pick(
                sel::RCV_CONSTRAINT_ERRORS,
                &mut b.rcv_constraint_errors,
                now.rcv_constraint_errors,
            );
            pick(
                sel::XMIT_CONSTRAINT_ERRORS,
                &mut b.xmit_constraint_errors,
                now.xmit_constraint_errors,
            );
            pick(
                sel::BUFFER_OVERRUN,
                &mut b.buffer_overruns,
                now.buffer_overruns,
            );
            pick(sel::VL15_DROPPED, &mut b.vl15_dropped, now.vl15_dropped);
            pick(sel::XMIT_DATA, &mut b.xmit_bytes, now.xmit_bytes);
            pick(sel::RCV_DATA, &mut b.rcv_bytes, now.rcv_bytes);
            pick(sel::XMIT_PKTS, &mut b.xmit_pkts, now.xmit_pkts);
            pick(sel::RCV_PKTS, &mut b.rcv_pkts, now.rcv_pkts);
            // PortXmitWait has no bit of its own here (CounterSelect2):
            // it is reset with PortXmitData.
            pick(sel::XMIT_DATA, &mut b.xmit_wait, now.xmit_wait);
        };
        let t = self.read(src, &ports, set.then_some(&reset as _));
        Ok(PortCounters {
            port_select: req.port_select,
            counter_select: mask,
            link_downed: sat(t.link_downed),
            rcv_errors: sat(t.rcv_errors),
            rcv_switch_relay_errors: sat(t.rcv_switch_relay_errors),
            xmit_discards: sat(t.xmit_discards),
            rcv_constraint_errors: sat(t.rcv_constraint_errors),
            xmit_constraint_errors: sat(t.xmit_constraint_errors),
            buffer_overrun_errors: t.buffer_overruns.min(0xf) as u8,
            vl15_dropped: sat(t.vl15_dropped),
            xmit_data: sat(t.xmit_bytes / 4),
            rcv_data: sat(t.rcv_bytes / 4),
            xmit_pkts: sat(t.xmit_pkts),
            rcv_pkts: sat(t.rcv_pkts),
            xmit_wait: sat(t.xmit_wait),
            ..PortCounters::default()
        })
    }

    fn port_counters_ext(
        &mut self,
        src: &impl PortSource,
        req: PortCountersExt,
        set: bool,
    ) -> Result<PortCountersExt, MadStatus> {
        let ports = Self::selected(src, req.port_select)?;
        let mask = req.counter_select;
        let reset = move |b: &mut PortTotals, now: &PortTotals| {
            let on = |bit: u16| mask & bit != 0;
            if on(sel_ext::XMIT_DATA) {
                b.xmit_bytes = now.xmit_bytes;
            }
            if on(sel_ext::RCV_DATA) {
                b.rcv_bytes = now.rcv_bytes;
            }
            // Unicast counts are packets minus multicast: resetting either
            // resets both halves.
            if on(sel_ext::XMIT_PKTS | sel_ext::UNICAST_XMIT_PKTS | sel_ext::MULTICAST_XMIT_PKTS) {
                b.xmit_pkts = now.xmit_pkts;
                b.multicast_xmit_pkts = now.multicast_xmit_pkts;
            }
            if on(sel_ext::RCV_PKTS | sel_ext::UNICAST_RCV_PKTS | sel_ext::MULTICAST_RCV_PKTS) {
                b.rcv_pkts = now.rcv_pkts;
                b.multicast_rcv_pkts = now.multicast_rcv_pkts;
            }
        };
        let t = self.read(src, &ports, set.then_some(&reset as _));
        Ok(PortCountersExt {
            port_select: req.port_select,
            counter_select: mask,
            xmit_data: t.xmit_bytes / 4,
            rcv_data: t.rcv_bytes / 4,
            xmit_pkts: t.xmit_pkts,
            rcv_pkts: t.rcv_pkts,
            unicast_xmit_pkts: t.xmit_pkts.saturating_sub(t.multicast_xmit_pkts),
            unicast_rcv_pkts: t.rcv_pkts.saturating_sub(t.multicast_rcv_pkts),
            multicast_xmit_pkts: t.multicast_xmit_pkts,
            multicast_rcv_pkts: t.multicast_rcv_pkts,
        })
    }
}
