//! `ibtca-fabric console NODE`, the real binary, without a guest: the test
//! stands in for QEMU's serial chardev (it serves the Unix socket
//! `n1.console.sock` of a run directory whose state file records a guest on
//! n1) and for the user's terminal (a pseudo-terminal it opens).
//!
//! - On a terminal: the terminal is raw while attached (keys reach the
//!   guest unbuffered, Ctrl-C as a byte), the guest's output reaches the
//!   terminal, and Ctrl-] (0x1d, docs/exec-console.md) detaches: the keys
//!   before it reach the guest, those after it do not, the client exits 0
//!   and the terminal's settings are back as they were.
//! - Piped: the bytes go as they are (0x1d included), `--until` ends the
//!   session once the guest printed the text (exit 0) and a second session
//!   is refused meanwhile (exit 1); the end of the input detaches (exit 0);
//!   a guest that closes is named (exit 1); a node without a guest is
//!   refused (exit 1), a node the fabric lacks is a usage error (exit 2).

use std::ffi::CStr;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ibtca_fabric::guest_channels::console_socket;
use ibtca_fabric::state::{Started, State, TOPOLOGY_FILE};

const BIN: &str = env!("CARGO_BIN_EXE_ibtca-fabric");

/// The documented detach key, Ctrl-].
const CTRL_CLOSE_BRACKET: u8 = 0x1d;

/// How long a step may wait for the console before the test names it as
/// failed: reached only by a console that does not do its part.
const BOUND: Duration = Duration::from_secs(300);

/// A run directory whose fabric has nodes n1 (with a guest, this process
/// standing in for its run-vm.sh) and n2 (without), and n1's console
/// socket, served by the test.
struct Fabric {
    dir: PathBuf,
    listener: UnixListener,
}

impl Fabric {
    fn new(name: &str) -> Fabric {
        let dir = std::env::temp_dir().join(format!("ibtca-console-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(TOPOLOGY_FILE),
            r#"{ "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ] }"#,
        )
        .unwrap();
        State {
            topology: dir.join("topology.json"),
            processes: vec![Started {
                name: "n1 (guest)".into(),
                exe: "bash".into(),
                pid: std::process::id(),
                log: dir.join("n1.log"),
                guest: true,
                args: Vec::new(),
                console: Some(dir.join("n1.console")),
            }],
            mounts: Vec::new(),
        }
        .save(&dir)
        .unwrap();
        let listener = UnixListener::bind(console_socket(&dir, "n1")).unwrap();
        listener.set_nonblocking(true).unwrap();
        Fabric { dir, listener }
    }

    /// `ibtca-fabric console --run-dir DIR ARGS...`.
    fn console(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.arg("console").arg("--run-dir").arg(&self.dir).args(args);
        c
    }

    /// The guest's end of the connection `client` makes.
    fn accept(&self, client: &mut Running) -> UnixStream {
        let start = Instant::now();
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false).unwrap();
                    s.set_read_timeout(Some(BOUND)).unwrap();
                    return s;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if let Some(st) = client.0.as_mut().unwrap().try_wait().unwrap() {
                        panic!("the console ended ({st}) without connecting");
                    }
                    assert!(start.elapsed() < BOUND, "the console did not connect");
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        }
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A console client, killed if the test ends before it does.
struct Running(Option<Child>);

impl Running {
    fn spawn(cmd: &mut Command) -> Running {
        Running(Some(cmd.spawn().unwrap()))
    }

    fn child(&mut self) -> &mut Child {
        self.0.as_mut().unwrap()
    }

