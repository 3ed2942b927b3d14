//! The engine's inbox: the events waiting for the engine, oldest first,
//! bounded per producer.
//!
//! Two parties fill it, and either may be hostile: the link peer (a link
//! reader's packet batches, link up and down) and the guest (the vfio-user
//! thread's doorbells and registers; the control thread's requests and
//! resets count with them). Each has its own bound, so neither can make
//! the other's events wait for room:
//!
//! - at most [`LINK_EVENTS_MAX`] link events (each batch at most one
//!   socket read, ~128 KiB of packets: 8 MiB in all);
//! - at most [`HOST_EVENTS_MAX`] guest and control events. A doorbell is a
//!   hint to look at a ring again, so one that repeats the newest guest
//!   event (the same queue, the same CQ arm) replaces that event's index
//!   instead of queueing another: a storm of doorbells on one queue takes
//!   one entry.
//!
//! An event past its party's bound is refused ([`Pushed::Full`]); the
//! producer then runs the inbox itself (`owner.rs`), which is the
//! back-pressure: a link reader stops reading its socket meanwhile, the
//! vfio-user thread stops taking the guest's messages. Nothing is dropped.

use std::collections::VecDeque;
use std::thread::ThreadId;

use super::handoffs::Source;
use super::EngineEvent;
use crate::verbs::datapath::Doorbell;

/// Link events (packet batches, up and down) the inbox holds at most.
pub const LINK_EVENTS_MAX: usize = 64;

/// Guest and control events (doorbells of different queues, registers,
/// resets, control requests) the inbox holds at most.
pub const HOST_EVENTS_MAX: usize = 128;

/// An event waiting for the engine.
pub(super) struct Queued {
    pub ev: EngineEvent,
    /// The thread it arrived on (`None`: came before the engine was
    /// installed, through the engine thread's channel).
    pub from: Option<ThreadId>,
}

/// What [`Inbox::push`] did with an event.
pub(super) enum Pushed {
    /// Queued at the back; `was_empty`: nothing waited before it.
    Queued { was_empty: bool },
    /// Folded into the newest guest event, a doorbell of the same queue,
    /// which now carries its index.
    Coalesced,
    /// Its party's bound is reached: not queued, given back.
    Full(EngineEvent),
}

/// The events waiting for the engine, oldest first.
#[derive(Default)]
pub(super) struct Inbox {
    events: VecDeque<Queued>,
    /// Link events among `events`.
    link: usize,
    /// The most events that waited at once.
    peak: usize,
    /// The engine is installed: events wait here. Before, they go to the
    /// engine thread's channel as they are (tests' stand-in engines take
    /// them there).
    pub installed: bool,
    /// The engine thread has stopped: nothing runs events any more.
    pub stopped: bool,
}

/// What a doorbell-like event asks the engine to look at: two events with
/// the same key and only link events between them do the work of the
/// second alone (each carries the queue's whole index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refresh {
    /// A queue's doorbell: its page, kind, number, and (CQs) arm request.
    Queue(u32, u8, u32, u8),
    /// The command queue's doorbell.
    Commands,
    /// RKM_READ_BUDGET written.
    ReadBudget,
}

fn refresh_key(ev: &EngineEvent) -> Option<Refresh> {
    let queue = |page, db: &Doorbell| match *db {
        Doorbell::Sq { qpn, .. } => Refresh::Queue(page, 0, qpn, 0),
        Doorbell::Rq { qpn, .. } => Refresh::Queue(page, 1, qpn, 0),
        Doorbell::Srq { srqn, .. } => Refresh::Queue(page, 2, srqn, 0),
        Doorbell::Cq { cqn, arm, .. } => Refresh::Queue(page, 3, cqn, arm),
    };
    match ev {
        EngineEvent::Doorbell(db) => Some(queue(0, db)),
        EngineEvent::PageDoorbell(page, db) => Some(queue(*page, db)),
        EngineEvent::CmdqDoorbell(_) => Some(Refresh::Commands),
        EngineEvent::ReadBudget => Some(Refresh::ReadBudget),
        _ => None,
    }
}

fn is_link(ev: &EngineEvent) -> bool {
    Source::of(ev) == Source::Link
}

impl Inbox {
    /// Queues `ev` at the back, folds it into the newest guest event when
    /// that is a doorbell of the same queue, or gives it back when its
    /// party's bound is reached.
    pub fn push(&mut self, ev: EngineEvent, from: Option<ThreadId>) -> Pushed {
        let Some(ev) = self.coalesce(ev) else {
            return Pushed::Coalesced;
        };
        let full = if is_link(&ev) {
            self.link >= LINK_EVENTS_MAX
        } else {
            self.events.len() - self.link >= HOST_EVENTS_MAX
        };
        if full {
            return Pushed::Full(ev);
        }
        let was_empty = self.events.is_empty();
        self.force(ev, from);
        Pushed::Queued { was_empty }
    }

