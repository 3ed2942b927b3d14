//! Seed 002 from the requester's side: completion by MSN, checked against
//! the PSN, and the ACK policies. A test double stands in for the responder
//! where its ACKs must be wrong or missing in a chosen way.

use std::time::Duration;

use ibtca_protocol::headers::{Aeth, CREDITS_INVALID};
use ibtca_protocol::Opcode;

use super::*;
use crate::config::AckPolicy;
use crate::{psn, QpFailure};

/// An ACK from B to A for `psn` carrying `msn`.
fn ack(psn: u32, msn: u32) -> Vec<u8> {
    let mut p = Packet::new(Opcode::RcAcknowledge);
    p.lrh.slid = LID_B;
    p.lrh.dlid = LID_A;
    p.bth.dest_qp = QPN_A;
    p.bth.psn = psn;
    p.ext.aeth = Some(Aeth::ack(CREDITS_INVALID, msn));
    p.build().expect("an ACK builds")
}

/// Hands `bytes` to A.
fn feed_a(w: &mut Wire, bytes: &[u8]) {
    let v = PacketView::parse(bytes).expect("built packets parse");
    w.a.qp.on_packet(&v, w.now, &mut w.a.env);
}

/// A alone (B never sees a packet), PSNs from 100, with `msgs` SENDs of
/// `pkts` 256-byte packets each posted and sent; A's outbox is emptied.
fn requester(initial_msn: u32, msgs: &[u32]) -> Wire {
    let (mut a, b) = configs(256);
    a.initial_msn = initial_msn;
    let mut w = Wire::new(a, b);
    for (i, pkts) in msgs.iter().enumerate() {
        w.post_a(send(i as u64 + 1, pkts * 256));
    }
    w.a.env.take_outbox();
    w
}

#[test]
fn acks_with_the_right_psns_but_a_stale_msn_complete_nothing() {
    let mut w = requester(0, &[1, 2]);
    // PSNs 100 and 101–102; the double acknowledges every packet but never
    // moves the MSN past its start.
    for p in 100..=102 {
        feed_a(&mut w, &ack(p, 0));
    }
    assert!(w.a.env.send_cq.is_empty(), "no MSN advance, no completion");
    assert!(!w.a.qp.is_error());
    // Every PSN was acknowledged, yet the ACK timer still runs for the
    // missing MSNs: each timeout resends the last packet (a probe); the
    // double answers it stale again until the retries run out.
    let retry_cnt = w.a.qp.config().retry_cnt;
    for _ in 0..=retry_cnt {
        let t = w.a.qp.next_deadline().expect("timer armed for the MSN");
        w.advance_to(t);
        for p in w.a.env.take_outbox() {
            let v = PacketView::parse(&p).unwrap();
            assert_eq!(v.bth.psn, 102, "the probe is the last packet");
            feed_a(&mut w, &ack(102, 0));
        }
        if w.a.qp.is_error() {
            break;
        }
    }
    assert_eq!(w.a.qp.counters().retransmits, u64::from(retry_cnt));
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_SEND, WC_RETRY_EXC_ERR),
            (2, WC_SEND, WC_WR_FLUSH_ERR)
        ]
    );
}

#[test]
fn the_same_acks_with_advancing_msns_complete_one_message_each() {
    let mut w = requester(0, &[1, 2]);
    feed_a(&mut w, &ack(100, 1));
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, WC_SUCCESS)]);
    feed_a(&mut w, &ack(101, 1));
    assert_eq!(w.a.env.send_cq.len(), 1, "mid-message ACK: same MSN");
    feed_a(&mut w, &ack(102, 2));
    assert_eq!(w.a.env.send_cq.len(), 2);
    assert_eq!(w.a.qp.next_deadline(), None, "nothing left to wait for");
}