    /// Waits for the client's end; its status and what it printed (its
    /// standard input, if still held, stays open until then).
    fn finish(mut self) -> Output {
        let mut child = self.0.take().unwrap();
        let input = child.stdin.take();
        let out = child.wait_with_output().unwrap();
        drop(input);
        out
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A pseudo-terminal: its master (the test's keyboard and screen) and its
/// slave (the console's standard input and output).
fn pty() -> (File, File) {
    // SAFETY: posix_openpt takes flags only.
    let fd = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` was just opened and nothing else owns it.
    let master = unsafe { File::from_raw_fd(fd) };
    // SAFETY: grantpt and unlockpt take the master's descriptor only.
    assert_eq!(unsafe { libc::grantpt(fd) }, 0, "grantpt");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::unlockpt(fd) }, 0, "unlockpt");
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: `name` is a writable buffer of the length given.
    let rc = unsafe { libc::ptsname_r(fd, name.as_mut_ptr(), name.len()) };
    assert_eq!(rc, 0, "ptsname_r");
    // SAFETY: ptsname_r succeeded, so `name` holds a NUL-terminated string.
    let path = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    let slave = File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .unwrap();
    (master, slave)
}

/// A terminal's input, output and local modes and its control characters.
type Settings = (
    libc::tcflag_t,
    libc::tcflag_t,
    libc::tcflag_t,
    Vec<libc::cc_t>,
);

/// The settings of terminal `tty` that raw mode changes.
fn settings(tty: &File) -> Settings {
    // SAFETY: an all-zero termios is a valid value to be overwritten.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `tty` is an open terminal and `t` a valid termios to fill.
    assert_eq!(unsafe { libc::tcgetattr(tty.as_raw_fd(), &mut t) }, 0);
    (t.c_iflag, t.c_oflag, t.c_lflag, t.c_cc.to_vec())
}

/// Reads what the terminal shows (the pty's master) until `want` appeared.
fn shown(screen: &mpsc::Receiver<Vec<u8>>, want: &[u8]) {
    let mut seen = Vec::new();
    while !seen.windows(want.len()).any(|w| w == want) {
        match screen.recv_timeout(BOUND) {
            Ok(chunk) => seen.extend(chunk),
            Err(e) => panic!("{:?} not shown ({e}); shown: {:?}", text(want), text(&seen)),
        }
    }
}

#[test]
fn on_a_terminal_keys_go_raw_and_ctrl_close_bracket_detaches_restoring_the_terminal() {
    let fab = Fabric::new("tty");
    let (mut keyboard, tty) = pty();
    let before = settings(&tty);
    assert_ne!(
        before.2 & libc::ICANON,
        0,
        "a new pty starts in canonical mode"
    );
    let mut client = Running::spawn(
        fab.console(&["n1"])
            .stdin(tty.try_clone().unwrap())
            .stdout(tty.try_clone().unwrap())
            .stderr(Stdio::piped()),
    );
    let mut guest = fab.accept(&mut client);
    // The client says how to detach once the terminal is raw.
    let mut stderr = BufReader::new(client.child().stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    assert!(banner.contains("detach with Ctrl-]"), "{banner:?}");
    let raw = settings(&tty);
    assert_eq!(
        raw.2 & (libc::ICANON | libc::ECHO | libc::ISIG),
        0,
        "the terminal is not raw while attached"
    );

    // The guest's output reaches the terminal.
    let (tx, screen) = mpsc::channel();
    let mut master = keyboard.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        // Ends when the test closes its slave (EIO).
        while let Ok(n @ 1..) = master.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    guest.write_all(b"debian login: ").unwrap();
    shown(&screen, b"debian login: ");

    // Keys reach the guest as typed: no line to wait for, Ctrl-C a byte.
    keyboard.write_all(b"ls\x03").unwrap();
    let mut got = [0u8; 3];
    guest.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"ls\x03");

    // Ctrl-] detaches: what came before it is sent, nothing after it.
    keyboard
        .write_all(&[b'x', CTRL_CLOSE_BRACKET, b'y', b'z'])
        .unwrap();
    let mut after = Vec::new();
    loop {
        let mut buf = [0u8; 64];
        let n = guest.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        after.extend_from_slice(&buf[..n]);
        assert!(
            !after.contains(&b'y'),
            "keys after Ctrl-] reached the guest: {after:?}"
        );
    }
    assert_eq!(
        after, b"x",
        "the guest got {after:?} before the client went"
    );
    let status = client.child().wait().unwrap();
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap();
    assert_eq!(status.code(), Some(0), "detaching: {rest}");
    assert_eq!(
        settings(&tty),
        before,
        "the terminal's settings after detaching"
    );
}

#[test]
fn piped_bytes_go_as_they_are_and_until_ends_the_session_while_a_second_is_refused() {
    let fab = Fabric::new("until");
    let mut a = Running::spawn(
        fab.console(&["n1", "--until", "marker-42", "--timeout", "600"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut guest = fab.accept(&mut a);
    // The client took the console before it connected: a second is refused.
    let b = fab.console(&["n1"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(b.status.code(), Some(1), "{}", text(&b.stderr));
    assert!(
        text(&b.stderr).contains("the console of `n1` is attached elsewhere"),
        "{}",
        text(&b.stderr)
    );
    // Piped input has no detach key; its end does not end an --until
    // session.
    let line = [&b"echo marker-$((6*7)) "[..], &[CTRL_CLOSE_BRACKET], b"\n"].concat();
    let mut input = a.child().stdin.take().unwrap();
    input.write_all(&line).unwrap();
    drop(input);
    let mut got = vec![0u8; line.len()];
    guest
        .read_exact(&mut got)
        .unwrap_or_else(|e| panic!("the piped line did not arrive whole (0x1d detached?): {e}"));
    assert_eq!(got, line);
    // The echo does not end the session; the answer does, split or not.
    guest
        .write_all(b"echo marker-$((6*7))\r\nmarker-4")
        .unwrap();
    guest.write_all(b"2\r\n").unwrap();
    let o = a.finish();
    assert!(o.status.success(), "{:?}: {}", o.status, text(&o.stderr));
    assert!(text(&o.stdout).contains("marker-42"), "{}", text(&o.stdout));
}

#[test]
fn the_end_of_piped_input_detaches() {
    let fab = Fabric::new("eof");
    let mut c = Running::spawn(
        fab.console(&["n1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut guest = fab.accept(&mut c);
    let mut input = c.child().stdin.take().unwrap();
    input.write_all(b"true\n").unwrap();
    drop(input);
    let mut got = Vec::new();
    guest.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"true\n");
    let o = c.finish();
    assert!(o.status.success(), "{:?}: {}", o.status, text(&o.stderr));
}

#[test]
fn a_guest_that_closes_its_console_is_named() {
    let fab = Fabric::new("closed");
    let mut c = Running::spawn(
        fab.console(&["n1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    drop(fab.accept(&mut c));
    // Its input stays open until it ended: the close alone ends it.
    let o = c.finish();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("the console of `n1` closed: the guest stopped"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn nodes_without_a_guest_or_outside_the_fabric_are_refused() {
    let fab = Fabric::new("nodes");
    let o = fab.console(&["n2"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("node `n2` has no guest"),
        "{}",
        text(&o.stderr)
    );
    let o = fab.console(&["n9"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("`n9` is no node of the fabric"),
        "{}",
        text(&o.stderr)
    );
}
