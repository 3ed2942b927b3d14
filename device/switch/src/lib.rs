//! An IB switch with N ports, each a link (the same Unix-socket framing and
//! `Hello` as a device's port), forwarding by DLID.
//!
//! - [`Lft`] (`lft.rs`): the linear forwarding table, from explicit routes
//!   and from the `Hello` of each directly attached peer.
//! - `forward.rs`: the per-packet work: input check (LRH, PktLen, VCRC,
//!   ICRC), lookup, fresh VCRC for the next hop.
//! - [`PortConfig`] and per-port state (`port.rs`), [`PortStats`]
//!   (`stats.rs`): counters by port, drops by [`DropReason`].
//! - [`Capture`] (`ibtca-agents`' `capture.rs`): pcap/ERF capture per port.
//! - [`control`]: the line-based control socket of a switch process.
//!
//! # Threads
//!
//! Each port is a [`Link`]: its supervisor thread reads the peer's packets
//! and calls the switch's sink, which checks, looks up and queues the packet
//! on the output port's link ([`Link::send`] never blocks); that link's
//! writer thread sends it. There is no switch-wide thread or lock on the
//! data path besides the forwarding table's read lock and the read lock on
//! the port list (taken for writing only to take a port down or up).
//!
//! Drops are counted, never propagated: unknown DLID and bad packets on the
//! input port, full queue and link down on the output port.

#[doc(hidden)]
pub mod collect_wires;
pub mod control;
mod delay;
mod forward;
mod hosted;
mod lft;
mod mft;
mod partition;
mod pma;
mod port;
mod sma;
mod smp;
pub mod spec;
mod stats;
mod trap;
mod wires;

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use ibtca_protocol::encoded;

use ibtca_link::{FaultPlan, Link, LinkConfig, LinkError, LinkEvent, LinkStats, LocalPort, VL15};

pub use hosted::HostedSwitch;
use wires::LinkWires;
pub use wires::Wires;

pub use forward::{check, check_with, Origin};
pub use ibtca_agents::capture::{
    record_bytes, record_bytes_of, Capture, Direction, ERF_TYPE_ATM, ERF_TYPE_INFINIBAND,
    LINKTYPE_ERF,
};
pub use ibtca_agents::sma::{TrapCounts, MAX_TRAP_SENDS};
pub use ibtca_agents::vl_config::SL2VL_IDENTITY;
pub use lft::{Lft, Route, RouteSource, LINEAR_FDB_CAP, MAX_UNICAST_LID};
pub use mft::{is_multicast, Mft};
pub use port::PortConfig;
pub use stats::{DropReason, PortStats};

use ibtca_agents::pma::Pma;
use ibtca_protocol::mad::attr::PortState;
use port::PortSlot;
use sma::SwitchSma;
use smp::SmpCounts;
use trap::Traps;

/// What a switch is.
#[derive(Debug, Clone)]
pub struct SwitchConfig {
    /// Name, for logs.
    pub name: String,
    /// Node GUID, sent in every port's `Hello`.
    pub guid: u64,
    /// The switch's own LID (port 0), sent in `Hello`; 0 for none. Peers
    /// never learn a route from it (a switch is not a destination here).
    pub lid: u16,
    /// Ports 1..=N, in order.
    pub ports: Vec<PortConfig>,
    /// Explicit routes: (LID, port).
    pub routes: Vec<(u16, u8)>,
    /// Link tunables for every port.
    pub link: LinkConfig,
    /// A subnet manager configures the switch: it starts without a LID,
    /// learns no routes from `Hello`s, and its ports are Init until the SM
    /// makes them Active (port 0's agent answers either way).
    pub sm_managed: bool,
}

