//! The switch's core built from its configuration, and [`HostedSwitch`]:
//! that core without threads of its own, for an owner that carries every
//! port itself (an event loop hosting many switches, `ibtca-hive`).
//!
//! A hosted switch forwards, answers SMPs and PM MADs and keeps its
//! counters exactly as a [`Switch`](super::Switch) does (the same core).
//! It has no delay lines (a port's `delay` is ignored). It sends trap 128
//! on a port change as a switch process does, but on its owner's clock:
//! the owner sends what is due ([`HostedSwitch::send_due_traps`]) at
//! [`HostedSwitch::next_trap_deadline`]. Only a link event (`Up`, `Down`)
//! raises a trap: a packet, at most, represses the outstanding one, so
//! the deadline can appear only after [`HostedSwitch::on_event`] with a
//! link event.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use ibtca_agents::capture::Capture;
use ibtca_agents::pma::{Pma, PortTotals};
use ibtca_agents::sma::TrapCounts;
use ibtca_link::LinkEvent;
use ibtca_protocol::mad::attr::PortState;

use super::port::PortSlot;
use super::sma::SwitchSma;
use super::smp::SmpCounts;
use super::trap::Traps;
use super::wires::Wires;
use super::{
    port_number, Core, Lft, Mft, Origin, PortStats, SwitchConfig, SwitchError, MAX_UNICAST_LID,
};

impl Core {
    /// Checks `cfg`, opens capture files and sets the explicit routes.
    pub(super) fn new(cfg: SwitchConfig, wires: Arc<dyn Wires>) -> Result<Core, SwitchError> {
        let n = cfg.ports.len();
        if n == 0 || n > 254 {
            return Err(SwitchError::PortCount(n));
        }
        let lft = Lft::new();
        for &(lid, port) in &cfg.routes {
            if lid == 0 || lid > MAX_UNICAST_LID {
                return Err(SwitchError::RouteLid(lid));
            }
            if port == 0 || usize::from(port) > n {
                return Err(SwitchError::RoutePort {
                    lid,
                    port,
                    ports: n,
                });
            }
            lft.set_static(lid, port);
        }
        let mut slots = Vec::with_capacity(n);
        for (i, pc) in cfg.ports.into_iter().enumerate() {
            let capture = match &pc.capture {
                Some(path) => Some(Capture::create(path).map_err(|source| SwitchError::Io {
                    port: port_number(i),
                    source,
                })?),
                None => None,
            };
            slots.push(PortSlot::new(pc, capture));
        }
        let lid = if cfg.sm_managed { 0 } else { cfg.lid };
        let sma = SwitchSma::new(cfg.guid, &cfg.name, lid, &slots, cfg.sm_managed);
        sma.gate_ports(&slots);
        Ok(Core {
            smps: SmpCounts::default(),
            sma: Mutex::new(sma),
            pma: Mutex::new(Pma::default()),
            traps: Traps::default(),
            mft: Mft::default(),
            name: cfg.name,
            guid: cfg.guid,
            lid,
            link_config: cfg.link,
            lft,
            slots,
            wires,
        })
    }
}

/// A switch whose ports its owner carries: events in through
/// [`HostedSwitch::on_event`], packets out through the owner's [`Wires`].
pub struct HostedSwitch {
    core: Core,
}

impl std::fmt::Debug for HostedSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostedSwitch")
            .field("name", &self.core.name)
            .field("ports", &self.core.slots.len())
            .finish()
    }
}

impl HostedSwitch {
    /// A switch of `cfg` (its ports' endpoints, link tunables and delays
    /// are not used) sending through `wires`.
    pub fn new(cfg: SwitchConfig, wires: Arc<dyn Wires>) -> Result<Self, SwitchError> {
        Ok(HostedSwitch {
            core: Core::new(cfg, wires)?,
        })
    }

