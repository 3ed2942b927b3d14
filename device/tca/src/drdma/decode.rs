//! Window address decode (seed 000, Figure 19a): an access at `addr` in the
//! DRDMA window falls in range `(addr - base) / range_size`, at offset
//! `(addr - base) % range_size` in that range; the range's ARR names the
//! packet memory block (PMB) holding the bytes, and the byte sits that far
//! into the PMB's payload. (The seed puts a header area of at most 128 bytes
//! in front of each payload; here headers are built in each packet instead,
//! see docs/drdma.md, "No header area in the PMB".)

/// Bytes per address range: one PMB payload, the largest IB MTU.
pub const RANGE_SIZE: u32 = 4096;

/// Where a window access lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// Address range (ARR number).
    pub range: u32,
    /// Byte offset inside the range.
    pub offset: u32,
}

/// Decodes a bus address `addr` in a window at `base` with `ranges` ranges.
/// `None` if the address is outside the window.
pub fn decode(base: u64, ranges: u32, addr: u64) -> Option<Decoded> {
    let off = addr.checked_sub(base)?;
    let range = off / u64::from(RANGE_SIZE);
    if range >= u64::from(ranges) {
        return None;
    }
    Some(Decoded {
        range: u32::try_from(range).ok()?,
        offset: (off % u64::from(RANGE_SIZE)) as u32,
    })
}

/// The bus address of byte `offset` of range `range` (the seed's
/// `LocalAddr0 = DBAR + ARR# × 4096` when `offset` is 0).
pub fn range_address(base: u64, range: u32, offset: u32) -> u64 {
    base + u64::from(range) * u64::from(RANGE_SIZE) + u64::from(offset)
}

/// Byte position of payload byte `offset` of PMB `pmb` in the pool's
/// payload memory. Payloads are stored as consecutive pages so that a
/// mapped window can expose range `n` as page `n`.
pub fn pmb_payload_byte(pmb: u32, offset: u32) -> u64 {
    u64::from(pmb) * u64::from(RANGE_SIZE) + u64::from(offset)
}

/// Smallest power-of-two BAR size holding `ranges` ranges (PCI BARs are
/// naturally aligned powers of two).
pub fn window_bar_size(ranges: u32) -> u64 {
    (u64::from(ranges.max(1)) * u64::from(RANGE_SIZE)).next_power_of_two()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's worked example: DBAR 0x12345678, 32 ranges of 4096 bytes.
    const DBAR: u64 = 0x1234_5678;

    #[test]
    fn seed_worked_addresses() {
        // 0x12347700 - 0x12345678 = 0x2088: range 2, offset 0x88.
        assert_eq!(
            decode(DBAR, 32, 0x1234_7700),
            Some(Decoded {
                range: 2,
                offset: 0x88
            })
        );
        // LocalAddr0 of ARR 2 is 0x12347678 (range base).
        assert_eq!(range_address(DBAR, 2, 0), 0x1234_7678);
        assert_eq!(
            decode(DBAR, 32, 0x1234_7678),
            Some(Decoded {
                range: 2,
                offset: 0
            })
        );
        // First and last byte of the window.
        assert_eq!(
            decode(DBAR, 32, DBAR),
            Some(Decoded {
                range: 0,
                offset: 0
            })
        );
        let last = DBAR + 32 * 4096 - 1;
        assert_eq!(
            decode(DBAR, 32, last),
            Some(Decoded {
                range: 31,
                offset: 4095
            })
        );
        // Just outside on both sides.
        assert_eq!(decode(DBAR, 32, DBAR - 1), None);
        assert_eq!(decode(DBAR, 32, last + 1), None);
    }

    #[test]
    fn decode_round_trips_range_address() {
        for range in [0, 1, 2, 17, 31] {
            for offset in [0, 1, 0x88, 2048, 4095] {
                let a = range_address(DBAR, range, offset);
                assert_eq!(decode(DBAR, 32, a), Some(Decoded { range, offset }));
            }
        }
    }

    #[test]
    fn pmb_payloads_are_page_aligned() {
        assert_eq!(pmb_payload_byte(0, 0), 0);
        assert_eq!(pmb_payload_byte(1, 0), 4096);
        assert_eq!(pmb_payload_byte(31, 4095), 31 * 4096 + 4095);
    }

    #[test]
    fn bar_size_is_a_power_of_two() {
        assert_eq!(window_bar_size(32), 128 * 1024);
        assert_eq!(window_bar_size(33), 256 * 1024);
        assert_eq!(window_bar_size(1), 4096);
        assert_eq!(window_bar_size(0), 4096);
    }
}
