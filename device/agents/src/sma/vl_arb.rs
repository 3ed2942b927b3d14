//! A port's VLArbitrationTable (IBA vol 1 §14.2.5.9) as its agent keeps
//! it: blocks 1 and 2 the low-priority table, 3 and 4 the high-priority
//! one, 32 (VL, weight) entries each, weights in 64-byte units. The link's
//! arbiter (`ibtca_link`'s `vl_table.rs`) serves them as IBA §7.6.9 says;
//! with PortInfo VLHighLimit they are the port's whole arbitration.
//!
//! Until an SM sets a table, the low-priority one is the port's configured
//! weights, (VL n, weight n) from VL0 on, and the high-priority one is
//! empty.

use ibtca_protocol::mad::attr::{Block, VlArbBlock, VlArbEntry};
use ibtca_protocol::mad::MadStatus;

use ibtca_link::HighPriority;

/// Blocks of a VLArbitrationTable: low 0-31, low 32-63, high 0-31, high 32-63.
pub const VL_ARB_BLOCKS: usize = 4;
/// Entries of each table (PortInfo VLArbHighCap and VLArbLowCap).
pub const VL_ARB_ENTRIES: u8 = 64;

/// One port's four blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlArbTables([[VlArbEntry; 32]; VL_ARB_BLOCKS]);

impl VlArbTables {
    /// The tables of a port with these data-VL weights (VL0 first).
    pub fn from_weights(weights: &[u8]) -> Self {
        let mut t = [[VlArbEntry::default(); 32]; VL_ARB_BLOCKS];
        for (e, (vl, weight)) in t[0].iter_mut().zip((0u8..).zip(weights)) {
            *e = VlArbEntry {
                vl,
                weight: *weight,
            };
        }
        VlArbTables(t)
    }

    /// Block `block` (1..=4, as in the attribute modifier).
    pub fn block(&self, block: u16) -> Result<Block, MadStatus> {
        let i = usize::from(block).wrapping_sub(1);
        let entries = self.0.get(i).ok_or(MadStatus::INVALID_ATTR_VALUE)?;
        Ok(VlArbBlock(*entries).encode())
    }

    /// Replaces block `block` (1..=4) from `data`; returns it as it now is.
    pub fn set_block(&mut self, block: u16, data: &Block) -> Result<Block, MadStatus> {
        let i = usize::from(block).wrapping_sub(1);
        let entries = self.0.get_mut(i).ok_or(MadStatus::INVALID_ATTR_VALUE)?;
        *entries = VlArbBlock::decode(data).0;
        self.block(block)
    }

    /// The low-priority table's (VL, weight) entries, in order.
    pub fn low_priority(&self) -> Vec<(u8, u8)> {
        self.entries(0..2)
    }

    /// The high-priority table with `limit` (PortInfo VLHighLimit).
    pub fn high_priority(&self, limit: u8) -> HighPriority {
        HighPriority {
            entries: self.entries(2..4),
            limit,
        }
    }

    fn entries(&self, blocks: std::ops::Range<usize>) -> Vec<(u8, u8)> {
        self.0
            .get(blocks)
            .unwrap_or_default()
            .iter()
            .flatten()
            .filter(|e| e.weight > 0)
            .map(|e| (e.vl, e.weight))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_the_default_low_table_and_sets_replace_blocks() {
        let mut t = VlArbTables::from_weights(&[4, 0, 2]);
        assert_eq!(t.low_priority(), [(0, 4), (2, 2)]);
        assert_eq!(
            t.high_priority(7),
            HighPriority {
                entries: Vec::new(),
                limit: 7
            }
        );
        let mut data = [0u8; 64];
        data[..4].copy_from_slice(&[1, 16, 0x13, 1]);
        // VL is 4 bits: 0x13 reads as VL3.
        let back = t.set_block(4, &data).unwrap();
        assert_eq!(back[..4], [1, 16, 3, 1]);
        assert_eq!(t.high_priority(0).entries, [(1, 16), (3, 1)]);
        assert_eq!(t.block(0), Err(MadStatus::INVALID_ATTR_VALUE));
        assert_eq!(t.set_block(5, &data), Err(MadStatus::INVALID_ATTR_VALUE));
        assert_eq!(t.block(1).unwrap()[..6], [0, 4, 1, 0, 2, 2]);
    }
}
