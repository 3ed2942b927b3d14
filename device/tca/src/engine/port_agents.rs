//! The port's agents and what they show: the subnet management agent
//! (QP0), the performance management agent (PM MADs to QP1), the port's
//! attributes as QUERY_PORT reports them, and the port state and LID BAR0
//! shows (shared with the vfio-user thread). What the agents' packets and
//! commands change elsewhere in the engine is `smp.rs`'s, `pma.rs`'s and
//! `partition.rs`'s.

use std::sync::Arc;
use std::time::Instant;

use ibtca_protocol::mad::attr::PortState as IbPortState;

use super::port_state::PortState;
use crate::pci::msix::Msix;
use crate::pma::Pma;
use crate::regs;
use crate::sma::DeviceSma;
use crate::verbs::PortAttrs;

/// NodeDescription of a device whose instance names none.
pub const DEFAULT_NODE_DESCRIPTION: &str = "ibtca device";

/// The port's agents and state.
pub(super) struct PortAgents {
    /// The port's subnet management agent (QP0).
    pub(super) sma: DeviceSma,
    /// The port's performance management agent (PM MADs to QP1).
    pub(super) pma: Pma,
    /// The port's attributes (its LID, state and SM as the agent set them).
    pub(super) port: PortAttrs,
    /// The port state and LID BAR0 shows.
    pub(super) port_state: Arc<PortState>,
}

/// The agent of a device with these port attributes and no SM (the port
/// is Active with its configured LID while it is up).
fn default_sma(port: &PortAttrs) -> DeviceSma {
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

impl PortAgents {
    /// The agents of a port with attributes `port`, shown in `port_state`.
    pub(super) fn new(port: PortAttrs, port_state: Arc<PortState>) -> Self {
        PortAgents {
            sma: default_sma(&port),
            pma: Pma::default(),
            port,
            port_state,
        }
    }

    /// Replaces the port's agent, keeping the link state.
    pub(super) fn set_sma(&mut self, mut sma: DeviceSma) {
        sma.link_changed(self.port.state != regs::PORT_DOWN);
        self.sma = sma;
    }

    /// Moves the port to `state` and, if that changed the state BAR0
    /// shows, raises the asynchronous event vector on `msix` (the driver
    /// reads EVENT_CAUSE and PORT_STATE).
    pub(super) fn set_state(&mut self, state: u32, msix: &Msix) {
        self.port.state = state;
        if self.port_state.set(state) {
            let v = self.port_state.vector();
            if let Err(e) = msix.trigger(v) {
                tracing::warn!(vector = v, error = %e, "port event interrupt");
            }
        }
    }

    /// False while the port is in Init: IBA vol 1 §7.2 drops data packets
    /// there (an Armed port takes them, an Active one sends too).
    pub(super) fn takes_data(&self) -> bool {
        self.sma.state() != IbPortState::Init
    }

    /// False while the port is Init or Armed: before Active only SMPs
    /// (QP0, VL15) leave (IBA vol 1 §7.2); QP1's GMPs are data
    /// packets. A Down port (no link) still loops back to its own LID, as
    /// a device without a link does.
    pub(super) fn sends_data(&self) -> bool {
        !matches!(self.sma.state(), IbPortState::Init | IbPortState::Armed)
    }

    /// The P_Key at `index` of the port's table (0 past its end: no
    /// partition, every packet of it is refused).
    pub(super) fn pkey_at(&self, index: u16) -> u16 {
        self.sma
            .pkeys()
            .get(usize::from(index))
            .copied()
            .unwrap_or(0)
    }

    /// The agent's trap to repeat at `now`, if one is due (BAR0's trap
    /// counters follow).
    pub(super) fn due_trap(&mut self, now: Instant) -> Option<Vec<u8>> {
        let trap = self.sma.due_trap(now);
        if trap.is_some() {
            self.show_traps();
        }
        trap
    }

    /// Shows the agent's trap counters in BAR0.
    pub(super) fn show_traps(&self) {
        self.port_state.set_traps(self.sma.trap_counts());
    }
}
