//! Datagram Extended Transport Header (IBA vol 1 §9.3.3), 8 bytes:
//! Q_Key (4), reserved (1), source QP (3).

use super::bth::MASK_24;
use crate::error::ParseError;
use crate::reader::Reader;

/// Datagram ETH, carried by UD packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl Deth {
    /// Encoded length in bytes.
    pub const LEN: usize = 8;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        Ok(Self {
            qkey: r.u32()?,
            src_qp: r.u32()? & MASK_24,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.qkey.to_be_bytes());
        out.extend_from_slice(&(self.src_qp & MASK_24).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        // Q_Key 0x80010000 (the GSI Q_Key), reserved byte set, source QP 1.
        let bytes = [0x80, 0x01, 0x00, 0x00, 0xee, 0x00, 0x00, 0x01];
        let deth = Deth::parse(&bytes).unwrap();
        assert_eq!(
            deth,
            Deth {
                qkey: 0x8001_0000,
                src_qp: 1
            }
        );
        let mut out = Vec::new();
        deth.write(&mut out);
        assert_eq!(out, [0x80, 0x01, 0, 0, 0, 0, 0, 1]);
    }
}
