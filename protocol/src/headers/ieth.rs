//! Invalidate Extended Transport Header (IBA vol 1 §9.3.7), 4 bytes.

use crate::error::ParseError;
use crate::reader::Reader;

/// Invalidate ETH, carried by SEND LAST/ONLY with Invalidate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Ieth {
    /// The R_Key to invalidate at the responder.
    pub rkey: u32,
}

impl Ieth {
    /// Encoded length in bytes.
    pub const LEN: usize = 4;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        Ok(Self { rkey: r.u32()? })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.rkey.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let ieth = Ieth::parse(&[0x00, 0x00, 0x02, 0x7a]).unwrap();
        assert_eq!(ieth.rkey, 0x27a);
        let mut out = Vec::new();
        ieth.write(&mut out);
        assert_eq!(out, [0x00, 0x00, 0x02, 0x7a]);
    }
}
