//! A node's traps to the SM (IBA vol 1 §14.2.5.1, §14.3.11): the trap
//! outstanding, its repeats and the counters, as pure state driven by the
//! caller's clock. The switch (trap 128, `switch/trap.rs`, on its own
//! thread) and the device's agent (trap 144, on the engine's timers) both
//! keep one.
//!
//! A trap goes LID-routed from the node's LID to the SM's, PortInfo
//! MasterSMLID, only once the SM has set both. It is sent again every
//! SubnetTimeOut (4.096 µs × 2^SubnetTimeOut, at least 50 ms and at most
//! 8 s; ~1 s at OpenSM's default 18) until a SubnTrapRepress with its TID
//! comes, at most [`MAX_SENDS`] times; then it is given up (counted).
//! Another change while a trap is outstanding rides on it: the SM reads
//! the node afresh. A TrapRepress of anything else is ignored (counted).

use std::time::{Duration, Instant};

use ibtca_protocol::mad::attr::Notice;
use ibtca_protocol::mad::Smp;

/// Sends of one trap (the first and its repeats) before it is given up.
pub const MAX_SENDS: u32 = 8;
/// Shortest and longest repeat interval.
const MIN_INTERVAL: Duration = Duration::from_millis(50);
const MAX_INTERVAL: Duration = Duration::from_secs(8);

/// Where a trap goes, as the sending port's PortInfo says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrapTarget {
    /// The node's LID (the SubnTrap's SLID and IssuerLID).
    pub own_lid: u16,
    /// The SM's LID (MasterSMLID).
    pub sm_lid: u16,
    /// SubnetTimeOut (5 bits).
    pub subnet_timeout: u8,
}

impl TrapTarget {
    /// The repeat interval: 4.096 µs × 2^SubnetTimeOut, clamped.
    pub fn interval(&self) -> Duration {
        let t = u32::from(self.subnet_timeout.min(31));
        Duration::from_nanos(4096u64 << t).clamp(MIN_INTERVAL, MAX_INTERVAL)
    }
}

/// A node's trap counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrapCounts {
    /// SubnTraps sent (first sends and repeats).
    pub sent: u64,
    /// Traps the SM repressed.
    pub repressed: u64,
    /// Traps given up after [`MAX_SENDS`] sends without a TrapRepress.
    pub unanswered: u64,
    /// TrapRepresses that named no outstanding trap (ignored).
    pub stray_represses: u64,
    /// Changes with no trap: the SM's or the node's LID not yet known.
    pub no_sm: u64,
    /// Sends with no route to the SM's LID (the trap is repeated anyway).
    pub unrouted: u64,
}

impl TrapCounts {
    /// The counters as JSON (`{"sent": N, "repressed": N, ...}`), as a
    /// switch's and the hive's control sockets answer them.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "sent": self.sent,
            "repressed": self.repressed,
            "unanswered": self.unanswered,
            "stray_represses": self.stray_represses,
            "no_sm": self.no_sm,
            "unrouted": self.unrouted,
        })
    }
}

/// The trap waiting for its TrapRepress.
#[derive(Debug, Clone)]
struct Outstanding {
    tid: u64,
    notice: Notice,
    target: TrapTarget,
    sends: u32,
    due: Instant,
}

/// A node's outstanding trap and counters.
#[derive(Debug, Clone)]
pub struct TrapRepeats {
    outstanding: Option<Outstanding>,
    tid_base: u64,
    next_tid: u64,
    counts: TrapCounts,
}

impl TrapRepeats {
    /// No trap yet; TIDs are `tid_base` | a count.
    pub fn new(tid_base: u64) -> Self {
        TrapRepeats {
            outstanding: None,
            tid_base,
            next_tid: 0,
            counts: TrapCounts::default(),
        }
    }

    /// Something the SM must hear of changed: a trap of `notice` (given
    /// the target) is due at `now`, unless one is outstanding already
    /// (it rides on it) or `target` is unknown (counted). True if a new
    /// trap is due.
    pub fn raise(
        &mut self,
        target: Option<TrapTarget>,
        notice: impl FnOnce(&TrapTarget) -> Notice,
        now: Instant,
    ) -> bool {
        let Some(target) = target else {
            self.counts.no_sm += 1;
            return false;
        };
        if self.outstanding.is_some() {
            return false;
        }
        self.next_tid += 1;
        self.outstanding = Some(Outstanding {
            tid: self.tid_base | self.next_tid,
            notice: notice(&target),
            target,
            sends: 0,
            due: now,
        });
        true
    }

