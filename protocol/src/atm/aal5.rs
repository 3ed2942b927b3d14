//! AAL5 (ITU-T I.363.5): a frame (CPCS-SDU, 1 to 65,535 bytes) becomes a
//! CPCS-PDU of whole cells, padded so that an 8-byte trailer ends the
//! last cell:
//!
//! ```text
//!  SDU | pad (0..=47) | UU (1) | CPI (1) | Length (2) | CRC-32 (4)
//! ```
//!
//! The CRC ([`super::crc32`]) covers everything before it. The last cell
//! carries the PTI's AUU bit (end of frame). A length field of zero is an
//! abort. The reassembler checks CRC, length, CPI (0) and size, and a
//! caller-driven timeout, dropping a bad frame with the reason.

use std::time::{Duration, Instant};

use super::cell::{Cell, CellHeader, Vc, CELL_PAYLOAD_LEN, PTI_AUU};
use super::crc32::Crc32;

/// Bytes of the CPCS-PDU trailer.
pub const TRAILER_LEN: usize = 8;
/// Largest CPCS-SDU (the length field is 16 bits).
pub const MAX_SDU: usize = 65_535;

/// Why a frame could not be segmented or was not reassembled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Aal5Error {
    /// A frame of no bytes cannot be sent (its length field would abort).
    #[error("AAL5 frame is empty")]
    Empty,
    /// Longer than the largest SDU allowed.
    #[error("AAL5 frame of {0} bytes is longer than allowed")]
    Oversize(usize),
    /// The trailer's CRC-32 does not match.
    #[error("AAL5 CRC-32 mismatch")]
    Crc,
    /// The length field does not fit the cells received (pad not 0..=47).
    #[error("AAL5 length field {length} does not fit {cells} cells")]
    Length {
        /// The length field.
        length: u16,
        /// Cells received.
        cells: usize,
    },
    /// The length field is zero: the sender aborted the frame.
    #[error("AAL5 abort (length field 0)")]
    Abort,
    /// The CPI field is not zero.
    #[error("AAL5 CPI {0:#04x} is not 0")]
    Cpi(u8),
    /// The frame's last cell did not come in time.
    #[error("AAL5 reassembly timed out")]
    Timeout,
}

/// The number of cells a frame of `len` bytes takes.
pub fn cells_for(len: usize) -> usize {
    (len + TRAILER_LEN).div_ceil(CELL_PAYLOAD_LEN)
}

/// Segments `frame` into the cells of `vc` (user-to-user byte `uu`, CPI
/// 0), appending them to `out`.
pub fn segment(vc: Vc, frame: &[u8], uu: u8, out: &mut Vec<Cell>) -> Result<(), Aal5Error> {
    if frame.is_empty() {
        return Err(Aal5Error::Empty);
    }
    let length = u16::try_from(frame.len()).map_err(|_| Aal5Error::Oversize(frame.len()))?;
    let cells = cells_for(frame.len());
    let mut pdu = Vec::with_capacity(cells * CELL_PAYLOAD_LEN);
    pdu.extend_from_slice(frame);
    pdu.resize(cells * CELL_PAYLOAD_LEN - TRAILER_LEN, 0);
    pdu.push(uu);
    pdu.push(0);
    pdu.extend_from_slice(&length.to_be_bytes());
    let mut crc = Crc32::new();
    crc.update(&pdu);
    pdu.extend_from_slice(&crc.finish().to_be_bytes());
    out.reserve(cells);
    for (i, chunk) in pdu.chunks_exact(CELL_PAYLOAD_LEN).enumerate() {
        let pti = if i + 1 == cells { PTI_AUU } else { 0 };
        let mut payload = [0u8; CELL_PAYLOAD_LEN];
        payload.copy_from_slice(chunk);
        out.push(Cell::new(&CellHeader::user(vc, pti), &payload));
    }
    Ok(())
}

/// A reassembled frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aal5Frame {
    /// The CPCS-SDU.
    pub data: Vec<u8>,
    /// The trailer's user-to-user byte.
    pub uu: u8,
}

