//! The ATM port: a Unix stream socket carrying raw 53-byte cells back to
//! back (`listen:PATH` or `connect:PATH`, one peer at a time). A reader
//! (the port's thread) runs the receive side ([`Receiver`]: HEC, filters,
//! AAL reassembly, timeouts) and hands messages to the engine; a writer
//! thread per connection drains the class queues ([`CellScheduler`]).
//! With a capture, every cell in (interface 0, as received) and out
//! (interface 1) is recorded as an ERF ATM record (the header without its
//! HEC, then the payload), which tshark decodes (VPI, VCI, PTI).

use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ibtca_link::socket_file::{self, SocketId};
use ibtca_link::LinkEndpoint;
use ibtca_protocol::atm::{Cell, Delivery, Receiver, RxCounters, CELL_LEN};
use ibtca_sandbox::{self as sandbox, Role};
use ibtca_switch::{Capture, Direction, ERF_TYPE_ATM};

use crate::handoff::HandOff;
use crate::map::VcMap;
use crate::qp_thread::Event;
use crate::scheduler::CellScheduler;

/// How often blocked calls look at the stop flag and timeouts run.
const TICK: Duration = Duration::from_millis(20);
/// Cells per socket write.
const WRITE_BATCH: usize = 256;

/// Counters the port shares with whoever asks.
#[derive(Debug, Default)]
pub struct PortCounters {
    /// The receive side's.
    pub rx: Mutex<RxCounters>,
    /// Cells written.
    pub cells_out: AtomicU64,
    /// Messages dropped because the engine had not taken the earlier
    /// ones ([`HandOff`]).
    pub overrun_dropped: AtomicU64,
}

/// A running ATM port.
pub struct AtmPort {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Its counters.
    pub counters: Arc<PortCounters>,
}

