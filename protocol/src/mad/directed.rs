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
//! LID-routed parts (§14.2.2.1): with DrSLID not permissive the requester
//! sends the SMP LID-routed (hop pointer 0) to the switch where the
//! directed part starts, which moves the hop pointer to 1 and sends it on
//! through `initial_path[1]` (C14-9:1 at that switch); on the way back
//! that switch receives it at hop pointer 1 and sends it LID-routed to
//! DrSLID with the hop pointer at 0 (C14-13:3), where the requester takes
//! it (C14-13:4). With DrDLID not permissive the switch at the end of the
//! directed part sends the SMP LID-routed to DrDLID with the hop pointer
//! at n + 1 (C14-9:3), where the responder takes it (C14-9:4); the answer
//! goes LID-routed back to the request's source, that switch (C14-13:1
//! there), and on along the return path.

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
    /// Send it LID-routed to this LID (from this node's LID): a switch at
    /// the end of the directed part (DrDLID), or back at its start
    /// (DrSLID); the hop pointer is already moved.
    ForwardByLid(u16),
    /// A responder's answer to a request that reached it LID-routed: send
    /// it LID-routed back to the request's LRH source LID.
    BackToSource,
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
    /// A LID-routed part that ends at a channel adapter in the middle of
    /// the route (only a switch joins the two kinds of part).
    LidRoutedPart,
}

fn check(smp: &Smp) -> Result<(), DrDiscard> {
    if smp.route != SmpRoute::Directed {
        return Err(DrDiscard::NotDirected);
    }
    if smp.hop_cnt > MAX_HOPS {
        return Err(DrDiscard::BadHopPointer);
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
    if smp.dr_slid != PERMISSIVE_LID {
        return Err(DrDiscard::LidRoutedPart);
    }
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
    let lid_first = smp.dr_slid != PERMISSIVE_LID;
    let lid_last = smp.dr_dlid != PERMISSIVE_LID;
    if !smp.direction {
        if ptr == 0 {
            // C14-9:1 at the switch where a LID-routed first part ends.
            if !(lid_first && is_switch && cnt >= 1) {
                return DrStep::Discard(DrDiscard::BadHopPointer);
            }
            smp.hop_ptr = 1;
            return out_port(smp.initial_path[1], ports);
        }
        if ptr > cnt {
            // C14-9:4: the end of a LID-routed last part.
            return if ptr == cnt + 1 && lid_last {
                DrStep::Deliver
            } else {
                DrStep::Discard(DrDiscard::BadHopPointer)
            };
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
        // C14-9:3: the end of the directed part.
        smp.hop_ptr = ptr + 1;
        return match (lid_last, is_switch) {
            (false, _) => DrStep::Deliver,
            (true, true) => DrStep::ForwardByLid(smp.dr_dlid),
            (true, false) => DrStep::Discard(DrDiscard::LidRoutedPart),
        };
    }
    match ptr {
        // C14-13:1 at the switch where a LID-routed last part began.
        p if p == cnt + 1 && lid_last && is_switch && cnt >= 1 => {
            smp.hop_ptr = cnt;
            out_port(smp.return_path[usize::from(cnt)], ports)
        }
        // C14-13:4: back at a requester that sent it LID-routed.
        0 if lid_first && !is_switch => DrStep::Deliver,
        // C14-13:3: back at the requester's end of the directed part.
        1 if !lid_first && !is_switch && cnt >= 1 => DrStep::Deliver,
        1 if lid_first && is_switch && cnt >= 1 => {
            smp.hop_ptr = 0;
            DrStep::ForwardByLid(smp.dr_slid)
        }
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
/// the port the request came in by, or LID-routed to where it came from if
/// it reached the responder LID-routed.
pub fn respond(smp: &mut Smp, ports: u8) -> DrStep {
    if let Err(why) = check(smp) {
        return DrStep::Discard(why);
    }
    if !smp.direction || smp.hop_cnt == 0 || smp.hop_ptr != smp.hop_cnt + 1 {
        return DrStep::Discard(DrDiscard::BadHopPointer);
    }
    if smp.dr_dlid != PERMISSIVE_LID {
        // It came LID-routed: back the same way, to the switch that sent
        // it (C14-13:1 happens there).
        return DrStep::BackToSource;
    }
    smp.hop_ptr = smp.hop_cnt;
    let port = smp.return_path.get(usize::from(smp.hop_cnt)).copied();
    out_port(port.unwrap_or(0), ports)
}