/// Reassembly of one VC's frames.
#[derive(Debug, Clone)]
pub struct Aal5Reassembler {
    pdu: Vec<u8>,
    /// When the frame being reassembled got its first cell.
    started: Option<Instant>,
    /// Cells past the limit are being discarded until the frame's end.
    discarding: bool,
    max_sdu: usize,
    max_cells: usize,
}

impl Aal5Reassembler {
    /// A reassembler taking frames of at most `max_sdu` bytes (capped at
    /// [`MAX_SDU`]).
    pub fn new(max_sdu: usize) -> Self {
        Self {
            pdu: Vec::new(),
            started: None,
            discarding: false,
            max_sdu: max_sdu.min(MAX_SDU),
            max_cells: cells_for(max_sdu.min(MAX_SDU)),
        }
    }

    /// A reassembler with the same limit and nothing held.
    pub fn fresh(&self) -> Self {
        Self::new(self.max_sdu)
    }

    /// Whether part of a frame is held.
    pub fn in_progress(&self) -> bool {
        self.started.is_some()
    }

    /// Takes one cell's payload (`end`: its PTI's AUU bit) received at
    /// `now`; returns a frame, or why one was dropped, at the frame's end
    /// (and once when a frame outgrows the limit).
    pub fn push(
        &mut self,
        payload: &[u8; CELL_PAYLOAD_LEN],
        end: bool,
        now: Instant,
    ) -> Option<Result<Aal5Frame, Aal5Error>> {
        if self.discarding {
            if end {
                self.discarding = false;
            }
            return None;
        }
        self.started.get_or_insert(now);
        if self.pdu.len() / CELL_PAYLOAD_LEN >= self.max_cells {
            let size = self.pdu.len();
            self.reset();
            self.discarding = !end;
            return Some(Err(Aal5Error::Oversize(size + CELL_PAYLOAD_LEN)));
        }
        self.pdu.extend_from_slice(payload);
        if !end {
            return None;
        }
        let pdu = std::mem::take(&mut self.pdu);
        self.reset();
        Some(Self::check(pdu, self.max_sdu))
    }

    /// Drops the partial frame if its first cell came more than `timeout`
    /// before `now`.
    pub fn expire(&mut self, now: Instant, timeout: Duration) -> Option<Aal5Error> {
        let started = self.started?;
        if now.saturating_duration_since(started) <= timeout {
            return None;
        }
        self.reset();
        Some(Aal5Error::Timeout)
    }

    fn reset(&mut self) {
        self.pdu.clear();
        self.started = None;
    }

    /// Checks a whole CPCS-PDU and strips its pad and trailer.
    fn check(mut pdu: Vec<u8>, max_sdu: usize) -> Result<Aal5Frame, Aal5Error> {
        let cells = pdu.len() / CELL_PAYLOAD_LEN;
        let Some(at) = pdu.len().checked_sub(TRAILER_LEN) else {
            return Err(Aal5Error::Length { length: 0, cells });
        };
        let t: [u8; TRAILER_LEN] = pdu[at..].try_into().unwrap_or([0; TRAILER_LEN]);
        let length = u16::from_be_bytes([t[2], t[3]]);
        let wanted = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
        if length == 0 {
            return Err(Aal5Error::Abort);
        }
        let mut crc = Crc32::new();
        crc.update(&pdu[..at + 4]);
        if crc.finish() != wanted {
            return Err(Aal5Error::Crc);
        }
        if t[1] != 0 {
            return Err(Aal5Error::Cpi(t[1]));
        }
        let len = usize::from(length);
        if len > at || at - len >= CELL_PAYLOAD_LEN {
            return Err(Aal5Error::Length { length, cells });
        }
        if len > max_sdu {
            return Err(Aal5Error::Oversize(len));
        }
        pdu.truncate(len);
        Ok(Aal5Frame {
            data: pdu,
            uu: t[0],
        })
    }
}
