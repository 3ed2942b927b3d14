//! `ibtca-hive`: many guestless nodes in one process. A hive hosts
//! switches (the switch's own forwarding core, SMA and PMA,
//! [`ibtca_switch::HostedSwitch`]) and CAs without a guest (the device's
//! own SMA and PMA, [`ca::HostedCa`]), carries the wires between them in
//! memory and the wires to nodes outside over the Unix-socket link
//! protocol ([`socket_wire::SocketWire`]), all on one thread with no timer
//! while idle ([`hive::Hive::run`]).
//!
//! - [`config`]: the hive file (nodes and where each port's wire goes).
//! - [`ca`]: a hosted CA.
//! - [`sim`]: a hosted host port (ibsim's client protocol).
//! - [`socket_wire`]: one port's link to a node outside, event-driven.
//! - [`hive`]: the nodes, the work queue and the event loop
//!   ([`hive::idle_wait`]: how it waits).
//! - [`status`]: the status file (each hosted port's link up or down).
//! - [`control`]: the control socket (`inspect`), on the hive's thread.
//! - [`report`]: what `inspect` answers (ports' states and counters).

#![deny(missing_docs)]

pub mod ca;
pub mod config;
pub mod control;
pub mod hive;
pub mod report;
pub mod sim;
pub mod socket_wire;
pub mod status;

pub use config::HiveConfig;
pub use hive::Hive;
