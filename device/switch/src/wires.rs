//! What the forwarding core needs of its ports' wires, so that the same
//! core runs with a thread per link ([`Switch`](super::Switch): each port
//! an [`ibtca_link::Link`]) or inside an event loop that carries every
//! port itself (`ibtca-hive`, [`HostedSwitch`](super::HostedSwitch)).

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use ibtca_link::{HighPriority, Link, LinkError, LinkStats};

/// The ports' wires as the forwarding core uses them (ports count from 1).
pub trait Wires: Send + Sync {
    /// Queues `packet` on `port`; `tag` names the input buffer it holds,
    /// freed through the core's `credit_done` once it left (or at once by
    /// an owner that frees input buffers itself).
    fn send_tagged(&self, port: u8, packet: Vec<u8>, tag: u64) -> Result<(), LinkError>;
    /// The number of `port`'s current connection (0 while it has none).
    fn generation(&self, port: u8) -> u64;
    /// Frees one receive buffer of `vl` on `port`, if the port is still on
    /// connection `generation` (when given; low 48 bits).
    fn return_credit(&self, port: u8, vl: u8, generation: Option<u64>);
    /// `port`'s link counters, while it has a link.
    fn link_stats(&self, port: u8) -> Option<LinkStats>;
    /// `port`'s low-priority VL arbitration table changed.
    fn set_low_priority(&self, port: u8, table: &[(u8, u8)]);
    /// `port`'s high-priority VL arbitration table changed.
    fn set_high_priority(&self, port: u8, table: &HighPriority);
    /// True if what is sent on `port` stays in this process, for a node
    /// that takes it as built here (`Origin::Process`) and reads none of
    /// its CRCs: the core then leaves the CRCs of a packet it changed for
    /// that port as they were, and those of an SMP it builds for that port
    /// zero (`encoded::smp_packet`). False (the default) for a wire: every
    /// packet leaves with its CRCs stamped.
    fn in_process(&self, _port: u8) -> bool {
        false
    }
    /// True if a packet for `port` may be handed to the owner as the
    /// result of a call rather than through [`Wires::send_tagged`]: the
    /// port's link is up now and its wires keep no credits (they free an
    /// input buffer as soon as a packet is handed on), so
    /// [`HostedSwitch::pass_directed`](super::HostedSwitch::pass_directed)
    /// may pass a directed SMP on through it. False (the default): every
    /// packet is sent.
    fn passes_at_once(&self, _port: u8) -> bool {
        false
    }
}

/// A [`Link`] (with its threads) per port; `None` while a port is down.
#[derive(Default)]
pub(super) struct LinkWires {
    links: RwLock<Vec<Option<Link>>>,
}

impl LinkWires {
    pub fn new(ports: usize) -> Self {
        LinkWires {
            links: RwLock::new((0..ports).map(|_| None).collect()),
        }
    }

    pub fn links(&self) -> RwLockReadGuard<'_, Vec<Option<Link>>> {
        self.links.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn links_mut(&self) -> RwLockWriteGuard<'_, Vec<Option<Link>>> {
        self.links.write().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(&self, port: u8, f: impl FnOnce(&Link) -> T) -> Option<T> {
        let links = self.links();
        let link = links.get(usize::from(port).checked_sub(1)?)?.as_ref()?;
        Some(f(link))
    }
}

impl Wires for LinkWires {
    fn send_tagged(&self, port: u8, packet: Vec<u8>, tag: u64) -> Result<(), LinkError> {
        self.with(port, |link| link.send_tagged(packet, tag))
            .unwrap_or(Err(LinkError::Down))
    }

    fn generation(&self, port: u8) -> u64 {
        self.with(port, Link::generation).unwrap_or(0)
    }

    fn return_credit(&self, port: u8, vl: u8, generation: Option<u64>) {
        self.with(port, |link| {
            let current = link.generation() & 0xffff_ffff_ffff;
            if generation.is_none_or(|g| g == current) {
                link.return_credits(vl, 1);
            }
        });
    }

    fn link_stats(&self, port: u8) -> Option<LinkStats> {
        self.with(port, Link::stats)
    }

    fn set_low_priority(&self, port: u8, table: &[(u8, u8)]) {
        self.with(port, |link| link.set_low_priority(table));
    }

    fn set_high_priority(&self, port: u8, table: &HighPriority) {
        self.with(port, |link| link.set_high_priority(table));
    }
}
