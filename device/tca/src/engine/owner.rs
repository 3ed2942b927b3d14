//! Who runs the engine: the thread an event arrives on, the thread that
//! owns the engine when it arrives, or the engine thread.
//!
//! The engine (every QP's verbs and transport state) sits behind one
//! mutex, and whoever holds it owns every QP. Every event joins one queue
//! (the inbox), in the order events arrived; whoever owns the engine runs
//! the inbox in that order. A thread that receives an event (the
//! vfio-user thread a doorbell, a link reader a batch of packets) queues
//! it and takes the engine if it is free: then the WQE goes from the
//! doorbell to the wire, or a packet from the link into guest memory with
//! its CQE and MSI-X, on the thread that took it. If another thread owns
//! the engine, the event waits for that owner, which runs the inbox before
//! it lets the engine go: no thread is woken for it, and the arriving
//! thread never waits for the mutex. So no two threads ever race on a QP,
//! and events are absorbed in the order they arrived.
//!
//! An arriving thread runs at most [`OWNER_RUN`] events per turn (its own
//! and those it finds); it leaves the rest to the engine thread, which it
//! wakes. The engine thread runs what is left and the transport's timers.
//! It sleeps until the earliest deadline it saw (`wakes_at`); a run on
//! another thread that leaves an earlier deadline (an ACK timer armed
//! after the engine went to sleep) wakes it.
//!
//! The events come from hostile parties (the guest, the link peer), and
//! each runs as the engine thread would run it, bounded the same way (at
//! most [`super::MAX_QUEUED_SEND_WQES`] per QP per doorbell, one batch of
//! at most 128 KiB of packets); [`OWNER_RUN`] bounds what one party's
//! thread does for the other's. The inbox holds a bounded share per party
//! (`inbox.rs`); a producer that finds its share full waits for the engine
//! and runs the inbox itself, taking nothing more from its source
//! meanwhile: that is the back-pressure on a flooding peer or guest.
//!
//! The engine thread is woken only for an event queued onto an empty
//! inbox that no owner will run, and only when no wake-up it has not yet
//! acted on is on its way (`wake_sent`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::handoffs::{Counters, Runner, Source};
use super::inbox::{Inbox, Pushed, Queued};
use super::{wait, Engine, EngineEvent, EngineStats, Handoffs};

/// Events a thread that took the engine for its own event runs before it
/// lets the engine go (its own and those queued before or meanwhile); the
/// rest wait for the engine thread.
pub const OWNER_RUN: usize = 8;

/// Events the engine thread absorbs before one flush.
const BURST: usize = 257;

struct Shared {
    /// The engine thread's channel: events before the engine is installed;
    /// after, only wake-ups ([`EngineEvent::Wake`]) and
    /// [`EngineEvent::Stop`].
    tx: Sender<EngineEvent>,
    inbox: Mutex<Inbox>,
    /// The engine, once its thread is started ([`EngineThread::spawn`]).
    /// `None` once the engine thread stopped: the engine is dropped then,
    /// and with it its link (the link's reader holds this handle).
    engine: OnceLock<Mutex<Option<Engine>>>,
    /// Arriving threads may take the engine (else only the engine thread
    /// runs events).
    inline: AtomicBool,
    /// A wake-up is on its way to the engine thread and it has not yet
    /// looked at the inbox for it: another would find nothing more.
    wake_sent: AtomicBool,
    /// When the engine thread next looks at its timers, in ns after
    /// `epoch` (written under the mutex before it sleeps).
    wakes_at: AtomicU64,
    epoch: Instant,
    counters: Counters,
}

