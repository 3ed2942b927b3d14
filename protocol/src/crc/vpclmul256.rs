//! Both packet CRCs by 256-bit carry-less multiplication (x86-64 AVX2 with
//! VPCLMULQDQ: AMD Zen 3, and Intel CPUs whose AVX-512 is absent),
//! separately or in one fused pass: the folds of [`super::wide`] on a
//! register of two 16-byte lanes, 128 bytes per step (1024 bits ahead),
//! then 256, and the two lanes into one by 128 bits. Without it a CPU of
//! this kind ran crc32fast (ICRC) and the 128-bit VCRC fold (`clmul`) one
//! after the other: two passes, four per packet sent and received.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_extracti128_si256,
    _mm256_loadu_si256, _mm256_set_epi64x, _mm256_setzero_si256, _mm256_xor_si256,
    _mm_clmulepi64_si128, _mm_set_epi64x, _mm_xor_si128,
};

use super::fold::{Folded, Spec, WidePath};
use super::wide::{self, Register};

/// This path, for [`WidePath`].
pub(super) struct Vpclmul256;

impl WidePath for Vpclmul256 {
    const MIN_LEN: usize = 4 * Ymm::BYTES;

    fn available() -> bool {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
    }

    unsafe fn fold_unchecked<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a> {
        // SAFETY: the caller checked the CPU's features and the length.
        unsafe { fold_one(spec, register, bytes) }
    }

    unsafe fn fold_two_unchecked<'a>(
        a: &Spec,
        ra: u32,
        b: &Spec,
        rb: u32,
        bytes: &'a [u8],
    ) -> (Folded<'a>, Folded<'a>) {
        // SAFETY: as in `fold_unchecked`.
        unsafe { fold_pair(a, ra, b, rb, bytes) }
    }
}

/// [`wide::fold_one`] on 256-bit registers.
///
/// # Safety
///
/// The CPU has AVX2, VPCLMULQDQ and PCLMULQDQ; `bytes` is at least
/// [`Vpclmul256::MIN_LEN`] long.
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
unsafe fn fold_one<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a> {
    // SAFETY: this function's features are the path's.
    unsafe { wide::fold_one::<Ymm>(spec, register, bytes) }
}

/// [`wide::fold_pair`] on 256-bit registers.
///
/// # Safety
///
/// As [`fold_one`].
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
unsafe fn fold_pair<'a>(
    a: &Spec,
    ra: u32,
    b: &Spec,
    rb: u32,
    bytes: &'a [u8],
) -> (Folded<'a>, Folded<'a>) {
    // SAFETY: as in `fold_one`.
    unsafe { wide::fold_pair::<Ymm>(a, ra, b, rb, bytes) }
}

/// A 256-bit register: two lanes.
#[derive(Clone, Copy)]
struct Ymm(__m256i);

// SAFETY (every block below): the methods run inlined into `fold_one` and
// `fold_pair`, whose callers checked the CPU's features; loads and stores
// go through slices and arrays of the right length.
impl Register for Ymm {
    const BYTES: usize = 32;

    fn step_constants(spec: &Spec) -> (i64, i64) {
        spec.by1024
    }

    fn register_constants(spec: &Spec) -> (i64, i64) {
        spec.by256
    }

    #[inline(always)]
    unsafe fn splat(k: (i64, i64)) -> Self {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe { Ymm(_mm256_set_epi64x(k.1, k.0, k.1, k.0)) }
    }

    #[inline(always)]
    unsafe fn load(bytes: &[u8]) -> Self {
        match bytes.first_chunk::<32>() {
            // SAFETY: the CPU has the features (fold_one/fold_pair callers checked); the pointer is to a chunk of exactly the register size.
            Some(chunk) => unsafe { Ymm(_mm256_loadu_si256(chunk.as_ptr().cast())) },
            // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
            None => unsafe { Ymm(_mm256_setzero_si256()) },
        }
    }

    #[inline(always)]
    unsafe fn xor_start(self, register: u32) -> Self {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        let start = unsafe { _mm256_set_epi64x(0, 0, 0, i64::from(register)) };
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe { Ymm(_mm256_xor_si256(self.0, start)) }
    }

    #[inline(always)]
    unsafe fn advance(x: Self, k: Self, data: Self) -> Self {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe {
            Ymm(_mm256_xor_si256(
                _mm256_xor_si256(
                    _mm256_clmulepi64_epi128::<0x00>(x.0, k.0),
                    _mm256_clmulepi64_epi128::<0x11>(x.0, k.0),
                ),
                data.0,
            ))
        }
    }

    #[inline(always)]
    unsafe fn to_lane(self, spec: &Spec) -> __m128i {
        // l0·x^128 + l1.
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe {
            Self::advance128(
                _mm256_castsi256_si128(self.0),
                spec.by128,
                _mm256_extracti128_si256::<1>(self.0),
            )
        }
    }

    #[inline(always)]
    unsafe fn advance128(x: __m128i, k: (i64, i64), data: __m128i) -> __m128i {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe {
            let k = _mm_set_epi64x(k.1, k.0);
            _mm_xor_si128(
                _mm_xor_si128(
                    _mm_clmulepi64_si128::<0x00>(x, k),
                    _mm_clmulepi64_si128::<0x11>(x, k),
                ),
                data,
            )
        }
    }
}
