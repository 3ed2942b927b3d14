//! NodeInfo (IBA vol 1 §14.2.5.3) and NodeDescription (§14.2.5.2).
//!
//! NodeInfo: BaseVersion (1) ClassVersion (1) NodeType (1) NumPorts (1)
//! SystemImageGUID (8) NodeGUID (8) PortGUID (8) PartitionCap (2)
//! DeviceID (2) Revision (4) LocalPortNum (1) VendorID (3): 40 bytes.

use super::Block;
use crate::mad::header::{be16, be32, be64, put, put16, put32, put64};

/// NodeInfo NodeType.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeType {
    /// Channel adapter (1).
    Ca,
    /// Switch (2).
    Switch,
    /// Router (3).
    Router,
    /// Any other value.
    Other(u8),
}

impl NodeType {
    /// The wire value.
    pub fn bits(self) -> u8 {
        match self {
            NodeType::Ca => 1,
            NodeType::Switch => 2,
            NodeType::Router => 3,
            NodeType::Other(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_bits(v: u8) -> Self {
        match v {
            1 => NodeType::Ca,
            2 => NodeType::Switch,
            3 => NodeType::Router,
            v => NodeType::Other(v),
        }
    }
}

/// NodeInfo (read-only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeInfo {
    /// MAD base version supported (1).
    pub base_version: u8,
    /// SMP class version supported (1).
    pub class_version: u8,
    /// CA, switch or router.
    pub node_type: NodeType,
    /// Physical ports.
    pub num_ports: u8,
    /// System image GUID.
    pub system_image_guid: u64,
    /// Node GUID.
    pub node_guid: u64,
    /// GUID of the port the SMP came in by (a switch: port 0's).
    pub port_guid: u64,
    /// P_Key table entries per port.
    pub partition_cap: u16,
    /// Device ID.
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// The port the SMP came in by.
    pub local_port_num: u8,
    /// Vendor ID (24 bits, the IEEE OUI).
    pub vendor_id: u32,
}

impl NodeInfo {
    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        NodeInfo {
            base_version: b[0],
            class_version: b[1],
            node_type: NodeType::from_bits(b[2]),
            num_ports: b[3],
            system_image_guid: be64(b, 4),
            node_guid: be64(b, 12),
            port_guid: be64(b, 20),
            partition_cap: be16(b, 28),
            device_id: be16(b, 30),
            revision: be32(b, 32),
            local_port_num: b[36],
            vendor_id: be32(b, 36) & 0x00ff_ffff,
        }
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        b[0] = self.base_version;
        b[1] = self.class_version;
        b[2] = self.node_type.bits();
        b[3] = self.num_ports;
        put64(&mut b, 4, self.system_image_guid);
        put64(&mut b, 12, self.node_guid);
        put64(&mut b, 20, self.port_guid);
        put16(&mut b, 28, self.partition_cap);
        put16(&mut b, 30, self.device_id);
        put32(&mut b, 32, self.revision);
        put32(&mut b, 36, self.vendor_id & 0x00ff_ffff);
        b[36] = self.local_port_num;
        b
    }
}

/// NodeDescription: 64 bytes of UTF-8, NUL-padded (read-only here).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeDescription(pub String);

impl NodeDescription {
    /// Decodes the block: the text up to the first NUL, lossily.
    pub fn decode(b: &Block) -> Self {
        let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
        NodeDescription(String::from_utf8_lossy(b.get(..end).unwrap_or_default()).into_owned())
    }

    /// Encodes the block: the text cut to 64 bytes at a character
    /// boundary, NUL-padded.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        let mut end = self.0.len().min(64);
        while !self.0.is_char_boundary(end) {
            end -= 1;
        }
        put(&mut b, 0, self.0.as_bytes().get(..end).unwrap_or_default());
        b
    }
}