    /// Queues `ev` at the back past the bound: for the thread that owns the
    /// engine and runs it next (so the bound is passed by at most one).
    pub fn force(&mut self, ev: EngineEvent, from: Option<ThreadId>) {
        if is_link(&ev) {
            self.link += 1;
        }
        self.events.push_back(Queued { ev, from });
        self.peak = self.peak.max(self.events.len());
    }

    /// The newest guest event, if it refreshes what `ev` refreshes, takes
    /// `ev`'s index (`None`); else `ev` is given back. Link events between
    /// the two came from the other party, independently of both, and may
    /// run after either.
    fn coalesce(&mut self, ev: EngineEvent) -> Option<EngineEvent> {
        let Some(key) = refresh_key(&ev) else {
            return Some(ev);
        };
        let newest = self.events.iter_mut().rev().find(|q| !is_link(&q.ev));
        match newest {
            Some(q) if refresh_key(&q.ev) == Some(key) => {
                q.ev = ev;
                None
            }
            _ => Some(ev),
        }
    }

    /// Takes up to `max` of the oldest events.
    pub fn take(&mut self, max: usize) -> Vec<Queued> {
        let n = self.events.len().min(max);
        let taken: Vec<Queued> = self.events.drain(..n).collect();
        self.link -= taken.iter().filter(|q| is_link(&q.ev)).count();
        taken
    }

    /// Takes every event (the engine thread stopped: they are dropped).
    pub fn take_all(&mut self) -> Vec<Queued> {
        self.take(usize::MAX)
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The most events that waited at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sq(qpn: u32, pi: u32) -> EngineEvent {
        EngineEvent::Doorbell(Doorbell::Sq { qpn, pi })
    }

    fn cq(cqn: u32, arm: u8, ci: u32) -> EngineEvent {
        EngineEvent::Doorbell(Doorbell::Cq { cqn, arm, ci })
    }

    fn link() -> EngineEvent {
        EngineEvent::Link(ibtca_link::LinkEvent::Packet(vec![0; 8]))
    }

    fn sq_pi(q: &Queued) -> Option<(u32, u32)> {
        match q.ev {
            EngineEvent::Doorbell(Doorbell::Sq { qpn, pi }) => Some((qpn, pi)),
            _ => None,
        }
    }

    #[test]
    fn a_doorbell_storm_on_one_queue_takes_one_entry_with_the_newest_index() {
        let mut inbox = Inbox::default();
        assert!(matches!(
            inbox.push(sq(5, 1), None),
            Pushed::Queued { was_empty: true }
        ));
        for pi in 2..=1000 {
            assert!(matches!(inbox.push(sq(5, pi), None), Pushed::Coalesced));
            if pi % 100 == 0 {
                // A packet batch between two doorbells does not stop the fold.
                assert!(matches!(inbox.push(link(), None), Pushed::Queued { .. }));
            }
        }
        let events = inbox.take_all();
        let doorbells: Vec<_> = events.iter().filter_map(sq_pi).collect();
        assert_eq!(doorbells, vec![(5, 1000)]);
        assert_eq!(events.len(), 1 + 10);
        assert_eq!(inbox.link, 0);
    }

    #[test]
    fn only_the_same_queue_and_arm_fold_and_other_guest_events_keep_their_order() {
        let mut inbox = Inbox::default();
        inbox.push(sq(5, 1), None);
        // Another QP's doorbell in between: SQ 5's next doorbell must not
        // overtake it.
        inbox.push(sq(6, 1), None);
        assert!(matches!(inbox.push(sq(5, 2), None), Pushed::Queued { .. }));
        // A CQ doorbell that arms is not one that only moves the index.
        inbox.push(cq(3, 0, 4), None);
        assert!(matches!(
            inbox.push(cq(3, 1, 5), None),
            Pushed::Queued { .. }
        ));
        assert!(matches!(inbox.push(cq(3, 1, 6), None), Pushed::Coalesced));
        // A command between two doorbells of one queue is a barrier.
        inbox.push(EngineEvent::CmdqDoorbell(1), None);
        assert!(matches!(inbox.push(sq(5, 3), None), Pushed::Queued { .. }));
        assert_eq!(inbox.len(), 7);
    }

    #[test]
    fn each_party_has_its_own_bound() {
        let mut inbox = Inbox::default();
        for _ in 0..LINK_EVENTS_MAX {
            assert!(matches!(inbox.push(link(), None), Pushed::Queued { .. }));
        }
        assert!(matches!(inbox.push(link(), None), Pushed::Full(_)));
        // The guest's events still queue while the link's are full.
        for qpn in 0..HOST_EVENTS_MAX as u32 {
            assert!(matches!(
                inbox.push(sq(qpn, 1), None),
                Pushed::Queued { .. }
            ));
        }
        assert!(matches!(inbox.push(sq(9999, 1), None), Pushed::Full(_)));
        // Taking a link event makes room for one.
        assert_eq!(inbox.take(1).len(), 1);
        assert!(matches!(inbox.push(link(), None), Pushed::Queued { .. }));
        assert_eq!(inbox.peak(), LINK_EVENTS_MAX + HOST_EVENTS_MAX);
    }
}
