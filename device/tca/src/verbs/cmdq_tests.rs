//! Tests of the command queue, driving `Verbs` the way the driver does:
//! entries written into a ring in guest memory, a doorbell, `process`.

use std::time::Instant;

use vm_memory::{ByteValued, Le32, Le64};

use super::super::{
    abi::*, cq::CqError, datapath::Doorbell, mr::RemoteRight, mw::BindRequest, testmem::TestMem,
    Limits, PortAttrs, VerbsError,
};
use super::*;
use crate::regs::{DB_CQ, DB_SQ, PORT_ACTIVE, PORT_DOWN};
use crate::transport::AccessError;
use crate::verbs::keys::KeyUse;

const MEM: u64 = 0x10_0000;
const CMDQ: u64 = 0x1000;
const CQ_RING: u64 = 0x8000;
const SQ: u64 = 0x2_0000;
const RQ: u64 = 0x3_0000;
const QUASI: u64 = 0x4_0000;
const BUF: u64 = 0x8_0000;

const ENOENT: u16 = 2;
const ENOMEM: u16 = 12;
const EBUSY: u16 = 16;
const EINVAL: u16 = 22;
const EOPNOTSUPP: u16 = 95;

struct Harness {
    m: TestMem,
    q: CmdQueue,
    v: Verbs,
    pi: u32,
}

fn as_params<T: ByteValued>(t: &T) -> [u8; 48] {
    let mut p = [0u8; 48];
    let s = t.as_slice();
    p[..s.len()].copy_from_slice(s);
    p
}

fn handle(h: u32) -> [u8; 48] {
    as_params(&CmdHandle {
        handle: Le32::from(h),
        ..Default::default()
    })
}

impl Harness {
    fn new(limits: Limits) -> Self {
        let m = TestMem::new(MEM);
        let mut q = CmdQueue::new();
        q.write_base_lo(CMDQ as u32);
        q.write_base_hi(0);
        assert!(q.write_log_size(3));
        Harness {
            m,
            q,
            v: Verbs::new(limits, PortAttrs::default(), 99),
            pi: 0,
        }
    }

    fn entry(&self, index: u32) -> u64 {
        CMDQ + 64 * u64::from(index & 7)
    }

    /// Writes one command without ringing the doorbell.
    fn post(&mut self, opcode: u8, flags: u8, params: [u8; 48]) -> u64 {
        let addr = self.entry(self.pi);
        let e = CmdEntry {
            opcode,
            flags,
            status: CMD_ST_PENDING.into(),
            token: Le32::from(self.pi),
            params,
            out0: Le32::from(0xdead),
            out1: Le32::from(0xbeef),
        };
        self.m.write_obj(addr, &e);
        self.pi = self.pi.wrapping_add(1);
        addr
    }

    /// Runs one command: (status, out0, out1).
    fn cmd(&mut self, opcode: u8, params: [u8; 48]) -> (u16, u32, u32) {
        let addr = self.post(opcode, 0, params);
        self.q.doorbell(self.pi);
        assert!(self.q.process(&self.m.mem, &mut self.v).is_empty());
        let e: CmdEntry = self.m.read_obj(addr);
        (e.status.to_native(), e.out0.to_native(), e.out1.to_native())
    }

    fn ok(&mut self, opcode: u8, params: [u8; 48]) -> (u32, u32) {
        let (st, a, b) = self.cmd(opcode, params);
        assert_eq!(st, CMD_ST_OK, "command {opcode:#x}");
        (a, b)
    }

    /// The reply of the last command, read from its entry's parameters.
    fn reply<T: ByteValued + Default>(&self) -> T {
        let e: CmdEntry = self.m.read_obj(self.entry(self.pi.wrapping_sub(1)));
        let mut t = T::default();
        let n = t.as_slice().len();
        t.as_mut_slice().copy_from_slice(&e.params[..n]);
        t
    }

    fn pd(&mut self) -> u32 {
        self.ok(CMD_CREATE_PD, [0; 48]).0
    }

    fn reg_mr(
        &mut self,
        pdn: u32,
        access: u32,
        iova: u64,
        length: u64,
        gpa: u64,
    ) -> (u16, u32, u32) {
        let p = CmdRegMr {
            pdn: pdn.into(),
            access: access.into(),
            iova: iova.into(),
            length: length.into(),
            gpa: gpa.into(),
            ..Default::default()
        };
        self.cmd(CMD_REG_MR, as_params(&p))
    }

