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

use super::header::{class, MAD_LEN};
use super::smp::{Smp, SmpRoute, MAX_HOPS, PERMISSIVE_LID};

/// What a hop reads and writes of a directed-route SMP: a decoded
/// [`Smp`], or the MAD's bytes where they lie in a packet ([`DrBytes`]),
/// which a switch passing an SMP on changes without decoding it.
pub trait DrFields {
    /// Class 0x81.
    fn is_directed(&self) -> bool;
    /// The D bit.
    fn direction(&self) -> bool;
    /// The hop pointer.
    fn hop_ptr(&self) -> u8;
    /// Moves the hop pointer.
    fn set_hop_ptr(&mut self, ptr: u8);
    /// The hop count.
    fn hop_cnt(&self) -> u8;
    /// DrSLID.
    fn dr_slid(&self) -> u16;
    /// DrDLID.
    fn dr_dlid(&self) -> u16;
    /// `initial_path[i]` (none past its 64 bytes).
    fn initial_port(&self, i: usize) -> Option<u8>;
    /// `return_path[i]` (none past its 64 bytes).
    fn return_port(&self, i: usize) -> Option<u8>;
    /// Sets `return_path[i]` (nothing past its 64 bytes).
    fn set_return_port(&mut self, i: usize, port: u8);
}

impl DrFields for Smp {
    fn is_directed(&self) -> bool {
        self.route == SmpRoute::Directed
    }
    fn direction(&self) -> bool {
        self.direction
    }
    fn hop_ptr(&self) -> u8 {
        self.hop_ptr
    }
    fn set_hop_ptr(&mut self, ptr: u8) {
        self.hop_ptr = ptr;
    }
    fn hop_cnt(&self) -> u8 {
        self.hop_cnt
    }
    fn dr_slid(&self) -> u16 {
        self.dr_slid
    }
    fn dr_dlid(&self) -> u16 {
        self.dr_dlid
    }
    fn initial_port(&self, i: usize) -> Option<u8> {
        self.initial_path.get(i).copied()
    }
    fn return_port(&self, i: usize) -> Option<u8> {
        self.return_path.get(i).copied()
    }
    fn set_return_port(&mut self, i: usize, port: u8) {
        if let Some(slot) = self.return_path.get_mut(i) {
            *slot = port;
        }
    }
}

/// A MAD's 256 bytes as a directed-route SMP's hop fields (the layout in
/// [`Smp`]'s module): what [`on_receive`] changes is written in place, as
/// [`Smp::write_route`] would write it.
pub struct DrBytes<'a>(pub &'a mut [u8; MAD_LEN]);

/// Where a DR SMP's fields lie in its MAD.
const STATUS_HI: usize = 4;
const HOP_PTR: usize = 6;
const HOP_CNT: usize = 7;
const DR_SLID: usize = 32;
const DR_DLID: usize = 34;
const INITIAL_PATH: usize = 128;
const RETURN_PATH: usize = 192;
const PATH_LEN: usize = 64;

impl DrBytes<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.0.get(at).copied().unwrap_or(0)
    }
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.byte(at), self.byte(at + 1)])
    }
}

impl DrFields for DrBytes<'_> {
    fn is_directed(&self) -> bool {
        self.byte(1) == class::SUBN_DIRECTED_ROUTE
    }
    fn direction(&self) -> bool {
        self.byte(STATUS_HI) & 0x80 != 0
    }
    fn hop_ptr(&self) -> u8 {
        self.byte(HOP_PTR)
    }
    fn set_hop_ptr(&mut self, ptr: u8) {
        if let Some(b) = self.0.get_mut(HOP_PTR) {
            *b = ptr;
        }
    }
    fn hop_cnt(&self) -> u8 {
        self.byte(HOP_CNT)
    }
    fn dr_slid(&self) -> u16 {
        self.u16_at(DR_SLID)
    }
    fn dr_dlid(&self) -> u16 {
        self.u16_at(DR_DLID)
    }
    fn initial_port(&self, i: usize) -> Option<u8> {
        (i < PATH_LEN).then(|| self.byte(INITIAL_PATH + i))
    }
    fn return_port(&self, i: usize) -> Option<u8> {
        (i < PATH_LEN).then(|| self.byte(RETURN_PATH + i))
    }
    fn set_return_port(&mut self, i: usize, port: u8) {
        if i < PATH_LEN {
            if let Some(b) = self.0.get_mut(RETURN_PATH + i) {
                *b = port;
            }
        }
    }
}

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