#[test]
fn a_skipped_ack_completes_both_messages_on_the_next() {
    let mut w = requester(0, &[1, 2]);
    // The ACK of message 1 (PSN 100, MSN 1) is lost.
    feed_a(&mut w, &ack(102, 2));
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_SEND, WC_SUCCESS), (2, WC_SEND, WC_SUCCESS)]
    );
    assert_eq!(w.a.qp.counters().retransmits, 0);
    // The late ACK is stale now: nothing completes twice.
    feed_a(&mut w, &ack(100, 1));
    assert_eq!(w.a.env.send_cq.len(), 2);
}

#[test]
fn an_msn_claiming_more_messages_than_its_psn_covers_fails_the_qp() {
    let mut w = requester(0, &[1, 2, 1]);
    // PSN 100 ends message 1 only; MSN 2 claims message 2 (ends at 102).
    feed_a(&mut w, &ack(100, 2));
    assert!(w.a.qp.is_error());
    assert_eq!(w.a.qp.failure(), Some(QpFailure::Wqe(WC_BAD_RESP_ERR)));
    // Nothing of what the MSN claimed is trusted: the oldest unconfirmed
    // message fails, the rest flush.
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_SEND, WC_BAD_RESP_ERR),
            (2, WC_SEND, WC_WR_FLUSH_ERR),
            (3, WC_SEND, WC_WR_FLUSH_ERR)
        ]
    );
}

#[test]
fn an_msn_claiming_messages_never_sent_fails_the_qp() {
    let mut w = requester(0, &[1]);
    feed_a(&mut w, &ack(100, 5));
    assert_eq!(w.a.qp.failure(), Some(QpFailure::Wqe(WC_BAD_RESP_ERR)));
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, WC_BAD_RESP_ERR)]);
}

/// Seed 002's example from the requester's side: sq_psn 1, MSN start
/// 0xFFFFFF, messages of 3, 6 and 2 packets.
fn seed_requester() -> Wire {
    let (mut a, b) = configs(256);
    a.sq_psn = 1;
    a.initial_msn = 0xff_ffff;
    let mut w = Wire::new(a, b);
    for (i, pkts) in [3u32, 6, 2].into_iter().enumerate() {
        w.post_a(send(i as u64, pkts * 256));
    }
    w.a.env.take_outbox();
    w
}

#[test]
fn the_corrected_table_1_completes_at_psn_3_9_and_11() {
    // The responder side of Table 1 is
    // `reliability::seed002_ack_per_packet_matches_the_corrected_table`.
    let mut w = seed_requester();
    let f = 0xff_ffff;
    let table = [
        (1, f),
        (2, f),
        (3, 0),
        (4, 0),
        (5, 0),
        (6, 0),
        (7, 0),
        (8, 0),
        (9, 1),
        (10, 1),
        (11, 2),
    ];
    let mut done = Vec::new();
    for (p, m) in table {
        feed_a(&mut w, &ack(p, m));
        done.push(w.a.env.send_cq.len());
    }
    assert_eq!(done, [0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 3]);
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(0, WC_SEND, 0), (1, WC_SEND, 0), (2, WC_SEND, 0)]
    );
}

#[test]
fn the_seeds_uncorrected_table_1_is_a_protocol_error() {
    // As printed, Table 1 gives PSN 4 MSN 1: message 2 (PSNs 4–9) done
    // after its first packet. The PSN does not cover that claim.
    let mut w = seed_requester();
    for (p, m) in [(1, 0xff_ffff), (2, 0xff_ffff), (3, 0)] {
        feed_a(&mut w, &ack(p, m));
    }
    assert_eq!(w.a.env.send_cq.len(), 1);
    feed_a(&mut w, &ack(4, 1));
    assert_eq!(w.a.qp.failure(), Some(QpFailure::Wqe(WC_BAD_RESP_ERR)));
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (0, WC_SEND, 0),
            (1, WC_SEND, WC_BAD_RESP_ERR),
            (2, WC_SEND, WC_WR_FLUSH_ERR)
        ]
    );
}

