//! Local Route Header (IBA vol 1 §7.7), 8 bytes.
//!
//! ```text
//! byte 0: VL[7:4] LVer[3:0]      byte 1: SL[7:4] rsvd[3:2] LNH[1:0]
//! bytes 2-3: DLID                bytes 4-5: rsvd[15:11] PktLen[10:0]
//! bytes 6-7: SLID
//! ```

use crate::error::ParseError;
use crate::reader::Reader;

/// First multicast LID (IBA 4.1.1: 0xC000..=0xFFFE are multicast).
pub const FIRST_MULTICAST_LID: u16 = 0xc000;
/// Last multicast LID (0xFFFF is the permissive LID).
pub const LAST_MULTICAST_LID: u16 = 0xfffe;

/// True for a multicast LID.
pub const fn is_multicast_lid(lid: u16) -> bool {
    lid >= FIRST_MULTICAST_LID && lid <= LAST_MULTICAST_LID
}

/// LRH Link Next Header: what follows the LRH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lnh {
    /// Raw packet (0).
    Raw,
    /// IPv6 packet without IBA transport (1).
    IpNonIba,
    /// IBA transport, no GRH: BTH follows (2).
    IbaLocal,
    /// IBA transport with a GRH (3).
    IbaGlobal,
}

impl Lnh {
    /// The 2-bit field value.
    pub const fn bits(self) -> u8 {
        match self {
            Lnh::Raw => 0,
            Lnh::IpNonIba => 1,
            Lnh::IbaLocal => 2,
            Lnh::IbaGlobal => 3,
        }
    }

    /// The LNH for the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Lnh {
        match bits & 3 {
            0 => Lnh::Raw,
            1 => Lnh::IpNonIba,
            2 => Lnh::IbaLocal,
            _ => Lnh::IbaGlobal,
        }
    }
}

/// Local Route Header. Fields wider than their wire width are masked on write;
/// reserved bits are written as zero and ignored on parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lrh {
    /// Virtual lane (4 bits).
    pub vl: u8,
    /// Link version (4 bits); 0 is the only one defined.
    pub lver: u8,
    /// Service level (4 bits).
    pub sl: u8,
    /// Link next header.
    pub lnh: Lnh,
    /// Destination LID.
    pub dlid: u16,
    /// Packet length in 4-byte words from the first byte of the LRH through
    /// the ICRC (the VCRC is not counted), 11 bits.
    pub pkt_len: u16,
    /// Source LID.
    pub slid: u16,
}

impl Default for Lrh {
    fn default() -> Self {
        Self {
            vl: 0,
            lver: 0,
            sl: 0,
            lnh: Lnh::IbaLocal,
            dlid: 0,
            pkt_len: 0,
            slid: 0,
        }
    }
}

impl Lrh {
    /// Encoded length in bytes.
    pub const LEN: usize = 8;
    /// Largest PktLen (11 bits).
    pub const MAX_PKT_LEN: u16 = 0x7ff;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        let b0 = r.u8()?;
        let b1 = r.u8()?;
        let dlid = r.u16()?;
        let len = r.u16()?;
        let slid = r.u16()?;
        Ok(Self {
            vl: b0 >> 4,
            lver: b0 & 0xf,
            sl: b1 >> 4,
            lnh: Lnh::from_bits(b1),
            dlid,
            pkt_len: len & Self::MAX_PKT_LEN,
            slid,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push((self.vl & 0xf) << 4 | (self.lver & 0xf));
        out.push((self.sl & 0xf) << 4 | self.lnh.bits());
        out.extend_from_slice(&self.dlid.to_be_bytes());
        out.extend_from_slice(&(self.pkt_len & Self::MAX_PKT_LEN).to_be_bytes());
        out.extend_from_slice(&self.slid.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written by hand from the layout above: VL 1, LVer 0, SL 2, LNH 2
    // (IBA local), DLID 0x0005, PktLen 9 words, SLID 0x0003.
    const BYTES: [u8; 8] = [0x10, 0x22, 0x00, 0x05, 0x00, 0x09, 0x00, 0x03];

    #[test]
    fn known_bytes() {
        let lrh = Lrh::parse(&BYTES).unwrap();
        assert_eq!(
            lrh,
            Lrh {
                vl: 1,
                lver: 0,
                sl: 2,
                lnh: Lnh::IbaLocal,
                dlid: 5,
                pkt_len: 9,
                slid: 3
            }
        );
        let mut out = Vec::new();
        lrh.write(&mut out);
        assert_eq!(out, BYTES);
    }

    #[test]
    fn reserved_bits_ignored_and_short_input_rejected() {
        let mut b = BYTES;
        b[1] |= 0x0c; // rsvd bits in byte 1
        b[4] |= 0xf8; // rsvd5 above PktLen
        assert_eq!(Lrh::parse(&b).unwrap(), Lrh::parse(&BYTES).unwrap());
        assert!(matches!(
            Lrh::parse(&BYTES[..7]),
            Err(ParseError::Truncated { .. })
        ));
        for bits in 0..4 {
            assert_eq!(Lnh::from_bits(bits).bits(), bits);
        }
    }
}
