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

/// Register of a reflected CRC-32 (Ethernet polynomial) in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32 {
    register: u32,
}

const fn crc32_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xedb8_8320
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

const fn vcrc_table() -> [u16; 256] {
    let mut table = [0u16; 256];
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
        table[i] = c;
        i += 1;
    }
    table
}

static CRC32_TABLE: [u32; 256] = crc32_table();
static VCRC_TABLE: [u16; 256] = vcrc_table();

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

    /// Feeds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            let index = (self.register ^ u32::from(b)) as u8;
            self.register = CRC32_TABLE[usize::from(index)] ^ (self.register >> 8);
        }
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
    Crc32::new().update(bytes).finish()
}

/// The IB VCRC of `bytes` (see the module documentation for parameters).
pub fn vcrc(bytes: &[u8]) -> u16 {
    let mut register: u16 = 0xffff;
    for &b in bytes {
        let index = (register ^ u16::from(b)) as u8;
        register = VCRC_TABLE[usize::from(index)] ^ (register >> 8);
    }
    !register
}

/// LRH + GRH + BTH: the longest prefix that holds variant fields.
const MASKED_PREFIX: usize = 8 + 40 + 12;

/// The ICRC of a native IB packet. `covered` is the packet from the first
/// byte of the LRH through the last pad byte (ICRC and VCRC excluded); the
/// variant fields are masked as the module documentation describes, choosing
/// local or global by the LRH's LNH. Input shorter than the headers is
/// masked as far as it goes; nothing here panics.
pub fn icrc(covered: &[u8]) -> u32 {
    let global = covered.get(1).is_some_and(|b| b & 3 == 3);
    let prefix_len = if global { MASKED_PREFIX } else { 8 + 12 };
    let (head, rest) = covered.split_at(prefix_len.min(covered.len()));
    let mut prefix = [0u8; MASKED_PREFIX];
    let masked = prefix.get_mut(..head.len()).unwrap_or_default();
    masked.copy_from_slice(head);
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
    Crc32::new().update(masked).update(rest).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

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
