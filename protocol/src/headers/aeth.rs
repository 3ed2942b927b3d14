//! ACK Extended Transport Header (IBA vol 1 §9.3.5), 4 bytes: an 8-bit
//! syndrome and a 24-bit MSN.
//!
//! Syndrome bit 7 is reserved; bits 6:5 say what the packet is (00 ACK,
//! 01 RNR NAK, 10 reserved, 11 NAK) and bits 4:0 carry the credit count
//! (ACK), the RNR timer (RNR NAK) or the NAK code.

use super::bth::MASK_24;
use crate::error::ParseError;
use crate::reader::Reader;

/// Credits in each 5-bit AETH credit code (IBA vol 1 Table 45); code 31
/// means "no credit information" and has no entry.
const CREDITS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// The 5-bit credit code meaning "no end-to-end flow-control information".
pub const CREDITS_INVALID: u8 = 0x1f;

/// Why a responder refused a request (syndrome 011x_xxxx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0: PSN sequence error.
    PsnSequenceError,
    /// 1: invalid request (bad opcode, length, ...).
    InvalidRequest,
    /// 2: remote access error (R_Key, bounds, permissions).
    RemoteAccessError,
    /// 3: remote operational error.
    RemoteOperationalError,
    /// 4: invalid RD request.
    InvalidRdRequest,
    /// 5..=31: reserved codes, kept as found.
    Reserved(u8),
}

impl NakCode {
    /// The 5-bit code.
    pub const fn bits(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(code) => code & 0x1f,
        }
    }

    /// The NAK code for the low five bits of `bits`.
    pub const fn from_bits(bits: u8) -> NakCode {
        match bits & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            other => NakCode::Reserved(other),
        }
    }
}

/// What an AETH syndrome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckKind {
    /// Positive acknowledgement with a 5-bit credit code (see
    /// [`Aeth::credits`]).
    Ack {
        /// Encoded credit count.
        credit_code: u8,
    },
    /// Receiver not ready: retry after the encoded 5-bit timer.
    RnrNak {
        /// Encoded minimum RNR NAK timer.
        timer: u8,
    },
    /// Negative acknowledgement.
    Nak(NakCode),
    /// Syndrome type 10 (reserved); the low five bits as found.
    Reserved(u8),
}

/// ACK ETH.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Aeth {
    /// The raw syndrome byte.
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl Aeth {
    /// Encoded length in bytes.
    pub const LEN: usize = 4;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        let word = r.u32()?;
        Ok(Self {
            syndrome: (word >> 24) as u8,
            msn: word & MASK_24,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let word = u32::from(self.syndrome) << 24 | (self.msn & MASK_24);
        out.extend_from_slice(&word.to_be_bytes());
    }

    /// An ACK carrying the 5-bit `credit_code` ([`CREDITS_INVALID`] for none).
    pub const fn ack(credit_code: u8, msn: u32) -> Self {
        Self {
            syndrome: credit_code & 0x1f,
            msn: msn & MASK_24,
        }
    }

    /// An RNR NAK carrying the 5-bit encoded RNR timer.
    pub const fn rnr_nak(timer: u8, msn: u32) -> Self {
        Self {
            syndrome: 0x20 | (timer & 0x1f),
            msn: msn & MASK_24,
        }
    }

    /// A NAK with `code`.
    pub const fn nak(code: NakCode, msn: u32) -> Self {
        Self {
            syndrome: 0x60 | code.bits(),
            msn: msn & MASK_24,
        }
    }

    /// Classifies the syndrome (bit 7, reserved, is ignored).
    pub const fn kind(&self) -> AckKind {
        let low = self.syndrome & 0x1f;
        match (self.syndrome >> 5) & 3 {
            0 => AckKind::Ack { credit_code: low },
            1 => AckKind::RnrNak { timer: low },
            2 => AckKind::Reserved(low),
            _ => AckKind::Nak(NakCode::from_bits(low)),
        }
    }

    /// The number of credits an ACK advertises; `None` for NAKs, for RNR
    /// NAKs and for the "invalid" code 31 (no flow-control information).
    pub fn credits(&self) -> Option<u32> {
        match self.kind() {
            AckKind::Ack { credit_code } => CREDITS.get(usize::from(credit_code)).copied(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        // By hand: NAK (011) remote access error (00010) -> 0x62, MSN 0x000102.
        let bytes = [0x62, 0x00, 0x01, 0x02];
        let aeth = Aeth::parse(&bytes).unwrap();
        assert_eq!(
            aeth,
            Aeth {
                syndrome: 0x62,
                msn: 0x102
            }
        );
        assert_eq!(aeth.kind(), AckKind::Nak(NakCode::RemoteAccessError));
        assert_eq!(aeth, Aeth::nak(NakCode::RemoteAccessError, 0x102));
        let mut out = Vec::new();
        aeth.write(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn classification() {
        let ack = Aeth::parse(&[0x1f, 0, 0, 1]).unwrap();
        assert_eq!(ack.kind(), AckKind::Ack { credit_code: 31 });
        assert_eq!(ack.credits(), None);
        assert_eq!(Aeth::ack(0, 0).credits(), Some(0));
        assert_eq!(Aeth::ack(5, 0).credits(), Some(6));
        assert_eq!(Aeth::ack(30, 0).credits(), Some(32768));
        let rnr = Aeth::rnr_nak(14, 7);
        assert_eq!(rnr.syndrome, 0x2e);
        assert_eq!(rnr.kind(), AckKind::RnrNak { timer: 14 });
        assert_eq!(rnr.credits(), None);
        for (code, nak) in [
            (0x60, NakCode::PsnSequenceError),
            (0x61, NakCode::InvalidRequest),
            (0x62, NakCode::RemoteAccessError),
            (0x63, NakCode::RemoteOperationalError),
            (0x64, NakCode::InvalidRdRequest),
            (0x65, NakCode::Reserved(5)),
        ] {
            let aeth = Aeth {
                syndrome: code,
                msn: 0,
            };
            assert_eq!(aeth.kind(), AckKind::Nak(nak));
            assert_eq!(Aeth::nak(nak, 0).syndrome, code);
        }
        assert_eq!(
            Aeth {
                syndrome: 0x43,
                msn: 0
            }
            .kind(),
            AckKind::Reserved(3)
        );
        // Bit 7 is reserved and ignored.
        assert_eq!(
            Aeth {
                syndrome: 0x80,
                msn: 0
            }
            .kind(),
            AckKind::Ack { credit_code: 0 }
        );
    }
}