    /// An event of `port`'s wire: the peer's `Hello` (up), the wire gone
    /// (down), or one packet from the peer, checked in full
    /// ([`Origin::Wire`]).
    pub fn on_event(&self, port: u8, ev: LinkEvent) {
        self.core.on_event(port, ev);
    }

    /// A packet from the peer of `port` that this process built (a node
    /// the owner hosts too sent it, or passed it on after its own input
    /// check): handled as [`Self::on_event`] handles one, but its CRCs are
    /// taken as right, not computed ([`Origin::Process`]). Never for bytes
    /// read from a socket: those go to [`Self::on_event`].
    pub fn on_built_packet(&self, port: u8, packet: Vec<u8>) {
        self.core.on_packet(port, packet, Origin::Process);
    }

    /// A directed SMP built in this process in on `port` that the switch
    /// only passes on, out of a port whose wires take it at once
    /// ([`Wires::passes_at_once`]) to a node in this process: takes its
    /// step in the packet, counts it as [`Self::on_built_packet`] would,
    /// and returns the port it leaves by, for the owner to carry it on
    /// (not through the wires). `None` for every other packet, left as
    /// it came: the owner hands it to [`Self::on_built_packet`]. An owner
    /// carrying a directed SMP along its path so goes through the hosted
    /// switches of its path in one call, with no turn of its queue and
    /// no send per switch.
    pub fn pass_directed(&self, port: u8, packet: &mut [u8]) -> Option<u8> {
        self.core.pass_directed(port, packet)
    }

    /// The packet named by `tag` (given to [`Wires::send_tagged`]) left
    /// or was dropped: its input buffer is free.
    pub fn credit_done(&self, tag: u64) {
        self.core.credit_done(tag);
    }

    /// Number of ports.
    pub fn ports(&self) -> usize {
        self.core.slots.len()
    }

    /// The switch's name (its NodeDescription).
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The switch's node GUID.
    pub fn guid(&self) -> u64 {
        self.core.guid
    }

    /// The LID sent in each port's `Hello` (0 when SM-managed).
    pub fn hello_lid(&self) -> u16 {
        self.core.lid
    }

    /// The switch's LID (port 0's: the configured one, or the SM's).
    pub fn lid(&self) -> u16 {
        self.core.sma().lid()
    }

    /// The forwarding table.
    pub fn lft(&self) -> &Lft {
        &self.core.lft
    }

    /// `port`'s state as its PortInfo says.
    pub fn port_state(&self, port: u8) -> PortState {
        self.core.sma().port_state(port)
    }

    /// Counters of `port` (1-based).
    pub fn port_stats(&self, port: u8) -> Option<PortStats> {
        self.core.slot(port).map(PortSlot::stats)
    }
    /// `port`'s counters as its PMA reports them (the IBA names of
    /// `ibtca_agents::pma::iba_json`).
    pub fn port_totals(&self, port: u8) -> PortTotals {
        ibtca_agents::pma::PortSource::totals(&self.core, port)
    }

    /// True while `port`'s link is up.
    pub fn is_port_up(&self, port: u8) -> bool {
        self.core.slot(port).is_some_and(PortSlot::is_up)
    }

    /// The SM's LID, as port 0's PortInfo says (0 before the SM set it).
    pub fn sm_lid(&self) -> u16 {
        self.core.sma().sm_lid()
    }

    /// When the outstanding trap is next due (`None`: none is).
    pub fn next_trap_deadline(&self) -> Option<Instant> {
        self.core.traps.next_deadline()
    }

    /// Sends, through the owner's wires, every trap due at `now`.
    pub fn send_due_traps(&self, now: Instant) {
        self.core.send_due_traps(now);
    }

    /// Port 0's agent's counters: SMPs served, dropped, M_Key violations.
    pub fn sma_counts(&self) -> (u64, u64, u64) {
        let (served, dropped) = self.core.smps.get();
        (served, dropped, self.core.sma().m_key_violations)
    }

    /// Port 0's trap counters.
    pub fn trap_counts(&self) -> TrapCounts {
        self.core.traps.counts()
    }
}
