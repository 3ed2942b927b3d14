//! Two device instances joined by a link, each driven through vfio-user by a
//! simulated guest with memfd memory: real commands, WQEs, doorbells and
//! CQEs in guest memory, real IB packets on the link. Bytes are checked in
//! the other guest's memory.

use std::time::Duration;

use ibtca_device::link::{FaultPlan, FaultRates};
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS as ALL};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{local_inv_wqe, recv_wqe, remote, send_wqe, Qp, SimGuest};
use ibtca_tests::wait_eventfd;
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(20);

type Pair = LinkedPair;

fn pair(mtu: u8, b_access: u32) -> Pair {
    pair_retrying(mtu, b_access, Retry::default())
}

/// [`pair`] with `retry` (tests of retransmission: [`Retry::PROMPT`]).
fn pair_retrying(mtu: u8, b_access: u32, retry: Retry) -> Pair {
    let mut p = LinkedPair::start(PairOptions {
        b_access,
        retry,
        ..Default::default()
    });
    p.connect(mtu);
    p
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn rdma_write_lands_in_the_other_guest() {
    let mut p = pair(MTU_4096, ALL);
    let data = pattern(256 * 1024, 7);
    p.a.g.write(p.a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 11, p.a.buf, data.len() as u32, p.a.lkey),
        p.b.buf + 4096,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("write completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (11, WC_SUCCESS, WC_RDMA_WRITE)
    );
    assert_eq!(
        p.b.g.read(p.b.buf + 4096, data.len()),
        data,
        "bytes in B's memory"
    );
    assert_eq!(
        p.b.g.read(p.b.buf, 4096),
        vec![0; 4096],
        "nothing before the target"
    );
    // On an idle link A built the data packets straight in its shared
    // ring (no packet buffer, no copy into the ring).
    let stats = p.sa.link.as_ref().expect("A's link").stats();
    assert!(
        stats.tx_built_in_place > 0 && stats.tx_built_in_place <= stats.tx_packets,
        "{stats:?}"
    );
}

/// More WQEs posted at once than the device takes into its transport per
/// QP (`MAX_QUEUED_SEND_WQES`): the rest wait in the guest's ring and are
/// read as completions make room; every one completes, in order, and the
/// last write of each slot is what B's memory holds.
#[test]
fn a_send_queue_longer_than_the_transport_takes_drains_in_order() {
    const N: usize = 3000;
    const { assert!(N > ibtca_device::engine::MAX_QUEUED_SEND_WQES) };
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 12,
        cq_log: 13,
        ..Default::default()
    });
    p.connect(MTU_4096);
    let data = pattern(N * 8, 3);
    p.a.g.write(p.a.buf, &data);
    let wqes: Vec<_> = (0..N)
        .map(|i| {
            let at = 8 * i as u64;
            remote(
                send_wqe(WR_RDMA_WRITE, i as u64, p.a.buf + at, 8, p.a.lkey),
                p.b.buf + at,
                p.b.rkey,
            )
        })
        .collect();
    p.a.g.post_send_batch(&mut p.a.qp, &wqes);
    for i in 0..N {
        let c =
            p.a.g
                .poll_cq(&mut p.a.cq, T)
                .unwrap_or_else(|| panic!("completion {i}"));
        assert_eq!((c.wr_id.to_native(), c.status), (i as u64, WC_SUCCESS));
    }
    assert_eq!(p.b.g.read(p.b.buf, N * 8), data, "every write landed");
}

#[test]
fn send_receive_with_immediate_and_interrupt() {
    let mut p = pair(3, ALL); // 1024-byte MTU
    let msg = pattern(3000, 3);
    p.a.g.write(p.a.buf, &msg);
    let r = recv_wqe(21, p.b.buf, 4096, p.b.lkey);
    p.b.g.post_recv(&mut p.b.qp, &r);
    // Arm B's CQ: the completion must raise MSI-X vector 1.
    let db = u64::from(p.b.cq.cqn) | (u64::from(CQ_ARM_NEXT) << 24);
    p.b.g.client.post_write(0, regs::DB_CQ, &db.to_le_bytes());
    // A non-posted read orders the arm before anything A sends (a real
    // driver polls once more after arming instead).
    p.b.g.client.read32(0, regs::MAGIC);
    let mut w = send_wqe(WR_SEND_IMM, 22, p.a.buf, msg.len() as u32, p.a.lkey);
    w.imm_data = 0x1234_5678.into();
    p.a.g.post_send(&mut p.a.qp, &w);
    let rc = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
    assert_eq!(
        (rc.wr_id.to_native(), rc.status, rc.opcode),
        (21, WC_SUCCESS, WC_RECV)
    );
    assert_eq!(rc.byte_len.to_native(), 3000);
    assert_ne!(rc.flags & CQE_F_IMM, 0);
    assert_eq!(rc.imm_data.to_native(), 0x1234_5678);
    assert_eq!(p.b.g.read(p.b.buf, msg.len()), msg);
    assert!(
        wait_eventfd(&p.b.g.cq_irq, T).is_some(),
        "armed CQ interrupt"
    );
    let sc = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
    assert_eq!((sc.wr_id.to_native(), sc.status), (22, WC_SUCCESS));
}

