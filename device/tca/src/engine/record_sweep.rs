//! The engine's look at the doorbell records it sleeps on, once per
//! [`RECORD_SWEEP`] (the engine thread's turns come at least once a
//! second).
//!
//! A record's handshake (`verbs/db_record.rs`, and a CQ record's arm
//! word, `verbs/cq.rs`) leaves nothing behind when both sides fence
//! between their store and their load. A driver whose fence does not order
//! them (a missing one, or a locked instruction in a one-vCPU TCG guest,
//! docs/verbs-abi.md) can post on a sleeping SQ record and ring nothing,
//! or arm a CQ through its record just as the completion it waits for is
//! written, and then wait forever. The sweep finds both:
//! - an SQ record whose index is ahead of the SQ's, with no send work in
//!   flight: its WQEs are taken (`late_doorbells`);
//! - a CQ record's arm word that no completion took, with a completion
//!   unconsumed: the CQ's interrupt is raised (`late_cq_arms`).
//!
//! Each must be seen at two looks in a row, unchanged: a driver that is
//! between its store and the doorbell it owes (tens of microseconds under
//! TCG) is not a lost doorbell, and is neither taken early nor counted.
//! So a lost doorbell or interrupt costs one to two sweep periods, and is
//! counted and logged.

use std::time::{Duration, Instant};

use super::Engine;
use crate::verbs::db_record::RecordQueue;

/// How often the engine looks at the records it sleeps on, by default.
pub const RECORD_SWEEP: Duration = Duration::from_secs(1);

/// The sweep's schedule and what its last look saw.
#[derive(Debug)]
pub(super) struct RecordSweep {
    /// How often it looks (`None`: never).
    every: Option<Duration>,
    /// When it looks next (`None` before the first turn).
    next: Option<Instant>,
    /// The SQ records ahead at the last look: (QP, record index).
    ahead: Vec<(u32, u32)>,
}

impl Default for RecordSweep {
    fn default() -> Self {
        RecordSweep {
            every: Some(RECORD_SWEEP),
            next: None,
            ahead: Vec::new(),
        }
    }
}

/// Of the records ahead now, those that were ahead with the same index at
/// the last look.
fn ahead_twice(last: &[(u32, u32)], now: &[(u32, u32)]) -> Vec<u32> {
    now.iter()
        .filter(|entry| last.contains(entry))
        .map(|&(qpn, _)| qpn)
        .collect()
}

impl Engine {
    /// Sets how often [`Engine::sweep_records`] looks (`None`: never).
    pub fn set_record_sweep(&mut self, every: Option<Duration>) {
        self.sweep = RecordSweep {
            every,
            ..RecordSweep::default()
        };
    }

    /// Looks at the records if a sweep is due at `now` (see the module);
    /// returns whether it took any WQE (the caller flushes).
    pub(super) fn sweep_records(&mut self, now: Instant) -> bool {
        let Some(every) = self.sweep.every else {
            return false;
        };
        let due = *self.sweep.next.get_or_insert(now + every);
        if now < due {
            return false;
        }
        self.sweep.next = Some(now + every);
        self.pin_memory();
        let ahead: Vec<(u32, u32)> = self
            .verbs
            .qps
            .iter()
            .filter_map(|(qpn, qp)| Some((qpn, qp.record_ahead(&self.mem, RecordQueue::Sq)?)))
            .filter(|(qpn, _)| !self.sends.held.contains_key(qpn) && !self.data.has_send_work(*qpn))
            .collect();
        let late = ahead_twice(&self.sweep.ahead, &ahead);
        self.sweep.ahead = ahead;
        for &qpn in &late {
            self.stats.late_doorbells += 1;
            crate::guest_warn!(
                qpn,
                "send queue: WQEs posted on the doorbell record while the device slept on it, \
                 with no doorbell; taken a sweep later (does the driver fence between its \
                 index store and its awake-word load?)"
            );
            self.drain_sq(qpn, now);
        }
        for vector in self.verbs.sweep_cq_arms(&self.mem) {
            self.stats.late_cq_arms += 1;
            crate::guest_warn!(
                vector,
                "CQ: an arm request in the doorbell record that no completion took; \
                 raised a sweep later (does the driver fence between its arm store and \
                 its look for a completion?)"
            );
            if let Err(e) = self.msix.trigger(u32::from(vector)) {
                crate::guest_warn!(vector, error = %e, "swept CQ interrupt");
            }
        }
        if late.is_empty() {
            self.unpin_memory();
        }
        !late.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_late_only_when_ahead_at_two_looks_with_the_same_index() {
        let last = [(7, 3), (9, 1)];
        // 7 unchanged: late. 9 moved on (a driver still posting, or
        // ringing): not late. 11 new: not yet.
        assert_eq!(ahead_twice(&last, &[(7, 3), (9, 2), (11, 1)]), [7]);
        assert!(ahead_twice(&[], &[(7, 3)]).is_empty());
        assert!(ahead_twice(&last, &[]).is_empty());
    }
}
