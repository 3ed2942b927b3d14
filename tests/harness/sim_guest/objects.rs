//! A simulated guest's verbs objects: protection domains, memory regions,
//! CQs and QPs created through the command queue, and a QP connected
//! (RESET → INIT → RTR → RTS).

use ibtca_device::verbs::abi::*;
use vm_memory::ByteValued;

use super::{db_page, CmdFailed, Cq, DbRoute, Qp, SimGuest};

impl SimGuest {
    /// CREATE_PD.
    pub fn create_pd(&mut self) -> u32 {
        self.cmd(CMD_CREATE_PD, &[]).unwrap().0
    }

    /// REG_MR over `[gpa, gpa + len)` with iova = gpa; returns (lkey, rkey).
    pub fn reg_mr(&mut self, pdn: u32, gpa: u64, len: u64, access: u32) -> (u32, u32) {
        let p = CmdRegMr {
            pdn: pdn.into(),
            access: access.into(),
            iova: gpa.into(),
            length: len.into(),
            gpa: gpa.into(),
            ..Default::default()
        };
        self.cmd(CMD_REG_MR, p.as_slice()).unwrap()
    }

    /// CREATE_CQ with 2^log entries raising MSI-X vector 1.
    pub fn create_cq(&mut self, log: u8) -> Cq {
        self.create_cq_on(log, DbRoute::Bar0)
    }

    /// CREATE_CQ bound to the doorbell page of `db` (BAR0: page 0).
    pub fn create_cq_on(&mut self, log: u8, db: DbRoute) -> Cq {
        let gpa = self.alloc(32 << log, 4096);
        let p = CmdCreateCq {
            ring: gpa.into(),
            log_entries: log,
            vector: 1,
            db_page: db_page(db).into(),
            ..Default::default()
        };
        let cqn = self.cmd(CMD_CREATE_CQ, p.as_slice()).unwrap().0;
        Cq {
            cqn,
            db,
            gpa,
            log,
            ci: 0,
        }
    }

    /// CREATE_QP (RC) with 2^log SQ/RQ entries.
    pub fn create_qp(&mut self, pdn: u32, scq: &Cq, rcq: &Cq, log: u8) -> Qp {
        self.create_qp_on(pdn, scq, rcq, log, DbRoute::Bar0)
    }

    /// CREATE_QP bound to the doorbell page of `db` (BAR0: page 0).
    pub fn create_qp_on(&mut self, pdn: u32, scq: &Cq, rcq: &Cq, log: u8, db: DbRoute) -> Qp {
        self.create_qp_with(pdn, scq, rcq, log, db, 0, [0, 0])
            .expect("CREATE_QP")
    }

    /// CREATE_QP taking its receives from SRQ `srqn` (no RQ of its own).
    pub fn create_qp_on_srq(
        &mut self,
        pdn: u32,
        scq: &Cq,
        rcq: &Cq,
        log: u8,
        srqn: u32,
    ) -> Result<Qp, CmdFailed> {
        self.create_qp_with(pdn, scq, rcq, log, DbRoute::Bar0, srqn, [0, 0])
    }

    /// CREATE_QP whose RQ has a stride of 2^`rq_log_stride` bytes
    /// (CREATE_QP's `rq_log_stride`, passed as is: 0 is the default).
    pub fn create_qp_strided(
        &mut self,
        pdn: u32,
        cq: &Cq,
        log: u8,
        rq_log_stride: u8,
    ) -> Result<Qp, CmdFailed> {
        self.create_qp_with(pdn, cq, cq, log, DbRoute::Bar0, 0, [0, rq_log_stride])
    }

    /// CREATE_QP whose SQ has a stride of 2^`sq_log_stride` bytes
    /// (CREATE_QP's `sq_log_stride`, passed as is: 0 is the default).
    pub fn create_qp_send_strided(
        &mut self,
        pdn: u32,
        cq: &Cq,
        log: u8,
        sq_log_stride: u8,
    ) -> Result<Qp, CmdFailed> {
        self.create_qp_with(pdn, cq, cq, log, DbRoute::Bar0, 0, [sq_log_stride, 0])
    }

