//! Tests of `srq.rs` through the commands the driver sends: creation and
//! its checks, QPs on an SRQ, doorbells, the order WQEs are taken in, the
//! limit event, and destruction while in use.

use vm_memory::{ByteValued, Le32, Le64};

use super::super::abi::*;
use super::super::commands::execute;
use super::super::datapath::Doorbell;
use super::super::testmem::TestMem;
use super::super::{Limits, PortAttrs};
use super::*;

const RING: u64 = 0x1_0000;
const SQ: u64 = 0x2_0000;
const QUASI: u64 = 0x3_0000;
const CQ: u64 = 0x4_0000;

const ENOENT: u16 = 2;
const ENOMEM: u16 = 12;
const EBUSY: u16 = 16;
const EINVAL: u16 = 22;
const EFAULT: u16 = 14;

struct H {
    m: TestMem,
    v: Verbs,
    pd: u32,
    cq: u32,
}

fn params<T: ByteValued>(t: &T) -> [u8; 48] {
    let mut p = [0u8; 48];
    p[..t.as_slice().len()].copy_from_slice(t.as_slice());
    p
}

fn handle(h: u32) -> [u8; 48] {
    params(&CmdHandle {
        handle: h.into(),
        ..Default::default()
    })
}

impl H {
    fn new() -> Self {
        let limits = Limits {
            srqs: 2,
            ..Limits::default()
        };
        let mut h = H {
            m: TestMem::new(0x10_0000),
            v: Verbs::new(limits, PortAttrs::default(), 5),
            pd: 0,
            cq: 0,
        };
        h.pd = h.ok(CMD_CREATE_PD, [0; 48]).0;
        let cq = CmdCreateCq {
            ring: CQ.into(),
            log_entries: 4,
            ..Default::default()
        };
        h.cq = h.ok(CMD_CREATE_CQ, params(&cq)).0;
        h
    }

    fn cmd(&mut self, op: u8, p: [u8; 48]) -> (u16, Option<super::super::commands::Reply>) {
        execute(&mut self.v, &self.m.mem, op, &p)
    }

    fn ok(&mut self, op: u8, p: [u8; 48]) -> (u32, u32) {
        let (st, r) = self.cmd(op, p);
        assert_eq!(st, CMD_ST_OK, "command {op:#x}");
        let r = r.unwrap();
        (r.out0, r.out1)
    }

    fn create_srq(&mut self, log: u8, max_wr: u32, limit: u32) -> (u16, u32) {
        let p = CmdCreateSrq {
            pdn: self.pd.into(),
            log_entries: log,
            ring: RING.into(),
            max_wr: max_wr.into(),
            srq_limit: limit.into(),
            ..Default::default()
        };
        let (st, r) = self.cmd(CMD_CREATE_SRQ, params(&p));
        (st, r.map_or(0, |r| r.out0))
    }

    fn create_qp(&mut self, pdn: u32, srqn: u32, at: u64) -> (u16, u32) {
        let p = CmdCreateQp {
            pdn: pdn.into(),
            send_cqn: self.cq.into(),
            recv_cqn: self.cq.into(),
            log_sizes: [2, 0, 2, 0],
            sq: Le64::from(SQ + at),
            quasi: Le64::from(QUASI + at),
            srqn: Le32::from(srqn),
            ..Default::default()
        };
        let (st, r) = self.cmd(CMD_CREATE_QP, params(&p));
        (st, r.map_or(0, |r| r.out0))
    }

    /// Writes receive WQE `index` (wr_id 100 + index) into the SRQ ring.
    fn post(&self, log: u8, index: u32) {
        let w = RecvWqe {
            wr_id: (100 + u64::from(index)).into(),
            num_sge: 1,
            ..Default::default()
        };
        let slot = u64::from(index & ((1 << log) - 1));
        self.m.write_obj(RING + slot * 128, &w);
    }

    fn query(&mut self, srqn: u32) -> SrqAttr {
        let (st, r) = self.cmd(CMD_QUERY_SRQ, handle(srqn));
        assert_eq!(st, CMD_ST_OK);
        let r = r.unwrap();
        let mut a = SrqAttr::default();
        a.as_mut_slice().copy_from_slice(&r.data.unwrap());
        assert_eq!(
            (r.out0, r.out1),
            (a.srq_limit.to_native(), a.limit_events.to_native())
        );
        a
    }

    fn modify(&mut self, srqn: u32, mask: u32, max_wr: u32, limit: u32) -> u16 {
        let p = CmdModifySrq {
            srqn: srqn.into(),
            attr_mask: mask.into(),
            max_wr: max_wr.into(),
            srq_limit: limit.into(),
            ..Default::default()
        };
        self.cmd(CMD_MODIFY_SRQ, params(&p)).0
    }

