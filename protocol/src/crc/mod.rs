//! The two IB packet CRCs (IBA vol 1 §7.8).
//!
//! # ICRC (invariant CRC, 4 bytes)
//!
//! CRC-32 with the Ethernet polynomial 0x04C11DB7, reflected (bytes enter
//! least significant bit first; table polynomial 0xEDB88320), register
//! initialised to all ones, result inverted: the parameters of zlib's and
//! Linux's `crc32_le`, check value `crc32(b"123456789") == 0xCBF43926`.
//! It covers the packet from the first byte of the LRH through the last pad
//! byte, with the *variant* fields (those a switch or router may rewrite)
//! replaced by ones:
//!
//! - IBA local packet (LNH 2, no GRH): LRH.VL (the top nibble of byte 0) and
//!   BTH.resv8a (BTH byte 4: FECN, BECN and resv6).
//! - IBA global packet (LNH 3): the whole LRH (a router rewrites it), GRH
//!   TClass, FlowLabel and HopLmt, and BTH.resv8a.
//!
//! Sources: IBA vol 1 §7.8.1 as summarised by MindShare's *InfiniBand Network
//! Architecture* ch. 25 ("Fields Excluded from ICRC" for local and global
//! packets), and Linux `rxe_icrc.c`, whose RoCEv2 ICRC is exactly the global
//! case (8 bytes of ones for the LRH, the IP header's TClass/FlowLabel/HopLmt
//! and checksums as ones, BTH resv8a as ones). The CRC routine is checked
//! against 250 kernel-computed RoCEv2 ICRCs (`tests/roce_capture.rs`); the
//! native-IB masking has no outside test vector.
//!
//! The ICRC is stored least significant byte first, as rxe stores it (the
//! natural order for a reflected CRC: the register's bit 0 goes out first).
//!
//! # VCRC (variant CRC, 2 bytes)
//!
//! CRC-16 with polynomial 0x100B, computed over every byte from the LRH
//! through the ICRC. IBA gives the polynomial and an all-ones start; the bit
//! order and final inversion here follow the only implementation found in
//! public source, Endace's DAG capture library (`dagcrc.c`,
//! `dagcrc_infiniband_vcrc16_r`): reflected like the ICRC (table polynomial
//! 0xD008 = 0x100B bit-reversed), init 0xFFFF, final XOR 0xFFFF. Check value
//! `vcrc(b"123456789") == 0x0A3D` (computed with an independent bitwise model;
//! the public CRC catalogues list no CRC-16 with this polynomial). Stored
//! least significant byte first, like the ICRC. No captured native IB packet
//! was available to confirm this against hardware.
//!
//! # Speed
//!
//! Both CRCs run over every byte of every packet, twice (build and parse),
//! so neither is computed a byte at a time. On x86-64 CPUs with AVX-512F/VL
//! and VPCLMULQDQ (detected at run time) inputs of 256 bytes and more are
//! folded 256 bytes per step with 512-bit carry-less multiplies (`avx512`),
//! and [`packet_crcs`] computes a packet's ICRC and VCRC in one pass over
//! the same loads (Packet::build and PacketView::parse use it). CPUs with
//! VPCLMULQDQ but no AVX-512 (AMD Zen 3, for one) do the same with 256-bit
//! registers, 128 bytes per step (`vpclmul256`; both CRCs of a 4 KiB
//! packet at ~10 GB/s against ~7 GB/s for the two 128-bit passes there).
//! The constants both share are in `fold`. [`packet_crcs`] goes further
//! on either: it folds once modulo the product of the two polynomials
//! (degree 48), which keeps the residue modulo each, so a packet costs
//! the carry-less multiplies of one CRC, not two (4 KiB packets: 10.5 →
//! 17 GB/s on Zen 3); each CRC's start register is added afterwards, moved
//! to the last lane by a table of shift constants (`fold::Shifts`). Otherwise
//! the CRC-32 is [`crc32fast`]'s (carry-less multiply folding where the CPU
//! has it), fed a masked copy of the header bytes and then the rest of the
//! packet in place, and the VCRC folds 64 bytes per step with PCLMULQDQ
//! (`clmul`) or uses slicing-by-16 tables built at compile time. The unit
//! tests hold everything to bit-at-a-time models and every folding path to
//! the tables at every length and alignment; `ibtca-bench crc` (the tests
//! crate) measures them.
//!
//! The folding modules (`clmul`, `wide` with its two register widths
//! `avx512` and `vpclmul256`, and `fold`'s checked entry points) are the
//! crate's only `unsafe` code: SIMD intrinsics that run inside
//! `#[target_feature]` functions, called only after the run-time check,
//! reading memory only through slices whose bounds the safe code around
//! them fixes (each block has a SAFETY comment).

