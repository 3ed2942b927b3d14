//! Base Transport Header (IBA vol 1 §9.2), 12 bytes.
//!
//! ```text
//! byte 0: OpCode          byte 1: SE[7] M[6] PadCnt[5:4] TVer[3:0]
//! bytes 2-3: P_Key        byte 4: FECN[7] BECN[6] resv6[5:0]  (resv8a)
//! bytes 5-7: DestQP       byte 8: AckReq[7] resv7[6:0]
//! bytes 9-11: PSN
//! ```

use crate::error::ParseError;
use crate::opcode::Opcode;
use crate::reader::Reader;

/// Mask of a 24-bit QPN or PSN.
pub const MASK_24: u32 = 0x00ff_ffff;

/// The BTH opcode byte as an [`Opcode`]; an unknown one is
/// [`ParseError::UnknownOpcode`].
impl TryFrom<u8> for Opcode {
    type Error = ParseError;

    fn try_from(code: u8) -> Result<Self, Self::Error> {
        Opcode::from_u8(code).ok_or(ParseError::UnknownOpcode(code))
    }
}

/// Base Transport Header. Fields wider than their wire width are masked on
/// write; reserved bits are written as zero and ignored on parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Bth {
    /// Operation code. Parsing fails on opcodes ibtca does not know.
    pub opcode: Opcode,
    /// Solicited event.
    pub se: bool,
    /// Migration state (M).
    pub mig: bool,
    /// Pad bytes (0..=3) between the payload and the ICRC.
    pub pad_cnt: u8,
    /// Transport header version (4 bits); 0 is the only one defined.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification (top bit of resv8a).
    pub fecn: bool,
    /// Backward explicit congestion notification (next bit of resv8a).
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Encoded length in bytes.
    pub const LEN: usize = 12;
    /// The default partition key (full member of the default partition).
    pub const DEFAULT_PKEY: u16 = 0xffff;

    /// True if a P_Key table entry `entry` lets a packet with BTH P_Key
    /// `pkey` in (IBA vol 1 §10.9.3): the same 15-bit base, not the
    /// invalid base 0, and at least one of the two a full member (bit 15),
    /// so two limited members cannot talk.
    pub fn pkey_admits(entry: u16, pkey: u16) -> bool {
        let base = pkey & 0x7fff;
        base != 0 && entry & 0x7fff == base && (entry | pkey) & 0x8000 != 0
    }

    /// A BTH with `opcode`, the default P_Key, and every other field zero.
    pub fn new(opcode: Opcode) -> Self {
        Self {
            opcode,
            se: false,
            mig: false,
            pad_cnt: 0,
            tver: 0,
            pkey: Self::DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: 0,
            ack_req: false,
            psn: 0,
        }
    }

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        let opcode = r.u8()?;
        let flags = r.u8()?;
        let pkey = r.u16()?;
        let qp = r.u32()?;
        let psn = r.u32()?;
        Ok(Self {
            opcode: Opcode::try_from(opcode)?,
            se: flags & 0x80 != 0,
            mig: flags & 0x40 != 0,
            pad_cnt: (flags >> 4) & 3,
            tver: flags & 0xf,
            pkey,
            fecn: qp & 0x8000_0000 != 0,
            becn: qp & 0x4000_0000 != 0,
            dest_qp: qp & MASK_24,
            ack_req: psn & 0x8000_0000 != 0,
            psn: psn & MASK_24,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let flags = u8::from(self.se) << 7
            | u8::from(self.mig) << 6
            | (self.pad_cnt & 3) << 4
            | (self.tver & 0xf);
        let qp = u32::from(self.fecn) << 31 | u32::from(self.becn) << 30 | (self.dest_qp & MASK_24);
        let psn = u32::from(self.ack_req) << 31 | (self.psn & MASK_24);
        out.push(self.opcode.code());
        out.push(flags);
        out.extend_from_slice(&self.pkey.to_be_bytes());
        out.extend_from_slice(&qp.to_be_bytes());
        out.extend_from_slice(&psn.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        // By hand: RDMA WRITE ONLY (0x0a); SE, PadCnt 2, TVer 0 -> 0xa0;
        // P_Key 0x8001; FECN and DestQP 0x123456; AckReq and PSN 0xabcdef.
        let bytes = [
            0x0a, 0xa0, 0x80, 0x01, 0x80, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef,
        ];
        let bth = Bth::parse(&bytes).unwrap();
        assert_eq!(
            bth,
            Bth {
                opcode: Opcode::RcRdmaWriteOnly,
                se: true,
                mig: false,
                pad_cnt: 2,
                tver: 0,
                pkey: 0x8001,
                fecn: true,
                becn: false,
                dest_qp: 0x12_3456,
                ack_req: true,
                psn: 0xab_cdef,
            }
        );
        let mut out = Vec::new();
        bth.write(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn a_full_member_admits_both_a_limited_member_only_full_ones() {
        assert!(Bth::pkey_admits(0x8001, 0x8001));
        assert!(Bth::pkey_admits(0x8001, 0x0001));
        assert!(Bth::pkey_admits(0x0001, 0x8001));
        assert!(!Bth::pkey_admits(0x0001, 0x0001), "two limited members");
        assert!(!Bth::pkey_admits(0x8001, 0x8002), "another partition");
        assert!(!Bth::pkey_admits(0x8000, 0x8000), "base 0 is invalid");
    }

    #[test]
    fn reserved_bits_ignored_unknown_opcode_rejected() {
        let bytes = [0x04, 0x40, 0xff, 0xff, 0x3f, 0, 0, 1, 0x7f, 0, 0, 2];
        let bth = Bth::parse(&bytes).unwrap();
        assert!(bth.mig && !bth.fecn && !bth.becn && !bth.ack_req);
        assert_eq!((bth.dest_qp, bth.psn), (1, 2));
        let mut bad = bytes;
        bad[0] = 0x15;
        assert_eq!(Bth::parse(&bad), Err(ParseError::UnknownOpcode(0x15)));
        assert_eq!(Opcode::try_from(0x15), Err(ParseError::UnknownOpcode(0x15)));
        assert_eq!(Opcode::try_from(0x04), Ok(Opcode::RcSendOnly));
        assert!(Bth::parse(&bytes[..11]).is_err());
    }
}