#[test]
fn msn_wrap_at_2_24_completes_in_order() {
    let mut w = requester(0xff_fffe, &[1, 1, 1, 1]);
    feed_a(&mut w, &ack(100, 0xff_ffff));
    assert_eq!(w.a.env.send_cq.len(), 1);
    // Across the wrap, with a lost ACK: MSN 1 is two ahead of 0xFFFFFF.
    feed_a(&mut w, &ack(102, 1));
    assert_eq!(w.a.env.send_cq.len(), 3);
    // A stale MSN from before the wrap completes nothing.
    feed_a(&mut w, &ack(102, 0xff_ffff));
    assert_eq!(w.a.env.send_cq.len(), 3);
    feed_a(&mut w, &ack(103, 2));
    let ids: Vec<_> = summary(&w.a.env.send_cq).iter().map(|c| c.0).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    assert!(!w.a.qp.is_error());
}

#[test]
fn msn_wrap_between_two_qps() {
    let (mut a, mut b) = configs(256);
    (a.initial_msn, b.initial_msn) = (0xff_fff0, 0xff_fff0);
    let mut w = Wire::new(a, b);
    for i in 0..40u64 {
        w.b.env.post_recv(i, &[sge(DST, DST_VA + i * 512, 512)]);
        w.post_a(send(i, 300));
    }
    w.run();
    assert_eq!(w.a.env.send_cq.len(), 40);
    assert!(w.a.env.send_cq.iter().all(|c| c.status == WC_SUCCESS));
    assert_eq!(w.b.qp.msn(), psn::add(0xff_fff0, 40));
}

#[test]
fn ends_that_disagree_on_the_start_msn_complete_nothing() {
    // B counts from 0xFFFFFF, A expects IBA's 0: B's first ACK carries MSN
    // 0, which A reads as "no message yet".
    let (a, mut b) = configs(256);
    b.initial_msn = 0xff_ffff;
    let mut w = Wire::new(a, b);
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 256)]);
    w.post_a(send(1, 256));
    w.run();
    assert_eq!(w.b.env.recv_cq.len(), 1, "delivered");
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_SEND, WC_RETRY_EXC_ERR)],
        "never completed by MSN"
    );
}

/// `msgs` SENDs of `len` bytes each, distinct patterns, posted at once on
/// a wire with `policy` and `window` on both ends; returns the wire after
/// the run, checked byte-exact and once.
fn run_policy(policy: AckPolicy, window: u32, faults: Faults, msgs: usize, len: u32) -> Wire {
    let (mut a, mut b) = configs(256);
    for c in [&mut a, &mut b] {
        c.ack_policy = policy;
        c.send_window = window;
        c.ack_timeout = Some(Duration::from_millis(1));
    }
    let mut w = Wire::new(a, b);
    w.faults = faults;
    w.seed(0x5eed_0002);
    let step = u64::from(len).next_multiple_of(4096);
    let mut wqes = Vec::new();
    for i in 0..msgs as u64 {
        let data = pattern(len as usize, i as u8);
        let at = (i * step) as usize;
        w.a.env.bytes_mut(SRC)[at..at + len as usize].copy_from_slice(&data);
        w.b.env.post_recv(i, &[sge(DST, DST_VA + i * step, len)]);
        wqes.push(wqe(WR_SEND, i, &[sge(SRC, SRC_VA + i * step, len)]).into());
    }
    w.a.qp.post_sends(wqes, w.now, &mut w.a.env);
    w.run();
    let want: Vec<_> = (0..msgs as u64).map(|i| (i, WC_SEND, WC_SUCCESS)).collect();
    assert_eq!(summary(&w.a.env.send_cq), want, "each send completes once");
    let want: Vec<_> = (0..msgs as u64).map(|i| (i, WC_RECV, WC_SUCCESS)).collect();
    assert_eq!(summary(&w.b.env.recv_cq), want, "each receive once");
    for i in 0..msgs as u64 {
        let at = (i * step) as usize;
        assert_eq!(
            &w.b.env.bytes(DST)[at..at + len as usize],
            &pattern(len as usize, i as u8)[..],
            "message {i}"
        );
    }
    w
}

