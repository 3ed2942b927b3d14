//! Receive WQEs of a larger stride between two device instances: a QP
//! whose RQ has 512-byte WQEs, and an SRQ with them, take a 65,000-byte
//! SEND into 17 SGEs (a small head buffer and 16 scattered pages, as
//! IPoIB's connected mode posts at MTU 65520), every byte where its SGE
//! says; a WQE naming more SGEs than its stride holds completes with
//! IBTCA_WC_LOC_LEN_ERR although a valid SGE sits right past its slot
//! (the device reads no further); CREATE_QP and CREATE_SRQ refuse strides
//! outside the device's range. An SRQ of the largest stride (1024 bytes)
//! scatters a SEND over its 32 SGEs (max_srq_sge), every byte where its
//! SGE says and nothing else touched; an SRQ WQE naming more SGEs than its
//! stride holds fails with IBTCA_WC_LOC_LEN_ERR as a QP's does.

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS};
use ibtca_tests::sim_guest::{send_wqe, DbRoute, Qp};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(30);
const EINVAL: u16 = 22;
/// A stride of 512 bytes: 28 SGEs.
const LOG_STRIDE_512: u8 = 9;
/// The message: what 17 SGEs of IPoIB's MTU 65520 receive hold, nearly.
const MSG: usize = 65_000;
/// The head buffer's length (SGE 0).
const HEAD: u32 = 100;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(31)
                .wrapping_add(seed ^ (i >> 8) as u8)
        })
        .collect()
}

/// A receive WQE's bytes: header and `sges` (past the first 4 they run
/// on after the 128-byte struct), with `num_sge` as given.
fn wqe_bytes(wr_id: u64, num_sge: u8, sges: &[Sge]) -> Vec<u8> {
    let head = RecvWqe {
        wr_id: wr_id.into(),
        num_sge,
        ..RecvWqe::default()
    };
    let mut b = head.as_slice()[..64].to_vec();
    for s in sges {
        b.extend_from_slice(s.as_slice());
    }
    b.resize(b.len().max(128), 0);
    b
}

/// 17 SGEs in B's buffer: a head buffer, then 16 pages in reverse order
/// with a page between each two.
fn scattered(p: &LinkedPair) -> Vec<Sge> {
    let mut v = vec![Sge {
        addr: (p.b.buf + 0x100).into(),
        length: HEAD.into(),
        lkey: p.b.lkey.into(),
    }];
    for i in 0..16u64 {
        v.push(Sge {
            addr: (p.b.buf + 0x1000 * (2 + 2 * (15 - i))).into(),
            length: 4096.into(),
            lkey: p.b.lkey.into(),
        });
    }
    v
}

/// Checks that `data` landed across `sges` in order, and the pages
/// between them stayed zero.
fn check_landed(p: &LinkedPair, sges: &[Sge], data: &[u8]) {
    let mut at = 0;
    for (i, s) in sges.iter().enumerate() {
        let take = (s.length.to_native() as usize).min(data.len() - at);
        let got = p.b.g.read(s.addr.to_native(), take);
        assert!(got == data[at..at + take], "SGE {i}'s bytes");
        at += take;
    }
    assert_eq!(at, data.len(), "the whole message");
    for i in 0..16u64 {
        let gap = p.b.buf + 0x1000 * (3 + 2 * i);
        assert!(p.b.g.read(gap, 4096).iter().all(|&b| b == 0), "gap {i}");
    }
}

/// A's QP connected to B's `b_qp` (MTU 4096: a 65,000-byte SEND is 16
/// packets).
fn connect(p: &mut LinkedPair, b_qp: &Qp) -> Qp {
    let (pd, cq) = (p.a.pd, p.a.cq);
    let a_qp = p.a.g.create_qp(pd, &cq, &cq, 4);
    p.a.g.connect(&a_qp, 2, b_qp.qpn, MTU_4096, ALL_ACCESS);
    p.b.g.connect(b_qp, 1, a_qp.qpn, MTU_4096, ALL_ACCESS);
    a_qp
}