impl Shared {
    /// `t` in ns after `epoch`.
    fn ns(&self, t: Instant) -> u64 {
        let ns = t.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // The inbox's critical sections do not panic; a poisoned one still
        // holds consistent events.
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes up to `max` of the oldest waiting events.
    fn take(&self, max: usize) -> Vec<Queued> {
        self.inbox().take(max)
    }

    fn has_waiting(&self) -> bool {
        !self.inbox().is_empty()
    }

    /// Wakes the engine thread (once it runs), unless a wake-up it has not
    /// acted on yet is on its way: that one makes it look at the inbox
    /// after this call.
    fn wake_engine_thread(&self) {
        if self.wake_sent.swap(true, Ordering::SeqCst) {
            return;
        }
        self.counters.engine_wakes.fetch_add(1, Ordering::Relaxed);
        let _ = self.tx.send(EngineEvent::Wake);
    }

    /// Absorbs `events` into `engine` on this thread, counting where they
    /// ran, then flushes the outbox.
    fn absorb_all(&self, engine: &mut Engine, events: Vec<Queued>, on_engine_thread: bool) {
        let me = std::thread::current().id();
        let now = Instant::now();
        for q in events {
            let runner = if on_engine_thread {
                Runner::EngineThread
            } else if q.from == Some(me) {
                Runner::Arrival
            } else {
                Runner::Owner
            };
            self.counters.count(Source::of(&q.ev), runner);
            engine.absorb(q.ev, now);
        }
        engine.flush(now);
    }
}

/// What [`EngineHandle::queue`] did with an event.
enum Queue {
    /// Nothing more to do: gone to the engine thread's channel, or folded
    /// into a waiting doorbell.
    Sent,
    /// Waits in the inbox; `was_empty`: nothing waited before it.
    Waits { was_empty: bool },
    /// Its party's share of the inbox is full: not queued.
    Full(EngineEvent),
}

/// The engine thread has stopped: the event was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineStopped;

/// A handle on the engine: runs an event at once when the engine is idle,
/// leaves it to the engine's owner otherwise.
#[derive(Clone)]
pub struct EngineHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("waiting", &self.shared.inbox().len())
            .finish_non_exhaustive()
    }
}

impl EngineHandle {
    /// A handle with no engine yet, and the receiving end of its channel
    /// (for [`EngineThread::spawn`], or a test's stand-in engine, which
    /// receives every event there).
    pub fn channel() -> (Self, Receiver<EngineEvent>) {
        let (tx, rx) = mpsc::channel();
        let epoch = Instant::now();
        let handle = EngineHandle {
            shared: Arc::new(Shared {
                tx,
                inbox: Mutex::new(Inbox::default()),
                engine: OnceLock::new(),
                inline: AtomicBool::new(true),
                wake_sent: AtomicBool::new(false),
                wakes_at: AtomicU64::new(u64::MAX),
                epoch,
                counters: Counters::default(),
            }),
        };
        (handle, rx)
    }

    /// Whether arriving threads run events when the engine is idle (the
    /// default) or every event waits for the engine thread.
    pub fn set_run_to_completion(&self, on: bool) {
        self.shared.inline.store(on, Ordering::SeqCst);
    }

    /// Puts `engine` behind the handle (once); what came before through the
    /// channel `rx` waits in the inbox, ahead of what comes after.
    fn install(&self, engine: Engine, rx: &Receiver<EngineEvent>) {
        if self.shared.engine.set(Mutex::new(Some(engine))).is_err() {
            panic!("one engine per handle");
        }
        let mut inbox = self.shared.inbox();
        while let Ok(ev) = rx.try_recv() {
            inbox.force(ev, None);
        }
        inbox.installed = true;
    }

    /// Queues `ev` (the error: the engine thread has stopped, and `ev` is
    /// dropped). Before the engine is installed `ev` goes to the channel.
    fn queue(&self, ev: EngineEvent) -> Result<Queue, EngineStopped> {
        let s = &self.shared;
        let mut inbox = s.inbox();
        if inbox.stopped {
            return Err(EngineStopped);
        }
        if !inbox.installed {
            s.counters.count(Source::of(&ev), Runner::EngineThread);
            s.tx.send(ev).map_err(|_| EngineStopped)?;
            return Ok(Queue::Sent);
        }
        Ok(match inbox.push(ev, Some(std::thread::current().id())) {
            Pushed::Queued { was_empty } => Queue::Waits { was_empty },
            Pushed::Coalesced => {
                s.counters.coalesced.fetch_add(1, Ordering::Relaxed);
                Queue::Sent
            }
            Pushed::Full(ev) => Queue::Full(ev),
        })
    }

