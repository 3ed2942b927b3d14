//! The wide folds, written once over the register width: a 512-bit
//! (`avx512`) or 256-bit (`vpclmul256`) register of four or two 16-byte
//! lanes ([`Register`]).
//!
//! The arithmetic is that of [`super::clmul`] (read its documentation
//! first): a reflected CRC reads 16-byte blocks little-endian as 128-bit
//! lanes, and a lane moves `d` bits later by two 64×64 carry-less
//! multiplies with constants x^(d-1) mod P and x^(d+63) mod P, bit-reversed
//! into 64 bits. Nothing in that depends on the CRC's width, so the same
//! code folds the 32-bit ICRC polynomial, the 16-bit VCRC polynomial and
//! their product, each with its own constants ([`Spec`]).
//!
//! Four registers fold four registers' worth of bytes per step (256 bytes
//! at 512 bits, 128 at 256), then fold into one (a register at a time),
//! its lanes into one, whole 16-byte blocks into that, and the last lane
//! and the tail go through the scalar code from a zero register. A start
//! register is XORed into the first message bits, which for a reflected
//! CRC is the same as starting from it. The fused pass ([`fold_pair`])
//! loads each register of input once and folds it into both CRCs'
//! registers: the packet payload is the bulk of both the ICRC's and the
//! VCRC's input, so a packet is read once on build and once on check
//! instead of twice each.
//!
//! Everything here is `#[inline(always)]` and carries no target features
//! itself: each width's entry points (`#[target_feature]` functions in its
//! module) instantiate [`fold_one`] and [`fold_pair`], so the whole fold is
//! compiled inside them, with their features.

#![allow(unsafe_code)]

use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128};

use super::fold::{Folded, Spec};

/// One register width: the operations the folds need.
///
/// # Safety
///
/// Every method but the constants' may run only on a CPU with the width's
/// features (its entry points check them and carry them).
pub(super) trait Register: Copy {
    /// Bytes of one register: its 16-byte lanes.
    const BYTES: usize;

    /// The constants that move a register one step (four registers) ahead.
    fn step_constants(spec: &Spec) -> (i64, i64);

    /// The constants that move a register one register ahead.
    fn register_constants(spec: &Spec) -> (i64, i64);

    /// A constant pair in every lane.
    ///
    /// # Safety
    ///
    /// The CPU has the width's features.
    unsafe fn splat(k: (i64, i64)) -> Self;

    /// The first [`Self::BYTES`] of `bytes` as a register; zero if `bytes`
    /// is shorter.
    ///
    /// # Safety
    ///
    /// As [`Self::splat`].
    unsafe fn load(bytes: &[u8]) -> Self;

    /// `register` XORed into the low 32 bits (the first message bits).
    ///
    /// # Safety
    ///
    /// As [`Self::splat`].
    unsafe fn xor_start(self, register: u32) -> Self;

    /// `x` moved forward by the distance of `k`, XORed into `data`.
    ///
    /// # Safety
    ///
    /// As [`Self::splat`].
    unsafe fn advance(x: Self, k: Self, data: Self) -> Self;

    /// The register's lanes folded into one (the first lane furthest
    /// ahead).
    ///
    /// # Safety
    ///
    /// As [`Self::splat`].
    unsafe fn to_lane(self, spec: &Spec) -> __m128i;

    /// One lane moved forward by the distance of `k` (a pair) and XORed
    /// into `data`.
    ///
    /// # Safety
    ///
    /// As [`Self::splat`].
    unsafe fn advance128(x: __m128i, k: (i64, i64), data: __m128i) -> __m128i;
}

/// The four registers of one CRC in progress.
#[derive(Clone, Copy)]
struct Lanes<R>([R; 4]);

impl<R: Register> Lanes<R> {
    /// Starts on the first step, with `register` XORed into the first
    /// message bits.
    ///
    /// # Safety
    ///
    /// As [`Register::splat`].
    #[inline(always)]
    unsafe fn start(first: &[R; 4], register: u32) -> Self {
        let mut x = *first;
        // SAFETY: the caller's CPU has the width's features.
        x[0] = unsafe { x[0].xor_start(register) };
        Lanes(x)
    }

    /// Folds the next step in.
    ///
    /// # Safety
    ///
    /// As [`Register::splat`].
    #[inline(always)]
    unsafe fn step(&mut self, k: R, next: &[R; 4]) {
        for (x, d) in self.0.iter_mut().zip(next) {
            // SAFETY: as in `start`.
            *x = unsafe { R::advance(*x, k, *d) };
        }
    }

