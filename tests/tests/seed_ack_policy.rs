//! Seed 002 between two device instances: the MSN start and the ACK policy
//! set through MODIFY_QP's driver-specific attributes, under the link's
//! fault injection (drops, duplicates, reordering, corruption both ways).
//! Every message completes once and lands byte-exact.

use std::time::{Duration, Instant};

use ibtca_device::link::{FaultPlan, FaultRates};
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe, Qp, SimGuest};

const T: Duration = Duration::from_secs(30);

/// The seed 002 attributes of one QP.
#[derive(Clone, Copy)]
struct Policy {
    initial_msn: u32,
    ack_mode: u8,
    ack_every: u16,
    window: u16,
}

/// RESET → INIT → RTR → RTS at path MTU 512 (several packets per message),
/// PSN 100 both ways, with `p` set on the way to RTR and an ACK timeout of
/// 4.096 µs × 2^`timeout`, 7 retries.
fn connect(g: &mut SimGuest, qp: &Qp, dlid: u16, dest: u32, p: Policy, timeout: u8) {
    let rtr = CmdModifyQp {
        attr_mask: (QP_ATTR_MSN | QP_ATTR_ACK_POLICY).into(),
        path_mtu: 2, // IBTCA_MTU_* code 2: 512 bytes
        dlid: dlid.into(),
        dest_qpn: dest.into(),
        rq_psn: 100.into(),
        initial_msn: p.initial_msn.into(),
        ack_mode: p.ack_mode,
        ack_every: p.ack_every.into(),
        window: p.window.into(),
        ..Default::default()
    };
    let rts = CmdModifyQp {
        sq_psn: 100.into(),
        timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 1,
        max_rd_atomic: 3,
        ..Default::default()
    };
    g.connect_with(qp, ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ, rtr, rts);
}

/// ACK timeout exponent of the transfers under faults: 268 ms, so that a
/// packet lost now and then costs little, while 8 tries (2.1 s) outlast a
/// device thread starved on a loaded machine.
const LOSSY_TIMEOUT: u8 = 16;
/// ACK timeout exponent of a requester that must run out of retries:
/// 16.8 ms (8 tries: 134 ms).
const SHORT_TIMEOUT: u8 = 12;

fn pair(a: Policy, b: Policy, timeout: u8) -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions::default());
    let (qa, qb) = (p.a.qp.qpn, p.b.qp.qpn);
    connect(&mut p.a.g, &p.a.qp, 2, qb, a, timeout);
    connect(&mut p.b.g, &p.b.qp, 1, qa, b, timeout);
    p
}

