//! The seccomp sandbox of `ibtca-device`, `ibtca-switch`,
//! `ibtca-gateway`, `ibtca-hive` and `ibtca-simport`: a thread that makes a forbidden system call after its
//! filter is in place ends the process with status 159 and one line naming
//! the call and the thread's role; `--no-seccomp` turns the filter off.
//! The calls are made through the hidden `--seccomp-selftest ROLE` hook:
//! that role's thread calls execve right after installing its filter.

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use ibtca_device::control_socket::request;
use ibtca_device::sandbox::EXIT_FORBIDDEN_CALL;
use ibtca_tests::console::wait_for;
use ibtca_tests::device_process::Device;
use ibtca_tests::{workspace_bin, TempDir};

/// Far more than a loaded machine takes to start a process.
const EXIT_WITHIN: Duration = Duration::from_secs(120);

/// Waits for `child` to exit (polling its status), at most [`EXIT_WITHIN`].
fn wait_exit(child: &mut Child) -> Option<ExitStatus> {
    let deadline = Instant::now() + EXIT_WITHIN;
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `program` with `args` and the self-test for `role`; asserts it
/// ends with the forbidden-call status and line.
fn expect_killed(dir: &TempDir, program: &str, args: &[String], role: &str) {
    let log = dir.join(&format!("{program}-{role}.log"));
    let mut child = Command::new(workspace_bin(program))
        .args(args)
        .args(["--seccomp-selftest", role])
        .env_remove("RUST_LOG")
        .env_remove("IBTCA_NO_SECCOMP")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let status = wait_exit(&mut child);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(EXIT_FORBIDDEN_CALL),
        "{program} with the {role} self-test: {status:?}\n{text}"
    );
    let line = format!(
        "{program}: error: seccomp: forbidden system call {} (execve) in thread {role}",
        libc::SYS_execve
    );
    assert!(text.contains(&line), "{program}: no {line:?} in\n{text}");
    assert!(
        !text.contains("execve was not stopped"),
        "{program}: the call went through\n{text}"
    );
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// `flag` (ending in `=` or `:`) followed by `path`.
fn socket_arg(flag: &str, path: &Path) -> String {
    format!("{flag}{}", path.display())
}

#[test]
fn a_forbidden_call_in_any_device_thread_ends_the_device_with_a_line() {
    let dir = TempDir::new("seccomp-device");
    let socket = socket_arg("--socket=", &dir.join("d.sock"));
    for role in ["signals", "engine", "vfio-user-server"] {
        expect_killed(&dir, "ibtca-device", std::slice::from_ref(&socket), role);
    }
    let link = dir.join("l.link");
    let listen = vec![socket.clone(), format!("--link=listen:{}", link.display())];
    expect_killed(&dir, "ibtca-device", &listen, "link");
    // The writer starts once a peer connects.
    let _peer = Device::start_with(
        &dir.join("peer.sock"),
        &["--lid", "2", &format!("--link=connect:{}", link.display())],
    );
    expect_killed(&dir, "ibtca-device", &listen, "link-writer");
}

#[test]
fn a_forbidden_call_in_any_switch_thread_ends_the_switch_with_a_line() {
    let dir = TempDir::new("seccomp-switch");
    let args = vec![
        socket_arg("--port=listen:", &dir.join("p1.link")),
        socket_arg("--control=", &dir.join("control")),
    ];
    for role in [
        "signals",
        "switch-main",
        "switch-traps",
        "switch-delay",
        "switch-control",
        "link",
    ] {
        expect_killed(&dir, "ibtca-switch", &args, role);
    }
}

/// A gateway map with one VC to LID 1.
fn write_map(dir: &TempDir) -> std::path::PathBuf {
    let map = dir.join("map.json");
    std::fs::write(
        &map,
        r#"{"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
            "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 1}}]}"#,
    )
    .unwrap();
    map
}

/// A child process, killed if still running when dropped.
struct Running(Child, std::path::PathBuf);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `program` with `args`, its log in `dir`.
fn start(dir: &TempDir, program: &str, args: &[String]) -> Running {
    let log = dir.join(&format!("{program}.log"));
    let child = Command::new(workspace_bin(program))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("IBTCA_NO_SECCOMP")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    Running(child, log)
}

/// A switch between a device and a gateway, every thread of each under
/// its filter: links come up (sessions, shared rings, writers), the
/// control sockets answer, an ATM peer connects, and SIGTERM stops all
/// three with status 0 and no forbidden call (the switch first: its main
/// thread then tears down live links).
#[test]
fn a_switch_device_and_gateway_run_and_stop_under_their_filters() {
    let dir = TempDir::new("seccomp-run");
    let (p1, p2) = (dir.join("p1.link"), dir.join("p2.link"));
    let (sw_control, gw_control, atm) = (
        dir.join("sw.control"),
        dir.join("gw.control"),
        dir.join("atm"),
    );
    let switch = start(
        &dir,
        "ibtca-switch",
        &[
            socket_arg("--port=listen:", &p1),
            socket_arg("--port=listen:", &p2),
            "--route=1=1".into(),
            "--route=10=2".into(),
            socket_arg("--control=", &sw_control),
            socket_arg("--status-file=", &dir.join("sw.status")),
        ],
    );
    let device = start(
        &dir,
        "ibtca-device",
        &[
            socket_arg("--socket=", &dir.join("d.sock")),
            socket_arg("--link=connect:", &p1),
        ],
    );
    let mut gw_args = strings(&["--lid", "10", "--stats-interval", "1"]);
    gw_args.push(socket_arg("--link=connect:", &p2));
    gw_args.push(socket_arg("--atm=listen:", &atm));
    gw_args.push(socket_arg("--map=", &write_map(&dir)));
    gw_args.push(socket_arg("--control=", &gw_control));
    let gateway = start(&dir, "ibtca-gateway", &gw_args);
    let up = Duration::from_secs(60);
    wait_for(&switch.1, "port up", 2, up);
    wait_for(&device.1, "link up", 1, up);
    wait_for(&gateway.1, "link up", 1, up);
    // The ATM port's writer starts with a peer.
    let _atm_peer = std::os::unix::net::UnixStream::connect(&atm).unwrap();
    for path in [&sw_control, &gw_control] {
        let reply = request(path, "stats").unwrap();
        assert!(reply.starts_with("ok "), "{}: {reply}", path.display());
    }
    wait_for(&gateway.1, "counters", 1, up);
    // Stopped and continued (as a debugger or ^Z would), the sleeping and
    // waiting threads resume through restart_syscall.
    let pid = gateway.0.id();
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    wait_state(pid, 'T');
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    let logged = std::fs::read_to_string(&gateway.1)
        .unwrap()
        .matches("counters")
        .count();
    wait_for(&gateway.1, "counters", logged + 2, up);
    stop_cleanly([switch, device, gateway]);
}

/// Stops each of `processes` in turn with SIGTERM and asserts that it
/// ends with status 0 and no forbidden call in its log.
fn stop_cleanly<const N: usize>(processes: [Running; N]) {
    for mut running in processes {
        let (child, log) = (&mut running.0, &running.1);
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let status = wait_exit(child);
        let text = std::fs::read_to_string(log).unwrap();
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{}:\n{text}",
            log.display()
        );
        assert!(
            !text.contains("error: seccomp"),
            "{}:\n{text}",
            log.display()
        );
    }
}