    fn take(&mut self, srqn: u32) -> Option<u64> {
        self.v
            .take_srq_recv(srqn, &self.m.mem)
            .unwrap()
            .map(|w| w.wr_id)
    }
}

#[test]
fn create_checks_every_parameter_with_its_errno() {
    let mut h = H::new();
    assert_eq!(h.create_srq(3, 0, 0).0, EINVAL, "max_wr 0");
    assert_eq!(h.create_srq(3, 9, 0).0, EINVAL, "max_wr past the ring");
    assert_eq!(h.create_srq(3, 8, 8).0, EINVAL, "limit not below max_wr");
    assert_eq!(h.create_srq(16, 8, 0).0, EINVAL, "ring past 2^15");
    let p = CmdCreateSrq {
        pdn: (h.pd + 1).into(),
        log_entries: 3,
        ring: RING.into(),
        max_wr: 8u32.into(),
        ..Default::default()
    };
    assert_eq!(h.cmd(CMD_CREATE_SRQ, params(&p)).0, ENOENT, "unknown PD");
    let mut bad = p;
    bad.pdn = h.pd.into();
    bad.ring = (RING + 64).into();
    assert_eq!(
        h.cmd(CMD_CREATE_SRQ, params(&bad)).0,
        EINVAL,
        "misaligned ring"
    );
    bad.ring = RING.into();
    bad.db_page = crate::regs::DB_PAGES.into();
    assert_eq!(
        h.cmd(CMD_CREATE_SRQ, params(&bad)).0,
        EINVAL,
        "doorbell page"
    );
    bad.db_page = 0.into();
    bad.rsvd[19] = 1;
    assert_eq!(
        h.cmd(CMD_CREATE_SRQ, params(&bad)).0,
        EINVAL,
        "reserved byte"
    );
    let (st, a) = h.create_srq(3, 8, 2);
    assert_eq!(st, CMD_ST_OK);
    assert_eq!(h.create_srq(3, 8, 0).0, CMD_ST_OK);
    assert_eq!(h.create_srq(3, 8, 0).0, ENOMEM, "max_srq reached");
    let q = h.query(a);
    assert_eq!(
        (
            q.max_wr.to_native(),
            q.srq_limit.to_native(),
            q.posted.to_native()
        ),
        (8, 2, 0)
    );
    assert_eq!((q.pdn.to_native(), q.log_entries), (h.pd, 3));
    // The PD is held while the SRQ lives.
    assert_eq!(h.cmd(CMD_DESTROY_PD, handle(h.pd)).0, EBUSY);
    assert_eq!(h.cmd(CMD_QUERY_SRQ, handle(a + (1 << 10))).0, ENOENT);
}

#[test]
fn qps_on_an_srq_take_its_receives_in_ring_order() {
    let mut h = H::new();
    let (_, srq) = h.create_srq(2, 4, 0);
    let (st, qa) = h.create_qp(h.pd, srq, 0);
    assert_eq!(st, CMD_ST_OK);
    let (st, qb) = h.create_qp(h.pd, srq, 0x1000);
    assert_eq!(st, CMD_ST_OK);
    assert_eq!(h.v.qps.get(qa).unwrap().srqn, Some(srq));
    // Another PD, an unknown SRQ, or an RQ beside the SRQ: refused.
    let other_pd = h.ok(CMD_CREATE_PD, [0; 48]).0;
    assert_eq!(h.create_qp(other_pd, srq, 0x2000).0, EINVAL);
    assert_eq!(h.create_qp(h.pd, srq + (1 << 10), 0x2000).0, ENOENT);
    let mut with_rq = CmdCreateQp {
        pdn: h.pd.into(),
        send_cqn: h.cq.into(),
        recv_cqn: h.cq.into(),
        log_sizes: [2, 2, 2, 0],
        sq: Le64::from(SQ + 0x3000),
        rq: Le64::from(SQ + 0x4000),
        quasi: Le64::from(QUASI + 0x3000),
        ..Default::default()
    };
    with_rq.srqn = srq.into();
    assert_eq!(h.cmd(CMD_CREATE_QP, params(&with_rq)).0, EINVAL);

    for i in 0..4 {
        h.post(2, i);
    }
    // Not past max_wr, never behind: refused, nothing changes.
    let db = |pi| Doorbell::Srq { srqn: srq, pi };
    assert_eq!(h.v.doorbell(db(5)), Err(VerbsError::Invalid));
    assert_eq!(h.take(srq), None);
    assert_eq!(h.v.doorbell(db(4)), Ok(None));
    assert_eq!(h.query(srq).posted.to_native(), 4);
    assert_eq!(h.v.doorbell(db(3)), Err(VerbsError::Invalid));
    // A QP on an SRQ has no RQ: its RQ doorbell is refused.
    assert_eq!(
        h.v.doorbell(Doorbell::Rq { qpn: qa, pi: 1 }),
        Err(VerbsError::Invalid)
    );
    assert_eq!(h.take(srq), Some(100));
    assert_eq!(h.take(srq), Some(101));
    assert_eq!(h.take(srq), Some(102));
    assert_eq!(h.query(srq).posted.to_native(), 1);
    // The ring wraps: two more posted behind the one left.
    h.post(2, 4);
    h.post(2, 5);
    assert_eq!(h.v.doorbell(db(6)), Ok(None));
    assert_eq!(h.take(srq), Some(103));
    assert_eq!(h.take(srq), Some(104));
    assert_eq!(h.take(srq), Some(105));
    assert_eq!(h.take(srq), None);

    // Destroy waits for its QPs.
    assert_eq!(h.cmd(CMD_DESTROY_SRQ, handle(srq)).0, EBUSY);
    h.ok(CMD_DESTROY_QP, handle(qa));
    assert_eq!(h.cmd(CMD_DESTROY_SRQ, handle(srq)).0, EBUSY);
    h.ok(CMD_DESTROY_QP, handle(qb));
    h.ok(CMD_DESTROY_SRQ, handle(srq));
    assert_eq!(h.cmd(CMD_DESTROY_SRQ, handle(srq)).0, ENOENT);
    h.ok(CMD_DESTROY_PD, handle(other_pd));
}

