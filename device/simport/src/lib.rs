//! `ibtca-simport`: a fabric port a host program owns. It speaks ibsim's
//! client protocol, so Debian's unmodified `libumad2sim.so` (LD_PRELOAD)
//! attaches OpenSM and infiniband-diags on the host to an ibtca fabric:
//! the client becomes a channel adapter of one port (its own node and port
//! GUID, the device's SMA and PMA answering for the port) cabled to a
//! switch port, its QP0 and QP1 MADs the port's (docs/host-sm.md).
//!
//! - [`wire`]: the protocol's messages (control, CONNECT's data, a MAD's
//!   envelope), parsed from any bytes without panicking;
//! - [`clients`]: the attached clients and the requests they wait on;
//! - [`client`]: a client as libumad2sim makes one, for tests;
//! - [`port`]: the channel adapter: agents and MAD routing;
//! - `control`: the control messages at the port;
//! - [`sockets`]: ibsim's abstract Unix datagram sockets;
//! - [`server`]: the link, the sockets and the loop between them.
#![deny(missing_docs)]

pub mod client;
pub mod clients;
mod control;
pub mod port;
pub mod server;
pub mod sockets;
pub mod wire;

pub use control::CtlOutcome;
