//! A checked remote access ([`RemoteTarget`]): what checking an R_Key for
//! a range found, the region and the part of it the range reaches. The
//! device's region table makes one (`verbs/mr.rs`); the key memory keeps
//! it for an operation's later packets (`keys.rs`, seed 001).

/// A checked remote access: the region and the offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteTarget {
    /// The region's slot in the region table.
    pub mr_slot: usize,
    /// Where the access starts in the region.
    pub offset: u64,
    /// Bytes the access reaches.
    pub len: u64,
}

impl RemoteTarget {
    /// Bytes `[off, off + len)` of this checked access (an operation's
    /// later packet, seed 001: no key lookup), or `None` past its end.
    pub fn part(&self, off: u64, len: u64) -> Option<RemoteTarget> {
        (off.checked_add(len)? <= self.len).then_some(RemoteTarget {
            mr_slot: self.mr_slot,
            offset: self.offset + off,
            len,
        })
    }

    /// A target of the transport's mock environment: `len` bytes at
    /// `offset` of its one memory.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn mock(offset: u64, len: u64) -> Self {
        RemoteTarget {
            mr_slot: 0,
            offset,
            len,
        }
    }

    /// Where a mock target starts in the mock's memory.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn mock_offset(&self) -> u64 {
        self.offset
    }
}
