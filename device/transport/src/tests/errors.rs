//! Errors: remote access (NAK 0x62), invalid requests (0x61), local
//! protection and length errors, flushing.

use ibtca_protocol::Opcode;

use super::*;
use crate::keys::{KeyUse, WRITE_SLOT};
use crate::mock::{ALL_ACCESS, MOCK_QPN};

const OTHER_PD: u32 = 0x300;
const READ_ONLY: u32 = 0x400;
const NO_ATOMIC: u32 = 0x500;

/// A wire where B also has a region in another PD, a read-only region and
/// one without the atomic right.
fn wire() -> Wire {
    let mut w = Wire::with_mtu(1024);
    w.b.env.reg_in(OTHER_PD, 0x4000_0000, 65536, ALL_ACCESS, 2);
    w.b.env.reg(
        READ_ONLY,
        0x5000_0000,
        65536,
        ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ,
    );
    w.b.env.reg(
        NO_ATOMIC,
        0x6000_0000,
        65536,
        ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE,
    );
    for key in [OTHER_PD, READ_ONLY, NO_ATOMIC, DST] {
        w.b.env.bytes_mut(key).fill(0xa5);
    }
    w.a.env.bytes_mut(SRC).copy_from_slice(&pattern(2 << 20, 3));
    w
}

fn naks(w: &Wire) -> Vec<(u32, u8)> {
    w.packets(Dir::BtoA)
        .iter()
        .filter(|p| p.bth.opcode == Opcode::RcAcknowledge)
        .filter_map(|p| {
            p.ext
                .aeth
                .filter(|a| a.syndrome >> 5 == 3)
                .map(|a| (p.bth.psn, a.syndrome))
        })
        .collect()
}

/// Posts `wr` and a second WQE behind it; expects NAK `syndrome` for PSN
/// 100, `status` for `wr`, a flush for the second, both QPs in error and
/// B's memory unchanged byte for byte.
fn expect_remote_error(mut w: Wire, wr: SendWqe, syndrome: u8, status: u8) {
    let b_before = w.b.env.mem.clone();
    let a_before = w.a.env.mem.clone();
    w.post_a(wr);
    w.post_a(send(99, 8));
    w.run();
    let ctx = format!("opcode {} rkey {:#x}", wr.opcode, wr.rkey.to_native());
    assert_eq!(naks(&w), [(100, syndrome)], "{ctx}");
    assert_eq!(
        summary(&w.a.env.send_cq)
            .iter()
            .map(|c| (c.0, c.2))
            .collect::<Vec<_>>(),
        [(wr.wr_id.to_native(), status), (99, WC_WR_FLUSH_ERR)],
        "{ctx}"
    );
    assert!(w.a.qp.is_error() && w.b.qp.is_error(), "{ctx}");
    assert!(w.b.env.mem == b_before, "{ctx}: responder memory changed");
    assert!(
        w.a.env.mem == a_before,
        "{ctx}: nothing came back into the requester"
    );
}

#[test]
fn remote_access_errors_nak_0x62_and_write_nothing() {
    let cases: [(u32, u64, &str); 4] = [
        (0xbad, DST_VA, "unknown R_Key"),
        (OTHER_PD, 0x4000_0000, "region in another PD"),
        (READ_ONLY, 0x5000_0000, "no REMOTE_WRITE"),
        (DST, DST_VA + (2 << 20) - 1000, "past the end"),
    ];
    for (rkey, va, _what) in cases {
        // A 4-packet WRITE: refused on its FIRST, before any byte moves.
        let wr = rdma(WR_RDMA_WRITE, 1, 4096, va, rkey);
        expect_remote_error(wire(), wr, 0x62, WC_REM_ACCESS_ERR);
    }
    // READ through a bad key or past the end, atomics without the right.
    expect_remote_error(
        wire(),
        rdma(WR_RDMA_READ, 2, 4096, DST_VA, 0xbad),
        0x62,
        WC_REM_ACCESS_ERR,
    );
    expect_remote_error(
        wire(),
        rdma(WR_RDMA_READ, 3, 4096, DST_VA + (2 << 20) - 8, DST),
        0x62,
        WC_REM_ACCESS_ERR,
    );
    let mut cas = wqe(WR_ATOMIC_CMP_SWP, 4, &[sge(DST, DST_VA, 8)]);
    cas.remote_addr = 0x6000_0000.into();
    cas.rkey = NO_ATOMIC.into();
    expect_remote_error(wire(), cas, 0x62, WC_REM_ACCESS_ERR);
}

