//! Protection domains. A PD is only a number that MRs, windows and QPs carry;
//! an access is allowed only when the key's PD equals the QP's (seed 001).
//! PD numbers are 24-bit, never 0 (seed 001: PD 0 is invalid) and not reused
//! immediately (a generation in bits 23:10). A PD cannot be destroyed while
//! an MR, window or QP names it.

use super::table::HandleTable;
use super::VerbsError;

/// Index bits of a PD number (1024 PDs at most).
const PD_INDEX_BITS: u32 = 10;

/// The protection domains of one device.
pub struct PdTable {
    table: HandleTable<()>,
}

impl PdTable {
    /// A table of at most `capacity` PDs.
    pub fn new(capacity: usize) -> Self {
        PdTable {
            table: HandleTable::new(capacity, PD_INDEX_BITS, 24),
        }
    }

    /// The most PDs the table holds.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Allocates a PD (`NoMemory` when the table is full).
    pub fn alloc(&mut self) -> Result<u32, VerbsError> {
        self.table.insert(())
    }

    /// Frees a PD: `NotFound` for an unknown number, `Busy` while used.
    pub fn destroy(&mut self, pdn: u32) -> Result<(), VerbsError> {
        self.table.remove(pdn)
    }

    /// True when `pdn` names a live PD.
    pub fn contains(&self, pdn: u32) -> bool {
        self.table.contains(pdn)
    }

    /// Records one more object in `pdn` (`NotFound` if there is no such PD).
    pub fn hold(&mut self, pdn: u32) -> Result<(), VerbsError> {
        self.table.hold(pdn)
    }

    /// Records that an object of `pdn` went away.
    pub fn release(&mut self, pdn: u32) {
        self.table.release(pdn)
    }

    /// Number of objects in `pdn`.
    pub fn users(&self, pdn: u32) -> u32 {
        self.table.users(pdn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_destroy_and_no_immediate_reuse() {
        let mut pds = PdTable::new(1);
        let a = pds.alloc().unwrap();
        assert_ne!(a, 0);
        assert_eq!(pds.alloc(), Err(VerbsError::NoMemory));
        pds.destroy(a).unwrap();
        let b = pds.alloc().unwrap();
        assert_ne!(a, b);
        assert!(!pds.contains(a));
        assert_eq!(pds.destroy(a), Err(VerbsError::NotFound));
        assert!(b < 1 << 24);
    }

    #[test]
    fn busy_while_used() {
        let mut pds = PdTable::new(4);
        let a = pds.alloc().unwrap();
        pds.hold(a).unwrap();
        pds.hold(a).unwrap();
        assert_eq!(pds.destroy(a), Err(VerbsError::Busy));
        pds.release(a);
        assert_eq!(pds.destroy(a), Err(VerbsError::Busy));
        pds.release(a);
        pds.destroy(a).unwrap();
        assert_eq!(pds.hold(a), Err(VerbsError::NotFound));
    }
}
