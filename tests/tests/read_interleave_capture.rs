//! Seeds 004 and 001 on the wire: READs of three QPs, each with three
//! inbound READs outstanding at the responder, are served by the
//! responder's one shared send engine a budget of packets per QP per turn.
//! The switch port's capture of the responder's link (decoded by tshark)
//! shows their responses interleaved QP by QP, each READ's responses in
//! PSN order FIRST, MIDDLE…, LAST; and the key slots each queued READ held
//! were released at its last response: a second round of three READs per
//! QP is taken again (past max_dest_rd_atomic a READ would get NAK invalid
//! request), no walk cleared anything, every byte arrives.

use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::capture::{num, tshark};
use ibtca_tests::fabric::{Fabric, FabricOptions};
use ibtca_tests::pair::ALL_ACCESS;
use ibtca_tests::sim_guest::{remote, send_wqe, Qp, SimGuest};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(20);
const MTU_1024: u8 = 3;
/// Bytes per READ: 16 responses at MTU 1024.
const READ_LEN: u32 = 16 * 1024;
const QPS: usize = 3;
/// READs per QP per round: the responder resources (max_dest_rd_atomic).
const READS: usize = 3;
/// RKM_READ_BUDGET while serving: READ response packets per QP per turn.
const BUDGET: u32 = 4;

/// tshark columns (`ibtca_tests::capture::FIELDS`).
const OPCODE: usize = 0;
const PSN: usize = 1;
const DESTQP: usize = 2;
const SLID: usize = 6;
/// RC RDMA READ response FIRST, MIDDLE, LAST (ONLY is 16).
const FIRST: u64 = 13;
const MIDDLE: u64 = 14;
const LAST: u64 = 15;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8)
        .collect()
}

