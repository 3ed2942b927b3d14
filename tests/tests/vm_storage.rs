//! Full stack, storage protocols between two Debian-root guests under
//! OpenSM (docs/storage.md): one `ibtca-fabric up --guests --share DIR
//! --run ... --wait` boots a target guest (n1, OpenSM's too) and an
//! initiator guest (n2) joined by a link, and every check shares that boot:
//!
//! - NFS over RDMA: nfsd on n1 listens on rdma port 20049; n2 mounts with
//!   `-o rdma,port=20049`, reads the file n1 wrote and writes one n1
//!   reads, both checked by hash;
//! - iSER: an LIO iSCSI target with an iSER portal (ib_isert) on n1;
//!   open-iscsi logs in over ib_iser on n2, and its disk passes fio random
//!   and sequential writes read back with crc32c; a range n2 wrote with dd
//!   has the same hash in n1's backing file;
//! - SRP: an LIO target on ib_srpt on n1; srp_daemon on n2 finds it
//!   through the SA and the target's DM agent and ib_srp logs in (ib_srpt
//!   asks 4 responder resources per QP); the disk passes the same fio and
//!   dd checks, and the logout removes it.
//!
//! The guests' commands are scripts/storage-guest.sh's steps (copied into
//! the share); they wait on events (files in the share, disks appearing),
//! never a fixed sleep. The test prints its run time (CI's budget).
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh), root and the package
//! mirror (for the package layer, once): `scripts/test.sh` runs it; plain
//! `cargo test` lists it as ignored.

use ibtca_tests::console::tagged_lines;
use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

/// Debian packages both guests carry (one layer): srp_daemon, nfsd's
/// programs and mount.nfs, open-iscsi. fio is in the chroot. Both nodes
/// have the fabric's default GUIDs: n1's node GUID is ib_srpt's IB CM
/// service ID, and the CM listens on it (docs/storage.md).
const TOPOLOGY: &str = r#"{
  "sm": "n1",
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ],
  "links": [ { "a": "n1", "b": "n2" } ],
  "guest": { "mem": "1024M", "root": "debian",
             "packages": ["srptools", "nfs-kernel-server", "open-iscsi"] }
}"#;

/// The one value of `TAG value` lines in `console` (the last word).
fn value<'a>(console: &'a str, tag: &str, all: &str) -> &'a str {
    let l = tagged_lines(console, tag);
    assert_eq!(l.len(), 1, "one {tag} line: {l:?}\n{all}");
    let v = l[0].trim();
    assert_eq!(v.len(), 64, "{tag} is a sha256: {v:?}\n{all}");
    v
}

/// fio jobs `PREFIX-rand` and `PREFIX-seq` exited 0 and wrote and
/// verified 16 MiB each without a bad block.
fn fio_passed(c: &str, prefix: &str, all: &str) {
    for job in ["rand", "seq"] {
        let tag = format!("FIO-{prefix}-{job}");
        assert_eq!(
            tagged_lines(c, &format!("{tag}-RC")),
            ["0"],
            "fio {tag}:\n{all}"
        );
        let ran = tagged_lines(c, &tag);
        let has = |what: &str| {
            ran.iter()
                .any(|l| l.contains(what) && l.contains("io=16.0MiB"))
        };
        assert!(
            has("READ: bw=") && has("WRITE: bw="),
            "fio {tag} wrote and read back 16 MiB:\n{}\n{all}",
            ran.join("\n")
        );
        assert!(
            !ran.iter().any(|l| l.contains("verify: bad")),
            "fio {tag} found corrupt data:\n{all}"
        );
    }
}

