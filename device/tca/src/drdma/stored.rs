//! Which bytes of a WRITE range the guest has stored: one valid bit per
//! byte of the range (4096 bits, the byte enables of every store merged).
//!
//! The Write Byte Count of a trapped range is the number of bits set, so a
//! byte stored twice counts once: 8 bytes stored 512 times are 8 bytes, and
//! a range reaches its Total Transfer Length only when every byte of
//! `[0, TTL)` was stored by this transfer (docs/drdma-isolation.md).

use super::decode::RANGE_SIZE;

const WORDS: usize = RANGE_SIZE as usize / 64;

/// The byte-valid mask of one range.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredBytes {
    bits: [u64; WORDS],
    count: u32,
}

impl Default for StoredBytes {
    fn default() -> Self {
        StoredBytes {
            bits: [0; WORDS],
            count: 0,
        }
    }
}

impl std::fmt::Debug for StoredBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredBytes")
            .field("count", &self.count)
            .finish()
    }
}

impl StoredBytes {
    /// Distinct bytes stored.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Marks `[offset, offset + len)` stored; returns how many of those
    /// bytes were not stored before. The bytes must lie inside the range
    /// (`offset + len <= RANGE_SIZE`).
    pub fn mark(&mut self, offset: u32, len: u32) -> u32 {
        let mut added = 0;
        let end = offset + len;
        let mut at = offset;
        while at < end {
            let (w, bit) = ((at / 64) as usize, at % 64);
            let n = (end - at).min(64 - bit);
            let mask = span(bit, n);
            added += (!self.bits[w] & mask).count_ones();
            self.bits[w] |= mask;
            at += n;
        }
        self.count += added;
        added
    }
}

/// `n` (1..=64) bits from bit `bit`.
fn span(bit: u32, n: u32) -> u64 {
    let ones = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    ones << bit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_stored_twice_counts_once() {
        let mut s = StoredBytes::default();
        for _ in 0..512 {
            s.mark(0, 8);
        }
        assert_eq!(s.count(), 8, "8 bytes stored 512 times are 8 bytes");
        assert_eq!(s.mark(4, 8), 4, "half of it new");
        assert_eq!(s.count(), 12);
    }

    #[test]
    fn spans_cross_words_and_fill_the_range() {
        let mut s = StoredBytes::default();
        assert_eq!(s.mark(60, 10), 10, "bytes 60..70 span two words");
        assert_eq!(s.mark(0, 4096), 4086);
        assert_eq!(s.count(), 4096);
        assert_eq!(s.mark(4095, 1), 0);
        assert_eq!(s.mark(0, 64), 0, "a whole word");
    }
}
