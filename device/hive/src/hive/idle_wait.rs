//! How the event loop waits for its next event once a turn has run out of
//! work: it polls its descriptors without sleeping for up to an idle
//! budget ([`IdleBudget`], adaptive, `ibtca-hive --spin-us`), yielding
//! the CPU between polls, then sleeps in `poll(2)` until the deadline.
//!
//! Why: a host port's client (OpenSM through libumad2sim) keeps a few
//! SMPs outstanding and sends the next within microseconds of an answer.
//! A hive asleep in `poll` is woken for each of them, across CPUs, which
//! on a virtual host costs the sender an interprocessor interrupt and the
//! hive a context switch per MAD (docs/host-sm.md, "Spinning before it
//! sleeps"). The budget adapts as the device threads' do: a hive whose
//! events come later than the limit (an idle fabric, an SM between
//! sweeps) stops spinning after a few periods. With one CPU the default
//! is no spin: the client could not run while the hive polled.

use std::io;
use std::time::{Duration, Instant};

use ibtca_sched::IdleBudget;

/// What waiting needs of the system: `poll(2)`, a clock and a yield (a
/// trait so tests drive all three).
pub(crate) trait Sys {
    /// `poll(2)` on `fds` for up to `timeout_ms` (-1: no limit): how many
    /// are ready.
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize>;
    fn now(&mut self) -> Instant;
    /// Lets another thread waiting for this CPU run (`sched_yield(2)`).
    fn yield_cpu(&mut self);
}

/// The real system calls.
pub(crate) struct RealSys;

impl Sys for RealSys {
    fn poll(&mut self, fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
        // SAFETY: `fds` is a live, initialised array of `fds.len()`
        // pollfd structures that poll only reads and writes in place.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        usize::try_from(n).map_err(|_| io::Error::last_os_error())
    }

    fn now(&mut self) -> Instant {
        Instant::now()
    }

    fn yield_cpu(&mut self) {
        // SAFETY: sched_yield takes no arguments and only reschedules the
        // calling thread.
        unsafe { libc::sched_yield() };
    }
}

/// The event loop's wait, its idle budget and what spinning did.
#[derive(Debug)]
pub(crate) struct IdleWait {
    budget: IdleBudget,
    /// Waits a spin ended (an event came within the budget).
    pub caught: u64,
    /// Waits that slept in the kernel.
    pub slept: u64,
}

impl IdleWait {
    /// A wait that spins for at most `limit` (zero: sleeps at once).
    pub fn new(limit: Duration) -> Self {
        IdleWait {
            budget: IdleBudget::new(limit),
            caught: 0,
            slept: 0,
        }
    }

    /// Waits until one of `fds` is ready or `timeout_ms` has passed (-1:
    /// no limit): how many are ready, 0 at the deadline.
    pub fn wait(
        &mut self,
        sys: &mut impl Sys,
        fds: &mut [libc::pollfd],
        timeout_ms: i32,
    ) -> io::Result<usize> {
        let spin = self.budget.spin();
        if self.budget.never_spins() || timeout_ms == 0 {
            return sys.poll(fds, timeout_ms);
        }
        let start = sys.now();
        let limit = match u64::try_from(timeout_ms) {
            Ok(ms) => spin.min(Duration::from_millis(ms)),
            Err(_) => spin,
        };
        let mut spent = Duration::ZERO;
        while spent < limit {
            let n = sys.poll(fds, 0)?;
            spent = sys.now().saturating_duration_since(start);
            if n > 0 {
                self.caught += 1;
                self.budget.work_after(spent);
                return Ok(n);
            }
            sys.yield_cpu();
        }
        let left = match u64::try_from(timeout_ms) {
            Ok(ms) => {
                let left = Duration::from_millis(ms).saturating_sub(spent);
                i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
            Err(_) => -1,
        };
        self.slept += 1;
        let n = sys.poll(fds, left)?;
        let idle = sys.now().saturating_duration_since(start);
        if n > 0 {
            self.budget.work_after(idle);
        } else {
            self.budget.nothing_after(idle);
        }
        Ok(n)
    }
}

/// The spin limit `ibtca-hive` takes when `--spin-us` is not given, for a
/// process that may run on `cpus` CPUs: 50 µs with a CPU to spare for a
/// host port's client, none on one CPU.
pub fn default_spin(cpus: usize) -> Duration {
    if cpus >= 2 {
        DEFAULT_SPIN
    } else {
        Duration::ZERO
    }
}

/// The spin limit with CPUs to spare (`ibtca-device --spin-us`'s too).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

#[cfg(test)]
mod tests {
    use super::*;

