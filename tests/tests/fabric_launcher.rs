//! `ibtca-fabric` end to end, without VMs: a bad topology starts nothing;
//! `up` brings a shipped topology's switch and devices up as processes,
//! simulated guests do RDMA across the switch, tshark decodes the switch
//! port's capture, and `down` stops every process.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_fabric::launch;
use ibtca_fabric::state::State;
use ibtca_tests::capture::{self, tshark};
use ibtca_tests::launcher::{
    alive, config, fabric, text, up, up_json, up_refused, Down, StandInStack,
};
use ibtca_tests::pair::{connected_pair, PairOptions, Side, ALL_ACCESS};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe};
use ibtca_tests::{workspace_bin, TempDir};

const T: Duration = Duration::from_secs(20);

#[test]
fn a_bad_topology_starts_nothing() {
    let dir = TempDir::new("fab-bad");
    let json = r#"{"nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 1}]}"#;
    let err = up_refused(&dir, json);
    assert!(err.contains("LID 1 is given to both `a` and `b`"), "{err}");
    let out = fabric(&["check", &dir.join("bad.json").display().to_string()]);
    assert!(!out.status.success());
}

fn num(s: &str) -> u64 {
    capture::num(s).unwrap_or_else(|| panic!("not a number: `{s}`"))
}

