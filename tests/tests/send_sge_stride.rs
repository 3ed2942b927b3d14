//! Send WQEs of a larger stride between two device instances: a QP whose
//! SQ has 512-byte WQEs gathers a SEND and an RDMA WRITE from 17 SGEs (a
//! small head buffer and 16 pages in reverse order), and scatters an RDMA
//! READ's response into them, every byte checked on the other side; at
//! the largest stride QUERY_DEVICE's max_sge SGEs gather; a WQE naming
//! more SGEs than its stride holds completes with IBTCA_WC_LOC_LEN_ERR
//! although a valid SGE sits right past its slot (the device reads no
//! further), and nothing reaches the peer; CREATE_QP refuses SQ strides
//! outside the device's range.

use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS};
use ibtca_tests::sim_guest::{recv_wqe, Qp};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(30);
const EINVAL: u16 = 22;
/// A stride of 512 bytes: 28 SGEs.
const LOG_STRIDE_512: u8 = 9;
/// The head buffer's length (SGE 0).
const HEAD: u32 = 100;
/// What the 17 SGEs hold.
const MSG: usize = HEAD as usize + 16 * 4096;
/// Where the message lands in B's buffer (WRITE) or comes from (READ).
const AT: u64 = 0x4_0000;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u8)
                .wrapping_mul(29)
                .wrapping_add(seed ^ (i >> 8) as u8)
        })
        .collect()
}

/// A send WQE's bytes: `head`'s first 64 bytes and `sges` (past the
/// first 4 they run on after the 128-byte struct), `num_sge` as given.
fn wqe_bytes(head: &SendWqe, num_sge: u8, sges: &[Sge]) -> Vec<u8> {
    let mut b = head.as_slice()[..64].to_vec();
    b[std::mem::offset_of!(SendWqe, num_sge)] = num_sge;
    for s in sges {
        b.extend_from_slice(s.as_slice());
    }
    b.resize(b.len().max(128), 0);
    b
}

fn header(opcode: u8, wr_id: u64, remote_addr: u64, rkey: u32) -> SendWqe {
    SendWqe {
        wr_id: wr_id.into(),
        opcode,
        flags: WQE_F_SIGNALED,
        remote_addr: remote_addr.into(),
        rkey: rkey.into(),
        ..SendWqe::default()
    }
}

/// 17 SGEs in A's buffer: a head buffer, then 16 pages in reverse order
/// with a page between each two.
fn scattered(p: &LinkedPair) -> Vec<Sge> {
    let mut v = vec![Sge {
        addr: (p.a.buf + 0x100).into(),
        length: HEAD.into(),
        lkey: p.a.lkey.into(),
    }];
    for i in 0..16u64 {
        v.push(Sge {
            addr: (p.a.buf + 0x1000 * (2 + 2 * (15 - i))).into(),
            length: 4096.into(),
            lkey: p.a.lkey.into(),
        });
    }
    v
}

/// Writes `data` across `sges` in A's buffer, in order.
fn spread(p: &mut LinkedPair, sges: &[Sge], data: &[u8]) {
    let mut at = 0;
    for s in sges {
        let n = s.length.to_native() as usize;
        p.a.g.write(s.addr.to_native(), &data[at..at + n]);
        at += n;
    }
    assert_eq!(at, data.len());
}

/// Checks that `data` landed across `sges` in A's buffer, in order, and
/// the pages between them stayed zero.
fn check_scattered(p: &LinkedPair, sges: &[Sge], data: &[u8]) {
    let mut at = 0;
    for (i, s) in sges.iter().enumerate() {
        let n = s.length.to_native() as usize;
        let got = p.a.g.read(s.addr.to_native(), n);
        assert!(got == data[at..at + n], "SGE {i}'s bytes");
        at += n;
    }
    assert_eq!(at, data.len(), "the whole message");
    for i in 0..16u64 {
        let gap = p.a.buf + 0x1000 * (3 + 2 * i);
        assert!(p.a.g.read(gap, 4096).iter().all(|&b| b == 0), "gap {i}");
    }
}

