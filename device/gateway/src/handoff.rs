//! The bound on messages the ATM reader has handed to the engine and the
//! engine has not taken yet. ATM has no flow control toward the gateway:
//! a peer may write cells faster than the engine moves their messages on,
//! and what waits between the two threads must not grow without bound.
//! Past the bound the reader drops the messages that do not fit and
//! counts them.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Messages in flight from the ATM reader to the engine by default.
pub const DEFAULT_LIMIT: usize = 65_536;

/// The count of messages in flight, and its bound.
#[derive(Debug)]
pub struct HandOff {
    pending: AtomicUsize,
    limit: usize,
}

impl HandOff {
    /// A hand-off of at most `limit` messages.
    pub fn new(limit: usize) -> Self {
        Self {
            pending: AtomicUsize::new(0),
            limit,
        }
    }

    /// Reserves room for up to `n` messages; returns how many fit.
    pub fn reserve(&self, n: usize) -> usize {
        let mut granted = 0;
        let _ = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                granted = n.min(self.limit.saturating_sub(p));
                Some(p + granted)
            });
        granted
    }

    /// The engine took `n` messages.
    pub fn taken(&self, n: usize) {
        let _ = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |p| {
                Some(p.saturating_sub(n))
            });
    }

    /// Messages in flight now.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_stop_at_the_bound_and_come_back_when_taken() {
        let h = HandOff::new(10);
        assert_eq!(h.reserve(6), 6);
        assert_eq!(h.reserve(5), 4, "room for 4 of 5");
        assert_eq!(h.pending(), 10);
        assert_eq!(h.reserve(1), 0);
        h.taken(7);
        assert_eq!(h.reserve(9), 7);
        assert_eq!(h.pending(), 10);
    }
}
