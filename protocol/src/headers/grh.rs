//! Global Route Header (IBA vol 1 §8.3), 40 bytes, laid out like an IPv6
//! header.
//!
//! ```text
//! bytes 0-3: IPVer[31:28] TClass[27:20] FlowLabel[19:0]
//! bytes 4-5: PayLen   byte 6: NxtHdr   byte 7: HopLmt
//! bytes 8-23: SGID    bytes 24-39: DGID
//! ```

use crate::error::ParseError;
use crate::reader::Reader;

/// Global Route Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grh {
    /// IP version (4 bits); 6 for IBA.
    pub ip_ver: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Bytes after the GRH through the ICRC (pad included, VCRC not).
    pub pay_len: u16,
    /// Next header; 0x1B for IBA transport (a BTH follows).
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source GID.
    pub sgid: [u8; 16],
    /// Destination GID.
    pub dgid: [u8; 16],
}

impl Default for Grh {
    fn default() -> Self {
        Self {
            ip_ver: Self::IP_VERSION,
            traffic_class: 0,
            flow_label: 0,
            pay_len: 0,
            next_header: Self::NEXT_HEADER_IBA,
            hop_limit: 0,
            sgid: [0; 16],
            dgid: [0; 16],
        }
    }
}

impl Grh {
    /// Encoded length in bytes.
    pub const LEN: usize = 40;
    /// IPVer of every IBA GRH.
    pub const IP_VERSION: u8 = 6;
    /// NxtHdr value meaning "IBA transport headers follow".
    pub const NEXT_HEADER_IBA: u8 = 0x1b;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        let word = r.u32()?;
        Ok(Self {
            ip_ver: (word >> 28) as u8,
            traffic_class: (word >> 20) as u8,
            flow_label: word & 0xf_ffff,
            pay_len: r.u16()?,
            next_header: r.u8()?,
            hop_limit: r.u8()?,
            sgid: r.array()?,
            dgid: r.array()?,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let word = u32::from(self.ip_ver & 0xf) << 28
            | u32::from(self.traffic_class) << 20
            | (self.flow_label & 0xf_ffff);
        out.extend_from_slice(&word.to_be_bytes());
        out.extend_from_slice(&self.pay_len.to_be_bytes());
        out.push(self.next_header);
        out.push(self.hop_limit);
        out.extend_from_slice(&self.sgid);
        out.extend_from_slice(&self.dgid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        // IPVer 6, TClass 0xab, FlowLabel 0xcdef1, PayLen 0x0024, NxtHdr 0x1b,
        // HopLmt 0x40, SGID fe80::1, DGID fe80::2.
        let mut bytes = vec![0x6a, 0xbc, 0xde, 0xf1, 0x00, 0x24, 0x1b, 0x40];
        let mut sgid = [0u8; 16];
        sgid[0] = 0xfe;
        sgid[1] = 0x80;
        let mut dgid = sgid;
        sgid[15] = 1;
        dgid[15] = 2;
        bytes.extend_from_slice(&sgid);
        bytes.extend_from_slice(&dgid);
        let grh = Grh::parse(&bytes).unwrap();
        assert_eq!(
            grh,
            Grh {
                ip_ver: 6,
                traffic_class: 0xab,
                flow_label: 0xcdef1,
                pay_len: 0x24,
                next_header: 0x1b,
                hop_limit: 0x40,
                sgid,
                dgid
            }
        );
        let mut out = Vec::new();
        grh.write(&mut out);
        assert_eq!(out, bytes);
        assert!(Grh::parse(&bytes[..39]).is_err());
    }
}
