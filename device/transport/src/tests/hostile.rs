//! A hostile peer: random bytes, well-formed packets with random contents
//! (valid ICRC/VCRC, so they reach the transport), and specific malformed
//! requests. Nothing may panic; malformed requests get the right NAK.

use ibtca_protocol::headers::{Aeth, AtomicAckEth, AtomicEth, ImmDt, Reth};
use ibtca_protocol::opcode::{Direction, OPCODES};
use ibtca_protocol::Opcode;
use proptest::prelude::*;

use super::*;

/// A wire where B has posted receives and has its own SEND, READ and
/// atomic in flight towards A (sent, never delivered), so that both its
/// responder and its completer have state to confuse.
fn busy() -> Wire {
    let (a, b) = configs(256);
    let mut w = Wire::with_memory(a, b, 64 << 10);
    for i in 0..4 {
        w.b.env.post_recv(i, &[sge(DST, DST_VA + i * 4096, 4096)]);
    }
    w.post_b(send(1, 600));
    w.post_b(rdma(WR_RDMA_READ, 2, 1000, SRC_VA, SRC));
    let mut cas = wqe(WR_ATOMIC_CMP_SWP, 3, &[sge(DST, DST_VA, 8)]);
    cas.remote_addr = DST_VA.into();
    cas.rkey = DST.into();
    w.post_b(cas);
    w.b.env.take_outbox();
    w
}

/// A packet from A to B with the right addressing, so it gets past the
/// QP/LID/P_Key checks.
fn to_b(opcode: Opcode, psn: u32) -> Packet {
    let mut p = Packet::new(opcode);
    p.lrh.slid = LID_A;
    p.lrh.dlid = LID_B;
    p.bth.dest_qp = QPN_B;
    p.bth.psn = psn;
    p
}

fn feed(w: &mut Wire, p: &Packet) {
    if let Ok(bytes) = p.build() {
        let v = PacketView::parse(&bytes).expect("built packets parse");
        w.b.qp.on_packet(&v, w.now, &mut w.b.env);
    }
}

prop_compose! {
    fn arb_packet()(
        op in 0..OPCODES.len(),
        psn_off in -3i32..24,
        ack_req in any::<bool>(),
        key in prop::sample::select(vec![SRC, DST, 0xbad]),
        (va_base, va_off) in (prop::sample::select(vec![SRC_VA, DST_VA, 0]), 0u64..(80 << 10)),
        dma_len in prop::sample::select(vec![0u32, 1, 255, 256, 1000, 4096, u32::MAX]),
        (swap, compare, orig) in (any::<u64>(), any::<u64>(), any::<u64>()),
        syndrome in any::<u8>(),
        msn in any::<u32>(),
        payload in 0usize..700,
        imm in any::<u32>(),
    ) -> Packet {
        let opcode = OPCODES[op].opcode;
        // Requests near B's expected PSN (100), responses near the PSNs of
        // B's own requests (500..).
        let base = if opcode.info().direction == Direction::Request { 100 } else { 500 };
        let mut p = to_b(opcode, (base + psn_off) as u32 & 0xff_ffff);
        p.bth.ack_req = ack_req;
        let va = va_base.wrapping_add(va_off);
        for h in opcode.info().headers {
            use ibtca_protocol::headers as hd;
            use ibtca_protocol::ExtHeader as X;
            match h {
                X::Reth => p.ext.reth = Some(Reth { va, rkey: key, dma_len }),
                X::AtomicEth => {
                    p.ext.atomic_eth = Some(AtomicEth { va, rkey: key, swap_add: swap, compare })
                }
                X::Aeth => p.ext.aeth = Some(Aeth { syndrome, msn }),
                X::AtomicAckEth => p.ext.atomic_ack_eth = Some(AtomicAckEth { orig }),
                X::ImmDt => p.ext.immdt = Some(ImmDt { data: imm }),
                X::Ieth => p.ext.ieth = Some(hd::Ieth { rkey: key }),
                X::Deth => p.ext.deth = Some(hd::Deth::default()),
            }
        }
        if opcode.info().payload {
            p.payload = pattern(payload, payload as u8);
        }
        p
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let mut w = busy();
        if let Ok(v) = PacketView::parse(&bytes) {
            w.b.qp.on_packet(&v, w.now, &mut w.b.env);
        }
        // Also force the bytes through as a payload of a valid header.
        let mut p = to_b(Opcode::RcSendOnly, 100);
        p.payload = bytes;
        feed(&mut w, &p);
    }

    #[test]
    fn random_well_formed_packets_never_panic(packets in prop::collection::vec(arb_packet(), 1..40)) {
        let mut w = busy();
        for p in &packets {
            feed(&mut w, p);
            if let Some(t) = w.b.qp.next_deadline() {
                w.now = w.now.max(t);
                w.b.qp.on_timer(w.now, &mut w.b.env);
            }
        }
        // Every WQE completes at most once, whatever happened.
        let mut ids: Vec<_> = w.b.env.send_cq.iter().map(|c| c.wr_id.to_native()).collect();
        let n = ids.len();
        ids.dedup();
        prop_assert_eq!(ids.len(), n);
        prop_assert!(n <= 3);
        prop_assert!(w.b.env.recv_cq.len() <= 4);
        // An error state means everything was flushed.
        if w.b.qp.is_error() {
            prop_assert_eq!(n, 3);
            prop_assert_eq!(w.b.env.recv_cq.len(), 4);
        }
    }
}

