//! The M_Key of a node's management port and its check (IBA vol 1
//! §14.2.4): with M_Key 0 every SMP passes; otherwise an SMP whose M_Key
//! differs passes only as a Get under protection level 0 or 1 (level 1
//! hides the M_Key in the PortInfo it returns). A failed check is
//! answered with nothing, and counted in PortInfo's M_KeyViolations.
//!
//! The lease period is recorded and reported; the lease never expires
//! (nothing here resets a protected M_Key to zero).

use ibtca_protocol::mad::attr::PortInfo;
use ibtca_protocol::mad::method;

/// A node's M_Key, its protection bits and lease period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MKey {
    /// The key (0: no protection).
    pub key: u64,
    /// M_KeyProtectBits (0-3).
    pub protect: u8,
    /// M_KeyLeasePeriod, in seconds.
    pub lease_period: u16,
}

/// The outcome of checking an SMP's M_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MKeyCheck {
    /// It matches (or the node has none).
    Pass,
    /// A Get with a wrong key under protection 0 or 1: answered, with the
    /// M_Key hidden (level 1) or shown (level 0).
    PassGet {
        /// Show the M_Key in a PortInfo answer.
        show_key: bool,
    },
    /// Refused: no answer, an M_Key violation.
    Fail,
}

impl MKey {
    /// Checks a request with `method` carrying `key`.
    pub fn check(&self, method: u8, key: u64) -> MKeyCheck {
        if self.key == 0 || self.key == key {
            return MKeyCheck::Pass;
        }
        match (method, self.protect) {
            (method::GET, 0) => MKeyCheck::PassGet { show_key: true },
            (method::GET, 1) => MKeyCheck::PassGet { show_key: false },
            _ => MKeyCheck::Fail,
        }
    }

    /// Fills the M_Key fields of a PortInfo answer.
    pub fn report(&self, info: &mut PortInfo, show_key: bool) {
        info.m_key = if show_key { self.key } else { 0 };
        info.m_key_protect = self.protect;
        info.m_key_lease_period = self.lease_period;
    }

    /// Takes the M_Key fields of a PortInfo Set.
    pub fn set(&mut self, info: &PortInfo) {
        self.key = info.m_key;
        self.protect = info.m_key_protect & 3;
        self.lease_period = info.m_key_lease_period;
    }
}