impl AtmPort {
    /// Starts the port: a listen socket is bound before this returns (a
    /// stale socket file is replaced).
    pub fn start(
        ep: LinkEndpoint,
        map: &VcMap,
        reassembly_timeout: Duration,
        cells: Arc<CellScheduler>,
        events: Sender<Event>,
        handoff: Arc<HandOff>,
        capture: Option<Arc<Capture>>,
    ) -> io::Result<Self> {
        let listener = match &ep {
            LinkEndpoint::Listen(p) => {
                let (l, id) = socket_file::bind_listener(p)
                    .map_err(|e| io::Error::new(e.kind(), format!("ATM port: {e}")))?;
                l.set_nonblocking(true)?;
                Some((l, id))
            }
            LinkEndpoint::Connect(_) => None,
            LinkEndpoint::ListenTcp(_) | LinkEndpoint::ConnectTcp(_) => {
                return Err(io::Error::new(
                    ErrorKind::Unsupported,
                    format!("ATM port {ep}: an ATM port runs over a Unix socket, not TCP"),
                ))
            }
        };
        let mut rx = Receiver::new(reassembly_timeout);
        for e in &map.vcs {
            for vc in e.vcs() {
                rx.add_vc(vc, e.aal);
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(PortCounters::default());
        let port = PortThread {
            ep,
            listener,
            rx,
            cells,
            events,
            stop: stop.clone(),
            counters: counters.clone(),
            handoff,
            capture,
        };
        let thread = std::thread::Builder::new()
            .name("ibtca-gw-atm".into())
            .spawn(move || {
                sandbox::enter(Role::AtmPort);
                port.run()
            })?;
        Ok(Self {
            stop,
            thread: Some(thread),
            counters,
        })
    }

    /// Stops the port (and removes a listen socket file).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AtmPort {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct PortThread {
    ep: LinkEndpoint,
    listener: Option<(UnixListener, SocketId)>,
    rx: Receiver,
    cells: Arc<CellScheduler>,
    events: Sender<Event>,
    stop: Arc<AtomicBool>,
    counters: Arc<PortCounters>,
    handoff: Arc<HandOff>,
    capture: Option<Arc<Capture>>,
}

/// Records `cell` in `capture` as an ERF ATM record.
fn record(capture: &Capture, direction: Direction, cell: &[u8]) {
    let mut r = [0u8; CELL_LEN - 1];
    r[..4].copy_from_slice(&cell[..4]);
    r[4..].copy_from_slice(&cell[5..]);
    capture.record_of(ERF_TYPE_ATM, direction, &r);
}

impl PortThread {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn run(mut self) {
        while let Some(stream) = self.connect() {
            tracing::info!(endpoint = %self.ep, "ATM port up");
            let why = self.serve(stream);
            tracing::info!(endpoint = %self.ep, reason = %why, "ATM port down");
            self.rx.restart();
        }
        if let (Some((_, id)), LinkEndpoint::Listen(p)) = (&self.listener, &self.ep) {
            socket_file::remove_own(p, *id);
        }
    }

    /// The next connection, or `None` when stopping.
    fn connect(&mut self) -> Option<UnixStream> {
        let mut backoff = Duration::from_millis(50);
        while !self.stopping() {
            let got = match (&self.listener, &self.ep) {
                (Some((l, _)), _) => l.accept().map(|(s, _)| s),
                (None, ep) => UnixStream::connect(ep.path().unwrap_or(Path::new(""))),
            };
            match got {
                Ok(s) => return Some(s),
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(TICK),
                Err(e) => {
                    tracing::debug!(error = %e, endpoint = %self.ep, "ATM port: no peer yet");
                    std::thread::sleep(backoff.min(Duration::from_secs(1)));
                    backoff *= 2;
                }
            }
        }
        None
    }

    /// Runs one connection until it ends; returns why.
    fn serve(&mut self, stream: UnixStream) -> String {
        let writer = match self.start_writer(&stream) {
            Ok(w) => w,
            Err(e) => return format!("cannot start the writer: {e}"),
        };
        let why = self.read_cells(&stream);
        let _ = stream.shutdown(std::net::Shutdown::Both);
        writer.0.store(true, Ordering::Relaxed);
        let _ = writer.1.join();
        why
    }

    fn start_writer(&self, stream: &UnixStream) -> io::Result<(Arc<AtomicBool>, JoinHandle<()>)> {
        stream.set_nonblocking(false)?;
        let mut out = stream.try_clone()?;
        let done = Arc::new(AtomicBool::new(false));
        let (flag, stop, cells, counters) = (
            done.clone(),
            self.stop.clone(),
            self.cells.clone(),
            self.counters.clone(),
        );
        let capture = self.capture.clone();
        let t = std::thread::Builder::new()
            .name("ibtca-gw-atm-tx".into())
            .spawn(move || {
                sandbox::enter(Role::AtmWriter);
                let mut batch = Vec::with_capacity(WRITE_BATCH);
                let mut bytes = Vec::with_capacity(WRITE_BATCH * CELL_LEN);
                while !flag.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
                    batch.clear();
                    if cells.pop(WRITE_BATCH, TICK, &mut batch) == 0 {
                        continue;
                    }
                    bytes.clear();
                    for c in &batch {
                        bytes.extend_from_slice(&c.bytes);
                    }
                    if let Err(e) = out.write_all(&bytes) {
                        tracing::debug!(error = %e, "ATM port: write failed");
                        return;
                    }
                    counters
                        .cells_out
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                    if let Some(c) = &capture {
                        for cell in &batch {
                            record(c, Direction::Tx, &cell.bytes);
                        }
                    }
                }
            })?;
        Ok((done, t))
    }

    /// Reads cells until the peer goes or the port stops.
    fn read_cells(&mut self, mut stream: &UnixStream) -> String {
        if let Err(e) = stream.set_read_timeout(Some(TICK)) {
            return e.to_string();
        }
        let mut buf = vec![0u8; CELL_LEN * 512];
        let mut have = 0;
        let mut out = Vec::new();
        loop {
            if self.stopping() {
                return "stopping".into();
            }
            match stream.read(&mut buf[have..]) {
                Ok(0) => return "peer closed the socket".into(),
                Ok(n) => have += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return e.to_string(),
            }
            let now = Instant::now();
            let whole = have - have % CELL_LEN;
            for chunk in buf[..whole].chunks_exact(CELL_LEN) {
                if let Some(c) = &self.capture {
                    record(c, Direction::Rx, chunk);
                }
                if let Some(cell) = Cell::from_slice(chunk) {
                    self.rx.push(&cell, now, &mut out);
                }
            }
            buf.copy_within(whole..have, 0);
            have -= whole;
            self.rx.expire(now);
            let handed = self.hand_over(&mut out);
            // Published after the hand-off: whoever sees a cell counted
            // also sees its message handed over or counted as dropped.
            if let Ok(mut c) = self.counters.rx.lock() {
                *c = *self.rx.counters();
            }
            if handed.is_err() {
                return "the engine stopped".into();
            }
        }
    }

    /// Hands the reassembled messages to the engine; what does not fit in
    /// the hand-off is dropped and counted. Fails when the engine stopped.
    fn hand_over(&self, out: &mut Vec<Delivery>) -> Result<(), ()> {
        let fit = self.handoff.reserve(out.len());
        if fit < out.len() {
            let n = (out.len() - fit) as u64;
            out.truncate(fit);
            self.counters
                .overrun_dropped
                .fetch_add(n, Ordering::Relaxed);
        }
        if out.is_empty() {
            return Ok(());
        }
        self.events
            .send(Event::Atm(std::mem::take(out)))
            .map_err(|_| ())
    }
}