#[test]
fn rdma_read_and_atomics() {
    let mut p = pair(MTU_256 + 1, ALL); // 512-byte MTU: many read responses
    let data = pattern(20_000, 9);
    p.b.g.write(p.b.buf + 100, &data);
    let w = remote(
        send_wqe(WR_RDMA_READ, 31, p.a.buf, data.len() as u32, p.a.lkey),
        p.b.buf + 100,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("read completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (31, WC_SUCCESS, WC_RDMA_READ)
    );
    assert_eq!(
        p.a.g.read(p.a.buf, data.len()),
        data,
        "B's bytes in A's memory"
    );

    // Fetch-and-add then compare-and-swap on B's counter at an 8-aligned address.
    let counter = p.b.buf + 0x8_0000;
    p.b.g.write(counter, &40u64.to_le_bytes());
    let mut fa = remote(
        send_wqe(WR_ATOMIC_FETCH_ADD, 32, p.a.buf + 0x1000, 8, p.a.lkey),
        counter,
        p.b.rkey,
    );
    fa.compare_add = 2.into();
    p.a.g.post_send(&mut p.a.qp, &fa);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("fetch-add completion");
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_FETCH_ADD));
    assert_eq!(
        p.a.g.read(p.a.buf + 0x1000, 8),
        40u64.to_le_bytes(),
        "old value returned"
    );
    assert_eq!(p.b.g.read(counter, 8), 42u64.to_le_bytes());
    let mut cs = remote(
        send_wqe(WR_ATOMIC_CMP_SWP, 33, p.a.buf + 0x1008, 8, p.a.lkey),
        counter,
        p.b.rkey,
    );
    cs.compare_add = 41.into(); // wrong: memory keeps 42
    cs.swap = 7.into();
    p.a.g.post_send(&mut p.a.qp, &cs);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("cmp-swap completion");
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_COMP_SWAP));
    assert_eq!(p.a.g.read(p.a.buf + 0x1008, 8), 42u64.to_le_bytes());
    assert_eq!(
        p.b.g.read(counter, 8),
        42u64.to_le_bytes(),
        "failed compare leaves memory"
    );
}

#[test]
fn bad_rkey_fails_cleanly_and_changes_nothing() {
    let mut p = pair(MTU_4096, ALL);
    let before = p.b.g.read(p.b.buf, 8192);
    p.a.g.write(p.a.buf, &pattern(8192, 1));
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 41, p.a.buf, 8192, p.a.lkey),
        p.b.buf,
        p.b.rkey ^ 0x100,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("error completion");
    assert_eq!((c.wr_id.to_native(), c.status), (41, WC_REM_ACCESS_ERR));
    assert_eq!(
        p.b.g.read(p.b.buf, 8192),
        before,
        "not one byte of B changed"
    );
}

#[test]
fn write_to_a_read_only_region_is_refused() {
    let mut p = pair(MTU_4096, ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ);
    p.a.g.write(p.a.buf, &pattern(100, 2));
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 51, p.a.buf, 100, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("error completion");
    assert_eq!(c.status, WC_REM_ACCESS_ERR);
    assert_eq!(p.b.g.read(p.b.buf, 100), vec![0; 100]);
}

