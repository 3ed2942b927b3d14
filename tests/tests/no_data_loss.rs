//! No binary removes a file that is not a stale socket: a regular file at
//! a control, vfio-user, link or hub socket path survives, with an error
//! naming it and exit status 1; a stale socket (nobody listening) is
//! replaced; a live one is refused as in use.

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ibtca_tests::console::wait_for;
use ibtca_tests::{workspace_bin, TempDir};

const PRECIOUS: &[u8] = b"a user's file, not a socket\n";

/// Runs `name args` to its end; one still running after two minutes (it
/// took the path and started serving) is killed and fails the test.
fn run(name: &str, args: &[&str]) -> Output {
    let child = Command::new(workspace_bin(name))
        .args(args)
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let out = child.wait_with_output();
        let _ = tx.send(());
        out
    });
    if rx.recv_timeout(Duration::from_secs(120)).is_err() {
        // SAFETY: kill(2) on our own child's pid, not yet reaped.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        let _ = waiter.join();
        panic!("{name} {args:?} kept running: it took the path and started");
    }
    waiter.join().unwrap().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn not_a_socket(path: &Path) -> String {
    format!(
        "{} exists and is not a socket; refusing to replace it",
        path.display()
    )
}

/// `name args` with a regular file at `path` exits 1 with `want` (the
/// whole stderr) and leaves the file as it was.
fn refuses(name: &str, args: &[&str], path: &Path, want: &str) {
    std::fs::write(path, PRECIOUS).unwrap();
    let o = run(name, args);
    assert_eq!(o.status.code(), Some(1), "{name} {args:?}: {}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("{name}: error: {want}\n"),
        "{name} {args:?}"
    );
    assert_eq!(
        std::fs::read(path).unwrap(),
        PRECIOUS,
        "{name} kept {}",
        path.display()
    );
}

#[test]
fn a_regular_file_at_a_socket_path_survives() {
    let dir = TempDir::new("no-loss");
    let s = |p: &Path| p.display().to_string();
    let file = dir.join("precious");
    let f = s(&file);
    let free = |n: &str| s(&dir.join(n));

    // ibtca-switch: its control socket, and a port's link socket.
    let port = format!("--port=listen:{}", free("sw-p1"));
    refuses(
        "ibtca-switch",
        &[&port, "--control", &f],
        &file,
        &format!("cannot serve the control socket: {}", not_a_socket(&file)),
    );
    refuses(
        "ibtca-switch",
        &[&format!("--port=listen:{f}")],
        &file,
        &format!("cannot start the switch: port 1: {}", not_a_socket(&file)),
    );
    // ibtca-device: its vfio-user socket, and its link socket.
    refuses(
        "ibtca-device",
        &["--socket", &f],
        &file,
        &format!("--socket: {}", not_a_socket(&file)),
    );
    refuses(
        "ibtca-device",
        &["--socket", &free("dev.sock"), &format!("--link=listen:{f}")],
        &file,
        &format!("cannot start the device: {}", not_a_socket(&file)),
    );
    // The management hub.
    refuses(
        "ibtca-mgmt-hub",
        &["--socket", &f],
        &file,
        &not_a_socket(&file),
    );
    // ibtca-gateway: its control socket (after its link and ATM port are
    // bound) and its ATM socket.
    let map = dir.join("map.json");
    std::fs::write(
        &map,
        r#"{"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
                     "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2, "remote_qpn": 16}}]}"#,
    )
    .unwrap();
    let gw = |atm: &str, control: &str| {
        vec![
            format!("--link=listen:{}", free("gw.link")),
            format!("--atm=listen:{atm}"),
            format!("--map={}", map.display()),
            format!("--control={control}"),
        ]
    };
    let args = gw(&free("atm"), &f);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refuses(
        "ibtca-gateway",
        &args,
        &file,
        &format!("control socket: {}", not_a_socket(&file)),
    );
    let args = gw(&f, &free("gw.control"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    refuses(
        "ibtca-gateway",
        &args,
        &file,
        &format!("cannot start: ATM port: {}", not_a_socket(&file)),
    );
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_refused() {
    let dir = TempDir::new("stale-live");
    let sock = dir.join("dev.sock");
    let s = sock.display().to_string();
    // Live: some process listens on it.
    let live = UnixListener::bind(&sock).unwrap();
    let o = run("ibtca-device", &["--socket", &s]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("ibtca-device: error: --socket: {s} is in use by another process\n")
    );
    assert!(UnixStream::connect(&sock).is_ok(), "the live socket stays");
    // Stale: its listener is gone, the file stays; the device replaces it.
    drop(live);
    assert!(sock.exists());
    let log = dir.join("dev.log");
    let mut child = Command::new(workspace_bin("ibtca-device"))
        .args(["--socket", &s])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    wait_for(
        &log,
        "waiting for a vfio-user client",
        1,
        Duration::from_secs(60),
    );
    assert!(UnixStream::connect(&sock).is_ok(), "the device listens");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!sock.exists(), "the device removed its own socket at exit");
}