fn check<T: DrFields + ?Sized>(smp: &T) -> Result<(), DrDiscard> {
    if !smp.is_directed() {
        return Err(DrDiscard::NotDirected);
    }
    if smp.hop_cnt() > MAX_HOPS {
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

/// What a hop writes of a DR SMP: the hop pointer and one return-path
/// entry, as [`plan`] found them, for [`DrEdit::apply`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrEdit {
    hop_ptr: Option<u8>,
    return_port: Option<(usize, u8)>,
}

impl DrEdit {
    /// Writes the edit into `smp`: with [`plan`]'s on the same SMP, the
    /// same change as [`on_receive`] makes.
    pub fn apply<T: DrFields + ?Sized>(self, smp: &mut T) {
        if let Some((i, port)) = self.return_port {
            smp.set_return_port(i, port);
        }
        if let Some(ptr) = self.hop_ptr {
            smp.set_hop_ptr(ptr);
        }
    }
}

/// An SMP read through the edits a hop has made so far ([`plan`]): reads
/// see them, writes only record them.
struct Planned<'a, T: ?Sized> {
    smp: &'a T,
    edit: DrEdit,
}

impl<T: DrFields + ?Sized> DrFields for Planned<'_, T> {
    fn is_directed(&self) -> bool {
        self.smp.is_directed()
    }
    fn direction(&self) -> bool {
        self.smp.direction()
    }
    fn hop_ptr(&self) -> u8 {
        self.edit.hop_ptr.unwrap_or_else(|| self.smp.hop_ptr())
    }
    fn set_hop_ptr(&mut self, ptr: u8) {
        self.edit.hop_ptr = Some(ptr);
    }
    fn hop_cnt(&self) -> u8 {
        self.smp.hop_cnt()
    }
    fn dr_slid(&self) -> u16 {
        self.smp.dr_slid()
    }
    fn dr_dlid(&self) -> u16 {
        self.smp.dr_dlid()
    }
    fn initial_port(&self, i: usize) -> Option<u8> {
        self.smp.initial_port(i)
    }
    fn return_port(&self, i: usize) -> Option<u8> {
        let held = self.smp.return_port(i)?;
        Some(match self.edit.return_port {
            Some((at, port)) if at == i => port,
            _ => held,
        })
    }
    fn set_return_port(&mut self, i: usize, port: u8) {
        self.edit.return_port = Some((i, port));
    }
}

/// The hop [`on_receive`] takes, found without changing `smp`: its step,
/// and the edit that takes it ([`DrEdit::apply`]). An owner that passes
/// an SMP on only for some steps (a switch's fast path for
/// [`DrStep::Forward`]) looks first and leaves the SMP as it came for
/// every other step.
pub fn plan<T: DrFields + ?Sized>(
    smp: &T,
    is_switch: bool,
    in_port: u8,
    ports: u8,
) -> (DrStep, DrEdit) {
    let mut planned = Planned {
        smp,
        edit: DrEdit::default(),
    };
    let step = on_receive(&mut planned, is_switch, in_port, ports);
    (step, planned.edit)
}

/// The requester sends a new DR request (C14-9:1), an [`Smp`] or the
/// MAD's bytes ([`DrBytes`]): the hop pointer goes from 0 to 1; returns
/// the port it must leave by (`initial_path[1]`).
pub fn begin<T: DrFields + ?Sized>(smp: &mut T) -> Result<u8, DrDiscard> {
    check(smp)?;
    if smp.dr_slid() != PERMISSIVE_LID {
        return Err(DrDiscard::LidRoutedPart);
    }
    if smp.direction() || smp.hop_ptr() != 0 || smp.hop_cnt() == 0 {
        return Err(DrDiscard::BadHopPointer);
    }
    smp.set_hop_ptr(1);
    Ok(smp.initial_port(1).unwrap_or(0))
}

