//! The key memory's registers in BAR0 (seed 001's RKM_STATUS, with counters):
//! shared between the engine thread, which runs the invalidation walks and
//! serves READ responses, and the vfio-user thread, which reads BAR0.
//!
//! - RKM_STATUS: BUSY while keys a walk cleared are still held by operations
//!   that have not stopped yet (a held-back READ, a WRITE between packets);
//!   DONE once a walk ran and every operation it cleared has stopped.
//! - RKM_WALKS, RKM_CLEARED: walks run and key slots they cleared.
//! - RKM_QUASI_MISMATCHES: READs stopped because the quasi-WQE read from
//!   guest memory differed from the responder's record (seed 004).
//! - RKM_READ_BUDGET: READ response packets the engine sends per QP per
//!   turn; 0 holds them all back (a test hook: races become deterministic).

use std::sync::atomic::{
    AtomicU32,
    Ordering::{Acquire, Relaxed, Release},
};

use ibtca_abi::regs;

/// READ response packets served per QP per engine turn, by default.
pub const DEFAULT_READ_BUDGET: u32 = regs::RKM_READ_BUDGET_DEFAULT;

/// The shared state behind the RKM registers.
#[derive(Debug)]
pub struct RkmRegs {
    walks: AtomicU32,
    cleared: AtomicU32,
    /// Cleared slots still held by their operations.
    stopping: AtomicU32,
    quasi_mismatches: AtomicU32,
    read_budget: AtomicU32,
}

impl Default for RkmRegs {
    fn default() -> Self {
        RkmRegs {
            walks: AtomicU32::new(0),
            cleared: AtomicU32::new(0),
            stopping: AtomicU32::new(0),
            quasi_mismatches: AtomicU32::new(0),
            read_budget: AtomicU32::new(DEFAULT_READ_BUDGET),
        }
    }
}

impl RkmRegs {
    /// RKM_STATUS: IBTCA_RKM_STATUS_BUSY or IBTCA_RKM_STATUS_DONE (0 before
    /// the first walk).
    pub fn status(&self) -> u32 {
        // The walk count first: a walk it includes has its cleared slots
        // in `stopping` already (`walked`), so DONE never shows early.
        let walks = self.walks.load(Acquire);
        match (walks, self.stopping.load(Relaxed)) {
            (0, 0) => 0,
            (_, 0) => regs::RKM_STATUS_DONE,
            _ => regs::RKM_STATUS_BUSY,
        }
    }

    /// RKM_WALKS.
    pub fn walks(&self) -> u32 {
        self.walks.load(Relaxed)
    }

    /// RKM_CLEARED.
    pub fn cleared(&self) -> u32 {
        self.cleared.load(Relaxed)
    }

    /// RKM_QUASI_MISMATCHES.
    pub fn quasi_mismatches(&self) -> u32 {
        self.quasi_mismatches.load(Relaxed)
    }

    /// `n` READs stopped at a quasi-WQE that differed from their record.
    pub fn quasi_mismatched(&self, n: u32) {
        self.quasi_mismatches.fetch_add(n, Relaxed);
    }

    /// RKM_READ_BUDGET.
    pub fn read_budget(&self) -> u32 {
        self.read_budget.load(Relaxed)
    }

    /// Writes RKM_READ_BUDGET.
    pub fn set_read_budget(&self, packets: u32) {
        self.read_budget.store(packets, Relaxed);
    }

    /// A walk ran and cleared `n` held slots.
    pub(crate) fn walked(&self, n: u32) {
        // The walk is counted last: a reader of RKM_STATUS that sees it
        // sees its slots held too, BUSY until they stop.
        self.stopping.fetch_add(n, Relaxed);
        self.cleared.fetch_add(n, Relaxed);
        self.walks.fetch_add(1, Release);
    }

    /// An operation whose slot a walk cleared stopped (or its QP went).
    pub(crate) fn stopped(&self) {
        let _ = self
            .stopping
            .fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    /// Power-on values (device reset).
    pub fn reset(&self) {
        self.walks.store(0, Relaxed);
        self.cleared.store(0, Relaxed);
        self.stopping.store(0, Relaxed);
        self.quasi_mismatches.store(0, Relaxed);
        self.read_budget.store(DEFAULT_READ_BUDGET, Relaxed);
    }
}
