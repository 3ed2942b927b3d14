//! PCI function model: configuration space and MSI-X.
//!
//! Nothing here knows about vfio-user; the transport maps its region indexes
//! onto these pieces (see [`crate::tca`]).

pub mod config;
pub mod msix;

/// An access the PCI rules reject.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PciError {
    /// Wrong size or alignment for this space.
    #[error("bad access of {len} bytes at offset {offset:#x}")]
    BadAccess {
        /// Offset in the space.
        offset: u64,
        /// Access length.
        len: usize,
    },
    /// Outside the space.
    #[error("access of {len} bytes at offset {offset:#x} is outside the space")]
    OutOfRange {
        /// Offset in the space.
        offset: u64,
        /// Access length.
        len: usize,
    },
    /// No such MSI-X vector.
    #[error("MSI-X vector {0} does not exist")]
    BadVector(u32),
    /// A vector range that is not inside the table.
    #[error("MSI-X vectors {start}+{count} are outside the table")]
    BadVectorRange {
        /// First vector.
        start: u32,
        /// Number of vectors.
        count: u32,
    },
}
