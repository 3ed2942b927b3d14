//! Data movement on a clean wire: SEND, RDMA WRITE (+IMM), RDMA READ,
//! atomics, the quasi-WQE ring, and the packets each one puts on the wire.

use ibtca_protocol::opcode::{OpClass, Position};
use ibtca_protocol::Opcode;

use super::*;
use crate::segmenter::packet_count;

fn positions(packets: &[Packet], class: OpClass) -> [usize; 4] {
    let mut n = [0; 4];
    for p in packets.iter().filter(|p| p.info().class == class) {
        n[match p.info().position {
            Position::First => 0,
            Position::Middle => 1,
            Position::Last => 2,
            Position::Only => 3,
        }] += 1;
    }
    n
}

#[test]
fn send_lands_byte_exact_at_every_mtu() {
    for mtu in [256u32, 1024, 4096] {
        for len in [1u32, 4096, 1 << 20] {
            let mut w = Wire::with_mtu(mtu);
            let data = pattern(len as usize, len as u8);
            w.a.env.bytes_mut(SRC)[..len as usize].copy_from_slice(&data);
            w.b.env.post_recv(7, &[sge(DST, DST_VA, len)]);
            w.post_a(send(1, len));
            w.run();

            let ctx = format!("mtu {mtu} len {len}");
            assert_eq!(&w.b.env.bytes(DST)[..len as usize], &data[..], "{ctx}");
            assert_eq!(
                summary(&w.b.env.recv_cq),
                [(7, WC_RECV, WC_SUCCESS)],
                "{ctx}"
            );
            let rc = w.b.env.recv_cq[0];
            assert_eq!(
                (rc.byte_len.to_native(), rc.src_qp.to_native()),
                (len, QPN_A)
            );
            assert_eq!(rc.qpn.to_native(), QPN_B);
            assert_eq!(
                summary(&w.a.env.send_cq),
                [(1, WC_SEND, WC_SUCCESS)],
                "{ctx}"
            );

            let sent = w.packets(Dir::AtoB);
            let n = packet_count(u64::from(len), mtu) as usize;
            assert_eq!(sent.len(), n, "{ctx}");
            let expect = if n == 1 {
                [0, 0, 0, 1]
            } else {
                [1, n - 2, 1, 0]
            };
            assert_eq!(positions(&sent, OpClass::Send), expect, "{ctx}");
            for (i, p) in sent.iter().enumerate() {
                assert_eq!(p.bth.psn, 100 + i as u32, "{ctx}");
                assert_eq!(p.bth.dest_qp, QPN_B);
                assert_eq!((p.lrh.slid, p.lrh.dlid), (LID_A, LID_B));
                // AckReq on the last packet, and every quarter window (32)
                // so a message longer than the window keeps flowing.
                let ack_req = i == n - 1 || (i > 0 && i % 32 == 0);
                assert_eq!(p.bth.ack_req, ack_req, "{ctx} packet {i}");
                let want = if i == n - 1 {
                    len as usize - (n - 1) * mtu as usize
                } else {
                    mtu as usize
                };
                assert_eq!(p.payload.len(), want, "{ctx}");
            }
            // One ACK per AckReq; the last, for the last PSN, carries MSN 1,
            // the others 0 (message not complete yet; IBA's MSN start).
            let acks = w.packets(Dir::BtoA);
            assert_eq!(acks.len(), 1 + (n - 1) / 32, "{ctx}");
            let last = acks.last().unwrap();
            assert_eq!(last.bth.psn, 100 + n as u32 - 1);
            assert_eq!(
                last.ext.aeth.map(|a| (a.syndrome >> 5, a.msn)),
                Some((0, 1))
            );
            for a in &acks[..acks.len() - 1] {
                assert_eq!(a.ext.aeth.map(|a| a.msn), Some(0));
            }
            assert_eq!(w.a.qp.counters().retransmits, 0);
            assert!(!w.a.qp.is_error() && !w.b.qp.is_error());
            assert_eq!(
                w.next_deadline(),
                None,
                "ACK timer disarmed once all is acked"
            );
        }
    }
}

