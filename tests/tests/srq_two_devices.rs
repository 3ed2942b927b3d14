//! Shared receive queues between two device instances driven by simulated
//! guests: B's two QPs take their receives from one SRQ, in the SRQ's
//! ring order whichever QP a SEND arrives on; the bytes land in the SRQ's
//! buffers; the armed limit raises the asynchronous event vector with
//! IBTCA_EVENT_SRQ_LIMIT once and disarms; the SRQ cannot be destroyed
//! while its QPs live; an inline SEND and RDMA WRITE cross the link byte
//! for byte; an SRQ grown (RESIZE_SRQ) with receives posted, its old ring
//! wrapped, keeps them in order and takes more than the old ring held.

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS};
use ibtca_tests::sim_guest::{recv_wqe, send_wqe, CmdFailed, DbRoute, Qp};
use ibtca_tests::wait_eventfd;
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(20);
const EBUSY: u16 = 16;
/// Path MTU code of 1024 bytes (a 3000- and a 4096-byte SEND take several packets).
const MTU_1024: u8 = 3;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// B's SRQ: its ring, producer index and number.
struct Srq {
    srqn: u32,
    ring: u64,
    log: u8,
    pi: u32,
}

fn query_srq(p: &mut LinkedPair, srqn: u32) -> SrqAttr {
    let h = CmdHandle {
        handle: srqn.into(),
        ..Default::default()
    };
    let e =
        p.b.g
            .cmd_entry(CMD_QUERY_SRQ, h.as_slice())
            .expect("QUERY_SRQ");
    let mut a = SrqAttr::default();
    let n = a.as_slice().len();
    a.as_mut_slice().copy_from_slice(&e.params[..n]);
    assert_eq!(e.out0.to_native(), a.srq_limit.to_native());
    assert_eq!(e.out1.to_native(), a.limit_events.to_native());
    a
}

/// Two QPs on B sharing one SRQ, each connected to a QP of A.
fn setup(limit: u32) -> (LinkedPair, Srq, [Qp; 2], [Qp; 2]) {
    let mut p = LinkedPair::start(PairOptions::default());
    let log = 3;
    let ring = p.b.g.alloc(128 << log, 4096);
    let c = CmdCreateSrq {
        pdn: p.b.pd.into(),
        log_entries: log,
        ring: ring.into(),
        max_wr: 8u32.into(),
        srq_limit: limit.into(),
        ..Default::default()
    };
    let srqn =
        p.b.g
            .cmd(CMD_CREATE_SRQ, c.as_slice())
            .expect("CREATE_SRQ")
            .0;
    let mut b_qps = Vec::new();
    let mut a_qps = Vec::new();
    for _ in 0..2 {
        let (pd, cq) = (p.b.pd, p.b.cq);
        let qp = p.b.g.create_qp_on_srq(pd, &cq, &cq, 4, srqn);
        b_qps.push(qp.expect("QP on the SRQ"));
        let (pd, cq) = (p.a.pd, p.a.cq);
        a_qps.push(p.a.g.create_qp(pd, &cq, &cq, 4));
    }
    for (qa, qb) in a_qps.iter().zip(&b_qps) {
        p.a.g.connect(qa, 2, qb.qpn, MTU_1024, ALL_ACCESS);
        p.b.g.connect(qb, 1, qa.qpn, MTU_1024, ALL_ACCESS);
    }
    let srq = Srq {
        srqn,
        ring,
        log,
        pi: 0,
    };
    let a: [Qp; 2] = a_qps.try_into().ok().unwrap();
    let b: [Qp; 2] = b_qps.try_into().ok().unwrap();
    (p, srq, a, b)
}

/// Posts receive `wr_id` into B's SRQ (buffer `wr_id` × 4 KiB into B's
/// region) and rings the SRQ doorbell.
fn post_srq(p: &mut LinkedPair, srq: &mut Srq, wr_id: u64) {
    let w = recv_wqe(wr_id, p.b.buf + wr_id * 4096, 4096, p.b.lkey);
    let slot = srq.ring + 128 * u64::from(srq.pi & ((1 << srq.log) - 1));
    p.b.g.write(slot, w.as_slice());
    srq.pi += 1;
    let db = u64::from(srq.srqn) | (u64::from(srq.pi) << 32);
    p.b.g.ring(DbRoute::Bar0, regs::DB_SRQ, db);
}

