//! The table attributes, one 64-byte block each, and how their attribute
//! modifiers select the block (IBA vol 1 §14.2.5.5 and .7-.10):
//!
//! | attribute | block | modifier |
//! |---|---|---|
//! | P_KeyTable | 32 P_Keys | switch: port << 16; block number |
//! | GUIDInfo | 8 GUIDs | block number |
//! | LinearForwardingTable | 64 output ports (LIDs 64·n ..) | block n |
//! | MulticastForwardingTable | 32 port masks of 16 ports (MLIDs 0xc000 + 32·n ..) | position (bits 31:28, ports 16·p ..), block n (bits 8:0) |
//! | SLtoVLMappingTable | 16 VLs, 4 bits each (SL0 first, 8 bytes) | switch: input port << 8 \| output port; CA: port |
//! | VLArbitrationTable | 32 (VL, weight) entries | block (bits 31:16: 1, 2 low priority, 3, 4 high), port (15:0) |

use super::Block;
use crate::mad::header::{be16, be64, put16, put64};

/// One P_KeyTable block: 32 P_Keys (bit 15: full membership).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PKeyTable(pub [u16; 32]);

impl PKeyTable {
    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        PKeyTable(std::array::from_fn(|i| be16(b, 2 * i)))
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        for (i, k) in self.0.iter().enumerate() {
            put16(&mut b, 2 * i, *k);
        }
        b
    }
}

/// One GUIDInfo block: 8 GUIDs (index 0 of block 0 is the port GUID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GuidInfo(pub [u64; 8]);

impl GuidInfo {
    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        GuidInfo(std::array::from_fn(|i| be64(b, 8 * i)))
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        for (i, g) in self.0.iter().enumerate() {
            put64(&mut b, 8 * i, *g);
        }
        b
    }
}

/// One LinearForwardingTable block: the output port of 64 consecutive
/// LIDs (255: no route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LftBlock(pub [u8; 64]);

impl LftBlock {
    /// LIDs per block.
    pub const LIDS: u16 = 64;
    /// The port of an unrouted LID.
    pub const NO_ROUTE: u8 = 0xff;

    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        LftBlock(*b)
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        self.0
    }
}

/// One MulticastForwardingTable block: for 32 consecutive multicast LIDs,
/// a mask of 16 ports (bit i: port 16·position + i).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MftBlock(pub [u16; 32]);

impl MftBlock {
    /// Multicast LIDs per block.
    pub const LIDS: u16 = 32;
    /// The first multicast LID.
    pub const BASE_LID: u16 = 0xc000;

    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        MftBlock(std::array::from_fn(|i| be16(b, 2 * i)))
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        for (i, m) in self.0.iter().enumerate() {
            put16(&mut b, 2 * i, *m);
        }
        b
    }

    /// (position, block) from an attribute modifier.
    pub fn select(attr_mod: u32) -> (u8, u16) {
        ((attr_mod >> 28) as u8, (attr_mod & 0x1ff) as u16)
    }
}

/// SLtoVLMappingTable: the VL of each SL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sl2VlTable(pub [u8; 16]);

impl Sl2VlTable {
    /// Decodes the block (the first 8 bytes).
    pub fn decode(b: &Block) -> Self {
        Sl2VlTable(std::array::from_fn(|sl| {
            let byte = b[sl / 2];
            if sl % 2 == 0 {
                byte >> 4
            } else {
                byte & 0xf
            }
        }))
    }

    /// Encodes the block (VLs cut to 4 bits).
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        for (i, pair) in self.0.chunks_exact(2).enumerate() {
            if let (Some(slot), [even, odd]) = (b.get_mut(i), pair) {
                *slot = (even << 4) | (odd & 0xf);
            }
        }
        b
    }
}

/// One VLArbitrationTable entry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct VlArbEntry {
    /// VL (4 bits).
    pub vl: u8,
    /// Weight: 64-byte units the VL may send in its turn (0: skipped).
    pub weight: u8,
}

/// One VLArbitrationTable block: 32 entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlArbBlock(pub [VlArbEntry; 32]);

impl VlArbBlock {
    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        VlArbBlock(std::array::from_fn(|i| VlArbEntry {
            vl: b[2 * i] & 0xf,
            weight: b[2 * i + 1],
        }))
    }

    /// Encodes the block.
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        for (i, e) in self.0.iter().enumerate() {
            if let Some(pair) = b.get_mut(2 * i..2 * i + 2) {
                pair.copy_from_slice(&[e.vl & 0xf, e.weight]);
            }
        }
        b
    }

    /// (block 1..=4, port) from an attribute modifier.
    pub fn select(attr_mod: u32) -> (u16, u16) {
        ((attr_mod >> 16) as u16, attr_mod as u16)
    }
}