#[test]
fn the_limit_fires_once_below_it_and_disarms() {
    let mut h = H::new();
    let (_, srq) = h.create_srq(3, 8, 0);
    for i in 0..5 {
        h.post(3, i);
    }
    h.v.doorbell(Doorbell::Srq { srqn: srq, pi: 5 }).unwrap();
    // Arming checks the limit against max_wr; max_wr against the ring and
    // what is posted.
    assert_eq!(h.modify(srq, SRQ_ATTR_LIMIT, 0, 8), EINVAL);
    assert_eq!(h.modify(srq, SRQ_ATTR_MAX_WR, 9, 0), EINVAL);
    assert_eq!(h.modify(srq, SRQ_ATTR_MAX_WR, 4, 0), EINVAL, "5 posted");
    assert_eq!(h.modify(srq, 1 << 2, 0, 0), EINVAL, "unknown attribute");
    assert_eq!(h.modify(srq + (1 << 10), SRQ_ATTR_LIMIT, 0, 1), ENOENT);
    assert_eq!(
        h.modify(srq, SRQ_ATTR_MAX_WR | SRQ_ATTR_LIMIT, 6, 3),
        CMD_ST_OK
    );
    let q = h.query(srq);
    assert_eq!((q.max_wr.to_native(), q.srq_limit.to_native()), (6, 3));
    assert_eq!(h.take(srq), Some(100)); // 4 left
    assert_eq!(h.take(srq), Some(101)); // 3 left: not below 3
    assert!(!h.v.take_srq_events());
    assert_eq!(h.query(srq).limit_events.to_native(), 0);
    assert_eq!(h.take(srq), Some(102)); // 2 left: fires
    assert!(h.v.take_srq_events());
    assert!(!h.v.take_srq_events(), "told once");
    let q = h.query(srq);
    assert_eq!(
        (q.srq_limit.to_native(), q.limit_events.to_native()),
        (0, 1)
    );
    assert_eq!(h.take(srq), Some(103)); // disarmed: no second event
    assert!(!h.v.take_srq_events());
    // Armed again, it fires again.
    assert_eq!(h.modify(srq, SRQ_ATTR_LIMIT, 0, 2), CMD_ST_OK);
    assert_eq!(h.take(srq), Some(104));
    assert!(h.v.take_srq_events());
    assert_eq!(h.query(srq).limit_events.to_native(), 2);
}

#[test]
fn a_ring_outside_guest_memory_takes_nothing() {
    let mut h = H::new();
    let p = CmdCreateSrq {
        pdn: h.pd.into(),
        log_entries: 1,
        ring: (1u64 << 40).into(),
        max_wr: 2u32.into(),
        ..Default::default()
    };
    let srq = h.ok(CMD_CREATE_SRQ, params(&p)).0;
    h.v.doorbell(Doorbell::Srq { srqn: srq, pi: 1 }).unwrap();
    assert_eq!(
        h.v.take_srq_recv(srq, &h.m.mem),
        Err(super::super::qp::QpError::Dma)
    );
    assert_eq!(h.query(srq).posted.to_native(), 1, "nothing taken");
}

