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
//! - SRP: srp_daemon runs as a daemon on n2 and subscribes to traps 64
//!   and 144 with Set(InformInfo) before n1 has a target; the SA lists
//!   both subscriptions (InformInfoRecords). Then an LIO target on
//!   ib_srpt on n1: loading ib_srpt raises trap 144, OpenSM forwards it
//!   to the daemon as a Report, and the daemon, which never rescans, finds
//!   the target through the SA and the target's DM agent and has ib_srp
//!   log in (ib_srpt asks 4 responder resources per QP); the disk passes
//!   the same fio and dd checks, and the logout removes it.
//!
//! The guests' commands are scripts/storage-guest.sh's steps (copied into
//! the share); they wait on events (files in the share, disks appearing),
//! never a fixed sleep. The test prints its run time (CI's budget).
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh), root and the package
//! mirror (for the package layer, once): `scripts/test.sh` runs it; plain
//! `cargo test` lists it as ignored.

use std::collections::HashMap;
use std::net::Ipv6Addr;

use ibtca_device::guid::FABRIC_NODE_BASE;
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
/// verified 4 MiB each without a bad block.
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
            ran.iter().any(|l| {
                l.contains(what) && ["io=4096KiB", "io=4.00MiB"].iter().any(|io| l.contains(io))
            })
        };
        assert!(
            has("READ: bw=") && has("WRITE: bw="),
            "fio {tag} wrote and read back 4 MiB:\n{}\n{all}",
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

/// The records `saquery IIR` printed (`lines`): each record's
/// `Name....value` fields by name.
fn inform_info_records<'a>(lines: &[&'a str]) -> Vec<HashMap<&'a str, &'a str>> {
    let mut records: Vec<HashMap<&str, &str>> = Vec::new();
    for l in lines.iter().map(|l| l.trim()) {
        if l == "InformInfoRecord dump:" {
            records.push(HashMap::new());
        } else if let (Some(r), Some((name, value))) = (records.last_mut(), l.split_once('.')) {
            r.insert(name, value.trim_start_matches('.'));
        }
    }
    records
}