fn nak_of(w: &mut Wire) -> Option<(u32, u8)> {
    w.b.env
        .take_outbox()
        .iter()
        .filter_map(|b| PacketView::parse(b).ok().map(|v| v.to_packet()))
        .find_map(|p| {
            p.ext
                .aeth
                .filter(|a| a.syndrome >> 5 == 3)
                .map(|a| (p.bth.psn, a.syndrome))
        })
}

#[test]
fn malformed_requests_get_invalid_request_naks() {
    // MIDDLE without FIRST.
    let mut w = busy();
    let mut p = to_b(Opcode::RcSendMiddle, 100);
    p.payload = vec![0; 256];
    feed(&mut w, &p);
    assert_eq!(nak_of(&mut w), Some((100, 0x61)));
    assert!(w.b.qp.is_error());

    // Payload larger than the MTU.
    let mut w = busy();
    let mut p = to_b(Opcode::RcSendOnly, 100);
    p.payload = vec![0; 257];
    feed(&mut w, &p);
    assert_eq!(nak_of(&mut w), Some((100, 0x61)));

    // FIRST shorter than the MTU.
    let mut w = busy();
    let mut p = to_b(Opcode::RcRdmaWriteFirst, 100);
    p.ext.reth = Some(Reth {
        va: DST_VA,
        rkey: DST,
        dma_len: 1000,
    });
    p.payload = vec![0; 100];
    feed(&mut w, &p);
    assert_eq!(nak_of(&mut w), Some((100, 0x61)));

    // WRITE ONLY whose payload differs from the RETH length: nothing written.
    let mut w = busy();
    let before = w.b.env.bytes(DST).to_vec();
    let mut p = to_b(Opcode::RcRdmaWriteOnly, 100);
    p.ext.reth = Some(Reth {
        va: DST_VA,
        rkey: DST,
        dma_len: 100,
    });
    p.payload = vec![1; 50];
    feed(&mut w, &p);
    assert_eq!(nak_of(&mut w), Some((100, 0x61)));
    assert_eq!(w.b.env.bytes(DST), &before[..]);

    // A new message while a SEND is in progress.
    let mut w = busy();
    let mut p = to_b(Opcode::RcSendFirst, 100);
    p.payload = vec![0; 256];
    feed(&mut w, &p);
    w.b.env.take_outbox();
    let mut p = to_b(Opcode::RcRdmaWriteOnly, 101);
    p.ext.reth = Some(Reth::default());
    feed(&mut w, &p);
    assert_eq!(nak_of(&mut w), Some((101, 0x61)));

    // SEND with Invalidate is not supported.
    let mut w = busy();
    let mut p = to_b(Opcode::RcSendOnlyInv, 100);
    p.ext.ieth = Some(Default::default());
    feed(&mut w, &p);
    assert_eq!(nak_of(&mut w), Some((100, 0x61)));
}

#[test]
fn a_later_psn_is_nakked_once() {
    let mut w = busy();
    for psn in [103, 104, 105] {
        let mut p = to_b(Opcode::RcSendOnly, psn);
        p.payload = vec![1; 10];
        feed(&mut w, &p);
    }
    let out = w.b.env.take_outbox();
    assert_eq!(out.len(), 1, "one NAK for three early packets");
    assert_eq!(w.b.qp.counters().out_of_sequence, 3);
    assert!(w.b.env.recv_cq.is_empty());
    assert!(!w.b.qp.is_error());
}

#[test]
fn stray_responses_and_misaddressed_packets_are_ignored() {
    let mut w = busy();
    // ACK for a PSN B never sent.
    let mut p = to_b(Opcode::RcAcknowledge, 9000);
    p.ext.aeth = Some(Aeth::ack(0x1f, 0));
    feed(&mut w, &p);
    // READ response that does not match B's READ (PSN 502..505 expected at 502).
    let mut p = to_b(Opcode::RcRdmaReadResponseOnly, 400);
    p.ext.aeth = Some(Aeth::ack(0x1f, 0));
    p.payload = vec![0; 10];
    feed(&mut w, &p);
    // ATOMIC ACK for the wrong PSN.
    let mut p = to_b(Opcode::RcAtomicAcknowledge, 700);
    p.ext.aeth = Some(Aeth::ack(0x1f, 0));
    p.ext.atomic_ack_eth = Some(AtomicAckEth { orig: 1 });
    feed(&mut w, &p);
    assert_eq!(w.b.qp.counters().duplicate_responses, 3);
    assert!(w.b.env.send_cq.is_empty());

    // Wrong QP, wrong P_Key, wrong LID, UD opcode: dropped before anything.
    let mut wrong = to_b(Opcode::RcSendOnly, 100);
    wrong.bth.dest_qp = 0x99;
    feed(&mut w, &wrong);
    let mut wrong = to_b(Opcode::RcSendOnly, 100);
    wrong.bth.pkey = 0x8001;
    feed(&mut w, &wrong);
    let mut wrong = to_b(Opcode::RcSendOnly, 100);
    wrong.lrh.slid = 77;
    feed(&mut w, &wrong);
    let mut ud = to_b(Opcode::UdSendOnly, 100);
    ud.ext.deth = Some(Default::default());
    feed(&mut w, &ud);
    assert_eq!(w.b.qp.counters().packets_dropped, 4);
    assert!(w.b.env.outbox.is_empty());
    assert!(w.b.env.recv_cq.is_empty());
}
