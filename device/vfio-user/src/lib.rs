//! The vfio-user transport: a server for one client at a time on a Unix
//! socket, in front of a device that implements [`Backend`].
//!
//! # Why not the `vfio_user` crate's server
//! The rust-vmm `vfio_user` crate (0.1.7) was the starting point, and its
//! client is still used as an independent peer in the tests. Its server could
//! not be kept: it panics on a VERSION message without a NUL, trusts the
//! client's sizes (a REGION_READ can make it allocate 4 GiB), reads fixed
//! structs regardless of the message size so a short message desynchronises
//! the stream, replies to NO_REPLY messages (which desynchronises QEMU),
//! sends errno 0 for most errors, and blocks in `read` for every message
//! (four syscalls per access, no way to spin before blocking). This module is
//! a small replacement with exact length checks, real errnos, and a
//! spin-then-block receive loop; the device stays behind [`Backend`] so the
//! transport can be replaced again.
//!
//! # Errors returned to the client
//! | condition | errno |
//! |---|---|
//! | any command before VERSION, a payload of the wrong size, bad argsz, bad region or IRQ index, access outside a region, bad SET_IRQS flags | `EINVAL` |
//! | message larger than `MAX_MSG_SIZE`, or an access larger than `MAX_DATA_XFER` | `E2BIG` |
//! | DMA map overlapping an existing one | `EEXIST` |
//! | unknown command number | `ENOSYS` |
//! | known command this server does not implement (DMA_READ/WRITE from the client, dirty pages, region I/O fds, WRITE_MULTI) | `ENOTSUP` |
//! | fds on a command that takes none, or too many | `EINVAL` |
//!
//! A header whose size is below 16 cannot be framed: the server answers
//! `EINVAL` and closes the connection, then waits for the next client. A
//! message flagged NO_REPLY never gets a reply, not even an error (QEMU would
//! misparse it); its errors are logged and counted.

pub mod server;
pub mod socket;
pub mod wire;

use std::fs::File;

pub use server::{Server, ServerConfig, ServerStats};
pub use socket::ShutdownHandle;

/// An error for the client: an errno and a reason for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (errno {errno})")]
pub struct Errno {
    /// The errno sent in the reply header.
    pub errno: i32,
    /// What went wrong, for logs.
    pub reason: String,
}

impl Errno {
    /// An error with the given errno.
    pub fn new(errno: i32, reason: impl Into<String>) -> Self {
        Errno {
            errno,
            reason: reason.into(),
        }
    }

    /// `EINVAL` with a reason.
    pub fn inval(reason: impl Into<String>) -> Self {
        Self::new(libc::EINVAL, reason)
    }
}

/// The device side of the transport: what a vfio-user client can ask of a
/// PCI function. Region and IRQ indexes are the vfio PCI ones (BARs 0-5, ROM
/// 6, config 7, VGA 8; INTx 0, MSI 1, MSI-X 2, ERR 3, REQ 4).
pub trait Backend {
    /// DEVICE_GET_INFO.
    fn device_info(&self) -> wire::DeviceInfo;
    /// DEVICE_GET_REGION_INFO for `index` (argsz is filled by the server).
    fn region_info(&self, index: u32) -> Result<wire::RegionInfo, Errno>;
    /// DEVICE_GET_IRQ_INFO for `index`.
    fn irq_info(&self, index: u32) -> Result<wire::IrqInfo, Errno>;
    /// REGION_READ.
    fn region_read(&mut self, region: u32, offset: u64, data: &mut [u8]) -> Result<(), Errno>;
    /// REGION_WRITE.
    fn region_write(&mut self, region: u32, offset: u64, data: &[u8]) -> Result<(), Errno>;
    /// DMA_MAP, with the client's file if it sent one.
    fn dma_map(&mut self, map: &wire::DmaMap, fd: Option<File>) -> Result<(), Errno>;
    /// DMA_UNMAP.
    fn dma_unmap(&mut self, unmap: &wire::DmaUnmap) -> Result<(), Errno>;
    /// DEVICE_SET_IRQS, with the eventfds the client sent.
    fn set_irqs(&mut self, req: &wire::SetIrqs, fds: Vec<File>) -> Result<(), Errno>;
    /// DEVICE_RESET.
    fn reset(&mut self) -> Result<(), Errno>;
    /// The client went away: drop its maps and eventfds, reset.
    fn disconnected(&mut self);
    /// The memory a client may mmap for region `index`, if any: the region
    /// info then carries the MMAP flag, a sparse-mmap capability and the file.
    fn region_mmap(&self, _index: u32) -> Option<RegionMmap> {
        None
    }
}

/// A region (or parts of it) the client can map: `areas` are (offset,
/// size) in the region, backed by `file` at the same offsets.
#[derive(Debug, Clone)]
pub struct RegionMmap {
    /// The backing file (sent with the region info).
    pub file: std::sync::Arc<File>,
    /// Mappable areas, page-aligned.
    pub areas: Vec<(u64, u64)>,
}
