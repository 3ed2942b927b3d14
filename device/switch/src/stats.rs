//! Per-port switch counters: atomics updated by the forwarding threads,
//! read as a [`PortStats`] snapshot.

use std::sync::atomic::{AtomicU64, Ordering};

/// Why the switch dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// No forwarding entry for the DLID (counted on the input port).
    UnknownLid,
    /// ICRC or VCRC mismatch (counted on the input port).
    CrcError,
    /// Not a well-formed IB packet: bad LRH, PktLen or headers (input port).
    Malformed,
    /// The output port's send queue was full (output port).
    QueueFull,
    /// The output port's link was down, or the port does not exist (output
    /// port, or input port when the route names no port).
    LinkDown,
    /// A data packet to or from a port the subnet manager has not made
    /// Active (`--sm-managed`; counted where it would have gone out, or on
    /// the input port if that is the inactive one).
    PortInactive,
    /// A data packet whose P_Key the input port's table does not hold,
    /// the port enforcing partitions inbound (input port).
    PkeyInbound,
    /// A data packet whose P_Key the output port's table does not hold,
    /// the port enforcing partitions outbound (output port).
    PkeyOutbound,
}

/// A snapshot of one port's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received on the port.
    pub rx_packets: u64,
    /// Bytes of those packets.
    pub rx_bytes: u64,
    /// Packets queued for sending on the port.
    pub tx_packets: u64,
    /// Bytes of those packets.
    pub tx_bytes: u64,
    /// Of `rx_packets`, those to a multicast LID.
    pub rx_multicast: u64,
    /// Of `tx_packets`, copies of multicast packets.
    pub tx_multicast: u64,
    /// Received packets whose DLID has no forwarding entry (a multicast
    /// LID: no port of its set but the input port).
    pub drop_unknown_lid: u64,
    /// Received packets with a bad ICRC or VCRC.
    pub drop_crc_error: u64,
    /// Received packets that are not well-formed IB packets.
    pub drop_malformed: u64,
    /// Packets for this port dropped because its send queue was full.
    pub drop_queue_full: u64,
    /// Packets for this port dropped because its link was down.
    pub drop_link_down: u64,
    /// Data packets dropped because the SM had not made the port Active.
    pub drop_port_inactive: u64,
    /// Received data packets dropped by inbound partition enforcement.
    pub drop_pkey_inbound: u64,
    /// Data packets for this port dropped by outbound partition
    /// enforcement.
    pub drop_pkey_outbound: u64,
    /// Times the port's link came up.
    pub link_ups: u64,
    /// Times the port's link went down.
    pub link_downs: u64,
}

impl PortStats {
    /// Every drop on this port, whatever the reason.
    pub fn drops(&self) -> u64 {
        self.drop_unknown_lid
            + self.drop_crc_error
            + self.drop_malformed
            + self.drop_queue_full
            + self.drop_link_down
            + self.drop_port_inactive
            + self.drop_pkey_inbound
            + self.drop_pkey_outbound
    }
}

/// The live counters behind [`PortStats`], in order: the four every
/// forwarded packet adds to first, on its port slot's first cache line
/// (`port.rs`).
#[derive(Debug, Default)]
#[repr(C)]
pub(super) struct PortCounters {
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    rx_multicast: AtomicU64,
    tx_multicast: AtomicU64,
    drop_unknown_lid: AtomicU64,
    drop_crc_error: AtomicU64,
    drop_malformed: AtomicU64,
    drop_queue_full: AtomicU64,
    drop_link_down: AtomicU64,
    drop_port_inactive: AtomicU64,
    drop_pkey_inbound: AtomicU64,
    drop_pkey_outbound: AtomicU64,
    link_ups: AtomicU64,
    link_downs: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    // Relaxed: counters order nothing.
    c.fetch_add(n, Ordering::Relaxed);
}

impl PortCounters {
    /// Bytes, from the start, of the counters every forwarded packet adds
    /// to (packets and bytes received and sent).
    pub const HOT_LEN: usize = std::mem::offset_of!(PortCounters, rx_multicast);

    pub fn rx(&self, bytes: usize) {
        add(&self.rx_packets, 1);
        add(&self.rx_bytes, bytes as u64);
    }

    pub fn tx(&self, bytes: usize) {
        add(&self.tx_packets, 1);
        add(&self.tx_bytes, bytes as u64);
    }

    pub fn rx_multicast(&self) {
        add(&self.rx_multicast, 1);
    }

    pub fn tx_multicast(&self) {
        add(&self.tx_multicast, 1);
    }

    pub fn dropped(&self, reason: DropReason) {
        add(
            match reason {
                DropReason::UnknownLid => &self.drop_unknown_lid,
                DropReason::CrcError => &self.drop_crc_error,
                DropReason::Malformed => &self.drop_malformed,
                DropReason::QueueFull => &self.drop_queue_full,
                DropReason::LinkDown => &self.drop_link_down,
                DropReason::PortInactive => &self.drop_port_inactive,
                DropReason::PkeyInbound => &self.drop_pkey_inbound,
                DropReason::PkeyOutbound => &self.drop_pkey_outbound,
            },
            1,
        );
    }

    pub fn link_changed(&self, up: bool) {
        add(if up { &self.link_ups } else { &self.link_downs }, 1);
    }

    pub fn snapshot(&self) -> PortStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        PortStats {
            rx_packets: get(&self.rx_packets),
            rx_bytes: get(&self.rx_bytes),
            tx_packets: get(&self.tx_packets),
            tx_bytes: get(&self.tx_bytes),
            rx_multicast: get(&self.rx_multicast),
            tx_multicast: get(&self.tx_multicast),
            drop_unknown_lid: get(&self.drop_unknown_lid),
            drop_crc_error: get(&self.drop_crc_error),
            drop_malformed: get(&self.drop_malformed),
            drop_queue_full: get(&self.drop_queue_full),
            drop_link_down: get(&self.drop_link_down),
            drop_port_inactive: get(&self.drop_port_inactive),
            drop_pkey_inbound: get(&self.drop_pkey_inbound),
            drop_pkey_outbound: get(&self.drop_pkey_outbound),
            link_ups: get(&self.link_ups),
            link_downs: get(&self.link_downs),
        }
    }
}
