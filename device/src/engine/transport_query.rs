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