/// Why a switch cannot start.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// No ports, or more than 254.
    #[error("a switch needs 1 to 254 ports, not {0}")]
    PortCount(usize),
    /// A route names a port the switch does not have.
    #[error("route for LID {lid} names port {port}, but the switch has ports 1..={ports}")]
    RoutePort {
        /// The route's LID.
        lid: u16,
        /// The port it names.
        port: u8,
        /// How many ports there are.
        ports: usize,
    },
    /// A route for LID 0 or a multicast LID.
    #[error("route for LID {0:#x}: only unicast LIDs 1..=0xbfff can be routed")]
    RouteLid(u16),
    /// A port number outside 1..=N.
    #[error("no port {0}")]
    NoPort(u8),
    /// Opening a capture file or a port's socket failed.
    #[error("port {port}: {source}")]
    Io {
        /// The port.
        port: u8,
        /// What failed.
        source: io::Error,
    },
}

/// State shared by the handle and every port's sink.
///
/// Laid out in order from a cache line: what an SMP passing through the
/// switch reads or counts (the ports, the wires, the SMP counts) first, on
/// that line.
#[repr(C, align(64))]
struct Core {
    slots: Vec<PortSlot>,
    /// The ports' wires: links with threads, or an event loop's.
    wires: Arc<dyn Wires>,
    /// SMPs for the switch served or dropped (`smp.rs`).
    smps: SmpCounts,
    name: String,
    guid: u64,
    lid: u16,
    link_config: LinkConfig,
    lft: Lft,
    mft: Mft,
    /// Port 0's subnet management agent.
    sma: Mutex<SwitchSma>,
    /// Port 0's performance management agent.
    pma: Mutex<Pma>,
    /// Port 0's traps to the SM (`trap.rs`).
    traps: Traps,
}

/// A running switch. Stops (and joins every port's threads) on
/// [`Switch::stop`] or drop.
pub struct Switch {
    core: Arc<Core>,
    /// The running links, index = port - 1; `None` while a port is down.
    links: Arc<LinkWires>,
    /// One delay-line thread per port.
    delayers: Vec<JoinHandle<()>>,
    /// The thread that sends and repeats traps.
    trapper: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("name", &self.core.name)
            .field("ports", &self.core.slots.len())
            .finish()
    }
}

impl Switch {
    /// Checks the configuration, opens capture files, sets the explicit
    /// routes and starts every port's link (listen endpoints are bound
    /// before this returns).
    pub fn start(cfg: SwitchConfig) -> Result<Switch, SwitchError> {
        let n = cfg.ports.len();
        let links = Arc::new(LinkWires::new(n));
        let core = Arc::new(Core::new(cfg, Arc::clone(&links) as Arc<dyn Wires>)?);
        let mut switch = Switch {
            core,
            links,
            delayers: Vec::with_capacity(n),
            trapper: None,
        };
        let core = Arc::clone(&switch.core);
        switch.trapper = Some(
            std::thread::Builder::new()
                .name("ibtca-sw-trap".into())
                .spawn(move || {
                    ibtca_sandbox::enter(ibtca_sandbox::Role::SwitchTraps);
                    core.run_traps()
                })
                .map_err(|source| SwitchError::Io { port: 0, source })?,
        );
        for i in 0..n {
            let core = Arc::clone(&switch.core);
            let port = port_number(i);
            let thread = std::thread::Builder::new()
                .name("ibtca-sw-delay".into())
                .spawn(move || {
                    ibtca_sandbox::enter(ibtca_sandbox::Role::SwitchDelay);
                    core.run_delay_line(port)
                })
                .map_err(|source| SwitchError::Io { port, source })?;
            switch.delayers.push(thread);
        }
        for i in 0..n {
            switch.port_up(port_number(i))?;
        }
        tracing::info!(name = %switch.core.name, ports = n, "switch started");
        Ok(switch)
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.core.slots.len()
    }

    /// The forwarding table.
    pub fn lft(&self) -> &Lft {
        &self.core.lft
    }

    /// The multicast forwarding table.
    pub fn mft(&self) -> &Mft {
        &self.core.mft
    }

