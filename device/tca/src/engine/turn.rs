//! The engine's turns without an event: expired transport timers, CQs
//! whose moderation held completions to their deadline, the agent's trap
//! repeats (`sma/trap.rs`), the sweep of sleeping doorbell records
//! (`record_sweep.rs`), and the
//! responders' READ responses (seed 004), served RKM_READ_BUDGET packets
//! per QP per turn between the events that drive the QPs' requesters.

use std::sync::Arc;
use std::time::Instant;

use super::Engine;
use crate::verbs::rkm_regs::RkmRegs;

impl Engine {
    /// Shows the key memory's state in `rkm` (the device's BAR0) and takes
    /// the READ response budget from it.
    pub fn set_rkm(&mut self, rkm: Arc<RkmRegs>) {
        self.verbs.keys.use_regs(rkm.clone());
        self.rkm = rkm;
    }

    /// Runs expired timers (the agent's trap too), and a turn of READ
    /// responses.
    pub fn on_timers(&mut self, now: Instant) {
        if self.verbs.next_cq_deadline().is_some_and(|d| d <= now) {
            for vector in self.verbs.expire_cqs(now) {
                if let Err(e) = self.msix.trigger(u32::from(vector)) {
                    crate::guest_warn!(vector, error = %e, "moderated CQ interrupt");
                }
            }
        }
        let trap = self.agents.due_trap(now);
        let trapped = trap.is_some();
        self.outbox.packets.extend(trap);
        let swept = self.sweep_records(now);
        if self.data.next_deadline().is_none_or(|d| d > now) {
            if self.responses_due() || trapped || swept {
                self.pin_memory();
                self.flush(now);
            }
            return;
        }
        self.pin_memory();
        for qpn in self.data.due(now) {
            self.with_qp(qpn, |rc, env| rc.on_timer(now, env));
            // A QP that failed flushes what was posted meanwhile and lets
            // its doorbell record sleep.
            if self.data.is_error(qpn) {
                self.drain_sq(qpn, now);
            }
        }
        if self.sends.any_capped() {
            self.resume_capped(now);
        }
        self.flush(now);
    }

    /// The earliest transport deadline: now while READ responses wait for
    /// the next turn.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.responses_due() {
            return Some(Instant::now());
        }
        let trap = self.agents.sma.next_trap_deadline();
        let cq = self.verbs.next_cq_deadline();
        self.data
            .next_deadline()
            .into_iter()
            .chain(trap)
            .chain(cq)
            .min()
    }

    /// Whether a QP owes responses and the budget lets them go.
    fn responses_due(&self) -> bool {
        self.data.responses_due(&self.rkm)
    }

    /// One turn of the responders (seed 004): every QP that owes READ
    /// responses sends up to RKM_READ_BUDGET of them, between the bursts
    /// of its own requester (which the events of the turn sent).
    pub(super) fn serve_responses(&mut self) {
        let budget = self.rkm.read_budget() as usize;
        if budget == 0 {
            return;
        }
        // A QP that still owes after its turn is listed again (by
        // `with_qp`); one gone or failed is not.
        let owing = std::mem::take(&mut self.data.owing);
        for &qpn in &owing {
            self.with_qp(qpn, |rc, env| {
                rc.serve_responses(budget, env);
            });
        }
    }
}
