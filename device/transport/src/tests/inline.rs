//! Inline data (IBTCA_WQE_F_INLINE): the payload travels in the send WQE
//! itself, so it lands byte for byte with no local key at all, and a WQE
//! that claims more than the SGE area holds, or an operation that carries
//! no payload, fails with its exact status and sends nothing.

use vm_memory::ByteValued;

use super::*;

/// A signaled inline WQE with `data` in place of its SGEs.
fn inline(opcode: u8, wr_id: u64, data: &[u8]) -> SendWqe {
    let mut w = wqe(opcode, wr_id, &[]);
    w.flags |= WQE_F_INLINE;
    w.inline_len = data.len() as u8;
    let at = std::mem::offset_of!(SendWqe, sge);
    w.as_mut_slice()[at..at + data.len()].copy_from_slice(data);
    w
}

#[test]
fn inline_send_lands_byte_exact_without_a_key() {
    for len in [1usize, 17, MAX_INLINE] {
        let mut w = Wire::with_mtu(256);
        // The sender's region holds something else: nothing is read from it.
        w.a.env.bytes_mut(SRC)[..MAX_INLINE].fill(0xee);
        let data = pattern(len, len as u8);
        w.b.env.post_recv(5, &[sge(DST, DST_VA + 3, 4096)]);
        w.post_a(inline(WR_SEND_IMM, 9, &data));
        w.run();
        let got = &w.b.env.bytes(DST)[3..3 + len];
        assert_eq!(got, &data[..], "len {len}");
        assert_eq!(w.b.env.bytes(DST)[3 + len], 0, "len {len}: no byte past it");
        assert_eq!(summary(&w.b.env.recv_cq), [(5, WC_RECV, WC_SUCCESS)]);
        assert_eq!(w.b.env.recv_cq[0].byte_len.to_native(), len as u32);
        assert_eq!(summary(&w.a.env.send_cq), [(9, WC_SEND, WC_SUCCESS)]);
        assert_eq!(w.a.env.send_cq[0].byte_len.to_native(), len as u32);
        let sent = w.packets(Dir::AtoB);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].payload, data);
    }
}

#[test]
fn inline_rdma_write_lands_byte_exact() {
    let mut w = Wire::with_mtu(256);
    let data = pattern(MAX_INLINE, 3);
    let mut wr = inline(WR_RDMA_WRITE, 4, &data);
    wr.remote_addr = (DST_VA + 100).into();
    wr.rkey = DST.into();
    w.post_a(wr);
    w.run();
    assert_eq!(&w.b.env.bytes(DST)[100..100 + MAX_INLINE], &data[..]);
    assert!(w.b.env.bytes(DST)[..100].iter().all(|&b| b == 0));
    assert_eq!(w.b.env.bytes(DST)[100 + MAX_INLINE], 0);
    assert_eq!(summary(&w.a.env.send_cq), [(4, WC_RDMA_WRITE, WC_SUCCESS)]);
    assert!(w.b.env.recv_cq.is_empty());
}

#[test]
fn inline_past_the_limit_fails_with_loc_len_err_and_sends_nothing() {
    let mut w = Wire::with_mtu(256);
    w.b.env.post_recv(5, &[sge(DST, DST_VA, 4096)]);
    let mut wr = inline(WR_SEND, 1, &pattern(MAX_INLINE, 1));
    wr.inline_len = MAX_INLINE as u8 + 1;
    w.post_a(wr);
    w.run();
    assert_eq!(summary(&w.a.env.send_cq), [(1, WC_SEND, WC_LOC_LEN_ERR)]);
    assert!(w.packets(Dir::AtoB).is_empty());
    assert!(w.b.env.recv_cq.is_empty());
    assert!(w.b.env.bytes(DST).iter().all(|&b| b == 0));
}

#[test]
fn inline_read_or_stray_inline_length_is_a_local_qp_operation_error() {
    let mut w = Wire::with_mtu(256);
    let mut read = inline(WR_RDMA_READ, 1, &[1, 2, 3]);
    read.remote_addr = DST_VA.into();
    read.rkey = DST.into();
    w.post_a(read);
    w.run();
    assert_eq!(
        summary(&w.a.env.send_cq),
        [(1, WC_RDMA_READ, WC_LOC_QP_OP_ERR)]
    );
    assert!(w.packets(Dir::AtoB).is_empty());

    let mut w = Wire::with_mtu(256);
    let mut stray = send(2, 8);
    stray.inline_len = 8;
    w.post_a(stray);
    w.run();
    assert_eq!(summary(&w.a.env.send_cq), [(2, WC_SEND, WC_LOC_QP_OP_ERR)]);
}