    /// Hands `ev` to the engine thread, waking it if nothing waited before
    /// (the error: it has stopped, and `ev` is dropped). A thread that owns
    /// the engine first may run it.
    pub fn send(&self, ev: EngineEvent) -> Result<(), EngineStopped> {
        match self.queue(ev)? {
            Queue::Sent | Queue::Waits { was_empty: false } => Ok(()),
            Queue::Waits { was_empty: true } => {
                self.shared.wake_engine_thread();
                Ok(())
            }
            Queue::Full(ev) => self.run_full(ev),
        }
    }

    /// Runs `ev` on this thread if the engine is free (with the events
    /// queued before it), else leaves it to the engine's owner, which runs
    /// it before it lets the engine go (the error: the engine thread has
    /// stopped). Never waits for the engine, except when its party's share
    /// of the inbox is full (see [`Self::run_full`]).
    pub fn run_or_send(&self, ev: EngineEvent) -> Result<(), EngineStopped> {
        let s = &self.shared;
        let was_empty = match self.queue(ev)? {
            Queue::Sent => return Ok(()),
            Queue::Full(ev) => return self.run_full(ev),
            Queue::Waits { was_empty } => was_empty,
        };
        if !s.inline.load(Ordering::Relaxed) {
            // Onto a non-empty inbox: the engine thread was woken for the
            // first of those events and takes them all.
            if was_empty {
                s.wake_engine_thread();
            }
            return Ok(());
        }
        let Some(mutex) = s.engine.get() else {
            return Ok(());
        };
        match mutex.try_lock() {
            Ok(guard) => self.run_as_owner(guard, OWNER_RUN),
            // The owner runs it before it lets the engine go.
            Err(TryLockError::WouldBlock) => {}
            // The engine thread finds the poison and stops.
            Err(TryLockError::Poisoned(_)) => s.wake_engine_thread(),
        }
        Ok(())
    }

    /// The back-pressure on a producer whose party's share of the inbox is
    /// full: this thread waits for the engine (at most the current owner's
    /// turn: every turn is bounded), queues `ev` behind what waits and runs
    /// the inbox as its owner, up to and including `ev`. Meanwhile it takes
    /// nothing more from its own source: a link reader reads no more from
    /// its socket (the peer's credits and ring fill, and it waits), the
    /// vfio-user thread takes no more of the guest's messages.
    fn run_full(&self, ev: EngineEvent) -> Result<(), EngineStopped> {
        let s = &self.shared;
        s.counters.backpressure(Source::of(&ev));
        let Some(mutex) = s.engine.get() else {
            return Err(EngineStopped);
        };
        let Ok(guard) = mutex.lock() else {
            // The engine thread finds the poison and stops.
            s.wake_engine_thread();
            return Err(EngineStopped);
        };
        if guard.is_none() {
            return Err(EngineStopped);
        }
        let through_ev = {
            let mut inbox = s.inbox();
            inbox.force(ev, Some(std::thread::current().id()));
            inbox.len()
        };
        self.run_as_owner(guard, through_ev);
        Ok(())
    }

