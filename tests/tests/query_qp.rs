//! QUERY_QP (0x42) against two linked devices: the state is the device's
//! own, so an error completion shows as IBTCA_QPS_ERR on the requester,
//! and a responder error (a bad R_Key) on the responder, in RTR as in
//! RTS; from ERR only RESET or ERR follow. The PSNs are the transport's
//! running ones; the rest is what MODIFY_QP set, zero again after RESET.
//! Unknown QP numbers and non-zero reserved bytes fail with their errno,
//! and the device goes on serving.

use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side};
use ibtca_tests::sim_guest::{remote, send_wqe, CmdFailed, Qp};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(10);
const EINVAL: u16 = 22;
const ENOENT: u16 = 2;

/// QUERY_QP of `qpn`: out0 and the reply, or the device's status.
fn query(s: &mut Side, qpn: u32) -> Result<(u32, QpAttr), CmdFailed> {
    let h = CmdHandle {
        handle: qpn.into(),
        ..Default::default()
    };
    let e = s.g.cmd_entry(CMD_QUERY_QP, h.as_slice())?;
    let mut a = QpAttr::default();
    a.as_mut_slice()
        .copy_from_slice(&e.params[..size_of::<QpAttr>()]);
    Ok((e.out0.to_native(), a))
}

/// QUERY_QP that must succeed; checks out0 against the reply's state.
fn attr(s: &mut Side, qpn: u32) -> QpAttr {
    let (out0, a) = query(s, qpn).unwrap_or_else(|e| panic!("QUERY_QP {qpn:#x}: status {}", e.0));
    assert_eq!(out0, u32::from(a.state), "out0 is the state");
    a
}

fn modify(s: &mut Side, m: CmdModifyQp) -> Result<(), CmdFailed> {
    s.g.modify_qp(&m)
}

fn to_state(s: &mut Side, qpn: u32, state: u8) -> Result<(), CmdFailed> {
    modify(
        s,
        CmdModifyQp {
            qpn: qpn.into(),
            attr_mask: QP_ATTR_STATE.into(),
            state,
            ..Default::default()
        },
    )
}

/// INIT → RTR towards (dlid, dest_qpn) with RQ PSN `rq_psn`.
fn to_rtr(s: &mut Side, qpn: u32, dlid: u16, dest_qpn: u32, rq_psn: u32) {
    modify(
        s,
        CmdModifyQp {
            qpn: qpn.into(),
            attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
            state: QPS_INIT,
            access: (ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ).into(),
            ..Default::default()
        },
    )
    .expect("INIT");
    modify(
        s,
        CmdModifyQp {
            qpn: qpn.into(),
            attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
            state: QPS_RTR,
            path_mtu: MTU_256,
            dlid: dlid.into(),
            sl: 3,
            dest_qpn: dest_qpn.into(),
            rq_psn: rq_psn.into(),
            ..Default::default()
        },
    )
    .expect("RTR");
}

/// RTR → RTS with SQ PSN `sq_psn`.
fn to_rts(s: &mut Side, qpn: u32, sq_psn: u32) -> Result<(), CmdFailed> {
    modify(
        s,
        CmdModifyQp {
            qpn: qpn.into(),
            attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
            state: QPS_RTS,
            sq_psn: sq_psn.into(),
            timeout: 14,
            retry_cnt: 6,
            rnr_retry: 7,
            min_rnr_timer: 2,
            max_rd_atomic: 2,
            ..Default::default()
        },
    )
}

/// A WRITE of 8 bytes from `a` through `rkey` (B's region or not).
fn write(a: &mut Side, qp: &mut Qp, wr_id: u64, to: u64, rkey: u32) {
    let w = remote(send_wqe(WR_RDMA_WRITE, wr_id, a.buf, 8, a.lkey), to, rkey);
    a.g.post_send(qp, &w);
}