    fn create_cq(&mut self, ring: u64, log: u8, vector: u8) -> (u16, u32, u32) {
        let p = CmdCreateCq {
            ring: ring.into(),
            log_entries: log,
            vector,
            ..Default::default()
        };
        self.cmd(CMD_CREATE_CQ, as_params(&p))
    }

    fn create_qp(&mut self, pdn: u32, scq: u32, rcq: u32, log: u8) -> (u16, u32, u32) {
        let p = CmdCreateQp {
            pdn: pdn.into(),
            send_cqn: scq.into(),
            recv_cqn: rcq.into(),
            log_sizes: [log, log, log, 0],
            sq: SQ.into(),
            rq: RQ.into(),
            quasi: QUASI.into(),
            ..Default::default()
        };
        self.cmd(CMD_CREATE_QP, as_params(&p))
    }

    fn modify(&mut self, qpn: u32, mask: u32, state: u8, access: u32) -> u16 {
        let p = CmdModifyQp {
            qpn: qpn.into(),
            attr_mask: (mask | QP_ATTR_STATE).into(),
            state,
            path_mtu: MTU_4096,
            retry_cnt: 7,
            dest_qpn: Le32::from(0x400),
            dlid: 3.into(),
            access: access.into(),
            ..Default::default()
        };
        self.cmd(CMD_MODIFY_QP, as_params(&p)).0
    }

    /// PD, CQ and a QP in RTS granting `access` to incoming requests.
    fn connected_qp(&mut self, access: u32) -> (u32, u32, u32) {
        let pd = self.pd();
        let (_, cq, _) = self.create_cq(CQ_RING, 4, 1);
        let (st, qpn, _) = self.create_qp(pd, cq, cq, 4);
        assert_eq!(st, 0);
        assert_eq!(self.modify(qpn, QP_ATTR_ACCESS, QPS_INIT, access), 0);
        let rtr = QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
        assert_eq!(self.modify(qpn, rtr, QPS_RTR, 0), 0);
        assert_eq!(
            self.modify(qpn, QP_ATTR_SQ_PSN | QP_ATTR_RETRY, QPS_RTS, 0),
            0
        );
        (pd, cq, qpn)
    }
}

fn harness() -> Harness {
    Harness::new(Limits::default())
}

#[test]
fn query_port() {
    let mut h = harness();
    h.v.port.guid = 0x1200_0000_0001_0002;
    h.v.port.data_vls = 2;
    h.v.port.cap_mask = 0x0251_0002;
    assert_eq!(
        h.ok(CMD_QUERY_PORT, [0; 48]),
        (1 | PORT_ACTIVE << 16, u32::from(MTU_4096))
    );
    let a: PortAttr = h.reply();
    let expected = PortAttr {
        port_guid: 0x1200_0000_0001_0002.into(),
        max_msg_sz: (1u32 << 31).into(),
        lid: 1.into(),
        sm_lid: 0.into(),
        pkey: 0xffff.into(),
        state: PORT_ACTIVE as u8,
        phys_state: PORT_PHYS_LINK_UP,
        max_mtu: MTU_4096,
        active_mtu: MTU_4096,
        active_width: PORT_WIDTH_4X,
        active_speed: PORT_SPEED_QDR,
        data_vls: 2,
        lmc: 0,
        rsvd0: [0; 2],
        cap_mask: 0x0251_0002.into(),
        rsvd: [0; 16],
    };
    assert_eq!(a, expected);
    // A port without its peer: down, polling.
    h.v.port.state = PORT_DOWN;
    assert_eq!(h.ok(CMD_QUERY_PORT, [0; 48]).0 >> 16, PORT_DOWN);
    let a: PortAttr = h.reply();
    assert_eq!(
        (a.state, a.phys_state),
        (PORT_DOWN as u8, PORT_PHYS_POLLING)
    );
}

