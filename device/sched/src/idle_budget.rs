//! How long a polling thread spins when it runs out of work before it
//! blocks in the kernel: an idle budget that adapts to how often spinning
//! would have paid off recently.
//!
//! Every data-path thread that waits for work (the vfio-user thread for
//! QEMU's next message, a link reader for its ring, the engine thread for
//! its queue) has a configured spin, the most it may poll (`ibtca-device
//! --spin-us`, `--link-spin-us`, `--engine-spin-us`). Spinning pays when the
//! work comes soon: it saves the wake-up of a blocked thread (tens of µs
//! across CPUs on a virtual host). It costs when the work comes late: the
//! CPU it burns is taken from the thread that would produce the work, on a
//! host with fewer CPUs than busy threads.
//!
//! The policy, after each idle period (the time from running out of work
//! to the next work), like KVM's halt polling:
//!
//! - **The work came within the budget** (the spin caught it): the budget
//!   stays.
//! - **It came after the budget but within the configured spin** (the
//!   thread blocked, and a longer spin would have caught it): the budget
//!   doubles, from at least [`GROW_START`] of the configured spin, up to the
//!   configured spin.
//! - **It came after the configured spin, or nothing came** (no spin up to
//!   the limit would have paid): the budget halves, and drops to zero once
//!   it is below the grow start.
//!
//! So a thread whose work keeps arriving later than its limit stops
//! spinning after a few periods, and one whose work comes back quickly
//! spins again after a few. The budget never exceeds the configured spin;
//! a configured spin of zero never spins, adaptive or not.
//!
//! The policy is a pure function of the idle times it is told, so it is
//! tested without clocks; the threads measure the idle times.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where a grown budget starts: this fraction (1/`GROW_START`) of the
/// configured spin.
pub const GROW_START: u32 = 8;

/// `set_fixed_spins(true)`: budgets made by [`IdleBudget::new`] spin their
/// whole limit every time.
static FIXED_SPINS: AtomicBool = AtomicBool::new(false);

/// Process-wide: whether the budgets made from now on by
/// [`IdleBudget::new`] are fixed (always the whole configured spin, the
/// policy before the adaptive budget) rather than adaptive. For
/// before/after measurements (`ibtca-bench verbs --fixed-spins`).
pub fn set_fixed_spins(fixed: bool) {
    FIXED_SPINS.store(fixed, Ordering::Relaxed);
}

/// Whether [`set_fixed_spins`] asked for fixed spins.
pub fn fixed_spins() -> bool {
    FIXED_SPINS.load(Ordering::Relaxed)
}

/// One polling thread's idle budget (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleBudget {
    /// The configured spin: the budget's upper bound.
    limit: Duration,
    /// How long the next idle period spins before it blocks.
    budget: Duration,
    /// False: the budget stays at `limit`.
    adaptive: bool,
}

impl IdleBudget {
    /// A budget of at most `limit`, adaptive unless the process asked for
    /// fixed spins ([`set_fixed_spins`]).
    pub fn new(limit: Duration) -> Self {
        if fixed_spins() {
            Self::fixed(limit)
        } else {
            Self::adaptive(limit)
        }
    }

    /// An adaptive budget of at most `limit`, starting at `limit`.
    pub fn adaptive(limit: Duration) -> Self {
        IdleBudget {
            limit,
            budget: limit,
            adaptive: true,
        }
    }

    /// A budget that always spins the whole `limit`.
    pub fn fixed(limit: Duration) -> Self {
        IdleBudget {
            limit,
            budget: limit,
            adaptive: false,
        }
    }

    /// How long the next idle period spins before the thread blocks.
    pub fn spin(&self) -> Duration {
        self.budget
    }

    /// True when the thread never spins (a configured spin of zero): it
    /// may block at once and need not time its idle periods.
    pub fn never_spins(&self) -> bool {
        self.limit.is_zero()
    }

    /// Work ended an idle period of `idle`.
    pub fn work_after(&mut self, idle: Duration) {
        if !self.adaptive || idle <= self.budget {
            return;
        }
        if idle <= self.limit {
            self.grow();
        } else {
            self.shrink();
        }
    }

    /// An idle period of `idle` ended without work (the thread's own
    /// deadline): spinning found nothing, and a spin up to the limit would
    /// not have either when the period outlasted it.
    pub fn nothing_after(&mut self, idle: Duration) {
        if self.adaptive && idle > self.limit {
            self.shrink();
        }
    }

    fn grow_start(&self) -> Duration {
        (self.limit / GROW_START).max(Duration::from_nanos(1))
    }

    fn grow(&mut self) {
        self.budget = self
            .budget
            .saturating_mul(2)
            .max(self.grow_start())
            .min(self.limit);
    }

