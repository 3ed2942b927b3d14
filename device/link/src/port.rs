//! The running link: the public handle, the supervisor thread that obtains
//! connections (listen or connect side) and the stop machinery.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::fault::FaultPlan;
use super::queue::{DoneFn, TxQueue};
use super::session;
use super::shared::{Control, Shared, Sink};
use super::socket::{LinkListener, LinkSocket};
use super::socket_file::{self, SocketId};
use super::{LinkConfig, LinkEndpoint, LinkError, LinkEvent, LinkRx, LinkStats, LocalPort};

const TOKEN_LISTENER: u64 = 1;
const TOKEN_STOP: u64 = 2;

/// One port's link to a peer device. Stops (and joins its threads) on
/// [`Link::stop`] or drop.
#[derive(Debug)]
pub struct Link {
    shared: Arc<Shared>,
    endpoint: LinkEndpoint,
    supervisor: Option<JoinHandle<()>>,
    /// Device and inode of the socket file we bound, to remove only ours.
    bound: Option<SocketId>,
    /// The address a TCP listen endpoint is bound to (its port chosen by
    /// the system when the endpoint asks for port 0).
    bound_tcp: Option<std::net::SocketAddr>,
}

impl Link {
    /// Starts a link with the default [`LinkConfig`]; see
    /// [`Link::start_with`].
    pub fn start(
        endpoint: LinkEndpoint,
        local: LocalPort,
        sink: impl FnMut(LinkEvent) + Send + 'static,
    ) -> io::Result<Link> {
        Link::start_with(endpoint, local, LinkConfig::default(), sink)
    }

    /// Starts a link. A listen endpoint is bound before this returns (a
    /// stale socket file is replaced; a live socket or another file is an
    /// error); a connect endpoint is tried in the background until a peer
    /// listens. Events go to `sink` on the link's thread (module docs).
    pub fn start_with(
        endpoint: LinkEndpoint,
        local: LocalPort,
        config: LinkConfig,
        sink: impl FnMut(LinkEvent) + Send + 'static,
    ) -> io::Result<Link> {
        Link::start_full(endpoint, local, config, sink, None)
    }

    /// [`Link::start_with`], plus `on_done`, called (on the writer thread,
    /// or the caller's) with the tag of every packet queued with
    /// [`Link::send_tagged`] once it is sent or discarded: a switch returns
    /// the input port's credit then.
    pub fn start_full(
        endpoint: LinkEndpoint,
        local: LocalPort,
        config: LinkConfig,
        mut sink: impl FnMut(LinkEvent) + Send + 'static,
        on_done: Option<DoneFn>,
    ) -> io::Result<Link> {
        let sink = move |rx| match rx {
            LinkRx::Event(ev) => sink(ev),
            LinkRx::Packets(batch) => {
                batch.for_each(|p, _| sink(LinkEvent::Packet(p.to_vec())));
            }
        };
        Link::start_batched_full(endpoint, local, config, sink, on_done)
    }

    /// Starts a link like [`Link::start_with`], with a sink that gets the
    /// packets of each read as one [`LinkRx::Packets`] batch (one
    /// call, one allocation) instead of one [`LinkEvent::Packet`] each.
    pub fn start_batched(
        endpoint: LinkEndpoint,
        local: LocalPort,
        config: LinkConfig,
        sink: impl FnMut(LinkRx) + Send + 'static,
    ) -> io::Result<Link> {
        Link::start_batched_full(endpoint, local, config, sink, None)
    }

    /// [`Link::start_batched`] with the `on_done` callback of
    /// [`Link::start_full`].
    pub fn start_batched_full(
        endpoint: LinkEndpoint,
        local: LocalPort,
        config: LinkConfig,
        sink: impl FnMut(LinkRx) + Send + 'static,
        on_done: Option<DoneFn>,
    ) -> io::Result<Link> {
        let (listener, bound) = match &endpoint {
            LinkEndpoint::Listen(path) => {
                let (listener, id) = socket_file::bind_listener(path)?;
                listener.set_nonblocking(true)?;
                (Some(LinkListener::Unix(listener)), Some(id))
            }
            LinkEndpoint::ListenTcp(address) => (Some(LinkListener::bind_tcp(address)?), None),
            LinkEndpoint::Connect(_) | LinkEndpoint::ConnectTcp(_) => (None, None),
        };
        let bound_tcp = match &listener {
            Some(LinkListener::Tcp(l)) => Some(l.local_addr()?),
            _ => None,
        };
        let shared = Arc::new(Shared {
            local,
            queue: TxQueue::with(config.queue_capacity, config.flow_control.clone(), on_done),
            config,
            counters: Arc::default(),
            control: Mutex::new(Control::default()),
            stop_fd: EventFd::new(EFD_NONBLOCK)?,
            rx_rings_refused: AtomicBool::new(false),
        });
        let thread_shared = Arc::clone(&shared);
        let peer = endpoint.clone();
        let tcp_peer = match &endpoint {
            LinkEndpoint::ConnectTcp(address) => address
                .resolve()
                .map_err(|e| io::Error::new(e.kind(), format!("link endpoint {endpoint}: {e}")))?,
            _ => Vec::new(),
        };
        let mut sink: Sink = Box::new(sink);
        let supervisor = thread::Builder::new()
            .name("ibtca-link".into())
            .spawn(move || {
                crate::thread_hook::thread_started(crate::LinkThread::Supervisor);
                let shared = &thread_shared;
                let result = match listener {
                    Some(listener) => listen_loop(shared, &listener, &mut sink),
                    None => connect_loop(shared, &peer, &tcp_peer, &mut sink),
                };
                if let Err(e) = result {
                    tracing::error!(error = %e, endpoint = %peer, "link stopped by an error");
                }
            })?;
        tracing::info!(%endpoint, guid = format_args!("{:#018x}", local.node_guid), "link started");
        Ok(Link {
            shared,
            endpoint,
            supervisor: Some(supervisor),
            bound,
            bound_tcp,
        })
    }

