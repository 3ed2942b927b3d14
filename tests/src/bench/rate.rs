//! What one throughput run measured ([`Rate`]) and the link counters over
//! it ([`LinkDelta`]).

use super::*;

/// Link counters of A and B so far.
pub(super) fn link_stats(servers: &(TestServer, TestServer)) -> (LinkStats, LinkStats) {
    let s = |t: &TestServer| t.link.as_ref().map(|l| l.stats()).unwrap_or_default();
    (s(&servers.0), s(&servers.1))
}

/// What one throughput run measured, plus the link counters for the report.
pub(super) struct Rate {
    pub(super) msgs: u64,
    pub(super) bytes: u64,
    pub(super) secs: f64,
    pub(super) link: Option<LinkDelta>,
    pub(super) cpu: Option<CpuSplit>,
}

impl Rate {
    pub(super) fn msg_per_s(&self) -> f64 {
        self.msgs as f64 / self.secs
    }
    pub(super) fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / self.secs / (1 << 20) as f64
    }
}

/// Link counters over one run, both directions.
pub(super) struct LinkDelta {
    pub(super) a: LinkStats,
    pub(super) b: LinkStats,
}

pub(super) fn delta(before: &LinkStats, after: &LinkStats) -> LinkStats {
    LinkStats {
        tx_packets: after.tx_packets - before.tx_packets,
        tx_bytes: after.tx_bytes - before.tx_bytes,
        tx_writes: after.tx_writes - before.tx_writes,
        tx_built_in_place: after.tx_built_in_place - before.tx_built_in_place,
        rx_packets: after.rx_packets - before.rx_packets,
        rx_bytes: after.rx_bytes - before.rx_bytes,
        tx_dropped_down: after.tx_dropped_down - before.tx_dropped_down,
        tx_dropped_full: after.tx_dropped_full - before.tx_dropped_full,
        credit_stalls: after.credit_stalls - before.credit_stalls,
        credit_frames_tx: after.credit_frames_tx - before.credit_frames_tx,
        tx_rings: after.tx_rings,
        ring_wakes_tx: after.ring_wakes_tx - before.ring_wakes_tx,
        ring_sleeps_rx: after.ring_sleeps_rx - before.ring_sleeps_rx,
        ..LinkStats::default()
    }
}

impl LinkDelta {
    /// Both ends' counters between two [`link_stats`] reads.
    pub(super) fn between(from: &(LinkStats, LinkStats), to: &(LinkStats, LinkStats)) -> Self {
        LinkDelta {
            a: delta(&from.0, &to.0),
            b: delta(&from.1, &to.1),
        }
    }

    /// The shared rings' wake-ups per `unit` (`units` of them): in each
    /// direction, the eventfd writes of the sending end to a reader that
    /// said it sleeps, and the receiving reader's sleeps.
    pub(super) fn ring_note(&self, units: f64, unit: &str) -> String {
        let per = |n: u64| n as f64 / units.max(1.0);
        format!(
            "ring wake-ups per {unit}: A→B {:.4} (B's reader went to sleep {:.4}), \
             B→A {:.4} (A's reader went to sleep {:.4})",
            per(self.a.ring_wakes_tx),
            per(self.b.ring_sleeps_rx),
            per(self.b.ring_wakes_tx),
            per(self.a.ring_sleeps_rx),
        )
    }
}

impl std::fmt::Display for LinkDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, s) in [("A→B", &self.a), ("B→A", &self.b)] {
            write!(
                f,
                "  {name} ({}): {} packets, {} built in place, the rest in {} writes ({:.1}/write), {} dropped (queue full), {} credit frames, {} credit stalls",
                if s.tx_rings > 0 { "shared ring" } else { "socket" },
                s.tx_packets,
                s.tx_built_in_place,
                s.tx_writes,
                (s.tx_packets - s.tx_built_in_place) as f64 / s.tx_writes.max(1) as f64,
                s.tx_dropped_full,
                s.credit_frames_tx,
                s.credit_stalls,
            )?;
            if name == "A→B" {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}