#[test]
fn messages_arrive_once_and_intact_under_link_faults() {
    // 512-byte MTU: several packets per message; lost ones resent soon.
    let mut p = pair_retrying(2, ALL, Retry::PROMPT);
    let rates = FaultRates {
        drop: 10,
        duplicate: 10,
        reorder: 10,
        corrupt: 10,
        seed: 7,
    };
    p.sa.link
        .as_ref()
        .unwrap()
        .set_faults(FaultPlan::default().with_rates(rates));
    let rates = FaultRates { seed: 8, ..rates };
    p.sb.as_ref()
        .unwrap()
        .link
        .as_ref()
        .unwrap()
        .set_faults(FaultPlan::default().with_rates(rates));
    // RDMA WRITEs of distinct sizes and patterns to distinct places.
    let mut off = 0u64;
    let mut written = Vec::new();
    for i in 0..60u64 {
        let len = 700 + (i as usize * 97) % 3000;
        let data = pattern(len, i as u8);
        p.a.g.write(p.a.buf + off, &data);
        let w = remote(
            send_wqe(WR_RDMA_WRITE, i, p.a.buf + off, len as u32, p.a.lkey),
            p.b.buf + off,
            p.b.rkey,
        );
        p.a.g.post_send(&mut p.a.qp, &w);
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("write completion");
        assert_eq!(
            (c.wr_id.to_native(), c.status),
            (i, WC_SUCCESS),
            "write {i}"
        );
        written.push((off, data));
        off += 4096;
    }
    for (off, data) in &written {
        assert_eq!(
            &p.b.g.read(p.b.buf + off, data.len()),
            data,
            "write at {off:#x}"
        );
    }
    // SENDs into posted receives: each exactly once, in order.
    let recv_base = p.b.buf + 0x8_0000;
    for i in 0..40u64 {
        let r = recv_wqe(1000 + i, recv_base + i * 4096, 4096, p.b.lkey);
        p.b.g.post_recv(&mut p.b.qp, &r);
    }
    for i in 0..40u64 {
        let len = 100 + (i as usize * 61) % 2000;
        let data = pattern(len, 100 + i as u8);
        p.a.g.write(p.a.buf + 0x8_0000, &data);
        let w = send_wqe(WR_SEND, 2000 + i, p.a.buf + 0x8_0000, len as u32, p.a.lkey);
        p.a.g.post_send(&mut p.a.qp, &w);
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
        assert_eq!((c.wr_id.to_native(), c.status), (2000 + i, WC_SUCCESS));
        let rc = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
        assert_eq!(
            (rc.wr_id.to_native(), rc.status),
            (1000 + i, WC_SUCCESS),
            "receives complete once, in order"
        );
        assert_eq!(rc.byte_len.to_native() as usize, len);
        assert_eq!(p.b.g.read(recv_base + i * 4096, len), data);
    }
    assert!(
        p.b.g
            .poll_cq(&mut p.b.cq, Duration::from_millis(200))
            .is_none(),
        "no duplicate completions"
    );
    let s = p.sa.link.as_ref().unwrap().stats();
    assert!(
        s.fault_dropped + s.fault_duplicated + s.fault_reordered + s.fault_corrupted > 0,
        "faults were injected: {s:?}"
    );
}

