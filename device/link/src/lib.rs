//! `ibtca-link`, the link layer that ibtca devices and switches share: a
//! port joined to a port of another ibtca device or switch by a Unix socket
//! that tunnels IB packets. It knows nothing of either (`ibtca-device`
//! re-exports it as `ibtca_device::link`).
//!
//! The framing is [`ibtca_protocol::link`]; this crate runs it:
//!
//! - [`LinkEndpoint`] (`endpoint.rs`): `listen:PATH` or `connect:PATH`, or
//!   over TCP (a link between hosts) `listen:tcp:HOST:PORT` or
//!   `connect:tcp:HOST:PORT`. A connection is a socket (`socket.rs`) of either
//!   family: the same Hello, frames, credits and reconnects; shared rings
//!   only on Unix sockets (TCP cannot pass their files); TCP with
//!   `TCP_NODELAY` and keepalives that end a connection to a vanished host
//!   within [`TCP_DEAD_PEER`].
//! - [`Link`] (`port.rs`, `session/`; `shared.rs` what their threads
//!   share): the running link. One *supervisor* thread obtains a
//!   connection (accepts one peer at a time, or connects with a 50 ms →
//!   1 s backoff), sends `Hello`, reads the peer's `Hello`, then
//!   reads frames and hands them to the caller's sink until the peer goes
//!   away; then it reports [`LinkEvent::Down`] and starts over. A *writer*
//!   thread per connection drains the send queue (`queue/`) and writes many
//!   frames per `write`; [`Link::send_batch`] writes a burst itself when
//!   that thread is idle (only what the peer's credits allow, in
//!   arbitration order).
//! - Shared rings (`pipe.rs`, `ring.rs`): when both ends announce
//!   [`FEATURE_SHARED_RING`] (the default, [`LinkConfig::shared_ring`]),
//!   each offers the other, right after the `Hello`s, a ring in shared
//!   memory for its own frames, and from then on writes them there instead
//!   of into the socket: the same byte stream, without the socket's system
//!   calls and buffer allocations. The socket stays open so that each end
//!   sees the other go (its end still means the peer is gone).
//! - [`FaultPlan`] (`fault.rs`): drop, duplicate, reorder or corrupt sent
//!   packets, by sequence number or at seeded random rates.
//! - [`LinkStats`] (`stats.rs`): counters; errors are logged and counted, not
//!   propagated.
//! - [`FlowControl`] (`vl.rs`): per-VL queues, credits granted by the peer
//!   in `Credit` frames, VL15 first, then IBA's high-priority table and
//!   limit ([`HighPriority`]), then weighted arbitration of data VLs.
//!
//! # Events
//!
//! Events go to a sink closure, `FnMut(LinkEvent) + Send`, called only on the
//! supervisor thread, in stream order: `Up`, the peer's packets, `Down`, and
//! again `Up` after a reconnect. A closure lets the caller wrap events into
//! its own channel's message type, e.g.
//! `move |ev| { let _ = engine_tx.send(EngineMsg::Link(ev)); }`.
//! [`Link::start_batched`] takes a sink of [`LinkRx`] instead: the same
//! events, except that the packets one read completes arrive as one
//! [`PacketBatch`] (one call and one buffer for all of them; the reader
//! walks its receive buffer in place and copies each packet once). The
//! device's engine uses it; [`Link::start`] and [`Link::start_with`] unpack
//! batches into one [`LinkEvent::Packet`] each.
//! A sink that blocks holds up the reader, and through the socket the peer's
//! writer. With flow control (the default), credits are the back-pressure:
//! the peer sends a packet only into a receive buffer this end granted, and
//! the buffer is freed when the [`PacketBatch`] that carries the packet is
//! dropped ([`FlowControl::auto_return`]; with [`Link::start`] and
//! [`Link::start_with`], once the sink has taken the packet) or when the
//! owner says so
//! ([`Link::return_credits`], the switch, once the packet left through its
//! output port). Stopping a link joins
//! the thread that calls the sink, so the sink must not wait for the thread
//! that calls [`Link::stop`] (or drops the link), nor stop the link itself.
//!
//! # Sending
//!
//! [`Link::send`] never blocks: a packet is queued (bounded, default 4096
//! packets) or dropped and counted, because the link is down, the queue is
//! full or the packet exceeds the frame limit. The IB transport above
//! retransmits, as it would over a lossy wire. Packets still queued when a
//! connection ends are dropped too (counted as `tx_dropped_down`). A queued
//! packet waits for its VL's credit; a VL out of credit stalls alone.
//! [`Link::send_tagged`] reports each packet to the `on_done` callback of
//! [`Link::start_full`] once it is written or discarded.
//!
//! # Misbehaving peers
//!
//! A peer whose first frame is not a `Hello` of [`LINK_PROTOCOL_VERSION`],
//! that stays silent for [`LinkConfig::hello_timeout`], or that sends a
//! malformed or oversized frame (limit [`MAX_BODY`]) is dropped with a
//! warning and counted; the link goes on waiting or reconnecting. A peer
//! that sends a packet on a VL whose receive buffers are all held ignores
//! its credits: the packet is dropped and counted
//! ([`LinkStats::rx_credit_overruns`], logged once per connection), so
//! what waits for the sink stays within the buffer granted.
//!
//! A ring offer is checked like any input: a peer that offers a ring to
//! a link that announced none, passes files that are not two size-sealed
//! memfds of a ring's sizes and two eventfds, leaves ring indices out of
//! order, or writes to the socket after its offer, is dropped with a
//! warning (counted in [`LinkStats::rx_bad_frames`]). A link that cannot
//! map a good offer (memory limits) drops that connection once and
//! announces no rings from then on, so the peer writes to the socket; one
//! that cannot make its own ring writes to the socket (both with a
//! warning).
//!
//! The listen side serves one peer at a time: a second connector waits in
//! the socket backlog, gets no `Hello`, gives up after the `Hello` timeout
//! and retries. A link joins exactly two ports (a switch has one link per
//! port, `ibtca_switch`).
//!
//! [`memfd`] makes the anonymous shared-memory files of the rings (and of
//! the device's DRDMA packet memory).
//!
//! [`LINK_PROTOCOL_VERSION`]: ibtca_protocol::link::LINK_PROTOCOL_VERSION
//! [`FEATURE_SHARED_RING`]: ibtca_protocol::link::FEATURE_SHARED_RING

