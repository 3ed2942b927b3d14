//! The gateway's subnet management agent: the device's own agent
//! ([`ibtca_agents::sma::DeviceSma`]) on the gateway's IB port, so an SM
//! sees a gateway as a channel adapter of one port (NodeInfo,
//! NodeDescription, PortInfo Get/Set with LID and port state, P_KeyTable,
//! GUIDInfo, VLArbitrationTable) and sets it up like a device.
//!
//! What the agent decides the gateway's engine applies: a LID the SM sets
//! becomes the source LID of every QP (restarted on it), a
//! VLArbitrationTable or VLHighLimit the port's link arbitration, and the port
//! state gates data (IBA vol 1 §7.2: nothing but SMPs sent before Active,
//! none taken before Armed).

use ibtca_agents::sma::{DeviceSma, SmaStats};
use ibtca_link::HighPriority;
use ibtca_protocol::mad::attr::PortState;
use ibtca_protocol::PacketView;

/// NodeDescription of a gateway that names none.
pub const DEFAULT_DESCRIPTION: &str = "ibtca gateway";

/// How the gateway's agent starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmaSettings {
    /// NodeDescription.
    pub description: String,
    /// An SM brings the port up (link up is Init, no LID until the SM
    /// sets one); otherwise link up is Active with the configured LID.
    pub managed: bool,
}

impl Default for SmaSettings {
    fn default() -> Self {
        SmaSettings {
            description: DEFAULT_DESCRIPTION.to_owned(),
            managed: false,
        }
    }
}

/// What one SMP changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmpEffect {
    /// The answer to send back (on VL15).
    pub reply: Option<Vec<u8>>,
    /// The LID the SM just set, if it changed.
    pub new_lid: Option<u16>,
    /// The port's new low- and high-priority VL arbitration, if the SM
    /// changed it.
    pub arbitration: Option<(Vec<(u8, u8)>, HighPriority)>,
}

/// The agent of the gateway's one port.
#[derive(Debug, Clone)]
pub struct GatewaySma {
    sma: DeviceSma,
}

impl GatewaySma {
    /// The agent of a gateway with node (and port) GUID `guid`, LID `lid`
    /// (0 when managed: the SM gives it one) and `data_vls` data VLs.
    pub fn new(guid: u64, lid: u16, data_vls: u8, s: &SmaSettings) -> Self {
        let lid = if s.managed { 0 } else { lid };
        GatewaySma {
            sma: DeviceSma::new(guid, guid, &s.description, lid, data_vls, s.managed),
        }
    }

    /// Takes the port's configured data-VL weights as its low-priority VL
    /// arbitration table, until the SM sets one.
    pub fn with_vl_weights(mut self, weights: &[u8]) -> Self {
        self.sma.set_vl_weights(weights);
        self
    }

    /// The link came up or went down.
    pub fn link_changed(&mut self, up: bool) {
        if self.sma.link_changed(up) {
            tracing::info!(state = ?self.sma.state(), "IB port state");
        }
    }

    /// Serves a packet to QP0.
    pub fn on_packet(&mut self, view: &PacketView<'_>) -> SmpEffect {
        let lid = self.sma.lid();
        let state = self.sma.state();
        let outcome = self.sma.on_packet(view);
        if self.sma.state() != state {
            tracing::info!(state = ?self.sma.state(), "IB port state set by the subnet manager");
        }
        let new_lid = (self.sma.lid() != lid).then(|| self.sma.lid());
        if let Some(l) = new_lid {
            tracing::info!(old = lid, lid = l, "IB port LID set by the subnet manager");
        }
        let arbitration = outcome
            .arbitration_changed
            .then(|| (self.sma.low_priority(), self.sma.high_priority()));
        SmpEffect {
            reply: outcome.reply,
            new_lid,
            arbitration,
        }
    }

    /// The port's LID.
    pub fn lid(&self) -> u16 {
        self.sma.lid()
    }

    /// The port's state.
    pub fn state(&self) -> PortState {
        self.sma.state()
    }

    /// Data packets may leave: the port is Active.
    pub fn sends_data(&self) -> bool {
        self.sma.state() == PortState::Active
    }

    /// Data packets may come in: the port is Armed or Active.
    pub fn takes_data(&self) -> bool {
        matches!(self.sma.state(), PortState::Armed | PortState::Active)
    }

    /// The agent's counters.
    pub fn stats(&self) -> SmaStats {
        self.sma.stats()
    }
}
