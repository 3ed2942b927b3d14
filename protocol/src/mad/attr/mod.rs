//! The SMP attributes the subnet management agents serve (IBA vol 1
//! §14.2.5), each a 64-byte block of SMP data with its `decode` and
//! `encode`. Decoding cannot fail: every bit pattern of the block is some
//! value (reserved bits are dropped, and written back as zero).

mod node;
mod notice;
mod port_info;
mod switch_info;
mod tables;

pub use node::{NodeDescription, NodeInfo, NodeType};
pub use notice::{notice_type, producer, trap, KeyViolation, Notice, DATA_DETAILS_LEN};
pub use port_info::{cap, speed, width, PhysState, PortInfo, PortState};
pub use switch_info::SwitchInfo;
pub use tables::{GuidInfo, LftBlock, MftBlock, PKeyTable, Sl2VlTable, VlArbBlock, VlArbEntry};

/// Attribute IDs (IBA vol 1 Table 145).
pub mod id {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// Notice (traps).
    pub const NOTICE: u16 = 0x0002;
    /// NodeDescription.
    pub const NODE_DESCRIPTION: u16 = 0x0010;
    /// NodeInfo.
    pub const NODE_INFO: u16 = 0x0011;
    /// SwitchInfo.
    pub const SWITCH_INFO: u16 = 0x0012;
    /// GUIDInfo.
    pub const GUID_INFO: u16 = 0x0014;
    /// PortInfo.
    pub const PORT_INFO: u16 = 0x0015;
    /// P_KeyTable.
    pub const P_KEY_TABLE: u16 = 0x0016;
    /// SLtoVLMappingTable.
    pub const SL_TO_VL_TABLE: u16 = 0x0017;
    /// VLArbitrationTable.
    pub const VL_ARB_TABLE: u16 = 0x0018;
    /// LinearForwardingTable.
    pub const LINEAR_FORWARDING_TABLE: u16 = 0x0019;
    /// RandomForwardingTable.
    pub const RANDOM_FORWARDING_TABLE: u16 = 0x001a;
    /// MulticastForwardingTable.
    pub const MULTICAST_FORWARDING_TABLE: u16 = 0x001b;
    /// SMInfo.
    pub const SM_INFO: u16 = 0x0020;
}

/// The attribute's 64-byte block.
pub type Block = [u8; crate::mad::SMP_DATA_LEN];