#![deny(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use ibtca_protocol::packet::ReceivedCrcs;

mod endpoint;
mod fault;
pub mod memfd;
mod pipe;
mod port;
mod queue;
pub mod ring;
mod session;
mod shared;
mod socket;
pub mod socket_file;
mod stats;
#[cfg(test)]
mod tests;
mod thread_hook;
mod vl;
mod vl_table;

pub use endpoint::{EndpointError, LinkEndpoint, TcpAddress};
pub use fault::{FaultPlan, FaultRates};
pub use port::Link;
pub use queue::{DoneFn, LinkError};
pub use socket::TCP_DEAD_PEER;
pub use stats::LinkStats;
pub use thread_hook::{set_thread_hook, LinkThread};
pub use vl::{
    weight_table, FlowControl, HighPriority, HIGH_LIMIT_UNBOUNDED, NUM_VLS, VL15, VL15_BUFFERS,
};
pub use vl_table::WEIGHT_UNIT;

/// Largest frame body accepted or sent: one IB packet at 4 KiB MTU plus
/// headers fits many times over.
pub const MAX_BODY: usize = 64 * 1024;
/// Default capacity of the send queue, in packets.
pub const QUEUE_CAPACITY: usize = 4096;

/// Identity of one end of a link, exchanged in the `Hello` frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocalPort {
    /// Node GUID of the device.
    pub node_guid: u64,
    /// Port number on the device (IB ports count from 1).
    pub port: u8,
    /// LID assigned to the port.
    pub lid: u16,
}

/// What a link reports to its sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// The `Hello` exchange completed; `peer` is the other end.
    Up {
        /// The peer's identity, from its `Hello`.
        peer: LocalPort,
    },
    /// The connection ended (after an `Up`).
    Down {
        /// Why, for logs.
        reason: String,
    },
    /// One IB packet from the peer, LRH through VCRC.
    Packet(Vec<u8>),
}

