//! Responder resources and READs served from the quasi-WQE queue (seeds
//! 001 and 004): a READ past max_dest_rd_atomic, READ responses between
//! the responder's own requests, and a held-back READ whose key an
//! invalidation walk clears.

use ibtca_protocol::opcode::{OpClass, Position};
use ibtca_protocol::{Opcode, Packet};

use super::*;
use crate::keys::READ_SLOTS;
use crate::mock::MOCK_QPN;
use crate::QpFailure;
use ibtca_abi::regs::{RKM_STATUS_BUSY, RKM_STATUS_DONE};

/// Packets B sent that A's responder would take as READ responses.
fn read_responses(w: &Wire) -> Vec<Packet> {
    w.packets(Dir::BtoA)
        .into_iter()
        .filter(|p| p.info().class == OpClass::Read)
        .collect()
}

/// (PSN, syndrome) of every NAK B sent.
fn naks(w: &Wire) -> Vec<(u32, u8)> {
    w.packets(Dir::BtoA)
        .iter()
        .filter(|p| p.bth.opcode == Opcode::RcAcknowledge)
        .filter_map(|p| {
            let a = p.ext.aeth.filter(|a| a.syndrome >> 5 == 3)?;
            Some((p.bth.psn, a.syndrome))
        })
        .collect()
}

/// A posts `n` READs of `len` bytes each (work request ids 1 to n), of
/// B's memory from DST_VA on, into its own from DST_VA on; returns the
/// requests A sent.
fn post_reads(w: &mut Wire, n: u64, len: u32) -> Vec<Vec<u8>> {
    for i in 0..n {
        let va = DST_VA + i * u64::from(len);
        let mut r = rdma(WR_RDMA_READ, i + 1, len, va, DST);
        r.sge[0].addr = va.into();
        w.post_a(r);
    }
    w.a.env.take_outbox()
}

/// Feeds `packets` to B without serving what it owes.
fn feed_b(w: &mut Wire, packets: &[Vec<u8>]) {
    for p in packets {
        let v = PacketView::parse(p).unwrap();
        w.b.qp.on_packet(&v, w.now, &mut w.b.env);
    }
}

/// IBA 9.7.5.2: a requester that keeps more READs outstanding than the
/// responder resources it was given gets NAK invalid request for the one
/// past them; the READs before it are answered first, in PSN order, and
/// each held one of the key memory's READ slots until then.
#[test]
fn a_read_past_the_responder_resources_is_naked_invalid_request() {
    let (mut a, mut b) = configs(1024);
    a.max_rd_atomic = 4;
    b.max_dest_rd_atomic = 3;
    let mut w = Wire::new(a, b);
    w.b.env.bytes_mut(DST)[..4096].copy_from_slice(&pattern(4096, 9));
    let requests = post_reads(&mut w, 4, 1024);
    assert_eq!(requests.len(), 4, "four READ requests in one burst");
    feed_b(&mut w, &requests[..3]);
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 3, "three READ slots");
    assert!(w.b.env.take_outbox().is_empty(), "queued, not answered");
    assert_eq!(w.b.env.quasi_log.len(), 3, "three quasi-WQEs in the ring");
    feed_b(&mut w, &requests[3..]);
    w.run();
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_RDMA_READ, WC_SUCCESS),
            (2, WC_RDMA_READ, WC_SUCCESS),
            (3, WC_RDMA_READ, WC_SUCCESS),
            (4, WC_RDMA_READ, WC_REM_INV_REQ_ERR),
        ]
    );
    assert_eq!(naks(&w), [(103, 0x61)], "NAK invalid request for PSN 103");
    assert_eq!(
        &w.a.env.bytes(DST)[..3072],
        &pattern(4096, 9)[..3072],
        "the three READs landed"
    );
    assert_eq!(w.b.qp.failure(), Some(QpFailure::Responder));
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 0, "every slot released");
}

