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
pub mod device_control;
pub mod dma;
pub mod drdma;
pub mod engine;
pub mod fault_guard;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz_targets;
pub mod instance;
pub mod pci;
pub mod tca;
pub mod verbs;

/// The BAR0 register map (the `ibtca-abi` crate's).
pub use ibtca_abi::regs;
/// The port agents and what the device shares with switches and gateways
/// (the `ibtca-agents` crate's modules).
pub use ibtca_agents::{control_socket, guid, pma, sma, vl_config};
/// The binaries' shared command line (ibtca-cli).
pub use ibtca_cli as cli;
/// The link layer (the `ibtca-link` crate), which devices and switches
/// share.
pub use ibtca_link as link;
/// Anonymous shared-memory files (`ibtca-link`'s, for the link's rings and
/// the DRDMA packet memory).
pub use ibtca_link::memfd;
/// Logging set-up and rate-limited guest-triggered warnings (the
/// `ibtca-log` crate's).
pub use ibtca_log::{guest_warn, logging};
/// The seccomp sandbox (the `ibtca-sandbox` crate): each thread's filter
/// by role.
pub use ibtca_sandbox as sandbox;
/// Scheduling of the data-path threads (the `ibtca-sched` crate).
pub use ibtca_sched as sched;
/// The RC and UD transport (the `ibtca-transport` crate).
pub use ibtca_transport as transport;
/// The vfio-user server (the `ibtca-vfio-user` crate) that feeds the device
/// its client's messages.
pub use ibtca_vfio_user as vfio_user;
