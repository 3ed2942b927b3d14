//! Doorbell records (`struct ibtca_db_record`, command QP_DB_RECORD): a
//! QP's SQ producer index in guest memory, which the device reads by
//! itself while it has send work in flight and says so in `sq_awake`, so a
//! driver posting meanwhile skips the trapped doorbell. Driven by
//! simulated guests through vfio-user (no QEMU): A sends to B, whose QP
//! has no receive posted, so A's SEND waits on RNR NAKs (retried without
//! end: rnr_retry 7) for as long as the test likes.

use std::time::{Duration, Instant};

use ibtca_device::engine::{DeviceSnapshot, EngineEvent};
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::{direct_wqe, load, submit};
use ibtca_tests::pair::{LinkedPair, PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe, CmdFailed, DbRoute, Qp, SimGuest};
use ibtca_tests::wait_eventfd;
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(10);
/// How long a WQE without a doorbell is given to be (wrongly) taken.
const QUIET: Duration = Duration::from_millis(300);

const SQ_PI: u64 = std::mem::offset_of!(DbRecord, sq_pi) as u64;
const SQ_AWAKE: u64 = std::mem::offset_of!(DbRecord, sq_awake) as u64;
const RQ_PI: u64 = std::mem::offset_of!(DbRecord, rq_pi) as u64;
const RQ_AWAKE: u64 = std::mem::offset_of!(DbRecord, rq_awake) as u64;
const CQ_ARM: u64 = std::mem::offset_of!(CqDbRecord, arm) as u64;

/// QP_DB_RECORD for `qpn` at `addr`.
fn bind(g: &mut SimGuest, qpn: u32, addr: u64, rsvd: u32) -> Result<(u32, u32), CmdFailed> {
    bind_as(g, CMD_QP_DB_RECORD, qpn, addr, rsvd)
}

/// QP_DB_RECORD or CQ_DB_RECORD (`opcode`) for `handle` at `addr`.
fn bind_as(
    g: &mut SimGuest,
    opcode: u8,
    handle: u32,
    addr: u64,
    rsvd: u32,
) -> Result<(u32, u32), CmdFailed> {
    let p = CmdDbRecord {
        handle: handle.into(),
        rsvd: rsvd.into(),
        addr: addr.into(),
        ..Default::default()
    };
    g.cmd(opcode, p.as_slice())
}

fn u32_at(g: &SimGuest, gpa: u64) -> u32 {
    u32::from_le_bytes(g.read(gpa, 4).try_into().unwrap())
}

/// Waits until the word at `gpa` (an awake word) reads `want`.
fn wait_word(g: &SimGuest, gpa: u64, want: u32) {
    let deadline = Instant::now() + T;
    while u32_at(g, gpa) != want {
        assert!(Instant::now() < deadline, "{gpa:#x} never read {want}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `sq_awake` of the record at `rec` reads `want`.
fn wait_awake(g: &SimGuest, rec: u64, want: u32) {
    wait_word(g, rec + SQ_AWAKE, want);
}

/// Posts `wqe` as a driver with a record does when the device is awake:
/// the WQE into slot `*pi` of the 16-WQE ring at `ring`, then the next
/// index into the record's word at `index`, no doorbell.
fn post_on_record(g: &mut SimGuest, ring: u64, index: u64, pi: &mut u32, wqe: &[u8]) {
    g.write(ring + 128 * u64::from(*pi & 15), wqe);
    *pi += 1;
    g.write(index, &pi.to_le_bytes());
}

/// [`post_on_record`] of send `w` on `qp`'s SQ (`sq_pi` of record `rec`).
fn post_quietly(g: &mut SimGuest, qp: &Qp, rec: u64, sq_pi: &mut u32, w: &SendWqe) {
    post_on_record(g, qp.sq_addr(), rec + SQ_PI, sq_pi, w.as_slice());
}

/// Rings A's SQ doorbell with producer index `pi`.
fn ring(g: &mut SimGuest, qp: &Qp, pi: u32) {
    g.ring(qp.db, regs::DB_SQ, u64::from(qp.qpn) | u64::from(pi) << 32);
}

/// A connected pair whose A QP (16 WQEs) has a doorbell record; returns
/// the record's guest address. The devices never sweep their records (the
/// tests of the handshake see exactly what it does).
fn pair_with_record() -> (LinkedPair, u64) {
    pair_with_record_swept(None)
}

/// [`pair_with_record`] whose devices sweep their sleeping records every
/// `sweep`.
fn pair_with_record_swept(sweep: Option<Duration>) -> (LinkedPair, u64) {
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 4,
        record_sweep: sweep,
        ..PairOptions::default()
    });
    let rec = p.a.g.alloc(4096, 4096);
    bind(&mut p.a.g, p.a.qp.qpn, rec, 0).expect("QP_DB_RECORD");
    p.connect(MTU_4096);
    (p, rec)
}

/// Posts SEND 1 ("hello-b!") on A's record at `rec` and rings for it;
/// B has no receive posted, so the SEND stays in flight on RNR NAKs and
/// A's SQ awake. Returns the record's index so far.
fn send_into_rnr(p: &mut LinkedPair, rec: u64) -> u32 {
    let qp = p.a.qp;
    let mut sq_pi = 0u32;
    p.a.g.write(p.a.buf, b"hello-b!");
    let send = send_wqe(WR_SEND, 1, p.a.buf, 8, p.a.lkey);
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &send);
    ring(&mut p.a.g, &qp, 1);
    wait_awake(&p.a.g, rec, 1);
    sq_pi
}