/// SENDs `data` from A's buffer on `a_qp`; A's completion status.
fn send(p: &mut LinkedPair, a_qp: &mut Qp, data: &[u8]) -> u8 {
    p.a.g.write(p.a.buf, data);
    let w = send_wqe(WR_SEND, 7, p.a.buf, data.len() as u32, p.a.lkey);
    p.a.g.post_send(a_qp, &w);
    p.a.g
        .poll_cq(&mut p.a.cq, T)
        .expect("send completion")
        .status
}

#[test]
fn a_send_lands_in_seventeen_sges_of_a_512_byte_receive_wqe() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (pd, cq) = (p.b.pd, p.b.cq);
    let mut b_qp =
        p.b.g
            .create_qp_strided(pd, &cq, 3, LOG_STRIDE_512)
            .expect("CREATE_QP with a 512-byte RQ stride");
    let mut a_qp = connect(&mut p, &b_qp);
    let sges = scattered(&p);
    p.b.g.post_recv_bytes(&mut b_qp, &wqe_bytes(41, 17, &sges));
    let data = pattern(MSG, 3);
    assert_eq!(send(&mut p, &mut a_qp, &data), WC_SUCCESS);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
    assert_eq!((r.wr_id.to_native(), r.status), (41, WC_SUCCESS));
    assert_eq!(r.byte_len.to_native() as usize, MSG);
    check_landed(&p, &sges, &data);
}

/// B's SRQ of 4 WQEs of 2^`log_stride` bytes, B's QP on it connected to a
/// QP of A's: the SRQ's number, its ring and A's QP.
fn srq_pair(p: &mut LinkedPair, log_stride: u8) -> (u32, u64, Qp) {
    let log = 2;
    let ring = p.b.g.alloc(1 << (log + log_stride), 4096);
    let c = CmdCreateSrq {
        pdn: p.b.pd.into(),
        log_entries: log,
        log_stride,
        ring: ring.into(),
        max_wr: 4u32.into(),
        ..Default::default()
    };
    let srqn =
        p.b.g
            .cmd(CMD_CREATE_SRQ, c.as_slice())
            .expect("CREATE_SRQ with a larger stride")
            .0;
    let (pd, cq) = (p.b.pd, p.b.cq);
    let b_qp =
        p.b.g
            .create_qp_on_srq(pd, &cq, &cq, 4, srqn)
            .expect("QP on the SRQ");
    let a_qp = connect(p, &b_qp);
    (srqn, ring, a_qp)
}

#[test]
fn an_srq_of_512_byte_wqes_takes_seventeen_sges() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (srqn, ring, mut a_qp) = srq_pair(&mut p, LOG_STRIDE_512);
    let sges = scattered(&p);
    // Slot 1: the device reads slot 0's WQE at 0 and this one 512 bytes on.
    for (slot, wr_id) in [(0u64, 50u64), (1, 51)] {
        let n = if slot == 0 { 1 } else { 17 };
        let bytes = wqe_bytes(wr_id, n, &sges[..usize::from(n)]);
        p.b.g.write(ring + 512 * slot, &bytes);
    }
    p.b.g
        .ring(DbRoute::Bar0, regs::DB_SRQ, u64::from(srqn) | (2 << 32));
    let small = pattern(HEAD as usize, 1);
    assert_eq!(send(&mut p, &mut a_qp, &small), WC_SUCCESS);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("first receive");
    assert_eq!((r.wr_id.to_native(), r.status), (50, WC_SUCCESS));
    let data = pattern(MSG, 9);
    assert_eq!(send(&mut p, &mut a_qp, &data), WC_SUCCESS);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("second receive");
    assert_eq!((r.wr_id.to_native(), r.status), (51, WC_SUCCESS));
    assert_eq!(r.byte_len.to_native() as usize, MSG);
    check_landed(&p, &sges, &data);

    // RESIZE_SRQ keeps the stride: a posted 17-SGE receive moves whole.
    let ring2 = p.b.g.alloc(512 << 3, 4096);
    p.b.g.write(ring + 512 * 2, &wqe_bytes(52, 17, &sges));
    p.b.g
        .ring(DbRoute::Bar0, regs::DB_SRQ, u64::from(srqn) | (3 << 32));
    let rz = CmdResizeSrq {
        srqn: srqn.into(),
        log_entries: 3,
        ring: ring2.into(),
        max_wr: 8u32.into(),
        ..Default::default()
    };
    p.b.g
        .cmd(CMD_RESIZE_SRQ, rz.as_slice())
        .expect("RESIZE_SRQ");
    p.b.g.write(ring + 512 * 2, &[0; 512]);
    for i in 0..16u64 {
        p.b.g.write(p.b.buf + 0x1000 * (2 + 2 * i), &[0; 4096]);
    }
    let data = pattern(MSG, 77);
    assert_eq!(send(&mut p, &mut a_qp, &data), WC_SUCCESS);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive after resize");
    assert_eq!((r.wr_id.to_native(), r.status), (52, WC_SUCCESS));
    check_landed(&p, &sges, &data);
}