/// InformInfo from a guest: the SA holds n2's srp_daemon's two
/// subscriptions, the daemon's one scan (before n1 loaded ib_srpt) found
/// nothing, and after n1 loaded it the daemon, with no scan of its own,
/// took the Report of trap 144 for n1's LID (`n1_lid`) and wrote n1's
/// target (`n1_guid`) to ib_srp's add_target, which logged in.
fn subscribed_and_reported(c2: &str, n1_lid: &str, n1_guid: u64, all: &str) {
    // The subscriber: n2's port, whose GUID is the fabric's default.
    let sysfs = tagged_lines(c2, "SRP-SUBSCRIBER");
    assert_eq!(sysfs.len(), 1, "n2's port GID: {sysfs:?}\n{all}");
    let gid: Ipv6Addr = sysfs[0].trim().parse().expect("n2's port GID");
    let n2_port_guid = FABRIC_NODE_BASE + 2;
    assert_eq!(
        gid,
        Ipv6Addr::from(0xfe80_u128 << 112 | u128::from(n2_port_guid)),
        "{all}"
    );
    let gid = gid.to_string(); // as saquery prints it (inet_ntop)
    let iir = tagged_lines(c2, "SRP-IIR");
    let records = inform_info_records(&iir);
    // srp_daemon's Set(InformInfo): trap 64 (GID in service, type subnet
    // management, from a class manager) and trap 144 (local changes,
    // informational, from a CA), any issuer.
    for (trap, kind, producer) in [("64", "0x3", "0x000004"), ("144", "0x4", "0x000001")] {
        let want = [
            ("SubscriberGID", gid.as_str()),
            ("is_generic", "0x1"),
            ("subscribe", "0x1"),
            ("lid_range_begin", "65535"),
            ("trap_num", trap),
            ("trap_type", kind),
            ("node_type", producer),
        ];
        assert!(
            records
                .iter()
                .any(|r| want.iter().all(|(k, v)| r.get(k) == Some(v))),
            "the SA's InformInfoRecords hold n2's subscription to trap {trap}: \
             {want:?}\n{}\n{all}",
            iir.join("\n")
        );
    }

    // The daemon's log up to the moment n1 could load ib_srpt, and after.
    let before = tagged_lines(c2, "SRP-DAEMON-BEFORE");
    let after = tagged_lines(c2, "SRP-DAEMON-AFTER");
    let log = format!(
        "before:\n{}\nafter:\n{}",
        before.join("\n"),
        after.join("\n")
    );
    let has = |lines: &[&str], what: &str| lines.iter().any(|l| l.contains(what));
    for trap in [64, 144] {
        let sent = format!("Registering to trap:{trap} (sm in {n1_lid})");
        assert!(has(&before, &sent), "{sent}:\n{log}\n{all}");
    }
    assert!(
        has(&before, "Query did not find any targets") && !has(&before, "Adding target"),
        "the daemon's scan found no target before n1 loaded ib_srpt:\n{log}\n{all}"
    );
    let report = format!("enter handle_port for lid {n1_lid}");
    let report = after.iter().position(|l| l.trim() == report);
    let added = after
        .iter()
        .position(|l| l.starts_with("Adding target returned"));
    let (Some(report), Some(added)) = (report, added) else {
        panic!("a Report for n1's LID {n1_lid}, then add_target:\n{log}\n{all}");
    };
    // No scan between that and the login: neither a rescan nor the end of
    // one begun before. After the login the daemon goes on with the
    // Reports it still holds (OpenSM forwards the trap more than once);
    // the SIGTERM that ends it can interrupt one of their SA queries
    // (umad_recv fails with EINTR), and srp_daemon answers any failed
    // query with a full rescan, so a scan after the login says nothing
    // about how it found the target.
    for scan in [
        "Starting a recalculation",
        "performing a",
        "Query did not find",
    ] {
        assert!(
            !has(&after[..added], scan),
            "no scan ({scan}) after n1 loaded ib_srpt and before the login:\n{log}\n{all}"
        );
    }
    assert!(report < added, "the Report came first:\n{log}\n{all}");
    assert!(
        has(&after[report..added], &format!("ioc_guid={n1_guid:016x}")),
        "the Report's target is n1's:\n{log}\n{all}"
    );
    let wrote: i64 = after[added]["Adding target returned".len()..]
        .trim()
        .parse()
        .unwrap_or(-1);
    assert!(
        wrote > 0,
        "ib_srp took the target (add_target's write):\n{log}\n{all}"
    );
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
    // default node GUID), the daemon had ib_srp log in on the Report of
    // n1's trap, the disk is LIO's, the data checked, and the logout
    // removed the remote port and the disk.
    let found = tagged_lines(&c2, "SRP-FOUND").join("\n");
    let n1_guid = FABRIC_NODE_BASE + 1;
    assert!(
        found.contains(&format!("ioc_guid={n1_guid:016x}")) && found.contains("id_ext="),
        "srp_daemon's target: {found}\n{all}"
    );
    let port = tagged_lines(&c1, "STORAGE-PORT").join("\n");
    let n1_lid = port.split_whitespace().last().unwrap_or_default();
    assert!(
        port.starts_with("n1 ") && n1_lid.starts_with("0x"),
        "n1's LID: {port}\n{all}"
    );
    subscribed_and_reported(&c2, n1_lid, n1_guid, &all);
    let srp = disk_passed(&c1, &c2, "SRP", &all);
    assert_ne!(srp, iser, "{all}");
    assert_eq!(
        tagged_lines(&c2, "SRP-LOGOUT"),
        ["rports=0 disks=0"],
        "{all}"
    );
    boot.down();
}

