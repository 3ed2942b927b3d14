//! One switch port: its configuration, counters, capture and the state of
//! its link as the forwarding threads see it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use ibtca_agents::sma::{pkey_held, PKEY_CAP};
use ibtca_agents::vl_config::{VlConfig, SLS};
use ibtca_link::{weight_table, FaultPlan, HighPriority, LinkEndpoint, LocalPort};

use super::delay::DelayLine;
use super::stats::{PortCounters, PortStats};
use ibtca_agents::capture::Capture;

/// How to run one port.
#[derive(Debug, Clone)]
pub struct PortConfig {
    /// Where the port's link listens or connects.
    pub endpoint: LinkEndpoint,
    /// Faults injected on what the port sends.
    pub faults: FaultPlan,
    /// A pcap (ERF) file recording what the port receives and sends.
    pub capture: Option<PathBuf>,
    /// How long each packet waits before the port sends it.
    pub delay: Duration,
    /// SL → VL of what the port sends (identity by default; SL15 is
    /// always VL15) and the weights of its data VLs.
    pub vl: VlConfig,
}

impl PortConfig {
    /// A port with no faults and no capture.
    pub fn new(endpoint: LinkEndpoint) -> Self {
        PortConfig {
            endpoint,
            faults: FaultPlan::default(),
            capture: None,
            delay: Duration::ZERO,
            vl: VlConfig::default(),
        }
    }
}

/// What a port knows besides its link.
///
/// Laid out in order, starting on a cache line: what forwarding a packet
/// in or out by the port reads and counts (gate, capture, delay, traffic
/// counters) comes first and fits in that line, so a hop touches one line
/// of each port it uses; the rest is read when the SM or a command asks.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct PortSlot {
    /// The port may carry data: always without an SM; with one
    /// (`--sm-managed`), only while the SM has it Active (the agent keeps
    /// this current).
    active: AtomicBool,
    up: AtomicBool,
    pub capture: Option<Capture>,
    /// How long a packet waits before the port sends it, in µs (0: it
    /// leaves at once, never through `delay_line`).
    delay_us: AtomicU64,
    /// Traffic counters first (`stats.rs`).
    pub counters: PortCounters,
    pub delay_line: DelayLine,
    pub config: PortConfig,
    peer: Mutex<Option<LocalPort>>,
    /// SL → VL of what the port sends: the configuration's, until the SM
    /// sets one (SLtoVLMappingTable).
    sl2vl: [AtomicU8; SLS],
    /// Low-priority VL arbitration table: the configuration's weights,
    /// until the SM sets a VLArbitrationTable.
    low_priority: Mutex<Vec<(u8, u8)>>,
    /// High-priority VL arbitration table and VLHighLimit: none until the
    /// SM sets them.
    high_priority: Mutex<HighPriority>,
    /// Partition enforcement the SM turned on (PortInfo bits:
    /// [`ENFORCE_INBOUND`], [`ENFORCE_OUTBOUND`]); 0: none.
    enforcement: AtomicU8,
    /// The port's P_Key table, read only while enforcing.
    pkeys: Mutex<[u16; PKEY_CAP]>,
}

// What forwarding a packet touches fits in the slot's first cache line.
const _: () = assert!(
    std::mem::align_of::<PortSlot>() == 64
        && std::mem::offset_of!(PortSlot, active) < 64
        && std::mem::offset_of!(PortSlot, up) < 64
        && std::mem::offset_of!(PortSlot, capture) + std::mem::size_of::<Option<Capture>>() <= 64
        && std::mem::offset_of!(PortSlot, delay_us) + 8 <= 64
        && std::mem::offset_of!(PortSlot, counters) + PortCounters::HOT_LEN <= 64
);

/// PortInfo PartitionEnforcementInbound.
pub const ENFORCE_INBOUND: u8 = 1 << 3;
/// PortInfo PartitionEnforcementOutbound.
pub const ENFORCE_OUTBOUND: u8 = 1 << 2;

