//! Completion by MSN (seed 002 items 2–3): the requester completes one
//! send WQE per advance of the message sequence number in the responses'
//! AETH, without looking at a WQE to learn where a message ends.
//!
//! - Both ends start from the MSN the connection agreed on
//!   ([`super::RcConfig::initial_msn`]). The responder counts a message
//!   when it accepts its last packet (a READ or atomic when it accepts the
//!   request), and every ACK, NAK, READ response with an AETH and ATOMIC
//!   ACKNOWLEDGE carries its count.
//! - An MSN `d` ahead of the last one seen confirms the next `d` messages
//!   (WQEs that took PSNs) of the send queue, oldest first: a lost ACK is
//!   covered by the next one's larger MSN. A stale or repeated MSN confirms
//!   nothing, whatever its PSN says.
//! - Cross-check: a response also says, by its PSN, through which request
//!   the responder has executed (an ACK or response: its PSN; a NAK: the
//!   PSN before it). The newest message the MSN confirms must end there or
//!   earlier — for a READ or atomic, whose MSN is counted when the request
//!   is accepted, its request PSN must. An MSN that claims more messages
//!   than the PSN covers is a protocol error: the QP fails the oldest
//!   unconfirmed WQE with WC_BAD_RESP_ERR and goes to error, with the
//!   warning "ACK MSN claims more messages than its PSN covers".
//! - A READ or atomic the MSN confirmed still completes only when its last
//!   response has landed (IBA 9.7.5.1.3): the MSN says the responder took
//!   the request, the data says the requester has the result.
//!
//! The PSN still moves the send window (`una`); the MSN alone completes.

use super::psn;
use super::requester::{Flight, Requester};

/// An MSN that claims more messages than its response's PSN covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MsnViolation {
    /// The MSN received.
    pub(crate) msn: u32,
    /// The PSN through which the response said requests were executed.
    pub(crate) covered: u32,
}

/// The PSN at which the responder counts `f` as a message: its request
/// for a READ or atomic, its last packet otherwise.
fn counted_at(f: &Flight) -> u32 {
    if f.kind.needs_response() {
        f.first_psn
    } else {
        psn::sub(f.end_psn(), 1)
    }
}

impl Requester {
    /// Takes MSN `msn` from a response that says every request through PSN
    /// `covered` was executed. Returns whether it confirmed messages.
    pub(crate) fn take_msn(&mut self, msn: u32, covered: u32) -> Result<bool, MsnViolation> {
        let d = psn::diff(msn, self.msn.acked);
        if d <= 0 {
            return Ok(false);
        }
        let violation = MsnViolation { msn, covered };
        // The newest message this MSN confirms: the `want`th from the front.
        let want = self.msn.confirmed + d as usize;
        if want > self.msn.messages {
            return Err(violation);
        }
        let newest = self
            .inflight
            .iter()
            .filter(|f| f.npsn > 0)
            .nth(want - 1)
            .ok_or(violation)?;
        if psn::before(covered, counted_at(newest)) {
            return Err(violation);
        }
        self.msn.acked = msn & psn::MASK;
        self.msn.confirmed = want;
        Ok(true)
    }

    /// The oldest WQE the MSN has not confirmed (the one a protocol error
    /// fails), if any.
    pub(crate) fn first_unconfirmed(&mut self) -> Option<&mut Flight> {
        let mut skip = self.msn.confirmed;
        self.inflight.iter_mut().find(|f| {
            if f.npsn == 0 || skip == 0 {
                return true;
            }
            skip -= 1;
            false
        })
    }
}
