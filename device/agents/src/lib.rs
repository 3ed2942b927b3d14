//! The agents an InfiniBand port answers for, and what the processes that
//! run them share: the subnet management agent ([`sma`]), the performance
//! management agent ([`pma`]), a port's VL configuration ([`vl_config`]),
//! pcap/ERF packet capture ([`capture`]), the line-oriented control socket
//! ([`control_socket`]) and node GUIDs ([`guid`]). Devices, switches and
//! gateways build on it; it builds on the link layer only.
#![deny(missing_docs)]

pub mod capture;
pub mod control_socket;
pub mod guid;
pub mod pma;
pub mod sma;
pub mod vl_config;