impl PortSlot {
    pub fn new(config: PortConfig, capture: Option<Capture>) -> Self {
        let slot = PortSlot {
            delay_us: AtomicU64::new(0),
            delay_line: DelayLine::default(),
            sl2vl: std::array::from_fn(|sl| AtomicU8::new(config.vl.vl(sl as u8))),
            low_priority: Mutex::new(weight_table(&config.vl.link_weights())),
            high_priority: Mutex::new(HighPriority::default()),
            config,
            counters: PortCounters::default(),
            capture,
            up: AtomicBool::new(false),
            active: AtomicBool::new(true),
            peer: Mutex::new(None),
            enforcement: AtomicU8::new(0),
            pkeys: Mutex::new([0; PKEY_CAP]),
        };
        slot.set_delay(slot.config.delay);
        slot
    }

    /// How long a packet waits before the port sends it.
    pub fn delay(&self) -> Duration {
        Duration::from_micros(self.delay_us.load(Ordering::Relaxed))
    }

    /// Sets the delay for packets forwarded from now on.
    pub fn set_delay(&self, delay: Duration) {
        let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.delay_us.store(us, Ordering::Relaxed);
    }

    /// Records the peer whose `Hello` came (kept after the link goes down).
    pub fn set_peer(&self, peer: LocalPort) {
        *self.peer.lock().unwrap_or_else(|e| e.into_inner()) = Some(peer);
    }

    /// Marks the link up or down and counts the change; the flag is
    /// stored last, so whoever sees it sees the count.
    pub fn set_up(&self, up: bool) {
        self.counters.link_changed(up);
        self.up.store(up, Ordering::Release);
    }

    /// True if the port may carry data packets.
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Sets whether the port may carry data packets.
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::Relaxed);
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    pub fn peer(&self) -> Option<LocalPort> {
        *self.peer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The VL a packet on `sl` leaves by (SL15: VL15).
    pub fn vl(&self, sl: u8) -> u8 {
        self.sl2vl
            .get(usize::from(sl))
            .map_or(15, |v| v.load(Ordering::Relaxed))
    }

    /// The SL → VL table.
    pub fn sl2vl(&self) -> [u8; SLS] {
        std::array::from_fn(|sl| self.vl(sl as u8))
    }

    /// Replaces the SL → VL table (the SM's; SL15 stays on VL15).
    pub fn set_sl2vl(&self, table: [u8; SLS]) {
        for (sl, (slot, vl)) in self.sl2vl.iter().zip(table).enumerate() {
            slot.store(if sl == SLS - 1 { 15 } else { vl }, Ordering::Relaxed);
        }
    }

    /// The low-priority table the port's link arbitrates by.
    pub fn low_priority(&self) -> Vec<(u8, u8)> {
        self.low_priority
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces it (the link is told by the caller).
    pub fn set_low_priority(&self, entries: Vec<(u8, u8)>) {
        *self.low_priority.lock().unwrap_or_else(|e| e.into_inner()) = entries;
    }

    /// The high-priority arbitration table the port's link arbitrates by.
    pub fn high_priority(&self) -> HighPriority {
        self.high_priority
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces its VLHighLimit, keeping its entries (the link is told by
    /// the caller): the table as it is now.
    pub fn set_high_limit(&self, limit: u8) -> HighPriority {
        let mut table = self.high_priority.lock().unwrap_or_else(|e| e.into_inner());
        table.limit = limit;
        table.clone()
    }

    /// Replaces it (the link is told by the caller).
    pub fn set_high_priority(&self, table: HighPriority) {
        *self.high_priority.lock().unwrap_or_else(|e| e.into_inner()) = table;
    }

    /// Takes the SM's P_Key table and enforcement bits for the port.
    pub fn set_partition(&self, enforcement: u8, pkeys: &[u16; PKEY_CAP]) {
        *self.pkeys.lock().unwrap_or_else(|e| e.into_inner()) = *pkeys;
        self.enforcement.store(
            enforcement & (ENFORCE_INBOUND | ENFORCE_OUTBOUND),
            Ordering::Relaxed,
        );
    }

    /// False if the port enforces partitions in `direction`
    /// ([`ENFORCE_INBOUND`] or [`ENFORCE_OUTBOUND`]) and its table does
    /// not hold `pkey`.
    pub fn admits(&self, pkey: u16, direction: u8) -> bool {
        if self.enforcement.load(Ordering::Relaxed) & direction == 0 {
            return true;
        }
        pkey_held(&*self.pkeys.lock().unwrap_or_else(|e| e.into_inner()), pkey)
    }

    pub fn stats(&self) -> PortStats {
        self.counters.snapshot()
    }
}
