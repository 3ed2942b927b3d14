//! ibtca device: an InfiniBand Target Channel Adapter served to QEMU as a PCI
//! device over vfio-user.
//!
//! The device core ([`tca::Tca`] and the modules it is built from) knows
//! nothing about sockets: it is a state machine over configuration space,
//! registers, interrupts and guest memory. [`vfio_user`] is the transport
//! that feeds it client messages. See ARCHITECTURE.md for the map.
#![deny(missing_docs)]

pub mod bar0;
pub mod client_fd;
pub mod control_socket;
pub mod dma;
pub mod drdma;
pub mod engine;
pub mod fault_guard;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz_targets;
pub mod guid;
pub mod instance;
pub mod logging;
pub mod pci;
pub mod pma;
pub mod ratelimit;
pub mod regs;
pub mod sandbox;
pub mod sched;
pub mod sma;
pub mod switch;
pub mod tca;
pub mod transport;
pub mod verbs;
pub mod vfio_user;
pub mod vl_config;

/// The link layer (the `ibtca-link` crate), which devices and switches
/// share.
pub use ibtca_link as link;
/// Anonymous shared-memory files (`ibtca-link`'s, for the link's rings and
/// the DRDMA packet memory).
pub use ibtca_link::memfd;