#[test]
fn send_gathers_and_scatters_across_sges() {
    let mut w = Wire::with_mtu(256);
    let data = pattern(1000, 3);
    w.a.env.bytes_mut(SRC)[..300].copy_from_slice(&data[..300]);
    w.a.env.bytes_mut(SRC)[5000..5700].copy_from_slice(&data[300..]);
    w.b.env.post_recv(
        9,
        &[sge(DST, DST_VA + 10, 90), sge(DST, DST_VA + 4000, 2000)],
    );
    let mut s = wqe(
        WR_SEND_IMM,
        1,
        &[sge(SRC, SRC_VA, 300), sge(SRC, SRC_VA + 5000, 700)],
    );
    s.imm_data = 0xdead_beef.into();
    w.post_a(s);
    w.run();
    let dst = w.b.env.bytes(DST);
    assert_eq!(&dst[10..100], &data[..90]);
    assert_eq!(&dst[4000..4910], &data[90..]);
    assert_eq!(dst[100], 0);
    let c = w.b.env.recv_cq[0];
    assert_eq!(
        (c.byte_len.to_native(), c.imm_data.to_native()),
        (1000, 0xdead_beef)
    );
    assert_eq!(c.flags & CQE_F_IMM, CQE_F_IMM);
    let last = w.packets(Dir::AtoB).pop().unwrap();
    assert_eq!(last.bth.opcode, Opcode::RcSendLastImm);
    assert_eq!(last.ext.immdt.map(|i| i.data), Some(0xdead_beef));
}

#[test]
fn rdma_write_carries_reth_only_in_the_first_packet() {
    let mut w = Wire::with_mtu(1024);
    let data = pattern(4096, 1);
    w.a.env.bytes_mut(SRC)[..4096].copy_from_slice(&data);
    w.post_a(rdma(WR_RDMA_WRITE, 5, 4096, DST_VA + 64, DST));
    w.run();
    assert_eq!(&w.b.env.bytes(DST)[64..64 + 4096], &data[..]);
    assert!(w.b.env.bytes(DST)[..64].iter().all(|b| *b == 0));
    assert_eq!(summary(&w.a.env.send_cq), [(5, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert!(
        w.b.env.recv_cq.is_empty(),
        "a plain WRITE consumes no receive"
    );

    let sent = w.packets(Dir::AtoB);
    let ops: Vec<_> = sent.iter().map(|p| p.bth.opcode).collect();
    use Opcode::*;
    assert_eq!(
        ops,
        [
            RcRdmaWriteFirst,
            RcRdmaWriteMiddle,
            RcRdmaWriteMiddle,
            RcRdmaWriteLast
        ]
    );
    let reth = sent[0].ext.reth.unwrap();
    assert_eq!((reth.va, reth.rkey, reth.dma_len), (DST_VA + 64, DST, 4096));
    assert!(sent[1..].iter().all(|p| p.ext.reth.is_none()));
}

#[test]
fn rdma_write_with_immediate_consumes_a_receive() {
    let mut w = Wire::with_mtu(1024);
    let data = pattern(3000, 2);
    w.a.env.bytes_mut(SRC)[..3000].copy_from_slice(&data);
    w.b.env.post_recv(44, &[]);
    let mut wr = rdma(WR_RDMA_WRITE_IMM, 6, 3000, DST_VA, DST);
    wr.imm_data = 0x1234_5678.into();
    w.post_a(wr);
    w.run();
    assert_eq!(&w.b.env.bytes(DST)[..3000], &data[..]);
    assert_eq!(
        summary(&w.b.env.recv_cq),
        [(44, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS)]
    );
    let c = w.b.env.recv_cq[0];
    assert_eq!(
        (c.byte_len.to_native(), c.imm_data.to_native()),
        (3000, 0x1234_5678)
    );
    assert_eq!(summary(&w.a.env.send_cq), [(6, WC_RDMA_WRITE, WC_SUCCESS)]);
    let ops: Vec<_> = w.packets(Dir::AtoB).iter().map(|p| p.bth.opcode).collect();
    use Opcode::*;
    assert_eq!(
        ops,
        [RcRdmaWriteFirst, RcRdmaWriteMiddle, RcRdmaWriteLastImm]
    );

    // Single packet: ONLY with RETH and ImmDt.
    w.b.env.post_recv(45, &[]);
    let mut wr = rdma(WR_RDMA_WRITE_IMM, 7, 16, DST_VA, DST);
    wr.imm_data = 1.into();
    w.post_a(wr);
    w.run();
    let last = w.packets(Dir::AtoB).pop().unwrap();
    assert_eq!(last.bth.opcode, RcRdmaWriteOnlyImm);
    assert!(last.ext.reth.is_some() && last.ext.immdt.is_some());
    assert_eq!(w.b.env.recv_cq.len(), 2);
}

#[test]
fn rdma_read_4096_at_mtu_256_is_16_responses_through_the_quasi_ring() {
    let mut w = Wire::with_mtu(256);
    let data = pattern(4096, 9);
    w.b.env.bytes_mut(SRC)[128..128 + 4096].copy_from_slice(&data);
    w.post_a(rdma(WR_RDMA_READ, 3, 4096, SRC_VA + 128, SRC));
    w.run();

    assert_eq!(&w.a.env.bytes(DST)[..4096], &data[..]);
    assert_eq!(summary(&w.a.env.send_cq), [(3, WC_RDMA_READ, WC_SUCCESS)]);
    assert_eq!(w.a.env.send_cq[0].byte_len.to_native(), 4096);

    // One request, 16 responses on consecutive PSNs, AETH on FIRST/LAST.
    let req = w.packets(Dir::AtoB);
    assert_eq!(req.len(), 1);
    assert_eq!(req[0].bth.opcode, Opcode::RcRdmaReadRequest);
    assert_eq!(
        req[0].ext.reth.map(|r| (r.va, r.dma_len)),
        Some((SRC_VA + 128, 4096))
    );
    let resp = w.packets(Dir::BtoA);
    assert_eq!(resp.len(), 16);
    assert_eq!(positions(&resp, OpClass::Read), [1, 14, 1, 0]);
    for (i, p) in resp.iter().enumerate() {
        assert_eq!(p.bth.psn, 100 + i as u32);
        assert_eq!(p.payload.len(), 256);
        assert_eq!(p.ext.aeth.is_some(), i == 0 || i == 15);
    }

    // Seed 004: the request became exactly one quasi-WQE, then was served.
    let q = w.b.env.quasi_log.clone();
    assert_eq!(q.len(), 1);
    let q = q[0];
    assert_eq!(q.va.to_native(), SRC_VA + 128);
    assert_eq!(q.length.to_native(), 4096);
    assert_eq!(q.rkey.to_native(), SRC);
    assert_eq!(q.psn.to_native(), 100);
    assert_eq!(q.dest_qpn.to_native(), QPN_A);
    assert!(w.b.env.quasi.is_empty(), "the send engine drained the ring");

    // The READ took 16 PSNs: the next request starts at 116, and the
    // responder expects it.
    assert_eq!(w.a.qp.sq_psn(), 116);
    assert_eq!(w.b.qp.expected_psn(), 116);
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 8)]);
    w.post_a(send(4, 8));
    w.run();
    assert_eq!(w.packets(Dir::AtoB).last().unwrap().bth.psn, 116);
    assert_eq!(w.a.env.send_cq.len(), 2);
}

