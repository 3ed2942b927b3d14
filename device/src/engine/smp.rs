//! The engine's side of the device's subnet management agent: packets to
//! QP0 go to the [`DeviceSma`], its responses into the outbox, and what a
//! PortInfo Set changed (the LID, the port state) into the engine, the
//! verbs' port attributes and BAR0.

use ibtca_protocol::mad::attr::PortState as IbPortState;
use ibtca_protocol::PacketView;

use super::Engine;
use crate::regs;
use crate::sma::DeviceSma;
use crate::verbs::PortAttrs;

/// NodeDescription of a device whose instance names none.
pub const DEFAULT_NODE_DESCRIPTION: &str = "ibtca device";

/// The agent of a device with these port attributes and no SM (the port
/// is Active with its configured LID while it is up).
pub(super) fn default_sma(port: &PortAttrs) -> DeviceSma {
    let mut sma = DeviceSma::new(
        port.node_guid,
        port.guid,
        DEFAULT_NODE_DESCRIPTION,
        port.lid,
        port.data_vls,
        false,
    );
    sma.link_changed(port.state != regs::PORT_DOWN);
    sma
}

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
    pub fn set_sma(&mut self, mut sma: DeviceSma) {
        sma.link_changed(self.port.state != regs::PORT_DOWN);
        self.sma = sma;
        self.apply_sma();
    }

    /// The port's agent (tests, counters).
    pub fn sma(&self) -> &DeviceSma {
        &self.sma
    }

    /// The link came up or went down.
    pub(super) fn link_changed(&mut self, up: bool) {
        if !up {
            // Not the agent's business: with no link there is no port.
            self.sma.link_changed(false);
            self.port_changed(regs::PORT_DOWN);
            return;
        }
        self.sma.link_changed(true);
        self.apply_sma();
    }

    /// False while an SM-managed port is in Init: IBA drops data packets
    /// there (an Armed port takes them, an Active one sends too).
    pub(super) fn port_takes_data(&self) -> bool {
        !(self.sma.managed() && self.sma.state() == IbPortState::Init)
    }

    /// A packet to QP0.
    pub(super) fn receive_smp(&mut self, view: &PacketView<'_>) {
        let outcome = self.sma.on_packet(view);
        if let Some(reply) = outcome.reply {
            self.outbox.packets.push(reply);
        }
        if outcome.port_changed {
            self.apply_sma();
        }
    }

    /// Takes the agent's LID and port state as the device's.
    fn apply_sma(&mut self) {
        let lid = self.sma.lid();
        if lid != self.port.lid {
            tracing::info!(
                old = self.port.lid,
                lid,
                "port LID set by the subnet manager"
            );
            self.port.lid = lid;
            self.verbs.port.lid = lid;
            self.outbox.own_lid = lid;
            self.port_state.set_sm_lid(lid);
        }
        let state = regs_state(self.sma.state());
        if state != self.port.state {
            tracing::info!(state, "port state");
            self.port_changed(state);
        }
    }
}