/// Responder resources up to every READ slot of the key memory (16, what
/// real HCAs offer; ib_srpt asks 4): 16 READs arrive before any is
/// answered, each holds its own slot and quasi-WQE, and all 16 are
/// answered in order, byte-exact; a 17th outstanding one is NAKed invalid
/// request.
#[test]
fn sixteen_outstanding_reads_are_held_and_answered() {
    let (mut a, mut b) = configs(1024);
    a.max_rd_atomic = 17;
    b.max_dest_rd_atomic = 16;
    assert_eq!(usize::from(b.max_dest_rd_atomic), READ_SLOTS);
    let mut w = Wire::new(a, b);
    let data = pattern(17 * 1024, 3);
    w.b.env.bytes_mut(DST)[..data.len()].copy_from_slice(&data);
    let requests = post_reads(&mut w, 17, 1024);
    assert_eq!(requests.len(), 17, "17 READ requests in one burst");
    feed_b(&mut w, &requests[..16]);
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 16, "16 READ slots held");
    assert_eq!(w.b.env.quasi_log.len(), 16, "16 quasi-WQEs in the ring");
    assert!(naks(&w).is_empty() && w.b.env.take_outbox().is_empty());
    feed_b(&mut w, &requests[16..]);
    w.run();
    let mut expected: Vec<_> = (1..=16).map(|i| (i, WC_RDMA_READ, WC_SUCCESS)).collect();
    expected.push((17, WC_RDMA_READ, WC_REM_INV_REQ_ERR));
    assert_eq!(summary(&w.a.env.send_cq), expected);
    assert_eq!(naks(&w), [(116, 0x61)], "NAK invalid request for PSN 116");
    assert_eq!(
        &w.a.env.bytes(DST)[..16 * 1024],
        &data[..16 * 1024],
        "the 16 READs landed"
    );
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 0, "every slot released");
}

/// Seed 004: READ responses come from the queue a budget per turn, and the
/// responder QP's own SENDs and WRITEs go out between them; every byte
/// arrives.
#[test]
fn read_responses_interleave_with_the_responders_own_requests() {
    let mut w = Wire::with_mtu(256);
    let read = pattern(2048, 4);
    let own = pattern(1024, 6);
    w.b.env.bytes_mut(DST)[..2048].copy_from_slice(&read);
    w.b.env.bytes_mut(SRC)[..1024].copy_from_slice(&own);
    w.a.env.post_recv(50, &[sge(SRC, SRC_VA + 0x1_0000, 4096)]);
    w.post_a(rdma(WR_RDMA_READ, 1, 2048, DST_VA, DST)); // 8 responses
    let request = w.a.env.take_outbox();
    feed_b(&mut w, &request);
    let mut wire_b = Vec::new();
    let turn = |w: &mut Wire, budget, wire: &mut Vec<Vec<u8>>| {
        let sent = w.b.qp.serve_responses(budget, &mut w.b.env);
        wire.extend(w.b.env.take_outbox());
        sent
    };
    assert_eq!(turn(&mut w, 2, &mut wire_b), 2);
    w.post_b(send(10, 512)); // 2 packets
    wire_b.extend(w.b.env.take_outbox());
    assert_eq!(turn(&mut w, 2, &mut wire_b), 2);
    w.post_b(rdma(WR_RDMA_WRITE, 11, 256, SRC_VA + 0x2_0000, SRC)); // 1
    wire_b.extend(w.b.env.take_outbox());
    assert_eq!(turn(&mut w, 100, &mut wire_b), 4, "the last four responses");
    assert!(!w.b.qp.owes_responses());
    let order: Vec<(OpClass, Position)> = wire_b
        .iter()
        .map(|p| {
            let info = PacketView::parse(p).unwrap().info();
            (info.class, info.position)
        })
        .collect();
    use OpClass::{Read as R, Send as S, Write as W};
    use Position::{First as F, Last as L, Middle as M, Only as O};
    assert_eq!(
        order,
        [
            (R, F),
            (R, M),
            (S, F),
            (S, L),
            (R, M),
            (R, M),
            (W, O),
            (R, M),
            (R, M),
            (R, M),
            (R, L)
        ]
    );
    w.b.env.outbox = wire_b;
    w.run();
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_RDMA_READ, WC_SUCCESS)]);
    assert_eq!(
        summary(&w.b.env.send_cq),
        [(10, WC_SEND, WC_SUCCESS), (11, WC_RDMA_WRITE, WC_SUCCESS)]
    );
    assert_eq!(summary(&w.a.env.recv_cq), [(50, WC_RECV, WC_SUCCESS)]);
    assert_eq!(&w.a.env.bytes(DST)[..2048], &read[..], "READ byte-exact");
    assert_eq!(&w.a.env.bytes(SRC)[0x1_0000..0x1_0200], &own[..512]);
    assert_eq!(&w.a.env.bytes(SRC)[0x2_0000..0x2_0100], &own[..256]);
}