#[test]
fn an_srq_of_1024_byte_wqes_scatters_a_send_over_all_32_sges() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (srqn, ring, mut a_qp) = srq_pair(&mut p, MAX_RECV_LOG_STRIDE);
    let n = MAX_RECV_SGE as u64;
    // SGE i: 64 + 61 * i bytes at 8 bytes into page 2 + 2 * (31 - i).
    let sges: Vec<Sge> = (0..n)
        .map(|i| Sge {
            addr: (p.b.buf + 0x1000 * (2 + 2 * (n - 1 - i)) + 8).into(),
            length: (64 + 61 * i as u32).into(),
            lkey: p.b.lkey.into(),
        })
        .collect();
    let total: usize = sges.iter().map(|s| s.length.to_native() as usize).sum();
    p.b.g.write(ring, &wqe_bytes(61, n as u8, &sges));
    p.b.g
        .ring(DbRoute::Bar0, regs::DB_SRQ, u64::from(srqn) | (1 << 32));
    let data = pattern(total, 21);
    assert_eq!(send(&mut p, &mut a_qp, &data), WC_SUCCESS);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
    assert_eq!((r.wr_id.to_native(), r.status), (61, WC_SUCCESS));
    assert_eq!(r.byte_len.to_native() as usize, total);
    // Every byte of the pages the SGEs lie in: the message's where an SGE
    // says, in SGE order, zero everywhere else.
    let span = 0x1000 * (2 * n + 2);
    let mut want = vec![0u8; span as usize];
    let mut at = 0;
    for s in &sges {
        let (off, len) = (
            (s.addr.to_native() - p.b.buf) as usize,
            s.length.to_native() as usize,
        );
        want[off..off + len].copy_from_slice(&data[at..at + len]);
        at += len;
    }
    let got = p.b.g.read(p.b.buf, span as usize);
    for (i, s) in sges.iter().enumerate() {
        let off = (s.addr.to_native() - p.b.buf) as usize;
        let len = s.length.to_native() as usize;
        assert!(
            got[off..off + len] == want[off..off + len],
            "SGE {i}'s bytes"
        );
    }
    assert!(got == want, "bytes outside the 32 SGEs changed");
}

/// A's SEND of 200 bytes into B's receive `wr_id`, which names more SGEs
/// than its stride holds: the sender gets a remote operational error, the
/// receive a local length error, and nothing lands in B's buffer.
fn send_fails_with_a_length_error(p: &mut LinkedPair, a_qp: &mut Qp, wr_id: u64) {
    let data = pattern(200, 5);
    assert_eq!(send(p, a_qp, &data), WC_REM_OP_ERR);
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
    assert_eq!((r.wr_id.to_native(), r.status), (wr_id, WC_LOC_LEN_ERR));
    assert!(
        p.b.g.read(p.b.buf, 0x9000).iter().all(|&b| b == 0),
        "nothing landed"
    );
}

