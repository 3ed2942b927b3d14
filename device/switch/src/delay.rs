//! A delay line per port: packets leave the port the port's delay after
//! the switch forwarded them, in order. A port whose delay is zero sends
//! at once and its delay thread sleeps (the delay itself is the port
//! slot's, `port.rs`, on the line every forwarded packet touches).

use std::collections::VecDeque;
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
    line: Mutex<Line>,
    ready: Condvar,
}

impl DelayLine {
    fn lock(&self) -> MutexGuard<'_, Line> {
        self.line.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Holds `packet` for `delay`; gives it back if the line is full.
    pub fn push(&self, packet: Held, delay: Duration) -> Result<(), Held> {
        let due = Instant::now() + delay;
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