    /// Queues one IB packet for the peer without blocking; a packet that
    /// cannot be queued is dropped and counted (see [`LinkError`]).
    pub fn send(&self, packet: Vec<u8>) -> Result<(), LinkError> {
        self.shared.queue.send(packet, &self.shared.counters)
    }

    /// Queues many packets under one lock, as [`Link::send`] would each;
    /// returns how many were refused (counted as `send` counts them). If the
    /// writer thread is idle, the packets are written to the socket right
    /// away from the calling thread (non-blocking; what the socket does not
    /// take is left to the writer), saving the writer's wake-up.
    pub fn send_batch(&self, packets: impl IntoIterator<Item = Vec<u8>>) -> usize {
        self.shared.queue.send_batch(packets, &self.shared.counters)
    }

    /// Builds one packet of `len` bytes on `vl` straight into the shared
    /// ring this end writes, when nothing is queued, pending or owed ahead
    /// of it, the writer thread is idle, no fault plan is set, `vl` has a
    /// credit and the frame fits before the ring wraps: `build` writes the
    /// whole packet in place (no buffer, no copy) or returns false to give
    /// up (nothing is sent). The packet is published with the next ones,
    /// by [`Link::publish`] at the latest. `None` when that cannot be done now (`build`
    /// is not called): send a buffer with [`Link::send`] or
    /// [`Link::send_batch`] instead. `build` runs under the send queue's
    /// lock and must not call into this link.
    pub fn send_in_place(
        &self,
        len: usize,
        vl: u8,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Option<bool> {
        self.shared
            .queue
            .send_in_place(len, vl, build, &self.shared.counters)
    }

    /// Lets the peer see the packets [`Link::send_in_place`] built: they
    /// are published in batches (as many as one write would carry), and at
    /// the latest by this call, which a sender makes at the end of a burst.
    pub fn publish(&self) {
        self.shared.queue.publish();
    }

    /// Moves buffers of packets already framed (and so no longer needed)
    /// into `spare`, emptied, up to `max` in all: a sender can build its
    /// next packets in them instead of allocating.
    pub fn reclaim(&self, spare: &mut Vec<Vec<u8>>, max: usize) {
        self.shared.queue.reclaim(spare, max);
    }

    /// [`Link::send`] with a tag for the `on_done` callback of
    /// [`Link::start_full`]; on an error the tag is not reported.
    pub fn send_tagged(&self, packet: Vec<u8>, tag: u64) -> Result<(), LinkError> {
        self.shared
            .queue
            .send_tagged(packet, Some(tag), &self.shared.counters)
    }

    /// Frees `n` receive buffers of `vl`: their credits go back to the peer
    /// (for a link without [`super::FlowControl::auto_return`]).
    pub fn return_credits(&self, vl: u8, n: u32) {
        self.shared
            .queue
            .return_credits(vl, n, &self.shared.counters);
    }

    /// Credits the peer has granted per VL and this end not yet used.
    pub fn credits(&self) -> [u32; super::NUM_VLS] {
        self.shared.queue.credits()
    }

    /// Connections so far: changes whenever the link comes up again, so
    /// that credits owed to an earlier connection can be told apart.
    pub fn generation(&self) -> u64 {
        self.shared
            .counters
            .connections
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// True between [`LinkEvent::Up`] and [`LinkEvent::Down`].
    pub fn is_up(&self) -> bool {
        self.shared.queue.is_up()
    }

    /// The counters so far.
    pub fn stats(&self) -> LinkStats {
        self.shared.counters.snapshot()
    }

    /// Replaces the low-priority VL arbitration table: (VL, weight in
    /// 64-byte units) entries served in order (VLArbitrationTable blocks 1
    /// and 2, as a subnet manager sets them).
    pub fn set_low_priority(&self, entries: &[(u8, u8)]) {
        self.shared
            .queue
            .set_low_priority(entries, &self.shared.counters);
    }

    /// Replaces the high-priority VL arbitration table and its limit
    /// (VLArbitrationTable blocks 3 and 4, PortInfo VLHighLimit); an empty
    /// table leaves arbitration to the low-priority table.
    pub fn set_high_priority(&self, table: &crate::HighPriority) {
        self.shared
            .queue
            .set_high_priority(table, &self.shared.counters);
    }

    /// Replaces the fault-injection plan; sequence numbers restart at 0.
    pub fn set_faults(&self, plan: FaultPlan) {
        self.shared.queue.set_faults(plan, &self.shared.counters);
    }

    /// Where this link listens or connects.
    pub fn endpoint(&self) -> &LinkEndpoint {
        &self.endpoint
    }

    /// The address a TCP listen endpoint is bound to; `None` for the
    /// other endpoints.
    pub fn tcp_listen_address(&self) -> Option<std::net::SocketAddr> {
        self.bound_tcp
    }

    /// This end's identity, as sent in `Hello`.
    pub fn local(&self) -> LocalPort {
        self.shared.local
    }

    /// Stops the link: cuts the connection (the sink gets `Down` if it was
    /// up), joins the threads and removes the listen socket file.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(supervisor) = self.supervisor.take() else {
            return;
        };
        {
            let mut control = self.shared.control();
            control.stopping = true;
            if let Some(stream) = &control.active {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
        let _ = self.shared.stop_fd.write(1);
        supervisor.thread().unpark();
        if supervisor.join().is_err() {
            tracing::error!(endpoint = %self.endpoint, "link thread panicked");
        }
        if let (LinkEndpoint::Listen(path), Some(bound)) = (&self.endpoint, self.bound) {
            socket_file::remove_own(path, bound);
        }
        tracing::info!(endpoint = %self.endpoint, "link stopped");
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Listen side: accept one peer at a time until stopped.
fn listen_loop(shared: &Arc<Shared>, listener: &LinkListener, sink: &mut Sink) -> io::Result<()> {
    let epoll = Epoll::new()?;
    let watch = |fd, token| {
        epoll.ctl(
            ControlOperation::Add,
            fd,
            EpollEvent::new(EventSet::IN, token),
        )
    };
    watch(listener.as_raw_fd(), TOKEN_LISTENER)?;
    watch(shared.stop_fd.as_raw_fd(), TOKEN_STOP)?;
    let mut events = [EpollEvent::default(); 2];
    loop {
        if shared.is_stopping() {
            return Ok(());
        }
        match epoll.wait(-1, &mut events) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        match listener.accept() {
            Ok(stream) => {
                tracing::debug!("link peer connected");
                session::run(shared, stream, sink);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                // Out of descriptors or similar: do not spin.
                tracing::warn!(error = %e, "link accept failed");
                pause(shared, shared.config.backoff_max);
            }
        }
    }
}

/// One connection attempt to the peer at `endpoint` (a connect endpoint;
/// a TCP one's addresses resolved in `tcp_peer`).
fn connect(
    shared: &Shared,
    endpoint: &LinkEndpoint,
    tcp_peer: &[SocketAddr],
) -> io::Result<LinkSocket> {
    match endpoint {
        LinkEndpoint::ConnectTcp(_) => {
            LinkSocket::connect_tcp(tcp_peer, shared.config.hello_timeout)
        }
        LinkEndpoint::Connect(path) => UnixStream::connect(path).map(LinkSocket::unix),
        LinkEndpoint::Listen(_) | LinkEndpoint::ListenTcp(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a listen endpoint does not connect",
        )),
    }
}

/// Connect side: connect with backoff, run the session, repeat until stopped.
fn connect_loop(
    shared: &Arc<Shared>,
    endpoint: &LinkEndpoint,
    tcp_peer: &[SocketAddr],
    sink: &mut Sink,
) -> io::Result<()> {
    let (min, max) = (shared.config.backoff_min, shared.config.backoff_max);
    let mut delay = min;
    let mut logged = false;
    while !shared.is_stopping() {
        match connect(shared, endpoint, tcp_peer) {
            Ok(stream) => {
                logged = false;
                if session::run(shared, stream, sink) {
                    delay = min;
                    continue;
                }
            }
            Err(e) if !logged => {
                logged = true;
                tracing::info!(%endpoint, error = %e, "link peer not there yet; retrying");
            }
            Err(e) => tracing::trace!(error = %e, "link connect failed"),
        }
        pause(shared, delay);
        delay = (delay * 2).min(max);
    }
    Ok(())
}

/// Sleeps for `delay` or until stop is requested.
fn pause(shared: &Shared, delay: Duration) {
    let deadline = Instant::now() + delay;
    while !shared.is_stopping() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        thread::park_timeout(left);
    }
}
