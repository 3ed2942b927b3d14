//! Immediate Data Extended Transport Header (IBA vol 1 §9.3.6), 4 bytes.

use crate::error::ParseError;
use crate::reader::Reader;

/// Immediate data, carried by the "with Immediate" opcodes. The value is
/// opaque; it is kept as the big-endian number on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ImmDt {
    /// The immediate data.
    pub data: u32,
}

impl ImmDt {
    /// Encoded length in bytes.
    pub const LEN: usize = 4;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        Ok(Self { data: r.u32()? })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.data.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let imm = ImmDt::parse(&[0xde, 0xad, 0xbe, 0xef]).unwrap();
        assert_eq!(imm.data, 0xdead_beef);
        let mut out = Vec::new();
        imm.write(&mut out);
        assert_eq!(out, [0xde, 0xad, 0xbe, 0xef]);
        assert!(ImmDt::parse(&[1, 2, 3]).is_err());
    }
}