#[test]
fn write_with_immediate_refused_keeps_the_receive_for_flush() {
    let mut w = wire();
    w.b.env.post_recv(8, &[]);
    let b_dst = w.b.env.bytes(DST).to_vec();
    w.post_a(rdma(WR_RDMA_WRITE_IMM, 1, 100, 0, 0xbad));
    w.run();
    assert_eq!(naks(&w), [(100, 0x62)]);
    assert_eq!(w.b.env.bytes(DST), &b_dst[..]);
    // B went to error and flushed its posted receive.
    assert_eq!(summary(&w.b.env.recv_cq), [(8, WC_RECV, WC_WR_FLUSH_ERR)]);
}

#[test]
fn misaligned_atomic_is_an_invalid_request() {
    let mut cas = wqe(WR_ATOMIC_FETCH_ADD, 1, &[sge(DST, DST_VA, 8)]);
    cas.remote_addr = (DST_VA + 4).into();
    cas.rkey = DST.into();
    expect_remote_error(wire(), cas, 0x61, WC_REM_INV_REQ_ERR);
}

#[test]
fn receive_buffer_too_small() {
    let mut w = wire();
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 100)]);
    w.post_a(send(1, 1000));
    w.run();
    assert_eq!(naks(&w), [(100, 0x61)]);
    assert_eq!(summary(&w.b.env.recv_cq), [(1, WC_RECV, WC_LOC_LEN_ERR)]);
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_SEND, WC_REM_INV_REQ_ERR)]
    );
}

#[test]
fn bad_local_key_is_a_local_protection_error() {
    let mut w = wire();
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 4096)]);
    w.post_a(wqe(WR_SEND, 1, &[sge(0xbad, 0, 100)]));
    w.post_a(send(2, 8));
    w.run();
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_SEND, WC_LOC_PROT_ERR), (2, WC_SEND, WC_WR_FLUSH_ERR)]
    );
    assert!(w.a.qp.is_error());
    assert!(w.packets(Dir::AtoB).is_empty(), "nothing was sent");
}

#[test]
fn local_error_waits_for_earlier_wqes() {
    // The first SEND is fine; the second fails to gather on its second
    // packet. The first still completes successfully, before the error.
    let mut w = wire();
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 4096)]);
    w.b.env.post_recv(2, &[sge(DST, DST_VA, 4096)]);
    w.post_a(send(1, 2048));
    w.post_a(wqe(
        WR_SEND,
        2,
        &[sge(SRC, SRC_VA, 1024), sge(0xbad, 0, 1024)],
    ));
    w.run();
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_SEND, 0), (2, WC_SEND, WC_LOC_PROT_ERR)]
    );
}

#[test]
fn invalid_work_requests_fail_locally() {
    let mut w = wire();
    let mut bad = send(1, 8);
    bad.opcode = 0x77;
    w.post_a(bad);
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, WC_LOC_QP_OP_ERR)]);
    let mut w = wire();
    let mut wr = send(2, 8);
    wr.num_sge = 5;
    w.post_a(wr);
    assert_eq!(w.a.env.send_cq[0].status, WC_LOC_LEN_ERR);
    let mut w = wire();
    w.post_a(wqe(WR_ATOMIC_FETCH_ADD, 3, &[sge(DST, DST_VA, 4)]));
    assert_eq!(w.a.env.send_cq[0].status, WC_LOC_LEN_ERR);
}

