//! Driving the `ibtca-fabric` binary from tests: run it, find the shipped
//! topologies, take a fabric down whatever happens, and check that a bad
//! topology is refused before anything starts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::{workspace_bin, TempDir};

/// Runs `ibtca-fabric` with `args` and collects its output.
pub fn fabric(args: &[&str]) -> Output {
    Command::new(workspace_bin("ibtca-fabric"))
        .args(args)
        .output()
        .expect("run ibtca-fabric")
}

/// Runs `ibtca-fabric` with `args` and asserts that it succeeded.
pub fn fabric_ok(args: &[&str]) {
    let out = fabric(args);
    assert!(
        out.status.success(),
        "ibtca-fabric {args:?}: {}",
        text(&out)
    );
}

/// stdout followed by stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `ibtca-fabric up --net FILE --run-dir RUN` with `extra`
/// arguments, asserting that it succeeded; its stdout.
pub fn up_net(file: &Path, run: &Path, extra: &[&str]) -> String {
    let (f, r) = (file.display().to_string(), run.display().to_string());
    let mut args = vec!["up", "--net", &f, "--run-dir", &r];
    args.extend(extra);
    let out = fabric(&args);
    assert!(out.status.success(), "up --net {f}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Path of a topology shipped in `qemu-configs/`.
pub fn config(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../qemu-configs")
        .join(name)
        .display()
        .to_string()
}

/// Runs `ibtca-fabric down` for a run directory when dropped, whatever
/// happened. When the test is failing, the end of every guest's console
/// (`NODE.console` in the run directory) goes to stderr first, so a failed
/// run says what the guests were doing before the directory is removed.
pub struct Down(pub PathBuf);

impl Drop for Down {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_console_tails(&self.0);
        }
        let _ = fabric(&["down", "--run-dir", &self.0.display().to_string()]);
    }
}

/// The last lines of each `*.console` file in `run`, on stderr.
fn print_console_tails(run: &Path) {
    const LINES: usize = 60;
    let Ok(dir) = std::fs::read_dir(run) else {
        return;
    };
    let mut consoles: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "console"))
        .collect();
    consoles.sort();
    for path in consoles {
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LINES)..];
        eprintln!("--- last {} lines of {} ---", tail.len(), path.display());
        for line in tail {
            eprintln!("{line}");
        }
    }
}

/// A fabric `ibtca-fabric up` started, taken down when dropped.
pub struct Up {
    /// Its run directory.
    pub run: PathBuf,
    /// What `up` printed on stdout.
    pub stdout: String,
    _down: Down,
}

/// Runs `ibtca-fabric up TOPOLOGY --run-dir DIR/run` (TOPOLOGY a file's
/// path, say from [`config`]) and asserts that it succeeded; the fabric
/// goes down when the result is dropped, and also if `up` failed halfway.
pub fn up(topology: &str, dir: &TempDir) -> Up {
    let run = dir.join("run");
    let down = Down(run.clone());
    let out = fabric(&["up", topology, "--run-dir", &run.display().to_string()]);
    assert!(out.status.success(), "up {topology} failed: {}", text(&out));
    Up {
        run,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        _down: down,
    }
}

/// [`up`] of the topology `json`, written as `topology.json` in `dir`.
pub fn up_json(json: &str, dir: &TempDir) -> Up {
    let file = dir.join("topology.json");
    std::fs::write(&file, json).unwrap();
    up(&file.display().to_string(), dir)
}

/// Writes `json` as a topology in `dir`, runs `ibtca-fabric up` on it and
/// asserts that it fails without creating its run directory; returns the
/// error output for the caller to check.
pub fn up_refused(dir: &TempDir, json: &str) -> String {
    let file = dir.join("bad.json");
    std::fs::write(&file, json).unwrap();
    let run = dir.join("run");
    let out = fabric(&[
        "up",
        &file.display().to_string(),
        "--run-dir",
        &run.display().to_string(),
    ]);
    assert!(!out.status.success(), "up accepted {json}: {}", text(&out));
    assert!(!run.exists(), "nothing was created, let alone started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether process `pid` (one the launcher started) still runs: it exists
/// and is not a zombie.
pub fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty()
        && !stat
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
}

/// A VM stack of stand-ins for `up --guests` without QEMU: a chroot with
/// an empty `qemu-system-x86_64`, a cache naming it, a guest directory
/// with a kernel and initramfs, and a `run-vm.sh` that starts a `sleep`
/// (its child, as QEMU is run-vm.sh's) and then writes `booted PID` to the
/// guest's console.
pub struct StandInStack {
    /// The stand-in chroot (run directories go inside it).
    pub chroot: PathBuf,
    cache: PathBuf,
    guest: PathBuf,
    /// The stand-in `run-vm.sh`.
    pub run_vm: PathBuf,
}

impl StandInStack {
    /// The stand-ins, in `dir`.
    pub fn new(dir: &TempDir) -> Self {
        let chroot = dir.join("chroot");
        let cache = dir.join("cache");
        let guest = dir.join("guest");
        for d in [
            chroot.join("usr/bin"),
            chroot.join("tmp"),
            cache.clone(),
            guest.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(chroot.join("usr/bin/qemu-system-x86_64"), "").unwrap();
        std::fs::write(
            cache.join("stack.env"),
            format!("IBTCA_CHROOT={}\n", chroot.display()),
        )
        .unwrap();
        std::fs::write(guest.join("vmlinuz"), "k").unwrap();
        std::fs::write(guest.join("initramfs.cpio.gz"), "i").unwrap();
        let run_vm = dir.join("run-vm.sh");
        std::fs::write(
            &run_vm,
            "while [ $# -gt 0 ]; do [ \"$1\" = --serial-log ] && log=$2; shift; done\n\
             sleep 600 &\necho \"booted $$\" > \"$log\"\nwait\n",
        )
        .unwrap();
        StandInStack {
            chroot,
            cache,
            guest,
            run_vm,
        }
    }

    /// Runs `ibtca-fabric up TOPOLOGY --run-dir RUN --guests` with the
    /// stand-in `run-vm.sh` and asserts that it succeeded.
    pub fn up_guests(&self, topology: &str, run: &Path) {
        let out = self.fabric(&[
            "up",
            topology,
            "--run-dir",
            &run.display().to_string(),
            "--guests",
            "--run-vm",
            &self.run_vm.display().to_string(),
        ]);
        assert!(out.status.success(), "up failed: {}", text(&out));
    }

    /// Runs `ibtca-fabric` with `args` on the stand-in stack.
    pub fn fabric(&self, args: &[&str]) -> Output {
        Command::new(workspace_bin("ibtca-fabric"))
            .args(args)
            .env("IBTCA_CACHE", &self.cache)
            .env("IBTCA_GUEST_DIR", &self.guest)
            .output()
            .expect("run ibtca-fabric")
    }
}
