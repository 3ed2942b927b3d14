//! The doorbell BAR (`regs::DB_BAR`): pages of SQ, RQ and CQ doorbells, a
//! QP or CQ bound to one page at creation. A doorbell rung on another page
//! is dropped, both ways: a user context's page cannot ring the kernel's
//! queues (page 0, BAR0) nor another context's, and the kernel's page
//! cannot ring a user context's. Driven by simulated guests through
//! vfio-user (no QEMU).

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{paged_pair, LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{remote, send_wqe, CmdFailed, Cq, DbRoute, SimGuest};
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(10);
/// How long a dropped doorbell is given to (wrongly) take effect.
const QUIET: Duration = Duration::from_millis(300);

fn expect(g: &mut SimGuest, cq: &mut Cq, wr_id: u64) {
    let c = g.poll_cq(cq, T).expect("a completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status),
        (wr_id, WC_SUCCESS),
        "{}",
        wc_status_name(c.status)
    );
}

/// An 8-byte RDMA WRITE of `byte`s from A's buffer to B's at `at`.
fn write_wqe(p: &mut LinkedPair, wr_id: u64, at: u64, byte: u8) -> SendWqe {
    p.a.g.write(p.a.buf + at, &[byte; 8]);
    remote(
        send_wqe(WR_RDMA_WRITE, wr_id, p.a.buf + at, 8, p.a.lkey),
        p.b.buf + at,
        p.b.rkey,
    )
}

#[test]
fn a_user_page_rings_its_own_queues_only() {
    let (mut p, mut qp, mut cq) = paged_pair(3);
    // Rung on another context's page, and on the kernel's (page 0 and
    // BAR0): dropped, nothing is sent.
    for (wr_id, wrong) in [
        (1, DbRoute::Page(5)),
        (2, DbRoute::Page(0)),
        (3, DbRoute::Bar0),
    ] {
        let w = write_wqe(&mut p, wr_id, 8 * wr_id, wr_id as u8);
        qp.db = wrong;
        p.a.g.post_send(&mut qp, &w);
        assert!(p.a.g.poll_cq(&mut cq, QUIET).is_none(), "{wrong:?}");
        assert_eq!(p.b.g.read(p.b.buf + 8 * wr_id, 8), [0; 8], "{wrong:?}");
    }
    // Its own page: the doorbell's producer index covers all four.
    qp.db = DbRoute::Page(3);
    let w = write_wqe(&mut p, 4, 32, 4);
    p.a.g.post_send(&mut qp, &w);
    for wr_id in 1..=4 {
        expect(&mut p.a.g, &mut cq, wr_id);
        assert_eq!(p.b.g.read(p.b.buf + 8 * wr_id, 8), [wr_id as u8; 8]);
    }

    // The CQ: an arm from the wrong page is dropped (no interrupt for the
    // next completion), one from its page fires for it.
    while p.a.g.wait_cq_irq(Duration::ZERO) {}
    cq.db = DbRoute::Bar0;
    p.a.g.arm_cq(&cq);
    cq.db = DbRoute::Page(3);
    let w = write_wqe(&mut p, 5, 40, 5);
    p.a.g.post_send(&mut qp, &w);
    // Wait for the CQE without consuming it (so the next arm fires at once).
    let deadline = std::time::Instant::now() + T;
    while !p.a.g.cqe_ready(&cq) {
        assert!(std::time::Instant::now() < deadline, "no completion");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!p.a.g.wait_cq_irq(QUIET), "the foreign arm took effect");
    p.a.g.arm_cq(&cq);
    assert!(p.a.g.wait_cq_irq(T), "the arm from the CQ's page fired");
    expect(&mut p.a.g, &mut cq, 5);
}

#[test]
fn a_user_page_cannot_ring_the_kernels_queues() {
    let mut p = LinkedPair::start(PairOptions::default());
    p.connect(MTU_4096);
    // A's own QP is the kernel's: bound to page 0.
    let mut qp = p.a.qp;
    let w = write_wqe(&mut p, 1, 0, 0xa1);
    qp.db = DbRoute::Page(1);
    p.a.g.post_send(&mut qp, &w);
    assert!(p.a.g.poll_cq(&mut p.a.cq, QUIET).is_none());
    assert_eq!(p.b.g.read(p.b.buf, 8), [0; 8]);
    // Page 0 of the doorbell BAR is the kernel's too, as is BAR0.
    qp.db = DbRoute::Page(0);
    let w = write_wqe(&mut p, 2, 8, 0xa2);
    p.a.g.post_send(&mut qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 1);
    expect(&mut p.a.g, &mut p.a.cq, 2);
    qp.db = DbRoute::Bar0;
    let w = write_wqe(&mut p, 3, 16, 0xa3);
    p.a.g.post_send(&mut qp, &w);
    expect(&mut p.a.g, &mut p.a.cq, 3);
    assert_eq!(
        p.b.g.read(p.b.buf, 24),
        [[0xa1; 8], [0xa2; 8], [0xa3; 8]].concat()
    );
}

#[test]
fn doorbell_pages_are_bounded_and_bad_writes_refused() {
    let mut p = LinkedPair::start(PairOptions::default());
    let g = &mut p.a.g;
    let mut sel = [0u8; 48];
    sel[0] = DEVICE_ATTR_EXT;
    let e = g.cmd_entry(CMD_QUERY_DEVICE, &sel).unwrap();
    let mut ext = DeviceAttrExt::default();
    ext.as_mut_slice().copy_from_slice(&e.params);
    assert_eq!(ext.db_pages.to_native(), regs::DB_PAGES);
    assert_eq!(u32::from(ext.db_bar), regs::DB_BAR);
    assert_ne!(g.client.read32(0, regs::CAPS) & regs::CAP_DB_PAGES, 0);

    // The last page is fine, one past it is refused.
    let last = DbRoute::Page(regs::DB_PAGES - 1);
    let cq = g.create_cq_on(2, last);
    g.create_qp_on(p.a.pd, &cq, &cq, 2, last);
    let ring = g.alloc(4096, 4096);
    let c = CmdCreateCq {
        ring: ring.into(),
        log_entries: 2,
        vector: 1,
        db_page: regs::DB_PAGES.into(),
        ..Default::default()
    };
    let einval = Err(CmdFailed(libc::EINVAL as u16));
    assert_eq!(g.cmd(CMD_CREATE_CQ, c.as_slice()), einval);
    let q = g.alloc(3 * 4096, 4096);
    let c = CmdCreateQp {
        pdn: p.a.pd.into(),
        send_cqn: cq.cqn.into(),
        recv_cqn: cq.cqn.into(),
        log_sizes: [2, 2, 2, 0],
        sq: q.into(),
        rq: (q + 4096).into(),
        quasi: (q + 8192).into(),
        db_page: (regs::DB_PAGES as u16).into(),
        ..Default::default()
    };
    assert_eq!(g.cmd(CMD_CREATE_QP, c.as_slice()), einval);

    // Writes that are no doorbell: refused with EINVAL, the device serves on.
    let size = u64::from(regs::DB_PAGES) * regs::DB_PAGE_SIZE;
    let bad: [(u64, &[u8]); 5] = [
        (0, &[0; 4]),
        (regs::DB_PAGE_SQ + 4, &[0; 8]),
        (regs::DB_PAGE_SRQ + 8, &[0; 8]),
        (regs::DB_PAGE_SIZE + 0x800, &[0; 8]),
        (size, &[0; 8]),
    ];
    for (at, data) in bad {
        assert_eq!(
            g.client.write(regs::DB_BAR, at, data),
            Err(libc::EINVAL),
            "{} bytes at {at:#x}",
            data.len()
        );
    }
    assert_eq!(
        g.client.read(regs::DB_BAR, 0x10, 8),
        Ok(vec![0; 8]),
        "write-only"
    );
    assert_eq!(g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}