/// Seed 001 with the budget hook: a READ of 16 responses is held after 5;
/// its key is invalidated at B (`how`), which runs the walk and clears its
/// slot; released, the READ sends nothing more: NAK remote access error for
/// the first response not sent, the requester's READ completes with
/// WC_REM_ACCESS_ERR and the SEND behind it is flushed (the QP is in
/// error); only the 5 responses' bytes arrived. B had executed the SEND (it
/// came after the READ, before the walk): its receive completed. The
/// responses after the first read through the READ's slot, not the key: no
/// other check would stop them (mutation: without the walk both cases
/// send all 16).
fn a_read_stops_mid_way_when_its_key_is_invalidated(how: Invalidation) {
    let mut w = Wire::with_mtu(256);
    let data = pattern(4096, 2);
    w.b.env.bytes_mut(DST)[..4096].copy_from_slice(&data);
    w.b.env.post_recv(70, &[sge(SRC, SRC_VA, 64)]);
    w.read_budget = 0;
    w.post_a(rdma(WR_RDMA_READ, 1, 4096, DST_VA, DST));
    w.post_a(send(2, 64));
    w.deliver(); // (no timers: the requester's ACK timeout would retry)
    assert!(read_responses(&w).is_empty(), "held back");
    assert!(w.b.qp.owes_responses());
    assert!(w.b.env.keys.still_valid(MOCK_QPN, 0), "slot 0 holds DST");
    assert_eq!(summary(&w.b.env.recv_cq), [(70, WC_RECV, WC_SUCCESS)]);
    // Five responses go, then the hook holds the rest again.
    assert_eq!(w.b.qp.serve_responses(5, &mut w.b.env), 5);
    w.deliver();
    assert_eq!(read_responses(&w).len(), 5);
    let regs = w.b.env.keys.regs().clone();
    how.apply(&mut w.b.env);
    assert_eq!(
        (regs.walks(), regs.cleared()),
        (1, 1),
        "the walk cleared it"
    );
    assert_eq!(regs.status(), RKM_STATUS_BUSY, "the READ has not stopped");
    w.read_budget = usize::MAX;
    w.run();
    assert_eq!(read_responses(&w).len(), 5, "nothing after the walk");
    assert_eq!(naks(&w), [(105, 0x62)], "NAK remote access error, PSN 105");
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_RDMA_READ, WC_REM_ACCESS_ERR),
            (2, WC_SEND, WC_WR_FLUSH_ERR)
        ]
    );
    let got = w.a.env.bytes(DST);
    assert_eq!(&got[..5 * 256], &data[..5 * 256], "the 5 responses landed");
    assert!(got[5 * 256..4096].iter().all(|&b| b == 0), "nothing else");
    assert_eq!(regs.status(), RKM_STATUS_DONE);
    assert_eq!((regs.walks(), regs.cleared()), (1, 1));
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 0, "slot released");
    assert_eq!(w.b.qp.failure(), Some(QpFailure::Responder));
    assert!(w.a.qp.is_error());
}

#[test]
fn a_read_stops_mid_way_when_its_region_goes() {
    a_read_stops_mid_way_when_its_key_is_invalidated(Invalidation::Gone);
}

#[test]
fn a_read_stops_mid_way_though_its_key_was_registered_again() {
    a_read_stops_mid_way_when_its_key_is_invalidated(Invalidation::RegisteredAgain);
}