#[test]
fn an_awake_device_takes_wqes_from_the_record_alone() {
    let (mut p, rec) = pair_with_record();
    let qp = p.a.qp;
    // A SEND that B cannot take yet (no receive): in flight, RNR-retried.
    let mut sq_pi = send_into_rnr(&mut p, rec);

    // Awake: an RDMA WRITE posted with the record alone goes out once
    // the SEND is answered.
    p.a.g.write(p.a.buf + 64, &[0x5a; 16]);
    let write = remote(
        send_wqe(WR_RDMA_WRITE, 2, p.a.buf + 64, 16, p.a.lkey),
        p.b.buf + 64,
        p.b.rkey,
    );
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &write);
    p.b.g
        .post_recv(&mut p.b.qp, &recv_wqe(7, p.b.buf, 8, p.b.lkey));
    for wr_id in [1, 2] {
        p.a.expect_completion(wr_id, WC_SUCCESS, T);
    }
    assert_eq!(p.b.g.read(p.b.buf, 8), b"hello-b!");
    assert_eq!(p.b.g.read(p.b.buf + 64, 16), [0x5a; 16]);
    // Nothing in flight: asleep, and the record alone is not enough.
    wait_awake(&p.a.g, rec, 0);
    let w3 = remote(
        send_wqe(WR_RDMA_WRITE, 3, p.a.buf + 64, 16, p.a.lkey),
        p.b.buf + 128,
        p.b.rkey,
    );
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w3);
    assert!(p.a.g.poll_cq(&mut p.a.cq, QUIET).is_none());
    assert_eq!(p.b.g.read(p.b.buf + 128, 16), [0; 16]);
    // A late doorbell behind what the record said is no error; the one
    // the driver rings now takes WQE 3.
    ring(&mut p.a.g, &qp, 1);
    ring(&mut p.a.g, &qp, 3);
    p.a.expect_completion(3, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf + 128, 16), [0x5a; 16]);
}

/// The device's view of A as its control socket's `inspect` shows it.
fn snapshot(p: &LinkedPair) -> Box<DeviceSnapshot> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let engine = p.sa.engine.as_ref().expect("an in-process instance");
    engine
        .send(EngineEvent::Inspect(tx))
        .expect("engine running");
    rx.recv_timeout(T).expect("the engine answered")
}

/// Posts RDMA WRITE 1 (16 bytes of A's buffer to B's at 0) through the
/// record at `rec` and rings for it, then waits for its completion and
/// for the SQ to sleep; returns the record's index so far and WRITE 2
/// (the same bytes to B's buffer at 64), not posted.
fn one_write_then_asleep(p: &mut LinkedPair, rec: u64) -> (u32, SendWqe) {
    let qp = p.a.qp;
    let write = |wr_id, at| {
        remote(
            send_wqe(WR_RDMA_WRITE, wr_id, p.a.buf, 16, p.a.lkey),
            p.b.buf + at,
            p.b.rkey,
        )
    };
    let (w1, w2) = (write(1, 0), write(2, 64));
    let mut sq_pi = 0u32;
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w1);
    ring(&mut p.a.g, &qp, 1);
    p.a.expect_completion(1, WC_SUCCESS, T);
    wait_awake(&p.a.g, rec, 0);
    (sq_pi, w2)
}

/// `inspect` tells a WQE the device took and completed from one a driver
/// left on a sleeping record (what a lost doorbell looks like): the SQ's
/// indexes, the send work in flight, the record's words and the CQ's
/// producer index.
#[test]
fn inspect_shows_the_queues_and_a_wqe_left_on_a_sleeping_record() {
    let (mut p, rec) = pair_with_record();
    let qp = p.a.qp;
    let (mut sq_pi, w2) = one_write_then_asleep(&mut p, rec);
    let s = snapshot(&p);
    let q = s.qps.iter().find(|q| q.qpn == qp.qpn).expect("A's QP");
    assert_eq!((q.sq.pi, q.sq.ci, q.send_wqes_in_flight), (1, 1, 0));
    let words = q.db_record.expect("a record");
    assert_eq!((words.sq_pi, words.sq_awake), (1, 0));
    assert_eq!(q.send_cqn, p.a.cq.cqn);
    let cq = s.cqs.iter().find(|c| c.cqn == q.send_cqn).expect("A's CQ");
    assert_eq!((cq.pi, cq.record_ci, cq.error), (1, None, false));
    // Posted on the sleeping record alone: the record is ahead of the SQ.
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w2);
    let s = snapshot(&p);
    let q = s.qps.iter().find(|q| q.qpn == qp.qpn).expect("A's QP");
    let words = q.db_record.expect("a record");
    assert_eq!(
        (q.sq.pi, q.sq.ci, words.sq_pi, words.sq_awake),
        (1, 1, 2, 0)
    );
    assert_eq!(s.engine.late_doorbells, 0);
}