    /// Runs up to `max` waiting events as the engine's owner, then lets the
    /// engine go. Events queued while it held the engine by threads that
    /// found it owned are this thread's to run: it looks again after letting
    /// go, and takes the engine back for them (a thread that took it
    /// meanwhile runs them instead). What is left past `max` waits for the
    /// engine thread, which it wakes.
    fn run_as_owner<'a>(&'a self, mut guard: MutexGuard<'a, Option<Engine>>, max: usize) {
        let s = &self.shared;
        let mut ran = 0;
        loop {
            let Some(engine) = guard.as_mut() else {
                return; // stopped: the engine thread dropped what waits
            };
            let events = s.take(max - ran);
            ran += events.len();
            s.absorb_all(engine, events, false);
            let deadline = engine.next_deadline();
            drop(guard);
            self.wake_for(deadline);
            // A thread that queued after the take found the engine owned
            // (by this thread), or finds it free now and runs it itself.
            if !s.has_waiting() {
                return;
            }
            if ran >= max {
                s.wake_engine_thread();
                return;
            }
            let Some(mutex) = s.engine.get() else { return };
            guard = match mutex.try_lock() {
                Ok(g) => g,
                Err(TryLockError::WouldBlock) => return,
                Err(TryLockError::Poisoned(_)) => {
                    s.wake_engine_thread();
                    return;
                }
            };
        }
    }

    /// Wakes the engine thread if `deadline` is before it means to wake.
    fn wake_for(&self, deadline: Option<Instant>) {
        let s = &self.shared;
        let Some(d) = deadline else { return };
        if s.ns(d) < s.wakes_at.load(Ordering::SeqCst) {
            s.counters.timer_wakes.fetch_add(1, Ordering::Relaxed);
            s.wake_engine_thread();
        }
    }

    /// How events reached the engine so far.
    pub fn handoffs(&self) -> Handoffs {
        Handoffs {
            inbox_peak: self.shared.inbox().peak() as u64,
            ..self.shared.counters.get()
        }
    }
}

/// A running engine thread.
pub struct EngineThread {
    handle: EngineHandle,
    thread: Option<JoinHandle<EngineStats>>,
}

impl EngineThread {
    /// Puts `engine` behind `handle` and starts its thread, which runs what
    /// arriving threads leave (woken through `rx`, `handle`'s channel) and
    /// the timers; it polls its channel for an adaptive budget of at most
    /// `spin` before each blocking wait (see [`wait`]).
    pub fn spawn(
        handle: EngineHandle,
        rx: Receiver<EngineEvent>,
        engine: Engine,
        spin: Duration,
    ) -> Self {
        handle.install(engine, &rx);
        let shared = handle.shared.clone();
        let thread = std::thread::Builder::new()
            .name("ibtca-engine".into())
            .spawn(move || {
                ibtca_sandbox::enter(ibtca_sandbox::Role::Engine);
                run(&shared, &rx, spin)
            })
            .expect("spawn the engine thread");
        EngineThread {
            handle,
            thread: Some(thread),
        }
    }

    /// A handle on the engine.
    pub fn handle(&self) -> EngineHandle {
        self.handle.clone()
    }

