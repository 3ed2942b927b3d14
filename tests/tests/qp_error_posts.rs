//! Work posted to a QP in the error state completes at once with
//! WC_WR_FLUSH_ERR (IBA 10.3.1), receives as well as sends: found by the
//! soak (scripts/soak.sh), where a guest that took a few messages just
//! before its QP failed reposted their receive buffers before it saw the
//! failure, and those receives never completed at all; a guest waiting
//! for every posted request to complete before it resets the QP waited
//! for ever. Each case below left the receive without a completion before
//! the fix.

use std::time::{Duration, Instant};

use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side};
use ibtca_tests::peer_death::{expect_retry_exceeded, start_stream};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{recv_wqe, send_wqe};

const T: Duration = Duration::from_secs(10);

/// Posts receive `wr_id` on `s`'s QP and expects it back, flushed, and
/// nothing after it.
fn posted_receive_is_flushed(s: &mut Side, wr_id: u64, what: &str) {
    s.g.post_recv(&mut s.qp, &recv_wqe(wr_id, s.buf, 64, s.lkey));
    let c = s
        .g
        .poll_cq(&mut s.cq, T)
        .unwrap_or_else(|| panic!("{what}: the receive posted to a QP in error never completed"));
    assert_eq!(
        (c.wr_id.to_native(), c.opcode, c.status),
        (wr_id, WC_RECV, WC_WR_FLUSH_ERR),
        "{what}: {}",
        wc_status_name(c.status)
    );
    assert!(
        s.g.poll_cq(&mut s.cq, Duration::from_millis(100)).is_none(),
        "{what}: nothing else"
    );
}

fn to_state(s: &mut Side, state: u8) {
    s.g.modify_qp(&CmdModifyQp {
        qpn: s.qp.qpn.into(),
        attr_mask: QP_ATTR_STATE.into(),
        state,
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("QP to state {state}: device status {}", e.0));
}

/// Gives `s` a new QP, moved to INIT only (never connected).
fn fresh_qp_in_init(s: &mut Side) {
    s.qp = s.g.create_qp(s.pd, &s.cq, &s.cq, 6);
    s.g.modify_qp(&CmdModifyQp {
        qpn: s.qp.qpn.into(),
        attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
        state: QPS_INIT,
        access: ACCESS_REMOTE_WRITE.into(),
        ..Default::default()
    })
    .unwrap();
}

/// The transport failed the QP (its peer died mid-stream): a receive the
/// guest posts afterwards is flushed, and so is every later one.
#[test]
fn a_receive_posted_after_the_transport_failed_the_qp_is_flushed() {
    let mut p = LinkedPair::start(PairOptions {
        retry: Retry::PROMPT,
        ..PairOptions::default()
    });
    p.connect(MTU_4096);
    let a = &mut p.a;
    start_stream(
        &mut a.g,
        &mut a.qp,
        &mut a.cq,
        (a.buf, a.lkey),
        (p.b.buf, p.b.rkey),
    );
    drop(p.sb.take());
    let died = Instant::now();
    expect_retry_exceeded(&mut p.a.g, &mut p.a.cq, died, "peer killed");
    posted_receive_is_flushed(&mut p.a, 500, "after WC_RETRY_EXC_ERR");
    posted_receive_is_flushed(&mut p.a, 501, "the next one");
}

/// The driver moved the QP to ERR (from RTS, and before it ever reached
/// RTS): receives posted then are flushed too.
#[test]
fn a_receive_posted_to_a_qp_the_driver_moved_to_error_is_flushed() {
    let mut p = LinkedPair::start(PairOptions::default());
    p.connect(MTU_4096);
    to_state(&mut p.a, QPS_ERR);
    posted_receive_is_flushed(&mut p.a, 600, "RTS -> ERR");

    // A fresh QP that never reached RTS: INIT, a receive, then ERR flushes
    // it; one posted in ERR is flushed at once.
    let s = &mut p.b;
    fresh_qp_in_init(s);
    s.g.post_recv(&mut s.qp, &recv_wqe(700, s.buf, 64, s.lkey));
    assert!(
        s.g.poll_cq(&mut s.cq, Duration::from_millis(100)).is_none(),
        "a QP in INIT keeps its receives"
    );
    to_state(s, QPS_ERR);
    let c =
        s.g.poll_cq(&mut s.cq, T)
            .expect("INIT -> ERR flushes the receive");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (700, WC_WR_FLUSH_ERR),
        "INIT -> ERR"
    );
    posted_receive_is_flushed(s, 701, "posted in ERR, never in RTS");
}

/// A send posted to a QP that went from INIT to ERR without ever being
/// connected completes at once with WC_WR_FLUSH_ERR: the kernel's
/// ib_drain_sq posts one (a zero-length RDMA WRITE) and waits for it
/// without a bound, as ib_srp's cleanup does after a rejected login.
#[test]
fn a_send_posted_to_a_qp_moved_from_init_to_error_is_flushed() {
    let mut p = LinkedPair::start(PairOptions::default());
    let s = &mut p.b;
    fresh_qp_in_init(s);
    to_state(s, QPS_ERR);
    let mut w = send_wqe(WR_RDMA_WRITE, 800, 0, 0, 0);
    w.num_sge = 0;
    s.g.post_send(&mut s.qp, &w);
    let c =
        s.g.poll_cq(&mut s.cq, T)
            .expect("the send posted to a QP moved from INIT to ERR never completed");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (800, WC_WR_FLUSH_ERR),
        "{}",
        wc_status_name(c.status)
    );
}