/// A block protocol's disk (tag prefix `p`) on n2: LIO's, both fio jobs
/// verified, and the dd range's hash equal as written, as read back and in
/// n1's backing file; returns that hash.
fn disk_passed<'a>(c1: &str, c2: &'a str, p: &str, all: &str) -> &'a str {
    let disk = tagged_lines(c2, &format!("{p}-DISK")).join("\n");
    assert!(disk.contains("LIO-ORG"), "{p} disk: {disk}\n{all}");
    fio_passed(c2, p, all);
    let written = value(c2, &format!("{p}-SUM-WRITTEN"), all);
    assert_eq!(value(c2, &format!("{p}-SUM-READ"), all), written, "{all}");
    assert_eq!(value(c1, &format!("{p}-SUM-TARGET"), all), written, "{all}");
    written
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn srp_nfs_over_rdma_and_iser_between_two_guests() {
    let stack = VmStack::get();
    let mut boot = GuestBoot::with_topology(&stack, "storage", TOPOLOGY);
    let share = TempDir::new("storage-share");
    std::fs::copy(
        stack.repo().join("scripts/storage-guest.sh"),
        share.0.join("storage-guest.sh"),
    )
    .unwrap();
    let step = |s: &str| format!("bash /share/storage-guest.sh {s}");
    let n1 = [
        "setup 1",
        "srp-target",
        "nfs-server",
        "iser-target",
        "finish srp nfs iser",
        "dmesg",
        "verdict",
    ];
    let n2 = [
        "setup 2",
        "srp-host",
        "nfs-client",
        "iser-host",
        "dmesg",
        "verdict",
    ];
    let (n1, n2) = (n1.map(step), n2.map(step));
    let Booted { out, said, took } = boot.up(
        &[
            "--share",
            &share.0.display().to_string(),
            "--guest-timeout",
            "1500",
        ],
        &[("n1", &n1[..]), ("n2", &n2[..])],
    );
    let (c1, c2) = (boot.console("n1"), boot.console("n2"));
    let all = boot.all(&said, &["n1", "n2"]);
    eprintln!(
        "SRP, NFS over RDMA and iSER, two Debian-root guests: {:.0} s",
        took.as_secs_f64()
    );
    // Each step's status and seconds, for the report of CI's time.
    for (n, c) in [("n1", &c1), ("n2", &c2)] {
        eprintln!("{n}: {}", tagged_lines(c, "STORAGE-STEP").join("; "));
    }
    assert!(out.status.success(), "every step passes:\n{all}");

    // NFS over RDMA: mounted over rdma at port 20049; each side's file
    // arrived whole at the other.
    let mounted = tagged_lines(&c2, "NFS-MOUNTED").join("\n");
    assert!(
        mounted.contains("proto=rdma") && mounted.contains("port=20049"),
        "NFS mount: {mounted}\n{all}"
    );
    assert!(
        tagged_lines(&c1, "NFS-PORTLIST")
            .iter()
            .any(|l| l.trim() == "rdma 20049"),
        "{all}"
    );
    let n1_wrote = value(&c1, "NFS-SUM-N1-WROTE", &all);
    assert_eq!(value(&c2, "NFS-SUM-N2-READ", &all), n1_wrote, "{all}");
    let n2_wrote = value(&c2, "NFS-SUM-N2-WROTE", &all);
    assert_ne!(n1_wrote, n2_wrote, "{all}");
    assert_eq!(value(&c1, "NFS-SUM-N1-READ", &all), n2_wrote, "{all}");

    // iSER: the session is iSER's, the disk LIO's, the data checked.
    let session = tagged_lines(&c2, "ISER-SESSION").join("\n");
    assert!(
        session.starts_with("iser: ") && session.contains("iqn.2026-11.io.ibtca:iser"),
        "iSCSI session: {session}\n{all}"
    );
    let iser = disk_passed(&c1, &c2, "ISER", &all);

    // SRP: srp_daemon found n1's target (its I/O controller is n1's
    // default node GUID), ib_srp logged in, the disk is LIO's, the data
    // checked, and the logout removed the remote port and the disk.
    let found = tagged_lines(&c2, "SRP-FOUND").join("\n");
    let n1_guid = ibtca_device::guid::FABRIC_NODE_BASE + 1;
    assert!(
        found.contains(&format!("ioc_guid={n1_guid:016x}")) && found.contains("id_ext="),
        "srp_daemon's target: {found}\n{all}"
    );
    let srp = disk_passed(&c1, &c2, "SRP", &all);
    assert_ne!(srp, iser, "{all}");
    assert_eq!(
        tagged_lines(&c2, "SRP-LOGOUT"),
        ["rports=0 disks=0"],
        "{all}"
    );
    boot.down();
}