#[test]
fn query_device_reports_the_limits_the_device_enforces() {
    let limits = Limits {
        pds: 3,
        keys: 5,
        cqs: 2,
        qps: 4,
        srqs: 2,
    };
    let mut h = Harness::new(limits);
    h.v.port.node_guid = 0x1200_0000_0001_0001;
    assert_eq!(h.ok(CMD_QUERY_DEVICE, [0; 48]), (0, 0));
    let d: DeviceAttr = h.reply();
    let expected = DeviceAttr {
        node_guid: 0x1200_0000_0001_0001.into(),
        max_mr_size: u64::MAX.into(),
        max_qp: 4.into(),
        max_cq: 2.into(),
        max_mr: 5.into(),
        max_pd: 3.into(),
        max_cqe: (1u32 << 15).into(),
        max_qp_wr: (1u32 << 15).into(),
        max_sge: MAX_SEND_SGE,
        max_qp_rd_atom: 16,
        max_mtu: MTU_4096,
        phys_ports: 1,
        caps: (DEV_CAP_ATOMIC | DEV_CAP_MW).into(),
    };
    assert_eq!(d, expected);
    // What it reports is what it enforces: the fourth PD, the sixth key,
    // the third CQ are refused with ENOMEM.
    let pd = h.pd();
    for _ in 0..2 {
        h.pd();
    }
    assert_eq!(h.cmd(CMD_CREATE_PD, [0; 48]).0, ENOMEM);
    for i in 0..5 {
        let (st, ..) = h.reg_mr(pd, ACCESS_LOCAL_WRITE, BUF, 4096, BUF);
        assert_eq!(st, CMD_ST_OK, "key {i}");
    }
    assert_eq!(h.reg_mr(pd, ACCESS_LOCAL_WRITE, BUF, 4096, BUF).0, ENOMEM);
    for i in 0..2u64 {
        assert_eq!(h.create_cq(CQ_RING + i * 0x1000, 3, 1).0, CMD_ST_OK);
    }
    assert_eq!(h.create_cq(CQ_RING + 0x2000, 3, 1).0, ENOMEM);
    // Rings past the reported sizes are refused.
    assert_eq!(h.create_cq(CQ_RING, 16, 1).0, EINVAL);
}

#[test]
fn queries_take_no_parameters() {
    let mut h = harness();
    for op in [CMD_QUERY_PORT, CMD_QUERY_DEVICE] {
        for at in 0..48 {
            let mut p = [0u8; 48];
            p[at] = 0x80;
            let addr = h.post(op, 0, p);
            h.q.doorbell(h.pi);
            assert!(h.q.process(&h.m.mem, &mut h.v).is_empty());
            let e: CmdEntry = h.m.read_obj(addr);
            // EINVAL, no out-parameters, the parameters left as they were.
            assert_eq!(
                (e.status.to_native(), e.out0.to_native(), e.out1.to_native()),
                (EINVAL, 0, 0),
                "opcode {op:#x}, byte {at}"
            );
            assert_eq!(e.params, p, "opcode {op:#x}, byte {at}");
        }
    }
    assert_eq!(h.q.stats().failed, 96);
}

#[test]
fn a_reply_is_written_before_the_status_in_one_entry() {
    let mut h = harness();
    // Two queries in one batch, each entry whole; a third command after
    // them keeps its own parameters.
    let a = h.post(CMD_QUERY_DEVICE, 0, [0; 48]);
    let b = h.post(CMD_QUERY_PORT, CMD_F_IRQ, [0; 48]);
    let c = h.post(CMD_DESTROY_PD, 0, handle(0x77));
    h.q.doorbell(h.pi);
    assert_eq!(h.q.process(&h.m.mem, &mut h.v), vec![CMDQ_VECTOR]);
    let ea: CmdEntry = h.m.read_obj(a);
    let eb: CmdEntry = h.m.read_obj(b);
    let ec: CmdEntry = h.m.read_obj(c);
    assert_eq!(ea.status.to_native(), CMD_ST_OK);
    assert_eq!(ea.params[..], h.v.device_attr().as_slice()[..]);
    assert_eq!(eb.params[..], h.v.port_attr().as_slice()[..]);
    assert_eq!((ea.opcode, ea.token.to_native()), (CMD_QUERY_DEVICE, 0));
    assert_eq!(ec.status.to_native(), ENOENT);
    assert_eq!(ec.params, handle(0x77));
}