    /// The switch's LID (port 0's: the configured one, or the SM's).
    pub fn lid(&self) -> u16 {
        self.core.sma().lid()
    }

    /// The switch's name (its NodeDescription).
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The switch's node GUID.
    pub fn guid(&self) -> u64 {
        self.core.guid
    }

    /// Port 0's MasterSMLID: the LID of the SM that manages the switch (0
    /// until one set it).
    pub fn sm_lid(&self) -> u16 {
        self.core.sma().sm_lid()
    }

    /// `port`'s state as its PortInfo says (Down, Init, Armed, Active).
    pub fn port_state(&self, port: u8) -> PortState {
        self.core.sma().port_state(port)
    }

    /// `port`'s counters as its PMA reports them, since the switch
    /// started.
    pub fn port_totals(&self, port: u8) -> ibtca_agents::pma::PortTotals {
        ibtca_agents::pma::PortSource::totals(self.core.as_ref(), port)
    }

    /// Port 0's agent's counters: SMPs served, dropped, M_Key violations.
    pub fn sma_counts(&self) -> (u64, u64, u64) {
        let (served, dropped) = self.core.smps.get();
        (served, dropped, self.core.sma().m_key_violations)
    }

    /// Port 0's trap counters: traps sent, repressed, given up.
    pub fn trap_counts(&self) -> TrapCounts {
        self.core.traps.counts()
    }

    /// Counters of `port` (1-based); `None` if there is no such port.
    pub fn port_stats(&self, port: u8) -> Option<PortStats> {
        self.core.slot(port).map(PortSlot::stats)
    }

    /// Counters of every port, port 1 first.
    pub fn all_stats(&self) -> Vec<PortStats> {
        self.core.slots.iter().map(PortSlot::stats).collect()
    }

    /// The link counters of `port`, while its link runs.
    pub fn link_stats(&self, port: u8) -> Option<LinkStats> {
        self.links.link_stats(port)
    }

    /// True while `port`'s link is up (its peer's `Hello` came).
    pub fn is_port_up(&self, port: u8) -> bool {
        self.core.slot(port).is_some_and(PortSlot::is_up)
    }

    /// The peer last seen on `port`.
    pub fn peer(&self, port: u8) -> Option<LocalPort> {
        self.core.slot(port).and_then(PortSlot::peer)
    }

    /// Replaces the fault plan of what `port` sends.
    pub fn set_faults(&self, port: u8, plan: FaultPlan) -> Result<(), SwitchError> {
        let links = self.links.links();
        let link = usize::from(port)
            .checked_sub(1)
            .and_then(|i| links.get(i))
            .ok_or(SwitchError::NoPort(port))?;
        if let Some(link) = link {
            link.set_faults(plan);
        }
        Ok(())
    }

    /// Sets how long packets wait before `port` sends them (zero: none).
    pub fn set_delay(&self, port: u8, delay: Duration) -> Result<(), SwitchError> {
        let slot = self.core.slot(port).ok_or(SwitchError::NoPort(port))?;
        slot.set_delay(delay);
        Ok(())
    }

    /// Takes `port`'s link down: the connection is cut (the peer sees its
    /// link go down) and, on a listen endpoint, the socket file removed.
    /// Packets routed to the port are dropped as "link down".
    pub fn port_down(&self, port: u8) -> Result<(), SwitchError> {
        self.core.slot(port).ok_or(SwitchError::NoPort(port))?;
        let link = self
            .links
            .links_mut()
            .get_mut(usize::from(port).wrapping_sub(1))
            .and_then(Option::take);
        if let Some(link) = link {
            // Outside the lock: stopping joins the port's reader, which may
            // be waiting for the read lock in the sink.
            link.stop();
            tracing::info!(name = %self.core.name, port, "port taken down");
        }
        Ok(())
    }

