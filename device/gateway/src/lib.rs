//! `ibtca-gateway` (seed 003, issue 24): a node with one IB port, on an
//! ibtca link like a device's, and one ATM port, a Unix stream socket of
//! raw 53-byte cells. Each mapped ATM virtual connection is joined to an
//! RC QP: AAL5 frames, AAL1 block groups or AAL0 cell payloads become IB
//! SEND messages, and received messages go back out as cells.
//!
//! The ATM layer itself (cells, HEC, AALs) is `ibtca_protocol::atm`; the
//! QPs are the device's RC transport (`ibtca_transport::RcQp`)
//! over the gateway's own memory ([`host_env`]).
//!
//! - [`service`]: service classes and their SLs.
//! - [`map`]: the VC map and its checks.
//! - [`host_env`]: the transport's environment over host buffers.
//! - [`vc_conn`]: one connection (its QP, backlog, AAL sending half).
//! - [`scheduler`]: the class queues toward the ATM port.
//! - [`qp_thread`]: the thread that runs the QPs; [`handoff`]: the bound on
//!   what the ATM port hands it.
//! - [`atm_port`]: the ATM socket's reader and writer.
//! - [`counters`]: what is counted.
//! - [`gateway`]: all of it started and stopped together.
//! - [`control`]: the control socket.
//! - [`sma`]: the subnet management agent (the device's, on the IB port);
//!   [`pma`]: the performance management agent (the device's too).
#![deny(missing_docs)]

pub mod atm_port;
pub mod control;
pub mod counters;
pub mod gateway;
pub mod handoff;
pub mod host_env;
pub mod map;
pub mod pma;
pub mod qp_thread;
pub mod scheduler;
pub mod service;
pub mod sma;
pub mod vc_conn;

pub use gateway::{Gateway, GatewayConfig};
