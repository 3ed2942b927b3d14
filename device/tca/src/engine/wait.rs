//! How the engine thread waits for its next event: it polls the channel
//! for a short while (`spin`) before it blocks in the kernel, so an event
//! that follows soon after the last one (the peer's ACK, the next doorbell)
//! is taken without a futex wake-up, which costs tens of microseconds when
//! the sender runs on another CPU. While polling it yields its CPU, so a
//! thread with work on the same CPU still gets to run.
//!
//! Off by default: with two TCG guests on a 2-CPU host a 50 µs spin let
//! the polling engines take CPU from the vCPUs and cut the guests' 64 B
//! WRITE rate 3-7x; it pays where CPUs are spare, e.g. the in-process SEND
//! ping-pong, whose one-way latency it halves (both measured on an Intel
//! Xeon host; docs/placement.md).

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// The engine's default spin (`ibtca-device --engine-spin-us`): none.
pub const DEFAULT_SPIN: Duration = Duration::ZERO;

/// Receives the next event within `wait`, polling for the first
/// `min(spin, wait)` and blocking for the rest.
pub fn recv_spinning<T>(
    rx: &Receiver<T>,
    wait: Duration,
    spin: Duration,
) -> Result<T, RecvTimeoutError> {
    if spin.is_zero() {
        return rx.recv_timeout(wait);
    }
    let start = Instant::now();
    let spin = spin.min(wait);
    loop {
        match rx.try_recv() {
            Ok(ev) => return Ok(ev),
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {}
        }
        let spent = start.elapsed();
        if spent >= spin {
            return rx.recv_timeout(wait.saturating_sub(spent));
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn takes_a_queued_event_with_and_without_spinning() {
        let (tx, rx) = channel();
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(
            recv_spinning(&rx, Duration::from_secs(1), Duration::from_micros(50)),
            Ok(1)
        );
        assert_eq!(
            recv_spinning(&rx, Duration::from_secs(1), Duration::ZERO),
            Ok(2)
        );
    }

    #[test]
    fn an_event_sent_after_the_spin_still_arrives() {
        let (tx, rx) = channel();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(7).unwrap();
        });
        let got = recv_spinning(&rx, Duration::from_secs(10), Duration::from_micros(100));
        assert_eq!(got, Ok(7));
        t.join().unwrap();
    }

    #[test]
    fn times_out_and_reports_disconnection() {
        let (tx, rx) = channel::<u32>();
        let t0 = Instant::now();
        let got = recv_spinning(&rx, Duration::from_millis(5), Duration::from_millis(50));
        assert_eq!(got, Err(RecvTimeoutError::Timeout));
        assert!(t0.elapsed() >= Duration::from_millis(5));
        drop(tx);
        let got = recv_spinning(&rx, Duration::from_secs(10), Duration::from_micros(50));
        assert_eq!(got, Err(RecvTimeoutError::Disconnected));
    }
}