#[test]
fn an_srq_wqe_naming_more_sges_than_its_stride_holds_fails_with_a_length_error() {
    let mut p = LinkedPair::start(PairOptions::default());
    // 256 bytes: 12 SGEs; the WQE names 13, the 13th planted in slot 1.
    let (srqn, ring, mut a_qp) = srq_pair(&mut p, 8);
    let lkey = p.b.lkey.into();
    let one = |at: u64, length: u32| Sge {
        addr: at.into(),
        length: length.into(),
        lkey,
    };
    let sges: Vec<Sge> = (0..12)
        .map(|i| one(p.b.buf + 0x1000 + 64 * i, 64))
        .collect();
    let mut bytes = wqe_bytes(9, 13, &sges);
    bytes.resize(256, 0);
    bytes.extend_from_slice(one(p.b.buf + 0x8000, 4096).as_slice());
    p.b.g.write(ring, &bytes);
    p.b.g
        .ring(DbRoute::Bar0, regs::DB_SRQ, u64::from(srqn) | (1 << 32));
    send_fails_with_a_length_error(&mut p, &mut a_qp, 9);
}

/// B's QP with an RQ of 2^`log_stride` bytes and a receive naming one SGE
/// more than that holds, a valid SGE planted right past its slot: the
/// receive fails with a local length error, the sender with a remote
/// operational error, and nothing lands.
fn refuses_more_sges_than_the_stride(log_stride: u8, holds: usize) {
    let mut p = LinkedPair::start(PairOptions::default());
    let (pd, cq) = (p.b.pd, p.b.cq);
    let mut b_qp =
        p.b.g
            .create_qp_strided(pd, &cq, 3, log_stride)
            .expect("CREATE_QP");
    assert_eq!(b_qp.rq_stride(), 1 << log_stride);
    let mut a_qp = connect(&mut p, &b_qp);
    let lkey = p.b.lkey.into();
    let one = |at: u64| Sge {
        addr: at.into(),
        length: 64.into(),
        lkey,
    };
    let sges: Vec<Sge> = (0..holds as u64)
        .map(|i| one(p.b.buf + 0x1000 + 64 * i))
        .collect();
    let stride = b_qp.rq_stride() as usize;
    let mut bytes = wqe_bytes(5, holds as u8 + 1, &sges);
    bytes.resize(stride, 0);
    // The next slot starts with what would be SGE `holds`: a whole page.
    let planted = Sge {
        addr: (p.b.buf + 0x8000).into(),
        length: 4096.into(),
        lkey,
    };
    let next = b_qp.rq_addr() + b_qp.rq_stride();
    p.b.g.write(next, planted.as_slice());
    p.b.g.post_recv_bytes(&mut b_qp, &bytes);
    send_fails_with_a_length_error(&mut p, &mut a_qp, 5);
}

#[test]
fn a_wqe_naming_more_sges_than_its_stride_holds_fails_with_a_length_error() {
    refuses_more_sges_than_the_stride(RECV_LOG_STRIDE, 4);
    refuses_more_sges_than_the_stride(8, 12);
}

#[test]
fn create_refuses_strides_outside_the_range() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (pd, cq) = (p.b.pd, p.b.cq);
    for bad in [1, RECV_LOG_STRIDE - 1, MAX_RECV_LOG_STRIDE + 1, 0xff] {
        let e = p.b.g.create_qp_strided(pd, &cq, 3, bad).err();
        assert_eq!(e.map(|e| e.0), Some(EINVAL), "rq_log_stride {bad}");
        let c = CmdCreateSrq {
            pdn: pd.into(),
            log_entries: 2,
            log_stride: bad,
            ring: p.b.g.alloc(4096, 4096).into(),
            max_wr: 4u32.into(),
            ..Default::default()
        };
        let e = p.b.g.cmd(CMD_CREATE_SRQ, c.as_slice()).err();
        assert_eq!(e.map(|e| e.0), Some(EINVAL), "SRQ log_stride {bad}");
    }
    for good in [0, RECV_LOG_STRIDE, MAX_RECV_LOG_STRIDE] {
        assert!(p.b.g.create_qp_strided(pd, &cq, 3, good).is_ok());
    }
}