#[test]
fn query_qp_reports_each_state_and_the_attributes_modify_set() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    let a = attr(&mut p.a, qa);
    assert_eq!(
        a.as_slice(),
        QpAttr {
            state: QPS_RESET,
            qp_type: QPT_RC,
            max_dest_rd_atomic: 16,
            ..Default::default()
        }
        .as_slice(),
        "a new QP: RESET, nothing set, the device's responder resources"
    );

    to_rtr(&mut p.a, qa, 2, qb, 0x12_3456);
    let a = attr(&mut p.a, qa);
    assert_eq!(
        (a.state, a.path_mtu, a.sl, a.dlid.to_native()),
        (QPS_RTR, MTU_256, 3, 2)
    );
    assert_eq!(
        (
            a.dest_qpn.to_native(),
            a.rq_psn.to_native(),
            a.sq_psn.to_native()
        ),
        (qb, 0x12_3456, 0)
    );
    assert_eq!(
        a.access.to_native(),
        ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ
    );

    to_rts(&mut p.a, qa, 0xff_fffe).expect("RTS");
    let a = attr(&mut p.a, qa);
    assert_eq!(a.state, QPS_RTS);
    assert_eq!(
        (
            a.timeout,
            a.retry_cnt,
            a.rnr_retry,
            a.min_rnr_timer,
            a.max_rd_atomic
        ),
        (14, 6, 7, 2, 2)
    );
    assert_eq!(
        (a.sq_psn.to_native(), a.rq_psn.to_native()),
        (0xff_fffe, 0x12_3456)
    );

    to_state(&mut p.a, qa, QPS_ERR).expect("RTS -> ERR");
    assert_eq!(attr(&mut p.a, qa).state, QPS_ERR);
    assert_eq!(
        to_rts(&mut p.a, qa, 1).map_err(|e| e.0),
        Err(EINVAL),
        "ERR -> RTS"
    );
    to_state(&mut p.a, qa, QPS_RESET).expect("ERR -> RESET");
    let a = attr(&mut p.a, qa);
    assert_eq!(
        (
            a.state,
            a.path_mtu,
            a.dlid.to_native(),
            a.dest_qpn.to_native()
        ),
        (QPS_RESET, 0, 0, 0),
        "RESET clears the attributes"
    );
    assert_eq!((a.sq_psn.to_native(), a.rq_psn.to_native()), (0, 0));
}

#[test]
fn query_qp_reports_the_transports_running_psns() {
    let mut p = LinkedPair::start(PairOptions::default());
    p.connect(MTU_256);
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    // 600 bytes at MTU 256: three packets, PSNs 100, 101 and 102.
    let mut qp = p.a.qp;
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, p.a.buf, 600, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut qp, &w);
    p.a.expect_completion(1, WC_SUCCESS, T);
    let a = attr(&mut p.a, qa);
    assert_eq!((a.state, a.sq_psn.to_native()), (QPS_RTS, 103));
    assert_eq!(a.rq_psn.to_native(), 100, "A received no request");
    let b = attr(&mut p.b, qb);
    assert_eq!((b.state, b.rq_psn.to_native()), (QPS_RTS, 103));
    assert_eq!(b.sq_psn.to_native(), 100, "B sent no request");
}

#[test]
fn a_bad_rkey_puts_the_requester_and_the_rts_responder_in_err() {
    let mut p = LinkedPair::start(PairOptions::default());
    p.connect(MTU_4096);
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    let mut qp = p.a.qp;
    write(&mut p.a, &mut qp, 7, p.b.buf, p.b.rkey ^ 0x100);
    p.a.expect_completion(7, WC_REM_ACCESS_ERR, T);
    let a = attr(&mut p.a, qa);
    assert_eq!(a.state, QPS_ERR, "the requester after WC_REM_ACCESS_ERR");
    let b = attr(&mut p.b, qb);
    assert_eq!(b.state, QPS_ERR, "the responder that NAKed it");
    assert_eq!(b.rq_psn.to_native(), 100, "the NAKed request was not taken");
    // IBA 10.3.1: out of ERR only to RESET (or ERR again).
    assert_eq!(to_rts(&mut p.a, qa, 1).map_err(|e| e.0), Err(EINVAL));
    to_state(&mut p.b, qb, QPS_ERR).expect("ERR -> ERR");
    to_state(&mut p.a, qa, QPS_RESET).expect("ERR -> RESET");
    assert_eq!(attr(&mut p.a, qa).state, QPS_RESET);
    assert_eq!(attr(&mut p.b, qb).state, QPS_ERR, "B's QP stays in ERR");
}