    /// A TrapRepress came: the outstanding trap of its TID is done. A
    /// TrapRepress that is malformed or names another TID is counted and
    /// ignored. Returns the TID repressed.
    pub fn repress(&mut self, smp: &Smp) -> Option<u64> {
        let tid = Notice::repressed_tid(smp)
            .filter(|tid| self.outstanding.as_ref().is_some_and(|o| o.tid == *tid));
        match tid {
            Some(_) => {
                self.outstanding = None;
                self.counts.repressed += 1;
            }
            None => self.counts.stray_represses += 1,
        }
        tid
    }

    /// The SubnTrap due at `now` and where it goes (counted as sent; the
    /// next send is an interval later), if one is. A trap whose last send
    /// went unanswered for an interval is given up.
    pub fn due(&mut self, now: Instant) -> Option<(Smp, TrapTarget)> {
        let o = self.outstanding.as_mut().filter(|o| o.due <= now)?;
        if o.sends >= MAX_SENDS {
            tracing::warn!(
                tid = format_args!("{:#x}", o.tid),
                trap = o.notice.trap_number,
                sm_lid = o.target.sm_lid,
                sends = MAX_SENDS,
                "trap never repressed; given up"
            );
            self.outstanding = None;
            self.counts.unanswered += 1;
            return None;
        }
        o.sends += 1;
        o.due = now + o.target.interval();
        self.counts.sent += 1;
        Some((o.notice.trap_smp(o.tid), o.target))
    }

    /// When the outstanding trap is next due (a send, or giving it up).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.outstanding.as_ref().map(|o| o.due)
    }

    /// A due trap found no route to the SM.
    pub fn count_unrouted(&mut self) {
        self.counts.unrouted += 1;
    }

    /// The counters.
    pub fn counts(&self) -> TrapCounts {
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibtca_protocol::mad::method;

    fn target(subnet_timeout: u8) -> Option<TrapTarget> {
        Some(TrapTarget {
            own_lid: 0x30,
            sm_lid: 1,
            subnet_timeout,
        })
    }

    fn notice(t: &TrapTarget) -> Notice {
        Notice::link_state_change(t.own_lid)
    }

    fn repress_of(smp: &Smp) -> Smp {
        let mut r = smp.clone();
        r.method = method::TRAP_REPRESS;
        r
    }

    #[test]
    fn the_interval_is_the_subnet_timeout_clamped() {
        let ms = |t| target(t).unwrap().interval().as_millis();
        assert_eq!(ms(18), 1073, "OpenSM's default: 4.096 µs × 2^18");
        assert_eq!(ms(14), 67);
        assert_eq!(ms(0), 50, "at least 50 ms");
        assert_eq!(ms(31), 8000, "at most 8 s");
        assert_eq!(ms(0xff), 8000);
    }

    #[test]
    fn a_trap_repeats_until_repressed_and_changes_ride_on_it() {
        let t0 = Instant::now();
        let mut r = TrapRepeats::new(0x7700_0000_0000_0000);
        assert!(!r.raise(None, notice, t0), "no SM: nothing");
        assert_eq!(r.counts().no_sm, 1);
        assert_eq!(r.next_deadline(), None);
        assert!(r.raise(target(14), notice, t0));
        assert!(!r.raise(target(14), notice, t0), "rides on the first");
        let (first, to) = r.due(t0).unwrap();
        assert_eq!((first.tid, to.sm_lid), (0x7700_0000_0000_0001, 1));
        assert!(r.due(t0).is_none(), "not again before the interval");
        let next = r.next_deadline().unwrap();
        assert_eq!(next - t0, to.interval());
        let (again, _) = r.due(next).unwrap();
        assert_eq!(again, first, "the same SubnTrap, the same TID");
        let mut other = repress_of(&first);
        other.tid += 1;
        assert_eq!(r.repress(&other), None);
        assert_eq!(r.repress(&first), None, "a trap is no repress");
        assert_eq!(r.repress(&repress_of(&first)), Some(first.tid));
        assert_eq!(r.next_deadline(), None);
        assert!(r.due(next + Duration::from_secs(60)).is_none());
        let c = r.counts();
        assert_eq!(
            (c.sent, c.repressed, c.stray_represses, c.unanswered),
            (2, 1, 2, 0)
        );
        // The next change is a new trap with a new TID.
        assert!(r.raise(target(14), notice, next));
        assert_eq!(r.due(next).unwrap().0.tid, first.tid + 1);
    }

    #[test]
    fn an_unanswered_trap_is_given_up_after_its_sends() {
        let mut now = Instant::now();
        let mut r = TrapRepeats::new(0);
        r.raise(target(0), notice, now);
        for _ in 0..MAX_SENDS {
            assert!(r.due(now).is_some());
            now = r.next_deadline().unwrap();
        }
        assert!(r.due(now).is_none(), "given up");
        assert_eq!(r.next_deadline(), None);
        let c = r.counts();
        assert_eq!((c.sent, c.unanswered), (u64::from(MAX_SENDS), 1));
    }
}
