//! Who runs the engine: the thread an event arrives on, or the engine
//! thread.
//!
//! The engine (every QP's verbs and transport state) sits behind one
//! mutex, and whoever holds it owns every QP. A thread that receives an
//! event (the vfio-user thread a doorbell, a link reader a batch of
//! packets) runs it to completion itself when the engine is idle: the
//! mutex is free and no event waits in the engine thread's queue. Then the
//! WQE goes from the doorbell to the wire, or a packet from the link into
//! guest memory with its CQE and MSI-X, on the thread that took it, with
//! no hand-off. Otherwise the event joins the queue, in order behind the
//! others, and the engine thread takes it: what is queued and what is long
//! stays there. So no two threads ever race on a QP, and events of one
//! source are absorbed in the order they arrived.
//!
//! The engine thread also runs the transport's timers. It sleeps until
//! the earliest deadline it saw (`wakes_at`); a run on another thread that
//! leaves an earlier deadline (an ACK timer armed after the engine went to
//! sleep) wakes it with [`EngineEvent::Wake`].
//!
//! The events come from hostile parties (the guest, the link peer), and
//! an inline run does what the engine thread would do, bounded the same
//! way (at most [`super::MAX_QUEUED_SEND_WQES`] per QP per doorbell, one
//! batch of at most 128 KiB of packets); a thread that finds the engine
//! busy only queues, and never waits for the mutex.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{wait, Engine, EngineEvent, EngineStats};

/// Where an event came from (for [`Handoffs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The vfio-user thread: doorbells, command-queue and DRDMA registers.
    Vfio,
    /// A link reader: packets, link up and down.
    Link,
    /// Anything else (control socket, resets, the engine's own wakes).
    Other,
}

impl Source {
    fn of(ev: &EngineEvent) -> Self {
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

/// How the device's events reached the engine: run on the thread they
/// arrived on, or handed to the engine thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handoffs {
    /// vfio-user events (doorbells, registers) run on the vfio-user thread.
    pub vfio_inline: u64,
    /// vfio-user events handed to the engine thread.
    pub vfio_queued: u64,
    /// Link events (packet batches, up/down) run on the link reader.
    pub link_inline: u64,
    /// Link events handed to the engine thread.
    pub link_queued: u64,
    /// Wakes of the engine thread for a deadline an inline run set.
    pub timer_wakes: u64,
}

struct Counters {
    vfio_inline: AtomicU64,
    vfio_queued: AtomicU64,
    link_inline: AtomicU64,
    link_queued: AtomicU64,
    timer_wakes: AtomicU64,
}

impl Counters {
    fn new() -> Self {
        Counters {
            vfio_inline: AtomicU64::new(0),
            vfio_queued: AtomicU64::new(0),
            link_inline: AtomicU64::new(0),
            link_queued: AtomicU64::new(0),
            timer_wakes: AtomicU64::new(0),
        }
    }

