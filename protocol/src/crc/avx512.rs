//! Both packet CRCs by 512-bit carry-less multiplication (x86-64 AVX-512F
//! with VPCLMULQDQ), separately or in one fused pass.
//!
//! The arithmetic is that of [`super::clmul`] (read its documentation
//! first): a reflected CRC reads 16-byte blocks little-endian as 128-bit
//! lanes, and a lane moves `d` bits later by two 64×64 carry-less
//! multiplies with constants x^(d-1) mod P and x^(d+63) mod P, bit-reversed
//! into 64 bits. Nothing in that depends on the CRC's width, so the same
//! code folds the 32-bit ICRC polynomial and the 16-bit VCRC polynomial,
//! each with its own constants ([`Spec`]). A 512-bit register holds four
//! consecutive lanes (64 bytes); four registers fold 256 bytes per step
//! (2048 bits ahead), then fold into one (512 bits at a time), its four
//! lanes into one (384, 256 and 128 bits), whole 16-byte blocks into that,
//! and the last lane and the tail go through the scalar code from a zero
//! register. A start register is XORed into the first message bits, which
//! for a reflected CRC is the same as starting from it.
//!
//! The fused pass loads each 64 bytes once and folds them into both CRCs'
//! registers: the packet payload is the bulk of both the ICRC's and the
//! VCRC's input, so a packet is read once on build and once on check
//! instead of twice each. The unit tests hold every path to the tables at
//! every length and alignment.

#![allow(unsafe_code)]
// Every function here but the `WidePath` methods is safe, with
// `#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]`: they call
// one another without `unsafe` (the compiler knows the features are
// enabled there), and code without the features reaches them only through
// `WidePath::fold_unchecked` and `fold_two_unchecked`, whose callers check
// the CPU first. The `unsafe` blocks left are the unaligned loads and
// stores through pointers.

use super::fold::{Folded, Spec, WidePath};
use std::arch::x86_64::{
    __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32,
    _mm512_loadu_si512, _mm512_set_epi64, _mm512_ternarylogic_epi64, _mm512_xor_si512,
    _mm_clmulepi64_si128, _mm_loadu_si128, _mm_set_epi64x, _mm_storeu_si128,
    _mm_ternarylogic_epi64,
};

/// This path, for [`WidePath`].
pub(super) struct Avx512;

impl WidePath for Avx512 {
    const MIN_LEN: usize = 256;

    fn available() -> bool {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512vl")
            && std::is_x86_feature_detected!("vpclmulqdq")
    }

    unsafe fn fold_unchecked<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a> {
        // SAFETY: `fold_one` needs only the CPU features it is compiled
        // for, which the caller checked (`available`, as this method's
        // contract says); it reads memory only through the slice.
        unsafe { fold_one(spec, register, bytes) }
    }

    unsafe fn fold_two_unchecked<'a>(
        a: &Spec,
        ra: u32,
        b: &Spec,
        rb: u32,
        bytes: &'a [u8],
    ) -> (Folded<'a>, Folded<'a>) {
        // SAFETY: as in `fold_unchecked`: `fold_pair` needs the same
        // features, which the caller checked.
        unsafe { fold_pair(a, ra, b, rb, bytes) }
    }
}

/// A constant pair broadcast to all four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn wide(k: (i64, i64)) -> __m512i {
    _mm512_broadcast_i32x4(_mm_set_epi64x(k.1, k.0))
}

/// 64 message bytes as four lanes.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn load(chunk: &[u8; 64]) -> __m512i {
    // SAFETY: `chunk` is 64 readable bytes; the load is unaligned.
    unsafe { _mm512_loadu_si512(chunk.as_ptr().cast()) }
}

/// `x` moved forward by the distance of `k`, XORed into `data`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn advance(x: __m512i, k: __m512i, data: __m512i) -> __m512i {
    _mm512_ternarylogic_epi64::<0x96>(
        _mm512_clmulepi64_epi128::<0x00>(x, k),
        _mm512_clmulepi64_epi128::<0x11>(x, k),
        data,
    )
}

/// One lane moved forward by the distance of `k` (a pair) and XORed into
/// `data`.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn advance128(x: __m128i, k: (i64, i64), data: __m128i) -> __m128i {
    let k = _mm_set_epi64x(k.1, k.0);
    _mm_ternarylogic_epi64::<0x96>(
        _mm_clmulepi64_si128::<0x00>(x, k),
        _mm_clmulepi64_si128::<0x11>(x, k),
        data,
    )
}

/// The four registers of one CRC in progress.
#[derive(Clone, Copy)]
struct Lanes([__m512i; 4]);

