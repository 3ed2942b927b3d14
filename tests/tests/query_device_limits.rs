//! Every per-object limit QUERY_DEVICE reports is the one the device
//! enforces, through vfio-user (no QEMU): CQEs per CQ, work requests per
//! queue, SGEs per work request, outstanding RDMA READs and atomics, the
//! path MTU. The table sizes (QPs, CQs, MRs, PDs) are hit in
//! `device_limits.rs`, pages per region in `page_list_regions.rs`, doorbell
//! pages in `doorbell_pages.rs`.

use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_device::verbs::Limits;
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe, CmdFailed, SimGuest};
use vm_memory::ByteValued;

const EINVAL: Result<(u32, u32), CmdFailed> = Err(CmdFailed(libc::EINVAL as u16));

fn log2(n: u32) -> u8 {
    assert!(n.is_power_of_two(), "{n}");
    n.trailing_zeros() as u8
}

fn cq_params(g: &mut SimGuest, log: u8) -> CmdCreateCq {
    let ring = g.alloc(32 << log, 4096);
    CmdCreateCq {
        ring: ring.into(),
        log_entries: log,
        vector: 1,
        ..Default::default()
    }
}

#[test]
fn every_reported_limit_is_enforced() {
    let mut p = LinkedPair::start(PairOptions {
        ram: 32 << 20,
        ..PairOptions::default()
    });
    p.connect(MTU_4096);
    let d: DeviceAttr = p.a.g.query(CMD_QUERY_DEVICE).unwrap();
    // The extended reply: the initiator depth (max_qp_init_rd_atom).
    let ext = {
        let e =
            p.a.g
                .cmd_entry(CMD_QUERY_DEVICE, &[DEVICE_ATTR_EXT])
                .unwrap();
        let mut x = DeviceAttrExt::default();
        let n = x.as_slice().len();
        x.as_mut_slice().copy_from_slice(&e.params[..n]);
        x
    };
    let limits = Limits::default();
    assert_eq!(
        (d.max_qp.to_native(), d.max_cq.to_native()),
        (limits.qps as u32, limits.cqs as u32)
    );
    assert_eq!(
        (d.max_mr.to_native(), d.max_pd.to_native()),
        (limits.keys as u32, limits.pds as u32)
    );
    let g = &mut p.a.g;

    // CQEs per CQ: the largest CQ is made, one twice as large is refused.
    let max_cqe_log = log2(d.max_cqe.to_native());
    let c = cq_params(g, max_cqe_log);
    let cqn = g
        .cmd(CMD_CREATE_CQ, c.as_slice())
        .expect("max_cqe entries")
        .0;
    let c = cq_params(g, max_cqe_log + 1);
    assert_eq!(g.cmd(CMD_CREATE_CQ, c.as_slice()), EINVAL, "max_cqe * 2");

    // Work requests per queue: an SQ of max_qp_wr, then twice as many.
    let wr_log = log2(d.max_qp_wr.to_native());
    let qp_params = |g: &mut SimGuest, sq_log: u8| {
        let sq = g.alloc(128 << sq_log, 4096);
        let rest = g.alloc(2 * 4096, 4096);
        CmdCreateQp {
            pdn: p.a.pd.into(),
            send_cqn: cqn.into(),
            recv_cqn: cqn.into(),
            log_sizes: [sq_log, 0, 0, 0],
            sq: sq.into(),
            rq: rest.into(),
            quasi: (rest + 4096).into(),
            ..Default::default()
        }
    };
    let q = qp_params(g, wr_log);
    let qpn = g.cmd(CMD_CREATE_QP, q.as_slice()).expect("max_qp_wr").0;
    let q = qp_params(g, wr_log + 1);
    assert_eq!(g.cmd(CMD_CREATE_QP, q.as_slice()), EINVAL, "max_qp_wr * 2");

    // The path MTU (RESET → INIT → RTR) and outstanding RDMA READs and
    // atomics (RTR → RTS): one past the limit is refused, the limit taken.
    let base = CmdModifyQp {
        qpn: qpn.into(),
        ..Default::default()
    };
    let einval = Err(CmdFailed(libc::EINVAL as u16));
    g.modify_qp(&CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
        state: QPS_INIT,
        ..base
    })
    .unwrap();
    let rtr = |path_mtu| CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
        state: QPS_RTR,
        path_mtu,
        dlid: 2.into(),
        dest_qpn: 1.into(),
        ..base
    };
    assert_eq!(g.modify_qp(&rtr(d.max_mtu + 1)), einval, "max_mtu + 1");
    // Responder resources: the key memory's 16 READ slots (seed 001's
    // slots, as many as real HCAs offer; ib_srpt asks 4).
    assert_eq!(d.max_qp_rd_atom, 16, "max_qp_rd_atom");
    let dest_rd_atomic = |n| CmdModifyQp {
        attr_mask: (QP_ATTR_STATE
            | QP_ATTR_PATH
            | QP_ATTR_DEST_QPN
            | QP_ATTR_RQ_PSN
            | QP_ATTR_DEST_RD_ATOMIC)
            .into(),
        max_dest_rd_atomic: n,
        ..rtr(d.max_mtu)
    };
    assert_eq!(
        g.modify_qp(&dest_rd_atomic(d.max_qp_rd_atom + 1)),
        einval,
        "max_dest_rd_atomic = max_qp_rd_atom + 1"
    );
    g.modify_qp(&dest_rd_atomic(d.max_qp_rd_atom))
        .expect("max_dest_rd_atomic = max_qp_rd_atom");
    let rts = |max_rd_atomic| CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
        state: QPS_RTS,
        max_rd_atomic,
        ..base
    };
    assert_eq!(
        g.modify_qp(&rts(ext.max_qp_init_rd_atom + 1)),
        einval,
        "max_qp_init_rd_atom + 1"
    );
    g.modify_qp(&rts(ext.max_qp_init_rd_atom))
        .expect("max_qp_init_rd_atom");

    // SGEs per work request at the default 128-byte stride: its four
    // gather, one more fails the work request with a local length error
    // (max_sge, at the largest stride: send_sge_stride.rs).
    assert_eq!(d.max_sge, MAX_SEND_SGE, "max_sge");
    let max_sge = MAX_SGE;
    let mut w = remote(
        send_wqe(WR_RDMA_WRITE, 1, p.a.buf, 8, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    w.num_sge = max_sge as u8;
    for i in 0..max_sge {
        w.sge[i] = Sge {
            addr: (p.a.buf + 0x100 * i as u64).into(),
            length: 8.into(),
            lkey: p.a.lkey.into(),
        };
        p.a.g.write(p.a.buf + 0x100 * i as u64, &[i as u8 + 1; 8]);
    }
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, Duration::from_secs(10)).unwrap();
    assert_eq!(c.status, WC_SUCCESS, "{}", wc_status_name(c.status));
    let want: Vec<u8> = (0..max_sge).flat_map(|i| [i as u8 + 1; 8]).collect();
    assert_eq!(p.b.g.read(p.b.buf, 8 * max_sge), want);
    w.wr_id = 2.into();
    w.num_sge = max_sge as u8 + 1;
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, Duration::from_secs(10)).unwrap();
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (2, WC_LOC_LEN_ERR),
        "{}",
        wc_status_name(c.status)
    );
}