/// Register of a reflected CRC-32 (Ethernet polynomial) in progress.
///
/// The arithmetic is [`crc32fast`]'s (PCLMULQDQ / ARMv8 CRC where the CPU
/// has them, slicing-by-16 tables otherwise) or, for long inputs on CPUs
/// with AVX-512 and VPCLMULQDQ, the 512-bit folding of `avx512`; this type
/// keeps the raw register so that callers can inspect it the way Linux
/// `crc32_le` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32 {
    register: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A CRC with the all-ones start value.
    pub const fn new() -> Self {
        Self { register: !0 }
    }

    /// A CRC whose raw register is `register`.
    const fn from_register(register: u32) -> Self {
        Self { register }
    }

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        self.register = crc32_update(self.register, bytes);
        self
    }

    /// Feeds `bytes` through `crc32fast` alone (no AVX-512 folding).
    fn update_scalar(&mut self, bytes: &[u8]) -> &mut Self {
        // crc32fast keeps the finished (inverted) value as its state.
        let mut hasher = crc32fast::Hasher::new_with_initial(!self.register);
        hasher.update(bytes);
        self.register = !hasher.finalize();
        self
    }

    /// The raw register (not inverted), as Linux `crc32_le` returns it.
    pub const fn register(&self) -> u32 {
        self.register
    }

    /// The CRC: the register inverted.
    pub const fn finish(&self) -> u32 {
        !self.register
    }
}

/// Standard CRC-32 (zlib, Ethernet) of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    !crc32_update(!0, bytes)
}

/// Bytes the VCRC consumes per step of the sliced loop.
const VCRC_SLICE: usize = 16;

/// Slicing-by-16 tables for the VCRC: `VCRC_TABLES[k][i]` is the register
/// (from zero) after feeding byte `i` followed by `k` zero bytes, so
/// `VCRC_TABLES[0]` is the ordinary byte-at-a-time table.
const fn vcrc_tables() -> [[u16; 256]; VCRC_SLICE] {
    let mut tables = [[0u16; 256]; VCRC_SLICE];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u16;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xd008
            } else {
                c >> 1
            };
            k += 1;
        }
        tables[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < VCRC_SLICE {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
}

static VCRC_TABLES: [[u16; 256]; VCRC_SLICE] = vcrc_tables();

/// The IB VCRC of `bytes` (see the module documentation for parameters).
///
/// On x86-64 CPUs with AVX-512 and VPCLMULQDQ (detected at run time)
/// inputs of 256 bytes and more are folded 256 bytes per step
/// (`avx512`); with PCLMULQDQ only, inputs of 64 bytes and more 64 bytes
/// per step (`clmul`); everything else, and every other CPU, uses the
/// slicing-by-16 tables.
pub fn vcrc(bytes: &[u8]) -> u16 {
    !vcrc_update(0xffff, bytes)
}

/// Slicing-by-16 VCRC update: the raw register after feeding `bytes` to
/// `register` (no final inversion).
///
/// Each step folds the register into the next 16 bytes and looks every byte
/// up in the table for its distance from the end of the block, so the 16
/// lookups are independent of one another.
fn vcrc_sliced(register: u16, bytes: &[u8]) -> u16 {
    let t = &VCRC_TABLES;
    let mut register = register;
    let mut rest = bytes;
    while let Some((block, tail)) = rest.split_first_chunk::<VCRC_SLICE>() {
        let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15] = *block;
        let i = usize::from;
        // Bytes 2..16 do not depend on the register: XOR their lookups
        // first, so that the loop-carried path is two lookups and two XORs.
        let ahead = (t[13][i(b2)] ^ t[12][i(b3)])
            ^ (t[11][i(b4)] ^ t[10][i(b5)])
            ^ ((t[9][i(b6)] ^ t[8][i(b7)]) ^ (t[7][i(b8)] ^ t[6][i(b9)]))
            ^ ((t[5][i(b10)] ^ t[4][i(b11)]) ^ (t[3][i(b12)] ^ t[2][i(b13)]))
            ^ (t[1][i(b14)] ^ t[0][i(b15)]);
        // A reflected CRC folds its register into the first two bytes,
        // low byte first.
        let [r0, r1] = register.to_le_bytes();
        register = ahead ^ t[15][i(b0 ^ r0)] ^ t[14][i(b1 ^ r1)];
        rest = tail;
    }
    for &b in rest {
        let index = (register ^ u16::from(b)) as u8;
        register = t[0][usize::from(index)] ^ (register >> 8);
    }
    register
}

