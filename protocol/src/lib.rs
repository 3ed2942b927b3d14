//! InfiniBand wire format (LRH, GRH, BTH, extended transport headers, ICRC and
//! VCRC) and the link framing ibtca uses to tunnel IB packets between device
//! instances. Pure code: no I/O, no `unsafe`, no panics on any input.
//!
//! The headers and framing arrive with the verbs/RC slice; this crate holds
//! the place in the workspace layout so that `device/` can depend on it.
#![forbid(unsafe_code)]
