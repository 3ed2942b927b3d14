//! DRDMA_RELEASE: a range its driver gave up on returns to the free list.
//! A hostile user context that submits its own range and then names another
//! context's range in its work request (ibtcadv-test's hostile step) leaves
//! its own range submitted and never filled; without a release the device
//! keeps it busy until a reset, and every later context finds one range
//! fewer. The kernel writes DRDMA_RELEASE when the last mapping of a
//! context's range goes. Driven by a simulated guest through vfio-user (no
//! QEMU).

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::{arr_bits, direct_wqe, errors, submit, submit_for, RANGE};
use ibtca_tests::pair::{paged_pair, LinkedPair};

const T: Duration = Duration::from_secs(20);
const LEN: u32 = 256;

/// DRDMA_RELEASE of `arr`, then ARR_CTRL.
fn release(p: &mut LinkedPair, arr: u32) -> u32 {
    p.a.g
        .client
        .post_write(0, regs::DRDMA_RELEASE, &arr.to_le_bytes());
    arr_bits(&mut p.a.g, arr)
}

#[test]
fn a_hostile_contexts_own_range_is_free_after_release() {
    let (mut p, mut qp, mut cq) = paged_pair(3);
    // The kernel's range 1; the context on page 3 submits its own range 5
    // and names range 1 in its work request.
    submit(&mut p.a.g, 1, true, LEN, None);
    assert_ne!(submit_for(&mut p.a.g, 5, 3, LEN) & regs::ARR_BUSY, 0);
    let w = direct_wqe(WR_DRDMA_WRITE, 7, 1, LEN, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut qp, &w);
    let c =
        p.a.g
            .poll_cq(&mut cq, T)
            .expect("the foreign WRITE completes");
    assert_eq!(c.status, WC_LOC_PROT_ERR, "{}", wc_status_name(c.status));
    // Its own range is still submitted: nothing but a release frees it.
    let ctrl = arr_bits(&mut p.a.g, 5);
    assert_ne!(ctrl & regs::ARR_BUSY, 0, "ctrl {ctrl:#x}");
    let ctrl = release(&mut p, 5);
    assert_eq!(ctrl & regs::ARR_BUSY, 0, "released: ctrl {ctrl:#x}");
    // Another context takes it; range 1 stays the kernel's.
    let ctrl = submit_for(&mut p.a.g, 5, 4, LEN);
    assert_ne!(ctrl & regs::ARR_BUSY, 0, "resubmitted: ctrl {ctrl:#x}");
    assert_ne!(arr_bits(&mut p.a.g, 1) & regs::ARR_BUSY, 0);
    assert_eq!(p.b.g.read(p.b.buf, RANGE as usize), vec![0; RANGE as usize]);
}

#[test]
fn a_write_held_for_a_released_range_completes_in_error() {
    let (mut p, mut qp, mut cq) = paged_pair(3);
    assert_ne!(submit_for(&mut p.a.g, 2, 3, LEN) & regs::ARR_BUSY, 0);
    let w = direct_wqe(WR_DRDMA_WRITE, 9, 2, LEN, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut qp, &w);
    // Held at the head of the send queue for stores that never come.
    assert_eq!(release(&mut p, 2) & regs::ARR_BUSY, 0);
    let c = p.a.g.poll_cq(&mut cq, T).expect("the held WRITE completes");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (9, WC_LOC_PROT_ERR),
        "{}",
        wc_status_name(c.status)
    );
    assert_eq!(p.b.g.read(p.b.buf, RANGE as usize), vec![0; RANGE as usize]);
}

#[test]
fn releasing_a_free_range_is_refused() {
    let (mut p, _qp, _cq) = paged_pair(3);
    let (before, _) = errors(&mut p.a.g);
    release(&mut p, 6);
    let (after, last) = errors(&mut p.a.g);
    assert_eq!(after, before + 1);
    assert_eq!(last, regs::DRDMA_ERR_UNALLOCATED | (6 << 8));
}