#[test]
fn a_receive_with_more_sges_than_its_stride_holds_is_refused_not_truncated() {
    let mut p = LinkedPair::start(PairOptions::default());
    p.connect(MTU_4096);
    // The default 128-byte receive WQE holds MAX_SGE.
    let mut r = recv_wqe(7, p.b.buf, 8, p.b.lkey);
    r.num_sge = MAX_SGE as u8 + 1;
    for i in 0..MAX_SGE {
        r.sge[i] = Sge {
            addr: (p.b.buf + 0x100 * i as u64).into(),
            length: 8.into(),
            lkey: p.b.lkey.into(),
        };
    }
    p.b.g.post_recv(&mut p.b.qp, &r);
    p.a.g.write(p.a.buf, &[9; 32]);
    let w = send_wqe(WR_SEND, 1, p.a.buf, 32, p.a.lkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    let t = Duration::from_secs(10);
    let c =
        p.b.g
            .poll_cq(&mut p.b.cq, t)
            .expect("the receive completes");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (7, WC_LOC_LEN_ERR),
        "{}",
        wc_status_name(c.status)
    );
    let c = p.a.g.poll_cq(&mut p.a.cq, t).expect("the send completes");
    assert_eq!(c.status, WC_REM_OP_ERR, "{}", wc_status_name(c.status));
    // Nothing was scattered into the first four elements.
    for i in 0..MAX_SGE as u64 {
        assert_eq!(p.b.g.read(p.b.buf + 0x100 * i, 8), [0; 8]);
    }
}
