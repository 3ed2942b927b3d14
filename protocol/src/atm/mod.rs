//! ATM: cells, their header error control, and the adaptation layers that
//! carry frames and constant-bit-rate streams in them (the gateway of seed
//! 003, issue 24). Pure code, no I/O, no panics on any input.
//!
//! - [`cell`]: the 53-byte cell and its UNI header as ITU-T I.361 lays it
//!   out, the HEC as I.432.1 computes it.
//! - [`hec`]: the receiver's HEC state machine (correction and detection
//!   modes, I.432.1 §4.3.1).
//! - [`crc32`]: AAL5's CRC-32 (non-reflected, I.363.5).
//! - [`aal5`]: AAL5 CPCS segmentation and per-VC reassembly.
//! - [`aal1`]: AAL1 SAR: SN/SNP (CRC-3 and parity), sequence checking,
//!   filler for lost cells.
//! - [`receiver`]: a whole ATM receive port: HEC, cell filtering (idle,
//!   OAM/RM, unknown VCs), the AAL of each VC, counters. AAL0 (one cell's
//!   payload as one message) lives here.

pub mod aal1;
pub mod aal5;
pub mod cell;
pub mod crc32;
pub mod hec;
pub mod receiver;

pub use cell::{Cell, CellHeader, Vc, CELL_LEN, CELL_PAYLOAD_LEN};
pub use receiver::{Aal, Delivery, Receiver, RxCounters};