/// n2's console on the path the VM test expects, in the formats of
/// rdma-core 56's `saquery IIR` and `srp_daemon -e -c -v -V` (config
/// report left out), behind the script's tags.
const N2_REPORTED: &str = "\
SRP-SUBSCRIBER fe80:0000:0000:0000:1200:0000:0001:0002
SRP-IIR InformInfoRecord dump:
SRP-IIR \t\tRID
SRP-IIR \t\tSubscriberGID...........fe80::1200:0:1:2
SRP-IIR \t\tSubscriberEnum..........0x0
SRP-IIR \t\tInformInfo dump:
SRP-IIR \t\tgid.....................::
SRP-IIR \t\tlid_range_begin.........65535
SRP-IIR \t\tlid_range_end...........0
SRP-IIR \t\tis_generic..............0x1
SRP-IIR \t\tsubscribe...............0x1
SRP-IIR \t\ttrap_type...............0x3
SRP-IIR \t\ttrap_num................64
SRP-IIR \t\tqpn.....................<not displayed>
SRP-IIR \t\tresp_time_val...........0x0
SRP-IIR \t\tnode_type...............0x000004
SRP-IIR InformInfoRecord dump:
SRP-IIR \t\tRID
SRP-IIR \t\tSubscriberGID...........fe80::1200:0:1:2
SRP-IIR \t\tSubscriberEnum..........0x0
SRP-IIR \t\tInformInfo dump:
SRP-IIR \t\tgid.....................::
SRP-IIR \t\tlid_range_begin.........65535
SRP-IIR \t\tlid_range_end...........0
SRP-IIR \t\tis_generic..............0x1
SRP-IIR \t\tsubscribe...............0x1
SRP-IIR \t\ttrap_type...............0x4
SRP-IIR \t\ttrap_num................144
SRP-IIR \t\tqpn.....................<not displayed>
SRP-IIR \t\tresp_time_val...........0x0
SRP-IIR \t\tnode_type...............0x000001
SRP-DAEMON-EXIT 0
SRP-DAEMON-BEFORE Starting a recalculation
SRP-DAEMON-BEFORE Registering to trap:64 (sm in 0x1)
SRP-DAEMON-BEFORE get_trap_notices: Got CQE wc.wr_id=0
SRP-DAEMON-BEFORE Registering to trap:144 (sm in 0x1)
SRP-DAEMON-BEFORE get_trap_notices: Got CQE wc.wr_id=1
SRP-DAEMON-BEFORE Advanced SM, performing a capability query
SRP-DAEMON-BEFORE Query did not find any targets
SRP-DAEMON-AFTER get_trap_notices: Got CQE wc.wr_id=2
SRP-DAEMON-AFTER discover Targets for P_key ffff (index 0)
SRP-DAEMON-AFTER enter handle_port for lid 0x1
SRP-DAEMON-AFTER enter do_port
SRP-DAEMON-AFTER Found an SRP target with id_ext 1200000000010001 - check if it is already connected
SRP-DAEMON-AFTER id_ext=1200000000010001,ioc_guid=1200000000010001,dgid=fe800000000000001200000000010001,pkey=ffff,service_id=1200000000010001
SRP-DAEMON-AFTER Adding target returned 137
SRP-DAEMON-AFTER Deregistering from trap:64 (sm in 0x1)
";

/// The VM test's InformInfo checks accept [`N2_REPORTED`] and refuse it
/// with any one piece of evidence missing or contradicted.
#[test]
fn the_inform_info_checks_need_the_subscriptions_and_a_login_by_the_report() {
    let n1_guid = FABRIC_NODE_BASE + 1;
    subscribed_and_reported(N2_REPORTED, "0x1", n1_guid, "");
    // The daemon's SIGTERM interrupted an SA query of a Report it still
    // held after the login, and it rescanned (a soak run's log).
    let rescanned_after = N2_REPORTED.replacen(
        "SRP-DAEMON-AFTER Adding target returned 137\n",
        "SRP-DAEMON-AFTER Adding target returned 137\n\
         SRP-DAEMON-AFTER Starting a recalculation\n\
         SRP-DAEMON-AFTER umad_recv returned different transaction id sent 9 got 8\n\
         SRP-DAEMON-AFTER Advanced SM, performing a capability query\n\
         SRP-DAEMON-AFTER This target is already connected - skip\n",
        1,
    );
    assert_ne!(rescanned_after, N2_REPORTED);
    subscribed_and_reported(&rescanned_after, "0x1", n1_guid, "");
    let broken = [
        ("trap_num................144", "trap_num................145"),
        (
            "trap_type...............0x4",
            "trap_type...............0xFFFF",
        ),
        ("fe80::1200:0:1:2", "fe80::1200:0:1:3"),
        (
            "BEFORE Registering to trap:144",
            "BEFORE Deregistering from trap:144",
        ),
        ("BEFORE Query did not find", "BEFORE Query found"),
        ("AFTER discover", "AFTER Starting a recalculation"),
        (
            "AFTER enter handle_port for lid 0x1",
            "AFTER enter handle_port for lid 0x2",
        ),
        ("ioc_guid=1200000000010001", "ioc_guid=1200000000010003"),
        ("returned 137", "returned -1"),
    ];
    let consoles: Vec<_> = broken
        .iter()
        .map(|(from, to)| {
            let c = N2_REPORTED.replacen(from, to, 1);
            assert_ne!(c, N2_REPORTED, "{from} is in the console");
            (from, c)
        })
        .collect();
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let accepted: Vec<_> = consoles
        .iter()
        .filter(|(_, c)| {
            std::panic::catch_unwind(|| subscribed_and_reported(c, "0x1", n1_guid, "")).is_ok()
        })
        .map(|(from, _)| from)
        .collect();
    std::panic::set_hook(quiet);
    assert!(accepted.is_empty(), "accepted: {accepted:?}");
}
