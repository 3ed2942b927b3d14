//! CQ interrupt moderation (MODIFY_CQ, CAP_CQ_MODERATION): an armed CQ
//! holds back the interrupt of a completion that satisfies its arm until
//! `count` such completions were written, or `period` after the first of
//! them, whichever comes first; then it fires once and disarms, as an
//! unmoderated CQ does at its first. No wake-up is lost: a held
//! completion always has a deadline, and the engine's timers
//! ([`Verbs::next_cq_deadline`], [`Verbs::expire_cqs`]) fire the CQ at
//! it. A count of 0 or 1, or a zero period, holds nothing.
//!
//! Time is the caller's `now`, so tests drive it by hand.

use std::time::{Duration, Instant};

use super::abi::CmdModifyCq;
use super::{Verbs, VerbsError};

/// A CQ's moderation and what it holds back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moderation {
    /// Completions that fire at once.
    count: u16,
    /// How long the first held completion waits at most.
    period: Duration,
    /// Completions held since the CQ last fired.
    held: u16,
    /// When the held completions fire anyway.
    due: Option<Instant>,
}

impl Moderation {
    /// Sets the count and period. Completions already held keep their
    /// deadline (so a change never delays a wake-up past the old one).
    pub fn set(&mut self, count: u16, period: Duration) {
        self.count = count;
        self.period = period;
    }

    /// Whether completions are held at all.
    fn holds(&self) -> bool {
        self.count > 1 && !self.period.is_zero()
    }

    /// A completion satisfied the CQ's arm at `now`: true to hold its
    /// interrupt back, false to fire now (then call [`Self::fired`]).
    pub fn hold(&mut self, now: Instant) -> bool {
        if !self.holds() {
            return false;
        }
        self.held = self.held.saturating_add(1);
        if self.held >= self.count {
            return false;
        }
        // A period past the end of time fires at the next completion.
        let Some(due) = now.checked_add(self.period) else {
            return false;
        };
        self.due.get_or_insert(due);
        true
    }

    /// The CQ fired (or was disarmed): nothing is held any more.
    pub fn fired(&mut self) {
        self.held = 0;
        self.due = None;
    }

    /// When the held completions fire, if any are held.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Whether held completions are due at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        self.due.is_some_and(|d| d <= now)
    }
}

impl Verbs {
    /// MODIFY_CQ: sets CQ `p.cqn`'s moderation.
    pub fn modify_cq(&mut self, p: &CmdModifyCq) -> Result<(), VerbsError> {
        if p.rsvd0 != [0; 2] || p.rsvd != [0; 36] {
            return Err(VerbsError::Invalid);
        }
        let cq = self
            .cqs
            .get_mut(p.cqn.to_native())
            .ok_or(VerbsError::NotFound)?;
        let period = Duration::from_micros(u64::from(p.period_us.to_native()));
        cq.set_moderation(p.count.to_native(), period);
        Ok(())
    }

    /// Lists CQ `cqn` among those holding completions, if it holds any
    /// (after a completion was written to it).
    pub(super) fn note_held(&mut self, cqn: u32) {
        let holds = self
            .cqs
            .get(cqn)
            .is_some_and(|c| c.moderation_due().is_some());
        if holds && !self.held_cqs.contains(&cqn) {
            self.held_cqs.push(cqn);
        }
    }

    /// The earliest deadline of a CQ's held completions.
    pub fn next_cq_deadline(&self) -> Option<Instant> {
        let cqs = &self.cqs;
        self.held_cqs
            .iter()
            .filter_map(|&cqn| cqs.get(cqn)?.moderation_due())
            .min()
    }

    /// Fires the CQs whose held completions are due at `now`; returns
    /// their MSI-X vectors. CQs that fired otherwise, or are gone, leave
    /// the list.
    pub fn expire_cqs(&mut self, now: Instant) -> Vec<u16> {
        let mut vectors = Vec::new();
        let cqs = &mut self.cqs;
        self.held_cqs.retain(|&cqn| {
            let Some(cq) = cqs.get_mut(cqn) else {
                return false;
            };
            if cq.expire(now) {
                vectors.push(cq.vector());
            }
            cq.moderation_due().is_some()
        });
        vectors
    }
}

#[cfg(test)]
mod tests {
    use super::super::abi::{Cqe, CQ_ARM_NEXT};
    use super::super::testmem::TestMem;
    use super::super::{Limits, PortAttrs};
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn modify(v: &mut Verbs, cqn: u32, count: u16, period_us: u32) -> Result<(), VerbsError> {
        let p = CmdModifyCq {
            cqn: cqn.into(),
            count: count.into(),
            period_us: period_us.into(),
            ..Default::default()
        };
        v.modify_cq(&p)
    }

    #[test]
    fn counts_and_periods_that_hold_nothing() {
        let t0 = Instant::now();
        for (count, period) in [(0, MS), (1, MS), (8, Duration::ZERO)] {
            let mut m = Moderation::default();
            m.set(count, period);
            assert!(!m.hold(t0), "count {count}, period {period:?}");
            assert_eq!(m.due(), None);
        }
        let mut m = Moderation::default();
        m.set(3, MS);
        assert!(m.hold(t0), "first of three");
        assert_eq!(m.due(), Some(t0 + MS), "the first sets the deadline");
        assert!(m.hold(t0 + MS / 2));
        assert_eq!(m.due(), Some(t0 + MS), "later ones do not move it");
        assert!(!m.expired(t0 + MS / 2));
        assert!(m.expired(t0 + MS));
        assert!(!m.hold(t0 + MS / 2), "the third fires");
        m.fired();
        assert_eq!(m.due(), None);
    }

    /// The verbs' timers: a held CQ is due at its deadline, not before,
    /// fires once there, and a destroyed one never does.
    #[test]
    fn held_cqs_fire_at_their_deadline() {
        let m = TestMem::new(0x10000);
        let mut v = Verbs::new(Limits::default(), PortAttrs::default(), 1);
        let a = v.create_cq(0x1000, 4, 5, 0).unwrap();
        let b = v.create_cq(0x2000, 4, 6, 0).unwrap();
        assert_eq!(modify(&mut v, a, 4, 1000), Ok(()));
        assert_eq!(modify(&mut v, b, 4, 3000), Ok(()));
        let t0 = Instant::now();
        for cqn in [a, b] {
            v.cqs
                .get_mut(cqn)
                .unwrap()
                .doorbell(0, CQ_ARM_NEXT)
                .unwrap();
            let fire = v.complete(&m.mem, cqn, &Cqe::default(), false, t0);
            assert_eq!(fire, Ok(None), "held");
        }
        assert_eq!(v.next_cq_deadline(), Some(t0 + MS));
        assert_eq!(v.expire_cqs(t0 + MS / 2), Vec::<u16>::new(), "not yet");
        assert_eq!(v.expire_cqs(t0 + MS), vec![5]);
        assert_eq!(v.next_cq_deadline(), Some(t0 + 3 * MS), "b waits");
        assert_eq!(v.expire_cqs(t0 + MS), Vec::<u16>::new(), "a fired once");
        v.destroy_cq(b).unwrap();
        assert_eq!(v.next_cq_deadline(), None);
        assert_eq!(v.expire_cqs(t0 + 4 * MS), Vec::<u16>::new());
        assert_eq!(modify(&mut v, b, 4, 1000), Err(VerbsError::NotFound));
        let bad = CmdModifyCq {
            cqn: a.into(),
            rsvd0: [1, 0],
            ..Default::default()
        };
        assert_eq!(v.modify_cq(&bad), Err(VerbsError::Invalid));
    }
}
