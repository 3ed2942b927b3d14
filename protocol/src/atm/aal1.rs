//! AAL1 (ITU-T I.363.1 §2): each cell carries a 1-byte SAR header and a
//! 47-byte block of a constant-bit-rate stream.
//!
//! ```text
//!  SAR header: CSI (1) | sequence count (3) | CRC-3 (3) | even parity (1)
//! ```
//!
//! The CRC-3 (generator x^3 + x + 1) protects the 4-bit SN field (CSI and
//! count); the parity bit makes the byte's weight even. The receiver
//! corrects a single-bit error in correction mode and then checks only,
//! until a good header (I.363.1 §2.4.2.1, like the HEC). Counts that skip
//! ahead mean lost cells, replaced by filler blocks so that the stream
//! keeps its timing; a count that repeats the last one is a misordered
//! or misinserted cell, dropped. Blocks are grouped into messages of a
//! fixed number of blocks.

use super::cell::{Cell, CellHeader, Vc, CELL_PAYLOAD_LEN};

/// Bytes of stream per cell.
pub const BLOCK_LEN: usize = 47;

/// The SAR header byte of `csi` and sequence count `count` (mod 8).
pub fn sar_header(csi: bool, count: u8) -> u8 {
    let sn = u8::from(csi) << 3 | (count & 7);
    let b = sn << 4 | crc3(sn) << 1;
    b | (b.count_ones() & 1) as u8
}

/// The CRC-3 of a 4-bit SN field.
pub fn crc3(sn: u8) -> u8 {
    // Remainder of sn(x) * x^3 divided by x^3 + x + 1 (0b1011).
    let mut r = u16::from(sn & 0x0f) << 3;
    for bit in (3..7).rev() {
        if r & (1 << bit) != 0 {
            r ^= 0b1011 << (bit - 3);
        }
    }
    (r & 7) as u8
}

/// What the receiver made of one SAR header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnpVerdict {
    /// The header was good, or corrected: CSI and sequence count.
    Valid {
        /// The convergence sublayer indication.
        csi: bool,
        /// The sequence count.
        count: u8,
        /// A bit error was corrected.
        corrected: bool,
    },
    /// The header is in error: the cell's place in the stream is unknown.
    Invalid,
}

/// What one cell did to the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aal1Event {
    /// In sequence (or the first cell).
    InSequence,
    /// In sequence after a corrected SN/SNP error.
    Corrected,
    /// This many cells were lost before it; as many filler blocks went in.
    Lost(u8),
    /// Its count repeats the previous one: dropped.
    Misordered,
    /// Its SAR header is in error: dropped.
    SnpError,
}

/// Why a message could not be segmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Aal1Error {
    /// The message is not a whole number of 47-byte blocks.
    #[error("AAL1 message of {0} bytes is not a whole number of 47-byte blocks")]
    NotBlocks(usize),
}

/// The sending side of one AAL1 connection.
#[derive(Debug, Clone, Default)]
pub struct Aal1Segmenter {
    count: u8,
}

impl Aal1Segmenter {
    /// A segmenter starting at count 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends the cells of `message` (whole 47-byte blocks, at least one)
    /// on `vc` to `out`.
    pub fn segment(
        &mut self,
        vc: Vc,
        message: &[u8],
        out: &mut Vec<Cell>,
    ) -> Result<(), Aal1Error> {
        if message.is_empty() || !message.len().is_multiple_of(BLOCK_LEN) {
            return Err(Aal1Error::NotBlocks(message.len()));
        }
        for block in message.chunks_exact(BLOCK_LEN) {
            let mut payload = [0u8; CELL_PAYLOAD_LEN];
            payload[0] = sar_header(false, self.count);
            payload[1..].copy_from_slice(block);
            out.push(Cell::new(&CellHeader::user(vc, 0), &payload));
            self.count = (self.count + 1) & 7;
        }
        Ok(())
    }
}

/// The receiving side of one AAL1 connection.
#[derive(Debug, Clone)]
pub struct Aal1Reassembler {
    correcting: bool,
    /// The count of the last cell taken.
    last: Option<u8>,
    message: Vec<u8>,
    message_len: usize,
    filler: u8,
}

impl Aal1Reassembler {
    /// A receiver grouping `blocks` blocks (at least 1) per message, with
    /// `filler` bytes for lost cells.
    pub fn new(blocks: usize, filler: u8) -> Self {
        let message_len = blocks.max(1).saturating_mul(BLOCK_LEN);
        Self {
            correcting: true,
            last: None,
            message: Vec::new(),
            message_len,
            filler,
        }
    }

    /// A receiver with the same message size and filler, and nothing
    /// held.
    pub fn fresh(&self) -> Self {
        Self::new(self.message_len / BLOCK_LEN, self.filler)
    }

    /// Checks a SAR header and moves the correction state machine.
    pub fn check_header(&mut self, header: u8) -> SnpVerdict {
        let sn = header >> 4;
        let syndrome = crc3(sn) ^ (header >> 1 & 7);
        let parity_bad = header.count_ones() & 1 != 0;
        let correcting = std::mem::replace(&mut self.correcting, false);
        let fixed = match (syndrome, parity_bad) {
            (0, false) => {
                self.correcting = true;
                return SnpVerdict::Valid {
                    csi: sn & 8 != 0,
                    count: sn & 7,
                    corrected: false,
                };
            }
            // Only the parity bit is wrong: the SN is good.
            (0, true) if correcting => sn,
            // One bit of the SN or the CRC: find which.
            (_, true) if correcting => match (0..7).find(|&bit| {
                let h = header ^ (2 << bit);
                crc3(h >> 4) == h >> 1 & 7
            }) {
                Some(bit) => (header ^ (2 << bit)) >> 4,
                None => return SnpVerdict::Invalid,
            },
            _ => return SnpVerdict::Invalid,
        };
        SnpVerdict::Valid {
            csi: fixed & 8 != 0,
            count: fixed & 7,
            corrected: true,
        }
    }

    /// Takes one cell's payload; appends each message it completes to
    /// `out`.
    pub fn push(&mut self, payload: &[u8; CELL_PAYLOAD_LEN], out: &mut Vec<Vec<u8>>) -> Aal1Event {
        let (count, corrected) = match self.check_header(payload[0]) {
            SnpVerdict::Valid {
                count, corrected, ..
            } => (count, corrected),
            SnpVerdict::Invalid => return Aal1Event::SnpError,
        };
        let gap = self
            .last
            .map_or(0, |last| count.wrapping_sub(last.wrapping_add(1)) & 7);
        let event = match gap {
            0 if corrected => Aal1Event::Corrected,
            0 => Aal1Event::InSequence,
            7 => return Aal1Event::Misordered,
            // 1..=6: a 3-bit count tells no more apart.
            n => {
                for _ in 0..n {
                    self.add_block(&[self.filler; BLOCK_LEN], out);
                }
                Aal1Event::Lost(n)
            }
        };
        self.last = Some(count);
        let mut block = [0u8; BLOCK_LEN];
        block.copy_from_slice(&payload[1..]);
        self.add_block(&block, out);
        event
    }

    fn add_block(&mut self, block: &[u8; BLOCK_LEN], out: &mut Vec<Vec<u8>>) {
        self.message.extend_from_slice(block);
        if self.message.len() >= self.message_len {
            out.push(std::mem::take(&mut self.message));
        }
    }
}
