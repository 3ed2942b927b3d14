//! A delay line per port: packets leave the port `delay` after the switch
//! forwarded them, in order. A port whose delay is zero sends at once and
//! its delay thread sleeps.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::link::QUEUE_CAPACITY;

#[derive(Debug, Default)]
struct Line {
    packets: VecDeque<(Instant, Vec<u8>)>,
    stop: bool,
}

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

    /// Holds `packet` for the delay; false (packet dropped) if the line is
    /// full.
    pub fn push(&self, packet: Vec<u8>) -> bool {
        let due = Instant::now() + self.delay();
        let mut line = self.lock();
        if line.packets.len() >= QUEUE_CAPACITY {
            return false;
        }
        line.packets.push_back((due, packet));
        if line.packets.len() == 1 {
            self.ready.notify_one();
        }
        true
    }

    /// Waits for the next packet that is due; `None` once stopped.
    pub fn next_due(&self) -> Option<Vec<u8>> {
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

    /// Ends [`Self::next_due`] for good; held packets are dropped.
    pub fn stop(&self) {
        let mut line = self.lock();
        line.stop = true;
        line.packets.clear();
        self.ready.notify_all();
    }
}
