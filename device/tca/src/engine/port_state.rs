//! The port's state, LID and asynchronous events as the engine sets them
//! and BAR0 shows them (PORT_STATE, PORT_LID, EVENT_VECTOR, EVENT_CAUSE,
//! PORT_EVENTS), and the agent's trap counters (TRAPS_SENT,
//! TRAPS_REPRESSED).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::pci::msix::Msix;
use crate::regs;

/// Port state and asynchronous events, shared with BAR0 (PORT_STATE,
/// EVENT_VECTOR, EVENT_CAUSE, PORT_EVENTS).
#[derive(Debug)]
pub struct PortState {
    state: AtomicU32,
    events: AtomicU32,
    cause: AtomicU32,
    vector: AtomicU32,
    /// The LID the subnet manager gave the port; [`NO_SM_LID`] until then.
    sm_lid: AtomicU32,
    /// Traps sent and repressed.
    traps: [AtomicU32; 2],
}

/// [`PortState::sm_lid`] before any SM set a LID.
const NO_SM_LID: u32 = u32::MAX;

impl PortState {
    /// A port in `state` (IBTCA_PORT_*).
    pub fn new(state: u32) -> Arc<Self> {
        Arc::new(PortState {
            state: AtomicU32::new(state),
            events: AtomicU32::new(0),
            cause: AtomicU32::new(0),
            vector: AtomicU32::new(0),
            sm_lid: AtomicU32::new(NO_SM_LID),
            traps: [AtomicU32::new(0), AtomicU32::new(0)],
        })
    }

    /// Traps the agent sent and those the SM repressed (TRAPS_SENT,
    /// TRAPS_REPRESSED).
    pub fn traps(&self) -> (u32, u32) {
        let [sent, repressed] = &self.traps;
        (
            sent.load(Ordering::Relaxed),
            repressed.load(Ordering::Relaxed),
        )
    }

    pub(super) fn set_traps(&self, counts: crate::sma::TrapCounts) {
        let [sent, repressed] = &self.traps;
        sent.store(counts.sent as u32, Ordering::Relaxed);
        repressed.store(counts.repressed as u32, Ordering::Relaxed);
    }

    /// The LID the subnet manager set (PortInfo), if it set one: BAR0's
    /// PORT_LID then shows it rather than the configured one.
    pub fn sm_lid(&self) -> Option<u16> {
        u16::try_from(self.sm_lid.load(Ordering::Relaxed)).ok()
    }

    pub(super) fn set_sm_lid(&self, lid: u16) {
        self.sm_lid.store(u32::from(lid), Ordering::Relaxed);
    }

    /// Current IBTCA_PORT_* state.
    pub fn get(&self) -> u32 {
        self.state.load(Ordering::Relaxed)
    }

    /// Port state changes so far.
    pub fn events(&self) -> u32 {
        self.events.load(Ordering::Relaxed)
    }

    /// Pending IBTCA_EVENT_* causes.
    pub fn cause(&self) -> u32 {
        self.cause.load(Ordering::Acquire)
    }

    /// Clears the causes set in `bits` (EVENT_CAUSE is write-1-to-clear).
    pub fn clear_cause(&self, bits: u32) {
        self.cause.fetch_and(!bits, Ordering::AcqRel);
    }

    /// The MSI-X vector of asynchronous events.
    pub fn vector(&self) -> u32 {
        self.vector.load(Ordering::Relaxed)
    }

    /// Sets the vector (EVENT_VECTOR).
    pub fn set_vector(&self, v: u32) {
        self.vector.store(v, Ordering::Relaxed);
    }

    /// Sets event cause `bit` (IBTCA_EVENT_*) and raises the event vector
    /// on `msix`, unless that cause was pending already.
    pub(super) fn signal(&self, bit: u32, msix: &Msix) {
        if self.cause.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
            let v = self.vector();
            if let Err(e) = msix.trigger(v) {
                tracing::warn!(vector = v, error = %e, cause = bit, "event interrupt");
            }
        }
    }

    /// Moves the port to `s`; true if that is a change (an event).
    pub(super) fn set(&self, s: u32) -> bool {
        if self.state.swap(s, Ordering::AcqRel) == s {
            return false;
        }
        self.events.fetch_add(1, Ordering::Relaxed);
        self.cause
            .fetch_or(regs::EVENT_PORT_CHANGE, Ordering::AcqRel);
        true
    }
}