#[test]
fn up_rdma_across_the_switch_capture_and_down() {
    let dir = TempDir::new("fab-up");
    let fab = up(&config("four-nodes-one-switch.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let state = State::load(run).unwrap().expect("a state file");
    assert_eq!(state.processes.len(), 5, "one switch, four devices");
    assert!(state.processes.iter().all(|p| alive(p.pid)));
    let again = fabric(&[
        "up",
        &config("four-nodes-one-switch.json"),
        "--run-dir",
        &run_s,
    ]);
    assert!(!again.status.success(), "a second `up` is refused");
    // Devices serving (TCG) guests get the launcher's ACK timeout floor.
    let n1_log = std::fs::read_to_string(run.join("n1.log")).unwrap();
    assert!(
        n1_log.contains("local ACK timeout floor min_ack_timeout_ms=250"),
        "{n1_log}"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a running fabric"));

    let script = std::fs::read_to_string(run.join("n1.qemu.sh")).unwrap();
    assert!(
        script.contains(&format!(
            r#"{{"driver":"vfio-user-pci","id":"tca0","socket":{{"type":"unix","path":"{}"}}}}"#,
            run.join("n1.sock").display()
        )),
        "{script}"
    );
    assert!(script.contains("memory-backend-memfd,id=mem,size=1G,share=on"));

    // n1 (LID 1) and n3 (LID 3): an RDMA WRITE and a SEND across sw0.
    let mut o = PairOptions::sized(1 << 20, 6, 4);
    o.retry = Retry::PROMPT; // its WRITE to n3 with n3's link down fails
    let (mut a, mut b) = connected_pair(
        [&run.join("n1.sock"), &run.join("n3.sock")],
        [1, 3],
        MTU_4096,
        &o,
    );
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, a.buf, 3000, a.lkey),
        b.buf + 64,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("write completion");
    assert_eq!((c.wr_id.to_native(), c.status), (1, WC_SUCCESS));
    assert_eq!(b.g.read(b.buf + 64, 3000), data);
    b.g.post_recv(&mut b.qp, &recv_wqe(5, b.buf + 8192, 4096, b.lkey));
    // A non-posted read orders the receive doorbell before the SEND (else
    // n3 may answer with an RNR NAK, which the ACK checks below exclude).
    b.g.client.read32(0, ibtca_device::regs::MAGIC);
    a.g.post_send(&mut a.qp, &send_wqe(WR_SEND, 2, a.buf, 100, a.lkey));
    assert_eq!(a.g.poll_cq(&mut a.cq, T).expect("send").status, WC_SUCCESS);
    assert_eq!(b.g.poll_cq(&mut b.cq, T).expect("recv").status, WC_SUCCESS);
    assert_eq!(b.g.read(b.buf + 8192, 100), data[..100]);

    // The capture of sw0 port 1 (n1's link), decoded by tshark.
    let rows = tshark(&run.join("sw0-p1.pcap"));
    let write = rows
        .iter()
        .find(|r| num(&r[0]) == 0x0a)
        .unwrap_or_else(|| panic!("an RDMA WRITE Only in {rows:?}"));
    assert_eq!(num(&write[1]), 100, "first PSN");
    assert_eq!(num(&write[2]), u64::from(b.qp.qpn), "destination QP");
    assert_eq!(num(&write[3]), u64::from(b.rkey), "R_Key");
    assert_eq!(num(&write[5]), 3, "DLID");
    let send = rows
        .iter()
        .find(|r| num(&r[0]) == 0x04)
        .unwrap_or_else(|| panic!("a SEND Only in {rows:?}"));
    assert_eq!(num(&send[1]), 101);
    let acks: Vec<_> = rows.iter().filter(|r| num(&r[0]) == 0x11).collect();
    assert!(!acks.is_empty(), "ACKs from n3: {rows:?}");
    for ack in &acks {
        assert_eq!(num(&ack[2]), u64::from(a.qp.qpn));
        assert_eq!(num(&ack[4]), 0x1f, "ACK syndrome (credits unlimited)");
        assert_eq!(num(&ack[5]), 1);
    }

    // At run time: counters from the CLI, then n3's link down and up again.
    let out = fabric(&["stats", "--run-dir", &run_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("switch sw0"),
        "{text}"
    );
    let port = |n: u8| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("port {n:>2} ")))
            .unwrap_or_else(|| panic!("port {n} in {text}"))
            .to_owned()
    };
    assert!(port(1).contains(" up "), "{}", port(1));
    assert!(port(2).contains(" up "), "{}", port(2));
    let out = fabric(&["link", "--run-dir", &run_s, "n3", "down"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w = remote(send_wqe(WR_RDMA_WRITE, 3, a.buf, 64, a.lkey), b.buf, b.rkey);
    a.g.post_send(&mut a.qp, &w);
    let c =
        a.g.poll_cq(&mut a.cq, Duration::from_secs(60))
            .expect("an error completion");
    assert_eq!((c.wr_id.to_native(), c.status), (3, WC_RETRY_EXC_ERR));
    let out = fabric(&["link", "--run-dir", &run_s, "n3", "up"]);
    assert!(out.status.success());
    let deadline = std::time::Instant::now() + T;
    while b.g.client.read32(0, ibtca_device::regs::PORT_STATE) != ibtca_device::regs::PORT_ACTIVE {
        assert!(std::time::Instant::now() < deadline, "n3 never reconnected");
        std::thread::sleep(Duration::from_millis(20));
    }
    let bad = fabric(&["link", "--run-dir", &run_s, "n3", "explode"]);
    assert!(!bad.status.success());
    drop(a);
    drop(b);

    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("stopped"));
    for p in &state.processes {
        assert!(!alive(p.pid), "{} ({}) still runs", p.name, p.pid);
    }
    assert!(State::load(run).unwrap().is_none(), "state file removed");
    let log = std::fs::read_to_string(run.join("sw0.log")).unwrap();
    assert!(log.contains("port counters"), "counters logged at exit");
}

#[test]
fn two_switches_in_a_line_as_processes_with_faults_between_them() {
    let dir = TempDir::new("fab-line");
    let fab = up(&config("two-switches-line.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let text = &fab.stdout;
    assert!(text.contains("LFT 1→1 2→2 3→3 4→3"), "{text}");
    // n1 (LID 1, on `left`) and n4 (LID 4, on `right`): every packet
    // crosses the 1 %-faulty inter-switch link.
    let mut o = PairOptions::sized(1 << 20, 8, 6);
    o.retry = Retry::PROMPT; // the faulty link's losses resent soon
    let mtu_512 = 2;
    let (mut a, b) = connected_pair(
        [&run.join("n1.sock"), &run.join("n4.sock")],
        [1, 4],
        mtu_512,
        &o,
    );
    for i in 0..40u64 {
        let data: Vec<u8> = (0..3000u32).map(|j| (j as u64 * 13 + i) as u8).collect();
        let off = i * 4096;
        a.g.write(a.buf + off, &data);
        let w = remote(
            send_wqe(WR_RDMA_WRITE, i, a.buf + off, 3000, a.lkey),
            b.buf + off,
            b.rkey,
        );
        a.g.post_send(&mut a.qp, &w);
        let c = a.g.poll_cq(&mut a.cq, T).expect("write completion");
        assert_eq!((c.wr_id.to_native(), c.status), (i, WC_SUCCESS));
        assert!(
            b.g.read(b.buf + off, 3000) == data,
            "write {i} landed intact"
        );
    }
    let out = fabric(&["stats", "--run-dir", &run_s]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("switch left") && text.contains("switch right"),
        "{text}"
    );
}

#[test]
fn a_captured_link_between_two_devices_gets_a_relay_switch() {
    let dir = TempDir::new("fab-relay");
    let fab = up_json(
        r#"{"nodes": [{"name": "a", "lid": 1, "link_ring_kib": 0}, {"name": "b", "lid": 2}],
            "links": [{"a": "a", "b": "b", "capture": "ab.pcap"}]}"#,
        &dir,
    );
    let run = &fab.run;
    let run_s = run.display().to_string();
    assert!(fab.stdout.contains("switch relay-l0"), "{}", fab.stdout);
    let o = PairOptions::sized(1 << 16, 4, 4);
    let (mut a, b) = connected_pair(
        [&run.join("a.sock"), &run.join("b.sock")],
        [1, 2],
        MTU_4096,
        &o,
    );
    a.g.write(a.buf, &[0x5a; 256]);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 7, a.buf, 256, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    assert_eq!(a.g.poll_cq(&mut a.cq, T).expect("write").status, WC_SUCCESS);
    assert_eq!(b.g.read(b.buf, 256), vec![0x5a; 256]);
    let rows = tshark(&run.join("ab.pcap"));
    let write = rows
        .iter()
        .find(|r| num(&r[0]) == 0x0a)
        .unwrap_or_else(|| panic!("the WRITE in {rows:?}"));
    assert_eq!(num(&write[2]), u64::from(b.qp.qpn));
    assert_eq!(num(&write[3]), u64::from(b.rkey));
    // The file kept A's frames on its socket (`link_ring_kib: 0`); B and
    // the relay took rings both ways. Each device logs its counters when
    // it stops.
    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success());
    for (node, rings) in [
        ("a", "tx_rings: 0, rx_rings: 0"),
        ("b", "tx_rings: 1, rx_rings: 1"),
    ] {
        let log = std::fs::read_to_string(run.join(format!("{node}.log"))).unwrap_or_default();
        assert!(log.contains(rings), "{node}: {log}");
    }
}

/// `up --guests` checks the VM stack, the guests' files and the run
/// directory before anything starts, with errors that say what to do.
#[test]
fn guests_need_the_vm_stack_and_a_run_dir_inside_its_chroot() {
    let dir = TempDir::new("fab-guests");
    let up = |cache: &Path, guest_dir: &Path, run: &Path, extra: &[&str]| {
        let out = Command::new(workspace_bin("ibtca-fabric"))
            .args(["up", &config("two-nodes.json"), "--run-dir"])
            .arg(run)
            .arg("--guests")
            .args(extra)
            .env("IBTCA_CACHE", cache)
            .env("IBTCA_GUEST_DIR", guest_dir)
            .output()
            .unwrap();
        assert!(!out.status.success(), "up must refuse");
        assert!(!run.exists(), "nothing was created, let alone started");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // No stack at all.
    let cache = dir.join("cache");
    let guest = dir.join("guest");
    let err = up(&cache, &guest, &dir.join("run"), &[]);
    assert!(
        err.contains("no VM stack") && err.contains("scripts/setup-vm-stack.sh"),
        "{err}"
    );
    // A stack whose chroot has a QEMU (a stand-in file), no guest built.
    let chroot = dir.join("chroot");
    std::fs::create_dir_all(chroot.join("usr/bin")).unwrap();
    std::fs::create_dir_all(chroot.join("tmp")).unwrap();
    std::fs::write(chroot.join("usr/bin/qemu-system-x86_64"), "").unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(
        cache.join("stack.env"),
        format!("IBTCA_CHROOT={}\n", chroot.display()),
    )
    .unwrap();
    let inside = chroot.join("tmp/run");
    let err = up(&cache, &guest, &inside, &[]);
    assert!(
        err.contains("kernel") && err.contains("scripts/build-guest.sh"),
        "{err}"
    );
    std::fs::create_dir_all(&guest).unwrap();
    std::fs::write(guest.join("vmlinuz"), "k").unwrap();
    std::fs::write(guest.join("initramfs.cpio.gz"), "i").unwrap();
    // The run directory must be where QEMU (chrooted) sees the sockets.
    let err = up(&cache, &guest, &dir.join("run"), &[]);
    assert!(err.contains("must be inside the VM-stack chroot"), "{err}");
    // Files given on the command line are checked too.
    let err = up(
        &cache,
        &guest,
        &inside,
        &["--initrd", "/nonexistent.cpio.gz"],
    );
    assert!(
        err.contains("initramfs /nonexistent.cpio.gz not found"),
        "{err}"
    );
    let err = up(
        &cache,
        &guest,
        &inside,
        &["--run-vm", "/nonexistent/run-vm.sh"],
    );
    assert!(err.contains("run-vm.sh not found"), "{err}");
    // Guest options without --guests are a usage error.
    let out = fabric(&["up", &config("two-nodes.json"), "--wait"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--guests"));
}

/// `restart NODE --kill`: the node's device crashes and starts afresh on
/// the same socket and link. The peer's stream of RDMA WRITEs to it ends
/// in WC_RETRY_EXC_ERR within (retry_cnt + 1) × timeout, then flushes (the
/// fresh device drops packets for QPs it never had); a new QP pair to the
/// restarted node works; the old device's log is kept.
#[test]
fn restart_brings_a_crashed_node_back_fresh() {
    use ibtca_tests::peer_death::{expect_retry_exceeded, start_stream};

    let dir = TempDir::new("fab-restart");
    let fab = up(&config("two-nodes.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let o = PairOptions {
        retry: Retry::PROMPT,
        ..PairOptions::default()
    };
    let (mut a, b) = connected_pair(
        [&run.join("a.sock"), &run.join("b.sock")],
        [1, 2],
        MTU_4096,
        &o,
    );
    let before = State::load(run).unwrap().unwrap();
    let old_b = before.processes.iter().find(|p| p.name == "b").unwrap().pid;

    start_stream(
        &mut a.g,
        &mut a.qp,
        &mut a.cq,
        (a.buf, a.lkey),
        (b.buf, b.rkey),
    );
    let died = std::time::Instant::now();
    let out = fabric(&["restart", "--run-dir", &run_s, "b", "--kill"]);
    assert!(out.status.success(), "restart failed: {}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("restarted b (pid"));
    expect_retry_exceeded(&mut a.g, &mut a.cq, died, "node restarted");

    let after = State::load(run).unwrap().unwrap();
    let new_b = after.processes.iter().find(|p| p.name == "b").unwrap().pid;
    assert_ne!(new_b, old_b);
    assert!(alive(new_b) && !alive(old_b));
    assert_eq!(after.processes.len(), before.processes.len());
    let old_log = std::fs::read_to_string(run.join("b.log.1")).expect("the old log kept");
    assert!(old_log.contains("device ready"), "{old_log}");
    let log = std::fs::read_to_string(run.join("b.log")).unwrap();
    assert!(
        log.contains("device ready") && log.contains("link up"),
        "{log}"
    );

    // The restarted node serves a new guest; A's new QP reaches it.
    drop(b);
    let mut b = Side::new(&run.join("b.sock"), &o, ALL_ACCESS);
    b.wait_active();
    let mut qa = a.g.create_qp(a.pd, &a.cq, &a.cq, 4);
    a.g.connect(&qa, 2, b.qp.qpn, MTU_4096, ALL_ACCESS);
    b.g.connect(&b.qp, 1, qa.qpn, MTU_4096, ALL_ACCESS);
    a.g.write(a.buf, &[0x3c; 4096]);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 50, a.buf, 4096, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut qa, &w);
    let c =
        a.g.poll_cq(&mut a.cq, T)
            .expect("a write to the restarted node");
    assert_eq!((c.wr_id.to_native(), c.status), (50, WC_SUCCESS));
    assert_eq!(b.g.read(b.buf, 4096), vec![0x3c; 4096]);

    let bad = fabric(&["restart", "--run-dir", &run_s, "nobody"]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("`nobody` is no node"), "{}", text(&bad));
    let none = fabric(&["restart", "--run-dir", &run_s, "a", "--guest-only"]);
    assert!(!none.status.success(), "a has no guest");
}

/// The arguments process `pid` was started with.
fn cmdline(pid: u32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// `up` of the default topology prints the placement it chose for this
/// machine's CPUs and starts each device with it, and `restart` starts
/// the node again with the same choice.
#[test]
fn up_places_a_default_topology_by_the_cpu_count_and_restart_keeps_it() {
    let dir = TempDir::new("fab-placement");
    let fab = up(&config("two-nodes.json"), &dir);
    let run_s = fab.run.display().to_string();
    let topo = ibtca_fabric::parse(&std::fs::read_to_string(config("two-nodes.json")).unwrap());
    let mut plan = ibtca_fabric::plan(&topo.unwrap(), &fab.run).unwrap();
    let chosen = ibtca_fabric::auto_placement::apply(
        &mut plan,
        &ibtca_fabric::auto_placement::machine_cpus(),
    );
    assert!(
        fab.stdout.lines().any(|l| l == chosen.to_string()),
        "{chosen} in {}",
        fab.stdout
    );
    let started_with_the_plan = |name: &str| {
        let state = State::load(&fab.run).unwrap().unwrap();
        let pid = state.processes.iter().find(|p| p.name == name).unwrap().pid;
        let node = plan.nodes.iter().find(|n| n.name == name).unwrap();
        let args = cmdline(pid);
        assert_eq!(
            args[1..=launch::device_args(node).len()],
            launch::device_args(node),
            "{name}: {args:?}"
        );
    };
    started_with_the_plan("a");
    started_with_the_plan("b");
    let out = fabric(&["restart", "--run-dir", &run_s, "b", "--kill"]);
    assert!(out.status.success(), "restart failed: {}", text(&out));
    started_with_the_plan("b");
}

/// With guests (a stand-in run-vm.sh that writes its console and sleeps):
/// `restart` stops the node's guest with everything under it, then its
/// device, and boots both again, keeping the old console; `--guest-only`
/// restarts the guest alone.
#[test]
fn restart_boots_the_nodes_guest_again() {
    let dir = TempDir::new("fab-restart-guests");
    let stack = StandInStack::new(&dir);
    let run = stack.chroot.join("tmp/run");
    let run_s = run.display().to_string();
    let _down = Down(run.clone());
    let fab = |args: &[&str]| stack.fabric(args);
    stack.up_guests(&config("two-nodes.json"), &run);
    let pid = |name: &str| {
        let s = State::load(&run).unwrap().unwrap();
        s.processes.iter().find(|p| p.name == name).unwrap().pid
    };
    let console = run.join("b.console");
    let booted = |pid: u32| {
        let deadline = std::time::Instant::now() + T;
        let want = format!("booted {pid}");
        while std::fs::read_to_string(&console).unwrap_or_default().trim() != want {
            assert!(
                std::time::Instant::now() < deadline,
                "no '{want}' in the console"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let (device0, guest0) = (pid("b"), pid("b (guest)"));
    booted(guest0);
    let under = ibtca_fabric::guests::descendants(guest0);
    assert!(!under.is_empty(), "the stand-in's sleep");

    let out = fab(&["restart", "--run-dir", &run_s, "b", "--kill"]);
    assert!(out.status.success(), "restart failed: {}", text(&out));
    let (device1, guest1) = (pid("b"), pid("b (guest)"));
    assert!(device1 != device0 && guest1 != guest0);
    for old in [device0, guest0].into_iter().chain(under) {
        assert!(!alive(old), "{old} still runs");
    }
    assert!(alive(device1) && alive(guest1));
    booted(guest1);
    let old = std::fs::read_to_string(run.join("b.console.1")).unwrap();
    assert_eq!(
        old.trim(),
        format!("booted {guest0}"),
        "the old console kept"
    );
    assert!(run.join("b.qemu.log.1").exists());
    assert!(text(&out).contains("restarted b (guest)"), "{}", text(&out));

    let out = fab(&["restart", "--run-dir", &run_s, "b", "--guest-only"]);
    assert!(out.status.success(), "restart failed: {}", text(&out));
    let guest2 = pid("b (guest)");
    assert_eq!(pid("b"), device1, "the device kept running");
    assert!(guest2 != guest1 && !alive(guest1) && alive(guest2));
    booted(guest2);
    assert!(pid("a") > 0 && alive(pid("a")) && alive(pid("a (guest)")));
}
