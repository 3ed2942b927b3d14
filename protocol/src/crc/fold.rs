//! What the wide folding paths (`avx512`, `vpclmul256`, the two widths of
//! `wide`) share besides the fold itself: each CRC's folding constants, the
//! lane a fold leaves for the scalar code, and the checked entry points
//! ([`WidePath`]).
//!
//! The arithmetic is described in [`super::clmul`]: a lane moves `d` bits
//! later by two 64×64 carry-less multiplies with x^(d+63) mod P and
//! x^(d-1) mod P, bit-reversed into 64 bits.

// The checked entry points call the paths' `#[target_feature]` code.
#![allow(unsafe_code)]

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

/// One wide folding path: the CPU features it needs and its two folds.
/// The provided methods are the safe entry points: they check the length
/// and the CPU before they call the path's `#[target_feature]` code.
pub(super) trait WidePath {
    /// Shortest input folded (its four registers); shorter goes elsewhere.
    const MIN_LEN: usize;

    /// Whether this CPU can run the path (checked once, cached by the
    /// standard library).
    fn available() -> bool;

    /// Folds `bytes` for the CRC of `spec` from raw register `register`.
    ///
    /// # Safety
    ///
    /// [`Self::available`] must hold, and `bytes` be at least
    /// [`Self::MIN_LEN`] long.
    unsafe fn fold_unchecked<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a>;

    /// Folds `bytes` for two CRCs from the same loads.
    ///
    /// # Safety
    ///
    /// As [`Self::fold_unchecked`].
    unsafe fn fold_two_unchecked<'a>(
        a: &Spec,
        ra: u32,
        b: &Spec,
        rb: u32,
        bytes: &'a [u8],
    ) -> (Folded<'a>, Folded<'a>);

    /// Folds `bytes` for the CRC of `spec` from raw register `register`;
    /// `None` on a CPU without the path's features or for a short input.
    fn fold<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Option<Folded<'a>> {
        if bytes.len() < Self::MIN_LEN || !Self::available() {
            return None;
        }
        // SAFETY: both conditions of `fold_unchecked` were checked just
        // above; the path touches memory only through the slice.
        Some(unsafe { Self::fold_unchecked(spec, register, bytes) })
    }

    /// Folds `bytes` for two CRCs at once, from raw registers `ra` (CRC of
    /// `a`) and `rb` (CRC of `b`); `None` as for [`Self::fold`].
    fn fold_two<'a>(
        a: &Spec,
        ra: u32,
        b: &Spec,
        rb: u32,
        bytes: &'a [u8],
    ) -> Option<(Folded<'a>, Folded<'a>)> {
        if bytes.len() < Self::MIN_LEN || !Self::available() {
            return None;
        }
        // SAFETY: as in `fold`.
        Some(unsafe { Self::fold_two_unchecked(a, ra, b, rb, bytes) })
    }
}

/// The 16 bytes a fold leaves (to finish through the scalar code from a
/// zero register) and the tail after them.
pub(super) struct Folded<'a> {
    /// The last lane, as message bytes.
    pub last: [u8; 16],
    /// Bytes after it (fewer than 16).
    pub tail: &'a [u8],
}

/// P32·P16: the product of the ICRC's and the VCRC's polynomials (degree
/// 48), without its x^48 term. A fold modulo the product keeps the
/// message's residue modulo each factor, so one fold (two carry-less
/// multiplies per 16 bytes, not four) serves both CRCs of a packet; each
/// CRC then reduces the lane it leaves with its own scalar code.
pub(super) const BOTH_POLY: u64 =
    clmul_u64(1 << 32 | super::CRC32_POLY, 1 << 16 | super::VCRC_POLY) ^ 1 << 48;

/// The folding constants of the product polynomial.
pub(super) const BOTH: Spec = Spec::new(48, BOTH_POLY);

/// Carry-less product of two polynomials whose product fits in 64 bits.
const fn clmul_u64(a: u64, b: u64) -> u64 {
    let mut product = 0;
    let mut i = 0;
    while i < 64 {
        if b >> i & 1 != 0 {
            product ^= a << i;
        }
        i += 1;
    }
    product
}

/// Whole 16-byte blocks a [`Shifts`] table reaches (inputs up to 8 KiB).
pub(super) const SHIFT_BLOCKS: usize = 512;

/// For one CRC, the constant pairs that move a lane `j` lanes (128·j bits)
/// ahead, for `0 < j <` [`SHIFT_BLOCKS`]: how a fold modulo the product
/// polynomial, which starts from a zero register, adds each CRC's own
/// start register afterwards (the register, as the first lane, moved to
/// where the fold's last lane is).
pub(super) struct Shifts([(i64, i64); SHIFT_BLOCKS]);

impl Shifts {
    const fn new(width: u32, poly: u64) -> Self {
        // x^(d-1) mod P and x^(d+63) mod P for d = 128·j, stepping j.
        use super::times_xpow as times_x;
        let mut table = [(0i64, 0i64); SHIFT_BLOCKS];
        let mut near = super::xpow_mod(width, poly, 127);
        let mut j = 1;
        while j < SHIFT_BLOCKS {
            let far = times_x(near, width, poly, 64);
            table[j] = (far.reverse_bits() as i64, near.reverse_bits() as i64);
            near = times_x(near, width, poly, 128);
            j += 1;
        }
        Shifts(table)
    }

    /// The pair that moves a lane `lanes` lanes ahead, if in reach.
    pub(super) fn by(&self, lanes: usize) -> Option<(i64, i64)> {
        self.0.get(lanes).copied().filter(|_| lanes > 0)
    }
}

/// The ICRC's shift table.
pub(super) static CRC32_SHIFTS: Shifts = Shifts::new(32, super::CRC32_POLY);
/// The VCRC's shift table.
pub(super) static CRC16_SHIFTS: Shifts = Shifts::new(16, super::VCRC_POLY);