/// A driver whose store-load fence did not hold posts on the record while
/// the device goes to sleep on it, and rings nothing: the device's sweep of
/// its sleeping records takes the WQE a sweep later, and counts it.
#[test]
fn a_wqe_left_on_a_sleeping_record_is_taken_by_the_sweep_and_counted() {
    let (mut p, rec) = pair_with_record_swept(Some(ibtca_device::engine::RECORD_SWEEP));
    let qp = p.a.qp;
    p.a.g.write(p.a.buf, &[0x6b; 16]);
    let (mut sq_pi, w2) = one_write_then_asleep(&mut p, rec);
    // The record alone, the device asleep: the lost doorbell.
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w2);
    p.a.expect_completion(2, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf + 64, 16), [0x6b; 16]);
    let s = snapshot(&p);
    assert_eq!(s.engine.late_doorbells, 1);
    let q = s.qps.iter().find(|q| q.qpn == qp.qpn).expect("A's QP");
    assert_eq!((q.sq.pi, q.sq.ci), (2, 2));
}

/// Requests to a QP do not send the device to its send queue: only a
/// response (which may free window space) or an error does. A WQE a
/// driver left on the sleeping record (a lost doorbell) stays there while
/// B's RDMA WRITEs land in A, and the doorbell the driver owes takes it.
/// (Each request used to read the record: a cache line the guest writes
/// with every receive it posts.)
#[test]
fn requests_to_a_qp_leave_its_sleeping_record_unread() {
    let (mut p, rec) = pair_with_record();
    let qp = p.a.qp;
    p.a.g.write(p.a.buf, &[0x6b; 16]);
    let (mut sq_pi, w2) = one_write_then_asleep(&mut p, rec);
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w2);
    p.b.g.write(p.b.buf + 256, &[0x3c; 32]);
    for wr_id in 1..=4 {
        let w = remote(
            send_wqe(WR_RDMA_WRITE, wr_id, p.b.buf + 256, 32, p.b.lkey),
            p.a.buf + 512,
            p.a.rkey,
        );
        p.b.g.post_send(&mut p.b.qp, &w);
        // B's completion follows A's ACK, which A sends after it handled
        // the request (and would have read the record).
        p.b.expect_completion(wr_id, WC_SUCCESS, T);
    }
    assert_eq!(p.a.g.read(p.a.buf + 512, 32), [0x3c; 32]);
    let s = snapshot(&p);
    let q = s.qps.iter().find(|q| q.qpn == qp.qpn).expect("A's QP");
    let words = q.db_record.expect("a record");
    assert_eq!(
        (q.sq.pi, q.sq.ci, words.sq_pi, words.sq_awake),
        (1, 1, 2, 0),
        "WRITE 2 is still only on the record"
    );
    assert_eq!(p.b.g.read(p.b.buf + 64, 16), [0; 16]);
    ring(&mut p.a.g, &qp, 2);
    p.a.expect_completion(2, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf + 64, 16), [0x6b; 16]);
}

/// A request that puts A's QP in error (B's RDMA WRITE with an R_Key A
/// never gave: NAK remote access error) flushes what the driver posted on
/// A's awake record meanwhile, though no response will come to drain it:
/// B's RNR NAK asked A to wait 655 ms before it sends again.
#[test]
fn a_request_that_fails_the_qp_flushes_what_its_awake_record_holds() {
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 4,
        ..PairOptions::default()
    });
    let rec = p.a.g.alloc(4096, 4096);
    bind(&mut p.a.g, p.a.qp.qpn, rec, 0).expect("QP_DB_RECORD");
    let qp = p.a.qp;
    p.a.g.connect(&qp, 2, p.b.qp.qpn, MTU_4096, ALL_ACCESS);
    // B's RNR NAKs carry its minimum RNR timer: 0, the longest wait.
    let rtr = CmdModifyQp {
        path_mtu: MTU_4096,
        dlid: 1.into(),
        dest_qpn: qp.qpn.into(),
        rq_psn: 100.into(),
        ..Default::default()
    };
    let rts = CmdModifyQp {
        sq_psn: 100.into(),
        timeout: p.b.g.retry.timeout,
        retry_cnt: p.b.g.retry.retry_cnt,
        rnr_retry: 7,
        min_rnr_timer: 0,
        ..Default::default()
    };
    let b_qp = p.b.qp;
    p.b.g.connect_with(&b_qp, ALL_ACCESS, rtr, rts);
    let mut sq_pi = send_into_rnr(&mut p, rec);
    let deadline = Instant::now() + T;
    loop {
        let s = snapshot(&p);
        let q = s.qps.iter().find(|q| q.qpn == qp.qpn).expect("A's QP");
        if q.rc.is_some_and(|rc| rc.naks_received.rnr > 0) {
            break;
        }
        assert!(Instant::now() < deadline, "no RNR NAK came back");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Awake: WRITE 2 goes on the record alone, as a driver posts it.
    let write = remote(
        send_wqe(WR_RDMA_WRITE, 2, p.a.buf, 8, p.a.lkey),
        p.b.buf + 64,
        p.b.rkey,
    );
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &write);
    p.b.g.write(p.b.buf + 256, &[0x3c; 8]);
    let bad = remote(
        send_wqe(WR_RDMA_WRITE, 9, p.b.buf + 256, 8, p.b.lkey),
        p.a.buf + 512,
        p.a.rkey ^ 0x00ff_ff00,
    );
    p.b.g.post_send(&mut p.b.qp, &bad);
    p.b.expect_completion(9, WC_REM_ACCESS_ERR, T);
    let mut done = Vec::new();
    for _ in 0..2 {
        let c =
            p.a.g
                .poll_cq(&mut p.a.cq, T)
                .expect("A completes SEND 1 and WRITE 2");
        done.push((c.wr_id.to_native(), c.status));
    }
    done.sort_unstable();
    assert_eq!(done[1], (2, WC_WR_FLUSH_ERR), "{done:?}");
    assert_eq!(done[0].0, 1, "{done:?}");
    assert_eq!(p.a.g.read(p.a.buf + 512, 8), [0; 8]);
}

