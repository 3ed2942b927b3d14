//! Link counters: atomics shared by the link's threads, read as a snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a link's counters (see [`super::Link::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Packets written to the socket.
    pub tx_packets: u64,
    /// Bytes of those packets (frame headers not counted).
    pub tx_bytes: u64,
    /// `write` calls for packets; `(tx_packets - tx_built_in_place) /
    /// tx_writes` is the batching.
    pub tx_writes: u64,
    /// Packets of `tx_packets` built straight into the shared ring, each
    /// published on its own, without a write call or a copy
    /// ([`super::Link::send_in_place`]).
    pub tx_built_in_place: u64,
    /// Packets received (passed to the sink, or dropped as
    /// `rx_credit_overruns`).
    pub rx_packets: u64,
    /// Bytes of those packets.
    pub rx_bytes: u64,
    /// Packets dropped because the link was down (at send, or still queued
    /// when the connection ended).
    pub tx_dropped_down: u64,
    /// Packets dropped because the send queue was full.
    pub tx_dropped_full: u64,
    /// Packets dropped because they exceed [`super::MAX_BODY`].
    pub tx_dropped_oversize: u64,
    /// Connections dropped for a malformed or oversized frame, or a protocol
    /// violation after the `Hello`.
    pub rx_bad_frames: u64,
    /// Peers dropped before `Up`: first frame not a `Hello`, wrong version,
    /// silence past the `Hello` timeout, or a malformed first frame.
    pub hello_rejected: u64,
    /// Completed `Hello` exchanges (times the link came up).
    pub connections: u64,
    /// Times the link came up again after having been up: `connections - 1`.
    pub reconnects: u64,
    /// Packets dropped by fault injection.
    pub fault_dropped: u64,
    /// Extra copies sent by fault injection.
    pub fault_duplicated: u64,
    /// Packets held back and sent after their successor by fault injection.
    pub fault_reordered: u64,
    /// Packets with a byte flipped by fault injection.
    pub fault_corrupted: u64,
    /// Credit stalls (flow control): times the link came to have packets
    /// queued while no VL that had packets had credit.
    pub credit_stalls: u64,
    /// `Credit` frames sent (buffers freed and granted to the peer).
    pub credit_frames_tx: u64,
    /// `Credit` frames received from the peer.
    pub credit_frames_rx: u64,
    /// Packets the peer sent on a VL without credit (all the receive
    /// buffers it was granted still held): dropped, not passed on.
    pub rx_credit_overruns: u64,
    /// VL15 (management) packets dropped because the
    /// [`super::VL15_BUFFERS`] buffers were all held.
    pub rx_vl15_dropped: u64,
    /// Connections on which this end wrote its frames into a shared ring
    /// it offered (`pipe.rs`), not the socket.
    pub tx_rings: u64,
    /// Connections on which the peer wrote its frames into a shared ring.
    pub rx_rings: u64,
    /// Wake-ups this end sent its peer's ring reader: eventfd writes made
    /// because the reader had said it sleeps (a write to an awake reader
    /// sends none). Two writes before the sleeping reader runs count two.
    pub ring_wakes_tx: u64,
    /// Times this end's ring reader went to sleep on an empty ring (after
    /// its idle budget and its last look), each ended by a wake-up or a
    /// hang-up.
    pub ring_sleeps_rx: u64,
}

/// The live counters behind [`LinkStats`].
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub tx_packets: AtomicU64,
    pub tx_bytes: AtomicU64,
    pub tx_writes: AtomicU64,
    pub tx_built_in_place: AtomicU64,
    pub rx_packets: AtomicU64,
    pub rx_bytes: AtomicU64,
    pub tx_dropped_down: AtomicU64,
    pub tx_dropped_full: AtomicU64,
    pub tx_dropped_oversize: AtomicU64,
    pub rx_bad_frames: AtomicU64,
    pub hello_rejected: AtomicU64,
    pub connections: AtomicU64,
    pub fault_dropped: AtomicU64,
    pub fault_duplicated: AtomicU64,
    pub fault_reordered: AtomicU64,
    pub fault_corrupted: AtomicU64,
    pub credit_stalls: AtomicU64,
    pub credit_frames_tx: AtomicU64,
    pub credit_frames_rx: AtomicU64,
    pub rx_credit_overruns: AtomicU64,
    pub rx_vl15_dropped: AtomicU64,
    pub tx_rings: AtomicU64,
    pub rx_rings: AtomicU64,
    pub ring_wakes_tx: AtomicU64,
    pub ring_sleeps_rx: AtomicU64,
}

/// Adds `n` to a counter. Relaxed: counters order nothing.
pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Takes `n` back from a counter (a count made ahead that did not happen).
pub(super) fn sub(counter: &AtomicU64, n: u64) {
    counter.fetch_sub(n, Ordering::Relaxed);
}

/// Adds one to a counter.
pub(super) fn bump(counter: &AtomicU64) {
    add(counter, 1);
}

impl Counters {
    pub fn snapshot(&self) -> LinkStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let connections = get(&self.connections);
        LinkStats {
            tx_packets: get(&self.tx_packets),
            tx_bytes: get(&self.tx_bytes),
            tx_writes: get(&self.tx_writes),
            tx_built_in_place: get(&self.tx_built_in_place),
            rx_packets: get(&self.rx_packets),
            rx_bytes: get(&self.rx_bytes),
            tx_dropped_down: get(&self.tx_dropped_down),
            tx_dropped_full: get(&self.tx_dropped_full),
            tx_dropped_oversize: get(&self.tx_dropped_oversize),
            rx_bad_frames: get(&self.rx_bad_frames),
            hello_rejected: get(&self.hello_rejected),
            connections,
            reconnects: connections.saturating_sub(1),
            fault_dropped: get(&self.fault_dropped),
            fault_duplicated: get(&self.fault_duplicated),
            fault_reordered: get(&self.fault_reordered),
            fault_corrupted: get(&self.fault_corrupted),
            credit_stalls: get(&self.credit_stalls),
            credit_frames_tx: get(&self.credit_frames_tx),
            credit_frames_rx: get(&self.credit_frames_rx),
            rx_credit_overruns: get(&self.rx_credit_overruns),
            rx_vl15_dropped: get(&self.rx_vl15_dropped),
            tx_rings: get(&self.tx_rings),
            rx_rings: get(&self.rx_rings),
            ring_wakes_tx: get(&self.ring_wakes_tx),
            ring_sleeps_rx: get(&self.ring_sleeps_rx),
        }
    }
}