#[test]
fn zero_length_messages() {
    let mut w = Wire::with_mtu(256);
    w.b.env.post_recv(1, &[]);
    w.post_a(send(1, 0));
    w.post_a(rdma(WR_RDMA_READ, 2, 0, 0, 0xdead));
    w.post_a(rdma(WR_RDMA_WRITE, 3, 0, 0, 0xdead));
    w.run();
    assert_eq!(summary(&w.b.env.recv_cq), [(1, WC_RECV, WC_SUCCESS)]);
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_SEND, 0), (2, WC_RDMA_READ, 0), (3, WC_RDMA_WRITE, 0)]
    );
}

fn atomic(
    op: u8,
    wr_id: u64,
    local_off: u64,
    remote_va: u64,
    compare_add: u64,
    swap: u64,
) -> SendWqe {
    let mut w = wqe(op, wr_id, &[sge(DST, DST_VA + local_off, 8)]);
    w.remote_addr = remote_va.into();
    w.rkey = DST.into();
    w.compare_add = compare_add.into();
    w.swap = swap.into();
    w
}

fn word(env: &MockEnv, key: u32, off: usize) -> u64 {
    u64::from_le_bytes(env.bytes(key)[off..off + 8].try_into().unwrap())
}

#[test]
fn atomics_return_the_original_value() {
    let mut w = Wire::with_mtu(1024);
    w.b.env.bytes_mut(DST)[64..72].copy_from_slice(&5u64.to_le_bytes());
    // Compare matches: swapped.
    w.post_a(atomic(WR_ATOMIC_CMP_SWP, 1, 0, DST_VA + 64, 5, 9));
    w.run();
    assert_eq!(word(&w.a.env, DST, 0), 5);
    assert_eq!(word(&w.b.env, DST, 64), 9);
    // Compare fails: memory unchanged, the current value comes back.
    w.post_a(atomic(WR_ATOMIC_CMP_SWP, 2, 8, DST_VA + 64, 5, 11));
    w.run();
    assert_eq!(word(&w.a.env, DST, 8), 9);
    assert_eq!(word(&w.b.env, DST, 64), 9);
    // FetchAdd.
    w.post_a(atomic(WR_ATOMIC_FETCH_ADD, 3, 16, DST_VA + 64, 100, 0));
    w.run();
    assert_eq!(word(&w.a.env, DST, 16), 9);
    assert_eq!(word(&w.b.env, DST, 64), 109);
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_COMP_SWAP, 0),
            (2, WC_COMP_SWAP, 0),
            (3, WC_FETCH_ADD, 0)
        ]
    );
    assert!(w.a.env.send_cq.iter().all(|c| c.byte_len.to_native() == 8));
    let acks = w.packets(Dir::BtoA);
    assert!(acks
        .iter()
        .all(|p| p.bth.opcode == Opcode::RcAtomicAcknowledge));
    assert_eq!(
        acks.iter()
            .map(|p| p.ext.atomic_ack_eth.unwrap().orig)
            .collect::<Vec<_>>(),
        [5, 9, 9]
    );
}