    /// Starts `port`'s link again (a no-op if it runs).
    pub fn port_up(&self, port: u8) -> Result<(), SwitchError> {
        let slot = self.core.slot(port).ok_or(SwitchError::NoPort(port))?;
        let index = usize::from(port).wrapping_sub(1);
        if self.links.links().get(index).is_some_and(Option::is_some) {
            return Ok(());
        }
        let local = LocalPort {
            node_guid: self.core.guid,
            port,
            lid: self.core.lid,
        };
        let core = Arc::clone(&self.core);
        let done_core = Arc::clone(&self.core);
        let mut config = self.core.link_config.clone();
        // Input buffers are freed when their packet leaves the switch.
        if let Some(flow) = config.flow_control.as_mut() {
            flow.auto_return = false;
        }
        let link = Link::start_full(
            slot.config.endpoint.clone(),
            local,
            config,
            move |ev| core.on_event(port, ev),
            Some(Arc::new(move |tag| done_core.credit_done(tag))),
        )
        .map_err(|source| SwitchError::Io { port, source })?;
        // The SM's VLArbitrationTable, if it set one.
        link.set_low_priority(&slot.low_priority());
        let high = slot.high_priority();
        if !high.entries.is_empty() {
            link.set_high_priority(&high);
        }
        if !slot.config.faults.is_empty() {
            link.set_faults(slot.config.faults.clone());
        }
        if let Some(s) = self.links.links_mut().get_mut(index) {
            *s = Some(link);
        }
        Ok(())
    }

    /// One log line per port with its counters.
    pub fn log_stats(&self) {
        for (i, s) in self.all_stats().iter().enumerate() {
            let port = port_number(i);
            tracing::info!(
                switch = %self.core.name,
                port,
                up = self.is_port_up(port),
                rx = s.rx_packets,
                rx_bytes = s.rx_bytes,
                tx = s.tx_packets,
                tx_bytes = s.tx_bytes,
                unknown_lid = s.drop_unknown_lid,
                crc_errors = s.drop_crc_error,
                malformed = s.drop_malformed,
                queue_full = s.drop_queue_full,
                link_down = s.drop_link_down,
                port_inactive = s.drop_port_inactive,
                pkey_inbound = s.drop_pkey_inbound,
                pkey_outbound = s.drop_pkey_outbound,
                credit_stalls = self.link_stats(port).map_or(0, |l| l.credit_stalls),
                "port counters"
            );
        }
    }

    /// Stops every port and joins their threads.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        for slot in &self.core.slots {
            for (_, tag) in slot.delay_line.stop() {
                self.core.credit_done(tag);
            }
        }
        self.core.traps.stop();
        if self.trapper.take().is_some_and(|t| t.join().is_err()) {
            tracing::error!("switch trap thread panicked");
        }
        for t in self.delayers.drain(..) {
            if t.join().is_err() {
                tracing::error!("switch delay thread panicked");
            }
        }
        let links: Vec<Link> = self.links.links_mut().drain(..).flatten().collect();
        for link in links {
            link.stop();
        }
        tracing::info!(name = %self.core.name, "switch stopped");
    }
}

fn port_number(index: usize) -> u8 {
    u8::try_from(index + 1).unwrap_or(u8::MAX)
}

impl Core {
    fn slot(&self, port: u8) -> Option<&PortSlot> {
        self.slots.get(usize::from(port).checked_sub(1)?)
    }