/// What a link started with [`Link::start_batched`] reports: events as
/// [`LinkEvent`] (never [`LinkEvent::Packet`]), and packets in batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkRx {
    /// `Up` or `Down`.
    Event(LinkEvent),
    /// The peer's packets that one read (of the socket or the ring)
    /// completed, in order.
    Packets(PacketBatch),
}

/// IB packets from the peer, in stream order, in one buffer (one allocation
/// and one hand-over for all the packets of a read).
///
/// A batch either holds copies of its packets ([`PacketBatch::push`]), or
/// is the link reader's receive buffer itself, handed over with the places
/// of the packets in it (no copy; the buffer goes back to the reader's pool
/// when the batch is dropped), or holds the part of the peer's shared ring
/// the packets lie in ([`ring::RingLease`]; freed for the peer when the
/// batch is dropped): [`PacketBatch::for_each`] then copies each packet out
/// of the ring just before its consumer looks at it, so a packet crosses
/// memory once on its way from the peer's ring to where it goes, on the
/// consumer's CPU, and the link reader copies nothing.
///
/// A batch from a link with [`FlowControl::auto_return`] holds its
/// packets' receive buffers: their credits go back to the peer when the
/// batch is dropped, i.e. once the sink's consumer is done with the
/// packets, so a peer never has more packets in flight to this end than
/// its receive buffer (however slowly the consumer goes).
#[derive(Debug, Default)]
pub struct PacketBatch {
    bytes: Vec<u8>,
    /// Start and end offset in `bytes` of each packet.
    spans: Vec<(usize, usize)>,
    /// Where `bytes` goes back to (a handed-over receive buffer).
    pool: Option<Arc<BufferPool>>,
    /// Receive buffers to free when dropped.
    credits: Option<RxCredits>,
    /// The CRCs of each packet, computed by the link reader while the
    /// bytes were in its cache ([`PacketBatch::compute_crcs`]); empty
    /// until then.
    crcs: Vec<ReceivedCrcs>,
    /// The part of the peer's ring the packets lie in (`spans` are
    /// offsets in it, and `bytes` is empty).
    ring: Option<ring::RingLease>,
}

/// Receive buffers a [`PacketBatch`] holds: `per_vl[vl]` on connection
/// `conn` of the link whose state is `shared`.
#[derive(Debug)]
struct RxCredits {
    shared: Arc<shared::Shared>,
    conn: u64,
    per_vl: [u16; NUM_VLS],
}

impl RxCredits {
    /// `per_vl` buffers of connection `conn` of the link `shared`.
    fn new(shared: Arc<shared::Shared>, conn: u64, per_vl: [u16; NUM_VLS]) -> Self {
        RxCredits {
            shared,
            conn,
            per_vl,
        }
    }

    /// Frees the buffers: the credits go back to the peer.
    fn release(self) {
        let shared = &self.shared;
        shared
            .queue
            .free_rx(self.conn, &self.per_vl, &shared.counters);
    }
}

impl PacketBatch {
    /// An empty batch with room for `bytes` bytes of packets.
    pub fn with_capacity(bytes: usize) -> Self {
        PacketBatch {
            bytes: Vec::with_capacity(bytes),
            spans: Vec::new(),
            pool: None,
            credits: None,
            crcs: Vec::new(),
            ring: None,
        }
    }

    /// The batch frees these receive buffers when dropped.
    fn hold(&mut self, credits: RxCredits) {
        self.credits = Some(credits);
    }

    /// A batch of the packets at `spans` in `bytes`, which go back to
    /// `pool` once the batch is dropped.
    pub(crate) fn from_buffer(
        bytes: Vec<u8>,
        spans: Vec<(usize, usize)>,
        pool: Arc<BufferPool>,
    ) -> Self {
        PacketBatch {
            bytes,
            spans,
            pool: Some(pool),
            credits: None,
            crcs: Vec::new(),
            ring: None,
        }
    }