#[test]
fn object_lifecycle_through_the_queue() {
    let mut h = harness();
    let (pd, cq, qpn) = h.connected_qp(ACCESS_REMOTE_WRITE);
    assert!((0x400..1 << 24).contains(&qpn));
    let acc = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_MW_BIND;
    let (st, lkey, rkey) = h.reg_mr(pd, acc, 0x7000_0000, 0x1000, BUF);
    assert_eq!(st, 0);
    assert_ne!(lkey, rkey);
    let (mw, _) = h.ok(CMD_ALLOC_MW, handle(pd));
    // A type 1 window: its own key slot, freed by DEALLOC_MW.
    let (mw1, _) = h.ok(CMD_ALLOC_MW_TYPE1, handle(pd));
    assert_ne!(mw1 >> 8, mw >> 8);
    assert_eq!(h.cmd(CMD_ALLOC_MW_TYPE1, handle(0x77)).0, ENOENT);
    h.ok(CMD_DEALLOC_MW, handle(mw1));
    // Destruction order matters: users first.
    assert_eq!(h.cmd(CMD_DESTROY_PD, handle(pd)).0, EBUSY);
    assert_eq!(h.cmd(CMD_DESTROY_CQ, handle(cq)).0, EBUSY);
    h.ok(CMD_DEALLOC_MW, handle(mw));
    h.ok(CMD_DEREG_MR, handle(lkey));
    h.ok(CMD_DESTROY_QP, handle(qpn));
    h.ok(CMD_DESTROY_CQ, handle(cq));
    h.ok(CMD_DESTROY_PD, handle(pd));
    for (op, hd) in [
        (CMD_DESTROY_QP, qpn),
        (CMD_DESTROY_CQ, cq),
        (CMD_DESTROY_PD, pd),
        (CMD_DEREG_MR, lkey),
        (CMD_DEALLOC_MW, mw),
    ] {
        assert_eq!(h.cmd(op, handle(hd)), (ENOENT, 0, 0), "op {op:#x} twice");
    }
    assert_eq!(h.q.stats().faults, 0);
}

#[test]
fn every_error_code() {
    let mut h = Harness::new(Limits {
        pds: 1,
        keys: 1,
        cqs: 1,
        qps: 1,
        srqs: 1,
    });
    assert_eq!(h.cmd(0x7f, [0; 48]), (EOPNOTSUPP, 0, 0));
    let pd = h.pd();
    assert_eq!(h.cmd(CMD_CREATE_PD, [0; 48]).0, ENOMEM);
    assert_eq!(h.reg_mr(pd, 1 << 9, 0, 1, BUF).0, EINVAL);
    assert_eq!(h.reg_mr(pd, 0, 0, 0, BUF).0, EINVAL);
    assert_eq!(h.reg_mr(pd ^ 0x400, 0, 0, 1, BUF).0, ENOENT);
    assert_eq!(h.reg_mr(pd, 0, 0, 1, BUF).0, 0);
    assert_eq!(h.reg_mr(pd, 0, 0, 1, BUF).0, ENOMEM, "one key slot");
    assert_eq!(h.cmd(CMD_ALLOC_MW, handle(pd)).0, ENOMEM);
    assert_eq!(h.cmd(CMD_ALLOC_MW, handle(0)).0, ENOENT);
    assert_eq!(h.cmd(CMD_DESTROY_PD, handle(pd)).0, EBUSY);
    assert_eq!(h.create_cq(CQ_RING, MAX_CQ_LOG_FOR_TEST + 1, 1).0, EINVAL);
    assert_eq!(h.create_cq(CQ_RING, 2, 32).0, EINVAL, "no such vector");
    assert_eq!(h.create_cq(u64::MAX - 31, 2, 1).0, EINVAL);
    let (_, cq, _) = h.create_cq(CQ_RING, 2, 1);
    assert_eq!(h.create_cq(CQ_RING, 2, 1).0, ENOMEM);
    assert_eq!(h.create_qp(pd, cq, cq ^ 0x400, 2).0, ENOENT);
    assert_eq!(h.create_qp(pd, cq, cq, 16).0, EINVAL);
    let (_, qpn, _) = h.create_qp(pd, cq, cq, 2);
    assert_eq!(h.create_qp(pd, cq, cq, 2).0, ENOMEM);
    assert_eq!(h.modify(qpn, 0, QPS_RTS, 0), EINVAL, "RESET -> RTS");
    assert_eq!(h.modify(qpn ^ 0x400, 0, QPS_INIT, 0), ENOENT);
    assert_eq!(h.cmd(CMD_DESTROY_CQ, handle(cq)).0, EBUSY);
    assert_eq!(h.cmd(CMD_DESTROY_CQ, handle(0xffff_ffff)).0, ENOENT);
    let s = h.q.stats();
    assert_eq!((s.ok, s.faults), (4, 0));
}

const MAX_CQ_LOG_FOR_TEST: u8 = super::super::cq::MAX_CQ_LOG;

