//! Logging shared by every ibtca crate: the binaries' `tracing` set-up
//! ([`logging`]) and [`guest_warn!`], the rate-limited warning for what a
//! guest or client can trigger ([`ratelimit`]).
#![deny(missing_docs)]

pub mod logging;
pub mod ratelimit;
