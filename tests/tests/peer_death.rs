//! Requester retry and flush semantics when the peer of a stream of RDMA
//! WRITEs dies (issue 19, item 3): two devices, each driven by a simulated
//! guest; A streams WRITEs to B, then B's device is killed, the link goes
//! down or loses everything, B's device is restarted fresh, or B's client
//! (QEMU) goes away and a new one comes. Every time A's oldest unfinished
//! WRITE completes with WC_RETRY_EXC_ERR (its ACK timer ran out of
//! retries; the time is printed, `peer_death::hang_guard` bounds the
//! wait), every later one with WC_WR_FLUSH_ERR, and A's device then
//! serves a new QP pair.
//!
//! What a peer that forgot the QP does (IBA vol 1 §9.6, transport header validation: a packet for
//! a QP that does not exist, or is not in a state to receive, is silently
//! dropped) makes it a silent peer like a dead one: the requester learns of
//! it only by its ACK timer, never by a NAK.

use std::time::{Duration, Instant};

use ibtca_device::link::{FaultPlan, FaultRates};
use ibtca_device::verbs::abi::*;
use ibtca_tests::fabric::{Fabric, FabricOptions};
use ibtca_tests::pair::{LinkedPair, PairOptions, Side, ALL_ACCESS};
use ibtca_tests::peer_death::{expect_retry_exceeded, start_stream};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{remote, send_wqe};

const T: Duration = Duration::from_secs(20);

/// A new QP on `a` to `b`'s QP, both connected: one 64 KiB WRITE lands.
fn new_pair_works(a: &mut Side, b: &mut Side, what: &str) {
    let mut qa = a.g.create_qp(a.pd, &a.cq, &a.cq, 6);
    a.g.connect(&qa, 2, b.qp.qpn, MTU_4096, ALL_ACCESS);
    b.g.connect(&b.qp, 1, qa.qpn, MTU_4096, ALL_ACCESS);
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 7 + 3) as u8).collect();
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 99, a.buf, 65536, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut qa, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("a WRITE on the new QP");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (99, WC_SUCCESS),
        "{what}: new QP pair"
    );
    assert_eq!(
        b.g.read(b.buf, data.len()),
        data,
        "{what}: bytes at the new peer"
    );
}

/// A pair whose QPs give up after [`Retry::PROMPT`]'s bound, which the
/// tests check.
fn pair() -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions {
        retry: Retry::PROMPT,
        ..PairOptions::default()
    });
    p.connect(MTU_4096);
    p
}

fn stream_on(p: &mut LinkedPair) {
    let a = &mut p.a;
    start_stream(
        &mut a.g,
        &mut a.qp,
        &mut a.cq,
        (a.buf, a.lkey),
        (p.b.buf, p.b.rkey),
    );
}

/// B's device process dies (its server and link stop): A's link goes down
/// and nothing answers.
#[test]
fn peer_device_killed_mid_stream() {
    let mut p = pair();
    stream_on(&mut p);
    drop(p.sb.take());
    let died = Instant::now();
    expect_retry_exceeded(&mut p.a.g, &mut p.a.cq, died, "device killed");
    p.restart_b();
    new_pair_works(&mut p.a, &mut p.b, "device killed");
}

/// The link stays up but loses every packet both ways.
#[test]
fn link_losing_everything_mid_stream() {
    let mut p = pair();
    stream_on(&mut p);
    let all = FaultPlan::default().with_rates(FaultRates {
        drop: 1000,
        ..FaultRates::default()
    });
    p.sa.link.as_ref().unwrap().set_faults(all.clone());
    p.sb.as_ref()
        .unwrap()
        .link
        .as_ref()
        .unwrap()
        .set_faults(all);
    let died = Instant::now();
    expect_retry_exceeded(&mut p.a.g, &mut p.a.cq, died, "link lost");
    for l in [p.sa.link.as_ref(), p.sb.as_ref().unwrap().link.as_ref()] {
        l.unwrap().set_faults(FaultPlan::default());
    }
    p.b.qp = p.b.g.create_qp(p.b.pd, &p.b.cq, &p.b.cq, 6);
    new_pair_works(&mut p.a, &mut p.b, "link lost");
}

/// B's device is stopped and a fresh one (same LID, same link) comes up
/// at once: it knows nothing of A's QP and drops its packets.
#[test]
fn peer_device_restarted_mid_stream() {
    let mut p = pair();
    stream_on(&mut p);
    p.restart_b();
    let died = Instant::now();
    expect_retry_exceeded(&mut p.a.g, &mut p.a.cq, died, "device restarted");
    new_pair_works(&mut p.a, &mut p.b, "device restarted");
}

/// B's client (its QEMU) goes away and a new one comes: B's device forgets
/// every object, as a restarted guest's device does.
#[test]
fn peer_guest_restarted_mid_stream() {
    let mut p = pair();
    stream_on(&mut p);
    let died = Instant::now();
    p.restart_b_guest();
    expect_retry_exceeded(&mut p.a.g, &mut p.a.cq, died, "guest restarted");
    new_pair_works(&mut p.a, &mut p.b, "guest restarted");
}

/// A's link goes down at a switch while both devices live; after it
/// comes back a new QP pair works.
#[test]
fn link_down_at_the_switch_mid_stream() {
    let mut f = Fabric::star(
        2,
        FabricOptions {
            all_to_all: true,
            retry: Retry::PROMPT,
            ..FabricOptions::default()
        },
    );
    let (a, b) = f.two(0, 1);
    let (to, qp) = ((b.buf, b.rkey), a.qps.get_mut(&2).unwrap());
    start_stream(&mut a.g, qp, &mut a.cq, (a.buf, a.lkey), to);
    f.switches[0].port_down(1).unwrap();
    let died = Instant::now();
    let a = &mut f.nodes[0];
    expect_retry_exceeded(&mut a.g, &mut a.cq, died, "link down");
    f.switches[0].port_up(1).unwrap();
    let deadline = Instant::now() + T;
    while a.g.client.read32(0, ibtca_device::regs::PORT_STATE) != ibtca_device::regs::PORT_ACTIVE {
        assert!(Instant::now() < deadline, "A's port back up");
        std::thread::sleep(Duration::from_millis(5));
    }
    f.connect(0, 1, MTU_4096);
    let (a, b) = f.two(0, 1);
    let data: Vec<u8> = (0..65536u32).map(|i| (i * 5 + 1) as u8).collect();
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 99, a.buf, 65536, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(a.qps.get_mut(&2).unwrap(), &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("a WRITE on the new QP");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (99, WC_SUCCESS),
        "link down: new QP pair"
    );
    assert_eq!(
        b.g.read(b.buf, data.len()),
        data,
        "link down: bytes at the peer"
    );
}