/// A node with `ports` ports (`is_switch`: a switch) received `smp` (an
/// [`Smp`], or the MAD's bytes: [`DrBytes`]) on `in_port`: records the
/// return path and moves the hop pointer as IBA says, and says what to do
/// with it.
pub fn on_receive<T: DrFields + ?Sized>(
    smp: &mut T,
    is_switch: bool,
    in_port: u8,
    ports: u8,
) -> DrStep {
    if let Err(why) = check(smp) {
        return DrStep::Discard(why);
    }
    let (ptr, cnt) = (smp.hop_ptr(), smp.hop_cnt());
    let lid_first = smp.dr_slid() != PERMISSIVE_LID;
    let lid_last = smp.dr_dlid() != PERMISSIVE_LID;
    if !smp.direction() {
        if ptr == 0 {
            // C14-9:1 at the switch where a LID-routed first part ends.
            if !(lid_first && is_switch && cnt >= 1) {
                return DrStep::Discard(DrDiscard::BadHopPointer);
            }
            smp.set_hop_ptr(1);
            return out_port(smp.initial_port(1).unwrap_or(0), ports);
        }
        if ptr > cnt {
            // C14-9:4: the end of a LID-routed last part.
            return if ptr == cnt + 1 && lid_last {
                DrStep::Deliver
            } else {
                DrStep::Discard(DrDiscard::BadHopPointer)
            };
        }
        smp.set_return_port(usize::from(ptr), in_port);
        if ptr < cnt {
            // C14-9:2: the middle of the path.
            if !is_switch {
                return DrStep::Discard(DrDiscard::NotASwitch);
            }
            smp.set_hop_ptr(ptr + 1);
            let port = smp.initial_port(usize::from(ptr) + 1);
            return out_port(port.unwrap_or(0), ports);
        }
        // C14-9:3: the end of the directed part.
        smp.set_hop_ptr(ptr + 1);
        return match (lid_last, is_switch) {
            (false, _) => DrStep::Deliver,
            (true, true) => DrStep::ForwardByLid(smp.dr_dlid()),
            (true, false) => DrStep::Discard(DrDiscard::LidRoutedPart),
        };
    }
    match ptr {
        // C14-13:1 at the switch where a LID-routed last part began.
        p if p == cnt + 1 && lid_last && is_switch && cnt >= 1 => {
            smp.set_hop_ptr(cnt);
            out_port(smp.return_port(usize::from(cnt)).unwrap_or(0), ports)
        }
        // C14-13:4: back at a requester that sent it LID-routed.
        0 if lid_first && !is_switch => DrStep::Deliver,
        // C14-13:3: back at the requester's end of the directed part.
        1 if !lid_first && !is_switch && cnt >= 1 => DrStep::Deliver,
        1 if lid_first && is_switch && cnt >= 1 => {
            smp.set_hop_ptr(0);
            DrStep::ForwardByLid(smp.dr_slid())
        }
        // C14-13:2: the middle of the way back.
        p if (2..=cnt).contains(&p) => {
            if !is_switch {
                return DrStep::Discard(DrDiscard::NotASwitch);
            }
            smp.set_hop_ptr(p - 1);
            let port = smp.return_port(usize::from(p) - 1);
            out_port(port.unwrap_or(0), ports)
        }
        _ => DrStep::Discard(DrDiscard::BadHopPointer),
    }
}