fn lossy(p: &LinkedPair) {
    let rates = FaultRates {
        drop: 10,
        duplicate: 10,
        reorder: 10,
        corrupt: 10,
        seed: 23,
    };
    let a = p.sa.link.as_ref().unwrap();
    a.set_faults(FaultPlan::default().with_rates(rates));
    let b = p.sb.as_ref().unwrap().link.as_ref().unwrap();
    b.set_faults(FaultPlan::default().with_rates(FaultRates { seed: 24, ..rates }));
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// Rounds of `batch` RDMA WRITEs posted at once (so ACKs can coalesce
/// across messages), then rounds of SENDs into posted receives; checks
/// every completion once and in order, and every byte.
fn transfer_under_faults(p: &mut LinkedPair, rounds: u64, batch: u64) {
    lossy(p);
    let mut written = Vec::new();
    for r in 0..rounds {
        for i in 0..batch {
            let n = r * batch + i;
            let len = 600 + (n as usize * 389) % 3000;
            let off = (n % 64) * 4096;
            let data = pattern(len, n as u8);
            p.a.g.write(p.a.buf + off, &data);
            let w = remote(
                send_wqe(WR_RDMA_WRITE, n, p.a.buf + off, len as u32, p.a.lkey),
                p.b.buf + off,
                p.b.rkey,
            );
            p.a.g.post_send(&mut p.a.qp, &w);
            written.push((off, data));
        }
        for i in 0..batch {
            let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("write completion");
            let n = r * batch + i;
            assert_eq!(
                (c.wr_id.to_native(), c.status),
                (n, WC_SUCCESS),
                "write {n}"
            );
        }
        for (off, data) in written.drain(..) {
            assert_eq!(p.b.g.read(p.b.buf + off, data.len()), data, "at {off:#x}");
        }
    }
    let recv_base = p.b.buf + 0x8_0000;
    let src_base = p.a.buf + 0x8_0000;
    for r in 0..rounds {
        for i in 0..batch {
            let n = r * batch + i;
            let rw = recv_wqe(1000 + n, recv_base + i * 4096, 4096, p.b.lkey);
            p.b.g.post_recv(&mut p.b.qp, &rw);
            let len = 100 + (n as usize * 61) % 2000;
            p.a.g
                .write(src_base + i * 4096, &pattern(len, 77 + n as u8));
            let w = send_wqe(WR_SEND, 2000 + n, src_base + i * 4096, len as u32, p.a.lkey);
            p.a.g.post_send(&mut p.a.qp, &w);
        }
        for i in 0..batch {
            let n = r * batch + i;
            let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
            assert_eq!((c.wr_id.to_native(), c.status), (2000 + n, WC_SUCCESS));
            let rc = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
            assert_eq!(
                (rc.wr_id.to_native(), rc.status),
                (1000 + n, WC_SUCCESS),
                "receives complete once, in order"
            );
            let len = 100 + (n as usize * 61) % 2000;
            assert_eq!(rc.byte_len.to_native() as usize, len);
            assert_eq!(
                p.b.g.read(recv_base + i * 4096, len),
                pattern(len, 77 + n as u8)
            );
        }
    }
    let short = Duration::from_millis(200);
    assert!(
        p.a.g.poll_cq(&mut p.a.cq, short).is_none(),
        "no extra sends"
    );
    assert!(
        p.b.g.poll_cq(&mut p.b.cq, short).is_none(),
        "no extra receives"
    );
    let s = p.sa.link.as_ref().unwrap().stats();
    assert!(
        s.fault_dropped + s.fault_duplicated + s.fault_reordered + s.fault_corrupted > 0,
        "faults were injected: {s:?}"
    );
}

#[test]
fn coalesced_acks_with_the_seeds_msn_start_under_link_faults() {
    let policy = Policy {
        initial_msn: 0xff_ffff,
        ack_mode: ACK_COALESCED,
        ack_every: 6,
        window: 64,
    };
    let mut p = pair(policy, policy, LOSSY_TIMEOUT);
    transfer_under_faults(&mut p, 5, 16);
}

#[test]
fn stop_and_wait_under_link_faults() {
    let policy = Policy {
        initial_msn: 0,
        ack_mode: ACK_PER_PACKET,
        ack_every: 0,
        window: 1,
    };
    let mut p = pair(policy, policy, LOSSY_TIMEOUT);
    transfer_under_faults(&mut p, 3, 8);
}

#[test]
fn ends_that_disagree_on_the_msn_start_never_complete() {
    // B counts from the seed's 0xFFFFFF, A expects IBA's 0: B's ACKs say
    // "no message yet" to A, whose WRITE lands but never completes; the
    // retries run out.
    let ibta = Policy {
        initial_msn: 0,
        ack_mode: ACK_PER_MESSAGE,
        ack_every: 0,
        window: 0,
    };
    let seed = Policy {
        initial_msn: 0xff_ffff,
        ..ibta
    };
    let mut p = pair(ibta, seed, SHORT_TIMEOUT);
    let data = pattern(3000, 5);
    p.a.g.write(p.a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 7, p.a.buf, data.len() as u32, p.a.lkey),
        p.b.buf,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("a completion");
    assert_eq!((c.wr_id.to_native(), c.status), (7, WC_RETRY_EXC_ERR));
    // B writes it whenever its engine gets the CPU: maybe after A gave up.
    let deadline = Instant::now() + T;
    while p.b.g.read(p.b.buf, data.len()) != data {
        assert!(Instant::now() < deadline, "the data never landed");
        std::thread::sleep(Duration::from_millis(5));
    }
}