/// Waits until process `pid` is in `state` (`/proc/PID/stat`).
fn wait_state(pid: u32, state: char) {
    let deadline = Instant::now() + EXIT_WITHIN;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let now = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.trim().chars().next());
        if now == Some(state) {
            return;
        }
        assert!(Instant::now() < deadline, "{pid} never in state {state}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_forbidden_call_in_any_gateway_thread_ends_the_gateway_with_a_line() {
    let dir = TempDir::new("seccomp-gateway");
    let map = write_map(&dir);
    let mut args = strings(&["--lid", "10", "--stats-interval", "1"]);
    args.push(socket_arg("--link=listen:", &dir.join("l.link")));
    args.push(socket_arg("--atm=listen:", &dir.join("atm")));
    args.push(socket_arg("--map=", &map));
    args.push(socket_arg("--control=", &dir.join("control")));
    for role in [
        "gateway-main",
        "gateway-engine",
        "gateway-stats",
        "atm-port",
        "control",
        "link",
    ] {
        expect_killed(&dir, "ibtca-gateway", &args, role);
    }
}

#[test]
fn no_seccomp_lets_the_forbidden_call_through_and_the_device_runs_on() {
    let dir = TempDir::new("seccomp-off");
    let log = dir.join("device.log");
    let mut device = Device::start_logging(
        &dir.join("d.sock"),
        &["--no-seccomp", "--seccomp-selftest", "engine"],
        std::fs::File::create(&log).unwrap(),
    );
    device.signal(libc::SIGTERM);
    let status = device.wait(EXIT_WITHIN);
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{text}");
    assert!(text.contains("seccomp filter off (--no-seccomp)"), "{text}");
    assert!(text.contains("execve was not stopped"), "{text}");
    assert!(!text.contains("forbidden system call"), "{text}");
}

