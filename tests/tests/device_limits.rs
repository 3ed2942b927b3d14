//! Resource bounds under a hostile guest and client: every kind of object a
//! guest can make is bounded, the one past the bound gets the documented
//! error, the device's own memory stays within a stated bound however many
//! it makes, and a flood of guest-triggered warnings leaves a bounded log.
//! (docs/security.md, "Bounds", lists them.)

use std::fs::File;

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_device::verbs::Limits;
use ibtca_tests::device_process::Device;
use ibtca_tests::sim_guest::{CmdFailed, SimGuest};
use ibtca_tests::{TempDir, CONFIG};
use vm_memory::ByteValued;

/// The device's own memory (RssAnon) may grow by at most this much when a
/// guest makes every object it may: 1024 PDs, CQs and QPs and 4096 keys.
const FLOOD_RSS_BOUND_KIB: u64 = 8 * 1024;

#[test]
fn every_object_kind_is_bounded_with_enomem_and_memory_stays_bounded() {
    let dir = TempDir::new("limits");
    let socket = dir.join("dev.sock");
    let dev = Device::start(&socket);
    let limits = Limits::default();
    let mut g = SimGuest::new(&socket, 64 << 20);
    let before = dev.rss_anon_kib();

    let mut pds = vec![];
    for _ in 0..limits.pds {
        pds.push(g.create_pd());
    }
    assert_eq!(
        g.cmd(CMD_CREATE_PD, &[]),
        Err(CmdFailed(libc::ENOMEM as u16))
    );

    let pd = pds[0];
    let buf = g.alloc(4096, 4096);
    let mut keys = 0;
    while keys < limits.keys {
        let p = CmdRegMr {
            pdn: pd.into(),
            access: 1.into(),
            iova: buf.into(),
            length: 4096.into(),
            gpa: buf.into(),
            ..Default::default()
        };
        // Half regions, half windows: they share the key space.
        let r = if keys % 2 == 0 {
            g.cmd(CMD_REG_MR, p.as_slice())
        } else {
            g.cmd(CMD_ALLOC_MW, &pd.to_le_bytes())
        };
        r.unwrap_or_else(|e| panic!("key {keys}: {e:?}"));
        keys += 1;
    }
    assert_eq!(
        g.cmd(CMD_ALLOC_MW, &pd.to_le_bytes()),
        Err(CmdFailed(libc::ENOMEM as u16))
    );

    let mut cqs = vec![];
    for _ in 0..limits.cqs {
        cqs.push(g.create_cq(1));
    }
    let ring = g.alloc(64, 64);
    let p = CmdCreateCq {
        ring: ring.into(),
        log_entries: 1,
        vector: 1,
        ..Default::default()
    };
    assert_eq!(
        g.cmd(CMD_CREATE_CQ, p.as_slice()),
        Err(CmdFailed(libc::ENOMEM as u16))
    );

    let cq = cqs[0];
    for _ in 0..limits.qps {
        g.create_qp(pd, &cq, &cq, 1);
    }
    let q = g.alloc(4096, 4096);
    let p = CmdCreateQp {
        pdn: pd.into(),
        send_cqn: cq.cqn.into(),
        recv_cqn: cq.cqn.into(),
        log_sizes: [1, 1, 1, 0],
        sq: q.into(),
        rq: (q + 1024).into(),
        quasi: (q + 2048).into(),
        ..Default::default()
    };
    assert_eq!(
        g.cmd(CMD_CREATE_QP, p.as_slice()),
        Err(CmdFailed(libc::ENOMEM as u16))
    );

    let after = dev.rss_anon_kib();
    eprintln!(
        "device RssAnon {before} KiB -> {after} KiB with {} PDs, {} keys, {} CQs, {} QPs",
        limits.pds, limits.keys, limits.cqs, limits.qps
    );
    assert!(
        after.saturating_sub(before) <= FLOOD_RSS_BOUND_KIB,
        "device memory grew by {} KiB (bound {FLOOD_RSS_BOUND_KIB} KiB)",
        after - before
    );
    // Still serving.
    assert_eq!(g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
}

#[test]
fn a_flood_of_guest_triggered_warnings_leaves_a_bounded_log() {
    let dir = TempDir::new("limits");
    let socket = dir.join("dev.sock");
    let log_path = dir.join("dev.log");
    let log = File::create(&log_path).unwrap();
    let _dev = Device::start_logging(&socket, &[], log);
    let mut g = SimGuest::new(&socket, 4 << 20);
    // 5,000 interrupts asked of a vector that does not exist, 5,000 with
    // MSI-X off: each is a guest-triggered warning.
    for _ in 0..5000 {
        g.client.post_write(0, regs::IRQ_TEST, &99u32.to_le_bytes());
    }
    g.client.write(CONFIG, 0x82, &0u16.to_le_bytes()).unwrap();
    for _ in 0..5000 {
        g.client.post_write(0, regs::IRQ_TEST, &1u32.to_le_bytes());
    }
    assert_eq!(g.client.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
    let text = std::fs::read_to_string(&log_path).unwrap();
    let warnings = text.lines().filter(|l| l.contains("IRQ_TEST")).count();
    assert!(
        (2..=40).contains(&warnings),
        "{warnings} IRQ_TEST lines for 10,000 bad requests:\n{text}"
    );
}