    /// Stops the thread and returns its counters.
    pub fn stop(mut self) -> EngineStats {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> EngineStats {
        let _ = self.handle.shared.tx.send(EngineEvent::Stop);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl Drop for EngineThread {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// The engine thread: runs the waiting events in bursts under the mutex,
/// runs the timers, and sleeps until it is woken or the next deadline.
fn run(shared: &Shared, rx: &Receiver<EngineEvent>, spin: Duration) -> EngineStats {
    let Some(mutex) = shared.engine.get() else {
        return EngineStats::default();
    };
    let mut wait = Duration::from_secs(1);
    let mut budget = ibtca_sched::IdleBudget::new(spin);
    shared
        .wakes_at
        .store(shared.ns(Instant::now() + wait), Ordering::SeqCst);
    // Events wait (queued before the thread started, or left after a turn).
    let mut waiting = shared.has_waiting();
    loop {
        if !waiting {
            match wait::recv_spinning(rx, wait, &mut budget) {
                Ok(EngineEvent::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                // A wake-up: the events themselves wait in the inbox.
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            }
            // One turn serves every wake-up sent so far.
            if rx.try_iter().any(|ev| matches!(ev, EngineEvent::Stop)) {
                break;
            }
        }
        // Wake-ups sent from here on are for events this turn may not see.
        shared.wake_sent.store(false, Ordering::SeqCst);
        let Ok(mut guard) = mutex.lock() else {
            tracing::error!("the engine panicked on another thread; stopping");
            break;
        };
        let Some(engine) = guard.as_mut() else {
            break;
        };
        let events = shared.take(BURST);
        if !events.is_empty() {
            shared.absorb_all(engine, events, true);
        }
        let now = Instant::now();
        engine.on_timers(now);
        let deadline = engine.next_deadline();
        wait = deadline
            .map(|d| d.saturating_duration_since(now))
            .unwrap_or(Duration::from_secs(1));
        shared
            .wakes_at
            .store(shared.ns(now + wait), Ordering::SeqCst);
        drop(guard);
        // More than a burst, or queued by threads that found the engine
        // owned by this thread after its take.
        waiting = shared.has_waiting();
    }
    // Nothing runs the engine any more: dropping it lets its link go (the
    // link's reader holds this handle), and what waits is dropped.
    let mut guard = mutex.lock().unwrap_or_else(|e| e.into_inner());
    let engine = guard.take();
    drop(guard);
    let dropped = {
        let mut inbox = shared.inbox();
        inbox.stopped = true;
        inbox.take_all()
    };
    drop(dropped);
    engine.as_ref().map(Engine::stats).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drdma::{Drdma, DrdmaConfig};
    use crate::engine::inbox::{HOST_EVENTS_MAX, LINK_EVENTS_MAX};
    use crate::engine::{PacketSink, PortState};
    use crate::regs;
    use crate::tca::Tca;
    use crate::verbs::PortAttrs;
    use std::sync::mpsc::{sync_channel, TryRecvError};

    /// A sink that drops every packet; `_alive` shows whether it lives.
    struct Nowhere {
        _alive: Arc<()>,
    }

    impl PacketSink for Nowhere {
        fn send(&mut self, _packet: Vec<u8>) {}
    }

    /// A sink that, at the end of the first burst it sees (while its
    /// owner still holds the engine), has another thread hand `.1` to the
    /// engine through `.0`.
    struct Interloper(Option<(EngineHandle, EngineEvent)>);

    impl PacketSink for Interloper {
        fn send(&mut self, _packet: Vec<u8>) {}

        fn publish(&mut self) {
            if let Some((handle, ev)) = self.0.take() {
                std::thread::scope(|s| {
                    s.spawn(|| handle.run_or_send(ev).unwrap());
                });
            }
        }
    }

    fn engine() -> Engine {
        engine_with_sink(Arc::new(()))
    }

    fn engine_with_sink(alive: Arc<()>) -> Engine {
        engine_with(Box::new(Nowhere { _alive: alive }))
    }

    fn engine_with(sink: Box<dyn PacketSink>) -> Engine {
        let tca = Tca::new();
        Engine::new(
            tca.guest_memory(),
            tca.msix().clone(),
            sink,
            PortAttrs::default(),
            PortState::new(regs::PORT_ACTIVE),
            Drdma::new(DrdmaConfig::default()).unwrap(),
        )
    }

    /// A handle with an engine and no engine thread: only inline runs
    /// reach the engine, queued events stay in `rx`.
    fn idle_engine() -> (EngineHandle, Receiver<EngineEvent>) {
        let (handle, rx) = EngineHandle::channel();
        handle.install(engine(), &rx);
        (handle, rx)
    }

    /// A packet the engine counts as malformed (too short for a header).
    fn runt() -> EngineEvent {
        EngineEvent::Link(ibtca_link::LinkEvent::Packet(vec![0; 8]))
    }

    fn waiting(handle: &EngineHandle) -> usize {
        handle.shared.inbox().len()
    }

    /// An `Inspect` event and where its snapshot arrives.
    fn inspect() -> (EngineEvent, Receiver<Box<super::super::DeviceSnapshot>>) {
        let (tx, rx) = sync_channel(1);
        (EngineEvent::Inspect(tx), rx)
    }

    #[test]
    fn an_idle_engine_runs_the_event_on_the_calling_thread() {
        let (handle, queue) = idle_engine();
        let (ev, snapshot) = inspect();
        handle.run_or_send(ev).unwrap();
        // Answered before run_or_send returned, and nothing was queued.
        assert!(snapshot.try_recv().is_ok());
        assert_eq!(queue.try_recv().unwrap_err(), TryRecvError::Empty);
    }

    #[test]
    fn a_thread_that_takes_the_engine_runs_the_events_queued_before_its_own_first() {
        let (handle, _wakes) = idle_engine();
        // Queued for the engine thread (which this test does not run).
        std::thread::scope(|s| {
            s.spawn(|| handle.send(runt()).unwrap());
        });
        let (ev, snapshot) = inspect();
        handle.run_or_send(ev).unwrap();
        // The snapshot was taken after the packet was counted.
        let snap = snapshot.try_recv().expect("answered on this thread");
        assert_eq!(snap.engine.rx_malformed, 1);
        assert_eq!(waiting(&handle), 0);
        assert_eq!(handle.handoffs().link_by_owner, 1);
    }

    #[test]
    fn a_busy_engine_leaves_the_event_to_its_owner_without_waiting_or_waking() {
        let (handle, wakes) = idle_engine();
        let owner = handle.shared.engine.get().unwrap().lock().unwrap();
        let (done_tx, done) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let (ev, _snapshot) = inspect();
                handle.run_or_send(ev).unwrap();
                done_tx.send(()).unwrap();
            });
            // The other thread returns while this one owns the engine.
            let returned = done.recv_timeout(Duration::from_secs(10));
            assert!(returned.is_ok(), "run_or_send waited for the owner");
        });
        drop(owner);
        assert_eq!(waiting(&handle), 1);
        assert_eq!(wakes.try_recv().unwrap_err(), TryRecvError::Empty);
        assert_eq!(handle.handoffs().engine_wakes, 0);
    }

    #[test]
    fn an_event_that_finds_the_engine_owned_runs_on_the_owner_before_it_lets_go() {
        let (handle, wakes) = idle_engine();
        let owner = handle.shared.engine.get().unwrap().lock().unwrap();
        let (ev, snapshot) = inspect();
        // A link reader's packet and then a control request, while this
        // thread owns the engine: both only queue.
        std::thread::scope(|s| {
            let handle = &handle;
            s.spawn(move || {
                handle.run_or_send(runt()).unwrap();
                handle.run_or_send(ev).unwrap();
            });
        });
        assert_eq!(snapshot.try_recv().unwrap_err(), TryRecvError::Empty);
        // The owner lets the engine go as every owner does.
        handle.run_as_owner(owner, OWNER_RUN);
        let snap = snapshot.try_recv().expect("run before the owner let go");
        assert_eq!(snap.engine.rx_malformed, 1, "the packet ran first");
        let h = handle.handoffs();
        assert_eq!(
            (h.link_by_owner, h.link_inline, h.link_queued),
            (1, 0, 0),
            "{h:?}"
        );
        // The engine thread was not woken for it.
        assert_eq!(h.engine_wakes, 0);
        assert_eq!(wakes.try_recv().unwrap_err(), TryRecvError::Empty);
        assert_eq!(waiting(&handle), 0);
    }

    #[test]
    fn an_event_queued_after_the_owners_last_look_is_run_before_it_returns() {
        let (handle, wakes) = EngineHandle::channel();
        let (ev, snapshot) = inspect();
        let sink = Interloper(Some((handle.clone(), ev)));
        handle.install(engine_with(Box::new(sink)), &wakes);
        // The burst's flush has another thread queue the Inspect: it finds
        // the engine owned by this thread, which has already taken the
        // inbox.
        handle.run_or_send(runt()).unwrap();
        assert!(snapshot.try_recv().is_ok(), "left in the inbox");
        assert_eq!(waiting(&handle), 0);
        assert_eq!(handle.handoffs().engine_wakes, 0);
        assert_eq!(wakes.try_recv().unwrap_err(), TryRecvError::Empty);
    }

    #[test]
    fn an_owner_runs_at_most_its_share_and_wakes_the_engine_thread_for_the_rest() {
        let (handle, wakes) = idle_engine();
        let owner = handle.shared.engine.get().unwrap().lock().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..OWNER_RUN + 2 {
                    handle.run_or_send(runt()).unwrap();
                }
            });
        });
        handle.run_as_owner(owner, OWNER_RUN);
        assert_eq!(handle.handoffs().link_by_owner, OWNER_RUN as u64);
        assert_eq!(waiting(&handle), 2);
        assert!(matches!(wakes.try_recv(), Ok(EngineEvent::Wake)));
        assert_eq!(handle.handoffs().engine_wakes, 1);
    }

    /// Waits (without a timing assumption: the limit only ends a failing
    /// test) until `done` holds.
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let limit = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < limit, "never happened: {what}");
            std::thread::yield_now();
        }
    }

    fn sq_doorbell(qpn: u32, pi: u32) -> EngineEvent {
        EngineEvent::Doorbell(crate::verbs::datapath::Doorbell::Sq { qpn, pi })
    }

    #[test]
    fn a_flooding_link_reader_stops_at_its_share_while_the_guest_and_control_go_on() {
        let (handle, _wakes) = idle_engine();
        let mutex = handle.shared.engine.get().unwrap();
        let owner = mutex.lock().unwrap();
        let flood = LINK_EVENTS_MAX + 5;
        let (ev, snapshot) = inspect();
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                for _ in 0..flood {
                    handle.run_or_send(runt()).unwrap();
                }
            });
            // The reader queues its share, then waits for the engine
            // instead of queueing more (it reads no more of its socket).
            wait_until("the reader found the inbox full", || {
                handle.handoffs().link_backpressure == 1
            });
            assert_eq!(waiting(&handle), LINK_EVENTS_MAX);
            // The guest's doorbells and the control thread's request still
            // queue, without waiting.
            let guest = s.spawn(|| handle.run_or_send(sq_doorbell(3, 1)).unwrap());
            let control = s.spawn(|| handle.send(ev).unwrap());
            guest.join().unwrap();
            control.join().unwrap();
            assert_eq!(waiting(&handle), LINK_EVENTS_MAX + 2);
            assert!(!reader.is_finished());
            // The owner lets go: the reader runs the inbox, then the rest
            // of its flood.
            drop(owner);
            reader.join().unwrap();
        });
        let snap = snapshot.try_recv().expect("the control request ran");
        assert_eq!(snap.engine.rx_malformed, LINK_EVENTS_MAX as u64);
        let h = handle.handoffs();
        assert_eq!(h.link_inline + h.link_by_owner, flood as u64, "{h:?}");
        assert_eq!(h.vfio_by_owner, 1, "the doorbell ran");
        assert!(h.inbox_peak <= (LINK_EVENTS_MAX + 3) as u64, "{h:?}");
        assert_eq!(waiting(&handle), 0);
    }

    #[test]
    fn a_doorbell_storm_on_one_queue_takes_one_entry_and_never_waits() {
        let (handle, _wakes) = idle_engine();
        let owner = handle.shared.engine.get().unwrap().lock().unwrap();
        let storm = 10 * HOST_EVENTS_MAX as u32;
        let (done_tx, done) = mpsc::channel();
        let returned = std::thread::scope(|s| {
            s.spawn(|| {
                for pi in 1..=storm {
                    handle.run_or_send(sq_doorbell(3, pi)).unwrap();
                }
                done_tx.send(()).unwrap();
            });
            let returned = done.recv_timeout(Duration::from_secs(60));
            // Let go before the scope joins the guest's thread, pass or fail.
            let waited = waiting(&handle);
            drop(owner);
            returned.map(|()| waited)
        });
        assert_eq!(
            returned,
            Ok(1),
            "the storm waited for the owner, or queued more"
        );
        let h = handle.handoffs();
        assert_eq!(h.doorbells_coalesced, u64::from(storm) - 1);
        assert_eq!(h.host_backpressure, 0);
    }

    #[test]
    fn a_deadline_before_the_engine_threads_wake_up_wakes_it() {
        let (handle, queue) = EngineHandle::channel();
        let s = &handle.shared;
        let now = Instant::now();
        s.wakes_at
            .store(s.ns(now + Duration::from_secs(1)), Ordering::SeqCst);
        handle.wake_for(Some(now + Duration::from_secs(2)));
        handle.wake_for(None);
        assert_eq!(queue.try_recv().unwrap_err(), TryRecvError::Empty);
        handle.wake_for(Some(now + Duration::from_millis(10)));
        assert!(matches!(queue.try_recv(), Ok(EngineEvent::Wake)));
        assert_eq!(handle.handoffs().timer_wakes, 1);
        // The engine thread has not acted on that wake-up yet: it looks at
        // its timers anyway, so an earlier deadline sends no second one.
        handle.wake_for(Some(now + Duration::from_millis(5)));
        assert_eq!(queue.try_recv().unwrap_err(), TryRecvError::Empty);
        assert_eq!(handle.handoffs().engine_wakes, 1);
    }

    #[test]
    fn events_queued_behind_a_waiting_event_wake_nobody() {
        let (handle, wakes) = idle_engine();
        handle.set_run_to_completion(false);
        handle.run_or_send(runt()).unwrap();
        assert!(matches!(wakes.try_recv(), Ok(EngineEvent::Wake)));
        // The engine thread starts its turn (it takes the inbox next): an
        // event queued now is in what it takes, so it needs no wake-up.
        handle.shared.wake_sent.store(false, Ordering::SeqCst);
        handle.run_or_send(runt()).unwrap();
        handle.send(runt()).unwrap();
        assert_eq!(wakes.try_recv().unwrap_err(), TryRecvError::Empty);
        assert_eq!(handle.handoffs().engine_wakes, 1);
        assert_eq!(waiting(&handle), 3);
    }

    #[test]
    fn the_engine_thread_takes_queued_events_and_nothing_runs_after_it_stops() {
        let (handle, rx) = EngineHandle::channel();
        let thread = EngineThread::spawn(handle.clone(), rx, engine(), Duration::ZERO);
        let (ev, snapshot) = inspect();
        handle.send(ev).unwrap();
        assert!(snapshot.recv_timeout(Duration::from_secs(10)).is_ok());
        assert_eq!(handle.handoffs().engine_wakes, 1);
        thread.stop();
        let (ev, snapshot) = inspect();
        assert!(handle.run_or_send(ev).is_err());
        // Dropped unanswered.
        assert_eq!(snapshot.try_recv().unwrap_err(), TryRecvError::Disconnected);
    }

    #[test]
    fn a_stopped_engine_thread_lets_the_engine_and_its_link_go() {
        // The link's reader keeps a handle: the engine (which holds the
        // link) must not live as long as that handle.
        let (handle, rx) = EngineHandle::channel();
        let link = Arc::new(());
        let engine = engine_with_sink(link.clone());
        let thread = EngineThread::spawn(handle.clone(), rx, engine, Duration::ZERO);
        assert_eq!(Arc::strong_count(&link), 2);
        thread.stop();
        assert_eq!(Arc::strong_count(&link), 1);
        drop(handle);
    }
}
