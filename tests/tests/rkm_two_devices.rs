//! Seeds 001 and 004 between two devices driven through vfio-user by
//! simulated guests (no QEMU): an inbound RDMA READ waits in B's quasi-WQE
//! ring while B's RKM_READ_BUDGET holds responses back; an invalidation at
//! B (DEREG_MR of the region, LOCAL_INV of a window or of a
//! fast-registered region, even one registered again at once under the
//! same key) runs the key-memory walk, which BAR0's RKM registers show;
//! released, the READ sends nothing and A's READ completes with
//! WC_REM_ACCESS_ERR. Meanwhile B's own SEND
//! to A goes out and completes (its requester is not held). A quasi-WQE
//! B's guest rewrote while the READ was held fails it with NAK remote
//! operational error. And B's responder resources (max_dest_rd_atomic)
//! NAK a READ past them, and at the device's maximum (16) hold 16 READs at
//! once and answer them all.

use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::fast_reg::{alloc_mr, reg_mr_wqe, FastReg};
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS};
use ibtca_tests::sim_guest::{local_inv_wqe, recv_wqe, remote, send_wqe, SimGuest};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(10);
const READ_LEN: u32 = 1 << 20;

/// A and B connected at MTU 4096, B's region with `b_access`. Both ACK
/// timeouts are IBA's "none" (exponent 0): a READ held at B for however
/// long a loaded machine takes is never retried into WC_RETRY_EXC_ERR.
fn pair(b_access: u32) -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions {
        b_access,
        ..Default::default()
    });
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    connect_patient(&mut p.a.g, qa, 2, qb, ALL_ACCESS, None);
    connect_patient(&mut p.b.g, qb, 1, qa, b_access, None);
    p
}

/// RESET → INIT → RTR → RTS towards (dlid, dest_qpn) with no ACK timeout,
/// PSNs 100, 16 READs outstanding (the device's initiator depth) and, if
/// given, max_dest_rd_atomic.
fn connect_patient(
    g: &mut SimGuest,
    qpn: u32,
    dlid: u16,
    dest_qpn: u32,
    access: u32,
    dest_rd_atomic: Option<u8>,
) {
    let base = CmdModifyQp {
        qpn: qpn.into(),
        ..Default::default()
    };
    let remote = ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
    g.modify_qp(&CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
        state: QPS_INIT,
        access: (access & remote).into(),
        ..base
    })
    .expect("INIT");
    let mut rtr = QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN;
    if dest_rd_atomic.is_some() {
        rtr |= QP_ATTR_DEST_RD_ATOMIC;
    }
    g.modify_qp(&CmdModifyQp {
        attr_mask: rtr.into(),
        state: QPS_RTR,
        path_mtu: MTU_4096,
        dlid: dlid.into(),
        dest_qpn: dest_qpn.into(),
        rq_psn: 100.into(),
        max_dest_rd_atomic: dest_rd_atomic.unwrap_or(0),
        ..base
    })
    .expect("RTR");
    g.modify_qp(&CmdModifyQp {
        attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
        state: QPS_RTS,
        sq_psn: 100.into(),
        timeout: 0,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 16,
        ..base
    })
    .expect("RTS");
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 12) as u8)
        .collect()
}

/// (RKM_STATUS, RKM_WALKS, RKM_CLEARED) of a device.
fn rkm(g: &mut SimGuest) -> (u32, u32, u32) {
    (
        g.client.read32(0, regs::RKM_STATUS),
        g.client.read32(0, regs::RKM_WALKS),
        g.client.read32(0, regs::RKM_CLEARED),
    )
}

