//! Ring geometry shared by the command queue, CQs, SQs, RQs and quasi-WQE
//! rings: a power-of-two array of fixed-size entries in guest memory, named
//! by free-running 32-bit indexes (slot = `index & (entries - 1)`).
//!
//! # Owner bit
//! Rings the device produces (CQ, quasi-WQE ring) carry an owner bit in each
//! entry: **1 on passes 0, 2, 4, … over the ring and 0 on passes 1, 3, …**
//! (the inverse of the pass number's parity). A zeroed ring therefore reads
//! empty, and the consumer of index `i` waits for
//! `owner == ((i >> log) & 1) ^ 1`. Because entry counts are powers of two
//! of at most 2^15, the 32-bit index wrap keeps the sequence unbroken.

use super::VerbsError;

/// Largest log2 entry count of any ring.
pub const MAX_RING_LOG: u8 = 15;

/// Where a ring lives and how big it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    gpa: u64,
    log: u8,
    stride: u64,
}

impl Ring {
    /// A ring of `2^log` entries of `stride` bytes at `gpa`. `EINVAL` unless
    /// `log <= max_log`, `gpa` is aligned to `stride` (a power of two) and
    /// the ring does not run past the end of the address space.
    pub fn new(gpa: u64, log: u8, stride: u64, max_log: u8) -> Result<Ring, VerbsError> {
        if log > max_log.min(MAX_RING_LOG)
            || !stride.is_power_of_two()
            || !gpa.is_multiple_of(stride)
        {
            return Err(VerbsError::Invalid);
        }
        let bytes = stride << log;
        gpa.checked_add(bytes - 1).ok_or(VerbsError::Invalid)?;
        Ok(Ring { gpa, log, stride })
    }

    /// Guest-physical address of the first entry.
    pub fn gpa(&self) -> u64 {
        self.gpa
    }

    /// log2 of the number of entries.
    pub fn log(&self) -> u8 {
        self.log
    }

    /// Bytes of one entry.
    pub fn stride(&self) -> u64 {
        self.stride
    }

    /// Number of entries.
    pub fn entries(&self) -> u32 {
        1 << self.log
    }

    /// Size in bytes.
    pub fn bytes(&self) -> u64 {
        self.stride << self.log
    }

    /// Guest-physical address of the entry `index` names.
    pub fn slot_addr(&self, index: u32) -> u64 {
        let slot = u64::from(index & (self.entries() - 1));
        // Cannot overflow: `new` checked the whole ring.
        self.gpa + slot * self.stride
    }

    /// Owner bit the producer writes into the entry for `index`.
    pub fn owner(&self, index: u32) -> u8 {
        (((index >> self.log) & 1) ^ 1) as u8
    }

    /// True when the two rings share a byte.
    pub fn overlaps(&self, other: &Ring) -> bool {
        self.gpa < other.gpa + other.bytes() && other.gpa < self.gpa + self.bytes()
    }

    /// True when a producer at `pi` may be where it is relative to the
    /// consumer at `ci`: at most one ring's worth ahead, never behind.
    pub fn in_window(&self, pi: u32, ci: u32) -> bool {
        pi.wrapping_sub(ci) <= self.entries()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_is_validated() {
        assert!(Ring::new(0x1000, 4, 32, 15).is_ok());
        assert_eq!(Ring::new(0x1010, 4, 32, 15), Err(VerbsError::Invalid));
        assert_eq!(Ring::new(0x1000, 16, 32, 20), Err(VerbsError::Invalid));
        assert_eq!(Ring::new(0x1000, 5, 32, 4), Err(VerbsError::Invalid));
        assert_eq!(Ring::new(0x1000, 0, 24, 4), Err(VerbsError::Invalid));
        assert_eq!(
            Ring::new(u64::MAX - 31, 1, 32, 15),
            Err(VerbsError::Invalid),
            "runs past the address space"
        );
        let last = Ring::new(u64::MAX - 63, 1, 32, 15).unwrap();
        assert_eq!(last.slot_addr(3), u64::MAX - 31);
        assert_eq!(Ring::new(0, 255, 32, 255), Err(VerbsError::Invalid));
    }

    #[test]
    fn owner_bit_flips_per_pass_and_survives_index_wrap() {
        let r = Ring::new(0, 2, 32, 15).unwrap();
        let owners: Vec<u8> = (0..12).map(|i| r.owner(i)).collect();
        assert_eq!(owners, [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(r.owner(u32::MAX), 0);
        assert_eq!(
            r.owner(u32::MAX.wrapping_add(1)),
            1,
            "index 2^32 is pass 0 again"
        );
    }

    #[test]
    fn window_and_overlap() {
        let r = Ring::new(0x1000, 2, 32, 15).unwrap();
        assert!(r.in_window(4, 0));
        assert!(!r.in_window(5, 0));
        assert!(!r.in_window(0, 1), "producer behind consumer");
        assert!(r.in_window(2, u32::MAX - 1));
        let s = Ring::new(0x1000 + 128, 0, 128, 15).unwrap();
        assert!(!r.overlaps(&s));
        let t = Ring::new(0x1000 + 96, 0, 32, 15).unwrap();
        assert!(r.overlaps(&t) && t.overlaps(&r));
    }
}