#[test]
fn flush_completes_everything_signaled_or_not() {
    let mut w = wire();
    w.filter = Box::new(|_, _| true);
    for i in 0..3 {
        let mut s = send(i, 2048);
        s.flags = if i == 1 { 0 } else { WQE_F_SIGNALED };
        w.post_a(s);
    }
    w.a.env.post_recv(10, &[]);
    w.a.env.post_recv(11, &[]);
    w.deliver();
    w.a.qp.flush(&mut w.a.env);
    assert!(w.a.qp.is_error());
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (0, WC_SEND, WC_WR_FLUSH_ERR),
            (1, WC_SEND, WC_WR_FLUSH_ERR),
            (2, WC_SEND, WC_WR_FLUSH_ERR)
        ]
    );
    assert_eq!(
        summary(&w.a.env.recv_cq),
        [
            (10, WC_RECV, WC_WR_FLUSH_ERR),
            (11, WC_RECV, WC_WR_FLUSH_ERR)
        ]
    );
    assert_eq!(w.a.qp.next_deadline(), None);
    assert_eq!(w.a.qp.send_queue_len(), 0);
}

/// A work request is retired (what it held, such as a DRDMA range, is
/// given back) before its completion is written, on success and on flush:
/// a guest that reuses the range as soon as it sees the completion finds
/// it free.
#[test]
fn work_requests_are_retired_before_their_completion_is_written() {
    let mut w = wire();
    for i in 0..3 {
        w.post_a(rdma(WR_RDMA_WRITE, i, 64, DST_VA, DST));
    }
    w.run();
    assert_eq!(summary(&w.a.env.send_cq).len(), 3);
    w.filter = Box::new(|_, _| true);
    for i in 3..5 {
        w.post_a(send(i, 64));
    }
    w.deliver();
    w.a.qp.flush(&mut w.a.env);
    assert_eq!(
        w.a.env.retired,
        [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)],
        "(wr_id, completions already written when it was retired)"
    );
}

#[test]
fn a_partial_receive_is_flushed_when_the_qp_fails() {
    let mut w = wire();
    // Only the FIRST packet of a 2-packet SEND gets through.
    w.filter = Box::new(|dir, v| dir == Dir::AtoB && v.bth.psn == 101);
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 4096)]);
    w.post_a(send(1, 2048));
    w.deliver();
    w.b.qp.flush(&mut w.b.env);
    assert_eq!(summary(&w.b.env.recv_cq), [(1, WC_RECV, WC_WR_FLUSH_ERR)]);
}

/// Seed 001 (test idea T7): a key invalidated (`how`) while a multi-packet
/// RDMA WRITE through it is in flight. The responder checks the key at the
/// first packet and holds it, with what the check found, in its key memory;
/// later packets check only that slot. The invalidation's walk clears it
/// (and only it: a QP of another PD holding the same key value keeps its
/// slot); the next packet is refused with NAK remote access error, nothing
/// after the invalidation is written, and the requester completes with
/// REM_ACCESS_ERR (mutation: without the walk the rest is written).
fn a_write_fails_mid_way_when_its_key_is_invalidated(how: Invalidation) {
    let mut w = Wire::with_mtu(256);
    let len = 32 * 256;
    let data = pattern(len, 5);
    w.a.env.bytes_mut(SRC)[..len].copy_from_slice(&data);
    w.post_a(rdma(WR_RDMA_WRITE, 1, len as u32, DST_VA, DST));
    let packets = w.a.env.take_outbox();
    assert!(
        packets.len() > 10,
        "{} packets in the first burst",
        packets.len()
    );
    let feed = |w: &mut Wire, ps: &[Vec<u8>]| {
        for p in ps {
            let v = PacketView::parse(p).unwrap();
            w.b.qp.on_packet(&v, w.now, &mut w.b.env);
        }
    };
    feed(&mut w, &packets[..10]);
    assert!(
        w.b.env.keys.still_valid(MOCK_QPN, WRITE_SLOT),
        "the WRITE slot (3) holds DST"
    );
    assert_eq!(w.b.env.keys.held(MOCK_QPN), 1);
    // Another QP, another PD, same key value: the walk must skip it.
    let other =
        w.b.env
            .keys
            .acquire(99, w.b.env.pd + 1, DST, KeyUse::Read)
            .unwrap();
    let pd = w.b.env.pd;
    let regs = w.b.env.keys.regs().clone();
    let before = w.b.env.bytes(DST).as_ptr() as usize - w.b.env.mem.as_ptr() as usize;
    how.apply(&mut w.b.env);
    assert_eq!((regs.walks(), regs.cleared()), (1, 1), "one slot cleared");
    assert_eq!(
        regs.status(),
        ibtca_abi::regs::RKM_STATUS_BUSY,
        "WRITE not stopped yet"
    );
    assert!(w.b.env.keys.still_valid(99, other), "other PD untouched");
    feed(&mut w, &packets[10..]);
    w.deliver();
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_RDMA_WRITE, WC_REM_ACCESS_ERR)]
    );
    assert!(naks(&w).iter().any(|&(_, s)| s == 0x62), "NAK 0x62");
    // B's DST memory, whether or not the key names it again.
    let dst = &w.b.env.mem[before..before + len];
    assert_eq!(&dst[..10 * 256], &data[..10 * 256], "before: written");
    assert!(
        dst[10 * 256..len].iter().all(|&b| b == 0),
        "after the invalidation: nothing written"
    );
    assert!(
        !w.b.env.keys.still_valid(MOCK_QPN, WRITE_SLOT),
        "the slot was released"
    );
    assert_eq!(regs.status(), ibtca_abi::regs::RKM_STATUS_DONE, "stopped");
    assert_eq!((regs.walks(), regs.cleared()), (1, 1));
    assert_eq!(
        w.b.env.keys.acquire(MOCK_QPN, pd, DST, KeyUse::Write),
        Some(WRITE_SLOT),
        "and can be taken again"
    );
}