    #[allow(clippy::too_many_arguments)]
    fn create_qp_with(
        &mut self,
        pdn: u32,
        scq: &Cq,
        rcq: &Cq,
        log: u8,
        db: DbRoute,
        srqn: u32,
        [sq_log_stride, rq_log_stride]: [u8; 2],
    ) -> Result<Qp, CmdFailed> {
        let sq_stride_log = sq_log_stride.clamp(RECV_LOG_STRIDE, MAX_RECV_LOG_STRIDE);
        let sq = self.alloc(1 << (sq_stride_log + log), 4096);
        let stride_log = rq_log_stride.clamp(RECV_LOG_STRIDE, MAX_RECV_LOG_STRIDE);
        let (rq, rq_log) = match srqn {
            0 => (self.alloc(1 << (stride_log + log), 4096), log),
            _ => (0, 0),
        };
        let quasi = self.alloc(32 << log, 4096);
        let p = CmdCreateQp {
            pdn: pdn.into(),
            send_cqn: scq.cqn.into(),
            recv_cqn: rcq.cqn.into(),
            log_sizes: [log, rq_log, log, 0],
            sq: sq.into(),
            rq: rq.into(),
            quasi: quasi.into(),
            db_page: (db_page(db) as u16).into(),
            rq_log_stride,
            sq_log_stride,
            srqn: srqn.into(),
        };
        let qpn = self.cmd(CMD_CREATE_QP, p.as_slice())?.0;
        Ok(Qp {
            qpn,
            db,
            sq,
            rq,
            quasi,
            log,
            rq_log_stride: stride_log,
            sq_log_stride: sq_stride_log,
            sq_pi: 0,
            rq_pi: 0,
        })
    }

    /// MODIFY_QP.
    pub fn modify_qp(&mut self, p: &CmdModifyQp) -> Result<(), CmdFailed> {
        self.cmd(CMD_MODIFY_QP, p.as_slice()).map(|_| ())
    }

    /// QP_ATTR_PKEY_INDEX if the guest gives its QPs a P_Key index
    /// ([`SimGuest::pkey_index`]), else nothing.
    pub fn pkey_index_mask(&self) -> u32 {
        if self.pkey_index == 0 {
            0
        } else {
            QP_ATTR_PKEY_INDEX
        }
    }

    /// RESET → INIT → RTR → RTS towards (dlid, dest_qpn), allowing the
    /// remote rights in `access` (other bits are dropped); ACK timeout
    /// and retries from [`SimGuest::retry`].
    pub fn connect(&mut self, qp: &Qp, dlid: u16, dest_qpn: u32, mtu: u8, access: u32) {
        self.connect_on_sl(qp, dlid, dest_qpn, mtu, access, 0);
    }

    /// [`SimGuest::connect`] with the path on service level `sl`.
    pub fn connect_on_sl(
        &mut self,
        qp: &Qp,
        dlid: u16,
        dest_qpn: u32,
        mtu: u8,
        access: u32,
        sl: u8,
    ) {
        let rtr = CmdModifyQp {
            path_mtu: mtu,
            dlid: dlid.into(),
            sl,
            dest_qpn: dest_qpn.into(),
            rq_psn: 100.into(),
            ..Default::default()
        };
        let rts = CmdModifyQp {
            sq_psn: 100.into(),
            timeout: self.retry.timeout,
            retry_cnt: self.retry.retry_cnt,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 3,
            ..Default::default()
        };
        self.connect_with(qp, access, rtr, rts);
    }

    /// RESET → INIT → RTR → RTS: INIT allows the remote rights in `access`
    /// (other bits are dropped) with the guest's P_Key index; `rtr` and
    /// `rts` are the attributes of the other two steps (their fields and
    /// any `attr_mask` bits beyond the step's own), to which this adds the
    /// QP number, the state and the step's mask (RTR: path, destination
    /// QP, RQ PSN; RTS: SQ PSN, retries). Panics naming the step the device
    /// refused and its status.
    pub fn connect_with(&mut self, qp: &Qp, access: u32, rtr: CmdModifyQp, rts: CmdModifyQp) {
        let access = access & (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC);
        let init = CmdModifyQp {
            attr_mask: (QP_ATTR_ACCESS | self.pkey_index_mask()).into(),
            access: access.into(),
            pkey_index: self.pkey_index.into(),
            ..Default::default()
        };
        let rtr_mask = QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
        let rts_mask = QP_ATTR_SQ_PSN | QP_ATTR_RETRY;
        for (state, step, mask, name) in [
            (QPS_INIT, init, 0, "INIT"),
            (QPS_RTR, rtr, rtr_mask, "RTR"),
            (QPS_RTS, rts, rts_mask, "RTS"),
        ] {
            let mask = step.attr_mask.to_native() | QP_ATTR_STATE | mask;
            self.modify_qp(&CmdModifyQp {
                qpn: qp.qpn.into(),
                attr_mask: mask.into(),
                state,
                ..step
            })
            .unwrap_or_else(|e| panic!("QP {:#x} to {name}: device status {}", qp.qpn, e.0));
        }
    }
}