/// The ICRC's polynomial without its x^32 term (unreflected).
const CRC32_POLY: u64 = 0x04c1_1db7;
/// The VCRC's polynomial without its x^16 term (unreflected).
const VCRC_POLY: u64 = 0x100b;

/// x^d mod P for the polynomial P = x^width + `poly` (width at most 63),
/// in the usual (unreflected) bit order: bit i is the coefficient of x^i.
const fn xpow_mod(width: u32, poly: u64, d: u32) -> u64 {
    times_xpow(1, width, poly, d)
}

/// r·x^d mod P, for r already reduced modulo P (as [`xpow_mod`]).
const fn times_xpow(mut r: u64, width: u32, poly: u64, d: u32) -> u64 {
    let top = 1u64 << width;
    let mut i = 0;
    while i < d {
        r <<= 1;
        if r & top != 0 {
            r ^= top | poly;
        }
        i += 1;
    }
    r
}

/// A folding constant for a reflected CRC (see `clmul`): x^(d-1) mod P,
/// bit-reversed into 64 bits.
const fn fold_constant(width: u32, poly: u64, d: u32) -> i64 {
    xpow_mod(width, poly, d - 1).reverse_bits() as i64
}

/// x^d mod P for the VCRC polynomial P = x^16 + x^12 + x^3 + x + 1.
#[cfg(test)]
const fn vcrc_xpow_mod(d: u32) -> u16 {
    xpow_mod(16, VCRC_POLY, d) as u16
}

/// The raw VCRC register after feeding `bytes` to `register`, by the
/// fastest path this CPU has.
fn vcrc_update(register: u16, bytes: &[u8]) -> u16 {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(f) = wide_fold(&fold::CRC16, u32::from(register), bytes) {
            return vcrc_sliced(vcrc_sliced(0, &f.last), f.tail);
        }
        if bytes.len() >= clmul::MIN_LEN {
            if let Some(register) = clmul::fold(register, bytes) {
                return register;
            }
        }
    }
    vcrc_sliced(register, bytes)
}

/// The raw CRC-32 register after feeding `bytes` to `register`, by the
/// fastest path this CPU has.
fn crc32_update(register: u32, bytes: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(f) = wide_fold(&fold::CRC32, register, bytes) {
        let last = Crc32::from_register(0).update_scalar(&f.last).register;
        return Crc32::from_register(last).update_scalar(f.tail).register;
    }
    Crc32::from_register(register).update_scalar(bytes).register
}

/// Folds `bytes` for the CRC of `spec` from raw register `register` with
/// the widest carry-less multiply this CPU has (512-bit, then 256-bit
/// VPCLMULQDQ); `None` without either, or for a short input.
#[cfg(target_arch = "x86_64")]
fn wide_fold<'a>(spec: &fold::Spec, register: u32, bytes: &'a [u8]) -> Option<fold::Folded<'a>> {
    Avx512::fold(spec, register, bytes).or_else(|| Vpclmul256::fold(spec, register, bytes))
}

/// [`wide_fold`] for two CRCs from the same loads.
#[cfg(target_arch = "x86_64")]
fn wide_fold_two<'a>(
    a: &fold::Spec,
    ra: u32,
    b: &fold::Spec,
    rb: u32,
    bytes: &'a [u8],
) -> Option<(fold::Folded<'a>, fold::Folded<'a>)> {
    Avx512::fold_two(a, ra, b, rb, bytes).or_else(|| Vpclmul256::fold_two(a, ra, b, rb, bytes))
}

#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod clmul;
#[cfg(target_arch = "x86_64")]
mod fold;
#[cfg(target_arch = "x86_64")]
mod vpclmul256;
#[cfg(target_arch = "x86_64")]
mod wide;
#[cfg(target_arch = "x86_64")]
use {avx512::Avx512, fold::WidePath, vpclmul256::Vpclmul256};

/// LRH + GRH + BTH: the longest prefix that holds variant fields.
const MASKED_PREFIX: usize = 8 + 40 + 12;