/// A DRDMA READ completes only when the guest has loaded its range (a
/// window load, not a packet), and the SQ stays awake until then. Once it
/// completes the record must go back to sleep: a driver that still saw
/// `sq_awake` set would post its next WQE on the record alone and wait
/// for it forever.
#[test]
fn a_drained_drdma_read_lets_the_record_sleep() {
    let (mut p, rec) = pair_with_record();
    let qp = p.a.qp;
    let mut sq_pi = 0u32;
    let data: Vec<u8> = (0..512u32).map(|i| (i * 13 + 1) as u8).collect();
    p.b.g.write(p.b.buf, &data);
    submit(&mut p.a.g, 2, false, 512, None);
    let read = direct_wqe(WR_DRDMA_READ, 1, 2, 512, p.b.buf, p.b.rkey);
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &read);
    ring(&mut p.a.g, &qp, 1);
    wait_awake(&p.a.g, rec, 1);
    assert_eq!(load(&mut p.a.g, 2, 0, 512), data, "the READ's bytes");
    p.a.expect_completion(1, WC_SUCCESS, T);
    wait_awake(&p.a.g, rec, 0);
    // Asleep: the next WQE is posted with a doorbell, as a driver does,
    // and goes out.
    p.a.g.write(p.a.buf, &[0xa5; 16]);
    let write = remote(
        send_wqe(WR_RDMA_WRITE, 2, p.a.buf, 16, p.a.lkey),
        p.b.buf + 1024,
        p.b.rkey,
    );
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &write);
    ring(&mut p.a.g, &qp, sq_pi);
    p.a.expect_completion(2, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf + 1024, 16), [0xa5; 16]);
}

#[test]
fn bad_records_are_refused_and_a_bad_index_fails_only_its_qp() {
    let (mut p, rec) = pair_with_record();
    let qp = p.a.qp;
    let einval = Err(CmdFailed(libc::EINVAL as u16));
    assert_eq!(bind(&mut p.a.g, qp.qpn, rec + 8, 0), einval, "unaligned");
    assert_eq!(bind(&mut p.a.g, qp.qpn, rec, 1), einval, "reserved");
    assert_eq!(
        bind(&mut p.a.g, qp.qpn, 1 << 50, 0),
        Err(CmdFailed(libc::EFAULT as u16)),
        "outside guest memory"
    );
    assert_eq!(
        bind(&mut p.a.g, qp.qpn, !63u64, 0),
        Err(CmdFailed(libc::EFAULT as u16)),
        "wraps"
    );
    assert_eq!(
        bind(&mut p.a.g, 0x7777, rec, 0),
        Err(CmdFailed(libc::ENOENT as u16)),
        "no such QP"
    );
    // A record index a ring and more ahead puts the QP in error: its WQE
    // is flushed, nothing reaches B.
    let mut sq_pi = 0u32;
    p.a.g.write(p.a.buf, &[0x11; 8]);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 9, p.a.buf, 8, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w);
    p.a.g.write(rec + SQ_PI, &1000u32.to_le_bytes());
    ring(&mut p.a.g, &qp, 1);
    p.a.expect_completion(9, WC_WR_FLUSH_ERR, T);
    assert_eq!(p.b.g.read(p.b.buf, 8), [0; 8]);
    // The device serves on: B's QP is fine and answers a query.
    p.a.g
        .query::<DeviceAttr>(CMD_QUERY_DEVICE)
        .expect("QUERY_DEVICE");
}

