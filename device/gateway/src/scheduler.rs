//! The gateway's cell queues toward the ATM port, one per service class,
//! served in strict class order (CBR first, UBR last): a saturated UBR
//! connection never holds a CBR cell back here. Within a class cells leave
//! in the order they were queued, so each connection's cells stay in
//! order. Each class holds at most a bound of cells; a message that does
//! not fit is dropped whole and counted, and the gateway stops taking IB
//! messages for a class that is over half full (the peer sees RNR NAKs
//! and waits).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use ibtca_protocol::atm::Cell;

use crate::service::Service;

/// The queues.
#[derive(Debug)]
pub struct CellScheduler {
    inner: Mutex<Queues>,
    ready: Condvar,
    limit: usize,
}

#[derive(Debug, Default)]
struct Queues {
    classes: [VecDeque<Cell>; 4],
    dropped_messages: u64,
    dropped_cells: u64,
}

impl CellScheduler {
    /// Queues holding at most `limit` cells per class.
    pub fn new(limit: usize) -> Self {
        Self {
            inner: Mutex::new(Queues::default()),
            ready: Condvar::new(),
            limit: limit.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues one message's cells on `class`; false (nothing queued,
    /// counted) if they do not fit.
    pub fn push(&self, class: Service, cells: &[Cell]) -> bool {
        let mut q = self.lock();
        let queue = &mut q.classes[class.rank()];
        if queue.len() + cells.len() > self.limit {
            q.dropped_messages += 1;
            q.dropped_cells += cells.len() as u64;
            return false;
        }
        queue.extend(cells.iter().copied());
        drop(q);
        self.ready.notify_one();
        true
    }

    /// Whether `class` takes more messages (under half full).
    pub fn has_room(&self, class: Service) -> bool {
        self.lock().classes[class.rank()].len() < self.limit / 2
    }

    /// Cells queued in `class`.
    pub fn queued(&self, class: Service) -> usize {
        self.lock().classes[class.rank()].len()
    }

    /// Messages and cells dropped because their class was full.
    pub fn dropped(&self) -> (u64, u64) {
        let q = self.lock();
        (q.dropped_messages, q.dropped_cells)
    }

    /// Moves up to `max` cells, highest class first, to `out`; waits up to
    /// `wait` for one if none is queued. Returns how many.
    pub fn pop(&self, max: usize, wait: Duration, out: &mut Vec<Cell>) -> usize {
        let mut q = self.lock();
        if q.classes.iter().all(VecDeque::is_empty) {
            q = match self.ready.wait_timeout(q, wait) {
                Ok((q, _)) => q,
                Err(p) => p.into_inner().0,
            };
        }
        let mut n = 0;
        for queue in q.classes.iter_mut() {
            while n < max {
                let Some(c) = queue.pop_front() else { break };
                out.push(c);
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibtca_protocol::atm::{CellHeader, Vc};

    fn cell(vci: u16, n: u8) -> Cell {
        Cell::new(&CellHeader::user(Vc { vpi: 0, vci }, 0), &[n; 48])
    }

    #[test]
    fn classes_are_served_in_order_and_each_keeps_its_order() {
        let s = CellScheduler::new(100);
        let ubr: Vec<Cell> = (0..50).map(|n| cell(40, n)).collect();
        assert!(s.push(Service::Ubr, &ubr));
        assert!(s.push(Service::Cbr, &[cell(32, 1), cell(32, 2)]));
        assert!(s.push(Service::RtVbr, &[cell(33, 1)]));
        let mut out = Vec::new();
        assert_eq!(s.pop(4, Duration::ZERO, &mut out), 4);
        let got: Vec<(u16, u8)> = out
            .iter()
            .map(|c| (c.header().vci, c.payload()[0]))
            .collect();
        assert_eq!(got, [(32, 1), (32, 2), (33, 1), (40, 0)]);
        out.clear();
        assert_eq!(s.pop(100, Duration::ZERO, &mut out), 49);
        assert!(out.iter().map(|c| c.payload()[0]).eq(1..50));
    }

    #[test]
    fn a_full_class_drops_whole_messages_and_closes_at_half() {
        let s = CellScheduler::new(10);
        let six: Vec<Cell> = (0..6).map(|n| cell(40, n)).collect();
        assert!(s.has_room(Service::Ubr));
        assert!(s.push(Service::Ubr, &six));
        assert!(!s.has_room(Service::Ubr));
        assert!(s.has_room(Service::Cbr), "other classes are not affected");
        assert!(!s.push(Service::Ubr, &six));
        assert_eq!(s.dropped(), (1, 6));
        assert_eq!(s.queued(Service::Ubr), 6);
    }
}
