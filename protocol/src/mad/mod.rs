//! Management datagrams (IBA vol 1 ch. 13-14): the common MAD header, MAD
//! status codes, subnet management packets (LID-routed and directed-route)
//! and the SMP attributes the subnet management agents serve, with
//! directed-route forwarding as pure functions. Pure code like the rest of
//! the crate: every decode takes fixed-size blocks or checks the length
//! first, and nothing panics on any input (fuzz target `mad`).
//!
//! - `header.rs`: [`MadHeader`], [`MadStatus`], classes and methods.
//! - `smp.rs`: [`Smp`], its layout, M_Key and the DR fields.
//! - [`directed`]: the hop pointer and D bit at each node (C14-9, C14-13).
//! - [`attr`]: NodeInfo, NodeDescription, PortInfo, P_KeyTable, GUIDInfo,
//!   SwitchInfo, the forwarding tables, SLtoVLMappingTable,
//!   VLArbitrationTable; Notice, in SubnTrap and SubnTrapRepress.
//! - `packet.rs`: an SMP in a UD packet to QP0 on VL15, and back.
//! - [`pma`]: performance management MADs (class 0x04 to QP1):
//!   ClassPortInfo, PortCounters, PortCountersExtended, GMPs on the wire.

pub mod attr;
pub mod directed;
mod header;
pub(crate) mod packet;
pub mod pma;
mod smp;

pub use header::{class, method, MadHeader, MadStatus, BASE_VERSION, MAD_HEADER_LEN, MAD_LEN};
pub use packet::{smp_of_packet, smp_packet, smp_packet_bytes, QP0};
pub use smp::{respond_in_place, Smp, SmpRoute, MAX_HOPS, PERMISSIVE_LID, SMP_DATA_LEN};

/// Why bytes are not a MAD of the kind asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MadError {
    /// A MAD is exactly 256 bytes.
    #[error("a MAD is {MAD_LEN} bytes, not {0}")]
    Length(usize),
    /// The management class is not a subnet management class.
    #[error("management class {0:#04x} is not an SMP class (0x01, 0x81)")]
    NotSmp(u8),
    /// The packet is not a UD SEND to QP0.
    #[error("not a UD SEND ONLY to QP0")]
    NotQp0,
    /// The management class is not performance management.
    #[error("management class {0:#04x} is not the PM class (0x04)")]
    NotPma(u8),
    /// The packet is not a UD SEND to QP1.
    #[error("not a UD SEND ONLY to QP1")]
    NotQp1,
}