#[test]
fn a_bad_rkey_puts_a_responder_in_rtr_in_err_and_it_cannot_reach_rts() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    p.a.g.connect(&p.a.qp, 2, qb, MTU_4096, ACCESS_REMOTE_WRITE);
    to_rtr(&mut p.b, qb, 1, qa, 100);
    let mut qp = p.a.qp;
    write(&mut p.a, &mut qp, 8, p.b.buf, p.b.rkey ^ 0x100);
    p.a.expect_completion(8, WC_REM_ACCESS_ERR, T);
    assert_eq!(attr(&mut p.b, qb).state, QPS_ERR, "the RTR responder");
    assert_eq!(
        to_rts(&mut p.b, qb, 100).map_err(|e| e.0),
        Err(EINVAL),
        "a responder in ERR cannot go to RTS"
    );
    to_state(&mut p.b, qb, QPS_RESET).expect("ERR -> RESET");
    assert_eq!(attr(&mut p.b, qb).state, QPS_RESET);
    // The device serves new QPs (the simulated guest's rings start at 0).
    for s in [&mut p.a, &mut p.b] {
        let cq = s.cq;
        s.qp = s.g.create_qp(s.pd, &cq, &cq, 4);
    }
    p.connect(MTU_4096);
    let mut qp = p.a.qp;
    p.b.g.write(p.b.buf, &[0; 8]);
    p.a.g.write(p.a.buf, b"qstate!!");
    write(&mut p.a, &mut qp, 9, p.b.buf, p.b.rkey);
    p.a.expect_completion(9, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf, 8), b"qstate!!");
    let qb = p.b.qp.qpn;
    assert_eq!(attr(&mut p.b, qb).state, QPS_RTS);
}

#[test]
fn query_qp_refuses_unknown_qps_and_reserved_bytes() {
    let mut p = LinkedPair::start(PairOptions::default());
    let qa = p.a.qp.qpn;
    for qpn in [0, 1, 0x3ff, qa + 1, 0xff_ffff, u32::MAX] {
        assert_eq!(
            query(&mut p.a, qpn).map(|_| ()),
            Err(CmdFailed(ENOENT)),
            "{qpn:#x}"
        );
    }
    let mut h = CmdHandle {
        handle: qa.into(),
        ..Default::default()
    };
    h.rsvd[43] = 1;
    let e = p.a.g.cmd_entry(CMD_QUERY_QP, h.as_slice()).map(|_| ());
    assert_eq!(e, Err(CmdFailed(EINVAL)), "a reserved byte set");
    // Only the QP number given (the rest of the entry zero): answered.
    let e =
        p.a.g
            .cmd_entry(CMD_QUERY_QP, &qa.to_le_bytes())
            .expect("4 bytes");
    assert_eq!(e.out0.to_native(), u32::from(QPS_RESET));
    p.a.g
        .cmd(CMD_DESTROY_QP, h_of(qa).as_slice())
        .expect("destroy");
    assert_eq!(
        query(&mut p.a, qa).map(|_| ()),
        Err(CmdFailed(ENOENT)),
        "a destroyed QP"
    );
    // The device still serves.
    let cq = p.a.cq;
    let qp = p.a.g.create_qp(p.a.pd, &cq, &cq, 4);
    assert_eq!(attr(&mut p.a, qp.qpn).state, QPS_RESET);
}

fn h_of(handle: u32) -> CmdHandle {
    CmdHandle {
        handle: handle.into(),
        ..Default::default()
    }
}
