//! How the engine thread waits for its next event: it polls the channel
//! for a short while (its adaptive idle budget, `ibtca_sched::idle_budget`,
//! at most `--engine-spin-us`) before it blocks in the kernel, so an event
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

use ibtca_sched::IdleBudget;

/// The engine's default spin (`ibtca-device --engine-spin-us`): none.
pub const DEFAULT_SPIN: Duration = Duration::ZERO;

/// Receives the next event within `wait`, polling for the first
/// `min(budget.spin(), wait)` and blocking for the rest; tells `budget`
/// how long the queue stayed empty.
pub fn recv_spinning<T>(
    rx: &Receiver<T>,
    wait: Duration,
    budget: &mut IdleBudget,
) -> Result<T, RecvTimeoutError> {
    if budget.never_spins() {
        return rx.recv_timeout(wait);
    }
    match rx.try_recv() {
        Ok(ev) => return Ok(ev),
        Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
        Err(TryRecvError::Empty) => {}
    }
    let start = Instant::now();
    let spin = budget.spin().min(wait);
    loop {
        let spent = start.elapsed();
        if spent >= spin {
            let got = rx.recv_timeout(wait.saturating_sub(spent));
            match got {
                Ok(_) => budget.work_after(start.elapsed()),
                Err(RecvTimeoutError::Timeout) => budget.nothing_after(start.elapsed()),
                Err(RecvTimeoutError::Disconnected) => {}
            }
            return got;
        }
        std::thread::yield_now();
        match rx.try_recv() {
            Ok(ev) => {
                budget.work_after(start.elapsed());
                return Ok(ev);
            }
            Err(TryRecvError::Disconnected) => return Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    fn spins(us: u64) -> IdleBudget {
        IdleBudget::adaptive(Duration::from_micros(us))
    }

    #[test]
    fn takes_a_queued_event_with_and_without_spinning() {
        let (tx, rx) = channel();
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(
            recv_spinning(&rx, Duration::from_secs(1), &mut spins(50)),
            Ok(1)
        );
        assert_eq!(
            recv_spinning(&rx, Duration::from_secs(1), &mut spins(0)),
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
        let got = recv_spinning(&rx, Duration::from_secs(10), &mut spins(100));
        assert_eq!(got, Ok(7));
        t.join().unwrap();
    }

    #[test]
    fn times_out_and_reports_disconnection() {
        let (tx, rx) = channel::<u32>();
        let t0 = Instant::now();
        let got = recv_spinning(&rx, Duration::from_millis(5), &mut spins(50_000));
        assert_eq!(got, Err(RecvTimeoutError::Timeout));
        assert!(t0.elapsed() >= Duration::from_millis(5));
        drop(tx);
        let got = recv_spinning(&rx, Duration::from_secs(10), &mut spins(50));
        assert_eq!(got, Err(RecvTimeoutError::Disconnected));
    }
}