/// B's QP's record and the RQ index it has written there.
struct RqRecord {
    /// The record's guest address.
    rec: u64,
    rq_pi: u32,
}

impl RqRecord {
    /// [`post_on_record`] of a receive `wr_id` of 8 bytes into `b`'s
    /// buffer on `b`'s RQ, as a driver does while `rq_awake` is set.
    fn post(&mut self, b: &mut Side, wr_id: u64) {
        let w = recv_wqe(wr_id, b.buf, 8, b.lkey);
        let ring = b.qp.rq_addr();
        let index = self.rec + RQ_PI;
        post_on_record(&mut b.g, ring, index, &mut self.rq_pi, w.as_slice());
    }
}

/// [`pair_with_record`] with a record for B's QP too, once B's device
/// reads its `rq_pi` (in RTS it does whenever a SEND needs a receive).
fn pair_with_records() -> (LinkedPair, RqRecord) {
    let (mut p, _) = pair_with_record();
    let rec = p.b.g.alloc(4096, 4096);
    bind(&mut p.b.g, p.b.qp.qpn, rec, 0).expect("QP_DB_RECORD");
    wait_word(&p.b.g, rec + RQ_AWAKE, 1);
    (p, RqRecord { rec, rq_pi: 0 })
}

#[test]
fn receives_posted_on_the_record_alone_are_taken_and_flushed() {
    let (mut p, mut brec) = pair_with_records();
    brec.post(&mut p.b, 21);
    p.a.g.write(p.a.buf, b"to-rq-21");
    let mut aqp = p.a.qp;
    p.a.g
        .post_send(&mut aqp, &send_wqe(WR_SEND, 1, p.a.buf, 8, p.a.lkey));
    let c = p.b.expect_completion(21, WC_SUCCESS, T);
    assert_eq!(c.byte_len.to_native(), 8);
    assert_eq!(p.b.g.read(p.b.buf, 8), b"to-rq-21");
    p.a.expect_completion(1, WC_SUCCESS, T);

    // A receive on the record alone, then the driver moves the QP to ERR:
    // the device stops reading the record, reads it once more, and the
    // receive completes with a flush error.
    brec.post(&mut p.b, 22);
    p.b.g
        .modify_qp(&CmdModifyQp {
            qpn: p.b.qp.qpn.into(),
            attr_mask: QP_ATTR_STATE.into(),
            state: QPS_ERR,
            ..Default::default()
        })
        .expect("to ERR");
    p.b.expect_completion(22, WC_WR_FLUSH_ERR, T);
    assert_eq!(u32_at(&p.b.g, brec.rec + RQ_AWAKE), 0);
}

#[test]
fn a_cq_record_lets_the_device_see_consumed_entries_without_doorbells() {
    // A's CQ has 4 entries; its consumed-index doorbells go to a foreign
    // page, which the device drops: only the record tells it.
    let mut p = LinkedPair::start(PairOptions {
        cq_log: 2,
        qp_log: 4,
        ..PairOptions::default()
    });
    let crec = p.a.g.alloc(4096, 4096);
    assert_eq!(
        bind_as(&mut p.a.g, CMD_CQ_DB_RECORD, p.a.cq.cqn, crec + 8, 0),
        Err(CmdFailed(libc::EINVAL as u16)),
        "unaligned"
    );
    assert_eq!(
        bind_as(&mut p.a.g, CMD_CQ_DB_RECORD, 0x7777, crec, 0),
        Err(CmdFailed(libc::ENOENT as u16)),
        "no such CQ"
    );
    bind_as(&mut p.a.g, CMD_CQ_DB_RECORD, p.a.cq.cqn, crec, 0).expect("CQ_DB_RECORD");
    p.connect(MTU_4096);
    p.a.cq.db = DbRoute::Page(5);
    let mut qp = p.a.qp;
    for i in 0..12u32 {
        let at = 8 * u64::from(i);
        p.a.g.write(p.a.buf + at, &[i as u8 + 1; 8]);
        let w = remote(
            send_wqe(WR_RDMA_WRITE, u64::from(i), p.a.buf + at, 8, p.a.lkey),
            p.b.buf + at,
            p.b.rkey,
        );
        p.a.g.post_send(&mut qp, &w);
        p.a.expect_completion(u64::from(i), WC_SUCCESS, T);
        p.a.g.write(crec, &(i + 1).to_le_bytes());
        assert_eq!(p.b.g.read(p.b.buf + at, 8), [i as u8 + 1; 8]);
    }
}

/// The simulated guest's record-only poll (`SimGuest::try_poll_cq_recorded`,
/// what `ibtca-bench verbs --only write-ping` polls with): through a CQ of
/// four entries go twelve completions, each slot handed back only in the
/// record (CQ doorbells go to a foreign page, which the device drops).
#[test]
fn polling_through_a_cq_record_hands_slots_back_without_doorbells() {
    let mut p = LinkedPair::start(PairOptions {
        cq_log: 2,
        qp_log: 4,
        ..PairOptions::default()
    });
    let rec = p.a.g.bind_cq_record(&p.a.cq);
    p.connect(MTU_4096);
    p.a.cq.db = DbRoute::Page(5);
    for i in 0..12u32 {
        write_and_poll(&mut p, rec, u64::from(i), 8 * u64::from(i));
        assert_eq!(u32_at(&p.a.g, rec), i + 1, "the consumer index");
    }
}

