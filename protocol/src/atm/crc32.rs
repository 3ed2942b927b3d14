//! AAL5's CRC-32 (ITU-T I.363.5 §10.1.2.2, from I.432's generator): the
//! polynomial 0x04C11DB7 taken MSB first (not reflected), register preset
//! to all ones, remainder complemented; the CRC field is sent MSB first.
//! Catalogued as CRC-32/BZIP2 (check value of "123456789": 0xFC891918).
//! Ethernet's CRC-32 (`crc32fast`) is the same polynomial reflected, and
//! gives a different value.

/// A running AAL5 CRC-32.
#[derive(Debug, Clone, Copy)]
pub struct Crc32 {
    reg: u32,
}

impl Default for Crc32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Crc32 {
    /// A CRC over no bytes yet.
    pub fn new() -> Self {
        Self { reg: u32::MAX }
    }

    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut reg = self.reg;
        for &b in bytes {
            reg = reg << 8 ^ TABLE[usize::from((reg >> 24) as u8 ^ b)];
        }
        self.reg = reg;
    }

    /// The CRC field of the bytes added so far.
    pub fn finish(&self) -> u32 {
        !self.reg
    }
}

/// The AAL5 CRC-32 of `bytes`.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(bytes);
    c.finish()
}

const TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u32) << 24;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x8000_0000 != 0 {
                c << 1 ^ 0x04C1_1DB7
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};
