//! A cursor that turns fuzz input into values: every read succeeds, with
//! zeros once the input runs out, so a target never has to reject input.

/// Arbitrary bytes read as a sequence of small values.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }

    /// The next byte (0 at the end).
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((b, rest)) => {
                self.data = rest;
                *b
            }
            None => 0,
        }
    }

    /// The next `n` bytes, fewer at the end.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (take, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        take
    }

    /// The next little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// The next little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    /// The next little-endian u64.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// The next bit as a bool.
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 != 0
    }

    /// One of `choices`, picked by the next byte.
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        let i = usize::from(self.u8()) % choices.len();
        choices[i]
    }
}
