//! SwitchInfo (IBA vol 1 §14.2.5.4).
//!
//! ```text
//!  0 LinearFDBCap (2)  2 RandomFDBCap (2)  4 MulticastFDBCap (2)
//!  6 LinearFDBTop (2)  8 DefaultPort  9 DefaultMulticastPrimaryPort
//! 10 DefaultMulticastNotPrimaryPort  11 LifeTimeValue:5 PortStateChange:1
//!    OptimizedSLtoVLMappingProgramming:2  12 LIDsPerPort (2)
//! 14 PartitionEnforcementCap (2)  16 InboundEnforcementCap:1
//!    OutboundEnforcementCap:1 FilterRawInboundCap:1 FilterRawOutboundCap:1
//!    EnhancedPort0:1 -:3  17 reserved  18 MulticastFDBTop (2)
//! ```

use super::Block;
use crate::mad::header::{be16, put16};

/// SwitchInfo.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SwitchInfo {
    /// Linear forwarding table entries the switch has.
    pub linear_fdb_cap: u16,
    /// Random forwarding table entries (0: none).
    pub random_fdb_cap: u16,
    /// Multicast forwarding table entries.
    pub multicast_fdb_cap: u16,
    /// The highest LID the linear table holds a route for (set by the SM).
    pub linear_fdb_top: u16,
    /// Default port.
    pub default_port: u8,
    /// Default multicast primary port.
    pub default_mcast_primary_port: u8,
    /// Default multicast not-primary port.
    pub default_mcast_not_primary_port: u8,
    /// LifeTimeValue (5 bits).
    pub life_time_value: u8,
    /// A port changed state since the SM last cleared this (writing 1
    /// clears it).
    pub port_state_change: bool,
    /// OptimizedSLtoVLMappingProgramming (2 bits).
    pub optimized_sl2vl: u8,
    /// LIDs per port.
    pub lids_per_port: u16,
    /// P_Key entries for partition enforcement.
    pub partition_enforcement_cap: u16,
    /// The enforcement capability and EnhancedPort0 bits (byte 16).
    pub flags: u8,
    /// The highest multicast LID the multicast table holds.
    pub multicast_fdb_top: u16,
}

impl SwitchInfo {
    /// EnhancedPort0 in [`Self::flags`].
    pub const ENHANCED_PORT0: u8 = 0x08;

    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        SwitchInfo {
            linear_fdb_cap: be16(b, 0),
            random_fdb_cap: be16(b, 2),
            multicast_fdb_cap: be16(b, 4),
            linear_fdb_top: be16(b, 6),
            default_port: b[8],
            default_mcast_primary_port: b[9],
            default_mcast_not_primary_port: b[10],
            life_time_value: b[11] >> 3,
            port_state_change: b[11] & 0x04 != 0,
            optimized_sl2vl: b[11] & 3,
            lids_per_port: be16(b, 12),
            partition_enforcement_cap: be16(b, 14),
            flags: b[16] & 0xf8,
            multicast_fdb_top: be16(b, 18),
        }
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        put16(&mut b, 0, self.linear_fdb_cap);
        put16(&mut b, 2, self.random_fdb_cap);
        put16(&mut b, 4, self.multicast_fdb_cap);
        put16(&mut b, 6, self.linear_fdb_top);
        b[8] = self.default_port;
        b[9] = self.default_mcast_primary_port;
        b[10] = self.default_mcast_not_primary_port;
        b[11] = (self.life_time_value << 3)
            | (u8::from(self.port_state_change) << 2)
            | (self.optimized_sl2vl & 3);
        put16(&mut b, 12, self.lids_per_port);
        put16(&mut b, 14, self.partition_enforcement_cap);
        b[16] = self.flags & 0xf8;
        put16(&mut b, 18, self.multicast_fdb_top);
        b
    }
}