#[test]
fn peer_vanishing_mid_transfer_gives_an_error_completion() {
    let mut p = pair_retrying(MTU_4096, ALL, Retry::PROMPT);
    // One good write proves the path.
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, p.a.buf, 4096, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    assert_eq!(
        p.a.g.poll_cq(&mut p.a.cq, T).expect("first write").status,
        WC_SUCCESS
    );
    // B's device goes away; A keeps posting.
    drop(p.sb.take());
    let start = std::time::Instant::now();
    for i in 2..6u64 {
        let w = remote(
            send_wqe(WR_RDMA_WRITE, i, p.a.buf, 65536, p.a.lkey),
            p.b.buf,
            p.b.rkey,
        );
        p.a.g.post_send(&mut p.a.qp, &w);
    }
    let c =
        p.a.g
            .poll_cq(&mut p.a.cq, Duration::from_secs(60))
            .expect("an error completion, not a hang");
    assert_eq!((c.wr_id.to_native(), c.status), (2, WC_RETRY_EXC_ERR));
    for i in 3..6u64 {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("flushed");
        assert_eq!((c.wr_id.to_native(), c.status), (i, WC_WR_FLUSH_ERR));
    }
    eprintln!(
        "retries exhausted after {:.2} s",
        start.elapsed().as_secs_f64()
    );
    // A's device is still fine. Its port goes down when A's link reader
    // sees the connection end, which nothing orders before the retries
    // running out on the engine thread: wait for it.
    assert_eq!(p.a.g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
    let deadline = std::time::Instant::now() + T;
    while p.a.g.client.read32(0, regs::PORT_STATE) != regs::PORT_DOWN {
        assert!(
            std::time::Instant::now() < deadline,
            "A's port never went down"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// B allocates a memory window and binds 4 KiB at `win` of its region to
/// it with a BIND_MW work request granting `access`; checks the completion
/// and returns the window's new key (its low byte incremented).
fn bind_window(p: &mut Pair, win: u64, access: u32) -> u32 {
    let handle = CmdHandle {
        handle: p.b.pd.into(),
        ..Default::default()
    };
    let mw = p.b.g.cmd(CMD_ALLOC_MW, handle.as_slice()).unwrap().0;
    let mut bind = send_wqe(WR_BIND_MW, 61, 0, 0, p.b.lkey);
    bind.rkey = mw.into();
    bind.compare_add = win.into();
    bind.swap = 0x1000.into();
    bind.imm_data = access.into();
    p.b.g.post_send(&mut p.b.qp, &bind);
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("bind completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (61, WC_SUCCESS, WC_BIND_MW)
    );
    assert_ne!(c.flags & CQE_F_IMM, 0, "the new key is reported");
    let key = c.imm_data.to_native();
    assert_eq!(
        key,
        (mw & !0xff) | (mw.wrapping_add(1) & 0xff),
        "low byte incremented"
    );
    key
}

#[test]
fn memory_window_bind_access_and_invalidate() {
    let mut p = pair(MTU_4096, ALL | ACCESS_MW_BIND);
    // B allocates a window and binds 4 KiB of its region to it with a work request.
    let win = p.b.buf + 0x1000;
    let key = bind_window(&mut p, win, ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ);
    // A writes through the window.
    let data = pattern(512, 5);
    p.a.g.write(p.a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 62, p.a.buf, 512, p.a.lkey),
        win + 0x100,
        key,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    assert_eq!(
        p.a.g.poll_cq(&mut p.a.cq, T).expect("write").status,
        WC_SUCCESS
    );
    assert_eq!(p.b.g.read(win + 0x100, 512), data);
    // B invalidates the window; A's next write with the key must fail.
    let inv = local_inv_wqe(63, key);
    p.b.g.post_send(&mut p.b.qp, &inv);
    let c =
        p.b.g
            .poll_cq(&mut p.b.cq, T)
            .expect("invalidate completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (63, WC_SUCCESS, WC_LOCAL_INV)
    );
    let before = p.b.g.read(win, 0x1000);
    p.a.g.write(p.a.buf, &pattern(512, 6));
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 64, p.a.buf, 512, p.a.lkey),
        win + 0x100,
        key,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    assert_eq!(
        p.a.g.poll_cq(&mut p.a.cq, T).expect("refused write").status,
        WC_REM_ACCESS_ERR
    );
    assert_eq!(
        p.b.g.read(win, 0x1000),
        before,
        "invalidated window wrote nothing"
    );
}

/// Connects `qp` like `SimGuest::connect` but with chosen PSNs.
fn connect_psn(g: &mut SimGuest, qp: &Qp, dlid: u16, dest: u32, sq_psn: u32, rq_psn: u32) {
    connect_rtr(g, qp, dlid, dest, rq_psn);
    to_rts(g, qp, sq_psn);
}

/// INIT, then RTR with a path to `dlid`/`dest` and `rq_psn`.
fn connect_rtr(g: &mut SimGuest, qp: &Qp, dlid: u16, dest: u32, rq_psn: u32) {
    let base = CmdModifyQp {
        qpn: qp.qpn.into(),
        ..Default::default()
    };
    let rw = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;
    g.modify_qp(&CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
        state: QPS_INIT,
        access: rw.into(),
        ..base
    })
    .unwrap();
    g.modify_qp(&CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
        state: QPS_RTR,
        path_mtu: MTU_256,
        dlid: dlid.into(),
        dest_qpn: dest.into(),
        rq_psn: rq_psn.into(),
        ..base
    })
    .unwrap();
}

/// RTR to RTS, sending from `sq_psn`.
fn to_rts(g: &mut SimGuest, qp: &Qp, sq_psn: u32) {
    g.modify_qp(&CmdModifyQp {
        qpn: qp.qpn.into(),
        attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
        state: QPS_RTS,
        sq_psn: sq_psn.into(),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 3,
        ..Default::default()
    })
    .unwrap();
}

/// A QP in RTR answers requests (perftest's servers never move theirs to
/// RTS): a WRITE lands, a SEND is received. What it posts goes out only
/// once it reaches RTS, from the SQ PSN RTS gave it.
#[test]
fn a_qp_in_rtr_answers_and_sends_only_from_rts() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (a, b) = (&mut p.a, &mut p.b);
    connect_psn(&mut a.g, &a.qp, 2, b.qp.qpn, 0x100, 0x200);
    connect_rtr(&mut b.g, &b.qp, 1, a.qp.qpn, 0x100);
    let data = pattern(4096, 9);
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 81, a.buf, 4096, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("write to an RTR QP");
    assert_eq!((c.wr_id.to_native(), c.status), (81, WC_SUCCESS));
    assert_eq!(b.g.read(b.buf, 4096), data, "bytes in the RTR side");
    // B's SEND waits in its ring until RTS.
    let msg = pattern(500, 10);
    b.g.write(b.buf + 0x2000, &msg);
    a.g.post_recv(&mut a.qp, &recv_wqe(82, a.buf + 0x4000, 4096, a.lkey));
    b.g.post_send(
        &mut b.qp,
        &send_wqe(WR_SEND, 83, b.buf + 0x2000, 500, b.lkey),
    );
    assert!(
        a.g.poll_cq(&mut a.cq, Duration::from_millis(300)).is_none(),
        "nothing leaves a QP in RTR"
    );
    to_rts(&mut b.g, &b.qp, 0x200);
    let r =
        a.g.poll_cq(&mut a.cq, T)
            .expect("the SEND once B is in RTS");
    assert_eq!(
        (r.wr_id.to_native(), r.status, r.byte_len.to_native()),
        (82, WC_SUCCESS, 500)
    );
    assert_eq!(a.g.read(a.buf + 0x4000, 500), msg);
    let s = b.g.poll_cq(&mut b.cq, T).expect("B's send completion");
    assert_eq!((s.wr_id.to_native(), s.status), (83, WC_SUCCESS));
}

