//! A bounds-checked big-endian cursor over input bytes.
//!
//! Every parser in this crate reads through [`Reader`], so no parser indexes
//! or slices input directly; running out of bytes is an error, never a panic.

use crate::error::ParseError;

/// Cursor over a byte slice; all reads are big-endian and bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left to read.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes, advancing past them.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], ParseError> {
        let end = self.pos.checked_add(n).ok_or(ParseError::Truncated {
            needed: usize::MAX,
            available: self.buf.len(),
        })?;
        let out = self.buf.get(self.pos..end).ok_or(ParseError::Truncated {
            needed: end,
            available: self.buf.len(),
        })?;
        self.pos = end;
        Ok(out)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], ParseError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N)?);
        Ok(out)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, ParseError> {
        Ok(u8::from_be_bytes(self.array()?))
    }

    /// A big-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, ParseError> {
        Ok(u16::from_be_bytes(self.array()?))
    }

    /// A big-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, ParseError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// A big-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, ParseError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_big_endian_and_stops_at_end() {
        let mut r = Reader::new(&[1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(r.u16().unwrap(), 0x0102);
        assert_eq!(r.u32().unwrap(), 0x0304_0506);
        assert_eq!(r.remaining(), 1);
        assert_eq!(
            r.u16(),
            Err(ParseError::Truncated {
                needed: 8,
                available: 7
            })
        );
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.position(), 7);
        assert!(r.bytes(usize::MAX).is_err());
    }
}