#[test]
fn both_directions_at_once() {
    // A writes 64 KiB into B while B reads 64 KiB of other bytes from A
    // (seed test T11): each QP is requester and responder at once.
    let mut w = Wire::with_mtu(256);
    let written = pattern(65536, 4);
    let read = pattern(65536, 5);
    w.a.env.bytes_mut(SRC)[..65536].copy_from_slice(&written);
    w.a.env.bytes_mut(SRC)[65536..131072].copy_from_slice(&read);
    w.post_a(rdma(WR_RDMA_WRITE, 1, 65536, DST_VA, DST));
    let mut r = wqe(WR_RDMA_READ, 2, &[sge(DST, DST_VA + (1 << 20), 65536)]);
    r.remote_addr = (SRC_VA + 65536).into();
    r.rkey = SRC.into();
    w.post_b(r);
    w.run();
    assert_eq!(&w.b.env.bytes(DST)[..65536], &written[..]);
    assert_eq!(&w.b.env.bytes(DST)[1 << 20..(1 << 20) + 65536], &read[..]);
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_RDMA_WRITE, 0)]);
    assert_eq!(summary(&w.b.env.send_cq), [(2, WC_RDMA_READ, 0)]);
    assert_eq!(w.a.env.quasi_log.len(), 1);
    assert_eq!(w.a.env.quasi_log[0].psn.to_native(), 500);
}

#[test]
fn the_send_window_limits_packets_in_flight() {
    let (mut a, b) = configs(256);
    a.send_window = 4;
    let mut w = Wire::new(a, b);
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 8192)]);
    w.post_a(send(1, 8192));
    assert_eq!(w.a.env.outbox.len(), 4, "only the window goes out");
    w.run();
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, 0)]);
    assert_eq!(w.packets(Dir::AtoB).len(), 32);
}

#[test]
fn max_rd_atomic_holds_back_reads() {
    let (mut a, b) = configs(256);
    a.max_rd_atomic = 1;
    let mut w = Wire::new(a, b);
    for i in 0..3 {
        w.post_a(rdma(WR_RDMA_READ, i, 512, SRC_VA, SRC));
    }
    assert_eq!(w.a.env.outbox.len(), 1, "one READ outstanding at a time");
    w.run();
    assert_eq!(w.a.env.send_cq.len(), 3);
    assert_eq!(w.packets(Dir::AtoB).len(), 3);
}

#[test]
fn unsignaled_wqes_complete_silently() {
    let mut w = Wire::with_mtu(256);
    for i in 0..3u64 {
        w.b.env.post_recv(i, &[sge(DST, DST_VA, 64)]);
        let mut s = send(i, 64);
        if i < 2 {
            s.flags = 0;
        }
        w.post_a(s);
    }
    w.run();
    assert_eq!(summary(&w.a.env.send_cq), [(2, WC_SEND, 0)]);
    assert_eq!(w.b.env.recv_cq.len(), 3);
    assert_eq!(w.a.qp.send_queue_len(), 0);
}