#[test]
fn psn_wraps_and_rnr_retry_between_devices() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (a, b) = (&mut p.a, &mut p.b);
    // A starts 8 PSNs before the 24-bit wrap: a 16-packet message crosses it.
    connect_psn(&mut a.g, &a.qp, 2, b.qp.qpn, 0xff_fff8, 0x10);
    connect_psn(&mut b.g, &b.qp, 1, a.qp.qpn, 0x10, 0xff_fff8);
    let data = pattern(4096, 4); // 16 packets at MTU 256
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 71, a.buf, 4096, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    assert_eq!(
        a.g.poll_cq(&mut a.cq, T)
            .expect("write across the PSN wrap")
            .status,
        WC_SUCCESS
    );
    assert_eq!(b.g.read(b.buf, 4096), data);
    // A SEND with no receive posted gets RNR NAKs until B posts one.
    let msg = pattern(1000, 8);
    a.g.write(a.buf + 0x2000, &msg);
    let s = send_wqe(WR_SEND, 72, a.buf + 0x2000, 1000, a.lkey);
    a.g.post_send(&mut a.qp, &s);
    assert!(
        a.g.poll_cq(&mut a.cq, Duration::from_millis(300)).is_none(),
        "held by RNR, not failed"
    );
    let r = recv_wqe(73, b.buf + 0x4000, 4096, b.lkey);
    b.g.post_recv(&mut b.qp, &r);
    let rc = b.g.poll_cq(&mut b.cq, T).expect("receive after RNR retry");
    assert_eq!(
        (rc.wr_id.to_native(), rc.status, rc.byte_len.to_native()),
        (73, WC_SUCCESS, 1000)
    );
    assert_eq!(b.g.read(b.buf + 0x4000, 1000), msg);
    assert_eq!(
        a.g.poll_cq(&mut a.cq, T).expect("send completion").status,
        WC_SUCCESS
    );
}