    fn shrink(&mut self) {
        self.budget /= 2;
        if self.budget < self.grow_start() {
            self.budget = Duration::ZERO;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_micros(64);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn starts_at_the_limit_and_keeps_it_while_the_spin_catches_the_work() {
        let mut b = IdleBudget::adaptive(LIMIT);
        assert_eq!(b.spin(), LIMIT);
        for idle in [0, 1, 30, 64] {
            b.work_after(us(idle));
            assert_eq!(b.spin(), LIMIT, "after an idle period of {idle} µs");
        }
    }

    #[test]
    fn work_later_than_the_limit_halves_the_budget_down_to_zero() {
        let mut b = IdleBudget::adaptive(LIMIT);
        let mut seen = Vec::new();
        for _ in 0..5 {
            b.work_after(us(65));
            seen.push(b.spin());
        }
        // 32, 16, 8 (the grow start, 64/8), then below it: 0, and it stays.
        assert_eq!(seen, [us(32), us(16), us(8), us(0), us(0)]);
    }

    #[test]
    fn work_a_longer_spin_would_have_caught_doubles_the_budget_up_to_the_limit() {
        let mut b = IdleBudget::adaptive(LIMIT);
        for _ in 0..4 {
            b.work_after(us(1000));
        }
        assert_eq!(b.spin(), Duration::ZERO);
        let mut seen = Vec::new();
        for _ in 0..5 {
            // Blocked, and the work came after the budget, within the limit.
            b.work_after((b.spin() + us(1)).min(LIMIT));
            seen.push(b.spin());
        }
        assert_eq!(seen, [us(8), us(16), us(32), us(64), us(64)]);
    }

    #[test]
    fn doubling_stops_at_a_limit_that_is_no_power_of_two_of_the_start() {
        let limit = Duration::from_nanos(100);
        let mut b = IdleBudget::adaptive(limit);
        for _ in 0..4 {
            b.work_after(us(1));
        }
        assert_eq!(b.spin(), Duration::ZERO);
        let mut seen = Vec::new();
        for _ in 0..5 {
            b.work_after(limit);
            seen.push(b.spin().as_nanos());
        }
        // The grow start is 100/8 = 12 ns; 96 doubled is capped at 100.
        assert_eq!(seen, [12, 24, 48, 96, 100]);
    }

    #[test]
    fn a_grown_budget_that_catches_the_work_keeps_its_size() {
        let mut b = IdleBudget::adaptive(LIMIT);
        b.work_after(us(65));
        b.work_after(us(65));
        assert_eq!(b.spin(), us(16));
        for idle in [0, 10, 16] {
            b.work_after(us(idle));
            assert_eq!(b.spin(), us(16), "after an idle period of {idle} µs");
        }
    }

    #[test]
    fn an_idle_period_that_ends_without_work_shrinks_only_past_the_limit() {
        let mut b = IdleBudget::adaptive(LIMIT);
        b.nothing_after(us(10));
        b.nothing_after(LIMIT);
        assert_eq!(b.spin(), LIMIT, "a deadline within the limit says nothing");
        b.nothing_after(us(1000));
        assert_eq!(b.spin(), us(32));
    }

    #[test]
    fn alternating_short_and_long_idle_periods_stay_within_bounds() {
        let mut b = IdleBudget::adaptive(LIMIT);
        let mut max_seen = Duration::ZERO;
        for i in 0..100u64 {
            let idle = if i % 3 == 0 { us(5000) } else { us(i % 60) };
            b.work_after(idle);
            max_seen = max_seen.max(b.spin());
            assert!(b.spin() <= LIMIT);
        }
        assert!(max_seen > Duration::ZERO);
    }

    #[test]
    fn a_fixed_budget_always_spins_its_whole_limit() {
        let mut b = IdleBudget::fixed(LIMIT);
        b.work_after(us(5000));
        assert_eq!(b.spin(), LIMIT);
        b.nothing_after(us(5000));
        assert_eq!(b.spin(), LIMIT);
    }

    #[test]
    fn a_zero_limit_never_spins() {
        for mut b in [
            IdleBudget::adaptive(Duration::ZERO),
            IdleBudget::fixed(Duration::ZERO),
        ] {
            assert!(b.never_spins());
            b.work_after(us(0));
            b.work_after(us(1));
            b.nothing_after(us(1));
            assert_eq!(b.spin(), Duration::ZERO);
        }
        assert!(!IdleBudget::adaptive(LIMIT).never_spins());
    }

    #[test]
    fn the_process_wide_switch_picks_fixed_or_adaptive() {
        // The only test that touches the process-wide switch.
        set_fixed_spins(true);
        let fixed = IdleBudget::new(LIMIT);
        set_fixed_spins(false);
        let adaptive = IdleBudget::new(LIMIT);
        assert_eq!(fixed, IdleBudget::fixed(LIMIT));
        assert_eq!(adaptive, IdleBudget::adaptive(LIMIT));
    }
}