/// The first bytes of a packet with its variant fields masked, and where
/// the unmasked rest begins.
struct MaskedPrefix {
    bytes: [u8; MASKED_PREFIX],
    len: usize,
}

impl MaskedPrefix {
    /// Masks the head of `covered` (as far as it goes: nothing panics on
    /// short input), choosing local or global by the LRH's LNH.
    fn of(covered: &[u8]) -> Self {
        let global = covered.get(1).is_some_and(|b| b & 3 == 3);
        let prefix_len = if global { MASKED_PREFIX } else { 8 + 12 };
        let len = prefix_len.min(covered.len());
        let mut bytes = [0u8; MASKED_PREFIX];
        let masked = bytes.get_mut(..len).unwrap_or_default();
        masked.copy_from_slice(covered.get(..len).unwrap_or_default());
        let bth = if global {
            masked.iter_mut().take(8).for_each(|b| *b = 0xff);
            if let Some(grh) = masked.get_mut(8..) {
                // IPVer stays; TClass and FlowLabel (rest of word 0) and HopLmt.
                for (i, b) in grh.iter_mut().enumerate().take(8) {
                    match i {
                        0 => *b |= 0x0f,
                        1..=3 | 7 => *b = 0xff,
                        _ => {}
                    }
                }
            }
            48
        } else {
            if let Some(b) = masked.first_mut() {
                *b |= 0xf0;
            }
            8
        };
        if let Some(resv8a) = masked.get_mut(bth + 4) {
            *resv8a = 0xff;
        }
        MaskedPrefix { bytes, len }
    }