#[test]
fn a_qp_the_transport_fails_flushes_receives_posted_on_its_record() {
    let (mut p, mut brec) = pair_with_records();
    brec.post(&mut p.b, 31);
    // A WRITE with a bad R_Key fails B's QP (the responder's error): the
    // receive it holds only in the record is flushed, and B's device
    // stops reading the record.
    let mut aqp = p.a.qp;
    let bad = remote(
        send_wqe(WR_RDMA_WRITE, 5, p.a.buf, 8, p.a.lkey),
        p.b.buf,
        p.b.rkey ^ 0x100,
    );
    p.a.g.post_send(&mut aqp, &bad);
    p.a.expect_completion(5, WC_REM_ACCESS_ERR, T);
    p.b.expect_completion(31, WC_WR_FLUSH_ERR, T);
    wait_word(&p.b.g, brec.rec + RQ_AWAKE, 0);
}

/// BAR0's DOORBELLS counter.
fn doorbells(g: &mut SimGuest) -> u32 {
    g.client.read32(0, regs::DOORBELLS)
}

#[test]
fn doorbells_counts_each_trapped_doorbell_and_nothing_posted_on_the_record() {
    let (mut p, rec) = pair_with_record();
    let qp = p.a.qp;
    let mut sq_pi = 0u32;
    let before = doorbells(&mut p.a.g);
    p.a.g.write(p.a.buf, b"hello-b!");
    let send = send_wqe(WR_SEND, 1, p.a.buf, 8, p.a.lkey);
    post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &send);
    ring(&mut p.a.g, &qp, 1);
    assert_eq!(doorbells(&mut p.a.g), before + 1, "BAR0's SQ doorbell");
    wait_awake(&p.a.g, rec, 1);
    // Posted while the device is awake: three WRITEs, no doorbell.
    for i in 0..3u32 {
        let at = 64 + 16 * u64::from(i);
        p.a.g.write(p.a.buf + at, &[0x30 + i as u8; 16]);
        let w = remote(
            send_wqe(WR_RDMA_WRITE, 2 + u64::from(i), p.a.buf + at, 16, p.a.lkey),
            p.b.buf + at,
            p.b.rkey,
        );
        post_quietly(&mut p.a.g, &qp, rec, &mut sq_pi, &w);
    }
    p.a.g
        .query::<DeviceAttr>(CMD_QUERY_DEVICE)
        .expect("QUERY_DEVICE");
    assert_eq!(
        doorbells(&mut p.a.g),
        before + 1,
        "neither the record nor a command rings a doorbell"
    );
    // A doorbell page's doorbell counts too, even one the device drops.
    p.a.g
        .ring(DbRoute::Page(7), regs::DB_SQ, u64::from(qp.qpn) | 1 << 32);
    assert_eq!(doorbells(&mut p.a.g), before + 2, "a page's doorbell");
    p.b.g
        .post_recv(&mut p.b.qp, &recv_wqe(7, p.b.buf, 8, p.b.lkey));
    for wr_id in 1..=4 {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("a completion");
        assert_eq!(
            (c.wr_id.to_native(), c.status),
            (wr_id, WC_SUCCESS),
            "{}",
            wc_status_name(c.status)
        );
    }
    for i in 0..3u32 {
        let at = 64 + 16 * u64::from(i);
        assert_eq!(p.b.g.read(p.b.buf + at, 16), [0x30 + i as u8; 16]);
    }
}

