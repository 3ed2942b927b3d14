//! One switch port: its configuration, counters, capture and the state of
//! its link as the forwarding threads see it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::link::{FaultPlan, LinkEndpoint, LocalPort};
use crate::vl_config::VlConfig;

use super::capture::Capture;
use super::delay::DelayLine;
use super::stats::{PortCounters, PortStats};

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
#[derive(Debug)]
pub(super) struct PortSlot {
    pub config: PortConfig,
    pub counters: PortCounters,
    pub capture: Option<Capture>,
    pub delay: DelayLine,
    up: AtomicBool,
    peer: Mutex<Option<LocalPort>>,
}

impl PortSlot {
    pub fn new(config: PortConfig, capture: Option<Capture>) -> Self {
        let delay = DelayLine::default();
        delay.set_delay(config.delay);
        PortSlot {
            delay,
            config,
            counters: PortCounters::default(),
            capture,
            up: AtomicBool::new(false),
            peer: Mutex::new(None),
        }
    }

    pub fn set_up(&self, peer: Option<LocalPort>) {
        self.up.store(peer.is_some(), Ordering::Relaxed);
        if peer.is_some() {
            *self.peer.lock().unwrap_or_else(|e| e.into_inner()) = peer;
        }
        self.counters.link_changed(peer.is_some());
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    pub fn peer(&self) -> Option<LocalPort> {
        *self.peer.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> PortStats {
        self.counters.snapshot()
    }
}