#[test]
fn irq_flag_raises_vector_zero_once_per_batch() {
    let mut h = harness();
    h.post(CMD_CREATE_PD, 0, [0; 48]);
    h.q.doorbell(h.pi);
    assert!(h.q.process(&h.m.mem, &mut h.v).is_empty());
    let a = h.post(CMD_CREATE_PD, CMD_F_IRQ, [0; 48]);
    let b = h.post(0xee, CMD_F_IRQ, [0; 48]);
    h.q.doorbell(h.pi);
    assert_eq!(h.q.process(&h.m.mem, &mut h.v), vec![CMDQ_VECTOR]);
    let ea: CmdEntry = h.m.read_obj(a);
    let eb: CmdEntry = h.m.read_obj(b);
    assert_eq!(ea.status.to_native(), 0);
    assert_eq!(eb.status.to_native(), EOPNOTSUPP);
    assert_eq!(eb.token.to_native(), 2, "token untouched");
    assert!(h.q.process(&h.m.mem, &mut h.v).is_empty(), "nothing new");
}

#[test]
fn ring_wraps() {
    let mut h = harness();
    let mut pds = Vec::new();
    for _ in 0..20 {
        pds.push(h.pd());
    }
    pds.sort_unstable();
    pds.dedup();
    assert_eq!(pds.len(), 20);
    assert_eq!(h.q.stats().ok, 20);
}

#[test]
fn doorbells_out_of_range_are_ignored() {
    let mut h = harness();
    h.q.doorbell(9);
    h.q.doorbell(u32::MAX);
    assert_eq!(h.q.stats().bad_doorbells, 2);
    assert!(h.q.process(&h.m.mem, &mut h.v).is_empty());
    assert_eq!(h.q.stats().ok + h.q.stats().failed, 0);
    h.pd();
    h.q.doorbell(0);
    assert_eq!(h.q.stats().bad_doorbells, 3, "producer went back");
    let mut idle = CmdQueue::new();
    idle.doorbell(1);
    assert_eq!(idle.stats().bad_doorbells, 1);
    assert!(idle.process(&h.m.mem, &mut h.v).is_empty());
}

#[test]
fn hostile_queue_set_up() {
    let mut q = CmdQueue::new();
    q.write_base_lo(0x1000);
    assert!(!q.write_log_size(u32::from(MAX_CMDQ_LOG) + 1));
    assert!(!q.write_log_size(u32::MAX));
    assert_eq!(q.log_size(), u32::MAX, "register reads back");
    q.write_base_lo(0x1008);
    assert!(!q.write_log_size(2), "misaligned");
    q.write_base_lo(0xffff_ffc0);
    q.write_base_hi(u32::MAX);
    assert!(!q.write_log_size(1), "runs past the address space");
    assert!(
        q.write_log_size(0),
        "one entry in the last 64 bytes is fine"
    );
    assert_eq!((q.base_lo(), q.base_hi()), (0xffff_ffc0, u32::MAX));
    assert!(q.is_running());
}

#[test]
fn unreadable_entries_are_skipped() {
    let mut h = harness();
    // Two entries: the first in memory, the second past its end.
    h.q.write_base_lo((MEM - 64) as u32);
    assert!(h.q.write_log_size(1));
    let e = CmdEntry {
        opcode: CMD_CREATE_PD,
        flags: CMD_F_IRQ,
        ..Default::default()
    };
    h.m.write_obj(MEM - 64, &e);
    h.q.doorbell(2);
    assert_eq!(h.q.process(&h.m.mem, &mut h.v), vec![CMDQ_VECTOR]);
    let s = h.q.stats();
    assert_eq!((s.ok, s.faults), (1, 1), "slot 1 faults");
    h.q.doorbell(3);
    assert_eq!(h.q.process(&h.m.mem, &mut h.v), vec![CMDQ_VECTOR]);
    assert_eq!(h.q.stats().ok, 2, "slot 0 again after the fault");
    let back: CmdEntry = h.m.read_obj(MEM - 64);
    assert_eq!(back.status.to_native(), 0);
    assert_ne!(back.out0.to_native(), 0);
}

#[test]
fn hostile_parameters_do_not_panic() {
    let mut h = harness();
    for op in 0..=255u8 {
        for fill in [0x00, 0xff, 0x80] {
            let (st, _, _) = h.cmd(op, [fill; 48]);
            assert_ne!(st, CMD_ST_PENDING);
        }
    }
}