#[test]
fn query_device_reports_the_srq_and_inline_limits() {
    let mut h = H::new();
    let (st, r) = h.cmd(CMD_QUERY_DEVICE, {
        let mut p = [0u8; 48];
        p[0] = DEVICE_ATTR_EXT;
        p
    });
    assert_eq!(st, CMD_ST_OK);
    let mut a = DeviceAttrExt::default();
    a.as_mut_slice().copy_from_slice(&r.unwrap().data.unwrap());
    assert_eq!(a.max_srq.to_native(), 2);
    assert_eq!(a.max_srq_wr.to_native(), 1 << 15);
    assert_eq!(a.max_srq_sge, MAX_RECV_SGE);
    assert_eq!(a.max_recv_sge, MAX_RECV_SGE);
    assert_eq!(a.max_inline_data.to_native() as usize, MAX_INLINE);
    assert_eq!(a.max_qp_init_rd_atom, super::super::qp::MAX_INIT_RD_ATOMIC);
}

/// The new ring of a resize, away from the first.
const RING2: u64 = 0x5_0000;

impl H {
    fn resize(&mut self, srqn: u32, log: u8, ring: u64, max_wr: u32) -> u16 {
        let p = CmdResizeSrq {
            srqn: srqn.into(),
            log_entries: log,
            ring: ring.into(),
            max_wr: max_wr.into(),
            ..Default::default()
        };
        self.cmd(CMD_RESIZE_SRQ, params(&p)).0
    }
}

#[test]
fn a_resize_copies_the_posted_receives_into_the_new_ring_in_order() {
    let mut h = H::new();
    let (_, srq) = h.create_srq(2, 4, 1);
    let db = |pi| Doorbell::Srq { srqn: srq, pi };
    // Index 0 taken, 1..=4 posted: the old ring is full and has wrapped.
    for i in 0..5 {
        h.post(2, i);
        assert_eq!(h.v.doorbell(db(i + 1)), Ok(None));
        if i == 0 {
            assert_eq!(h.take(srq), Some(100));
        }
    }
    assert_eq!(h.v.doorbell(db(6)), Err(VerbsError::Invalid), "full");
    // Refused, nothing changed: smaller, misaligned, max_wr below what is
    // posted or past the new ring, a ring past the largest or outside
    // guest memory, reserved bytes, no such SRQ.
    assert_eq!(h.resize(srq, 1, RING2, 2), EINVAL, "smaller");
    assert_eq!(h.resize(srq, 4, RING2 + 8, 16), EINVAL, "misaligned");
    assert_eq!(h.resize(srq, 4, RING2, 3), EINVAL, "below posted");
    assert_eq!(h.resize(srq, 4, RING2, 17), EINVAL, "past the ring");
    assert_eq!(h.resize(srq, 20, RING2, 16), EINVAL, "past the largest");
    assert_eq!(h.resize(srq, 4, 1 << 40, 16), EFAULT, "outside memory");
    let mut bad = CmdResizeSrq {
        srqn: srq.into(),
        log_entries: 4,
        ring: RING2.into(),
        max_wr: 16.into(),
        ..Default::default()
    };
    bad.rsvd[27] = 1;
    assert_eq!(h.cmd(CMD_RESIZE_SRQ, params(&bad)).0, EINVAL, "reserved");
    assert_eq!(h.resize(srq + (1 << 10), 4, RING2, 16), ENOENT);
    let q = h.query(srq);
    assert_eq!((q.log_entries, q.max_wr.to_native()), (2, 4));
    assert_eq!(h.m.read_obj::<RecvWqe>(RING2 + 128).wr_id.to_native(), 0);

    // Indexes 1..=4 land in slots 1..=4 of a ring of 16; more fit behind.
    assert_eq!(h.resize(srq, 4, RING2, 16), CMD_ST_OK);
    let q = h.query(srq);
    assert_eq!(
        (q.log_entries, q.max_wr.to_native(), q.posted.to_native()),
        (4, 16, 4)
    );
    for i in 1..5u64 {
        assert_eq!(
            h.m.read_obj::<RecvWqe>(RING2 + 128 * i).wr_id.to_native(),
            100 + i
        );
    }
    for i in 5..17u32 {
        let w = RecvWqe {
            wr_id: (100 + u64::from(i)).into(),
            num_sge: 1,
            ..Default::default()
        };
        h.m.write_obj(RING2 + u64::from(i & 15) * 128, &w);
    }
    assert_eq!(h.v.doorbell(db(18)), Err(VerbsError::Invalid), "17 > 16");
    assert_eq!(h.v.doorbell(db(17)), Ok(None));
    for i in 1..17u64 {
        assert_eq!(h.take(srq), Some(100 + i), "index {i}");
    }
    assert_eq!(h.take(srq), None);
    // The limit stayed armed through the resize and fired on the way down.
    assert_eq!(h.query(srq).limit_events.to_native(), 1);
}