    /// A system whose clock advances `step` at each call of `poll` and
    /// whose zero-timeout polls find an event from the `ready_at`-th on;
    /// every poll's timeout is recorded.
    struct Fake {
        t: Instant,
        step: Duration,
        ready_at: Option<usize>,
        polls: Vec<i32>,
        yields: usize,
    }

    impl Fake {
        fn new(step_us: u64, ready_at: Option<usize>) -> Self {
            Fake {
                t: Instant::now(),
                step: Duration::from_micros(step_us),
                ready_at,
                polls: Vec::new(),
                yields: 0,
            }
        }
    }

    impl Sys for Fake {
        fn poll(&mut self, _: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
            self.polls.push(timeout_ms);
            self.t += self.step;
            let ready = self.ready_at.is_some_and(|at| self.polls.len() > at);
            Ok(usize::from(ready || timeout_ms != 0))
        }
        fn now(&mut self) -> Instant {
            self.t
        }
        fn yield_cpu(&mut self) {
            self.yields += 1;
        }
    }

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn an_event_within_the_budget_is_caught_without_sleeping() {
        let mut w = IdleWait::new(us(50));
        // The fourth zero-timeout poll finds the event, 4 µs in.
        let mut sys = Fake::new(1, Some(3));
        assert_eq!(w.wait(&mut sys, &mut [], -1).unwrap(), 1);
        assert_eq!(sys.polls, [0, 0, 0, 0], "no poll may sleep");
        assert_eq!(sys.yields, 3, "the CPU is offered between polls");
        assert_eq!((w.caught, w.slept), (1, 0));
    }

    #[test]
    fn a_spent_budget_sleeps_until_the_deadline_less_the_spin() {
        let mut w = IdleWait::new(us(50));
        let mut sys = Fake::new(10, None);
        assert_eq!(w.wait(&mut sys, &mut [], 7).unwrap(), 1);
        // Five polls of 10 µs spend the budget; the sleep takes the rest
        // of the 7 ms, rounded up to whole milliseconds.
        assert_eq!(sys.polls, [0, 0, 0, 0, 0, 7]);
        let mut sys = Fake::new(10, None);
        w.wait(&mut sys, &mut [], -1).unwrap();
        assert_eq!(
            sys.polls.last(),
            Some(&-1),
            "no deadline: sleeps without one"
        );
        assert_eq!((w.caught, w.slept), (0, 2));
    }

    #[test]
    fn without_a_spin_or_with_a_due_deadline_it_polls_once() {
        let mut sys = Fake::new(1, None);
        IdleWait::new(Duration::ZERO)
            .wait(&mut sys, &mut [], 5)
            .unwrap();
        assert_eq!(sys.polls, [5]);
        let mut sys = Fake::new(1, None);
        IdleWait::new(us(50)).wait(&mut sys, &mut [], 0).unwrap();
        assert_eq!(sys.polls, [0]);
    }

    #[test]
    fn events_later_than_the_limit_stop_the_spinning() {
        let mut w = IdleWait::new(us(50));
        // Each wait's event comes in its sleep, 1 ms after it started.
        for _ in 0..8 {
            let mut sys = Fake::new(1000, None);
            w.wait(&mut sys, &mut [], -1).unwrap();
        }
        let mut sys = Fake::new(1, Some(0));
        w.wait(&mut sys, &mut [], -1).unwrap();
        assert_eq!(sys.polls, [-1], "an adapted budget of zero sleeps at once");
    }

    #[test]
    fn the_default_spins_only_with_a_cpu_to_spare() {
        assert_eq!(default_spin(1), Duration::ZERO);
        assert_eq!(default_spin(2), DEFAULT_SPIN);
        assert_eq!(default_spin(64), DEFAULT_SPIN);
    }
}