/// An RDMA WRITE of 8 bytes at offset `at` of A's buffer to B's, with
/// `wr_id`, waited for in A's CQ (polled through the record at `crec`).
fn write_and_poll(p: &mut LinkedPair, crec: u64, wr_id: u64, at: u64) {
    let mut qp = p.a.qp;
    let w = remote(
        send_wqe(WR_RDMA_WRITE, wr_id, p.a.buf + at, 8, p.a.lkey),
        p.b.buf + at,
        p.b.rkey,
    );
    p.a.g.post_send(&mut qp, &w);
    p.a.qp = qp;
    let deadline = Instant::now() + T;
    let c = loop {
        if let Some(c) = p.a.g.try_poll_cq_recorded(&mut p.a.cq, crec) {
            break c;
        }
        assert!(Instant::now() < deadline, "no completion of WRITE {wr_id}");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!((c.wr_id.to_native(), c.status), (wr_id, WC_SUCCESS));
}

/// Arms the CQ whose record is at `crec` for the next completion, as the
/// kernel driver's `count`th request: no doorbell.
fn arm_on_record(g: &mut SimGuest, crec: u64, count: u32) {
    g.write(
        crec + CQ_ARM,
        &(count << 2 | u32::from(CQ_ARM_NEXT)).to_le_bytes(),
    );
}

/// CAP_CQ_RECORD_ARM: an arm request stored in the CQ's record, with no CQ
/// doorbell, raises the CQ's vector at the next completion, once; a new
/// request arms it again (what the kernel driver's req_notify_cq does).
#[test]
fn a_cq_record_arms_the_interrupt_without_a_doorbell() {
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 4,
        ..PairOptions::default()
    });
    let caps = p.a.g.client.read32(0, regs::CAPS);
    assert_ne!(caps & regs::CAP_CQ_RECORD_ARM, 0, "CAPS {caps:#x}");
    let crec = p.a.g.bind_cq_record(&p.a.cq);
    p.connect(MTU_4096);
    let before = doorbells(&mut p.a.g);
    arm_on_record(&mut p.a.g, crec, 1);
    write_and_poll(&mut p, crec, 1, 0);
    assert_eq!(
        wait_eventfd(&p.a.g.cq_irq, T),
        Some(1),
        "the recorded arm raised the CQ's vector"
    );
    assert_eq!(
        doorbells(&mut p.a.g),
        before + 1,
        "only the SQ doorbell was rung"
    );
    // The same word again is no new request: this completion is quiet.
    write_and_poll(&mut p, crec, 2, 0);
    arm_on_record(&mut p.a.g, crec, 2);
    write_and_poll(&mut p, crec, 3, 0);
    assert_eq!(
        wait_eventfd(&p.a.g.cq_irq, T),
        Some(1),
        "one interrupt for the second request, none for WRITE 2"
    );
}

/// A driver whose fence did not hold arms its CQ through the record just
/// as a completion is written, and each side misses the other's store:
/// its look finds no completion, the device's finds no arm, and no
/// completion follows to take the arm. The device's sweep of the records
/// raises the interrupt a sweep later, and counts it.
#[test]
fn an_arm_left_in_the_cq_record_behind_a_completion_is_raised_by_the_sweep() {
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 4,
        ..PairOptions::default()
    });
    let crec = p.a.g.bind_cq_record(&p.a.cq);
    p.connect(MTU_4096);
    let mut qp = p.a.qp;
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, p.a.buf, 8, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut qp, &w);
    // The completion is written (and not consumed) before the arm lands.
    let deadline = Instant::now() + T;
    while snapshot(&p)
        .cqs
        .iter()
        .all(|c| c.cqn != p.a.cq.cqn || c.pi != 1)
    {
        assert!(Instant::now() < deadline, "WRITE 1 never completed");
        std::thread::sleep(Duration::from_millis(1));
    }
    arm_on_record(&mut p.a.g, crec, 1);
    assert_eq!(
        wait_eventfd(&p.a.g.cq_irq, T),
        Some(1),
        "the sweep raised the CQ's vector"
    );
    assert_eq!(snapshot(&p).engine.late_cq_arms, 1);
}

/// A connected pair (QPs of 16 slots) with both QPs' doorbell records
/// bound, once B's record says its RQ is awake; with the records' guest
/// addresses (A's, B's).
fn recorded_pair() -> (LinkedPair, u64, u64) {
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 4,
        ..PairOptions::default()
    });
    p.connect(MTU_4096);
    let arec = p.a.g.bind_qp_record(&p.a.qp);
    let brec = p.b.g.bind_qp_record(&p.b.qp);
    wait_word(&p.b.g, brec + RQ_AWAKE, 1);
    (p, arec, brec)
}