    /// A batch of the packets at `spans` in the ring part `lease` (offsets
    /// from its start), left there until the batch is dropped.
    pub(crate) fn from_ring(lease: ring::RingLease, spans: Vec<(usize, usize)>) -> Self {
        PacketBatch {
            bytes: Vec::new(),
            spans,
            pool: None,
            credits: None,
            crcs: Vec::new(),
            ring: Some(lease),
        }
    }

    /// Appends a packet (to a batch of copies; one whose packets are in
    /// a ring is first made one).
    pub fn push(&mut self, packet: &[u8]) {
        if self.ring.is_some() {
            let mut copy = self.clone();
            copy.credits = self.credits.take();
            *self = copy;
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(packet);
        self.spans.push((start, self.bytes.len()));
    }

    /// Packets in the batch.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// No packets.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The packets of a batch of copies or a receive buffer (none for one
    /// in a ring), in order.
    fn own_packets(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.spans
            .iter()
            .map(|&(start, end)| self.bytes.get(start..end).unwrap_or_default())
    }

    /// Whether the packets lie in the peer's ring.
    pub fn in_ring(&self) -> bool {
        self.ring.is_some()
    }

    /// Computes every packet's CRCs now (the link reader does, right
    /// after its read, while the bytes are in its cache; checking them
    /// later on the engine's CPU costs a second trip through memory).
    /// Not for packets in a ring: they are checked where they are copied
    /// out.
    pub fn compute_crcs(&mut self) {
        if self.ring.is_none() {
            let crcs: Vec<ReceivedCrcs> = self.own_packets().map(ReceivedCrcs::of).collect();
            self.crcs = crcs;
        }
    }

    /// Calls `f` with each packet, in order, and its CRCs if
    /// [`Self::compute_crcs`] ran (the bytes are the batch's own: nothing
    /// can change them in between). A packet in a ring is first copied out
    /// (the peer could rewrite it there); `f` gets the copy.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Option<&ReceivedCrcs>)) {
        let Some(lease) = &self.ring else {
            let mut crcs = self.crcs.iter();
            self.own_packets().for_each(|p| f(p, crcs.next()));
            return;
        };
        let longest = self.spans.iter().map(|(s, e)| e - s).max().unwrap_or(0);
        let mut copy = vec![0u8; longest];
        for &(start, end) in &self.spans {
            let packet = copy.get_mut(..end - start).unwrap_or_default();
            // The reader made the spans from what it leased: they are in it.
            if lease.copy_at(start as u64, packet) {
                f(packet, None);
            }
        }
    }

    /// Copies of the packets, in order.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        let mut packets = Vec::with_capacity(self.len());
        self.for_each(|p, _| packets.push(p.to_vec()));
        packets
    }
}

impl Clone for PacketBatch {
    /// A copy of the packets (never of a handed-over buffer, nor of the
    /// receive buffers it holds: only the original frees them).
    fn clone(&self) -> Self {
        let mut copy = PacketBatch::with_capacity(self.spans.iter().map(|(s, e)| e - s).sum());
        self.for_each(|p, _| {
            let start = copy.bytes.len();
            copy.bytes.extend_from_slice(p);
            copy.spans.push((start, copy.bytes.len()));
        });
        copy
    }
}

impl PartialEq for PacketBatch {
    /// The same packets in the same order.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.to_vecs() == other.to_vecs()
    }
}

impl Eq for PacketBatch {}

impl Drop for PacketBatch {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.put(std::mem::take(&mut self.bytes));
        }
        if let Some(credits) = self.credits.take() {
            credits.release();
        }
    }
}

/// Receive buffers of one link reader that it handed over in
/// [`PacketBatch`]es, back from the sink for reuse (at most a few are
/// kept).
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    spare: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl BufferPool {
    /// Buffers kept for reuse: enough for the data a peer may have in
    /// flight on one VL (the default 1024 credits of 4 KiB packets are 32
    /// receive buffers of 128 KiB), so a bulk stream reuses its buffers
    /// instead of allocating and zero-filling new ones.
    const KEEP: usize = 36;

    /// A spare buffer of `len` bytes, if one is back.
    fn take(&self, len: usize) -> Option<Vec<u8>> {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        spare.pop().filter(|b| b.len() == len)
    }

    /// Keeps `buf` for reuse (or frees it if enough are kept).
    fn put(&self, buf: Vec<u8>) {
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < Self::KEEP {
            spare.push(buf);
        }
    }
}

