//! A guest that corrupts a READ's quasi-WQE in its ring (seed 004) between
//! the request and the responses: the send engine reads the quasi-WQE for
//! every response it builds, finds it differs from the responder's record,
//! and ends the QP with NAK remote operational error, sending nothing of the
//! range the corrupted quasi-WQE names.

use ibtca_protocol::opcode::OpClass;
use ibtca_protocol::Opcode;

use super::*;
use crate::QpFailure;

/// NAK remote operational error (IBA 9.7.5.2.2 class: a responder-local
/// fault, here its guest's ring).
const NAK_REMOTE_OP: u8 = 0x63;
/// Where the READ reads in B's DST region, and where a corrupted
/// quasi-WQE points instead (bytes that must never leave: every response
/// is checked byte-exact against the genuine range).
const READ_OFF: usize = 0;
const SECRET_OFF: usize = 0x1_0000;
const LEN: usize = 4096;
const MTU: u32 = 256;
const PACKETS: u32 = (LEN as u32) / MTU;

type Corruption = (&'static str, fn(&mut QuasiWqe));

/// Each field the responder's record holds, altered.
const CORRUPTIONS: [Corruption; 5] = [
    ("va", |q| q.va = (DST_VA + SECRET_OFF as u64).into()),
    ("length", |q| q.length = (2 * LEN as u32).into()),
    ("rkey", |q| q.rkey = SRC.into()),
    ("psn", |q| q.psn = (q.psn.to_native() + 1).into()),
    ("dest_qpn", |q| q.dest_qpn = (QPN_A + 1).into()),
];

/// A READs LEN bytes of B's DST; B's quasi-WQE is corrupted after `sent`
/// responses went. Returns the wire after it went quiet.
fn corrupted_after(sent: u32, corrupt: fn(&mut QuasiWqe)) -> Wire {
    let mut w = Wire::with_mtu(MTU);
    let data = pattern(LEN, 9);
    w.b.env.bytes_mut(DST)[READ_OFF..READ_OFF + LEN].copy_from_slice(&data);
    w.b.env.bytes_mut(DST)[SECRET_OFF..SECRET_OFF + 2 * LEN].copy_from_slice(&pattern(2 * LEN, 77));
    let mut r = rdma(WR_RDMA_READ, 1, LEN as u32, DST_VA + READ_OFF as u64, DST);
    r.sge[0].addr = DST_VA.into();
    w.post_a(r);
    w.read_budget = sent as usize;
    for p in w.a.env.take_outbox() {
        let v = PacketView::parse(&p).unwrap();
        w.b.qp.on_packet(&v, w.now, &mut w.b.env);
    }
    w.serve();
    assert_eq!(w.b.env.outbox.len(), sent as usize, "{sent} responses sent");
    assert_eq!(
        w.b.env.quasi.len(),
        1,
        "the READ's quasi-WQE is in the ring"
    );
    corrupt(&mut w.b.env.quasi[0]);
    w.read_budget = usize::MAX;
    w.run();
    w
}

#[test]
fn a_corrupted_quasi_wqe_ends_the_qp_with_nak_remote_operational_error() {
    let data = pattern(LEN, 9);
    for sent in [0, 4] {
        for (field, corrupt) in CORRUPTIONS {
            let w = corrupted_after(sent, corrupt);
            let ctx = format!("{field} corrupted after {sent} responses");

            // Exactly the responses before the corruption left, byte-exact
            // from the genuine range; none of the range it names.
            let from_b = w.packets(Dir::BtoA);
            let responses: Vec<_> = from_b
                .iter()
                .filter(|p| p.info().class == OpClass::Read)
                .collect();
            assert_eq!(responses.len(), sent as usize, "{ctx}");
            for (i, p) in responses.iter().enumerate() {
                let at = i * MTU as usize;
                assert_eq!(p.payload, data[at..at + MTU as usize], "{ctx}");
            }
            for p in from_b.iter().filter(|p| p.info().class != OpClass::Read) {
                assert!(p.payload.is_empty(), "{ctx}: bytes left in {p:?}");
            }
            let landed = sent as usize * MTU as usize;
            assert_eq!(w.a.env.bytes(DST)[..landed], data[..landed], "{ctx}");
            assert!(
                w.a.env.bytes(DST)[landed..2 * LEN].iter().all(|&b| b == 0),
                "{ctx}: nothing landed past the responses sent"
            );

            // The NAK for the first response not sent, and nothing else.
            let naks: Vec<_> = from_b
                .iter()
                .filter(|p| p.bth.opcode == Opcode::RcAcknowledge)
                .map(|p| (p.bth.psn, p.ext.aeth.map(|a| a.syndrome)))
                .collect();
            assert_eq!(naks, [(100 + sent, Some(NAK_REMOTE_OP))], "{ctx}");

            // B's QP is in error, and the mismatch is counted once.
            assert!(w.b.qp.is_error(), "{ctx}");
            assert_eq!(w.b.qp.failure(), Some(QpFailure::Responder), "{ctx}");
            let c = w.b.qp.counters();
            assert_eq!(c.quasi_mismatches, 1, "{ctx}");
            assert_eq!(c.naks_sent.remote_op, 1, "{ctx}");

            // A's READ completes with the error the NAK names.
            assert_eq!(
                summary(&w.a.env.send_cq),
                [(1, WC_RDMA_READ, WC_REM_OP_ERR)],
                "{ctx}"
            );
        }
    }
}

/// The check reads the quasi-WQE for every response: an untouched one
/// serves the whole READ, and the ring is drained only after its last
/// response.
#[test]
fn an_untouched_quasi_wqe_serves_the_read_and_leaves_the_ring_after_it() {
    let w = corrupted_after(4, |_| {});
    let responses = w
        .packets(Dir::BtoA)
        .into_iter()
        .filter(|p| p.info().class == OpClass::Read)
        .count();
    assert_eq!(responses, PACKETS as usize);
    assert_eq!(&w.a.env.bytes(DST)[..LEN], &pattern(LEN, 9)[..]);
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_RDMA_READ, WC_SUCCESS)]);
    assert!(w.b.env.quasi.is_empty());
    assert_eq!(w.b.qp.counters().quasi_mismatches, 0);
}
