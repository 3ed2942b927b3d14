//! The `ibtca-device` binary's lifecycle: CLI, clients coming and going,
//! stale and busy sockets, clean shutdown on SIGTERM.

use std::io::Write;
use std::process::Command;
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_tests::*;

use ibtca_tests::console::wait_for;
use ibtca_tests::device_process::Device;

#[test]
fn help_describes_the_options() {
    let out = Command::new(workspace_bin("ibtca-device"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("--socket"), "{text}");
    assert!(text.contains("vfio-user-pci"), "{text}");
    let out = Command::new(workspace_bin("ibtca-device"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "--socket is required");
}

#[test]
fn serves_clients_one_after_another_and_stops_on_sigterm() {
    let dir = TempDir::new("bin");
    let sock = dir.join("tca.sock");
    let mut dev = Device::start(&sock);
    for round in 0..3u32 {
        let mut c = Client::connect(&sock).unwrap();
        assert_eq!(c.read32(0, regs::MAGIC), regs::MAGIC_VALUE, "round {round}");
        assert_eq!(c.read32(0, regs::SCRATCH), 0, "fresh device each time");
        c.write32(0, regs::SCRATCH, round + 1);
    }
    // A client that dies in the middle of a message.
    {
        let mut c = Client::connect(&sock).unwrap();
        c.send_raw(&header(1, 9, 32, 0)[..10], &[]).unwrap();
    }
    let mut c = Client::connect(&sock).unwrap();
    assert_eq!(
        c.read32(0, regs::MAGIC),
        regs::MAGIC_VALUE,
        "survived a torn message"
    );
    // SIGTERM while a client is connected and idle.
    dev.signal(libc::SIGTERM);
    let st = dev.wait(Duration::from_secs(10)).expect("exits on SIGTERM");
    assert!(st.success(), "clean exit: {st:?}");
    assert!(!sock.exists(), "socket removed");
}

#[test]
fn replaces_a_stale_socket_and_refuses_a_busy_one() {
    let dir = TempDir::new("bin");
    let sock = dir.join("tca.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap()); // stale file
    assert!(sock.exists());
    let mut dev = Device::start(&sock);
    let mut c = Client::connect(&sock).unwrap();
    assert_eq!(c.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
    drop(c);
    let out = Command::new(workspace_bin("ibtca-device"))
        .arg("--socket")
        .arg(&sock)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "second server on a live socket must fail"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("is in use by another process"));
    // A plain file is not replaced.
    let file = dir.join("plain");
    std::fs::File::create(&file)
        .unwrap()
        .write_all(b"x")
        .unwrap();
    let out = Command::new(workspace_bin("ibtca-device"))
        .arg("--socket")
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(file.exists());
    dev.signal(libc::SIGINT);
    assert!(dev
        .wait(Duration::from_secs(10))
        .expect("exits on SIGINT")
        .success());
}

/// `(policy, rt_priority, allowed CPUs)` of every thread of process `pid`.
fn thread_scheduling(pid: u32) -> Vec<(String, i32, i32, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap();
        let comm = stat[stat.find('(').unwrap() + 1..stat.rfind(')').unwrap()].to_string();
        // Fields after "(comm)" start at field 3 (state): rt_priority is
        // field 40, policy field 41 (proc(5)).
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let prio = fields[40 - 3].parse().unwrap();
        let policy = fields[41 - 3].parse().unwrap();
        let status = std::fs::read_to_string(dir.join("status")).unwrap();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        out.push((comm, policy, prio, cpus));
    }
    out
}

/// The scheduling of every thread of `dev` (`thread_scheduling`), after
/// checking that its data-path threads (vfio-user, engine, link) are
/// among them.
/// The threads start while the device starts serving, so they are waited
/// for (a loaded machine may take a while), not expected at once.
fn data_path_threads(dev: &Device) -> Vec<(String, i32, i32, String)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let threads = thread_scheduling(dev.child.id());
        let missing = ["ibtca-device", "ibtca-engine", "ibtca-link"]
            .into_iter()
            .find(|name| !threads.iter().any(|t| t.0 == *name));
        match missing {
            None => return threads,
            Some(name) => assert!(
                Instant::now() < deadline,
                "no {name} thread after 30 s: {threads:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn realtime_and_cpus_apply_to_every_device_thread() {
    let dir = TempDir::new("rt");
    let socket = dir.join("rt.sock");
    let link = format!("listen:{}", dir.join("rt.link").display());
    let args = ["--realtime", "7", "--cpus", "0", "--link", &link];
    // Whether this test process may use SCHED_FIFO at all (root in CI; a
    // container without CAP_SYS_NICE may not): asked on a scratch thread.
    let allowed = std::thread::spawn(|| ibtca_device::sched::set_realtime(1).is_ok())
        .join()
        .unwrap();
    if !allowed {
        let out = Command::new(workspace_bin("ibtca-device"))
            .arg("--socket")
            .arg(&socket)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--realtime 7") && err.contains("CAP_SYS_NICE"),
            "{err}"
        );
        return;
    }
    let dev = Device::start_with(&socket, &args);
    for t in &data_path_threads(&dev) {
        assert_eq!((t.1, t.2), (libc::SCHED_FIFO, 7), "{t:?}");
        assert_eq!(t.3, "0", "{t:?}");
    }
    // Without the options the threads keep the default policy.
    let plain = Device::start(&dir.join("plain.sock"));
    for t in thread_scheduling(plain.child.id()) {
        assert_eq!((t.1, t.2), (libc::SCHED_OTHER, 0), "{t:?}");
    }
}

#[test]
fn sched_batch_applies_to_every_device_thread_and_excludes_realtime() {
    let dir = TempDir::new("batch");
    let link = format!("listen:{}", dir.join("b.link").display());
    let dev = Device::start_with(&dir.join("b.sock"), &["--sched-batch", "--link", &link]);
    for t in &data_path_threads(&dev) {
        assert_eq!((t.1, t.2), (libc::SCHED_BATCH, 0), "{t:?}");
    }
    let out = Command::new(workspace_bin("ibtca-device"))
        .args([
            "--socket",
            "/nonexistent/x.sock",
            "--sched-batch",
            "--realtime",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--sched-batch") && err.contains("--realtime"),
        "{err}"
    );
}

#[test]
fn bad_cpu_lists_and_priorities_are_refused() {
    for args in [
        ["--cpus", "3-1"],
        ["--cpus", "x"],
        ["--realtime", "0"],
        ["--realtime", "100"],
    ] {
        expect_refused(&args, args[0]);
    }
}

/// `ibtca-device` with `args` exits 2 before it starts, saying `what`.
fn expect_refused(args: &[&str], what: &str) {
    let out = Command::new(workspace_bin("ibtca-device"))
        .args(["--socket", "/nonexistent/x.sock"])
        .args(args)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(what), "{args:?}: {err}");
}

#[test]
fn bad_guids_are_refused() {
    for args in [
        ["--node-guid", "0"],
        ["--node-guid", "xyz"],
        ["--port-guid", "0x11112222333344445"],
    ] {
        expect_refused(&args, "GUID '");
    }
}

/// The `0x...` value of `key=` in the first line of `log` with `what`.
fn log_hex(log: &str, what: &str, key: &str) -> u64 {
    let line = log.lines().find(|l| l.contains(what)).unwrap_or_default();
    let pat = format!("{key}=");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("no {pat} in {line:?}"))
        + pat.len();
    let hex: String = line[at..]
        .trim_start_matches('"')
        .trim_start_matches("0x")
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u64::from_str_radix(&hex, 16).unwrap()
}

#[test]
fn guids_are_configured_or_random_locally_administered_ones() {
    let dir = TempDir::new("guids");
    let devices = linked_devices(
        &dir,
        &[
            "--node-guid",
            "0x1200:1111:2222:3333",
            "--port-guid",
            "0x1200111122223334",
        ],
    );
    // Each log's "device ready" and "link up" lines, in whichever order the
    // device's threads wrote them: the text after the second wait holds both.
    let [log_a, log_b] = [&devices[0].1, &devices[1].1].map(|log| {
        wait_for(log, "device ready", 1, LOG_WAIT);
        wait_for(log, "session: link up", 1, LOG_WAIT)
    });
    assert_eq!(
        log_hex(&log_a, "device ready", "node_guid"),
        0x1200_1111_2222_3333
    );
    assert_eq!(
        log_hex(&log_a, "device ready", "port_guid"),
        0x1200_1111_2222_3334
    );
    // The peer sees A's node GUID in its Hello.
    assert_eq!(
        log_hex(&log_b, "session: link up", "guid"),
        0x1200_1111_2222_3333
    );
    // B named none: a random, locally administered node GUID, which is
    // also its port GUID; none derived from its LID.
    let b = log_hex(&log_b, "device ready", "node_guid");
    assert_eq!(b & (0x03 << 56), 0x02 << 56, "{b:#x}");
    assert_eq!(log_hex(&log_b, "device ready", "port_guid"), b);
    assert_eq!(log_hex(&log_a, "session: link up", "guid"), b);
    // BAR0 shows the port GUID.
    let mut c = Client::connect(&dir.join("a.sock")).unwrap();
    let lo = c.read32(0, regs::PORT_GUID_LO);
    let hi = c.read32(0, regs::PORT_GUID_HI);
    assert_eq!(u64::from(hi) << 32 | u64::from(lo), 0x1200_1111_2222_3334);
}

/// How long a device's log may take to say what a test waits for.
const LOG_WAIT: Duration = Duration::from_secs(20);

/// What a device logs once it counted a ring its peer offered (`rx_rings`).
const RING_TAKEN: &str = "link peer writes to us through a shared ring";

/// Devices A (LID 1, listening) and B (LID 2, connecting) on one link, A
/// with `a_extra` options, their logs in `dir` (`a.log`, `b.log`).
fn linked_devices(dir: &TempDir, a_extra: &[&str]) -> [(Device, std::path::PathBuf); 2] {
    linked_devices_with(dir, a_extra, &[], None)
}

/// [`linked_devices`] with `b_extra` options for B, and A started under
/// `a_limit` (an `RLIMIT_*` and its value, [`Device::start_limited`]).
fn linked_devices_with(
    dir: &TempDir,
    a_extra: &[&str],
    b_extra: &[&str],
    a_limit: Option<(libc::__rlimit_resource_t, u64)>,
) -> [(Device, std::path::PathBuf); 2] {
    let link = dir.join("ab.link");
    let listen = format!("listen:{}", link.display());
    let connect = format!("connect:{}", link.display());
    let start = |name: &str, args: &[&str], limit: Option<(libc::__rlimit_resource_t, u64)>| {
        let log = dir.join(&format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let socket = dir.join(&format!("{name}.sock"));
        let device = match limit {
            Some((resource, max)) => Device::start_limited(&socket, args, file, resource, max),
            None => Device::start_logging(&socket, args, file),
        };
        (device, log)
    };
    let args = |lid: &'static str, ep: &str, extra: &[&str]| -> Vec<String> {
        ["--lid", lid, "--link", ep]
            .into_iter()
            .chain(extra.iter().copied())
            .map(str::to_owned)
            .collect()
    };
    let (a_args, b_args) = (args("1", &listen, a_extra), args("2", &connect, b_extra));
    let a_refs: Vec<&str> = a_args.iter().map(String::as_str).collect();
    let b_refs: Vec<&str> = b_args.iter().map(String::as_str).collect();
    [start("a", &a_refs, a_limit), start("b", &b_refs, None)]
}

/// Stops `dev` with SIGTERM and checks that the link counters it logs
/// contain every one of `expected`.
fn stop_expecting_counters(mut dev: Device, log: &std::path::Path, expected: &[&str]) {
    dev.signal(libc::SIGTERM);
    assert!(dev.wait(Duration::from_secs(10)).is_some(), "no clean exit");
    let text = wait_for(log, "link counters", 1, LOG_WAIT);
    let counters = text
        .lines()
        .find(|l| l.contains("link counters"))
        .unwrap_or_default();
    for e in expected {
        assert!(
            counters.contains(e),
            "no '{e}' in {}:\n{text}",
            log.display()
        );
    }
}

#[test]
fn two_device_processes_link_through_shared_rings_and_see_a_killed_peer_go() {
    let dir = TempDir::new("ring-procs");
    let [(a, log_a), (mut b, log_b)] = linked_devices(&dir, &[]);
    // Each side reads the other's frames from the ring it was handed.
    for log in [&log_a, &log_b] {
        wait_for(log, "link up", 1, LOG_WAIT);
        wait_for(log, RING_TAKEN, 1, LOG_WAIT);
    }
    // B dies without a word: A, asleep on its ring, hears it through the
    // socket and reports the link down.
    b.signal(libc::SIGKILL);
    assert!(b.wait(Duration::from_secs(10)).is_some(), "B did not die");
    let log = wait_for(&log_a, "link down", 1, LOG_WAIT);
    assert!(!log.contains("panicked"), "{log}");
    // A still serves its guest side.
    let mut c = Client::connect(&dir.join("a.sock")).unwrap();
    assert_eq!(c.read32(0, regs::MAGIC), regs::MAGIC_VALUE);
    drop(a);
}

#[test]
fn a_device_with_its_ring_off_keeps_the_link_on_the_socket() {
    let dir = TempDir::new("ring-off");
    let devices = linked_devices(&dir, &["--link-ring-kib", "0"]);
    for (_, log) in &devices {
        wait_for(log, "link up", 1, LOG_WAIT);
    }
    // The counters each logs when it stops: no ring either way.
    for (dev, log) in devices {
        stop_expecting_counters(dev, &log, &["tx_rings: 0, rx_rings: 0"]);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(!text.contains("through a shared ring"), "{text}");
    }
}

#[test]
fn a_device_that_cannot_make_its_ring_writes_to_the_socket_and_stays_up() {
    let dir = TempDir::new("ring-refused");
    // A's 128 MiB ring does not fit its 64 MiB file limit; B's default
    // 4 MiB ring maps fine at A (mapping grows no file).
    let [(a, log_a), (b, log_b)] = linked_devices_with(
        &dir,
        &["--link-ring-kib", "131072"],
        &[],
        Some((libc::RLIMIT_FSIZE, 64 << 20)),
    );
    wait_for(&log_a, "cannot make a shared ring", 1, LOG_WAIT);
    for log in [&log_a, &log_b] {
        wait_for(log, "link up", 1, LOG_WAIT);
    }
    // A takes B's ring from B's RingOffer, which A reads after it logged
    // the link up; it logs the ring once counted.
    wait_for(&log_a, RING_TAKEN, 1, LOG_WAIT);
    // One connection each, A's frames on the socket, B's through its ring.
    let one = "connections: 1, reconnects: 0";
    stop_expecting_counters(a, &log_a, &["tx_rings: 0, rx_rings: 1", one]);
    stop_expecting_counters(b, &log_b, &["tx_rings: 1, rx_rings: 0", one]);
}

#[test]
fn a_device_that_cannot_map_its_peers_ring_reconnects_once_with_the_peer_on_the_socket() {
    let dir = TempDir::new("ring-unmappable");
    // B offers a 1 GiB ring; A's address space (768 MiB) has no room to
    // map it, while A's own 4 MiB ring fits.
    let [(a, log_a), (b, log_b)] = linked_devices_with(
        &dir,
        &[],
        &["--link-ring-kib", "1048576"],
        Some((libc::RLIMIT_AS, 768 << 20)),
    );
    wait_for(&log_a, "cannot map the peer's shared ring", 1, LOG_WAIT);
    // The second connection: B made its choice (no offer: A announced no
    // rings) before it logs it up.
    for log in [&log_a, &log_b] {
        wait_for(log, "link::session: link up", 2, LOG_WAIT);
    }
    // B takes A's ring on both connections, from A's RingOffer, which B
    // reads after it logged the link up; it logs the ring once counted.
    wait_for(&log_b, RING_TAKEN, 2, LOG_WAIT);
    // Not the peer's fault: no bad frame either side.
    let twice = ["connections: 2, reconnects: 1", "rx_bad_frames: 0"];
    stop_expecting_counters(
        a,
        &log_a,
        &[&["tx_rings: 2, rx_rings: 0"][..], &twice].concat(),
    );
    stop_expecting_counters(
        b,
        &log_b,
        &[&["tx_rings: 1, rx_rings: 2"][..], &twice].concat(),
    );
    let text = std::fs::read_to_string(&log_a).unwrap();
    assert_eq!(text.matches("cannot map the peer's shared ring").count(), 1);
}

/// A's guest streams RDMA WRITEs to B's; B's device process is killed
/// (SIGKILL) mid-stream. A's guest gets WC_RETRY_EXC_ERR for the oldest
/// unfinished WRITE within (retry_cnt + 1) × the ACK timeout and
/// WC_WR_FLUSH_ERR for the rest, and A's log has one line for the QP's
/// error with its counts, and the engine's totals when A stops.
#[test]
fn a_killed_peer_process_fails_the_stream_and_the_qp_error_is_logged() {
    use ibtca_device::verbs::abi::MTU_4096;
    use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
    use ibtca_tests::peer_death::{expect_retry_exceeded, start_stream};
    use ibtca_tests::qp_retry::Retry;

    let dir = TempDir::new("peer-killed");
    let [(a, log_a), (mut b, _)] = linked_devices(&dir, &[]);
    let o = PairOptions {
        retry: Retry::PROMPT,
        ..PairOptions::default()
    };
    let mut sa = Side::new(&dir.join("a.sock"), &o, ALL_ACCESS);
    let mut sb = Side::new(&dir.join("b.sock"), &o, ALL_ACCESS);
    sa.wait_active();
    sb.wait_active();
    sa.g.connect(&sa.qp, 2, sb.qp.qpn, MTU_4096, ALL_ACCESS);
    sb.g.connect(&sb.qp, 1, sa.qp.qpn, MTU_4096, ALL_ACCESS);
    start_stream(
        &mut sa.g,
        &mut sa.qp,
        &mut sa.cq,
        (sa.buf, sa.lkey),
        (sb.buf, sb.rkey),
    );
    b.signal(libc::SIGKILL);
    let died = Instant::now();
    assert!(b.wait(Duration::from_secs(10)).is_some(), "B did not die");
    let failed = expect_retry_exceeded(&mut sa.g, &mut sa.cq, died, "peer process killed");
    let flushed = format!("flushed_sends={} flushed_recvs=0", failed - 1);
    let log = wait_for(&log_a, "QP error", 1, LOG_WAIT);
    let line = log.lines().find(|l| l.contains("QP error")).unwrap();
    eprintln!("A's log: {line}");
    let qpn = format!("qpn={}", sa.qp.qpn);
    // The QP gave up by its own retry count and ACK timeout (PROMPT's,
    // above the device's 250 ms floor), not by some other timer.
    let retries = format!(
        "retry_cnt={} ack_timeout_us={} ",
        Retry::PROMPT.retry_cnt,
        Duration::from_nanos(4096 << Retry::PROMPT.timeout).as_micros()
    );
    let want = [
        &qpn,
        "peer_lid=2",
        "status=WC_RETRY_EXC_ERR",
        &flushed,
        &retries,
    ];
    for want in want {
        assert!(line.contains(want), "no '{want}' in: {line}");
    }
    // retry_cnt timeouts in a row, and maybe earlier ones on a loaded
    // machine (a live peer late by more than one timeout) that progress ended.
    let timeouts: u64 = line
        .split_once("timeouts=")
        .and_then(|(_, r)| r.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no timeouts= in: {line}"));
    assert!(timeouts >= 7, "{line}");
    drop(sa);
    let mut a = a;
    a.signal(libc::SIGTERM);
    assert!(a.wait(Duration::from_secs(10)).is_some(), "no clean exit");
    let log = wait_for(&log_a, "engine counters", 1, LOG_WAIT);
    let totals = format!(
        "qp_errors: 1, retry_exceeded: 1, flushed_sends: {}, flushed_recvs: 0",
        failed - 1
    );
    assert!(log.contains(&totals), "no '{totals}' in:\n{log}");
}
