//! CQ interrupt moderation (command MODIFY_CQ, CAP_CQ_MODERATION): an
//! armed CQ holds its interrupt back until `count` completions or
//! `period_us` after the first, whichever comes first, as the kernel
//! driver's `modify_cq` asks for the ib core's DIM. Driven by simulated
//! guests through vfio-user (no QEMU): A's RDMA WRITEs to B complete in
//! A's CQ, whose vector's eventfd counts the interrupts.

use std::time::Duration;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{remote, send_wqe, CmdFailed, SimGuest};
use ibtca_tests::wait_eventfd;
use vm_memory::ByteValued;

const T: Duration = Duration::from_secs(10);

/// MODIFY_CQ for `cqn`.
fn modify_cq(g: &mut SimGuest, cqn: u32, count: u16, period_us: u32) -> Result<(), CmdFailed> {
    let p = CmdModifyCq {
        cqn: cqn.into(),
        count: count.into(),
        period_us: period_us.into(),
        ..Default::default()
    };
    g.cmd(CMD_MODIFY_CQ, p.as_slice()).map(drop)
}

/// An RDMA WRITE of 8 bytes from A to B with `wr_id`, polled from A's CQ.
fn write_and_poll(p: &mut LinkedPair, wr_id: u64) {
    let at = 8 * wr_id;
    let w = remote(
        send_wqe(WR_RDMA_WRITE, wr_id, p.a.buf + at, 8, p.a.lkey),
        p.b.buf + at,
        p.b.rkey,
    );
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("a completion");
    assert_eq!((c.wr_id.to_native(), c.status), (wr_id, WC_SUCCESS));
}

fn connected_pair() -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions::default());
    let caps = p.a.g.client.read32(0, regs::CAPS);
    assert_ne!(caps & regs::CAP_CQ_MODERATION, 0, "CAPS {caps:#x}");
    p.connect(MTU_4096);
    p
}

/// With a count of 2 and a period no test outlives, the first completion
/// after an arm is held and the second fires: one interrupt for two
/// armed completions (an unmoderated CQ fires at each).
#[test]
fn a_moderated_cq_fires_at_its_count() {
    let mut p = connected_pair();
    modify_cq(&mut p.a.g, p.a.cq.cqn, 2, u32::MAX).expect("MODIFY_CQ");
    p.a.g.arm_cq(&p.a.cq);
    write_and_poll(&mut p, 1);
    // Armed again, as a consumer that found a completion does.
    p.a.g.arm_cq(&p.a.cq);
    write_and_poll(&mut p, 2);
    // The device decided about WRITE 2's interrupt before it wrote this.
    write_and_poll(&mut p, 3);
    assert_eq!(
        wait_eventfd(&p.a.g.cq_irq, T),
        Some(1),
        "one interrupt, at the second completion"
    );
}

/// A CQ that gets fewer completions than its count still interrupts, at
/// the end of the period, once.
#[test]
fn fewer_completions_than_the_count_fire_at_the_period() {
    let mut p = connected_pair();
    modify_cq(&mut p.a.g, p.a.cq.cqn, 16, 2000).expect("MODIFY_CQ");
    p.a.g.arm_cq(&p.a.cq);
    write_and_poll(&mut p, 1);
    assert_eq!(
        wait_eventfd(&p.a.g.cq_irq, T),
        Some(1),
        "the period's end raised the vector"
    );
    // Disarmed by that interrupt: a completion now is quiet, and the
    // next arm waits for a completion of its own.
    write_and_poll(&mut p, 2);
    p.a.g.arm_cq(&p.a.cq);
    write_and_poll(&mut p, 3);
    assert_eq!(wait_eventfd(&p.a.g.cq_irq, T), Some(1), "WRITE 3's alone");
}

#[test]
fn modify_cq_refuses_unknown_cqs_and_reserved_bytes() {
    let mut p = LinkedPair::start(PairOptions::default());
    let cqn = p.a.cq.cqn;
    assert_eq!(
        modify_cq(&mut p.a.g, cqn ^ 0x40_0000, 4, 10),
        Err(CmdFailed(libc::ENOENT as u16))
    );
    let bad = CmdModifyCq {
        cqn: cqn.into(),
        rsvd: [1; 36],
        ..Default::default()
    };
    assert_eq!(
        p.a.g.cmd(CMD_MODIFY_CQ, bad.as_slice()).map(drop),
        Err(CmdFailed(libc::EINVAL as u16))
    );
    // Back to no moderation: count 0.
    assert_eq!(modify_cq(&mut p.a.g, cqn, 0, 0), Ok(()));
}
