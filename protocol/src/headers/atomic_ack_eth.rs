//! Atomic Acknowledge Extended Transport Header (IBA vol 1 §9.3.8), 8 bytes.

use crate::error::ParseError;
use crate::reader::Reader;

/// Atomic ACK ETH, carried by ATOMIC ACKNOWLEDGE after the AETH.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AtomicAckEth {
    /// The remote data before the atomic operation.
    pub orig: u64,
}

impl AtomicAckEth {
    /// Encoded length in bytes.
    pub const LEN: usize = 8;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        Ok(Self { orig: r.u64()? })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.orig.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let bytes = [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef];
        let eth = AtomicAckEth::parse(&bytes).unwrap();
        assert_eq!(eth.orig, 0x0123_4567_89ab_cdef);
        let mut out = Vec::new();
        eth.write(&mut out);
        assert_eq!(out, bytes);
    }
}