/// The provider's post (`SimGuest::post_send_recorded`,
/// `post_recv_recorded`): the index into the record, then the doorbell
/// only while the record says the device sleeps on the queue.
#[test]
fn a_post_through_the_record_rings_only_while_the_device_sleeps_on_the_queue() {
    let (mut p, arec, brec) = recorded_pair();
    let (mut aqp, mut bqp) = (p.a.qp, p.b.qp);
    let (a0, b0) = (doorbells(&mut p.a.g), doorbells(&mut p.b.g));
    let send = |g: &SimGuest, i: u64, at: u64, lkey: u32| {
        g.write(at, &i.to_le_bytes());
        send_wqe(WR_SEND, i, at, 8, lkey)
    };

    // Nothing in flight: the SQ sleeps, so the first SEND rings. B has no
    // receive yet: the SEND is RNR-retried, in flight, and the SQ awake.
    let w = send(&p.a.g, 1, p.a.buf, p.a.lkey);
    assert!(
        p.a.g.post_send_recorded(&mut aqp, &[w], arec),
        "rang while asleep"
    );
    wait_awake(&p.a.g, arec, 1);
    // Awake: the next SEND and B's receives (RTS: B reads its RQ index by
    // itself) go through the records alone.
    let w = send(&p.a.g, 2, p.a.buf + 64, p.a.lkey);
    assert!(
        !p.a.g.post_send_recorded(&mut aqp, &[w], arec),
        "no doorbell while awake"
    );
    let r = [1, 2].map(|i| recv_wqe(i, p.b.buf + 64 * i, 8, p.b.lkey));
    assert!(
        !p.b.g.post_recv_recorded(&mut bqp, &r, brec),
        "the RQ is awake in RTS"
    );
    assert_eq!(doorbells(&mut p.a.g), a0 + 1, "A's one doorbell");
    assert_eq!(doorbells(&mut p.b.g), b0, "B rang none");
    for i in [1, 2] {
        let c = p.b.expect_completion(i, WC_SUCCESS, T);
        assert_eq!(c.opcode, WC_RECV);
        assert_eq!(p.b.g.read(p.b.buf + 64 * i, 8), i.to_le_bytes());
        p.a.expect_completion(i, WC_SUCCESS, T);
    }

    // Nothing in flight again: the SQ sleeps, and the next post rings.
    wait_awake(&p.a.g, arec, 0);
    let r = [recv_wqe(3, p.b.buf + 192, 8, p.b.lkey)];
    assert!(!p.b.g.post_recv_recorded(&mut bqp, &r, brec));
    let before = doorbells(&mut p.a.g);
    let w = send(&p.a.g, 3, p.a.buf + 128, p.a.lkey);
    assert!(
        p.a.g.post_send_recorded(&mut aqp, &[w], arec),
        "rang after the SQ slept"
    );
    assert_eq!(doorbells(&mut p.a.g), before + 1);
    p.b.expect_completion(3, WC_SUCCESS, T);
    assert_eq!(p.b.g.read(p.b.buf + 192, 8), 3u64.to_le_bytes());
    p.a.expect_completion(3, WC_SUCCESS, T);
}

/// A stream of SENDs whose receiver reposts its receives and returns its
/// CQ slots through records (the bench's SEND rate, `ibtca-bench verbs
/// --only send`) gives the receiver's vfio-user thread nothing to run:
/// B's device takes the receives from the record when its RQ looks empty,
/// on the thread that delivers the SENDs.
#[test]
fn a_send_stream_through_records_gives_the_receivers_vfio_user_thread_nothing() {
    const SENDS: u64 = 200;
    const SLOTS: u64 = 16;
    const DEPTH: u64 = 8;
    let (mut p, arec, brec) = recorded_pair();
    let (mut aqp, mut bqp) = (p.a.qp, p.b.qp);
    let acq = p.a.g.bind_cq_record(&p.a.cq);
    let bcq = p.b.g.bind_cq_record(&p.b.cq);
    let recv = |b: &Side, slot: u64| recv_wqe(slot, b.buf + 64 * slot, 8, b.lkey);
    let all: Vec<RecvWqe> = (0..SLOTS).map(|s| recv(&p.b, s)).collect();
    assert!(!p.b.g.post_recv_recorded(&mut bqp, &all, brec));
    let engine_b =
        p.sb.as_ref()
            .and_then(|s| s.engine.clone())
            .expect("B's engine");
    let from = engine_b.handoffs();
    let b0 = doorbells(&mut p.b.g);

    let (mut posted, mut done, mut received) = (0u64, 0u64, 0u64);
    let mut cqes = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while received < SENDS {
        assert!(
            Instant::now() < deadline,
            "{received} of {SENDS} SENDs arrived"
        );
        let mut wqes = Vec::new();
        while posted < SENDS && posted - done < DEPTH {
            let at = p.a.buf + 64 * (posted % SLOTS);
            p.a.g.write(at, &posted.to_le_bytes());
            wqes.push(send_wqe(WR_SEND, posted, at, 8, p.a.lkey));
            posted += 1;
        }
        p.a.g.post_send_recorded(&mut aqp, &wqes, arec);
        cqes.clear();
        done +=
            p.a.g
                .poll_cq_batch_recorded(&mut p.a.cq, 16, &mut cqes, acq) as u64;
        assert!(cqes.iter().all(|c| c.status == WC_SUCCESS), "{cqes:?}");
        cqes.clear();
        p.b.g
            .poll_cq_batch_recorded(&mut p.b.cq, 16, &mut cqes, bcq);
        let mut again = Vec::new();
        for c in &cqes {
            assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_RECV), "{c:?}");
            let slot = c.wr_id.to_native();
            let got = p.b.g.read(p.b.buf + 64 * slot, 8);
            assert_eq!(got, received.to_le_bytes(), "SEND {received} in order");
            received += 1;
            again.push(recv(&p.b, slot));
        }
        assert!(!p.b.g.post_recv_recorded(&mut bqp, &again, brec));
        if cqes.is_empty() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    assert_eq!(doorbells(&mut p.b.g), b0, "B rang no doorbell");
    let to = engine_b.handoffs();
    let vfio = |h: &ibtca_device::engine::Handoffs| h.vfio_inline + h.vfio_by_owner + h.vfio_queued;
    assert_eq!(vfio(&to), vfio(&from), "no event from B's vfio-user thread");
    assert!(to.link_inline + to.link_by_owner + to.link_queued > 0);
}
