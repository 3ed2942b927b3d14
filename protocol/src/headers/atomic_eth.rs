//! Atomic Extended Transport Header (IBA vol 1 §9.3.5), 28 bytes:
//! virtual address (8), R_Key (4), swap or add data (8), compare data (8).

use crate::error::ParseError;
use crate::reader::Reader;

/// Atomic ETH, carried by CmpSwap and FetchAdd requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (CmpSwap) or addend (FetchAdd).
    pub swap_add: u64,
    /// Compare value (CmpSwap; unused by FetchAdd).
    pub compare: u64,
}

impl AtomicEth {
    /// Encoded length in bytes.
    pub const LEN: usize = 28;

    /// Parses the first [`Self::LEN`] bytes of `buf`.
    pub fn parse(buf: &[u8]) -> Result<Self, ParseError> {
        Self::read(&mut Reader::new(buf))
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, ParseError> {
        // Take the whole header first, so a short input reports its full length.
        let r = &mut Reader::new(r.bytes(Self::LEN)?);
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            swap_add: r.u64()?,
            compare: r.u64()?,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.swap_add.to_be_bytes());
        out.extend_from_slice(&self.compare.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let bytes = [
            0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x08, // VA
            0xca, 0xfe, 0x00, 0x01, // R_Key
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // swap/add
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, // compare
        ];
        let eth = AtomicEth::parse(&bytes).unwrap();
        assert_eq!(
            eth,
            AtomicEth {
                va: 0x1000_0008,
                rkey: 0xcafe_0001,
                swap_add: 42,
                compare: u64::MAX - 1
            }
        );
        let mut out = Vec::new();
        eth.write(&mut out);
        assert_eq!(out, bytes);
        assert!(AtomicEth::parse(&bytes[..27]).is_err());
    }
}
