//! IB headers, one module each. All fields are big-endian on the wire.
//!
//! Every header is a plain struct with a `LEN` constant, a
//! `parse(&[u8]) -> Result<Self, ParseError>` that reads the first `LEN`
//! bytes, and a `write(&self, &mut Vec<u8>)` that appends exactly `LEN`.

mod aeth;
mod atomic_ack_eth;
mod atomic_eth;
mod bth;
mod deth;
mod ext;
mod grh;
mod ieth;
mod immdt;
mod lrh;
mod reth;

pub use aeth::{AckKind, Aeth, NakCode, CREDITS_INVALID};
pub use atomic_ack_eth::AtomicAckEth;
pub use atomic_eth::AtomicEth;
pub use bth::{Bth, MASK_24};
pub use deth::Deth;
pub use ext::ExtHeaders;
pub use grh::Grh;
pub use ieth::Ieth;
pub use immdt::ImmDt;
pub use lrh::{is_multicast_lid, Lnh, Lrh, FIRST_MULTICAST_LID, LAST_MULTICAST_LID};
pub use reth::Reth;