    fn sma(&self) -> MutexGuard<'_, SwitchSma> {
        self.sma.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pma(&self) -> MutexGuard<'_, Pma> {
        self.pma.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sink of `port`'s link, on that link's reader thread.
    fn on_event(&self, port: u8, ev: LinkEvent) {
        let Some(slot) = self.slot(port) else {
            return;
        };
        match ev {
            LinkEvent::Packet(packet) => self.forward(port, slot, packet, Origin::Wire),
            LinkEvent::Up { peer } => {
                slot.set_peer(peer);
                let (managed, trap) = {
                    let mut sma = self.sma();
                    let changed = sma.link_changed(port, true);
                    sma.gate_port(port, &self.slots);
                    (sma.managed(), changed.then(|| sma.trap_target()))
                };
                if !managed && self.lft.learn(peer.lid, port) {
                    tracing::info!(switch = %self.name, port, lid = peer.lid, "route learned");
                }
                // Up only now: whoever sees the port up sees its peer, its
                // state in PortInfo and the route learned from its Hello,
                // and so does the SM the trap tells.
                slot.set_up(true);
                if let Some(target) = trap {
                    self.traps.port_state_changed(target);
                }
                tracing::info!(
                    switch = %self.name,
                    port,
                    peer_guid = format_args!("{:#018x}", peer.node_guid),
                    peer_lid = peer.lid,
                    "port up"
                );
            }
            LinkEvent::Down { reason } => {
                slot.set_up(false);
                let mut sma = self.sma();
                let changed = sma.link_changed(port, false);
                sma.gate_port(port, &self.slots);
                let target = sma.trap_target();
                drop(sma);
                if changed {
                    self.traps.port_state_changed(target);
                }
                tracing::info!(switch = %self.name, port, %reason, "port down");
            }
        }
    }

    /// A packet from `origin` in on `port` (the sink of its link's packets
    /// is [`Self::on_event`]: [`Origin::Wire`]).
    fn on_packet(&self, port: u8, packet: Vec<u8>, origin: Origin) {
        if let Some(slot) = self.slot(port) {
            self.forward(port, slot, packet, origin);
        }
    }

    fn forward(&self, in_port: u8, in_slot: &PortSlot, mut packet: Vec<u8>, origin: Origin) {
        in_slot.counters.rx(packet.len());
        if let Some(c) = &in_slot.capture {
            c.record(Direction::Rx, &packet);
        }
        // The input buffer this packet holds, freed when it leaves.
        let in_vl = encoded::vl(&packet).unwrap_or(0);
        let free_input = || self.return_credit(in_port, in_vl, None);
        let crcs = origin.crcs(&packet);
        let dlid = match forward::check_with(&packet, &crcs) {
            Ok(dlid) => dlid,
            Err(reason) => {
                tracing::debug!(switch = %self.name, port = in_port, ?reason, "packet dropped on input");
                in_slot.counters.dropped(reason);
                free_input();
                return;
            }
        };
        if in_vl == VL15 && self.is_for_sma(dlid) {
            let answer = self.serve_smp(in_port, packet, &crcs);
            self.send_answer(in_port, in_vl, answer);
            return;
        }
        if in_vl != VL15 && self.is_own_lid(dlid) {
            let answer = self.serve_gmp(&packet);
            self.send_answer(in_port, in_vl, answer);
            return;
        }
        if in_vl != VL15 && is_multicast(dlid) {
            self.forward_multicast(in_port, in_slot, in_vl, dlid, packet);
            return;
        }
        let Some(out_port) = self.lft.lookup(dlid) else {
            tracing::debug!(switch = %self.name, port = in_port, dlid, "no route; packet dropped");
            in_slot.counters.dropped(DropReason::UnknownLid);
            free_input();
            return;
        };
        let Some(out_slot) = self.slot(out_port) else {
            in_slot.counters.dropped(DropReason::LinkDown);
            free_input();
            return;
        };
        if in_vl != VL15 && !self.partitions_admit(in_slot, out_slot, &packet) {
            free_input();
            return;
        }
        if in_vl != VL15 && !(in_slot.is_active() && out_slot.is_active()) {
            let counted = if in_slot.is_active() {
                out_slot
            } else {
                in_slot
            };
            counted.counters.dropped(DropReason::PortInactive);
            free_input();
            return;
        }
        let sl = encoded::sl(&packet).unwrap_or(0);
        // Subnet management stays on VL15 whatever its SL.
        let vl = if in_vl == VL15 { VL15 } else { out_slot.vl(sl) };
        encoded::set_vl(&mut packet, vl);
        // The VCRC is the link's: stamped for a wire, not for a node in
        // this process (`Wires::in_process`), whatever the packet's origin.
        if !self.wires.in_process(out_port) {
            encoded::restamp_vcrc(&mut packet);
        }
        let tag = self.credit_tag(in_port, in_vl);
        let delay = out_slot.delay();
        if !delay.is_zero() {
            if let Err((_, tag)) = out_slot.delay_line.push((packet, tag), delay) {
                out_slot.counters.dropped(DropReason::QueueFull);
                self.credit_done(tag);
            }
            return;
        }
        self.send(out_port, out_slot, packet, tag);
    }