/// A hive file of one switch with a listening wire and one CA.
fn write_hive_file(dir: &TempDir) -> std::path::PathBuf {
    let path = dir.join("hive.json");
    let file = serde_json::json!({
        "switches": [{ "name": "sw0", "guid": 0x1200_0000_00ff_0001_u64, "ports": [
            format!("listen:{}", dir.join("sw0-p1.link").display()), "hive:h1:1" ] }],
        "cas": [{ "name": "h1", "guid": 0x1200_0000_0000_0101_u64, "port": "hive:sw0:2" }]
    });
    std::fs::write(&path, file.to_string()).unwrap();
    path
}

#[test]
fn a_forbidden_call_in_the_hive_ends_it_with_a_line() {
    let dir = TempDir::new("seccomp-hive");
    let args = vec![socket_arg("--config=", &write_hive_file(&dir))];
    expect_killed(&dir, "ibtca-hive", &args, "hive");
}

/// An ibsim socket name no other test or process uses (abstract sockets
/// are shared by the whole network namespace).
fn sockname(what: &str) -> String {
    format!("ibtca-seccomp-{what}-{}", std::process::id())
}

#[test]
fn a_forbidden_call_in_any_simport_thread_ends_it_with_a_line() {
    let dir = TempDir::new("seccomp-simport");
    for role in [
        "signals",
        "simport-main",
        "simport-reader",
        "simport-forward",
        "link",
    ] {
        let args = vec![
            socket_arg("--link=listen:", &dir.join(&format!("{role}.link"))),
            format!("--sockname={}", sockname(role)),
        ];
        expect_killed(&dir, "ibtca-simport", &args, role);
    }
}

/// A hive (status file, a wire an outside peer connects to) and a
/// simport (its link connected to the hive's switch, so its link writer
/// runs too) under their filters: both come up, and SIGTERM stops both
/// with status 0 and no forbidden call (the hive removes its socket
/// file, the simport stops its link).
#[test]
fn a_hive_and_a_simport_run_and_stop_under_their_filters() {
    let dir = TempDir::new("seccomp-hive-run");
    let status = dir.join("hive.status.json");
    let hive = start(
        &dir,
        "ibtca-hive",
        &[
            socket_arg("--config=", &write_hive_file(&dir)),
            socket_arg("--status-file=", &status),
        ],
    );
    let simport = start(
        &dir,
        "ibtca-simport",
        &[
            socket_arg("--link=connect:", &dir.join("sw0-p1.link")),
            format!("--sockname={}", sockname("run")),
            "--lid=3".into(),
        ],
    );
    let up = Duration::from_secs(60);
    wait_for(&simport.1, "link up", 1, up);
    // The hive wrote the status file from its loop: the switch's port 1
    // (the simport's link) is up.
    let deadline = Instant::now() + EXIT_WITHIN;
    loop {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if json["nodes"]["sw0"]["ports"][0]["up"] == true {
            break;
        }
        assert!(Instant::now() < deadline, "no port up in {text:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    stop_cleanly([simport, hive]);
    assert!(!dir.join("sw0-p1.link").exists(), "the hive's socket file");
}
