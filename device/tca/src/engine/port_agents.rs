//! The port's agents and what they show: the subnet management agent
//! (QP0), the performance management agent (PM MADs to QP1), the port's
//! attributes as QUERY_PORT reports them, and the port state and LID BAR0
//! shows (shared with the vfio-user thread).

use std::sync::Arc;

use super::port_state::PortState;
use crate::pma::Pma;
use crate::sma::DeviceSma;
use crate::verbs::PortAttrs;

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
