//! RDMA Extended Transport Header (IBA vol 1 §9.3.4), 16 bytes:
//! virtual address (8), R_Key (4), DMA length (4).

use crate::error::ParseError;
use crate::reader::Reader;

/// RDMA ETH, carried by RDMA WRITE FIRST/ONLY and RDMA READ requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole RDMA operation in bytes.
    pub dma_len: u32,
}

impl Reth {
    /// Encoded length in bytes.
    pub const LEN: usize = 16;

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
            dma_len: r.u32()?,
        })
    }

    /// Appends the encoded header to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.va.to_be_bytes());
        out.extend_from_slice(&self.rkey.to_be_bytes());
        out.extend_from_slice(&self.dma_len.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let bytes = [
            0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x00, // VA
            0x00, 0x00, 0x12, 0x34, // R_Key
            0x00, 0x01, 0x00, 0x00, // DMA length 64 KiB
        ];
        let reth = Reth::parse(&bytes).unwrap();
        assert_eq!(
            reth,
            Reth {
                va: 0x7f12_3456_7800,
                rkey: 0x1234,
                dma_len: 0x1_0000
            }
        );
        let mut out = Vec::new();
        reth.write(&mut out);
        assert_eq!(out, bytes);
        assert!(Reth::parse(&bytes[..15]).is_err());
    }
}
