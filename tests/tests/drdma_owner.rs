//! DRDMA ranges owned by a doorbell page (DRDMA_SUBMIT bits 23:18): the
//! kernel submits a range for the user context that opened it (its
//! doorbell page), and the device lets only QPs on that page name the range
//! in a direct SGE. A QP of another page that names it (a hostile context
//! writing its own WQE) completes with a local protection error, sends not
//! one of the range's bytes and leaves the range to its owner. Driven by a
//! simulated guest through vfio-user (no QEMU).

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::{arr_bits, direct_wqe, store_mixed, submit, submit_for, RANGE};
use ibtca_tests::pair::{paged_pair, LinkedPair};
use ibtca_tests::sim_guest::Cq;

const T: Duration = Duration::from_secs(20);
/// How long a refused transfer is given to (wrongly) deliver its bytes.
const QUIET: Duration = Duration::from_millis(300);
const LEN: u32 = 256;

/// Work request `wr_id` of A's QP completes with a local protection error,
/// and B's first page holds no byte of it.
fn expect_refused(p: &mut LinkedPair, cq: &mut Cq, wr_id: u64) {
    let c = p.a.g.poll_cq(cq, T).expect("the foreign WRITE completes");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (wr_id, WC_LOC_PROT_ERR),
        "{}",
        wc_status_name(c.status)
    );
    assert_eq!(p.b.g.read(p.b.buf, RANGE as usize), vec![0; RANGE as usize]);
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN as usize)
        .map(|i| (i as u8).wrapping_mul(7) ^ seed)
        .collect()
}

#[test]
fn a_range_serves_the_page_it_was_submitted_for() {
    let (mut p, mut qp, mut cq) = paged_pair(3);
    let ctrl = submit_for(&mut p.a.g, 2, 3, LEN);
    assert_ne!(ctrl & regs::ARR_BUSY, 0, "submit refused: ctrl {ctrl:#x}");
    let w = direct_wqe(WR_DRDMA_WRITE, 1, 2, LEN, p.b.buf + 512, p.b.rkey);
    p.a.g.post_send(&mut qp, &w);
    let data = pattern(0x5a);
    store_mixed(&mut p.a.g, 2, &data, 9);
    let c =
        p.a.g
            .poll_cq(&mut cq, T)
            .expect("the DRDMA WRITE completes");
    assert_eq!(c.status, WC_SUCCESS, "{}", wc_status_name(c.status));
    assert_eq!(p.b.g.read(p.b.buf + 512, LEN as usize), data);
    assert_eq!(arr_bits(&mut p.a.g, 2) & regs::ARR_BUSY, 0, "range freed");
}

#[test]
fn another_pages_range_is_refused_and_keeps_its_bytes() {
    let (mut p, mut qp, mut cq) = paged_pair(3);
    // Range 1 belongs to the kernel (page 0, the ioctl path's submit);
    // the QP on page 3 names it in its own WQE.
    submit(&mut p.a.g, 1, true, LEN, None);
    let w = direct_wqe(WR_DRDMA_WRITE, 7, 1, LEN, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut qp, &w);
    expect_refused(&mut p, &mut cq, 7);
    // The owner fills its range: nothing of it reaches the foreign QP's
    // peer, and the range stays the owner's (busy, filled, not freed by
    // the foreign work request's retirement).
    store_mixed(&mut p.a.g, 1, &pattern(0xc3), 4);
    assert!(p.a.g.poll_cq(&mut cq, QUIET).is_none());
    assert_eq!(p.b.g.read(p.b.buf, RANGE as usize), vec![0; RANGE as usize]);
    let ctrl = arr_bits(&mut p.a.g, 1);
    assert_ne!(ctrl & regs::ARR_BUSY, 0, "ctrl {ctrl:#x}");
    assert_ne!(ctrl & regs::ARR_BR_VALID, 0, "ctrl {ctrl:#x}");
}

#[test]
fn a_filled_range_of_another_page_sends_nothing() {
    let (mut p, mut qp, mut cq) = paged_pair(3);
    // The kernel's range, every byte stored (BR Valid): ready to send.
    submit(&mut p.a.g, 4, true, LEN, None);
    store_mixed(&mut p.a.g, 4, &pattern(0x3c), 5);
    assert_ne!(arr_bits(&mut p.a.g, 4) & regs::ARR_BR_VALID, 0);
    let w = direct_wqe(WR_DRDMA_WRITE, 9, 4, LEN, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut qp, &w);
    expect_refused(&mut p, &mut cq, 9);
    assert_eq!(p.b.g.read(p.b.buf, RANGE as usize), vec![0; RANGE as usize]);
    let ctrl = arr_bits(&mut p.a.g, 4);
    assert_ne!(
        ctrl & regs::ARR_BUSY,
        0,
        "still the owner's: ctrl {ctrl:#x}"
    );
}
