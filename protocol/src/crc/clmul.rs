//! VCRC by carry-less multiplication (x86-64 PCLMULQDQ).
//!
//! The message is a polynomial over GF(2); a reflected CRC reads each
//! 16-byte block little-endian, so bit i of a 128-bit lane is the
//! coefficient of x^(127-i) of that block. Folding replaces a lane X that
//! lies `dist` bits before a later lane by X·x^dist mod P, which leaves the
//! message's residue mod P, and so the CRC, unchanged: with X = H·x^64 + L
//! (H in the lane's low quadword), H·(x^(64+dist) mod P) and
//! L·(x^dist mod P) are each one 64×64 carry-less multiply whose product
//! (under 80 bits) lands in the later lane's bit order when the constant is
//! x^(d-1) mod P stored bit-reversed in 64 bits (the product of two 64-bit
//! reflected operands is one bit short of the lane's 128). Four lanes fold
//! 64 bytes per step; the last lane and the tail then go through the
//! slicing tables from a zero register, the all-ones start having been
//! XORed into the first two message bytes (the same thing for a reflected
//! CRC; any other start register the same way). Being linear algebra on the same polynomial, it is bit-exact with
//! the tables; the tests compare the two on every length and alignment.

#![allow(unsafe_code)]
// The folding functions are safe `#[target_feature(enable = "pclmulqdq")]`
// functions: they call one another without `unsafe` (the compiler knows
// the feature is enabled there), and code without the feature must call
// them in an `unsafe` block after checking the CPU (`fold`, `advance_lane`).

use std::arch::x86_64::{
    __m128i, _mm_clmulepi64_si128, _mm_cvtsi128_si64, _mm_set_epi64x, _mm_unpackhi_epi64,
    _mm_xor_si128,
};

/// Shortest input folded (four lanes); shorter goes through the tables.
pub(super) const MIN_LEN: usize = 64;

/// A folding constant: x^(d-1) mod P, bit-reversed into 64 bits.
const fn k(d: u32) -> i64 {
    super::fold_constant(16, super::VCRC_POLY, d)
}

/// The raw VCRC register after feeding `bytes` (at least [`MIN_LEN`]
/// long) to `register`, or `None` if the CPU lacks PCLMULQDQ.
pub(super) fn fold(register: u16, bytes: &[u8]) -> Option<u16> {
    if !std::is_x86_feature_detected!("pclmulqdq") {
        return None;
    }
    // SAFETY: `fold_pclmul` needs PCLMULQDQ, detected just above, and
    // SSE2, which every x86-64 CPU has; it touches memory only through
    // the slice.
    Some(unsafe { fold_pclmul(register, bytes) })
}

/// One 16-byte block as a lane (little-endian, as the CRC reads it).
#[inline]
#[target_feature(enable = "pclmulqdq")]
fn lane(block: &[u8]) -> __m128i {
    let word = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(block.get(at..at + 8).unwrap_or(&[0; 8]));
        i64::from_le_bytes(w)
    };
    _mm_set_epi64x(word(8), word(0))
}

/// `x` moved forward by the distance `k` encodes (low quadword of `k`:
/// the constant for `x`'s low quadword, which is the far half).
#[inline]
#[target_feature(enable = "pclmulqdq")]
fn advance(x: __m128i, k: __m128i) -> __m128i {
    _mm_xor_si128(
        _mm_clmulepi64_si128::<0x00>(x, k),
        _mm_clmulepi64_si128::<0x11>(x, k),
    )
}

/// [`fold`] on a CPU with PCLMULQDQ, for any length.
#[target_feature(enable = "pclmulqdq")]
fn fold_pclmul(register: u16, bytes: &[u8]) -> u16 {
    const BY4: (i64, i64) = (k(512), k(512 + 64));
    const BY1: (i64, i64) = (k(128), k(128 + 64));
    let by4 = _mm_set_epi64x(BY4.0, BY4.1);
    let by1 = _mm_set_epi64x(BY1.0, BY1.1);
    let Some((first, after)) = bytes.split_first_chunk::<64>() else {
        return super::vcrc_sliced(register, bytes);
    };
    let mut x = [
        lane(&first[..16]),
        lane(&first[16..32]),
        lane(&first[32..48]),
        lane(&first[48..]),
    ];
    // The start register, XORed into the first 16 message bits.
    x[0] = _mm_xor_si128(x[0], _mm_set_epi64x(0, i64::from(register)));
    let mut rest = after.chunks_exact(64);
    for quad in rest.by_ref() {
        x[0] = _mm_xor_si128(advance(x[0], by4), lane(&quad[..16]));
        x[1] = _mm_xor_si128(advance(x[1], by4), lane(&quad[16..32]));
        x[2] = _mm_xor_si128(advance(x[2], by4), lane(&quad[32..48]));
        x[3] = _mm_xor_si128(advance(x[3], by4), lane(&quad[48..]));
    }
    let mut acc = _mm_xor_si128(advance(x[0], by1), x[1]);
    acc = _mm_xor_si128(advance(acc, by1), x[2]);
    acc = _mm_xor_si128(advance(acc, by1), x[3]);
    // Up to three whole blocks are left after the last 64-byte step.
    let mut blocks = rest.remainder().chunks_exact(16);
    for block in blocks.by_ref() {
        acc = _mm_xor_si128(advance(acc, by1), lane(block));
    }
    let tail = blocks.remainder();
    let lo = _mm_cvtsi128_si64(acc) as u64;
    let hi = _mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)) as u64;
    let mut last = [0u8; 16];
    last[..8].copy_from_slice(&lo.to_le_bytes());
    last[8..].copy_from_slice(&hi.to_le_bytes());
    let register = super::vcrc_sliced(0, &last);
    super::vcrc_sliced(register, tail)
}

/// `lane` (16 message bytes) moved ahead by the distance of the constant
/// pair `k` (far, near; as in `fold::Spec`), as 16 message bytes; `None`
/// if the CPU lacks PCLMULQDQ.
pub(super) fn advance_lane(lane: [u8; 16], k: (i64, i64)) -> Option<[u8; 16]> {
    if !std::is_x86_feature_detected!("pclmulqdq") {
        return None;
    }
    // SAFETY: `advance_pclmul` needs PCLMULQDQ, detected just above, and
    // SSE2, which every x86-64 CPU has; it touches no memory.
    Some(unsafe { advance_pclmul(u128::from_le_bytes(lane), k) }.to_le_bytes())
}

/// [`advance_lane`] on a CPU with PCLMULQDQ.
#[target_feature(enable = "pclmulqdq")]
fn advance_pclmul(lane: u128, k: (i64, i64)) -> u128 {
    let x = _mm_set_epi64x((lane >> 64) as i64, lane as i64);
    let moved = advance(x, _mm_set_epi64x(k.1, k.0));
    let lo = _mm_cvtsi128_si64(moved) as u64;
    let hi = _mm_cvtsi128_si64(_mm_unpackhi_epi64(moved, moved)) as u64;
    u128::from(hi) << 64 | u128::from(lo)
}