    /// Folds the four registers into one, then `rest` (the input after the
    /// last step) into that, down to the last lane and the tail.
    ///
    /// # Safety
    ///
    /// As [`Register::splat`].
    #[inline(always)]
    unsafe fn finish<'a>(self, spec: &Spec, rest: &'a [u8]) -> Folded<'a> {
        // SAFETY: as in `start`; the loads read through slices.
        unsafe {
            let k = R::splat(R::register_constants(spec));
            let [x0, x1, x2, x3] = self.0;
            let mut acc = R::advance(R::advance(R::advance(x0, k, x1), k, x2), k, x3);
            let mut chunks = rest.chunks_exact(R::BYTES);
            for chunk in chunks.by_ref() {
                acc = R::advance(acc, k, R::load(chunk));
            }
            let mut lane = acc.to_lane(spec);
            let mut blocks = chunks.remainder().chunks_exact(16);
            for block in blocks.by_ref() {
                // `block` is 16 readable bytes; the load is unaligned.
                let data = _mm_loadu_si128(block.as_ptr().cast());
                lane = R::advance128(lane, spec.by128, data);
            }
            let mut last = [0u8; 16];
            // `last` is 16 writable bytes; the store is unaligned.
            _mm_storeu_si128(last.as_mut_ptr().cast(), lane);
            Folded {
                last,
                tail: blocks.remainder(),
            }
        }
    }
}

/// Splits `bytes` into its steps (four registers each) and what follows
/// them.
#[inline(always)]
fn steps<R: Register>(bytes: &[u8]) -> (std::slice::ChunksExact<'_, u8>, &[u8]) {
    let steps = bytes.chunks_exact(4 * R::BYTES);
    let rest = steps.remainder();
    (steps, rest)
}

/// One step as four registers (zeros past the end of a short `step`).
///
/// # Safety
///
/// As [`Register::splat`].
#[inline(always)]
unsafe fn load_step<R: Register>(step: &[u8]) -> [R; 4] {
    let quarter = |i: usize| step.get(i * R::BYTES..).unwrap_or_default();
    // SAFETY: as in `Lanes::start`; `load` reads through the slice.
    unsafe {
        [
            R::load(quarter(0)),
            R::load(quarter(1)),
            R::load(quarter(2)),
            R::load(quarter(3)),
        ]
    }
}

/// Folds `bytes` for the CRC of `spec` from raw register `register`.
///
/// # Safety
///
/// As [`Register::splat`]; `bytes` at least one step (`4 * R::BYTES`)
/// long.
#[inline(always)]
pub(super) unsafe fn fold_one<'a, R: Register>(
    spec: &Spec,
    register: u32,
    bytes: &'a [u8],
) -> Folded<'a> {
    // SAFETY: as in `Lanes::start`.
    unsafe {
        let k = R::splat(R::step_constants(spec));
        let (mut steps, rest) = steps::<R>(bytes);
        let first = load_step::<R>(steps.next().unwrap_or_default());
        let mut x = Lanes::start(&first, register);
        for step in steps {
            x.step(k, &load_step(step));
        }
        x.finish(spec, rest)
    }
}

/// Folds `bytes` for two CRCs from the same loads: `a` from raw register
/// `ra`, `b` from `rb`.
///
/// # Safety
///
/// As [`fold_one`].
#[inline(always)]
pub(super) unsafe fn fold_pair<'a, R: Register>(
    a: &Spec,
    ra: u32,
    b: &Spec,
    rb: u32,
    bytes: &'a [u8],
) -> (Folded<'a>, Folded<'a>) {
    // SAFETY: as in `Lanes::start`.
    unsafe {
        let (ka, kb) = (
            R::splat(R::step_constants(a)),
            R::splat(R::step_constants(b)),
        );
        let (mut steps, rest) = steps::<R>(bytes);
        let first = load_step::<R>(steps.next().unwrap_or_default());
        let mut x = Lanes::start(&first, ra);
        let mut y = Lanes::start(&first, rb);
        for step in steps {
            let data = load_step(step);
            x.step(ka, &data);
            y.step(kb, &data);
        }
        (x.finish(a, rest), y.finish(b, rest))
    }
}
