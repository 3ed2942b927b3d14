//! The `ibtca-gateway` binary: `--help`, a bad map refused before
//! anything starts (every problem named, exit status 2), and a running
//! gateway answering its control socket, logging its counters on SIGUSR1
//! and at exit on SIGTERM.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ibtca-gateway");
const T: Duration = Duration::from_secs(30);

fn run_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ibtca-gwbin-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn help_names_the_ports_and_the_map() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for word in [
        "--link",
        "--atm",
        "--map",
        "--service-sl",
        "--control",
        "remote-qpn",
    ] {
        assert!(text.contains(word), "--help mentions {word}:\n{text}");
    }
}

#[test]
fn a_bad_map_is_refused_before_anything_starts() {
    let dir = run_dir("bad");
    let map = dir.join("map.json");
    std::fs::write(
        &map,
        r#"{"vcs": [
            {"vpi": 0, "vci": 32, "aal": 5, "service": "ubr", "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2}},
            {"vpi": 0, "vci": 32, "aal": 3, "service": "abr", "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2}},
            {"vpi": 0, "vci": 4, "aal": 0, "service": "cbr", "ib": {"qp": "rc", "local_qpn": 17, "remote_lid": 2}}
        ]}"#,
    )
    .unwrap();
    let atm = dir.join("atm");
    let out = Command::new(BIN)
        .args(["--link", &format!("listen:{}", dir.join("link").display())])
        .args(["--atm", &format!("listen:{}", atm.display())])
        .arg("--map")
        .arg(&map)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "refused",
        "vcs[1] (VPI/VCI 0/32): mapped twice (also vcs[0])",
        "vcs[1] (VPI/VCI 0/32): local_qpn 16 is also vcs[0]'s",
        "AAL 3 is not supported",
        "unknown service `abr`",
        "vcs[2] (VPI/VCI 0/4): VCI 4 is reserved",
    ] {
        assert!(err.contains(want), "stderr names `{want}`:\n{err}");
    }
    assert!(!atm.exists(), "nothing started");
    // --check says the same and starts nothing either.
    let out = Command::new(BIN)
        .args([
            "--check",
            "--link",
            "listen:/nonexistent/l",
            "--atm",
            "listen:/nonexistent/a",
        ])
        .arg("--map")
        .arg(&map)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("mapped twice"));
    std::fs::write(
        &map,
        r#"{"vcs": [{"vpi": 1, "vci": 40, "aal": 1, "service": "cbr", "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2}}]}"#,
    )
    .unwrap();
    let out = Command::new(BIN)
        .args([
            "--check",
            "--lid",
            "9",
            "--link",
            "listen:/nonexistent/l",
            "--atm",
            "listen:/nonexistent/a",
        ])
        .arg("--map")
        .arg(&map)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "ok: LID 9, 1 VCs (1/40 AAL1 cbr)\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_running_gateway_serves_stats_and_logs_counters() {
    let dir = run_dir("run");
    let map = dir.join("map.json");
    std::fs::write(
        &map,
        r#"{"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr", "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2}}]}"#,
    )
    .unwrap();
    let control = dir.join("control");
    let mut child = Command::new(BIN)
        .args(["--lid", "7"])
        .args([
            "--link",
            &format!("connect:{}", dir.join("nobody").display()),
        ])
        .args(["--atm", &format!("listen:{}", dir.join("atm").display())])
        .arg("--map")
        .arg(&map)
        .arg("--control")
        .arg(&control)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |what: &str| {
        let deadline = Instant::now() + T;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no log line with `{what}`"));
            if line.contains(what) {
                return line;
            }
        }
    };
    wait_for("gateway running");
    let deadline = Instant::now() + T;
    let reply = loop {
        match ibtca_switch::control::request(&control, "stats") {
            Ok(r) => break r,
            Err(e) => {
                assert!(Instant::now() < deadline, "control socket: {e}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    let stats: serde_json::Value =
        serde_json::from_str(reply.strip_prefix("ok ").unwrap()).unwrap();
    assert_eq!(stats["cells_in"], 0);
    assert_eq!(stats["dropped_no_qp"], 0);
    let pid = child.id() as i32;
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
    assert!(wait_for("counters").contains("cells_in"));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(wait_for("counters at exit").contains("messages_sent"));
    assert!(child.wait().unwrap().success());
    assert!(!control.exists(), "the control socket is removed at exit");
    let _ = std::fs::remove_dir_all(&dir);
}
