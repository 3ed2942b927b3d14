//! The engine's side of the device's subnet management agent: packets to
//! QP0 go to the [`DeviceSma`], its responses into the outbox, and what a
//! PortInfo Set changed (the LID, the port state) into the engine, the
//! verbs' port attributes and BAR0.

use ibtca_protocol::mad::attr::PortState as IbPortState;
use ibtca_protocol::mad::{smp_packet, Smp, SmpRoute, MAD_LEN, PERMISSIVE_LID};
use ibtca_protocol::PacketView;

use super::transport_query::TransportQuery;
use super::Engine;
use crate::dma::GuestMemory;
use crate::regs;
use crate::sma::DeviceSma;
use crate::verbs::abi::{CmdMad, CmdPortCaps, CMD_SET_PORT_CAPS, CMD_SMA_MAD};
use crate::verbs::commands::{decode, EngineCommands, Params, Reply};
use crate::verbs::VerbsError;

/// IBTCA_PORT_* of an IBA port state.
fn regs_state(state: IbPortState) -> u32 {
    match state {
        IbPortState::Init => regs::PORT_INIT,
        IbPortState::Armed => regs::PORT_ARMED,
        IbPortState::Active => regs::PORT_ACTIVE,
        IbPortState::Down | IbPortState::NoChange => regs::PORT_DOWN,
    }
}

impl Engine {
    /// Replaces the port's agent (the instance's NodeDescription, and
    /// whether an SM manages the port), keeping the link state.
    pub fn set_sma(&mut self, sma: DeviceSma) {
        self.agents.set_sma(sma);
        self.apply_sma();
        self.verbs.port.pkey = self.agents.pkey_at(0);
    }

    /// The port's agent (tests, counters).
    pub fn sma(&self) -> &DeviceSma {
        &self.agents.sma
    }

    /// The link came up or went down.
    pub(super) fn link_changed(&mut self, up: bool) {
        if !up {
            // Not the agent's business: with no link there is no port.
            self.agents.sma.link_changed(false);
            self.port_changed(regs::PORT_DOWN);
            return;
        }
        self.agents.sma.link_changed(true);
        self.apply_sma();
    }

    /// A packet to QP0: the agent's, or the SM's in the guest when the
    /// agent leaves it for the SM.
    pub(super) fn receive_smp(&mut self, view: &PacketView<'_>) {
        let for_sm = self.agents.sma.stats().for_sm;
        let outcome = self.agents.sma.on_packet(view);
        if let Some(reply) = outcome.reply {
            self.outbox.packets.push(reply);
        }
        if outcome.port_changed {
            self.apply_sma();
        }
        self.announce_pkey_change();
        if outcome.arbitration_changed {
            let (low, high) = (
                self.agents.sma.low_priority(),
                self.agents.sma.high_priority(),
            );
            self.outbox.link.set_arbitration(&low, &high);
        }
        if self.agents.sma.stats().for_sm != for_sm {
            self.smp_for_sm(view);
        }
        // A TrapRepress, maybe.
        self.agents.show_traps();
    }

    /// The command queue's doorbell: runs the new commands (SMA_MAD by the
    /// agent, the rest by the verbs), then starts, stops or flushes the
    /// QPs they changed.
    pub(super) fn run_commands(&mut self, pi: u32) {
        self.cmdq.doorbell(pi);
        let mut agent = AgentCommands::new(&mut self.agents.sma);
        let mut commands = TransportQuery::new(&mut agent, &self.data.rc);
        let vectors = self
            .cmdq
            .process_with(&self.mem, &mut self.verbs, &mut commands);
        if agent.port_changed {
            self.apply_sma();
        }
        self.announce_pkey_change();
        // SET_PORT_CAPS (IsSM) shows in the next QUERY_PORT.
        self.verbs.port.cap_mask = self.agents.sma.capability_mask();
        for v in vectors {
            let _ = self.msix.trigger(u32::from(v));
        }
        self.sync_qps();
    }

