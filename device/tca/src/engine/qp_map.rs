//! Maps keyed by QP number, looked up for every packet and doorbell.
//!
//! The standard `HashMap` hashes with SipHash-1-3, which resists
//! hash flooding but costs tens of nanoseconds per lookup; the engine looks
//! QPs up several times per packet. QP numbers are chosen by this device
//! (handles from `verbs::table`, not by a peer), so one multiplication by
//! an odd constant (Fibonacci hashing, as rustc's FxHash does) spreads them
//! well enough. A peer can only name QPNs in packets, which are looked up,
//! never inserted.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from QP number to `V` with [`QpnHasher`].
pub type QpMap<V> = HashMap<u32, V, BuildHasherDefault<QpnHasher>>;

/// Fibonacci hashing of integer keys (see the module documentation).
#[derive(Debug, Default, Clone, Copy)]
pub struct QpnHasher(u64);

impl Hasher for QpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_map() {
        let mut m: QpMap<u32> = QpMap::default();
        for q in (1..2000u32).map(|i| i << 8 | 7) {
            m.insert(q, q ^ 1);
        }
        assert_eq!(m.len(), 1999);
        assert!((1..2000u32).all(|i| m.get(&(i << 8 | 7)) == Some(&((i << 8 | 7) ^ 1))));
        assert_eq!(m.get(&8), None);
        m.retain(|q, _| q & 0x100 == 0);
        assert_eq!(m.len(), 999, "the even i of 1..2000");
    }

    #[test]
    fn nearby_keys_spread_over_the_high_bits() {
        // hashbrown takes the bucket from the low bits and a tag from the
        // top 7: consecutive QPNs must differ in both.
        let h = |q: u32| {
            let mut s = QpnHasher::default();
            s.write_u32(q);
            s.finish()
        };
        let tops: std::collections::HashSet<u64> = (0..64).map(|q| h(q) >> 57).collect();
        assert!(tops.len() > 32, "{}", tops.len());
        let lows: std::collections::HashSet<u64> = (0..64).map(|q| h(q) & 63).collect();
        assert!(lows.len() > 32, "{}", lows.len());
    }
}