/// A's QP with an SQ of 2^`log_stride`-byte WQEs, connected to B's QP
/// (MTU 4096: the 17 SGEs' message is 17 packets).
fn strided_pair(log_stride: u8) -> (LinkedPair, Qp) {
    let mut p = LinkedPair::start(PairOptions::default());
    let (pd, cq) = (p.a.pd, p.a.cq);
    let a_qp =
        p.a.g
            .create_qp_send_strided(pd, &cq, 3, log_stride)
            .expect("CREATE_QP with a larger SQ stride");
    assert_eq!(a_qp.sq_stride(), 1 << log_stride);
    let b_qpn = p.b.qp.qpn;
    p.a.g.connect(&a_qp, 2, b_qpn, MTU_4096, ALL_ACCESS);
    let b_qp = p.b.qp;
    p.b.g.connect(&b_qp, 1, a_qp.qpn, MTU_4096, ALL_ACCESS);
    (p, a_qp)
}

/// Posts `bytes` on A's `qp`; A's completion (wr_id, status).
fn post(p: &mut LinkedPair, qp: &mut Qp, bytes: &[u8]) -> (u64, u8) {
    p.a.g.post_send_bytes(qp, bytes);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("send completion");
    (c.wr_id.to_native(), c.status)
}

#[test]
fn a_send_gathers_seventeen_sges_of_a_512_byte_send_wqe() {
    let (mut p, mut qp) = strided_pair(LOG_STRIDE_512);
    let sges = scattered(&p);
    let data = pattern(MSG, 3);
    spread(&mut p, &sges, &data);
    let r = recv_wqe(40, p.b.buf + AT, MSG as u32, p.b.lkey);
    p.b.g.post_recv(&mut p.b.qp, &r);
    let w = wqe_bytes(&header(WR_SEND, 41, 0, 0), 17, &sges);
    assert_eq!(post(&mut p, &mut qp, &w), (41, WC_SUCCESS));
    let r = p.b.g.poll_cq(&mut p.b.cq, T).expect("receive completion");
    assert_eq!((r.wr_id.to_native(), r.status), (40, WC_SUCCESS));
    assert_eq!(r.byte_len.to_native() as usize, MSG);
    assert!(p.b.g.read(p.b.buf + AT, MSG) == data, "every byte on B");
}

#[test]
fn an_rdma_write_gathers_seventeen_sges_and_a_read_scatters_into_them() {
    let (mut p, mut qp) = strided_pair(LOG_STRIDE_512);
    let sges = scattered(&p);
    let data = pattern(MSG, 7);
    spread(&mut p, &sges, &data);
    let (buf, rkey) = (p.b.buf, p.b.rkey);
    let w = wqe_bytes(&header(WR_RDMA_WRITE, 42, buf + AT, rkey), 17, &sges);
    assert_eq!(post(&mut p, &mut qp, &w), (42, WC_SUCCESS));
    assert!(p.b.g.read(buf + AT, MSG) == data, "every byte on B");
    assert!(p.b.g.read(buf + AT - 64, 64).iter().all(|&b| b == 0));
    let after = p.b.g.read(buf + AT + MSG as u64, 64);
    assert!(after.iter().all(|&b| b == 0), "nothing past the message");

    // READ it back into the same 17 SGEs, cleared first.
    let back = pattern(MSG, 11);
    p.b.g.write(buf + AT, &back);
    for s in &sges {
        let n = s.length.to_native() as usize;
        p.a.g.write(s.addr.to_native(), &vec![0; n]);
    }
    let r = wqe_bytes(&header(WR_RDMA_READ, 43, buf + AT, rkey), 17, &sges);
    assert_eq!(post(&mut p, &mut qp, &r), (43, WC_SUCCESS));
    check_scattered(&p, &sges, &back);
}

