//! A delay line per port: packets leave the port `delay` after the switch
//! forwarded them, in order. A port whose delay is zero sends at once and
//! its delay thread sleeps.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ibtca_link::QUEUE_CAPACITY;

#[derive(Debug, Default)]
struct Line {
    packets: VecDeque<(Instant, Held)>,
    stop: bool,
}

/// A held packet and its credit tag (see `mod.rs`).
pub(super) type Held = (Vec<u8>, u64);

/// Packets held back for one port.
#[derive(Debug, Default)]
pub(super) struct DelayLine {
    delay_us: AtomicU64,
    line: Mutex<Line>,
    ready: Condvar,
}

impl DelayLine {
    fn lock(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current delay.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// Sets the delay for packets forwarded from now on.
    pub fn set_delay(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.delay_us.store(us, Ordering::Relaxed);
    }

    /// Holds `packet` for the delay; gives it back if the line is full.
    pub fn push(&self, packet: Held) -> Result<(), Held> {
        let due = Instant::now() + self.delay();
        let mut line = self.lock();
        if line.packets.len() >= QUEUE_CAPACITY {
            return Err(packet);
        }
        line.packets.push_back((due, packet));
        if line.packets.len() == 1 {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Waits for the next packet that is due; `None` once stopped.
    pub fn next_due(&self) -> Option<Held> {
        let mut line = self.lock();
        loop {
            if line.stop {
                return None;
            }
            let now = Instant::now();
            match line.packets.front() {
                Some((due, _)) if *due <= now => return line.packets.pop_front().map(|(_, p)| p),
                Some((due, _)) => {
                    let wait = *due - now;
                    line = self
                        .ready
                        .wait_timeout(line, wait)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                None => {
                    line = self.ready.wait(line).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    /// Ends [`Self::next_due`] for good; returns the packets still held.
    pub fn stop(&self) -> Vec<Held> {
        let mut line = self.lock();
        line.stop = true;
        self.ready.notify_all();
        line.packets.drain(..).map(|(_, p)| p).collect()
    }
}