/// Waits until quasi-WQE `index` of the ring at `ring` has its owner bit
/// (the responder queued that READ).
fn wait_quasi(g: &SimGuest, ring: u64, index: u64) {
    let deadline = Instant::now() + T;
    let owner = |g: &SimGuest| {
        let bytes = g.read(ring + 32 * index, 32);
        QuasiWqe::from_slice(&bytes).expect("32 bytes").owner & 1
    };
    while owner(g) == 0 {
        assert!(
            Instant::now() < deadline,
            "no quasi-WQE {index} at {ring:#x}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Byte offset of READ `i` of QP `q` in round `round`, in both buffers.
fn slot(round: usize, q: usize, i: usize) -> u64 {
    (((round * QPS + q) * READS + i) as u64) * u64::from(READ_LEN)
}

/// One round: B holds its responses (budget 0) while A posts three READs
/// on each QP; once B queued all of them (quasi-WQEs), B serves them
/// BUDGET packets per QP per turn; A's completions and bytes are checked.
fn round(f: &mut Fabric, qa: &mut [Qp], qb: &[Qp], r: usize) {
    let (a, b) = f.two(0, 1);
    b.g.client.write32(0, regs::RKM_READ_BUDGET, 0);
    for (q, qp) in qa.iter_mut().enumerate() {
        let wqes: Vec<SendWqe> = (0..READS)
            .map(|i| {
                let off = slot(r, q, i);
                let w = send_wqe(WR_RDMA_READ, off, a.buf + off, READ_LEN, a.lkey);
                remote(w, b.buf + off, b.rkey)
            })
            .collect();
        a.g.post_send_batch(qp, &wqes);
    }
    for qp in qb {
        for i in 0..READS {
            wait_quasi(&b.g, qp.quasi, (r * READS + i) as u64);
        }
    }
    assert!(
        a.g.try_poll_cq(&mut a.cq).is_none(),
        "held: nothing completes"
    );
    b.g.client.write32(0, regs::RKM_READ_BUDGET, BUDGET);
    let mut next = [0usize; QPS];
    for _ in 0..QPS * READS {
        let c = a.g.poll_cq(&mut a.cq, T).expect("READ completion");
        let q = qa
            .iter()
            .position(|p| p.qpn == c.qpn.to_native())
            .expect("one of the three QPs");
        assert_eq!(
            (c.wr_id.to_native(), c.status, c.opcode),
            (slot(r, q, next[q]), WC_SUCCESS, WC_RDMA_READ),
            "QP {q}'s READs complete in order"
        );
        next[q] += 1;
    }
    for q in 0..QPS {
        for i in 0..READS {
            let off = slot(r, q, i);
            let got = a.g.read(a.buf + off, READ_LEN as usize);
            assert!(
                got == b.g.read(b.buf + off, READ_LEN as usize),
                "READ {q}/{i}"
            );
        }
    }
}

#[test]
fn reads_of_three_qps_interleave_on_the_wire_and_release_their_slots() {
    let mut f = Fabric::star(
        2,
        FabricOptions {
            mtu: MTU_1024,
            buf: 2 << 20,
            ram: 16 << 20,
            captures: true,
            ..Default::default()
        },
    );
    let (lid_a, lid_b) = (f.nodes[0].lid, f.nodes[1].lid);
    let mut qa = vec![f.nodes[0].qps[&lid_b]];
    let mut qb = vec![f.nodes[1].qps[&lid_a]];
    for _ in 1..QPS {
        let (a, b) = f.two(0, 1);
        let x = a.g.create_qp(a.pd, &a.cq, &a.cq, 6);
        let y = b.g.create_qp(b.pd, &b.cq, &b.cq, 6);
        a.g.connect(&x, lid_b, y.qpn, MTU_1024, ALL_ACCESS);
        b.g.connect(&y, lid_a, x.qpn, MTU_1024, ALL_ACCESS);
        qa.push(x);
        qb.push(y);
    }
    let total = 2 * QPS * READS * READ_LEN as usize;
    f.nodes[1].g.write(f.nodes[1].buf, &pattern(total, 7));
    round(&mut f, &mut qa, &qb, 0);
    // The slots were released: three more READs per QP are taken (a
    // fourth held slot would have drawn NAK invalid request).
    round(&mut f, &mut qa, &qb, 1);
    let b = &mut f.nodes[1];
    assert_eq!(
        b.g.client.read32(0, regs::RKM_CLEARED),
        0,
        "no walk cleared"
    );

    // B is on port 2 of the switch: what it sent, in wire order.
    let rows = tshark(&f.capture(0, 2));
    let responses: Vec<(u32, u64, u32)> = rows
        .iter()
        .filter(|r| num(&r[SLID]) == Some(u64::from(lid_b)))
        .filter_map(|r| {
            let op = num(&r[OPCODE])?;
            (FIRST..=LAST + 1)
                .contains(&op)
                .then(|| Some((num(&r[DESTQP])? as u32, op, num(&r[PSN])? as u32)))?
        })
        .collect();
    let per_round = QPS * READS * 16;
    assert_eq!(responses.len(), 2 * per_round, "every response captured");
    for (r, chunk) in responses.chunks(per_round).enumerate() {
        // Each QP's responses: consecutive PSNs, FIRST, 14 MIDDLE, LAST
        // per READ.
        for qp in &qa {
            let mine: Vec<_> = chunk.iter().filter(|x| x.0 == qp.qpn).collect();
            assert_eq!(mine.len(), READS * 16, "round {r}, QP {:#x}", qp.qpn);
            for (k, x) in mine.iter().enumerate() {
                let want = match k % 16 {
                    0 => FIRST,
                    15 => LAST,
                    _ => MIDDLE,
                };
                assert_eq!(x.1, want, "round {r}, QP {:#x}, response {k}", qp.qpn);
                assert_eq!(
                    x.2,
                    (mine[0].2 + k as u32) & 0xff_ffff,
                    "round {r}, QP {:#x}: PSN order",
                    qp.qpn
                );
            }
        }
        // Interleaved by the shared engine: never more than BUDGET of one
        // QP in a row, and all three QPs within the first turn.
        let runs: Vec<usize> = chunk.chunk_by(|x, y| x.0 == y.0).map(<[_]>::len).collect();
        assert!(
            runs.iter().all(|&n| n <= BUDGET as usize),
            "round {r}: runs of one QP's responses {runs:?}"
        );
        assert!(runs.len() >= per_round / BUDGET as usize, "{runs:?}");
        let first_turn: std::collections::BTreeSet<u32> =
            chunk[..QPS * BUDGET as usize].iter().map(|x| x.0).collect();
        assert_eq!(
            first_turn.len(),
            QPS,
            "round {r}: every QP in the first turn"
        );
    }
}