#[test]
fn moving_a_qp_to_error_flushes_its_work_requests() {
    let mut p = pair(MTU_4096, ALL);
    for i in 0..2u64 {
        let r = recv_wqe(80 + i, p.a.buf + i * 4096, 4096, p.a.lkey);
        p.a.g.post_recv(&mut p.a.qp, &r);
    }
    let err = CmdModifyQp {
        qpn: p.a.qp.qpn.into(),
        attr_mask: QP_ATTR_STATE.into(),
        state: QPS_ERR,
        ..Default::default()
    };
    p.a.g.modify_qp(&err).unwrap();
    for i in 0..2u64 {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("flushed receive");
        assert_eq!((c.wr_id.to_native(), c.status), (80 + i, WC_WR_FLUSH_ERR));
    }
    // A send posted in ERR is flushed too, and nothing reaches B.
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 90, p.a.buf, 64, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("flushed send");
    assert_eq!((c.wr_id.to_native(), c.status), (90, WC_WR_FLUSH_ERR));
    assert_eq!(p.b.g.read(p.b.buf, 64), vec![0; 64]);
}

/// A QP moved to ERR with more WQEs posted than the device reads ahead
/// (`MAX_QUEUED_SEND_WQES`; B answers nothing, so none completes first):
/// every one of them, those still in the ring too, completes in order with
/// an error and nothing reaches B.
#[test]
fn moving_a_qp_to_error_flushes_a_send_queue_longer_than_the_transport_takes() {
    const N: usize = 3000;
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 12,
        cq_log: 13,
        ..Default::default()
    });
    p.connect(MTU_4096);
    let to_err = |qpn: u32| CmdModifyQp {
        qpn: qpn.into(),
        attr_mask: QP_ATTR_STATE.into(),
        state: QPS_ERR,
        ..Default::default()
    };
    // B's QP in ERR: A's packets are dropped unanswered.
    p.b.g.modify_qp(&to_err(p.b.qp.qpn)).unwrap();
    let wqes: Vec<_> = (0..N)
        .map(|i| {
            let w = send_wqe(WR_RDMA_WRITE, i as u64, p.a.buf, 8, p.a.lkey);
            remote(w, p.b.buf + 8 * i as u64, p.b.rkey)
        })
        .collect();
    p.a.g.post_send_batch(&mut p.a.qp, &wqes);
    p.a.g.modify_qp(&to_err(p.a.qp.qpn)).unwrap();
    for i in 0..N {
        let c =
            p.a.g
                .poll_cq(&mut p.a.cq, T)
                .unwrap_or_else(|| panic!("completion {i}"));
        assert_eq!(c.wr_id.to_native(), i as u64);
        assert_ne!(c.status, WC_SUCCESS, "WQE {i}");
    }
    assert_eq!(p.b.g.read(p.b.buf, N * 8), vec![0; N * 8]);
}

/// SEND with Invalidate between two devices: B binds a window, A writes
/// through it, then A's SEND_INV carrying the window's key invalidates it at
/// B (B's receive CQE reports the key); A's next write through the key
/// fails and B's memory stays as it was.
#[test]
fn send_with_invalidate_revokes_a_window() {
    let mut p = pair(MTU_4096, ALL | ACCESS_MW_BIND);
    let win = p.b.buf + 0x2000;
    let key = bind_window(&mut p, win, ACCESS_REMOTE_WRITE);
    let write = |p: &mut Pair, id: u64| {
        let w = remote(
            send_wqe(WR_RDMA_WRITE, id, p.a.buf, 256, p.a.lkey),
            win,
            key,
        );
        p.a.g.post_send(&mut p.a.qp, &w);
        p.a.g.poll_cq(&mut p.a.cq, T).expect("write").status
    };
    p.a.g.write(p.a.buf, &pattern(256, 1));
    assert_eq!(write(&mut p, 2), WC_SUCCESS);
    // The SEND that revokes it.
    p.b.g
        .post_recv(&mut p.b.qp, &recv_wqe(3, p.b.buf + 0x8000, 64, p.b.lkey));
    let _ = p.b.g.client.read32(0, regs::MAGIC); // the receive is in first
    let mut s = send_wqe(WR_SEND_INV, 4, p.a.buf, 64, p.a.lkey);
    s.imm_data = key.into();
    p.a.g.post_send(&mut p.a.qp, &s);
    assert_eq!(
        p.a.g.poll_cq(&mut p.a.cq, T).expect("send").status,
        WC_SUCCESS
    );
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive");
    assert_eq!((r.status, r.opcode), (WC_SUCCESS, WC_RECV));
    assert_eq!(r.flags & CQE_F_INV, CQE_F_INV, "flagged as invalidating");
    assert_eq!(r.imm_data.to_native(), key, "the invalidated key");
    let before = p.b.g.read(win, 256);
    p.a.g.write(p.a.buf, &pattern(256, 2));
    assert_eq!(write(&mut p, 5), WC_REM_ACCESS_ERR);
    assert_eq!(p.b.g.read(win, 256), before, "B unchanged");
}

