//! Rate limiting of guest-triggered warnings.
//!
//! A buggy or hostile guest can make the device warn at will (bad WQE
//! addresses, DMA faults, refused doorbells, bad register writes): one
//! line each would flood the log. [`guest_warn!`](crate::guest_warn!) logs like
//! `tracing::warn!`, but each call site logs at most [`BURST`] lines per
//! [`INTERVAL`]; the first line after an interval in which some were
//! suppressed is preceded by a summary line with their number (`suppressed`
//! field), so nothing goes unaccounted. The limiter is [`RateLimit`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines a call site logs per interval.
pub const BURST: u32 = 10;
/// The interval.
pub const INTERVAL: Duration = Duration::from_secs(5);

/// A per-call-site limit: at most `burst` admitted per `interval`, the
/// rest counted.
#[derive(Debug)]
pub struct RateLimit {
    burst: u32,
    interval: Duration,
    window: Mutex<Window>,
}

#[derive(Debug)]
struct Window {
    /// Start of the current interval (none before the first call).
    start: Option<Instant>,
    /// Admitted in the current interval.
    admitted: u32,
    /// Refused since the last admitted one that reported refusals.
    suppressed: u64,
}

impl RateLimit {
    /// A limit of `burst` per `interval` (a `const fn`, for statics).
    pub const fn new(burst: u32, interval: Duration) -> Self {
        RateLimit {
            burst,
            interval,
            window: Mutex::new(Window {
                start: None,
                admitted: 0,
                suppressed: 0,
            }),
        }
    }

    /// One event at `now`: `Some(k)` if it is to be logged, `k` being how
    /// many were suppressed before it (to report first); `None` if it is
    /// suppressed (and counted).
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let expired = w
            .start
            .is_none_or(|s| now.saturating_duration_since(s) >= self.interval);
        if expired {
            w.start = Some(now);
            w.admitted = 0;
        }
        if w.admitted < self.burst {
            w.admitted += 1;
            Some(std::mem::take(&mut w.suppressed))
        } else {
            w.suppressed += 1;
            None
        }
    }
}

/// `tracing::warn!` for a warning a guest can trigger, limited per call
/// site to [`BURST`] lines per [`INTERVAL`] (module docs).
#[macro_export]
macro_rules! guest_warn {
    ($($arg:tt)+) => {{
        static LIMIT: $crate::ratelimit::RateLimit =
            $crate::ratelimit::RateLimit::new($crate::ratelimit::BURST, $crate::ratelimit::INTERVAL);
        if let Some(suppressed) = LIMIT.admit(::std::time::Instant::now()) {
            if suppressed > 0 {
                ::tracing::warn!(
                    suppressed,
                    "{}:{}: similar guest-triggered warnings suppressed",
                    file!(),
                    line!()
                );
            }
            ::tracing::warn!($($arg)+);
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_a_burst_then_counts_and_reports_the_rest() {
        let limit = RateLimit::new(3, Duration::from_secs(1));
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        assert_eq!(limit.admit(ms(0)), Some(0));
        assert_eq!(limit.admit(ms(1)), Some(0));
        assert_eq!(limit.admit(ms(2)), Some(0));
        for n in 3..10 {
            assert_eq!(limit.admit(ms(n)), None, "event {n} suppressed");
        }
        // Still inside the interval.
        assert_eq!(limit.admit(ms(999)), None);
        // A new interval: admitted, with the 8 suppressed reported once.
        assert_eq!(limit.admit(ms(1000)), Some(8));
        assert_eq!(limit.admit(ms(1001)), Some(0));
        assert_eq!(limit.admit(ms(1002)), Some(0));
        assert_eq!(limit.admit(ms(1003)), None);
        // A quiet stretch of several intervals: a fresh burst, the one
        // suppressed reported.
        assert_eq!(limit.admit(ms(5000)), Some(1));
        assert_eq!(limit.admit(ms(5001)), Some(0));
    }

    #[test]
    fn call_sites_are_limited_separately() {
        for _ in 0..3 * BURST {
            crate::guest_warn!("test site A");
        }
        // Another site still logs: each expansion has its own limit.
        let other = RateLimit::new(1, INTERVAL);
        assert_eq!(other.admit(Instant::now()), Some(0));
        assert_eq!(other.admit(Instant::now()), None);
    }

    #[test]
    fn a_clock_that_goes_backwards_keeps_the_window() {
        let limit = RateLimit::new(1, Duration::from_secs(1));
        let t0 = Instant::now() + Duration::from_secs(10);
        assert_eq!(limit.admit(t0), Some(0));
        assert_eq!(limit.admit(t0 - Duration::from_secs(5)), None);
    }
}