#[test]
fn max_sge_sges_gather_at_the_largest_stride() {
    let (mut p, mut qp) = strided_pair(MAX_RECV_LOG_STRIDE);
    let d: DeviceAttr = p.a.g.query(CMD_QUERY_DEVICE).unwrap();
    let n = usize::from(d.max_sge);
    assert_eq!(n, usize::from(MAX_SEND_SGE));
    // SGE i: 8 bytes of i + 1, at A's buffer + 0x100 * i.
    let sges: Vec<Sge> = (0..n as u64)
        .map(|i| Sge {
            addr: (p.a.buf + 0x100 * i).into(),
            length: 8.into(),
            lkey: p.a.lkey.into(),
        })
        .collect();
    for i in 0..n {
        p.a.g.write(p.a.buf + 0x100 * i as u64, &[i as u8 + 1; 8]);
    }
    let (buf, rkey) = (p.b.buf, p.b.rkey);
    let w = wqe_bytes(&header(WR_RDMA_WRITE, 1, buf, rkey), d.max_sge, &sges);
    assert_eq!(post(&mut p, &mut qp, &w), (1, WC_SUCCESS));
    let want: Vec<u8> = (0..n).flat_map(|i| [i as u8 + 1; 8]).collect();
    assert_eq!(p.b.g.read(buf, 8 * n), want);

    // One more than the device's most, though the 1024-byte slot holds
    // 60: refused.
    let mut more = sges.clone();
    more.push(sges[0]);
    p.b.g.write(buf, &[0; 512]);
    let w = wqe_bytes(&header(WR_RDMA_WRITE, 2, buf, rkey), d.max_sge + 1, &more);
    assert_eq!(post(&mut p, &mut qp, &w), (2, WC_LOC_LEN_ERR));
    assert!(
        p.b.g.read(buf, 512).iter().all(|&b| b == 0),
        "nothing written"
    );
}

/// A's QP with an SQ of 2^`log_stride` bytes and an RDMA WRITE naming one
/// SGE more than that holds, a valid SGE planted right past its slot:
/// the WRITE fails with a local length error and nothing reaches B.
fn refuses_more_sges_than_the_stride(log_stride: u8, holds: usize) {
    let (mut p, mut qp) = strided_pair(log_stride);
    let lkey = p.a.lkey.into();
    let one = |at: u64| Sge {
        addr: at.into(),
        length: 64.into(),
        lkey,
    };
    let sges: Vec<Sge> = (0..holds as u64)
        .map(|i| one(p.a.buf + 0x1000 + 64 * i))
        .collect();
    p.a.g.write(p.a.buf, &[0x5a; 0x9000]);
    let (buf, rkey) = (p.b.buf, p.b.rkey);
    let head = header(WR_RDMA_WRITE, 5, buf, rkey);
    let mut bytes = wqe_bytes(&head, holds as u8 + 1, &sges);
    bytes.resize(qp.sq_stride() as usize, 0);
    // The next slot starts with what would be SGE `holds`: a whole page.
    let planted = Sge {
        addr: (p.a.buf + 0x8000).into(),
        length: 4096.into(),
        lkey,
    };
    let next = qp.sq_addr() + qp.sq_stride();
    p.a.g.write(next, planted.as_slice());
    assert_eq!(post(&mut p, &mut qp, &bytes), (5, WC_LOC_LEN_ERR));
    assert!(
        p.b.g.read(buf, 0x9000).iter().all(|&b| b == 0),
        "nothing reached B"
    );
}

#[test]
fn a_send_wqe_naming_more_sges_than_its_stride_holds_fails_with_a_length_error() {
    refuses_more_sges_than_the_stride(RECV_LOG_STRIDE, 4);
    refuses_more_sges_than_the_stride(8, 12);
    refuses_more_sges_than_the_stride(LOG_STRIDE_512, 28);
}

#[test]
fn create_refuses_send_strides_outside_the_range() {
    let mut p = LinkedPair::start(PairOptions::default());
    let (pd, cq) = (p.a.pd, p.a.cq);
    for bad in [1, RECV_LOG_STRIDE - 1, MAX_RECV_LOG_STRIDE + 1, 0xff] {
        let e = p.a.g.create_qp_send_strided(pd, &cq, 3, bad).err();
        assert_eq!(e.map(|e| e.0), Some(EINVAL), "sq_log_stride {bad}");
    }
    for good in [0, RECV_LOG_STRIDE, MAX_RECV_LOG_STRIDE] {
        assert!(p.a.g.create_qp_send_strided(pd, &cq, 3, good).is_ok());
    }
}
