//! Requests the fabric dropped, answered at once: a host port's client
//! gets status 110 (ETIMEDOUT) for a MAD the hive cannot deliver (a link
//! down or cut, a switch without power, a switch that refuses it) in the
//! same turn, as ibsim answers such a MAD, instead of after the port's
//! request timeout, while the SM holds one of its few outstanding SMPs.
//!
//! Within one turn the hive carries every packet to every node it hosts,
//! and every hosted switch and CA answers a MAD when it gets it. So once
//! the work queue is empty, a host port's request is either answered,
//! dropped, or gone where the hive cannot see its end: onto a socket wire
//! to a node outside, or to a client of a host port (an SM answering
//! SMInfo, the SA). The hive marks the last two as they go
//! ([`SimPort::mark_left`](ibtca_simport::port::SimPort::mark_left)):
//! they keep waiting for their answer or their timeout. The rest are
//! answered 110 before the turn's answers are flushed.

use ibtca_protocol::encoded;
use ibtca_protocol::headers::{Bth, Deth, Grh, Lnh, Lrh};
use ibtca_protocol::mad::pma::QP1;
use ibtca_protocol::mad::QP0;
use ibtca_protocol::Opcode;

use super::{Hive, Node};

/// The TID of `packet` if it is a MAD request (a UD datagram to QP0 or
/// QP1 whose method is not a response).
pub(super) fn mad_request_tid(packet: &[u8]) -> Option<u64> {
    if encoded::opcode(packet)? != Opcode::UdSendOnly {
        return None;
    }
    if !matches!(encoded::dest_qp(packet)?, QP0 | QP1) {
        return None;
    }
    let grh = match encoded::lnh(packet)? {
        Lnh::IbaGlobal => Grh::LEN,
        _ => 0,
    };
    let mad = packet.get(Lrh::LEN + grh + Bth::LEN + Deth::LEN..)?;
    let method = *mad.get(3)?;
    if method & 0x80 != 0 {
        return None;
    }
    Some(u64::from_be_bytes(*mad.get(8..16)?.first_chunk()?))
}

impl Hive {
    /// `packet` leaves the hive's sight (onto a socket wire, or to a host
    /// port that hands requests to its clients): if it is a MAD request,
    /// the host port that sent it keeps waiting for its answer.
    pub(super) fn mark_left(&mut self, packet: &[u8]) {
        if self.sims.is_empty() {
            return;
        }
        let Some(tid) = mad_request_tid(packet) else {
            return;
        };
        for &node in &self.sims {
            if let Node::Sim(sim) = &mut self.nodes[node] {
                sim.mark_left(tid);
            }
        }
    }

    /// Returns every host port's unanswered requests that stayed in the
    /// hive to their clients with status 110; called with the work queue
    /// empty.
    pub(super) fn answer_stranded(&mut self) {
        for &node in &self.sims {
            if let Node::Sim(sim) = &mut self.nodes[node] {
                sim.answer_stranded();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ibtca_protocol::mad::attr::id;
    use ibtca_protocol::mad::{method, smp_packet, Smp, PERMISSIVE_LID};

    use super::*;

    #[test]
    fn a_requests_tid_is_read_and_a_responses_is_not() {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2]).unwrap();
        smp.tid = 0x0003_0000_1234_5678;
        let p = smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap();
        assert_eq!(mad_request_tid(&p), Some(0x0003_0000_1234_5678));
        smp.method = method::GET_RESP;
        let p = smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap();
        assert_eq!(mad_request_tid(&p), None);
        assert_eq!(mad_request_tid(&p[..20]), None);
    }
}
