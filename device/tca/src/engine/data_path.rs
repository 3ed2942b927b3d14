//! The engine's data path: every RC QP's transport state, the QPs that owe
//! READ responses (served a turn at a time: `turn.rs`), and the least local
//! ACK timeout a QP starts with.

use std::time::Duration;

use super::qp_map::QpMap;
use crate::transport::RcQp;

/// The RC transport of the device's QPs.
#[derive(Default)]
pub(super) struct DataPath {
    /// Per QP in RTR or RTS (or in error after them): its transport.
    pub(super) rc: QpMap<RcQp>,
    /// QPs that owed responses after their last call into the transport.
    pub(super) owing: Vec<u32>,
    /// The least local ACK timeout a QP runs with (`set_min_ack_timeout`).
    pub(super) min_ack_timeout: Duration,
}