#[test]
fn data_path_checks_use_the_qp() {
    let mut h = harness();
    let (pd, cq, qpn) = h.connected_qp(ACCESS_REMOTE_WRITE);
    let acc = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_MW_BIND;
    let (_, lkey, rkey) = h.reg_mr(pd, acc, 0x1000, 0x1000, BUF);
    assert_eq!(
        h.v.check_remote(qpn, rkey, 0x1000, 8, RemoteRight::Write)
            .map(|g| g[0].gpa),
        Ok(BUF)
    );
    assert_eq!(
        h.v.check_remote(qpn, rkey, 0x1000, 8, RemoteRight::Read),
        Err(AccessError::NoRight),
        "the QP does not enable remote reads"
    );
    assert_eq!(
        h.v.check_local(qpn, lkey, 0x1fff, 1, true)
            .map(|r| r[0].gpa),
        Ok(BUF + 0xfff)
    );
    assert_eq!(
        h.v.check_local(qpn + 1, lkey, 0x1000, 1, true),
        Err(AccessError::Invalid)
    );
    // A QP of another PD.
    let pd2 = h.pd();
    let (_, cq2, _) = h.create_cq(CQ_RING + 0x1000, 2, 2);
    let p = CmdCreateQp {
        pdn: pd2.into(),
        send_cqn: cq2.into(),
        recv_cqn: cq2.into(),
        log_sizes: [0, 0, 0, 0],
        sq: (SQ + 0x8000).into(),
        rq: (RQ + 0x8000).into(),
        quasi: (QUASI + 0x8000).into(),
        ..Default::default()
    };
    let (st, qp2, _) = h.cmd(CMD_CREATE_QP, as_params(&p));
    assert_eq!(st, 0);
    assert_eq!(
        h.v.check_local(qp2, lkey, 0x1000, 1, false),
        Err(AccessError::WrongPd)
    );
    // Bind a window through the QP, invalidate it: the walk runs.
    let (mw, _) = h.ok(CMD_ALLOC_MW, handle(pd));
    let req = BindRequest {
        mw_rkey: mw,
        lkey,
        va: 0x1800,
        length: 0x100,
        access: ACCESS_REMOTE_WRITE,
    };
    assert_eq!(h.v.bind_mw(qp2, req), Err(AccessError::WrongPd));
    let key = h.v.bind_mw(qpn, req).unwrap();
    assert_eq!(h.cmd(CMD_DEREG_MR, handle(lkey)).0, EBUSY, "window bound");
    let slot = h.v.keys.acquire(qpn, pd, key, KeyUse::Read).unwrap();
    h.v.local_invalidate(qpn, key).unwrap();
    assert!(!h.v.keys.still_valid(qpn, slot));
    assert_eq!(
        h.v.check_remote(qpn, key, 0x1800, 1, RemoteRight::Write),
        Err(AccessError::BadKey)
    );
    h.ok(CMD_DEREG_MR, handle(lkey));
    // Completions and their interrupt.
    let cqe = Cqe {
        wr_id: Le64::from(5),
        ..Default::default()
    };
    assert_eq!(
        h.v.complete(&h.m.mem, cq, &cqe, false, Instant::now()),
        Ok(None)
    );
    h.v.doorbell(
        Doorbell::decode(
            DB_CQ,
            1 << 32 | u64::from(CQ_ARM_NEXT) << 24 | u64::from(cq),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        h.v.complete(&h.m.mem, cq, &cqe, false, Instant::now()),
        Ok(Some(1))
    );
    assert_eq!(
        h.v.complete(&h.m.mem, 0, &cqe, false, Instant::now()),
        Err(CqError::NoCq)
    );
    let written: Cqe = h.m.read_obj(CQ_RING + 32);
    assert_eq!((written.wr_id.to_native(), written.owner), (5, 1));
    // SQ doorbell beyond the ring puts the QP in error.
    let db = Doorbell::decode(DB_SQ, 17 << 32 | u64::from(qpn)).unwrap();
    assert_eq!(h.v.doorbell(db), Err(VerbsError::Invalid));
    assert_eq!(
        h.v.qps.get(qpn).unwrap().state(),
        super::super::qp_state::QpState::Err
    );
    assert_eq!(Doorbell::decode(0x118, 0), None);
    let unknown = Doorbell::decode(DB_SQ, 1 << 32 | 0x00ff_ffff).unwrap();
    assert_eq!(h.v.doorbell(unknown), Err(VerbsError::NotFound));
}

#[path = "cmdq_proptests.rs"]
mod proptests;