    /// The masked bytes.
    fn masked(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

/// The ICRC of a native IB packet. `covered` is the packet from the first
/// byte of the LRH through the last pad byte (ICRC and VCRC excluded); the
/// variant fields are masked as the module documentation describes, choosing
/// local or global by the LRH's LNH. Input shorter than the headers is
/// masked as far as it goes; nothing here panics.
pub fn icrc(covered: &[u8]) -> u32 {
    let prefix = MaskedPrefix::of(covered);
    let rest = covered.get(prefix.len..).unwrap_or_default();
    Crc32::new().update(prefix.masked()).update(rest).finish()
}

/// Both CRCs of one packet, from one pass over its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketCrcs {
    /// The ICRC of the covered bytes.
    pub icrc: u32,
    /// The VCRC of the covered bytes followed by the ICRC bytes (the
    /// computed ICRC, or the one the packet carries).
    pub vcrc: u16,
}

/// The ICRC of `covered` (as [`icrc`]) and the VCRC of `covered` followed
/// by the four bytes of `carried` (the ICRC a received packet carries,
/// least significant byte first) or, if `None`, of the ICRC just computed
/// (building a packet). Equal to `icrc(covered)` and
/// `vcrc(covered ++ icrc bytes)`, but the bulk of the packet (everything
/// after the masked headers) is read once for both: with AVX-512 and
/// VPCLMULQDQ both CRCs are folded from the same loads.
pub fn packet_crcs(covered: &[u8], carried: Option<u32>) -> PacketCrcs {
    let prefix = MaskedPrefix::of(covered);
    let (head, rest) = covered.split_at(prefix.len.min(covered.len()));
    let r32 = Crc32::new().update(prefix.masked()).register();
    let r16 = vcrc_sliced(0xffff, head);
    let (r32, r16) = fold_both(r32, r16, rest);
    let icrc = !r32;
    let trailer = carried.unwrap_or(icrc).to_le_bytes();
    PacketCrcs {
        icrc,
        vcrc: !vcrc_sliced(r16, &trailer),
    }
}

/// The raw ICRC and VCRC registers after feeding `bytes` to both.
fn fold_both(r32: u32, r16: u16, bytes: &[u8]) -> (u32, u16) {
    #[cfg(target_arch = "x86_64")]
    {
        if let Some(registers) = fold_product(r32, r16, bytes) {
            return registers;
        }
        if let Some((a, b)) = wide_fold_two(&fold::CRC32, r32, &fold::CRC16, u32::from(r16), bytes)
        {
            return (finish_crc32(&a), finish_vcrc(&b));
        }
    }
    (crc32_update(r32, bytes), vcrc_update(r16, bytes))
}

/// [`fold_both`] by one wide fold modulo the product of the two
/// polynomials (`fold::BOTH`), from a zero register: each CRC's start
/// register, as a first lane moved to where the fold's last lane lies
/// (`fold::Shifts`), is XORed into that lane, which each CRC then reduces
/// with its own scalar code. `None` without the CPU features, or for an
/// input too short to fold or too long for the shift tables.
#[cfg(target_arch = "x86_64")]
fn fold_product(r32: u32, r16: u16, bytes: &[u8]) -> Option<(u32, u16)> {
    // The fold leaves the last whole lane; this many lanes after the first.
    let lanes = (bytes.len() / 16).checked_sub(1)?;
    let (k32, k16) = (fold::CRC32_SHIFTS.by(lanes)?, fold::CRC16_SHIFTS.by(lanes)?);
    let folded = wide_fold(&fold::BOTH, 0, bytes)?;
    let with_start = |register: u32, k| {
        let start = clmul::advance_lane(u128::from(register).to_le_bytes(), k)?;
        let mut last = folded.last;
        last.iter_mut().zip(start).for_each(|(b, s)| *b ^= s);
        Some(fold::Folded {
            last,
            tail: folded.tail,
        })
    };
    let icrc = with_start(r32, k32)?;
    let vcrc = with_start(u32::from(r16), k16)?;
    Some((finish_crc32(&icrc), finish_vcrc(&vcrc)))
}

/// The raw CRC-32 register after a fold's last lane and tail.
#[cfg(target_arch = "x86_64")]
fn finish_crc32(f: &fold::Folded<'_>) -> u32 {
    let r = Crc32::from_register(0).update_scalar(&f.last).register;
    Crc32::from_register(r).update_scalar(f.tail).register
}

/// The raw VCRC register after a fold's last lane and tail.
#[cfg(target_arch = "x86_64")]
fn finish_vcrc(f: &fold::Folded<'_>) -> u16 {
    vcrc_sliced(vcrc_sliced(0, &f.last), f.tail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit-at-a-time models, independent of the tables.
    fn crc32_bitwise(bytes: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in bytes {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xedb8_8320
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    fn vcrc_bitwise(bytes: &[u8]) -> u16 {
        // MSB-first formulation with polynomial 0x100B on bit-reversed bytes,
        // then the result reversed: the same CRC, computed the other way.
        let mut c = 0xffffu16;
        for &b in bytes {
            c ^= u16::from(b.reverse_bits()) << 8;
            for _ in 0..8 {
                c = if c & 0x8000 != 0 {
                    (c << 1) ^ 0x100b
                } else {
                    c << 1
                };
            }
        }
        !c.reverse_bits()
    }

    /// A byte-at-a-time table loop: the reference the slicing-by-16
    /// `vcrc` is checked against.
    fn vcrc_bytewise(bytes: &[u8]) -> u16 {
        let mut register: u16 = 0xffff;
        for &b in bytes {
            let index = (register ^ u16::from(b)) as u8;
            register = VCRC_TABLES[0][usize::from(index)] ^ (register >> 8);
        }
        !register
    }

    /// Reference ICRC: the masking spelled out on a full copy, then the
    /// bitwise CRC-32.
    fn icrc_reference(covered: &[u8]) -> u32 {
        let mut v = covered.to_vec();
        let global = v.get(1).is_some_and(|b| b & 3 == 3);
        let mut set = |i: usize, f: &dyn Fn(u8) -> u8| {
            if let Some(b) = v.get_mut(i) {
                *b = f(*b);
            }
        };
        if global {
            (0..8).for_each(|i| set(i, &|_| 0xff));
            set(8, &|b| b | 0x0f);
            [9, 10, 11, 15].into_iter().for_each(|i| set(i, &|_| 0xff));
            set(48 + 4, &|_| 0xff);
        } else {
            set(0, &|b| b | 0xf0);
            set(8 + 4, &|_| 0xff);
        }
        crc32_bitwise(&v)
    }

    #[test]
    fn check_values() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(vcrc(b"123456789"), 0x0a3d);
        assert_eq!(vcrc_bitwise(b"123456789"), 0x0a3d);
    }

    #[test]
    fn rxe_seed() {
        // rxe_icrc.c starts its RoCE ICRC from 0xdebb20e3: "the result of
        // computing a CRC with a seed of 0xffffffff and 8 bytes of 0xff
        // representing a masked LRH".
        assert_eq!(Crc32::new().update(&[0xff; 8]).register(), 0xdebb_20e3);
    }

    #[test]
    fn tables_match_bitwise_models() {
        let data: Vec<u8> = (0..=255u8)
            .chain((0..100u8).map(|i| i.wrapping_mul(7)))
            .collect();
        for len in [0, 1, 2, 5, 64, data.len()] {
            assert_eq!(crc32(&data[..len]), crc32_bitwise(&data[..len]));
            assert_eq!(vcrc(&data[..len]), vcrc_bitwise(&data[..len]));
        }
    }

    #[test]
    fn slicing_tables_are_zero_extensions() {
        // Table k is table 0 followed by k zero bytes through table 0.
        for i in 0..=255u8 {
            let mut c = VCRC_TABLES[0][usize::from(i)];
            for (k, table) in VCRC_TABLES.iter().enumerate().skip(1) {
                c = (c >> 8) ^ VCRC_TABLES[0][usize::from(c as u8)];
                assert_eq!(table[usize::from(i)], c, "table {k}, byte {i}");
            }
        }
    }

    #[test]
    fn vcrc_every_length_around_the_block_size() {
        let data: Vec<u8> = (0..200u32).map(|i| (i * 131 + 17) as u8).collect();
        for start in 0..VCRC_SLICE {
            for end in start..data.len() {
                let s = &data[start..end];
                assert_eq!(vcrc(s), vcrc_bitwise(s), "{start}..{end}");
            }
        }
    }

    #[test]
    fn vcrc_folding_equals_tables_at_every_length_and_alignment() {
        // Lengths across the 64-byte fold step and the 16-byte lanes, on
        // every alignment of the start; both paths of `vcrc` against the
        // tables alone (on a CPU without PCLMULQDQ both are the tables).
        let data: Vec<u8> = (0..1200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for start in 0..16 {
            for end in start..data.len() {
                let s = &data[start..end];
                assert_eq!(vcrc(s), !vcrc_sliced(0xffff, s), "{start}..{end}");
            }
        }
        // All ones and all zeros, long.
        for fill in [0x00, 0xff] {
            let s = vec![fill; 8190];
            assert_eq!(vcrc(&s), vcrc_bitwise(&s));
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vcrc_folding_constants() {
        // x^d mod P by repeated multiplication by x, bit at a time.
        let mut r = 1u32;
        for d in 0..700 {
            assert_eq!(u32::from(vcrc_xpow_mod(d)), r, "x^{d}");
            r <<= 1;
            if r & 0x1_0000 != 0 {
                r ^= 0x1_100b;
            }
        }
        if std::is_x86_feature_detected!("pclmulqdq") {
            let s: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
            assert_eq!(clmul::fold(0xffff, &s), Some(vcrc_sliced(0xffff, &s)));
        }
    }

    /// Data for the path comparisons: no short period.
    fn mixed(len: usize) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn pclmul_folding_equals_tables_from_any_register() {
        // `vcrc` takes the AVX-512 path from 256 bytes where it can: test
        // the 128-bit folding by itself, with arbitrary start registers.
        if !std::is_x86_feature_detected!("pclmulqdq") {
            return;
        }
        let data = mixed(700);
        for start in 0..16 {
            for end in (start + clmul::MIN_LEN)..data.len() {
                let s = &data[start..end];
                let r = (start * 4099 + end) as u16;
                assert_eq!(clmul::fold(r, s), Some(vcrc_sliced(r, s)), "{start}..{end}");
            }
        }
    }

    /// One wide folding path's `fold` and `fold_two`.
    #[cfg(target_arch = "x86_64")]
    type FoldOne = for<'a> fn(&fold::Spec, u32, &'a [u8]) -> Option<fold::Folded<'a>>;
    #[cfg(target_arch = "x86_64")]
    type FoldTwo = for<'a> fn(
        &fold::Spec,
        u32,
        &fold::Spec,
        u32,
        &'a [u8],
    ) -> Option<(fold::Folded<'a>, fold::Folded<'a>)>;

    /// Lengths across a path's step, its registers and the 16-byte lanes,
    /// every alignment, arbitrary start registers; both CRCs alone and
    /// fused, against the tables / crc32fast. On a CPU without the path's
    /// features `fold` says so and there is nothing to test.
    #[cfg(target_arch = "x86_64")]
    fn check_wide_path<W: WidePath>() {
        let (one, two, min_len): (FoldOne, FoldTwo, usize) = (W::fold, W::fold_two, W::MIN_LEN);
        let data = mixed(1400);
        if one(&fold::CRC16, 0, &data).is_none() {
            return;
        }
        let finish32 = |f: fold::Folded<'_>| {
            let r = Crc32::from_register(0).update_scalar(&f.last).register;
            Crc32::from_register(r).update_scalar(f.tail).register
        };
        let finish16 = |f: fold::Folded<'_>| vcrc_sliced(vcrc_sliced(0, &f.last), f.tail);
        for start in 0..64 {
            for end in (start + min_len)..data.len() {
                let s = &data[start..end];
                let r32 = (start as u32).wrapping_mul(0x9e37_79b9) ^ end as u32;
                let r16 = (r32 >> 7) as u16;
                let want32 = Crc32::from_register(r32).update_scalar(s).register;
                let want16 = vcrc_sliced(r16, s);
                let one32 = one(&fold::CRC32, r32, s).map(finish32);
                let one16 = one(&fold::CRC16, u32::from(r16), s).map(finish16);
                assert_eq!(one32, Some(want32), "crc32 {start}..{end}");
                assert_eq!(one16, Some(want16), "vcrc {start}..{end}");
                let (a, b) = two(&fold::CRC32, r32, &fold::CRC16, u32::from(r16), s).unwrap();
                assert_eq!(
                    (finish32(a), finish16(b)),
                    (want32, want16),
                    "fused {start}..{end}"
                );
            }
        }
        // Long runs of ones and zeros.
        for fill in [0x00, 0xff] {
            let s = vec![fill; 8190];
            assert_eq!(vcrc(&s), vcrc_bitwise(&s));
            assert_eq!(crc32(&s), crc32_bitwise(&s));
        }
        assert!(one(&fold::CRC32, 0, &data[..min_len - 1]).is_none());
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_folding_equals_tables_at_every_length_and_alignment() {
        check_wide_path::<Avx512>();
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vpclmul256_folding_equals_tables_at_every_length_and_alignment() {
        check_wide_path::<Vpclmul256>();
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn product_fold_equals_tables_at_every_length_and_alignment() {
        // One fold modulo P32·P16 plus each CRC's start register moved to
        // the last lane: every length around the steps and lanes, every
        // alignment, arbitrary registers; past the shift tables' reach
        // (8 KiB) and below the fold's minimum it declines.
        let data = mixed(1400);
        if wide_fold(&fold::BOTH, 0, &data).is_none() {
            return;
        }
        for start in 0..48 {
            for end in (start + Vpclmul256::MIN_LEN)..data.len() {
                let s = &data[start..end];
                let r32 = (end as u32).wrapping_mul(0x9e37_79b9) ^ start as u32;
                let r16 = (r32 >> 11) as u16;
                let want32 = Crc32::from_register(r32).update_scalar(s).register;
                let want16 = vcrc_sliced(r16, s);
                assert_eq!(
                    fold_product(r32, r16, s),
                    Some((want32, want16)),
                    "{start}..{end}"
                );
            }
        }
        let long = mixed(fold::SHIFT_BLOCKS * 16 + 40);
        let reach = fold::SHIFT_BLOCKS * 16;
        for len in [reach, reach + 15] {
            let s = &long[..len];
            let want = (
                Crc32::from_register(7).update_scalar(s).register,
                vcrc_sliced(9, s),
            );
            assert_eq!(fold_product(7, 9, s), Some(want), "len {len}");
        }
        assert_eq!(fold_product(7, 9, &long[..reach + 16]), None);
        assert_eq!(fold_product(7, 9, &long[..Vpclmul256::MIN_LEN - 1]), None);
        // The fallback past the tables still gives the right registers.
        let s = &long[..reach + 16];
        assert_eq!(
            fold_both(7, 9, s),
            (
                Crc32::from_register(7).update_scalar(s).register,
                vcrc_sliced(9, s)
            )
        );
    }

    #[test]
    fn packet_crcs_equal_the_separate_crcs() {
        let data = mixed(4200);
        for len in (0..600).chain([4096 + 36, 4096 + 96, 4199]) {
            for global in [false, true] {
                let mut covered = data[..len].to_vec();
                if let Some(b) = covered.get_mut(1) {
                    *b = if global { *b | 3 } else { (*b & !3) | 2 };
                }
                let i = icrc(&covered);
                let mut body = covered.clone();
                body.extend_from_slice(&i.to_le_bytes());
                let built = packet_crcs(&covered, None);
                assert_eq!(
                    built,
                    PacketCrcs {
                        icrc: i,
                        vcrc: vcrc(&body)
                    },
                    "{len}"
                );
                // A carried ICRC (right or wrong) is what the VCRC covers.
                let other = i ^ 0x0102_0304;
                let mut body = covered.clone();
                body.extend_from_slice(&other.to_le_bytes());
                let checked = packet_crcs(&covered, Some(other));
                assert_eq!(
                    checked,
                    PacketCrcs {
                        icrc: i,
                        vcrc: vcrc(&body)
                    },
                    "{len}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn vcrc_matches_references(
            data in proptest::collection::vec(any::<u8>(), 0..4200),
            start in 0usize..32,
        ) {
            let s = data.get(start..).unwrap_or_default();
            let fast = vcrc(s);
            prop_assert_eq!(fast, vcrc_bitwise(s));
            prop_assert_eq!(fast, vcrc_bytewise(s));
        }

        #[test]
        fn packet_crcs_match_references(
            data in proptest::collection::vec(any::<u8>(), 0..4200),
            start in 0usize..64,
            carried in proptest::option::of(any::<u32>()),
        ) {
            let covered = data.get(start..).unwrap_or_default();
            let c = packet_crcs(covered, carried);
            let i = icrc_reference(covered);
            prop_assert_eq!(c.icrc, i);
            let mut body = covered.to_vec();
            body.extend_from_slice(&carried.unwrap_or(i).to_le_bytes());
            prop_assert_eq!(c.vcrc, vcrc_bitwise(&body));
        }

        #[test]
        fn crc32_and_icrc_match_references(
            data in proptest::collection::vec(any::<u8>(), 0..4200),
            start in 0usize..32,
            split in any::<prop::sample::Index>(),
        ) {
            let s = data.get(start..).unwrap_or_default();
            prop_assert_eq!(crc32(s), crc32_bitwise(s));
            let (a, b) = s.split_at(split.index(s.len() + 1));
            prop_assert_eq!(Crc32::new().update(a).update(b).finish(), crc32_bitwise(s));
            prop_assert_eq!(icrc(s), icrc_reference(s));
            // Force the global layout (LNH 3) too.
            let mut g = s.to_vec();
            if let Some(b) = g.get_mut(1) {
                *b |= 3;
            }
            prop_assert_eq!(icrc(&g), icrc_reference(&g));
        }
    }

    #[test]
    fn incremental_equals_one_shot() {
        let mut c = Crc32::default();
        c.update(b"1234").update(b"56789");
        assert_eq!(c.finish(), crc32(b"123456789"));
    }

    #[test]
    fn icrc_ignores_variant_fields_only() {
        // Local: LRH, BTH, 4 bytes of payload.
        let mut local = vec![0x02, 0x02, 0, 1, 0, 7, 0, 2];
        local.extend_from_slice(&[0x04, 0, 0xff, 0xff, 0, 0, 0, 5, 0, 0, 0, 1]);
        local.extend_from_slice(b"data");
        let base = icrc(&local);
        let mut v = local.clone();
        v[0] = 0xf2; // VL
        v[12] = 0xc0; // FECN/BECN
        assert_eq!(icrc(&v), base);
        v[1] ^= 0x10; // SL is invariant in a local packet
        assert_ne!(icrc(&v), base);
        // The masked bytes equal ones: same as hashing the masked packet.
        let mut ones = local.clone();
        ones[0] |= 0xf0;
        ones[12] = 0xff;
        assert_eq!(base, crc32(&ones));

        // Global: the LRH, TClass, FlowLabel and HopLmt do not count.
        let mut global = vec![0x02, 0x03, 0, 1, 0, 17, 0, 2];
        global.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 0x1b, 64]);
        global.extend_from_slice(&[0xaa; 32]);
        global.extend_from_slice(&local[8..]);
        let base = icrc(&global);
        let mut v = global.clone();
        v[..8].copy_from_slice(&[9, 0xf3, 9, 9, 9, 9, 9, 9]); // LNH stays 3
        v[8..12].copy_from_slice(&[0x6f, 0xff, 0x12, 0x34]);
        v[15] = 1;
        v[52] = 0x80;
        assert_eq!(icrc(&v), base);
        v[8] = 0x50; // IPVer counts
        assert_ne!(icrc(&v), base);
        // Short input never panics.
        for len in 0..global.len() {
            icrc(&global[..len]);
        }
    }
}