    /// Sends port 0's answer to a packet that came in on `in_port` (its
    /// input buffer freed when the answer leaves), or frees the buffer if
    /// there is none.
    fn send_answer(&self, in_port: u8, in_vl: u8, answer: Option<(u8, Vec<u8>)>) {
        let tag = self.credit_tag(in_port, in_vl);
        match answer.and_then(|(port, reply)| Some((port, self.slot(port)?, reply))) {
            Some((port, slot, reply)) => {
                self.send(port, slot, reply, tag);
            }
            None => self.credit_done(tag),
        }
    }

    /// The delay-line thread of `port`: sends each held packet when due.
    fn run_delay_line(&self, port: u8) {
        let Some(slot) = self.slot(port) else {
            return;
        };
        while let Some((packet, tag)) = slot.delay_line.next_due() {
            self.send(port, slot, packet, tag);
        }
    }

    /// Queues `packet` on `out_port`'s link; counts and captures. The input
    /// buffer named by `tag` is freed when the link has sent the packet, or
    /// now if it cannot take it. True if the link took it.
    fn send(&self, out_port: u8, out_slot: &PortSlot, packet: Vec<u8>, tag: u64) -> bool {
        let len = packet.len();
        let send = |packet: Vec<u8>| self.wires.send_tagged(out_port, packet, tag);
        let result = match &out_slot.capture {
            // Recorded before it can reach the peer (capture.rs).
            Some(c) => {
                let copy = packet.clone();
                let mut result = Err(LinkError::Down);
                c.record_sent(&copy, || {
                    result = send(packet);
                    result.is_ok()
                });
                result
            }
            None => send(packet),
        };
        match result {
            Ok(()) => {
                out_slot.counters.tx(len);
                return true;
            }
            Err(LinkError::QueueFull) => out_slot.counters.dropped(DropReason::QueueFull),
            Err(LinkError::Down | LinkError::TooLarge { .. }) => {
                out_slot.counters.dropped(DropReason::LinkDown)
            }
        }
        self.credit_done(tag);
        false
    }

    /// A tag naming an input buffer: input port, its VL, and the input
    /// link's connection (credits owed to an earlier connection are void).
    fn credit_tag(&self, in_port: u8, in_vl: u8) -> u64 {
        let generation = self.wires.generation(in_port);
        (u64::from(in_port) << 56) | (u64::from(in_vl) << 48) | (generation & 0xffff_ffff_ffff)
    }

    /// The packet of `tag` has left the switch (or was dropped): free its
    /// input buffer.
    fn credit_done(&self, tag: u64) {
        let in_port = (tag >> 56) as u8;
        let in_vl = ((tag >> 48) & 0xff) as u8;
        self.return_credit(in_port, in_vl, Some(tag & 0xffff_ffff_ffff));
    }

    /// Returns one credit of `vl` to the peer of `in_port`, if the link is
    /// still on the connection `generation` (when given).
    fn return_credit(&self, in_port: u8, vl: u8, generation: Option<u64>) {
        self.wires.return_credit(in_port, vl, generation);
    }
}