/// Tunables; [`LinkConfig::default`] suits the device.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Packets the send queue holds before [`Link::send`] drops.
    pub queue_capacity: usize,
    /// How long a new peer may take to send its `Hello`.
    pub hello_timeout: Duration,
    /// First delay between connection attempts (connect side).
    pub backoff_min: Duration,
    /// Longest delay between connection attempts; the delay doubles up to it.
    pub backoff_max: Duration,
    /// Per-VL credit flow control and VL arbitration (`vl.rs`); `None`
    /// sends without credits (only against a peer that grants none either).
    pub flow_control: Option<FlowControl>,
    /// Bytes asked for the connection's socket send buffer (`SO_SNDBUF`,
    /// which for a Unix stream bounds what is in flight to the peer's
    /// reader); the kernel caps it at `net.core.wmem_max`. 0 keeps the
    /// system default. See [`SEND_BUFFER`].
    pub send_buffer: usize,
    /// Data bytes of the shared-memory ring each side offers a peer that
    /// takes one, for the frames it sends (`pipe.rs`, rounded up to a
    /// power of two of at least 4 KiB); 0 keeps every frame on the socket
    /// and refuses the peer's ring. See [`SHARED_RING`].
    pub shared_ring: u64,
    /// How long a link reader polls an empty shared ring before it sleeps
    /// (a wake-up across CPUs costs tens of µs; polling costs CPU, and a
    /// real-time thread must not poll). See [`RX_SPIN`].
    pub rx_spin: Duration,
    /// The reader computes each received packet's CRCs right after its
    /// read ([`PacketBatch::compute_crcs`]), while the bytes are still in
    /// its CPU's cache, for a sink that checks them (the device's engine;
    /// a switch checks only the VCRC, itself). Packets left in a shared
    /// ring are not read by the reader at all: the sink checks its own
    /// copy ([`PacketBatch::for_each`]).
    pub rx_crcs: bool,
}

/// Default [`LinkConfig::rx_spin`]: none. On two CPUs shared by both
/// devices and their guests a polling reader takes the CPU from the
/// thread that would fill its ring: 20 µs of polling made the no-VM 64 B
/// ping-pong slower (95–119 against 71–82 µs one way) and 1 MiB WRITEs no
/// faster (`ibtca-bench verbs --link-spin-us 20`, AMD Zen 4 host). Give it CPUs to
/// spare before raising it, as for the engine's spin.
pub const RX_SPIN: Duration = Duration::ZERO;

/// Default shared-memory ring of a link, per direction: 4 MiB, like the
/// socket buffer it replaces ([`SEND_BUFFER`]): all but a few dozen of the
/// 1024 packets of 4 KiB that one VL's credits allow, with their framing
/// (a sender at the very end of its credits briefly waits for room; 8
/// MiB measured no faster with `ibtca-bench verbs --link-ring-kib 8192`).
pub const SHARED_RING: u64 = 4 << 20;

/// Default socket send buffer of a link: 4 MiB, about the default credits
/// of one VL (1024 packets of 4 KiB MTU), so a
/// sender within its credits is rarely held up by the socket: the engine's
/// direct non-blocking write takes a whole burst and the writer thread
/// stays asleep. With the system default (208 KiB) the writer woke for
/// most of a bulk stream, and each MiB cost the device threads ~10–20 %
/// more CPU (`ibtca-bench verbs`, 1 MiB WRITE).
pub const SEND_BUFFER: usize = 4 << 20;

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            queue_capacity: QUEUE_CAPACITY,
            hello_timeout: Duration::from_secs(5),
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            flow_control: Some(FlowControl::default()),
            send_buffer: SEND_BUFFER,
            shared_ring: SHARED_RING,
            rx_spin: RX_SPIN,
            rx_crcs: false,
        }
    }
}
