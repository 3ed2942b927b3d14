//! Counts of where the device's events ran: on the thread they arrived
//! on, on another thread that owned the engine when they came (no
//! wake-up), or on the engine thread (woken for them); and how often the
//! engine thread was woken.

use std::sync::atomic::{AtomicU64, Ordering};

use super::EngineEvent;

/// Where an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The vfio-user thread: doorbells, command-queue and DRDMA registers.
    Vfio,
    /// A link reader: packets, link up and down.
    Link,
    /// Anything else (control socket, resets, the engine's own wakes).
    Other,
}

impl Source {
    pub(super) fn of(ev: &EngineEvent) -> Self {
        match ev {
            EngineEvent::Doorbell(_)
            | EngineEvent::PageDoorbell(..)
            | EngineEvent::CmdqBaseLo(_)
            | EngineEvent::CmdqBaseHi(_)
            | EngineEvent::CmdqLogSize(_)
            | EngineEvent::CmdqDoorbell(_)
            | EngineEvent::DrdmaReady(_)
            | EngineEvent::DrdmaDrained(_)
            | EngineEvent::ReadBudget => Source::Vfio,
            EngineEvent::Link(_) | EngineEvent::LinkPackets(_) => Source::Link,
            _ => Source::Other,
        }
    }
}

/// Which thread ran an event, seen from the thread it arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runner {
    /// The thread it arrived on.
    Arrival,
    /// Another thread that owned the engine when it came and ran it before
    /// letting the engine go: no thread was woken for it.
    Owner,
    /// The engine thread.
    EngineThread,
}

/// How the device's events reached the engine: run on the thread they
/// arrived on, by the thread that owned the engine, or by the engine
/// thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handoffs {
    /// vfio-user events (doorbells, registers) run on the vfio-user thread.
    pub vfio_inline: u64,
    /// vfio-user events run by the thread that owned the engine when they
    /// came (a link reader), without a wake-up.
    pub vfio_by_owner: u64,
    /// vfio-user events run by the engine thread.
    pub vfio_queued: u64,
    /// Link events (packet batches, up/down) run on the link reader.
    pub link_inline: u64,
    /// Link events run by the thread that owned the engine when they came
    /// (the vfio-user thread), without a wake-up.
    pub link_by_owner: u64,
    /// Link events run by the engine thread.
    pub link_queued: u64,
    /// Wakes of the engine thread for a deadline an inline run set.
    pub timer_wakes: u64,
    /// Every wake-up sent to the engine thread after it started: timer
    /// wakes, events queued for it, an owner's leftovers.
    pub engine_wakes: u64,
    /// Times a link reader found the link's share of the inbox full and
    /// ran the inbox itself, reading nothing from its socket meanwhile.
    pub link_backpressure: u64,
    /// Times the vfio-user or control thread found the guest's share of
    /// the inbox full and ran the inbox itself.
    pub host_backpressure: u64,
    /// Doorbells folded into a waiting doorbell of the same queue.
    pub doorbells_coalesced: u64,
    /// The most events that waited in the inbox at once.
    pub inbox_peak: u64,
}

#[derive(Default)]
pub(super) struct Counters {
    vfio_inline: AtomicU64,
    vfio_by_owner: AtomicU64,
    vfio_queued: AtomicU64,
    link_inline: AtomicU64,
    link_by_owner: AtomicU64,
    link_queued: AtomicU64,
    pub(super) timer_wakes: AtomicU64,
    pub(super) engine_wakes: AtomicU64,
    link_backpressure: AtomicU64,
    host_backpressure: AtomicU64,
    pub(super) coalesced: AtomicU64,
}

impl Counters {
    pub(super) fn count(&self, source: Source, runner: Runner) {
        let c = match (source, runner) {
            (Source::Vfio, Runner::Arrival) => &self.vfio_inline,
            (Source::Vfio, Runner::Owner) => &self.vfio_by_owner,
            (Source::Vfio, Runner::EngineThread) => &self.vfio_queued,
            (Source::Link, Runner::Arrival) => &self.link_inline,
            (Source::Link, Runner::Owner) => &self.link_by_owner,
            (Source::Link, Runner::EngineThread) => &self.link_queued,
            (Source::Other, _) => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// A producer of `source` found its share of the inbox full.
    pub(super) fn backpressure(&self, source: Source) {
        let c = match source {
            Source::Link => &self.link_backpressure,
            Source::Vfio | Source::Other => &self.host_backpressure,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts (`inbox_peak` is the inbox's to fill in).
    pub(super) fn get(&self) -> Handoffs {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Handoffs {
            vfio_inline: get(&self.vfio_inline),
            vfio_by_owner: get(&self.vfio_by_owner),
            vfio_queued: get(&self.vfio_queued),
            link_inline: get(&self.link_inline),
            link_by_owner: get(&self.link_by_owner),
            link_queued: get(&self.link_queued),
            timer_wakes: get(&self.timer_wakes),
            engine_wakes: get(&self.engine_wakes),
            link_backpressure: get(&self.link_backpressure),
            host_backpressure: get(&self.host_backpressure),
            doorbells_coalesced: get(&self.coalesced),
            inbox_peak: 0,
        }
    }
}