impl Lanes {
    /// Starts on the first 256 bytes, with `register` XORed into the first
    /// message bits.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
    fn start(first: &[__m512i; 4], register: u32) -> Self {
        let mut x = *first;
        x[0] = _mm512_xor_si512(
            x[0],
            _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0, i64::from(register)),
        );
        Lanes(x)
    }

    /// Folds the next 256 bytes in.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
    fn step(&mut self, by2048: __m512i, next: &[__m512i; 4]) {
        for (x, d) in self.0.iter_mut().zip(next) {
            *x = advance(*x, by2048, *d);
        }
    }

    /// Folds the four registers into one, then `rest` (the input after the
    /// last 256-byte step) into that, down to the last lane and the tail.
    #[inline]
    #[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
    fn finish<'a>(self, spec: &Spec, rest: &'a [u8]) -> Folded<'a> {
        let by512 = wide(spec.by512);
        let [x0, x1, x2, x3] = self.0;
        let mut acc = advance(advance(advance(x0, by512, x1), by512, x2), by512, x3);
        let mut chunks = rest.chunks_exact(64);
        for chunk in chunks.by_ref() {
            let chunk: &[u8; 64] = chunk.try_into().unwrap_or(&[0; 64]);
            acc = advance(acc, by512, load(chunk));
        }
        let l0 = _mm512_extracti32x4_epi32::<0>(acc);
        let l1 = _mm512_extracti32x4_epi32::<1>(acc);
        let l2 = _mm512_extracti32x4_epi32::<2>(acc);
        let l3 = _mm512_extracti32x4_epi32::<3>(acc);
        // l0·x^384 + l1·x^256 + l2·x^128 + l3.
        let mut lane = advance128(
            l0,
            spec.by384,
            advance128(l1, spec.by256, advance128(l2, spec.by128, l3)),
        );
        let mut blocks = chunks.remainder().chunks_exact(16);
        for block in blocks.by_ref() {
            // SAFETY: `block` is 16 readable bytes; the load is unaligned.
            let data = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
            lane = advance128(lane, spec.by128, data);
        }
        let mut last = [0u8; 16];
        // SAFETY: `last` is 16 writable bytes; the store is unaligned.
        unsafe { _mm_storeu_si128(last.as_mut_ptr().cast(), lane) };
        Folded {
            last,
            tail: blocks.remainder(),
        }
    }
}

/// Splits `bytes` into its 256-byte steps and what follows them.
fn steps(bytes: &[u8]) -> (std::slice::ChunksExact<'_, u8>, &[u8]) {
    let steps = bytes.chunks_exact(256);
    let rest = steps.remainder();
    (steps, rest)
}

/// One 256-byte step as four registers.
#[inline]
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn load_step(step: &[u8]) -> [__m512i; 4] {
    let quarter = |i: usize| -> &[u8; 64] {
        step.get(i * 64..i * 64 + 64)
            .and_then(|q| q.try_into().ok())
            .unwrap_or(&[0; 64])
    };
    [
        load(quarter(0)),
        load(quarter(1)),
        load(quarter(2)),
        load(quarter(3)),
    ]
}

/// Folds `bytes`, at least [`Avx512::MIN_LEN`] long (a shorter
/// input gives a wrong CRC, nothing unsound: no load goes past the slice).
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn fold_one<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a> {
    let by2048 = wide(spec.by2048);
    let (mut steps, rest) = steps(bytes);
    let first = load_step(steps.next().unwrap_or(&[0u8; 256][..]));
    let mut x = Lanes::start(&first, register);
    for step in steps {
        x.step(by2048, &load_step(step));
    }
    x.finish(spec, rest)
}

/// Folds `bytes` for two CRCs from the same loads; `bytes` as for
/// [`fold_one`].
#[target_feature(enable = "avx512f,avx512vl,vpclmulqdq")]
fn fold_pair<'a>(
    a: &Spec,
    ra: u32,
    b: &Spec,
    rb: u32,
    bytes: &'a [u8],
) -> (Folded<'a>, Folded<'a>) {
    let (ka, kb) = (wide(a.by2048), wide(b.by2048));
    let (mut steps, rest) = steps(bytes);
    let first = load_step(steps.next().unwrap_or(&[0u8; 256][..]));
    let mut x = Lanes::start(&first, ra);
    let mut y = Lanes::start(&first, rb);
    for step in steps {
        let data = load_step(step);
        x.step(ka, &data);
        y.step(kb, &data);
    }
    (x.finish(a, rest), y.finish(b, rest))
}
