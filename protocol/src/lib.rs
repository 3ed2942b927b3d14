//! InfiniBand wire format (LRH, GRH, BTH, extended transport headers, ICRC
//! and VCRC) and the link framing ibtca uses to tunnel IB packets between
//! device instances. Pure code: no I/O, no panics on any input, and no
//! `unsafe` except the run-time-detected carry-less multiplies of the CRCs
//! (`crc::clmul`, `crc::avx512`).
//!
//! - [`headers`]: one plain struct per header, big-endian, `parse`/`write`.
//! - [`opcode`]: the opcode table (what each opcode carries).
//! - [`crc`]: ICRC and VCRC, with the masking and parameters documented.
//! - [`packet`]: whole packets: [`Packet::build`] and zero-copy
//!   [`PacketView::parse`].
//! - [`encoded`]: fields of an encoded packet read or changed in place,
//!   without a parse (VL, SL, DLID, opcode, QP, PSN, AETH, VCRC).
//! - [`mad`]: management datagrams: the MAD header, SMPs (LID-routed and
//!   directed-route) and the subnet management attributes.
//! - [`link`]: length-prefixed frames for the Unix-socket tunnel and a
//!   streaming [`FrameDecoder`].
//! - [`atm`]: ATM cells (UNI header, HEC), AAL5, AAL1 and AAL0, and an ATM
//!   receive port, for the ATM gateway.
//! - `fuzz_targets` (tests and the `fuzzing` feature only): the bodies of
//!   the libFuzzer targets in the repository's `fuzz/` crate.
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod atm;
pub mod crc;
pub mod encoded;
mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz_targets;
pub mod headers;
pub mod link;
pub mod mad;
pub mod opcode;
pub mod packet;
mod reader;

pub use error::{BuildError, ParseError};
pub use link::{Frame, FrameDecoder, FrameError};
pub use opcode::{ExtHeader, Opcode, OpcodeInfo};
pub use packet::{FillError, Packet, PacketView};