fn ack_psns(w: &Wire) -> Vec<u32> {
    w.packets(Dir::BtoA)
        .iter()
        .filter(|p| p.bth.opcode == Opcode::RcAcknowledge)
        .map(|p| p.bth.psn)
        .collect()
}

#[test]
fn coalesced_acks_every_n_packets_across_messages() {
    // 10 one-packet messages, an ACK asked for every 4 packets and on the
    // last: ACKs for PSNs 104, 108 and 109 only, and the MSN in each
    // completes every message it covers.
    let w = run_policy(AckPolicy::Coalesced(4), 128, Faults::default(), 10, 200);
    assert_eq!(ack_psns(&w), [104, 108, 109]);
    let msns: Vec<_> = w
        .packets(Dir::BtoA)
        .iter()
        .map(|p| p.ext.aeth.unwrap().msn)
        .collect();
    assert_eq!(msns, [5, 9, 10]);
    let req: Vec<_> = w
        .packets(Dir::AtoB)
        .iter()
        .filter(|p| p.bth.ack_req)
        .map(|p| p.bth.psn)
        .collect();
    assert_eq!(req, [104, 108, 109]);
}

#[test]
fn per_message_acks_are_the_default() {
    assert_eq!(RcConfig::new(1, 2).ack_policy, AckPolicy::PerMessage);
    assert_eq!(RcConfig::new(1, 2).initial_msn, 0);
    let w = run_policy(AckPolicy::PerMessage, 128, Faults::default(), 4, 600);
    // 600 bytes: 3 packets per message.
    assert_eq!(ack_psns(&w), [102, 105, 108, 111]);
}

#[test]
fn stop_and_wait_has_one_packet_in_flight() {
    let w = run_policy(AckPolicy::PerPacket, 1, Faults::default(), 3, 600);
    // Strict alternation on the wire: request, its ACK, next request.
    let dirs: Vec<_> = w.log.iter().map(|(d, _)| *d).collect();
    assert_eq!(dirs.len(), 18);
    assert!(dirs.chunks(2).all(|c| c == [Dir::AtoB, Dir::BtoA]));
    assert_eq!(ack_psns(&w), (100..109).collect::<Vec<_>>());
}

#[test]
fn stop_and_wait_resends_after_the_response_timeout() {
    let (mut a, mut b) = configs(256);
    for c in [&mut a, &mut b] {
        (c.ack_policy, c.send_window) = (AckPolicy::PerPacket, 1);
    }
    let timeout = a.ack_timeout.unwrap();
    let mut w = Wire::new(a, b);
    // The peer is paused for one packet: its first ACK is lost.
    let mut paused = true;
    w.filter = Box::new(move |dir, _| {
        let drop = paused && dir == Dir::BtoA;
        paused &= !drop;
        drop
    });
    w.b.env.post_recv(1, &[sge(DST, DST_VA, 512)]);
    w.post_a(send(1, 512));
    w.run();
    assert_eq!(w.elapsed(), timeout, "one response timeout");
    assert_eq!(w.a.qp.counters().timeouts, 1);
    assert_eq!(w.a.qp.counters().retransmits, 1);
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, 0)]);
    assert_eq!(summary(&w.b.env.recv_cq), [(1, WC_RECV, 0)]);
}

const LOSSY: Faults = Faults {
    drop: 300,
    dup: 200,
    reorder: 200,
    corrupt: 200,
};

#[test]
fn coalesced_acks_under_faults_deliver_every_message_once() {
    let w = run_policy(AckPolicy::Coalesced(8), 64, LOSSY, 200, 700);
    assert!(w.a.qp.counters().retransmits > 0, "faults hit");
}

#[test]
fn stop_and_wait_under_faults_delivers_every_message_once() {
    let w = run_policy(AckPolicy::PerPacket, 1, LOSSY, 60, 700);
    assert!(w.a.qp.counters().retransmits > 0, "faults hit");
}

