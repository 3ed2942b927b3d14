//! The seccomp sandbox of `ibtca-device`, `ibtca-switch` and
//! `ibtca-gateway`: a thread that makes a forbidden system call after its
//! filter is in place ends the process with status 159 and one line naming
//! the call and the thread's role; `--no-seccomp` turns the filter off.
//! The calls are made through the hidden `--seccomp-selftest ROLE` hook:
//! that role's thread calls execve right after installing its filter.

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use ibtca_device::sandbox::EXIT_FORBIDDEN_CALL;
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

#[test]
fn a_forbidden_call_in_any_gateway_thread_ends_the_gateway_with_a_line() {
    let dir = TempDir::new("seccomp-gateway");
    let map = dir.join("map.json");
    std::fs::write(
        &map,
        r#"{"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
            "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 1}}]}"#,
    )
    .unwrap();
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
