//! Full stack, a fabric driven while it runs: one `ibtca-fabric up
//! --guests` (no --run: the guest loads its driver and stays up) boots one
//! guest, and every check shares that boot:
//!
//! - `exec n1 -- sh -c 'echo hi; exit 3'` prints hi and exits 3, through
//!   the guest agent on the virtio-serial port;
//! - stdout and stderr arrive separated; arguments arrive byte for byte;
//!   `-i` forwards standard input;
//! - `exec n1 -- ibv_devinfo` reads the ibtca device;
//! - two execs at once on n1 both complete (they are serialized);
//! - an exec whose client is killed ends its command in the guest, and the
//!   next exec works; also when the agent, stopped from the console, did
//!   not see the client go before the next exec's HELLO came;
//! - an unknown node is a usage error (2); a missing `--` too;
//! - `console n1` with piped input: a line typed runs in the guest, its
//!   output comes back, and it is in n1.console as well; the end of the
//!   piped input detaches and the guest keeps running (exec works after).
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ibtca_tests::console::wait_for;
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;
use ibtca_tests::workspace_bin;

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 1 } ],
  "guest": { "mem": "512M" }
}"#;

/// `ibtca-fabric exec --run-dir RUN ARGS...` with `input` on stdin.
fn exec(run: &Path, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut cmd = Command::new(workspace_bin("ibtca-fabric"));
    cmd.args(["exec", "--run-dir", &run.display().to_string()])
        .args(["--agent-timeout", "900"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
    let mut child = cmd.spawn().expect("run ibtca-fabric exec");
    if let Some(bytes) = input {
        child.stdin.take().unwrap().write_all(bytes).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
#[ignore = "boots a QEMU guest; run by scripts/test.sh"]
fn exec_and_console_drive_a_running_guest() {
    let stack = VmStack::get();
    let dir = stack.scratch("exec");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let topo = dir.join("one.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(["--guest-timeout", "1800"].map(String::from));
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let up = fabric(&argv);
    let console = || std::fs::read_to_string(run.join("n1.console")).unwrap_or_default();
    assert!(up.status.success(), "up: {}", text(&up));

    // The first exec also waits for the guest to boot (the agent's bound).
    let start = Instant::now();
    let o = exec(&run, &["n1", "--", "sh", "-c", "echo hi; exit 3"], None);
    eprintln!("first exec after {:.0} s", start.elapsed().as_secs_f64());
    assert_eq!(
        (out(&o).as_str(), o.status.code()),
        ("hi\n", Some(3)),
        "stderr: {}\nconsole:\n{}",
        err(&o),
        console()
    );
    assert!(
        console().contains("IBTCA-AGENT /dev/vport"),
        "{}",
        console()
    );

    let o = exec(
        &run,
        &["n1", "--", "sh", "-c", "echo to-out; echo to-err >&2"],
        None,
    );
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        (out(&o).as_str(), err(&o).as_str()),
        ("to-out\n", "to-err\n")
    );

    let o = exec(
        &run,
        &["n1", "--", "printf", "%s|", "a  b", "$HOME", ""],
        None,
    );
    assert_eq!(out(&o), "a  b|$HOME||", "{}", err(&o));

    let o = exec(
        &run,
        &["-i", "n1", "--", "tr", "a-z", "A-Z"],
        Some(b"piped in\n"),
    );
    assert_eq!(out(&o), "PIPED IN\n", "{}", err(&o));

    let o = exec(&run, &["n1", "--", "ibv_devinfo"], None);
    assert!(o.status.success(), "ibv_devinfo: {}{}", out(&o), err(&o));
    assert!(out(&o).contains("hca_id:\tibtca0"), "{}", out(&o));

    // Two at once: both complete, each with its own output.
    let both: Vec<_> = ["A", "B"]
        .map(|tag| {
            let run = run.clone();
            std::thread::spawn(move || {
                let script = format!("echo {tag}1; sleep 1; echo {tag}2");
                exec(&run, &["n1", "--", "sh", "-c", &script], None)
            })
        })
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    for (o, tag) in both.iter().zip(["A", "B"]) {
        assert!(o.status.success(), "{}", err(o));
        assert_eq!(out(o), format!("{tag}1\n{tag}2\n"));
    }

    // A client that goes away: its command is killed in the guest.
    let mut victim = started_victim(&run_s, "7777");
    victim.kill().unwrap();
    victim.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let o = exec(&run, &["n1", "--", "ps"], None);
        assert!(o.status.success(), "{}", err(&o));
        if !out(&o).contains("sleep 7777") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "sleep 7777 still runs:\n{}",
            out(&o)
        );
    }

    // Usage errors.
    let o = exec(&run, &["nx", "--", "true"], None);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("ibtca-fabric: error: `nx` is no node of the fabric"),
        "{}",
        err(&o)
    );
    let o = exec(&run, &["n1", "true"], None);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));

    // The console, piped: a line typed runs in the guest.
    let mut c = Command::new(workspace_bin("ibtca-fabric"))
        .args(["console", "--run-dir", &run_s, "n1"])
        .args(["--until", "marker-42", "--timeout", "600"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(b"echo marker-$((6*7))\n")
        .unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "console: {}{}\nconsole file:\n{}",
        out(&o),
        err(&o),
        console()
    );
    assert!(out(&o).contains("marker-42"), "{}", out(&o));
    // QEMU writes the serial chardev's log file after the socket, so the
    // file may trail what the console client was sent: wait for it.
    wait_for(
        &run.join("n1.console"),
        "marker-42",
        1,
        Duration::from_secs(600),
    );

    // A client that goes away unseen: the agent is stopped (SIGSTOP from
    // the console) while its client is killed and the next exec connects,
    // so when it runs again it meets the next HELLO inside the old
    // session. It must end the old command and answer that HELLO at once,
    // not wait for more bytes from the port (which never come).
    let mut victim = started_victim(&run_s, "7778");
    console_line(
        &run_s,
        "mount -t debugfs none /sys/kernel/debug 2>/dev/null; \
         V=$(ls /sys/kernel/debug/virtio-ports/vport*); \
         R0=$(awk '/bytes_received/{print $2}' $V); \
         A=$(pidof ibtca-agent); kill -STOP $A; echo agent-stopped-$((6*7))",
        "agent-stopped-42",
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    let next = Command::new(workspace_bin("ibtca-fabric"))
        .args(["exec", "--run-dir", &run_s, "--agent-timeout", "900"])
        .args(["n1", "--", "echo", "answered"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The next exec's HELLO is in the guest (the port received bytes) before
    // the agent runs again.
    console_line(
        &run_s,
        "while [ \"$(awk '/bytes_received/{print $2}' $V)\" = \"$R0\" ]; \
         do sleep 0.2; done; kill -CONT $A; echo agent-resumed-$((6*7))",
        "agent-resumed-42",
    );
    let o = next.wait_with_output().unwrap();
    assert_eq!(
        (out(&o).as_str(), o.status.code()),
        ("answered\n", Some(0)),
        "the exec after a client that went away unseen: {}\nconsole:\n{}",
        err(&o),
        console()
    );
    let o = exec(&run, &["n1", "--", "ps"], None);
    assert!(!out(&o).contains("sleep 7778"), "{}", out(&o));

    // The end of piped input detaches; the guest keeps running.
    let mut c = Command::new(workspace_bin("ibtca-fabric"))
        .args(["console", "--run-dir", &run_s, "n1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"true\n").unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", err(&o));
    let o = exec(&run, &["n1", "--", "echo", "still here"], None);
    assert_eq!(out(&o), "still here\n", "{}", err(&o));

    drop(down);
    let o = exec(&run, &["n1", "--", "true"], None);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(err(&o).contains("no fabric is up in"), "{}", err(&o));
}

/// Types `line` on n1's console and waits (600 s at most) until the guest
/// printed `until`.
fn console_line(run_s: &str, line: &str, until: &str) {
    let mut c = Command::new(workspace_bin("ibtca-fabric"))
        .args(["console", "--run-dir", run_s, "n1"])
        .args(["--until", until, "--timeout", "600"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = c.stdin.take().unwrap();
    input.write_all(line.as_bytes()).unwrap();
    input.write_all(b"\n").unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "console `{line}`: {}{}",
        out(&o),
        err(&o)
    );
}

/// An exec on n1 of `sh -c 'echo started; exec sleep SECONDS'`, once the
/// guest has printed "started": a client to kill while its command runs.
fn started_victim(run_s: &str, seconds: &str) -> std::process::Child {
    let mut victim = Command::new(workspace_bin("ibtca-fabric"))
        .args(["exec", "--run-dir", run_s, "n1", "--", "sh", "-c"])
        .arg(format!("echo started; exec sleep {seconds}"))
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(victim.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "started\n");
    victim
}
