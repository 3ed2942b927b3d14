//! The receiver's header error control (ITU-T I.432.1 §4.3.1, Figure 4).
//!
//! The receiver starts in correction mode. There a header with a
//! single-bit error is corrected and the receiver moves to detection mode;
//! a header with more errors is discarded, also moving to detection mode.
//! In detection mode every header with an error is discarded, and the
//! first error-free header brings it back to correction mode. So a
//! single-bit error right after another error is not corrected: isolated
//! errors are fixed, bursts are dropped.
//!
//! The generator x^8 + x^2 + x + 1 has the factor x + 1, so a single-bit
//! error leaves an odd-weight syndrome and two errors an even one: a
//! double error is always detected, never taken for a single one.

use super::cell::{crc8, HEADER_LEN, HEC_COSET};

/// What the receiver made of one header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HecVerdict {
    /// No error.
    Valid,
    /// A single-bit error at this bit (0 = the first byte's MSB), corrected.
    Corrected(u8),
    /// An error the receiver did not correct: the cell is discarded.
    Discarded,
}

/// The receiver's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HecMode {
    /// Single-bit errors are corrected.
    #[default]
    Correction,
    /// Every error is discarded, until a good header.
    Detection,
}

/// The HEC state machine of one receive port.
#[derive(Debug, Clone, Default)]
pub struct HecReceiver {
    mode: HecMode,
}

/// The syndrome of a header: zero for a good one.
pub fn syndrome(h: &[u8; HEADER_LEN]) -> u8 {
    crc8(&h[..4]) ^ h[4] ^ HEC_COSET
}

/// The bit (0..40, MSB of byte 0 first) whose single error gives
/// `syndrome`, if any.
pub fn single_bit_error(syndrome: u8) -> Option<u8> {
    SINGLE_BIT_SYNDROMES
        .iter()
        .position(|&s| s == syndrome)
        .and_then(|bit| u8::try_from(bit).ok())
}

/// The syndrome of a single error at each of the 40 header bits.
const SINGLE_BIT_SYNDROMES: [u8; 40] = {
    let mut t = [0u8; 40];
    let mut bit = 0;
    while bit < 40 {
        // The error pattern's remainder: x^(39 - bit) mod g(x), which is
        // the CRC of the pattern over 5 bytes.
        let mut h = [0u8; 5];
        h[bit / 8] = 0x80 >> (bit % 8);
        let mut crc = 0u8;
        let mut i = 0;
        while i < 4 {
            let mut c = crc ^ h[i];
            let mut k = 0;
            while k < 8 {
                c = if c & 0x80 != 0 { c << 1 ^ 0x07 } else { c << 1 };
                k += 1;
            }
            crc = c;
            i += 1;
        }
        t[bit] = crc ^ h[4];
        bit += 1;
    }
    t
};

impl HecReceiver {
    /// A receiver in correction mode.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current mode.
    pub fn mode(&self) -> HecMode {
        self.mode
    }

    /// Checks `header` (corrected in place when the verdict is
    /// [`HecVerdict::Corrected`]) and moves the state machine.
    pub fn check(&mut self, header: &mut [u8; HEADER_LEN]) -> HecVerdict {
        let s = syndrome(header);
        if s == 0 {
            self.mode = HecMode::Correction;
            return HecVerdict::Valid;
        }
        let mode = std::mem::replace(&mut self.mode, HecMode::Detection);
        match (mode, single_bit_error(s)) {
            (HecMode::Correction, Some(bit)) => {
                header[usize::from(bit / 8)] ^= 0x80 >> (bit % 8);
                HecVerdict::Corrected(bit)
            }
            _ => HecVerdict::Discarded,
        }
    }
}