/// A READ held back keeps the acknowledgements of later requests behind
/// it (responses leave in PSN order): the requester sees no ACK that
/// would skip the READ's PSNs, and everything completes once it is served.
#[test]
fn acknowledgements_wait_behind_a_held_read() {
    let mut w = Wire::with_mtu(1024);
    w.b.env.bytes_mut(DST)[..2048].copy_from_slice(&pattern(2048, 8));
    w.b.env.post_recv(80, &[sge(SRC, SRC_VA, 64)]);
    w.read_budget = 0;
    w.post_a(rdma(WR_RDMA_READ, 1, 2048, DST_VA, DST));
    w.post_a(send(2, 64));
    let mut fa = rdma(WR_ATOMIC_FETCH_ADD, 3, 8, DST_VA + 4096, DST);
    fa.compare_add = 5.into();
    w.post_a(fa);
    w.deliver();
    assert!(
        w.packets(Dir::BtoA).is_empty(),
        "no ACK or atomic ACK before the READ's responses"
    );
    assert!(w.a.env.send_cq.is_empty());
    assert_eq!(
        w.b.env.keys.held(MOCK_QPN),
        1,
        "the atomic's slot came back"
    );
    w.read_budget = 1;
    w.run();
    let classes: Vec<Opcode> = w.packets(Dir::BtoA).iter().map(|p| p.bth.opcode).collect();
    assert_eq!(
        classes,
        [
            Opcode::RcRdmaReadResponseFirst,
            Opcode::RcRdmaReadResponseLast,
            Opcode::RcAcknowledge,
            Opcode::RcAtomicAcknowledge
        ]
    );
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_RDMA_READ, WC_SUCCESS),
            (2, WC_SEND, WC_SUCCESS),
            (3, WC_FETCH_ADD, WC_SUCCESS)
        ]
    );
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 0);
}

/// A READ that finds the quasi-WQE ring full is dropped as if lost (no
/// NAK, the expected PSN stays); the requester's retry is served once the
/// ring has room.
#[test]
fn a_read_finding_the_quasi_ring_full_is_dropped_and_retried() {
    let mut w = Wire::with_mtu(1024);
    w.b.env.quasi_cap = Some(1);
    w.b.env.bytes_mut(DST)[..2048].copy_from_slice(&pattern(2048, 1));
    let requests = post_reads(&mut w, 2, 1024);
    feed_b(&mut w, &requests);
    assert_eq!(w.b.env.quasi_log.len(), 1, "the second did not fit");
    assert_eq!(w.b.qp.expected_psn(), 101, "and was not taken");
    assert!(naks(&w).is_empty());
    w.run();
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_RDMA_READ, WC_SUCCESS), (2, WC_RDMA_READ, WC_SUCCESS)]
    );
    assert_eq!(&w.a.env.bytes(DST)[..2048], &pattern(2048, 1)[..]);
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 0);
    assert!(naks(&w).is_empty(), "no NAK");
}

/// Seed 001 with seed 004's queue: each READ holds its key slot until its
/// own LAST response leaves, not until the queue empties. Three READs of
/// three responses, served one response per turn: the slots drop 3 → 2 →
/// 1 → 0 exactly at each LAST.
#[test]
fn each_read_releases_its_key_slot_at_its_last_response() {
    let (a, b) = configs(1024);
    let mut w = Wire::new(a, b);
    w.b.env.bytes_mut(DST)[..9216].copy_from_slice(&pattern(9216, 3));
    let requests = post_reads(&mut w, 3, 3072);
    feed_b(&mut w, &requests);
    let mut held = Vec::new();
    let mut positions = Vec::new();
    for _ in 0..9 {
        assert_eq!(w.b.qp.serve_responses(1, &mut w.b.env), 1, "one a turn");
        for p in w.b.env.take_outbox() {
            positions.push(PacketView::parse(&p).unwrap().info().position);
        }
        held.push(w.b.env.keys.held(MOCK_QPN));
    }
    use Position::{First, Last, Middle};
    assert_eq!(
        positions,
        [First, Middle, Last, First, Middle, Last, First, Middle, Last]
    );
    assert_eq!(
        held,
        [3, 3, 2, 2, 2, 1, 1, 1, 0],
        "slots after each response"
    );
    assert!(!w.b.qp.owes_responses());
}