/// A CQ armed for solicited events interrupts only for a message whose
/// sender asked for one (BTH SE), and flags that CQE.
#[test]
fn solicited_events() {
    let mut p = pair(MTU_4096, ALL);
    for id in [1, 2] {
        let r = recv_wqe(id, p.b.buf + 4096 * id, 256, p.b.lkey);
        p.b.g.post_recv(&mut p.b.qp, &r);
    }
    let db = u64::from(p.b.cq.cqn) | (u64::from(CQ_ARM_SOLICITED) << 24);
    p.b.g.client.post_write(0, regs::DB_CQ, &db.to_le_bytes());
    p.b.g.client.read32(0, regs::MAGIC);
    // Not solicited: a completion, no interrupt.
    p.a.g
        .post_send(&mut p.a.qp, &send_wqe(WR_SEND, 10, p.a.buf, 64, p.a.lkey));
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("first receive");
    assert_eq!((c.wr_id.to_native(), c.flags & CQE_F_SOLICITED), (1, 0));
    assert!(
        wait_eventfd(&p.b.g.cq_irq, Duration::from_millis(300)).is_none(),
        "no interrupt for an unsolicited message"
    );
    // Solicited: flagged and interrupting.
    let mut w = send_wqe(WR_SEND, 11, p.a.buf, 64, p.a.lkey);
    w.flags |= WQE_F_SOLICITED;
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("second receive");
    assert_eq!(c.wr_id.to_native(), 2);
    assert_eq!(c.flags & CQE_F_SOLICITED, CQE_F_SOLICITED);
    assert!(
        wait_eventfd(&p.b.g.cq_irq, T).is_some(),
        "interrupt for the solicited message"
    );
}

/// Arming a CQ that already holds completions past the consumer index the
/// arm carries interrupts at once: the arm is a posted write that may reach
/// the device after the completion it waits for, and a driver that arms,
/// looks once more and sleeps must not sleep through it. Caught up, the arm
/// waits for the next completion.
#[test]
fn arming_behind_the_producer_interrupts_at_once() {
    let mut p = pair(MTU_4096, ALL);
    for id in [1, 2] {
        let r = recv_wqe(id, p.b.buf + 4096 * id, 256, p.b.lkey);
        p.b.g.post_recv(&mut p.b.qp, &r);
    }
    p.a.g
        .post_send(&mut p.a.qp, &send_wqe(WR_SEND, 10, p.a.buf, 64, p.a.lkey));
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
    assert_eq!(c.status, WC_SUCCESS);
    // B's receive completion is written, not yet consumed: B's consumer
    // index is still 0.
    let deadline = std::time::Instant::now() + T;
    while !p.b.g.cqe_ready(&p.b.cq) {
        assert!(std::time::Instant::now() < deadline, "no receive CQE");
        std::thread::sleep(Duration::from_millis(1));
    }
    while wait_eventfd(&p.b.g.cq_irq, Duration::from_millis(1)).is_some() {}
    p.b.g.arm_cq(&p.b.cq);
    assert!(
        wait_eventfd(&p.b.g.cq_irq, T).is_some(),
        "an arm behind the producer fires at once"
    );
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("first receive");
    assert_eq!((c.wr_id.to_native(), c.opcode), (1, WC_RECV));
    // Caught up: nothing until the next completion.
    p.b.g.arm_cq(&p.b.cq);
    assert!(
        wait_eventfd(&p.b.g.cq_irq, Duration::from_millis(300)).is_none(),
        "a caught-up arm waits"
    );
    p.a.g
        .post_send(&mut p.a.qp, &send_wqe(WR_SEND, 11, p.a.buf, 64, p.a.lkey));
    assert!(
        wait_eventfd(&p.b.g.cq_irq, T).is_some(),
        "the next completion fires it"
    );
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("second receive");
    assert_eq!(c.wr_id.to_native(), 2);
}