    fn count(&self, source: Source, inline: bool) {
        let c = match (source, inline) {
            (Source::Vfio, true) => &self.vfio_inline,
            (Source::Vfio, false) => &self.vfio_queued,
            (Source::Link, true) => &self.link_inline,
            (Source::Link, false) => &self.link_queued,
            (Source::Other, _) => return,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

struct Shared {
    tx: Sender<EngineEvent>,
    /// Events sent to the engine thread and not yet absorbed (counted
    /// before the send, uncounted by the engine thread under the mutex
    /// once absorbed): an inline run needs 0, so it never overtakes one.
    queued: AtomicUsize,
    /// The engine, once its thread is started ([`EngineThread::spawn`]);
    /// until then (and in tests without one) events only queue. `None`
    /// once the engine thread stopped: the engine is dropped then, and
    /// with it its link (the link's reader holds this handle).
    engine: OnceLock<Mutex<Option<Engine>>>,
    /// Events may run on the thread they arrived on (else all queue).
    inline: AtomicBool,
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
}

/// The engine thread has stopped: the event was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineStopped;

/// A handle on the engine: runs an event at once when the engine is idle,
/// queues it for the engine thread otherwise.
#[derive(Clone)]
pub struct EngineHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EngineHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineHandle")
            .field("queued", &self.shared.queued.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl EngineHandle {
    /// A handle with no engine yet, and the receiving end of its queue
    /// (for [`EngineThread::spawn`], or a test's stand-in engine).
    pub fn channel() -> (Self, Receiver<EngineEvent>) {
        let (tx, rx) = mpsc::channel();
        let epoch = Instant::now();
        let handle = EngineHandle {
            shared: Arc::new(Shared {
                tx,
                queued: AtomicUsize::new(0),
                engine: OnceLock::new(),
                inline: AtomicBool::new(true),
                wakes_at: AtomicU64::new(u64::MAX),
                epoch,
                counters: Counters::new(),
            }),
        };
        (handle, rx)
    }

    /// Whether idle-engine events run on the thread they arrived on (the
    /// default) or every event goes through the engine thread's queue.
    pub fn set_run_to_completion(&self, on: bool) {
        self.shared.inline.store(on, Ordering::SeqCst);
    }

    /// Puts `engine` behind the handle (once).
    fn install(&self, engine: Engine) {
        if self.shared.engine.set(Mutex::new(Some(engine))).is_err() {
            panic!("one engine per handle");
        }
    }

    /// Hands `ev` to the engine thread (the error: it has stopped, and
    /// `ev` is dropped).
    pub fn send(&self, ev: EngineEvent) -> Result<(), EngineStopped> {
        let s = &self.shared;
        s.counters.count(Source::of(&ev), false);
        s.queued.fetch_add(1, Ordering::SeqCst);
        s.tx.send(ev).map_err(|_| {
            s.queued.fetch_sub(1, Ordering::SeqCst);
            EngineStopped
        })
    }

    /// Runs `ev` on this thread if the engine is idle (nothing queued, the
    /// mutex free, the engine thread running), else hands it to the engine
    /// thread (the error: it has stopped).
    pub fn run_or_send(&self, ev: EngineEvent) -> Result<(), EngineStopped> {
        let s = &self.shared;
        let Some(mutex) = s.engine.get() else {
            return self.send(ev);
        };
        if s.queued.load(Ordering::SeqCst) == 0 && s.inline.load(Ordering::Relaxed) {
            match mutex.try_lock() {
                Ok(mut guard) if s.queued.load(Ordering::SeqCst) == 0 => {
                    if let Some(engine) = guard.as_mut() {
                        s.counters.count(Source::of(&ev), true);
                        let now = Instant::now();
                        engine.handle(ev, now);
                        let deadline = engine.next_deadline();
                        drop(guard);
                        self.wake_for(deadline);
                        return Ok(());
                    }
                }
                Ok(_) | Err(TryLockError::WouldBlock) | Err(TryLockError::Poisoned(_)) => {}
            }
        }
        self.send(ev)
    }

    /// Wakes the engine thread if `deadline` is before it means to wake.
    fn wake_for(&self, deadline: Option<Instant>) {
        let s = &self.shared;
        let Some(d) = deadline else { return };
        if s.ns(d) < s.wakes_at.load(Ordering::SeqCst) {
            s.counters.timer_wakes.fetch_add(1, Ordering::Relaxed);
            let _ = self.send(EngineEvent::Wake);
        }
    }

    /// How events reached the engine so far.
    pub fn handoffs(&self) -> Handoffs {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Handoffs {
            vfio_inline: get(&c.vfio_inline),
            vfio_queued: get(&c.vfio_queued),
            link_inline: get(&c.link_inline),
            link_queued: get(&c.link_queued),
            timer_wakes: get(&c.timer_wakes),
        }
    }
}

/// A running engine thread.
pub struct EngineThread {
    handle: EngineHandle,
    thread: Option<JoinHandle<EngineStats>>,
}

impl EngineThread {
    /// Puts `engine` behind `handle` and starts its thread, which takes
    /// the events queued on `rx` (`handle`'s queue) and runs the timers; it
    /// polls its queue for an adaptive budget of at most `spin` before each
    /// blocking wait (see [`wait`]).
    pub fn spawn(
        handle: EngineHandle,
        rx: Receiver<EngineEvent>,
        engine: Engine,
        spin: Duration,
    ) -> Self {
        handle.install(engine);
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
        let _ = self.handle.send(EngineEvent::Stop);
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

/// The engine thread: takes each queued burst under the mutex, runs the
/// timers, and sleeps until the next event or deadline.
fn run(shared: &Shared, rx: &Receiver<EngineEvent>, spin: Duration) -> EngineStats {
    let Some(mutex) = shared.engine.get() else {
        return EngineStats::default();
    };
    let mut wait = Duration::from_secs(1);
    let mut budget = ibtca_sched::IdleBudget::new(spin);
    shared
        .wakes_at
        .store(shared.ns(Instant::now() + wait), Ordering::SeqCst);
    loop {
        let first = match wait::recv_spinning(rx, wait, &mut budget) {
            Ok(EngineEvent::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Timeout) => None,
        };
        let Ok(mut guard) = mutex.lock() else {
            tracing::error!("the engine panicked on another thread; stopping");
            break;
        };
        let Some(engine) = guard.as_mut() else {
            break;
        };
        let mut stop = false;
        if let Some(ev) = first {
            // Take the whole burst before sending anything.
            let now = Instant::now();
            engine.absorb(ev, now);
            shared.queued.fetch_sub(1, Ordering::SeqCst);
            for _ in 0..256 {
                match rx.try_recv() {
                    Ok(EngineEvent::Stop) => {
                        stop = true;
                        break;
                    }
                    Ok(ev) => engine.absorb(ev, now),
                    Err(_) => break,
                }
                shared.queued.fetch_sub(1, Ordering::SeqCst);
            }
            engine.flush(now);
        }
        if stop {
            break;
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
    }
    // Nothing runs the engine any more: dropping it lets its link go (the
    // link's reader holds this handle).
    let mut guard = mutex.lock().unwrap_or_else(|e| e.into_inner());
    let engine = guard.take();
    drop(guard);
    engine.as_ref().map(Engine::stats).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drdma::{Drdma, DrdmaConfig};
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

    fn engine() -> Engine {
        engine_with_sink(Arc::new(()))
    }

    fn engine_with_sink(alive: Arc<()>) -> Engine {
        let tca = Tca::new();
        Engine::new(
            tca.guest_memory(),
            tca.msix().clone(),
            Box::new(Nowhere { _alive: alive }),
            PortAttrs::default(),
            PortState::new(regs::PORT_ACTIVE),
            Drdma::new(DrdmaConfig::default()).unwrap(),
        )
    }

    /// A handle with an engine and no engine thread: only inline runs
    /// reach the engine, queued events stay in `rx`.
    fn idle_engine() -> (EngineHandle, Receiver<EngineEvent>) {
        let (handle, rx) = EngineHandle::channel();
        handle.install(engine());
        (handle, rx)
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
    fn an_event_never_overtakes_a_queued_one() {
        let (handle, queue) = idle_engine();
        handle.send(EngineEvent::ReadBudget).unwrap();
        let (ev, snapshot) = inspect();
        handle.run_or_send(ev).unwrap();
        assert_eq!(snapshot.try_recv().unwrap_err(), TryRecvError::Empty);
        assert!(matches!(queue.try_recv(), Ok(EngineEvent::ReadBudget)));
        assert!(matches!(queue.try_recv(), Ok(EngineEvent::Inspect(_))));
    }

    #[test]
    fn a_busy_engine_gets_the_event_queued_without_waiting_for_it() {
        let (handle, queue) = idle_engine();
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
            drop(owner);
            assert!(returned.is_ok(), "run_or_send waited for the owner");
        });
        assert!(matches!(queue.try_recv(), Ok(EngineEvent::Inspect(_))));
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
    }

    #[test]
    fn the_engine_thread_takes_queued_events_and_nothing_runs_after_it_stops() {
        let (handle, rx) = EngineHandle::channel();
        let thread = EngineThread::spawn(handle.clone(), rx, engine(), Duration::ZERO);
        let (ev, snapshot) = inspect();
        handle.send(ev).unwrap();
        assert!(snapshot.recv_timeout(Duration::from_secs(10)).is_ok());
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
