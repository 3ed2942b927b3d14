//! Directed-route SMPs hop by hop (IBA vol 1 §14.2.2, C14-9 on the way
//! out, C14-13 on the way back): what a node does with a DR SMP it
//! receives, and where a responder sends its answer.
//!
//! Hop `k` of an `n`-hop route is the `k`-th node after the requester
//! (node 0). On the way out the requester sends with the hop pointer at 1
//! ([`begin`]); node `k` receives it at `k`, records its input port in
//! `return_path[k]` and, if `k < n` (only a switch may be in the middle),
//! sends it on through `initial_path[k + 1]`. Node `n` takes the SMP with
//! the hop pointer at `n + 1` ([`DrStep::Deliver`]); its answer (D bit set)
//! goes back through `return_path[n]`, each node `k` passing it on through
//! `return_path[k - 1]`, until the requester receives it at 1.
//!
//! Only the fully directed form is routed (DrSLID and DrDLID both the
//! permissive LID); SMPs with a LID-routed part are discarded here
//! ([`DrDiscard::LidRoutedPart`]).

use super::smp::{Smp, SmpRoute, MAX_HOPS, PERMISSIVE_LID};

/// What a node does with a DR SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrStep {
    /// Handle it here: a request for this node's SMA, or a response that
    /// reached its requester.
    Deliver,
    /// Send it out of this port (a switch in the middle of the path, or a
    /// responder sending its answer); the hop pointer is already moved.
    Forward(u8),
    /// Drop it.
    Discard(DrDiscard),
}

/// Why a DR SMP is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DrDiscard {
    /// Not a directed-route SMP.
    NotDirected,
    /// Hop count above 63, or a hop pointer no rule covers.
    BadHopPointer,
    /// A channel adapter in the middle of a path (only switches forward).
    NotASwitch,
    /// A path names port 0 or a port the node does not have.
    BadPort,
    /// DrSLID or DrDLID is not permissive (LID-routed parts are not
    /// supported).
    LidRoutedPart,
}

fn check(smp: &Smp) -> Result<(), DrDiscard> {
    if smp.route != SmpRoute::Directed {
        return Err(DrDiscard::NotDirected);
    }
    if smp.hop_cnt > MAX_HOPS {
        return Err(DrDiscard::BadHopPointer);
    }
    if smp.dr_slid != PERMISSIVE_LID || smp.dr_dlid != PERMISSIVE_LID {
        return Err(DrDiscard::LidRoutedPart);
    }
    Ok(())
}

fn out_port(port: u8, ports: u8) -> DrStep {
    if port == 0 || port > ports {
        DrStep::Discard(DrDiscard::BadPort)
    } else {
        DrStep::Forward(port)
    }
}

/// The requester sends a new DR request (C14-9:1): the hop pointer goes
/// from 0 to 1; returns the port it must leave by (`initial_path[1]`).
pub fn begin(smp: &mut Smp) -> Result<u8, DrDiscard> {
    check(smp)?;
    if smp.direction || smp.hop_ptr != 0 || smp.hop_cnt == 0 {
        return Err(DrDiscard::BadHopPointer);
    }
    smp.hop_ptr = 1;
    Ok(smp.initial_path[1])
}

/// A node with `ports` ports (`is_switch`: a switch) received `smp` on
/// `in_port`: records the return path and moves the hop pointer as IBA
/// says, and says what to do with it.
pub fn on_receive(smp: &mut Smp, is_switch: bool, in_port: u8, ports: u8) -> DrStep {
    if let Err(why) = check(smp) {
        return DrStep::Discard(why);
    }
    let (ptr, cnt) = (smp.hop_ptr, smp.hop_cnt);
    if !smp.direction {
        if ptr == 0 || ptr > cnt {
            // C14-9:1 is the requester's; C14-9:4 needs a LID-routed part.
            return DrStep::Discard(DrDiscard::BadHopPointer);
        }
        if let Some(slot) = smp.return_path.get_mut(usize::from(ptr)) {
            *slot = in_port;
        }
        if ptr < cnt {
            // C14-9:2: the middle of the path.
            if !is_switch {
                return DrStep::Discard(DrDiscard::NotASwitch);
            }
            smp.hop_ptr = ptr + 1;
            let port = smp.initial_path.get(usize::from(ptr) + 1).copied();
            return out_port(port.unwrap_or(0), ports);
        }
        // C14-9:3: the end of the path (DrDLID permissive): this node.
        smp.hop_ptr = ptr + 1;
        return DrStep::Deliver;
    }
    match ptr {
        // C14-13:3: back at the requester's end.
        1 if !is_switch && cnt >= 1 => DrStep::Deliver,
        // C14-13:2: the middle of the way back.
        p if (2..=cnt).contains(&p) => {
            if !is_switch {
                return DrStep::Discard(DrDiscard::NotASwitch);
            }
            smp.hop_ptr = p - 1;
            let port = smp.return_path.get(usize::from(p) - 1).copied();
            out_port(port.unwrap_or(0), ports)
        }
        _ => DrStep::Discard(DrDiscard::BadHopPointer),
    }
}

/// A responder turned a request it received into `smp`, its response (D
/// bit set, [`Smp::make_response`]): the first step back (C14-13:1), out of
/// the port the request came in by.
pub fn respond(smp: &mut Smp, ports: u8) -> DrStep {
    if let Err(why) = check(smp) {
        return DrStep::Discard(why);
    }
    if !smp.direction || smp.hop_cnt == 0 || smp.hop_ptr != smp.hop_cnt + 1 {
        return DrStep::Discard(DrDiscard::BadHopPointer);
    }
    smp.hop_ptr = smp.hop_cnt;
    let port = smp.return_path.get(usize::from(smp.hop_cnt)).copied();
    out_port(port.unwrap_or(0), ports)
}
