//! `ibtca-gateway` (seed 003, issue 24): a node with one IB port, on an
//! ibtca link like a device's, and one ATM port, a Unix stream socket of
//! raw 53-byte cells. Each mapped ATM virtual connection is joined to an
//! RC QP: AAL5 frames, AAL1 block groups or AAL0 cell payloads become IB
//! SEND messages, and received messages go back out as cells.
//!
//! - [`service`]: service classes and their SLs.
//! - [`map`]: the VC map and its checks.
#![deny(missing_docs)]

pub mod map;
pub mod service;
