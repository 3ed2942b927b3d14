//! Datagram QPs of a simulated guest: UD QPs and the port's QP0/QP1
//! (created with an IBTCA_QPT_* type, brought to RTS with a Q_Key) and the
//! UD send WQE that carries its address vector.

use ibtca_device::verbs::abi::*;
use vm_memory::ByteValued;

use crate::sim_guest::{CmdFailed, Cq, DbRoute, Qp, SimGuest};

impl SimGuest {
    /// CREATE_QP of IBTCA_QPT_* `qp_type` (UD, SMI, GSI: no quasi-WQE
    /// ring) with 2^log SQ/RQ entries; the device's status on failure.
    pub fn create_datagram_qp(
        &mut self,
        pdn: u32,
        cq: &Cq,
        log: u8,
        qp_type: u8,
    ) -> Result<Qp, CmdFailed> {
        let sq = self.alloc(128 << log, 4096);
        let rq = self.alloc(128 << log, 4096);
        let p = CmdCreateQp {
            pdn: pdn.into(),
            send_cqn: cq.cqn.into(),
            recv_cqn: cq.cqn.into(),
            log_sizes: [log, log, 0, qp_type],
            sq: sq.into(),
            rq: rq.into(),
            ..Default::default()
        };
        let qpn = self.cmd(CMD_CREATE_QP, p.as_slice())?.0;
        Ok(Qp {
            qpn,
            db: DbRoute::Bar0,
            sq,
            rq,
            quasi: 0, // a datagram QP has no quasi-WQE ring
            log,
            rq_log_stride: RECV_LOG_STRIDE,
            sq_log_stride: RECV_LOG_STRIDE,
            sq_pi: 0,
            rq_pi: 0,
        })
    }

    /// A datagram QP RESET → INIT (Q_Key `qkey`, P_Key index
    /// [`SimGuest::pkey_index`]) → RTR → RTS (SQ PSN 0).
    pub fn datagram_ready(&mut self, qp: &Qp, qkey: u32) -> Result<(), CmdFailed> {
        let base = CmdModifyQp {
            qpn: qp.qpn.into(),
            ..Default::default()
        };
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_QKEY | self.pkey_index_mask()).into(),
            state: QPS_INIT,
            // A datagram QP's Q_Key travels in `access`.
            access: qkey.into(),
            pkey_index: self.pkey_index.into(),
            ..base
        })?;
        self.modify_qp(&CmdModifyQp {
            attr_mask: QP_ATTR_STATE.into(),
            state: QPS_RTR,
            ..base
        })?;
        self.modify_qp(&CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN).into(),
            state: QPS_RTS,
            ..base
        })
    }

    /// MODIFY_QP of a datagram QP to RTS with no other attribute: how a
    /// UD QP in SQE resumes sending (IPoIB's recovery does the same).
    pub fn datagram_resume(&mut self, qp: &Qp) -> Result<(), CmdFailed> {
        self.modify_qp(&CmdModifyQp {
            qpn: qp.qpn.into(),
            attr_mask: QP_ATTR_STATE.into(),
            state: QPS_RTS,
            ..Default::default()
        })
    }

    /// The IBTCA_QPS_* state QUERY_QP reports for `qpn`.
    pub fn qp_state(&mut self, qpn: u32) -> Result<u8, CmdFailed> {
        let h = CmdHandle {
            handle: qpn.into(),
            ..Default::default()
        };
        let e = self.cmd_entry(CMD_QUERY_QP, h.as_slice())?;
        Ok(e.params[0])
    }

    /// Posts a UD send WQE (its 128 bytes in the send slot).
    pub fn post_ud_send(&mut self, qp: &mut Qp, wqe: &UdSendWqe) {
        let mut w = SendWqe::default();
        w.as_mut_slice().copy_from_slice(wqe.as_slice());
        self.post_send(qp, &w);
    }
}

/// A signaled UD SEND of `len` bytes at `addr` (`lkey`) to QP `dest_qpn`
/// at `dlid` with Q_Key `qkey`, on SL 0.
pub fn ud_send_wqe(
    wr_id: u64,
    (addr, len, lkey): (u64, u32, u32),
    dlid: u16,
    dest_qpn: u32,
    qkey: u32,
) -> UdSendWqe {
    let mut w = UdSendWqe {
        wr_id: wr_id.into(),
        opcode: WR_UD_SEND,
        flags: WQE_F_SIGNALED,
        num_sge: 1,
        dlid: dlid.into(),
        dest_qpn: dest_qpn.into(),
        qkey: qkey.into(),
        ..Default::default()
    };
    w.sge[0] = Sge {
        addr: addr.into(),
        length: len.into(),
        lkey: lkey.into(),
    };
    w
}
