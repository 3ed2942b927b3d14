//! Both packet CRCs by 256-bit carry-less multiplication (x86-64 AVX2 with
//! VPCLMULQDQ: AMD Zen 3, and Intel CPUs whose AVX-512 is absent),
//! separately or in one fused pass.
//!
//! The same scheme as [`super::avx512`] at half the width: a 256-bit
//! register holds two consecutive 16-byte lanes, four registers fold 128
//! bytes per step (1024 bits ahead), then fold into one (256 bits at a
//! time), its two lanes into one (128 bits), whole 16-byte blocks into
//! that, and the last lane and the tail go through the scalar code from a
//! zero register. The fused pass loads each 32 bytes once for both CRCs.
//! Without it a CPU of this kind ran crc32fast (ICRC) and the 128-bit
//! VCRC fold (`clmul`) one after the other: two passes, four per packet
//! sent and received.

#![allow(unsafe_code)]
// Every function here but the `WidePath` methods is safe, with
// `#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]`: they call
// one another without `unsafe` (the compiler knows the features are
// enabled there), and code without the features reaches them only through
// `WidePath::fold_unchecked` and `fold_two_unchecked`, whose callers check
// the CPU first. The `unsafe` blocks left are the unaligned loads and
// stores through pointers.

use std::arch::x86_64::{
    __m128i, __m256i, _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_extracti128_si256,
    _mm256_loadu_si256, _mm256_set_epi64x, _mm256_xor_si256, _mm_clmulepi64_si128, _mm_loadu_si128,
    _mm_set_epi64x, _mm_storeu_si128, _mm_xor_si128,
};

use super::fold::{Folded, Spec, WidePath};

/// This path, for [`WidePath`].
pub(super) struct Vpclmul256;

impl WidePath for Vpclmul256 {
    const MIN_LEN: usize = 128;

    fn available() -> bool {
        std::is_x86_feature_detected!("avx2")
            && std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("pclmulqdq")
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

/// A constant pair in both lanes.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn wide(k: (i64, i64)) -> __m256i {
    _mm256_set_epi64x(k.1, k.0, k.1, k.0)
}

/// 32 message bytes as two lanes.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn load(chunk: &[u8; 32]) -> __m256i {
    // SAFETY: `chunk` is 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) }
}

/// `x` moved forward by the distance of `k`, XORed into `data`.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn advance(x: __m256i, k: __m256i, data: __m256i) -> __m256i {
    _mm256_xor_si256(
        _mm256_xor_si256(
            _mm256_clmulepi64_epi128::<0x00>(x, k),
            _mm256_clmulepi64_epi128::<0x11>(x, k),
        ),
        data,
    )
}

/// One lane moved forward by the distance of `k` (a pair) and XORed into
/// `data`.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn advance128(x: __m128i, k: (i64, i64), data: __m128i) -> __m128i {
    let k = _mm_set_epi64x(k.1, k.0);
    _mm_xor_si128(
        _mm_xor_si128(
            _mm_clmulepi64_si128::<0x00>(x, k),
            _mm_clmulepi64_si128::<0x11>(x, k),
        ),
        data,
    )
}

/// One 128-byte step as four registers.
#[inline]
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn load_step(step: &[u8]) -> [__m256i; 4] {
    let quarter = |i: usize| -> &[u8; 32] {
        step.get(i * 32..i * 32 + 32)
            .and_then(|q| q.try_into().ok())
            .unwrap_or(&[0; 32])
    };
    [
        load(quarter(0)),
        load(quarter(1)),
        load(quarter(2)),
        load(quarter(3)),
    ]
}

/// The four registers of one CRC in progress.
#[derive(Clone, Copy)]
struct Lanes([__m256i; 4]);

impl Lanes {
    /// Starts on the first 128 bytes, with `register` XORed into the first
    /// message bits.
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
    fn start(first: &[__m256i; 4], register: u32) -> Self {
        let mut x = *first;
        x[0] = _mm256_xor_si256(x[0], _mm256_set_epi64x(0, 0, 0, i64::from(register)));
        Lanes(x)
    }

    /// Folds the next 128 bytes in.
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
    fn step(&mut self, by1024: __m256i, next: &[__m256i; 4]) {
        for (x, d) in self.0.iter_mut().zip(next) {
            *x = advance(*x, by1024, *d);
        }
    }

    /// Folds the four registers into one, then `rest` (the input after the
    /// last 128-byte step) into that, down to the last lane and the tail.
    #[inline]
    #[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
    fn finish<'a>(self, spec: &Spec, rest: &'a [u8]) -> Folded<'a> {
        let by256 = wide(spec.by256);
        let [x0, x1, x2, x3] = self.0;
        let mut acc = advance(advance(advance(x0, by256, x1), by256, x2), by256, x3);
        let mut chunks = rest.chunks_exact(32);
        for chunk in chunks.by_ref() {
            let chunk: &[u8; 32] = chunk.try_into().unwrap_or(&[0; 32]);
            acc = advance(acc, by256, load(chunk));
        }
        // l0·x^128 + l1.
        let mut lane = advance128(
            _mm256_castsi256_si128(acc),
            spec.by128,
            _mm256_extracti128_si256::<1>(acc),
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

/// Splits `bytes` into its 128-byte steps and what follows them.
fn steps(bytes: &[u8]) -> (std::slice::ChunksExact<'_, u8>, &[u8]) {
    let steps = bytes.chunks_exact(128);
    let rest = steps.remainder();
    (steps, rest)
}

/// Folds `bytes`, at least [`Vpclmul256::MIN_LEN`] long (a shorter
/// input gives a wrong CRC, nothing unsound: no load goes past the slice).
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn fold_one<'a>(spec: &Spec, register: u32, bytes: &'a [u8]) -> Folded<'a> {
    let by1024 = wide(spec.by1024);
    let (mut steps, rest) = steps(bytes);
    let first = load_step(steps.next().unwrap_or(&[0u8; 128][..]));
    let mut x = Lanes::start(&first, register);
    for step in steps {
        x.step(by1024, &load_step(step));
    }
    x.finish(spec, rest)
}

/// Folds `bytes` for two CRCs from the same loads; `bytes` as for
/// [`fold_one`].
#[target_feature(enable = "avx2,vpclmulqdq,pclmulqdq")]
fn fold_pair<'a>(
    a: &Spec,
    ra: u32,
    b: &Spec,
    rb: u32,
    bytes: &'a [u8],
) -> (Folded<'a>, Folded<'a>) {
    let (ka, kb) = (wide(a.by1024), wide(b.by1024));
    let (mut steps, rest) = steps(bytes);
    let first = load_step(steps.next().unwrap_or(&[0u8; 128][..]));
    let mut x = Lanes::start(&first, ra);
    let mut y = Lanes::start(&first, rb);
    for step in steps {
        let data = load_step(step);
        x.step(ka, &data);
        y.step(kb, &data);
    }
    (x.finish(a, rest), y.finish(b, rest))
}
