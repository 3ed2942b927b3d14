//! What the wide folding paths (`avx512`, `vpclmul256`) share: each CRC's
//! folding constants and the lane a fold leaves for the scalar code.
//!
//! The arithmetic is described in [`super::clmul`]: a lane moves `d` bits
//! later by two 64×64 carry-less multiplies with x^(d+63) mod P and
//! x^(d-1) mod P, bit-reversed into 64 bits.

/// The folding constants of one CRC, as (far quadword, near quadword)
/// pairs: x^(d+63) mod P and x^(d-1) mod P bit-reversed, for the distances
/// the folds use.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spec {
    /// 256 bytes: one step of four 512-bit registers.
    pub by2048: (i64, i64),
    /// 128 bytes: one step of four 256-bit registers.
    pub by1024: (i64, i64),
    /// One 512-bit register.
    pub by512: (i64, i64),
    /// Three lanes.
    pub by384: (i64, i64),
    /// Two lanes: one 256-bit register.
    pub by256: (i64, i64),
    /// One lane.
    pub by128: (i64, i64),
}

impl Spec {
    /// The constants of the reflected CRC of `width` bits with (unreflected)
    /// polynomial `poly` (without its x^width term).
    pub(super) const fn new(width: u32, poly: u64) -> Self {
        const fn pair(width: u32, poly: u64, d: u32) -> (i64, i64) {
            (
                super::fold_constant(width, poly, d + 64),
                super::fold_constant(width, poly, d),
            )
        }
        Spec {
            by2048: pair(width, poly, 2048),
            by1024: pair(width, poly, 1024),
            by512: pair(width, poly, 512),
            by384: pair(width, poly, 384),
            by256: pair(width, poly, 256),
            by128: pair(width, poly, 128),
        }
    }
}

/// The ICRC's constants (CRC-32, 0x04C11DB7).
pub(super) const CRC32: Spec = Spec::new(32, super::CRC32_POLY);
/// The VCRC's constants (CRC-16, 0x100B).
pub(super) const CRC16: Spec = Spec::new(16, super::VCRC_POLY);

/// The 16 bytes a fold leaves (to finish through the scalar code from a
/// zero register) and the tail after them.
pub(super) struct Folded<'a> {
    /// The last lane, as message bytes.
    pub last: [u8; 16],
    /// Bytes after it (fewer than 16).
    pub tail: &'a [u8],
}