    /// Takes the agent's LID, port state and capability mask as the
    /// device's.
    fn apply_sma(&mut self) {
        self.verbs.port.cap_mask = self.agents.sma.capability_mask();
        let lid = self.agents.sma.lid();
        if lid != self.agents.port.lid {
            tracing::info!(
                old = self.agents.port.lid,
                lid,
                "port LID set by the subnet manager"
            );
            self.agents.port.lid = lid;
            self.verbs.port.lid = lid;
            self.outbox.own_lid = lid;
            self.agents.port_state.set_sm_lid(lid);
            // An Active port's new LID is an event (the guest's
            // IB_EVENT_LID_CHANGE); before Active, Active itself is.
            if self.agents.port.state == regs::PORT_ACTIVE {
                self.agents
                    .port_state
                    .signal(regs::EVENT_PORT_CHANGE, &self.msix);
            }
        }
        let (sm_lid, lmc) = self.agents.sma.sm_lid_and_lmc();
        if (sm_lid, lmc) != (self.agents.port.sm_lid, self.agents.port.lmc) {
            tracing::info!(sm_lid, lmc, "subnet manager LID set");
            (self.agents.port.sm_lid, self.agents.port.lmc) = (sm_lid, lmc);
            (self.verbs.port.sm_lid, self.verbs.port.lmc) = (sm_lid, lmc);
        }
        let state = regs_state(self.agents.sma.state());
        if state != self.agents.port.state {
            tracing::info!(state, "port state");
            self.port_changed(state);
        }
    }
}

/// The port agent's commands: SMA_MAD, an SMP from the port's own SM (the
/// driver's `process_mad`) to the port's agent, as a packet from the port
/// itself, the agent's answer back into guest memory; SET_PORT_CAPS, the
/// host's capability bits (IsSM).
struct AgentCommands<'a> {
    sma: &'a mut DeviceSma,
    /// Whether an SMP changed the port's LID or state.
    port_changed: bool,
}

impl<'a> AgentCommands<'a> {
    fn new(sma: &'a mut DeviceSma) -> Self {
        AgentCommands {
            sma,
            port_changed: false,
        }
    }

    fn sma_mad(&mut self, mem: &GuestMemory, raw: &Params) -> Result<Reply, VerbsError> {
        let c: CmdMad = decode(raw);
        if c.rsvd != [0; 32] {
            return Err(VerbsError::Invalid);
        }
        let mut mad = [0u8; MAD_LEN];
        mem.read(c.mad.to_native(), &mut mad)
            .map_err(|_| VerbsError::Fault)?;
        let mut smp = Smp::parse(&mad).map_err(|_| VerbsError::Invalid)?;
        // A directed SMP of no hops is for this port (IBA C14-9:3 with a
        // hop count of 0): the agent sees it as the end of a one-hop path,
        // and the answer goes back with the hop count it came with.
        let local_dr = smp.route == SmpRoute::Directed && smp.hop_cnt == 0 && !smp.direction;
        if local_dr {
            (smp.hop_cnt, smp.hop_ptr, smp.initial_path[1]) = (1, 1, 1);
        }
        let lid = self.sma.lid();
        let dlid = match smp.route {
            SmpRoute::Lid => lid,
            SmpRoute::Directed => PERMISSIVE_LID,
        };
        let packet = smp_packet(&smp, lid, dlid)
            .build()
            .map_err(|_| VerbsError::Invalid)?;
        let view = PacketView::parse(&packet).map_err(|_| VerbsError::Invalid)?;
        let outcome = self.sma.on_packet(&view);
        self.port_changed |= outcome.port_changed;
        let Some(reply) = outcome.reply else {
            return Ok((0, 0).into());
        };
        let view = PacketView::parse(&reply).map_err(|_| VerbsError::Invalid)?;
        let mut answer = Smp::parse(view.payload).map_err(|_| VerbsError::Invalid)?;
        if local_dr {
            (answer.hop_cnt, answer.hop_ptr) = (0, 0);
        }
        mem.write(c.reply.to_native(), &answer.to_bytes())
            .map_err(|_| VerbsError::Fault)?;
        Ok((1, 0).into())
    }
}

impl EngineCommands for AgentCommands<'_> {
    fn run(
        &mut self,
        mem: &GuestMemory,
        opcode: u8,
        raw: &Params,
    ) -> Option<Result<Reply, VerbsError>> {
        match opcode {
            CMD_SMA_MAD => Some(self.sma_mad(mem, raw)),
            CMD_SET_PORT_CAPS => {
                let c: CmdPortCaps = decode(raw);
                Some(if c.rsvd == [0; 40] {
                    let caps = self
                        .sma
                        .set_host_caps(c.set.to_native(), c.clear.to_native());
                    Ok((caps, 0).into())
                } else {
                    Err(VerbsError::Invalid)
                })
            }
            _ => None,
        }
    }
}
