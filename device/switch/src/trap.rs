//! Trap 128 from the switch to the SM (IBA vol 1 §14.2.5.1): when a
//! port's link state changes (link up: Down → Init, or Active without an
//! SM; link down: → Down; SwitchInfo's PortStateChange is set then), port
//! 0 sends a SubnTrap of a Notice (generic, urgent, producer switch, trap
//! 128, issuer and DataDetails the switch's LID) on VL15 to the SM's LID,
//! port 0's MasterSMLID, through the forwarding table; repeated until the
//! SM's TrapRepress as `sma::TrapRepeats` says.
//!
//! A switch process has one thread (`ibtca-sw-trap`) that sends and
//! repeats; the link event that sets PortStateChange only raises the trap
//! and wakes it. A hosted switch has no thread: its owner asks when the
//! next trap is due and sends it then ([`Core::send_due_traps`]).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use ibtca_protocol::mad::attr::Notice;
use ibtca_protocol::mad::Smp;

use super::Core;
use ibtca_agents::sma::{TrapCounts, TrapRepeats, TrapTarget};

/// High bits of the switch's trap TIDs (the low bits count).
const TID_BASE: u64 = 0x7ca0_7a00_0000_0000;

#[derive(Debug)]
struct State {
    repeats: TrapRepeats,
    stopped: bool,
}

/// The switch's traps, shared by the link events and the trap thread.
#[derive(Debug)]
pub(super) struct Traps {
    state: Mutex<State>,
    wake: Condvar,
}

impl Default for Traps {
    fn default() -> Self {
        Traps {
            state: Mutex::new(State {
                repeats: TrapRepeats::new(TID_BASE),
                stopped: false,
            }),
            wake: Condvar::new(),
        }
    }
}

impl Traps {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A port's link state changed; `target` is where trap 128 goes, if
    /// the SM and the switch's LID are known.
    pub fn port_state_changed(&self, target: Option<TrapTarget>) {
        let raised = self.state().repeats.raise(
            target,
            |t| Notice::link_state_change(t.own_lid),
            Instant::now(),
        );
        if raised {
            self.wake.notify_all();
        }
    }

    /// The counters.
    pub fn counts(&self) -> TrapCounts {
        self.state().repeats.counts()
    }

    /// Ends [`Self::next_due`]'s waiting for good.
    pub fn stop(&self) {
        self.state().stopped = true;
        self.wake.notify_all();
    }

    /// When the outstanding trap is next due.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.state().repeats.next_deadline()
    }

    /// The trap due at `now`, if one is (counted as sent).
    fn take_due(&self, now: Instant) -> Option<(Smp, TrapTarget)> {
        self.state().repeats.due(now)
    }

    /// Waits until a trap is due; returns the SubnTrap to send and where,
    /// or `None` once stopped.
    fn next_due(&self) -> Option<(Smp, TrapTarget)> {
        let mut s = self.state();
        loop {
            if s.stopped {
                return None;
            }
            let now = Instant::now();
            if let Some(due) = s.repeats.due(now) {
                return Some(due);
            }
            s = match s.repeats.next_deadline() {
                None => self.wake.wait(s).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let wait = d.saturating_duration_since(now);
                    self.wake
                        .wait_timeout(s, wait)
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
            self.send_trap(&smp, target);
        }
    }

    /// Sends every trap due at `now` (a hosted switch's owner calls this
    /// at [`Traps::next_deadline`]).
    pub(super) fn send_due_traps(&self, now: Instant) {
        while let Some((smp, target)) = self.traps.take_due(now) {
            self.send_trap(&smp, target);
        }
    }

    /// Sends one trap, LID-routed from the switch's LID through its
    /// forwarding table; counted as unrouted if no port takes it.
    fn send_trap(&self, smp: &Smp, target: TrapTarget) {
        let sent = self
            .smp_by_lid(smp, target.sm_lid)
            .and_then(|(port, packet)| Some((port, self.slot(port)?, packet)))
            // Tag 0 names no input buffer: nothing to free.
            .is_some_and(|(port, slot, packet)| self.send(port, slot, packet, 0));
        if !sent {
            self.traps.state().repeats.count_unrouted();
        }
        tracing::info!(
            switch = %self.name,
            tid = format_args!("{:#x}", smp.tid),
            sm_lid = target.sm_lid,
            sent,
            "trap 128 (link state change) to the SM"
        );
    }

    /// A TrapRepress reached the switch: the trap it names is done.
    pub(super) fn trap_repress(&self, smp: &Smp) {
        let tid = self.traps.state().repeats.repress(smp);
        match tid {
            Some(tid) => {
                tracing::info!(switch = %self.name, tid = format_args!("{tid:#x}"), "trap repressed by the SM")
            }
            None => {
                tracing::debug!(switch = %self.name, tid = format_args!("{:#x}", smp.tid), "TrapRepress for no outstanding trap ignored")
            }
        }
    }
}