#[test]
fn sends_on_two_qps_land_in_the_srq_buffers_and_the_limit_fires_once() {
    let (mut p, mut srq, mut a_qps, b_qps) = setup(2);
    // Events to vector 1 (the harness's eventfd; B's CQ is never armed).
    p.b.g.client.write32(0, regs::EVENT_VECTOR, 1);
    p.b.g.client.write32(
        0,
        regs::EVENT_CAUSE,
        regs::EVENT_PORT_CHANGE | regs::EVENT_SRQ_LIMIT,
    );
    while wait_eventfd(&p.b.g.cq_irq, Duration::from_millis(1)).is_some() {}
    for wr_id in 0..4 {
        post_srq(&mut p, &mut srq, wr_id);
    }
    assert_eq!(query_srq(&mut p, srq.srqn).posted.to_native(), 4);

    // Three SENDs: QP 1, QP 0, QP 1; each takes the next SRQ entry.
    let msgs = [(1usize, 3000usize, 5u8), (0, 17, 6), (1, 4096, 7)];
    for (i, &(q, len, seed)) in msgs.iter().enumerate() {
        let data = pattern(len, seed);
        let src = p.a.buf + 0x4000 + i as u64 * 8192;
        p.a.g.write(src, &data);
        let w = send_wqe(WR_SEND, 50 + i as u64, src, len as u32, p.a.lkey);
        let qp = &mut a_qps[q];
        p.a.g.post_send(qp, &w);
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
        assert_eq!((c.wr_id.to_native(), c.status), (50 + i as u64, WC_SUCCESS));
        let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
        assert_eq!(
            (r.wr_id.to_native(), r.opcode, r.status),
            (i as u64, WC_RECV, WC_SUCCESS),
            "message {i} takes SRQ entry {i}"
        );
        assert_eq!(r.qpn.to_native(), b_qps[q].qpn, "on the QP it arrived on");
        assert_eq!(r.src_qp.to_native(), a_qps[q].qpn);
        assert_eq!(r.byte_len.to_native(), len as u32);
        let at = p.b.buf + i as u64 * 4096;
        assert_eq!(p.b.g.read(at, len), data, "message {i}'s bytes");
        if len < 4096 {
            assert_eq!(p.b.g.read(at + len as u64, 1), [0], "nothing past it");
        }
        let events = query_srq(&mut p, srq.srqn).limit_events.to_native();
        // Below the limit of 2 once the third entry is taken (1 left).
        assert_eq!(events, u32::from(i == 2), "after message {i}");
    }
    assert!(
        wait_eventfd(&p.b.g.cq_irq, T).is_some(),
        "limit event interrupt"
    );
    let cause = p.b.g.client.read32(0, regs::EVENT_CAUSE);
    assert_eq!(cause & regs::EVENT_SRQ_LIMIT, regs::EVENT_SRQ_LIMIT);
    p.b.g
        .client
        .write32(0, regs::EVENT_CAUSE, regs::EVENT_SRQ_LIMIT);
    let q = query_srq(&mut p, srq.srqn);
    assert_eq!(
        (
            q.srq_limit.to_native(),
            q.limit_events.to_native(),
            q.posted.to_native()
        ),
        (0, 1, 1),
        "disarmed after firing once"
    );

    // The last entry, then none: the SEND waits (RNR) until one is posted.
    let data = pattern(100, 9);
    p.a.g.write(p.a.buf, &data);
    let w = send_wqe(WR_SEND, 60, p.a.buf, 100, p.a.lkey);
    p.a.g.post_send(&mut a_qps[0], &w);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("fourth receive");
    assert_eq!(r.wr_id.to_native(), 3);
    let w = send_wqe(WR_SEND, 61, p.a.buf, 100, p.a.lkey);
    p.a.g.post_send(&mut a_qps[1], &w);
    assert!(p
        .b
        .g
        .poll_cq(&mut p.b.cq, Duration::from_millis(300))
        .is_none());
    post_srq(&mut p, &mut srq, 4);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive after RNR");
    assert_eq!((r.wr_id.to_native(), r.qpn.to_native()), (4, b_qps[1].qpn));
    assert_eq!(p.b.g.read(p.b.buf + 4 * 4096, 100), data);
    for _ in 0..2 {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
        assert_eq!(c.status, WC_SUCCESS);
    }
    assert!(
        wait_eventfd(&p.b.g.cq_irq, Duration::from_millis(200)).is_none(),
        "no second event while disarmed"
    );

    // In use: EBUSY; the device still serves; then it goes.
    let h = |n: u32| CmdHandle {
        handle: n.into(),
        ..Default::default()
    };
    assert_eq!(
        p.b.g.cmd(CMD_DESTROY_SRQ, h(srq.srqn).as_slice()),
        Err(CmdFailed(EBUSY))
    );
    for qp in &b_qps {
        p.b.g
            .cmd(CMD_DESTROY_QP, h(qp.qpn).as_slice())
            .expect("destroy QP");
    }
    p.b.g
        .cmd(CMD_DESTROY_SRQ, h(srq.srqn).as_slice())
        .expect("destroy SRQ");
}

