//! How long a simulated guest's RC requester waits for an ACK, and how
//! often it tries again, before it gives up with WC_RETRY_EXC_ERR: IBA's
//! Local ACK Timeout (4.096 µs × 2^timeout) and retry count, as
//! `SimGuest::connect` sets them on the way to RTS.
//!
//! On a loaded machine (two CPUs shared with builds and guests) a device's
//! engine thread can wait longer than half a second for a CPU. A test that
//! does not test retransmission must not lose a QP to that, so its QPs are
//! [`Retry::PATIENT`] (the default); a test of a peer's death or of lost
//! packets being sent again takes [`Retry::PROMPT`], whose bound
//! ([`Retry::exhausted_after`]) it may check.

use std::time::Duration;

/// A requester's ACK timeout exponent and retry count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Local ACK Timeout exponent: 4.096 µs × 2^timeout.
    pub timeout: u8,
    /// Tries after the first (at most 7).
    pub retry_cnt: u8,
}

impl Retry {
    /// 1.07 s × 8 tries: 8.6 s without an ACK before WC_RETRY_EXC_ERR,
    /// past any starvation of a device thread, while a packet lost now and
    /// then still costs only a second.
    pub const PATIENT: Retry = Retry {
        timeout: 18,
        retry_cnt: 7,
    };

    /// 268 ms × 8 tries: 2.1 s, for tests that wait for WC_RETRY_EXC_ERR
    /// or recover many lost packets. The same as `ibtca-device`'s ACK
    /// timeout floor (250 ms) makes of any shorter timeout: a live peer
    /// must be silent for two seconds to fail the QP (with 67 ms tries, a
    /// peer starved for half a second on a loaded machine failed the first
    /// WRITE of a peer-death test).
    pub const PROMPT: Retry = Retry {
        timeout: 16,
        retry_cnt: 7,
    };

    /// The longest a requester tries without an ACK before
    /// WC_RETRY_EXC_ERR: (retry_cnt + 1) × 4.096 µs × 2^timeout.
    pub fn exhausted_after(self) -> Duration {
        Duration::from_nanos((u64::from(self.retry_cnt) + 1) * (4096 << self.timeout))
    }
}

impl Default for Retry {
    fn default() -> Self {
        Retry::PATIENT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_ibas_timeouts_times_the_tries() {
        assert_eq!(Retry::PROMPT.exhausted_after().as_millis(), 2147);
        assert_eq!(Retry::PATIENT.exhausted_after().as_millis(), 8589);
    }
}