#[test]
fn a_duplicate_read_is_answered_with_its_own_msn() {
    // READ (PSNs 100–103) then SEND (104). The READ's last response and
    // the SEND's ACK are lost; the resent READ's response must carry the
    // READ's MSN (1), not the current one (2), which its PSN cannot cover.
    let mut w = Wire::with_mtu(256);
    let data = pattern(1024, 9);
    w.b.env.bytes_mut(SRC)[..1024].copy_from_slice(&data);
    w.b.env.post_recv(1, &[sge(DST, DST_VA + 8192, 64)]);
    let mut first = true;
    w.filter = Box::new(move |dir, v| {
        let lost = dir == Dir::BtoA && (v.bth.psn == 103 || v.bth.psn == 104) && first;
        first &= !(lost && v.bth.psn == 104);
        lost
    });
    w.post_a(rdma(WR_RDMA_READ, 1, 1024, SRC_VA, SRC));
    w.post_a(send(2, 64));
    w.run();
    assert!(!w.a.qp.is_error(), "{:?}", w.a.qp.failure());
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_RDMA_READ, 0), (2, WC_SEND, 0)]
    );
    assert_eq!(&w.a.env.bytes(DST)[..1024], &data[..]);
    let resent: Vec<_> = w
        .packets(Dir::BtoA)
        .iter()
        .filter(|p| p.bth.opcode == Opcode::RcRdmaReadResponseOnly)
        .map(|p| (p.bth.psn, p.ext.aeth.unwrap().msn))
        .collect();
    assert_eq!(resent, [(103, 1)]);
}

#[test]
fn a_read_response_lost_twice_leaves_no_psn_of_a_completed_send_to_resend() {
    // READ 100, SEND 101, READ 102, SEND 103 (one packet each). The first
    // READ's response is lost twice; the second READ's responses arrive
    // while A still waits for the first's, so A ignores them. The ACKs of
    // 103 (MSN 4) confirm all four messages: both SENDs complete by MSN
    // while the first READ stops the PSN window at 100. After the timeout
    // the first READ's response lands; the window must move on to the
    // second READ (the ACK of 103 said 101 was executed), not to the
    // completed SEND's PSN 101, where go-back-N has nothing to resend.
    let mut w = Wire::with_mtu(256);
    let data = pattern(512, 5);
    w.b.env.bytes_mut(SRC)[..512].copy_from_slice(&data);
    w.b.env.post_recv(10, &[sge(DST, DST_VA + 8192, 64)]);
    w.b.env.post_recv(11, &[sge(DST, DST_VA + 12288, 64)]);
    let mut lost = 0;
    w.filter = Box::new(move |dir, v| {
        let drop = dir == Dir::BtoA && v.bth.psn == 100 && lost < 2;
        lost += u32::from(drop);
        drop
    });
    let mut read2 = rdma(WR_RDMA_READ, 3, 256, SRC_VA + 256, SRC);
    read2.sge[0].addr = (DST_VA + 256).into();
    w.post_a(rdma(WR_RDMA_READ, 1, 256, SRC_VA, SRC));
    w.post_a(send(2, 64));
    w.post_a(read2);
    w.post_a(send(4, 64));
    w.run();
    assert!(!w.a.qp.is_error(), "{:?}", w.a.qp.failure());
    assert_eq!(
        summary(&w.a.env.send_cq),
        [
            (1, WC_RDMA_READ, 0),
            (2, WC_SEND, 0),
            (3, WC_RDMA_READ, 0),
            (4, WC_SEND, 0)
        ]
    );
    assert_eq!(&w.a.env.bytes(DST)[..512], &data[..]);
    assert_eq!(
        summary(&w.b.env.recv_cq),
        [(10, WC_RECV, 0), (11, WC_RECV, 0)]
    );
    // One timeout brought the first READ's response; the second READ was
    // asked again at once, not after timeouts of its own.
    assert_eq!(w.a.qp.counters().timeouts, 1);
    assert_eq!(w.a.qp.next_deadline(), None);
}
