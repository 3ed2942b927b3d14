//! Both packet CRCs by 512-bit carry-less multiplication (x86-64 AVX-512F
//! with VPCLMULQDQ), separately or in one fused pass: the folds of
//! [`super::wide`] on a register of four 16-byte lanes, 256 bytes per step
//! (2048 bits ahead), then 512, and the lanes into one by 384, 256 and 128
//! bits. The unit tests hold every path to the tables at every length and
//! alignment.

#![allow(unsafe_code)]

use std::arch::x86_64::{
    __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32,
    _mm512_loadu_si512, _mm512_set_epi64, _mm512_setzero_si512, _mm512_ternarylogic_epi64,
    _mm512_xor_si512, _mm_clmulepi64_si128, _mm_set_epi64x, _mm_ternarylogic_epi64,
};

use super::fold::{Folded, Spec, WidePath};
use super::wide::{self, Register};

/// This path, for [`WidePath`].
pub(super) struct Avx512;

impl WidePath for Avx512 {
    const MIN_LEN: usize = 4 * Zmm::BYTES;

    fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("vpclmulqdq")
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

/// [`wide::fold_one`] on 512-bit registers.
///
/// # Safety
///
/// The CPU has AVX-512F, AVX-512VL and VPCLMULQDQ; `bytes` is at least
/// [`Avx512::MIN_LEN`] long.
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
unsafe fn fold_one<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a> {
    // SAFETY: this function's features are the path's.
    unsafe { wide::fold_one::<Zmm>(spec, register, bytes) }
}

/// [`wide::fold_pair`] on 512-bit registers.
///
/// # Safety
///
/// As [`fold_one`].
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
unsafe fn fold_pair<'a>(
    a: &Spec,
    ra: u32,
    b: &Spec,
    rb: u32,
    bytes: &'a [u8],
) -> (Folded<'a>, Folded<'a>) {
    // SAFETY: as in `fold_one`.
    unsafe { wide::fold_pair::<Zmm>(a, ra, b, rb, bytes) }
}

/// A 512-bit register: four lanes.
#[derive(Clone, Copy)]
struct Zmm(__m512i);

// SAFETY (every block below): the methods run inlined into `fold_one` and
// `fold_pair`, whose callers checked the CPU's features; loads and stores
// go through slices and arrays of the right length.
impl Register for Zmm {
    const BYTES: usize = 64;

    fn step_constants(spec: &Spec) -> (i64, i64) {
        spec.by2048
    }

    fn register_constants(spec: &Spec) -> (i64, i64) {
        spec.by512
    }

    #[inline(always)]
    unsafe fn splat(k: (i64, i64)) -> Self {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe { Zmm(_mm512_broadcast_i32x4(_mm_set_epi64x(k.1, k.0))) }
    }

    #[inline(always)]
    unsafe fn load(bytes: &[u8]) -> Self {
        match bytes.first_chunk::<64>() {
            // SAFETY: the CPU has the features (fold_one/fold_pair callers checked); the pointer is to a chunk of exactly the register size.
            Some(chunk) => unsafe { Zmm(_mm512_loadu_si512(chunk.as_ptr().cast())) },
            // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
            None => unsafe { Zmm(_mm512_setzero_si512()) },
        }
    }

    #[inline(always)]
    unsafe fn xor_start(self, register: u32) -> Self {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        let start = unsafe { _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, i64::from(register)) };
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe { Zmm(_mm512_xor_si512(self.0, start)) }
    }

    #[inline(always)]
    unsafe fn advance(x: Self, k: Self, data: Self) -> Self {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe {
            Zmm(_mm512_ternarylogic_epi64::<0x96>(
                _mm512_clmulepi64_epi128::<0x00>(x.0, k.0),
                _mm512_clmulepi64_epi128::<0x11>(x.0, k.0),
                data.0,
            ))
        }
    }

    #[inline(always)]
    unsafe fn to_lane(self, spec: &Spec) -> __m128i {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe {
            let l0 = _mm512_extracti32x4_epi32::<0>(self.0);
            let l1 = _mm512_extracti32x4_epi32::<1>(self.0);
            let l2 = _mm512_extracti32x4_epi32::<2>(self.0);
            let l3 = _mm512_extracti32x4_epi32::<3>(self.0);
            // l0·x^384 + l1·x^256 + l2·x^128 + l3.
            Self::advance128(
                l0,
                spec.by384,
                Self::advance128(l1, spec.by256, Self::advance128(l2, spec.by128, l3)),
            )
        }
    }

    #[inline(always)]
    unsafe fn advance128(x: __m128i, k: (i64, i64), data: __m128i) -> __m128i {
        // SAFETY: the CPU has the features this path needs (fold_one/fold_pair callers checked); register operations only.
        unsafe {
            let k = _mm_set_epi64x(k.1, k.0);
            _mm_ternarylogic_epi64::<0x96>(
                _mm_clmulepi64_si128::<0x00>(x, k),
                _mm_clmulepi64_si128::<0x11>(x, k),
                data,
            )
        }
    }
}
