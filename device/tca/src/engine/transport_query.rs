//! QUERY_QP's PSNs from the RC transport: the command table answers from
//! the verbs QP (its state, and the PSNs MODIFY_QP set); once an RC QP has
//! transport state, the next PSN it sends (RTS on) and the next it expects
//! (RTR on) are the transport's. A QP that a MODIFY_QP or DESTROY_QP of the
//! same batch of commands changed keeps the table's answer: the transport
//! catches up with it only after the batch.

use vm_memory::ByteValued;

use super::qp_map::QpMap;
use crate::dma::GuestMemory;
use crate::transport::RcQp;
use crate::verbs::abi::{CmdHandle, QpAttr, CMD_DESTROY_QP, CMD_MODIFY_QP, CMD_QUERY_QP};
use crate::verbs::commands::{decode, EngineCommands, Params, Reply};
use crate::verbs::VerbsError;

/// The engine's commands (`next`) with QUERY_QP's PSNs from `rc`.
pub(super) struct TransportQuery<'a> {
    next: &'a mut dyn EngineCommands,
    rc: &'a QpMap<RcQp>,
    /// QPs a command of this batch modified or destroyed.
    changed: Vec<u32>,
}

impl<'a> TransportQuery<'a> {
    pub(super) fn new(next: &'a mut dyn EngineCommands, rc: &'a QpMap<RcQp>) -> Self {
        TransportQuery {
            next,
            rc,
            changed: Vec::new(),
        }
    }
}

impl EngineCommands for TransportQuery<'_> {
    fn run(
        &mut self,
        mem: &GuestMemory,
        opcode: u8,
        raw: &Params,
    ) -> Option<Result<Reply, VerbsError>> {
        if matches!(opcode, CMD_MODIFY_QP | CMD_DESTROY_QP) {
            // Both start with the QP number.
            self.changed
                .push(decode::<CmdHandle>(raw).handle.to_native());
        }
        self.next.run(mem, opcode, raw)
    }

    fn amend(&mut self, opcode: u8, raw: &Params, reply: &mut Reply) {
        if opcode != CMD_QUERY_QP {
            return self.next.amend(opcode, raw, reply);
        }
        let qpn = decode::<CmdHandle>(raw).handle.to_native();
        let (Some(rc), Some(data)) = (self.rc.get(&qpn), reply.data.as_mut()) else {
            return;
        };
        if self.changed.contains(&qpn) {
            return;
        }
        let mut attr: QpAttr = decode(data);
        attr.rq_psn = rc.expected_psn().into();
        if rc.is_sending() {
            attr.sq_psn = rc.sq_psn().into();
        }
        data[..size_of::<QpAttr>()].copy_from_slice(attr.as_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::RcConfig;
    use crate::verbs::abi::CMD_QUERY_SRQ;
    use crate::verbs::commands::NoEngineCommands;

    /// A QUERY_QP reply of `qpn` with PSNs 7 and 9 (what MODIFY_QP set).
    fn reply(qpn: u32) -> (Params, Reply) {
        let mut raw = [0u8; 48];
        raw[..4].copy_from_slice(&qpn.to_le_bytes());
        let attr = QpAttr {
            sq_psn: 7.into(),
            rq_psn: 9.into(),
            ..Default::default()
        };
        let mut data = [0u8; 48];
        data.copy_from_slice(attr.as_slice());
        let r = Reply {
            data: Some(data),
            ..Default::default()
        };
        (raw, r)
    }

    fn psns(r: &Reply) -> (u32, u32) {
        let a: QpAttr = decode(&r.data.expect("data"));
        (a.sq_psn.to_native(), a.rq_psn.to_native())
    }

    #[test]
    fn query_qp_takes_the_transports_psns_unless_the_batch_changed_the_qp() {
        let mut rc: QpMap<RcQp> = QpMap::default();
        let mut sending = RcConfig::new(0x400, 0x500);
        (sending.sq_psn, sending.rq_psn) = (100, 200);
        rc.insert(0x400, RcQp::new(sending).expect("config"));
        let mut receiving = RcConfig::new(0x401, 0x501);
        (receiving.sq_psn, receiving.rq_psn) = (300, 400);
        rc.insert(0x401, RcQp::new_receiving(receiving).expect("config"));
        let mut next = NoEngineCommands;
        let mut q = TransportQuery::new(&mut next, &rc);

        let (raw, mut r) = reply(0x400);
        q.amend(CMD_QUERY_QP, &raw, &mut r);
        assert_eq!(psns(&r), (100, 200), "RTS: both the transport's");
        let (raw, mut r) = reply(0x401);
        q.amend(CMD_QUERY_QP, &raw, &mut r);
        assert_eq!(psns(&r), (7, 400), "RTR: the SQ PSN is MODIFY_QP's");
        let (raw, mut r) = reply(0x402);
        q.amend(CMD_QUERY_QP, &raw, &mut r);
        assert_eq!(psns(&r), (7, 9), "no transport state");
        let (raw, mut r) = reply(0x400);
        q.amend(CMD_QUERY_SRQ, &raw, &mut r);
        assert_eq!(psns(&r), (7, 9), "another command");

        // A MODIFY_QP of 0x400 earlier in the batch: the table's answer.
        let (raw, _) = reply(0x400);
        let mem = crate::verbs::testmem::TestMem::new(4096);
        assert!(q.run(&mem.mem, CMD_MODIFY_QP, &raw).is_none());
        let (raw, mut r) = reply(0x400);
        q.amend(CMD_QUERY_QP, &raw, &mut r);
        assert_eq!(psns(&r), (7, 9), "changed in this batch");
    }
}