/// A responder turned a request it received into `smp`, its response (D
/// bit set, [`Smp::make_response`]): the first step back (C14-13:1), out of
/// the port the request came in by, or LID-routed to where it came from if
/// it reached the responder LID-routed.
pub fn respond<T: DrFields + ?Sized>(smp: &mut T, ports: u8) -> DrStep {
    if let Err(why) = check(smp) {
        return DrStep::Discard(why);
    }
    let (ptr, cnt) = (smp.hop_ptr(), smp.hop_cnt());
    if !smp.direction() || cnt == 0 || u16::from(ptr) != u16::from(cnt) + 1 {
        return DrStep::Discard(DrDiscard::BadHopPointer);
    }
    if smp.dr_dlid() != PERMISSIVE_LID {
        // It came LID-routed: back the same way, to the switch that sent
        // it (C14-13:1 happens there).
        return DrStep::BackToSource;
    }
    smp.set_hop_ptr(cnt);
    let port = smp.return_port(usize::from(cnt));
    out_port(port.unwrap_or(0), ports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lid() -> impl Strategy<Value = u16> {
        prop_oneof![Just(PERMISSIVE_LID), any::<u16>()]
    }

    proptest::proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        /// A hop taken on the MAD's bytes in place, or planned on them
        /// and then applied, is the hop taken on the decoded SMP, written
        /// back ([`Smp::write_route`]): the same step and the same bytes,
        /// whatever the MAD holds.
        #[test]
        fn a_hop_on_the_bytes_or_planned_is_the_hop_on_the_decoded_smp(
            seed in proptest::collection::vec(any::<u8>(), MAD_LEN),
            directed in prop_oneof![4 => Just(true), 1 => Just(false)],
            back in any::<bool>(),
            (ptr, cnt) in (0u8..=66, 0u8..=65),
            (dr_slid, dr_dlid) in (lid(), lid()),
            is_switch in any::<bool>(),
            (in_port, ports) in (0u8..=40, 1u8..=40),
        ) {
            let mut mad: [u8; MAD_LEN] = seed.try_into().unwrap();
            mad[1] = if directed { class::SUBN_DIRECTED_ROUTE } else { class::SUBN_LID_ROUTED };
            mad[STATUS_HI] = (mad[STATUS_HI] & 0x7f) | if back { 0x80 } else { 0 };
            mad[HOP_PTR] = ptr;
            mad[HOP_CNT] = cnt;
            mad[DR_SLID..DR_SLID + 2].copy_from_slice(&dr_slid.to_be_bytes());
            mad[DR_DLID..DR_DLID + 2].copy_from_slice(&dr_dlid.to_be_bytes());
            let mut smp = Smp::parse(&mad).unwrap();
            let smp_before = smp.clone();
            let decoded = on_receive(&mut smp, is_switch, in_port, ports);
            let mut expected = mad;
            smp.write_route(&mut expected);
            let mut bytes = mad;
            let in_place = on_receive(&mut DrBytes(&mut bytes), is_switch, in_port, ports);
            prop_assert_eq!(in_place, decoded);
            prop_assert_eq!(bytes, expected);
            // A request begun (C14-9:1) on the bytes or on the SMP.
            let mut begun = smp_before.clone();
            let begun_step = begin(&mut begun);
            let mut begun_bytes = mad;
            prop_assert_eq!(begin(&mut DrBytes(&mut begun_bytes)), begun_step);
            let mut expected_begun = mad;
            begun.write_route(&mut expected_begun);
            prop_assert_eq!(begun_bytes, expected_begun);
            // The same hop planned first: the MAD untouched until the
            // edit is applied, then the same bytes.
            let mut planned = mad;
            let (step, edit) = plan(&DrBytes(&mut planned), is_switch, in_port, ports);
            prop_assert_eq!(step, decoded);
            prop_assert_eq!(planned, mad);
            edit.apply(&mut DrBytes(&mut planned));
            prop_assert_eq!(planned, expected);
            // A responder's first step back, on the bytes or on the SMP.
            let mut answered = smp_before.clone();
            let answered_step = respond(&mut answered, ports);
            let mut answered_bytes = mad;
            prop_assert_eq!(respond(&mut DrBytes(&mut answered_bytes), ports), answered_step);
            let mut expected_answered = mad;
            answered.write_route(&mut expected_answered);
            prop_assert_eq!(answered_bytes, expected_answered);
        }
    }
}