#[test]
fn a_write_fails_mid_way_when_its_region_goes() {
    a_write_fails_mid_way_when_its_key_is_invalidated(Invalidation::Gone);
}

#[test]
fn a_write_fails_mid_way_though_its_key_was_registered_again() {
    a_write_fails_mid_way_when_its_key_is_invalidated(Invalidation::RegisteredAgain);
}

/// SEND with Invalidate: the responder invalidates the key in the IETH once
/// the whole message has arrived and reports it in the receive CQE; a key
/// it cannot invalidate fails the SEND with NAK invalid request.
#[test]
fn send_with_invalidate() {
    const WIN: u32 = 0x300;
    let mut w = Wire::with_mtu(256);
    w.b.env.reg(WIN, 0x90_0000, 4096, ALL_ACCESS);
    w.b.env.post_recv(7, &[sge(DST, DST_VA, 4096)]);
    let mut s = wqe(WR_SEND_INV, 1, &[sge(SRC, SRC_VA, 600)]);
    s.imm_data = WIN.into();
    w.post_a(s);
    w.deliver();
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, WC_SUCCESS)]);
    let r = w.b.env.recv_cq[0];
    assert_eq!((r.status, r.byte_len.to_native()), (WC_SUCCESS, 600));
    assert_eq!(r.flags & CQE_F_INV, CQE_F_INV);
    assert_eq!(r.imm_data.to_native(), WIN, "the invalidated key");
    assert!(!w.b.env.mrs.contains_key(&WIN), "the key is gone");
    let ops: Vec<Opcode> = w.packets(Dir::AtoB).iter().map(|p| p.bth.opcode).collect();
    assert_eq!(
        ops,
        [
            Opcode::RcSendFirst,
            Opcode::RcSendMiddle,
            Opcode::RcSendLastInv
        ]
    );

    // Again with the same (now invalid) key: NAK 0x61 and errors on both sides.
    w.b.env.post_recv(8, &[sge(DST, DST_VA, 4096)]);
    let mut s = wqe(WR_SEND_INV, 2, &[sge(SRC, SRC_VA, 100)]);
    s.imm_data = WIN.into();
    w.post_a(s);
    w.deliver();
    assert_eq!(w.a.env.send_cq[1].status, WC_REM_INV_REQ_ERR);
    assert_eq!(w.b.env.recv_cq[1].status, WC_LOC_PROT_ERR);
    assert!(naks(&w).iter().any(|&(_, s)| s == 0x61), "NAK 0x61");
}