/// Waits until quasi-WQE `index` of the ring at `ring` is written (its
/// owner bit set, first pass) and returns it.
fn wait_quasi(g: &SimGuest, ring: u64, index: u64) -> QuasiWqe {
    let deadline = Instant::now() + T;
    loop {
        let bytes = g.read(ring + 32 * index, 32);
        let q = *QuasiWqe::from_slice(&bytes).expect("32 bytes");
        if q.owner & 1 == 1 {
            return q;
        }
        assert!(
            Instant::now() < deadline,
            "no quasi-WQE {index} in B's ring"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A posts a 1 MiB READ of B's memory at `va` through `rkey` while B holds
/// READ responses back; returns once B's ring holds its quasi-WQE (checked
/// field by field), with nothing received at A.
fn post_held_read(p: &mut LinkedPair, va: u64, rkey: u32) {
    p.b.g.client.write32(0, regs::RKM_READ_BUDGET, 0);
    assert_eq!(p.b.g.client.read32(0, regs::RKM_READ_BUDGET), 0);
    p.a.g.write(p.a.buf, &vec![0x5a; READ_LEN as usize]);
    let r = remote(
        send_wqe(WR_RDMA_READ, 1, p.a.buf, READ_LEN, p.a.lkey),
        va,
        rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &r);
    let q = wait_quasi(&p.b.g, p.b.qp.quasi, 0);
    assert_eq!(
        (q.va.to_native(), q.length.to_native(), q.rkey.to_native()),
        (va, READ_LEN, rkey),
        "the quasi-WQE describes the READ"
    );
    assert_eq!(q.dest_qpn.to_native(), p.a.qp.qpn);
    assert!(
        p.a.g.try_poll_cq(&mut p.a.cq).is_none(),
        "held: no response"
    );
}

/// Releases B's responses and checks A's READ failed with a remote access
/// error, with not one byte of B's memory delivered.
fn release_and_expect_access_error(p: &mut LinkedPair) {
    release_and_expect(p, WC_REM_ACCESS_ERR);
}

/// Releases B's responses and checks A's READ failed with `status`, with
/// not one byte of B's memory delivered.
fn release_and_expect(p: &mut LinkedPair, status: u8) {
    p.b.g
        .client
        .write32(0, regs::RKM_READ_BUDGET, regs::RKM_READ_BUDGET_DEFAULT);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("the READ completes");
    assert_eq!(
        (c.wr_id.to_native(), c.opcode, c.status),
        (1, WC_RDMA_READ, status)
    );
    assert!(
        p.a.g
            .read(p.a.buf, READ_LEN as usize)
            .iter()
            .all(|&b| b == 0x5a),
        "no byte of the READ arrived"
    );
}

/// A's READ of B's `va` through `key` held at B ([`post_held_read`]),
/// then B's LOCAL_INV of `key`: it completes, and the walk clears the
/// READ's slot while the READ has not stopped yet; released, the READ
/// fails with WC_REM_ACCESS_ERR and the walk is done. Returns RKM_WALKS.
fn local_inv_stops_a_held_read(p: &mut LinkedPair, va: u64, key: u32) -> u32 {
    post_held_read(p, va, key);
    let inv = local_inv_wqe(63, key);
    p.b.g.post_send(&mut p.b.qp, &inv);
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("LOCAL_INV");
    assert_eq!(
        (c.wr_id.to_native(), c.opcode, c.status),
        (63, WC_LOCAL_INV, WC_SUCCESS)
    );
    let (status, walks, cleared) = rkm(&mut p.b.g);
    assert_eq!(
        status,
        regs::RKM_STATUS_BUSY,
        "the READ has not stopped yet"
    );
    assert_eq!(cleared, 1, "the READ's slot");
    assert!(walks >= 1, "the walk ran ({walks})");
    release_and_expect_access_error(p);
    wait_status(&mut p.b.g, regs::RKM_STATUS_DONE);
    walks
}

/// Waits until RKM_STATUS reads `want`.
fn wait_status(g: &mut SimGuest, want: u32) {
    let deadline = Instant::now() + T;
    while g.client.read32(0, regs::RKM_STATUS) != want {
        assert!(Instant::now() < deadline, "RKM_STATUS never {want:#x}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// B posts receive 9 of 4096 bytes (flushed when its QP fails, IBA
/// 10.3.1); returns its buffer and L_Key.
fn post_b_receive(p: &mut LinkedPair) -> (u64, u32) {
    let rbuf = p.b.g.alloc(4096, 4096);
    let (rlkey, _) = p.b.g.reg_mr(p.b.pd, rbuf, 4096, ACCESS_LOCAL_WRITE);
    p.b.g
        .post_recv(&mut p.b.qp, &recv_wqe(9, rbuf, 4096, rlkey));
    (rbuf, rlkey)
}

#[test]
fn a_held_read_stops_when_its_region_is_deregistered() {
    let mut p = pair(ALL_ACCESS);
    p.b.g.write(p.b.buf, &pattern(READ_LEN as usize, 3));
    let (rbuf, rlkey) = post_b_receive(&mut p);
    assert_eq!(rkm(&mut p.b.g), (0, 0, 0), "power-on");
    let (va, rkey) = (p.b.buf, p.b.rkey);
    post_held_read(&mut p, va, rkey);
    // B's own requester is not held with its responses: a SEND from B to A
    // goes out and completes while A's READ waits in B's queue.
    let abuf = p.a.g.alloc(4096, 4096);
    let (alkey, _) = p.a.g.reg_mr(p.a.pd, abuf, 4096, ACCESS_LOCAL_WRITE);
    p.a.g
        .post_recv(&mut p.a.qp, &recv_wqe(7, abuf, 4096, alkey));
    p.b.g.write(rbuf, &pattern(256, 8));
    p.b.g
        .post_send(&mut p.b.qp, &send_wqe(WR_SEND, 8, rbuf, 256, rlkey));
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("B's SEND");
    assert_eq!((c.wr_id.to_native(), c.status), (8, WC_SUCCESS));
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("A's receive");
    assert_eq!(
        (c.wr_id.to_native(), c.opcode, c.status),
        (7, WC_RECV, WC_SUCCESS)
    );
    assert_eq!(p.a.g.read(abuf, 256), pattern(256, 8));
    let lkey = CmdHandle {
        handle: p.b.lkey.into(),
        ..Default::default()
    };
    p.b.g.cmd(CMD_DEREG_MR, lkey.as_slice()).expect("DEREG_MR");
    assert_eq!(
        rkm(&mut p.b.g),
        (regs::RKM_STATUS_BUSY, 1, 1),
        "one walk cleared the READ's slot; the READ has not stopped yet"
    );
    release_and_expect_access_error(&mut p);
    wait_status(&mut p.b.g, regs::RKM_STATUS_DONE);
    assert_eq!(rkm(&mut p.b.g), (regs::RKM_STATUS_DONE, 1, 1));
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("B's receive flushed");
    assert_eq!((c.wr_id.to_native(), c.status), (9, WC_WR_FLUSH_ERR));
    // The device still serves: a fresh QP pair would work; its registers do.
    assert_eq!(p.b.g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}

/// Seed 004: B's guest rewrites the held READ's quasi-WQE in its ring (the
/// VA, to other bytes of its region); released, the send engine reads the
/// quasi-WQE for the first response, finds it differs from the device's
/// record, and ends B's QP with NAK remote operational error: A's READ
/// fails with WC_REM_OP_ERR, no byte of either range reaches A, and B's
/// posted receive is flushed (its QP is in error).
#[test]
fn a_held_read_whose_quasi_wqe_the_guest_rewrote_fails_with_remote_op_error() {
    let mut p = pair(ALL_ACCESS);
    p.b.g.write(p.b.buf, &pattern(READ_LEN as usize, 5));
    post_b_receive(&mut p);
    let (va, rkey) = (p.b.buf, p.b.rkey);
    post_held_read(&mut p, va, rkey);
    let ring = p.b.qp.quasi;
    let mut q = wait_quasi(&p.b.g, ring, 0);
    q.va = (va + 4096).into();
    p.b.g.write(ring, q.as_slice());
    assert_eq!(p.b.g.client.read32(0, regs::RKM_QUASI_MISMATCHES), 0);
    release_and_expect(&mut p, WC_REM_OP_ERR);
    assert_eq!(
        p.b.g.client.read32(0, regs::RKM_QUASI_MISMATCHES),
        1,
        "counted in BAR0"
    );
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("B's receive flushed");
    assert_eq!((c.wr_id.to_native(), c.status), (9, WC_WR_FLUSH_ERR));
    assert_eq!(p.b.g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}

#[test]
fn a_held_read_through_a_window_stops_when_the_window_is_invalidated() {
    let mut p = pair(ALL_ACCESS | ACCESS_MW_BIND);
    p.b.g.write(p.b.buf, &pattern(READ_LEN as usize, 4));
    let handle = CmdHandle {
        handle: p.b.pd.into(),
        ..Default::default()
    };
    let mw = p.b.g.cmd(CMD_ALLOC_MW, handle.as_slice()).unwrap().0;
    let mut bind = send_wqe(WR_BIND_MW, 61, 0, 0, p.b.lkey);
    bind.rkey = mw.into();
    bind.compare_add = p.b.buf.into();
    bind.swap = u64::from(READ_LEN).into();
    bind.imm_data = ACCESS_REMOTE_READ.into();
    p.b.g.post_send(&mut p.b.qp, &bind);
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("bind");
    assert_eq!((c.opcode, c.status), (WC_BIND_MW, WC_SUCCESS));
    let key = c.imm_data.to_native();
    let va = p.b.buf;
    // B's own QP invalidates the window while its responder holds the READ.
    local_inv_stops_a_held_read(&mut p, va, key);
}

/// B fast-registers a page-list region (ALLOC_MR, IBTCA_WR_REG_MR) over its
/// buffer's 256 pages, filled with `pattern(READ_LEN, seed)`, at an IOVA of
/// its own; returns the registration (its key, IOVA and table).
fn fast_registered_buffer(p: &mut LinkedPair, seed: u8) -> FastReg {
    p.b.g.write(p.b.buf, &pattern(READ_LEN as usize, seed));
    let npages = READ_LEN / 4096;
    let key = alloc_mr(&mut p.b.g, p.b.pd, npages);
    let pages: Vec<u8> = (0..u64::from(npages))
        .flat_map(|i| (p.b.buf + i * 4096).to_le_bytes())
        .collect();
    let table = p.b.g.alloc(pages.len() as u64, 8);
    p.b.g.write(table, &pages);
    let reg = FastReg {
        key,
        table,
        npages,
        first: 0,
        iova: 0x7700_0000_0000u64,
        len: READ_LEN.into(),
    };
    fast_register(p, &reg, 62);
    reg
}

/// B posts IBTCA_WR_REG_MR of `reg` (work request `wr_id`); it succeeds.
fn fast_register(p: &mut LinkedPair, reg: &FastReg, wr_id: u64) {
    p.b.g.post_send(&mut p.b.qp, &reg_mr_wqe(wr_id, reg));
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("REG_MR");
    assert_eq!(
        (c.wr_id.to_native(), c.opcode, c.status),
        (wr_id, WC_REG_MR, WC_SUCCESS)
    );
}

/// A fast-registered page-list region: B's LOCAL_INV of the region's key
/// runs the walk, which clears the held READ's slot; released, the READ
/// sends nothing and fails with WC_REM_ACCESS_ERR.
#[test]
fn a_held_read_of_a_fast_registered_region_stops_at_its_local_inv() {
    let mut p = pair(ALL_ACCESS);
    let reg = fast_registered_buffer(&mut p, 6);
    assert_eq!(rkm(&mut p.b.g), (0, 0, 0), "nothing invalidated yet");
    let walks = local_inv_stops_a_held_read(&mut p, reg.iova, reg.key);
    assert_eq!(rkm(&mut p.b.g), (regs::RKM_STATUS_DONE, walks, 1));
    assert_eq!(p.b.g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}

/// The case only the walk decides (seed 001): A's READ held at B through a
/// fast-registered key; B invalidates the key (LOCAL_INV) and registers
/// the region again at once under the same key, over the same pages, so
/// every check of the key passes as before. The READ's slot was cleared
/// by the walk, so released, it sends nothing and fails with
/// WC_REM_ACCESS_ERR. (Mutation: without the walk it completes, with
/// re-validation per packet as well as with the slot's kept translation.)
#[test]
fn a_held_read_stops_though_its_key_was_registered_again() {
    let mut p = pair(ALL_ACCESS);
    let reg = fast_registered_buffer(&mut p, 7);
    post_held_read(&mut p, reg.iova, reg.key);
    p.b.g.post_send(&mut p.b.qp, &local_inv_wqe(63, reg.key));
    let c = p.b.g.poll_cq(&mut p.b.cq, T).expect("LOCAL_INV");
    assert_eq!((c.opcode, c.status), (WC_LOCAL_INV, WC_SUCCESS));
    fast_register(&mut p, &reg, 64);
    assert_eq!(
        rkm(&mut p.b.g),
        (regs::RKM_STATUS_BUSY, 1, 1),
        "the walk cleared the READ's slot; the READ has not stopped yet"
    );
    release_and_expect_access_error(&mut p);
    wait_status(&mut p.b.g, regs::RKM_STATUS_DONE);
    assert_eq!(rkm(&mut p.b.g), (regs::RKM_STATUS_DONE, 1, 1));
    assert_eq!(p.b.g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}

/// A posts `n` READs (work requests 10 on), READ i of B's page i into A's
/// page i.
fn post_page_reads(p: &mut LinkedPair, n: u64) {
    for i in 0..n {
        let r = remote(
            send_wqe(WR_RDMA_READ, 10 + i, p.a.buf + i * 4096, 4096, p.a.lkey),
            p.b.buf + i * 4096,
            p.b.rkey,
        );
        p.a.g.post_send(&mut p.a.qp, &r);
    }
}

/// The next `n` completions of A: (work request, status).
fn completions(p: &mut LinkedPair, n: u64) -> Vec<(u64, u8)> {
    (0..n)
        .map(|_| {
            let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("a completion");
            (c.wr_id.to_native(), c.status)
        })
        .collect()
}

/// B grants one responder resource (MODIFY_QP IBTCA_QP_ATTR_DEST_RD_ATOMIC);
/// A, allowed three, keeps two READs outstanding: the first is answered,
/// the second NAKed invalid request.
#[test]
fn a_read_past_max_dest_rd_atomic_is_naked_invalid_request() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    connect_patient(&mut p.a.g, qa, 2, qb, ALL_ACCESS, None);
    connect_patient(&mut p.b.g, qb, 1, qa, ALL_ACCESS, Some(1));
    p.b.g.client.write32(0, regs::RKM_READ_BUDGET, 0);
    let data = pattern(8192, 5);
    p.b.g.write(p.b.buf, &data);
    post_page_reads(&mut p, 2);
    assert_eq!(
        completions(&mut p, 2),
        [(10, WC_SUCCESS), (11, WC_REM_INV_REQ_ERR)]
    );
    assert_eq!(p.a.g.read(p.a.buf, 4096), data[..4096], "the first landed");
}

/// B grants the responder resources QUERY_DEVICE reports (max_qp_rd_atom,
/// 16: what real HCAs offer; ib_srpt asks 4 per QP) and A keeps 16 READs
/// outstanding on the one QP: with B's responses held back all 16 wait
/// as quasi-WQEs in B's ring at once (none NAKed); released, every one
/// completes in order and its bytes land.
#[test]
fn sixteen_reads_outstanding_on_one_qp_are_all_answered() {
    const N: u64 = 16;
    let mut p = LinkedPair::start(PairOptions::default());
    let d: DeviceAttr = p.b.g.query(CMD_QUERY_DEVICE).expect("QUERY_DEVICE");
    assert_eq!(u64::from(d.max_qp_rd_atom), N, "max_qp_rd_atom");
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    connect_patient(&mut p.a.g, qa, 2, qb, ALL_ACCESS, None);
    connect_patient(&mut p.b.g, qb, 1, qa, ALL_ACCESS, Some(d.max_qp_rd_atom));
    p.b.g.client.write32(0, regs::RKM_READ_BUDGET, 0);
    let data = pattern(N as usize * 4096, 11);
    p.b.g.write(p.b.buf, &data);
    p.a.g.write(p.a.buf, &vec![0x5a; data.len()]);
    post_page_reads(&mut p, N);
    for i in 0..N {
        let q = wait_quasi(&p.b.g, p.b.qp.quasi, i);
        assert_eq!(
            (q.va.to_native(), q.length.to_native()),
            (p.b.buf + i * 4096, 4096),
            "READ {i} held at B"
        );
    }
    assert!(
        p.a.g.try_poll_cq(&mut p.a.cq).is_none(),
        "held: nothing answered or NAKed"
    );
    p.b.g
        .client
        .write32(0, regs::RKM_READ_BUDGET, regs::RKM_READ_BUDGET_DEFAULT);
    let expected: Vec<(u64, u8)> = (0..N).map(|i| (10 + i, WC_SUCCESS)).collect();
    assert_eq!(completions(&mut p, N), expected);
    assert_eq!(p.a.g.read(p.a.buf, data.len()), data, "every READ landed");
}