#[test]
fn inline_send_and_write_cross_the_link_byte_for_byte() {
    let (mut p, mut srq, mut a_qps, _b_qps) = setup(0);
    post_srq(&mut p, &mut srq, 0);
    let inline = |opcode: u8, wr_id: u64, data: &[u8]| {
        let mut w = SendWqe {
            wr_id: wr_id.into(),
            opcode,
            flags: WQE_F_SIGNALED | WQE_F_INLINE,
            inline_len: data.len() as u8,
            ..Default::default()
        };
        let at = std::mem::offset_of!(SendWqe, sge);
        w.as_mut_slice()[at..at + data.len()].copy_from_slice(data);
        w
    };
    let data = pattern(MAX_INLINE_DATA as usize, 11);
    p.a.g.post_send(&mut a_qps[0], &inline(WR_SEND, 1, &data));
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("inline receive");
    assert_eq!(
        (r.status, r.byte_len.to_native()),
        (WC_SUCCESS, MAX_INLINE_DATA)
    );
    assert_eq!(p.b.g.read(p.b.buf, data.len()), data);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
    assert_eq!((c.wr_id.to_native(), c.status), (1, WC_SUCCESS));

    let data = pattern(40, 12);
    let mut w = inline(WR_RDMA_WRITE, 2, &data);
    w.remote_addr = (p.b.buf + 0x8000 + 5).into();
    w.rkey = p.b.rkey.into();
    p.a.g.post_send(&mut a_qps[1], &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("write completion");
    assert_eq!((c.wr_id.to_native(), c.status), (2, WC_SUCCESS));
    assert_eq!(p.b.g.read(p.b.buf + 0x8000, 46)[5..45], data[..]);
    assert_eq!(p.b.g.read(p.b.buf + 0x8000 + 45, 1), [0]);

    // One byte past the limit: refused locally with LOC_LEN_ERR.
    let mut w = inline(WR_SEND, 3, &data);
    w.inline_len = MAX_INLINE_DATA as u8 + 1;
    p.a.g.post_send(&mut a_qps[0], &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("error completion");
    assert_eq!((c.wr_id.to_native(), c.status), (3, WC_LOC_LEN_ERR));
}

/// RESIZE_SRQ of B's SRQ to the ring of 2^`log` entries at `ring`.
fn resize_srq(p: &mut LinkedPair, srq: &mut Srq, ring: u64, log: u8, max_wr: u32) {
    let r = CmdResizeSrq {
        srqn: srq.srqn.into(),
        log_entries: log,
        ring: ring.into(),
        max_wr: max_wr.into(),
        ..Default::default()
    };
    p.b.g.cmd(CMD_RESIZE_SRQ, r.as_slice()).expect("RESIZE_SRQ");
    (srq.ring, srq.log) = (ring, log);
}

#[test]
fn a_grown_srq_keeps_its_posted_receives_in_order_and_takes_more() {
    let (mut p, mut srq, mut a_qps, _) = setup(0);
    // The ring of 8 full, two taken by SENDs, the old ring wrapped by two
    // more: indexes 2..=9 posted.
    for wr_id in 0..8 {
        post_srq(&mut p, &mut srq, wr_id);
    }
    let send = |p: &mut LinkedPair, qp: &mut Qp, i: u64| {
        let data = pattern(64 + i as usize, i as u8);
        let src = p.a.buf + i * 4096;
        p.a.g.write(src, &data);
        p.a.g.post_send(
            qp,
            &send_wqe(WR_SEND, 100 + i, src, data.len() as u32, p.a.lkey),
        );
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
        assert_eq!((c.wr_id.to_native(), c.status), (100 + i, WC_SUCCESS));
        let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
        assert_eq!(
            (r.wr_id.to_native(), r.status, r.byte_len.to_native()),
            (i, WC_SUCCESS, data.len() as u32),
            "message {i} in receive {i}"
        );
        assert_eq!(p.b.g.read(p.b.buf + i * 4096, data.len()), data);
    };
    for i in 0..2 {
        send(&mut p, &mut a_qps[(i % 2) as usize], i);
    }
    for wr_id in 8..10 {
        post_srq(&mut p, &mut srq, wr_id);
    }
    // Grown to 32 entries elsewhere: the device copies 2..=9 over, and
    // the old ring's slots no longer matter.
    let ring = p.b.g.alloc(128 << 5, 4096);
    let old = srq.ring;
    resize_srq(&mut p, &mut srq, ring, 5, 32);
    p.b.g.write(old, &[0xee; 128 << 3]);
    let q = query_srq(&mut p, srq.srqn);
    assert_eq!(
        (q.log_entries, q.max_wr.to_native(), q.posted.to_native()),
        (5, 32, 8)
    );
    for wr_id in 10..20 {
        post_srq(&mut p, &mut srq, wr_id);
    }
    assert_eq!(query_srq(&mut p, srq.srqn).posted.to_native(), 18);
    for i in 2..20 {
        send(&mut p, &mut a_qps[(i % 2) as usize], i);
    }
    assert_eq!(query_srq(&mut p, srq.srqn).posted.to_native(), 0);
}
