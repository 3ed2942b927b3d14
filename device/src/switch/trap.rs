//! Trap 128 from the switch to the SM (IBA vol 1 §14.2.5.1, §14.3.11):
//! when a port's link state changes (link up: Down → Init, or Active
//! without an SM; link down: → Down; SwitchInfo's PortStateChange is set
//! then), port 0 sends a LID-routed SubnTrap of a Notice (generic, urgent,
//! producer switch, trap 128, issuer and DataDetails the switch's LID) on
//! VL15 to the SM's LID, PortInfo MasterSMLID of port 0 — only once the SM
//! has set it and the switch's own LID.
//!
//! The trap is sent again every SubnetTimeOut of port 0 (4.096 µs ×
//! 2^SubnetTimeOut, at least 50 ms and at most 8 s; ~1 s at OpenSM's
//! default 18) until the SM answers with a SubnTrapRepress of its TID, at
//! most [`MAX_SENDS`] times; then it is given up (counted). Changes while
//! a trap is outstanding ride on it: trap 128 only says "look at this
//! switch". A TrapRepress for another TID is ignored and counted.
//!
//! One thread per switch (`ibtca-sw-trap`) sends and repeats; the link
//! event that sets PortStateChange only records the trap and wakes it.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ibtca_protocol::mad::attr::Notice;
use ibtca_protocol::mad::Smp;

use super::Core;

/// Sends of one trap (the first and its repeats) before it is given up.
pub const MAX_SENDS: u32 = 8;
/// Shortest and longest repeat interval.
const MIN_INTERVAL: Duration = Duration::from_millis(50);
const MAX_INTERVAL: Duration = Duration::from_secs(8);
/// High bits of the switch's trap TIDs (the low bits count).
const TID_BASE: u64 = 0x7ca0_7a00_0000_0000;

/// Where a trap goes, as port 0's PortInfo says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrapTarget {
    /// The switch's LID (port 0's).
    pub own_lid: u16,
    /// The SM's LID (port 0's MasterSMLID).
    pub sm_lid: u16,
    /// Port 0's SubnetTimeOut (5 bits).
    pub subnet_timeout: u8,
}

impl TrapTarget {
    /// The repeat interval: 4.096 µs × 2^SubnetTimeOut, clamped.
    pub fn interval(&self) -> Duration {
        let t = u32::from(self.subnet_timeout.min(31));
        Duration::from_nanos(4096u64 << t).clamp(MIN_INTERVAL, MAX_INTERVAL)
    }
}

/// The switch's trap counters.
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
    /// Link state changes with no trap: the SM's or the switch's LID not
    /// yet known.
    pub no_sm: u64,
    /// Sends with no route to the SM's LID (the trap is repeated anyway).
    pub unrouted: u64,
}

/// The trap waiting for its TrapRepress.
#[derive(Debug)]
struct Outstanding {
    tid: u64,
    notice: Notice,
    target: TrapTarget,
    sends: u32,
    due: Instant,
}

#[derive(Debug, Default)]
struct State {
    outstanding: Option<Outstanding>,
    next_tid: u64,
    counts: TrapCounts,
    stopped: bool,
}

/// The switch's traps: the outstanding one and the counters.
#[derive(Debug, Default)]
pub(super) struct Traps {
    state: Mutex<State>,
    wake: Condvar,
}

impl Traps {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A port's link state changed; `target` is where trap 128 goes, if
    /// the SM and the switch's LID are known.
    pub fn port_state_changed(&self, target: Option<TrapTarget>) {
        let mut s = self.state();
        let Some(target) = target else {
            s.counts.no_sm += 1;
            return;
        };
        if s.outstanding.is_some() {
            return;
        }
        s.next_tid += 1;
        let tid = TID_BASE | s.next_tid;
        s.outstanding = Some(Outstanding {
            tid,
            notice: Notice::link_state_change(target.own_lid),
            target,
            sends: 0,
            due: Instant::now(),
        });
        drop(s);
        self.wake.notify_all();
    }

    /// A TrapRepress for `tid` came: the outstanding trap of that TID is
    /// done. Returns true if it named one.
    pub fn repressed(&self, tid: u64) -> bool {
        let mut s = self.state();
        if s.outstanding.as_ref().is_some_and(|o| o.tid == tid) {
            s.outstanding = None;
            s.counts.repressed += 1;
            true
        } else {
            s.counts.stray_represses += 1;
            false
        }
    }

    /// The counters.
    pub fn counts(&self) -> TrapCounts {
        self.state().counts
    }

    /// Ends [`Self::next_due`]'s waiting for good.
    pub fn stop(&self) {
        self.state().stopped = true;
        self.wake.notify_all();
    }

    /// Waits until a trap is due; returns the SubnTrap to send and the
    /// target, or `None` once stopped. Counts the send; gives a trap up
    /// when its last send's interval passed unanswered.
    fn next_due(&self) -> Option<(Smp, TrapTarget)> {
        let mut s = self.state();
        loop {
            if s.stopped {
                return None;
            }
            let now = Instant::now();
            let wait = match s.outstanding.as_mut() {
                None => None,
                Some(o) if o.due <= now && o.sends >= MAX_SENDS => {
                    let (tid, sm) = (o.tid, o.target.sm_lid);
                    s.outstanding = None;
                    s.counts.unanswered += 1;
                    tracing::warn!(
                        tid = format_args!("{tid:#x}"),
                        sm_lid = sm,
                        sends = MAX_SENDS,
                        "trap 128 never repressed; given up"
                    );
                    continue;
                }
                Some(o) if o.due <= now => {
                    o.sends += 1;
                    o.due = now + o.target.interval();
                    let out = (o.notice.trap_smp(o.tid), o.target);
                    s.counts.sent += 1;
                    return Some(out);
                }
                Some(o) => Some(o.due - now),
            };
            s = match wait {
                None => self.wake.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    self.wake
                        .wait_timeout(s, d)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
            };
        }
    }
}

impl Core {
    /// The trap thread: sends each trap when due, LID-routed from the
    /// switch's LID through its forwarding table.
    pub(super) fn run_traps(&self) {
        while let Some((smp, target)) = self.traps.next_due() {
            let sent = self
                .smp_by_lid(&smp, target.sm_lid)
                .and_then(|(port, packet)| Some((port, self.slot(port)?, packet)))
                // Tag 0 names no input buffer: nothing to free.
                .is_some_and(|(port, slot, packet)| self.send(port, slot, packet, 0));
            if !sent {
                self.traps.state().counts.unrouted += 1;
            }
            tracing::info!(
                switch = %self.name,
                tid = format_args!("{:#x}", smp.tid),
                sm_lid = target.sm_lid,
                sent,
                "trap 128 (link state change) to the SM"
            );
        }
    }

    /// A TrapRepress reached the switch: the trap it names is done.
    pub(super) fn trap_repress(&self, smp: &Smp) {
        let Some(tid) = Notice::repressed_tid(smp) else {
            self.traps.state().counts.stray_represses += 1;
            tracing::debug!(switch = %self.name, attr = smp.attr_id, "malformed TrapRepress ignored");
            return;
        };
        let known = self.traps.repressed(tid);
        tracing::info!(switch = %self.name, tid = format_args!("{tid:#x}"), known, "TrapRepress from the SM");
    }
}
