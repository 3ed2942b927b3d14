//! Full-stack harness: the VM stack installed by `scripts/setup-vm-stack.sh`,
//! guest artefacts from `scripts/build-guest.sh`, `ibtca-device` processes
//! and QEMU guests started through `scripts/run-vm.sh`.
//!
//! Everything that QEMU must see (sockets, kernel, initramfs) lives inside
//! the chroot's `/tmp`; paths are host paths and `run-vm.sh` translates them.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::vm_lock::{lock_path, VmLock};
use crate::{workspace_bin, TempDir};

/// The installed VM stack and built guest artefacts.
#[derive(Debug, Clone)]
pub struct VmStack {
    /// Root of the chroot QEMU runs in.
    pub chroot: PathBuf,
    /// Guest kernel.
    pub kernel: PathBuf,
    /// Guest initramfs (busybox, /init, ibtca.ko, ibtca-tool).
    pub initrd: PathBuf,
    repo: PathBuf,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn cache_dir() -> PathBuf {
    std::env::var_os("IBTCA_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/ibtca")
        })
}

/// The VM stack, for a test that boots guests, with the test's
/// [`VmLock`] held until it is dropped: no other test, in this process or
/// another, boots guests meanwhile.
pub struct LockedStack {
    stack: &'static VmStack,
    _lock: VmLock,
}

impl std::ops::Deref for LockedStack {
    type Target = VmStack;
    fn deref(&self) -> &VmStack {
        self.stack
    }
}

impl VmStack {
    /// Takes the VM lock ([`crate::vm_lock`]; a VM test calls this first,
    /// and holds what it returns to its end), finds the stack and builds
    /// the guest artefacts (once per process). Panics with the command to
    /// run if the stack is not installed.
    pub fn get() -> LockedStack {
        let lock = VmLock::acquire(&lock_path(&cache_dir()));
        LockedStack {
            stack: Self::find(),
            _lock: lock,
        }
    }

    fn find() -> &'static VmStack {
        static STACK: OnceLock<VmStack> = OnceLock::new();
        STACK.get_or_init(|| {
            let cache = cache_dir();
            let env = std::fs::read_to_string(cache.join("stack.env")).unwrap_or_else(|_| {
                panic!(
                    "no VM stack in {}: run scripts/setup-vm-stack.sh (scripts/test.sh does)",
                    cache.display()
                )
            });
            let chroot = env
                .lines()
                .find_map(|l| l.strip_prefix("IBTCA_CHROOT="))
                .map(PathBuf::from)
                .expect("stack.env has IBTCA_CHROOT");
            let repo = repo_root();
            // IBTCA_GUEST_DIR keeps the guest artefacts of one checkout apart
            // from another's (two worktrees testing different drivers).
            let guest = std::env::var_os("IBTCA_GUEST_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| cache.join("guest"));
            let st = Command::new("bash")
                .arg(repo.join("scripts/build-guest.sh"))
                .arg(&guest)
                .status()
                .expect("run build-guest.sh");
            assert!(st.success(), "scripts/build-guest.sh failed");
            VmStack {
                chroot: std::fs::canonicalize(chroot).unwrap(),
                kernel: guest.join("vmlinuz"),
                initrd: guest.join("initramfs.cpio.gz"),
                repo,
            }
        })
    }

    /// The source tree (its `scripts/`).
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// The VM stack's cache (`IBTCA_CACHE`, or `~/.cache/ibtca`), outside
    /// every clone.
    pub fn cache(&self) -> PathBuf {
        cache_dir()
    }

    /// The start of `ibtca-fabric up TOPOLOGY --run-dir RUN_DIR --guests`
    /// with this stack's kernel and initramfs and this checkout's
    /// `run-vm.sh` (wherever the binaries were built); callers add their
    /// own options.
    pub fn guests_up(&self, topology: &str, run_dir: &str) -> Vec<String> {
        [
            "up",
            topology,
            "--run-dir",
            run_dir,
            "--guests",
            "--kernel",
            &self.kernel.display().to_string(),
            "--initrd",
            &self.initrd.display().to_string(),
            "--run-vm",
            &self.repo.join("scripts/run-vm.sh").display().to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// A scratch directory inside the chroot (visible to QEMU).
    pub fn scratch(&self, tag: &str) -> TempDir {
        TempDir::new_in(Some(&self.chroot.join("tmp")), tag)
    }

    /// `path` (inside the chroot) as QEMU, running chrooted, sees it.
    pub fn in_chroot(&self, path: &Path) -> String {
        let inner = path
            .strip_prefix(&self.chroot)
            .unwrap_or_else(|_| panic!("{} is not in the chroot", path.display()));
        Path::new("/").join(inner).display().to_string()
    }

    /// Boots a guest with one device per socket and returns when it powers
    /// off (or `timeout` expires).
    pub fn boot(&self, vm: &VmConfig) -> VmRun {
        let mut cmd = Command::new("bash");
        cmd.arg(self.repo.join("scripts/run-vm.sh"));
        for s in &vm.sockets {
            cmd.arg("--socket").arg(s);
        }
        cmd.arg("--kernel")
            .arg(&self.kernel)
            .arg("--initrd")
            .arg(&self.initrd)
            .arg("--append")
            .arg(&vm.append)
            .arg("--mem")
            .arg(&vm.mem)
            .arg("--timeout")
            .arg(vm.timeout.as_secs().to_string());
        if let Some(sig) = &vm.timeout_signal {
            cmd.arg("--timeout-signal").arg(sig);
        }
        if let Some(cpus) = &vm.cpu_affinity {
            cmd.arg("--cpu-affinity").arg(cpus);
        }
        if let Some(nice) = vm.nice {
            cmd.arg("--nice").arg(nice.to_string());
        }
        if let Some(log) = &vm.serial_log {
            cmd.arg("--serial-log").arg(log);
        }
        if !vm.qemu_args.is_empty() {
            cmd.arg("--").args(&vm.qemu_args);
        }
        let start = Instant::now();
        let out = cmd.stderr(Stdio::inherit()).output().expect("run-vm.sh");
        let serial = match &vm.serial_log {
            // The console went to the file (run-vm.sh --serial-log).
            Some(log) => std::fs::read_to_string(log).unwrap_or_default(),
            None => String::from_utf8_lossy(&out.stdout).into_owned(),
        };
        VmRun {
            serial,
            status: out.status.code(),
            elapsed: start.elapsed(),
        }
    }
}

/// How to boot one guest.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// One ibtca device per socket.
    pub sockets: Vec<PathBuf>,
    /// Kernel command line additions (e.g. `ibtca.mode=foundation`).
    pub append: String,
    /// Guest RAM.
    pub mem: String,
    /// Upper bound for the whole boot.
    pub timeout: Duration,
    /// CPUs for QEMU (taskset list), if pinned.
    pub cpu_affinity: Option<String>,
    /// QEMU's niceness (run-vm.sh `--nice`), if not the caller's.
    pub nice: Option<i8>,
    /// Signal QEMU gets at the timeout (default TERM; KILL simulates a crash).
    pub timeout_signal: Option<String>,
    /// Also write the serial console to this file as it happens (inside
    /// the chroot), for tests that act on what the guest prints.
    pub serial_log: Option<PathBuf>,
    /// More QEMU arguments (paths as QEMU sees them: [`VmStack::in_chroot`]).
    pub qemu_args: Vec<String>,
}

impl VmConfig {
    /// One device, the given guest mode, 512 MiB, 300 s.
    pub fn new(socket: &Path, mode: &str) -> Self {
        VmConfig {
            sockets: vec![socket.to_path_buf()],
            append: format!("ibtca.mode={mode}"),
            mem: "512M".into(),
            timeout: Duration::from_secs(300),
            cpu_affinity: None,
            nice: None,
            timeout_signal: None,
            serial_log: None,
            qemu_args: Vec::new(),
        }
    }
}

/// What a guest printed.
#[derive(Debug)]
pub struct VmRun {
    /// Serial console.
    pub serial: String,
    /// run-vm.sh exit status (124: timeout).
    pub status: Option<i32>,
    /// Wall time.
    pub elapsed: Duration,
}

impl VmRun {
    /// Lines that contain `needle`.
    pub fn lines_with<'a>(&'a self, needle: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.serial.lines().filter(move |l| l.contains(needle))
    }

    /// Panics (showing the console) unless some line contains `needle`.
    pub fn expect_line<'a>(&'a self, needle: &'a str) -> &'a str {
        self.lines_with(needle)
            .next()
            .unwrap_or_else(|| panic!("guest never printed {needle:?}; console:\n{}", self.serial))
    }

    /// The value of `key=` on the first line that contains `needle`.
    pub fn field(&self, needle: &str, key: &str) -> Option<String> {
        let line = self.lines_with(needle).next()?;
        let pat = format!("{key}=");
        let at = line.find(&pat)? + pat.len();
        Some(line[at..].split_whitespace().next()?.to_string())
    }
}

/// An `ibtca-device` process.
pub struct DeviceProcess {
    child: Child,
    /// Its socket.
    pub socket: PathBuf,
    /// Its log (stderr).
    pub log: PathBuf,
}

impl DeviceProcess {
    /// Starts `ibtca-device --socket SOCKET` (optionally under `taskset`),
    /// logging to `SOCKET.log`, and waits for the socket.
    pub fn start(socket: &Path, cpus: Option<&str>, extra: &[&str]) -> Self {
        let log = socket.with_extension("log");
        let logf = std::fs::File::create(&log).unwrap();
        let bin = workspace_bin("ibtca-device");
        let mut cmd = match cpus {
            Some(c) => {
                let mut t = Command::new("taskset");
                t.arg("-c").arg(c).arg(bin);
                t
            }
            None => Command::new(bin),
        };
        let child = cmd
            .arg("--socket")
            .arg(socket)
            .args(extra)
            .stderr(logf)
            .stdout(Stdio::null())
            .spawn()
            .expect("start ibtca-device");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "ibtca-device never created {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        DeviceProcess {
            child,
            socket: socket.to_path_buf(),
            log,
        }
    }

    /// True while the process runs.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Sends SIGTERM and waits; returns true on a clean exit.
    pub fn stop(mut self) -> bool {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// The log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for DeviceProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks a guest run of a two-guest scenario whose tool prints
/// `<tag> <check> PASS|FAIL ...` lines, `<tag>-SUMMARY N passed, M failed`
/// and whose init prints `<tag>-RC`: QEMU powered off cleanly, the module
/// loaded and probed, every check in `checks` passed and none failed, the
/// driver logged no warning or error, and the module unloaded. `logs` (the
/// device logs) is shown on failure; the tagged lines are echoed.
pub fn check_scenario(tag: &str, role: &str, run: &VmRun, checks: &[&str], logs: &str) {
    let ctx = format!("{role} guest");
    let dump = format!("{ctx} console:\n{}\n{logs}", run.serial);
    assert_eq!(
        run.status,
        Some(0),
        "{ctx}: QEMU did not power off cleanly\n{dump}"
    );
    run.expect_line("IBTCA-INSMOD ok");
    run.expect_line("ibtca: probe ");
    for name in checks {
        let pass = format!("{tag} {name} PASS");
        assert!(
            run.serial.lines().any(|l| l.starts_with(&pass)),
            "{ctx}: no {pass:?}\n{dump}"
        );
    }
    let tagged = format!("{tag} ");
    let fails: Vec<&str> = run
        .lines_with(&tagged)
        .filter(|l| l.contains(" FAIL"))
        .collect();
    assert!(fails.is_empty(), "{ctx}: failed checks {fails:?}\n{dump}");
    let summary_tag = format!("{tag}-SUMMARY ");
    let summary = run.expect_line(&summary_tag);
    assert!(
        summary.ends_with(&format!("{} passed, 0 failed", checks.len())),
        "{ctx}: {summary}\n{dump}"
    );
    run.expect_line(&format!("{tag}-RC 0"));
    // The driver's warnings and errors (init greps dmesg): no command
    // timed out, no object was left behind.
    let driver_errors: Vec<&str> = run
        .lines_with("IBTCA-DMESG ")
        .filter(|l| !l.contains("module verification failed"))
        .collect();
    assert!(
        driver_errors.is_empty(),
        "{ctx}: driver complained {driver_errors:?}\n{dump}"
    );
    run.expect_line("IBTCA-UNLOAD ok");
    run.expect_line("IBTCA-GUEST done");
    for l in run
        .serial
        .lines()
        .filter(|l| l.contains(tag) || l.contains("IBTCA-DMESG"))
    {
        eprintln!("{role}: {l}");
    }
}

/// The checks the server guest of `ibtca-verbs verbs` must pass.
pub const VERBS_SERVER_CHECKS: &[&str] = &[
    "setup",
    "exchange",
    "rdma_write_data",
    "atomics_memory",
    "bad_rkey_unchanged",
    "bye",
    "teardown_qp_reset",
    "teardown_pd_busy",
    "teardown",
];

/// The checks the client guest of `ibtca-verbs verbs` must pass.
pub const VERBS_CLIENT_CHECKS: &[&str] = &[
    "setup",
    "exchange",
    "rdma_write",
    "rdma_write_remote",
    "rdma_read",
    "fetch_add",
    "cmp_swap",
    "cmp_swap_miss",
    "atomics_remote",
    "bad_rkey",
    "bad_rkey_remote_unchanged",
    "bye",
    "teardown_qp_reset",
    "teardown_pd_busy",
    "teardown",
];

/// One guest of a multi-guest run: its device, how the tests name it,
/// its kernel command line and the checks its console must show.
struct GuestPlan<'a> {
    dev: DeviceProcess,
    who: String,
    append: String,
    checks: &'a [&'a str],
}

/// Starts `ibtca-device` on `DIR/NAME.sock` with LID `lid`, link `link`
/// and the caller's `extra` arguments.
fn start_linked_device(
    dir: &Path,
    name: &str,
    lid: u16,
    link: String,
    extra: &[&str],
) -> DeviceProcess {
    let mut args = vec![
        "--lid".to_owned(),
        lid.to_string(),
        "--link".to_owned(),
        link,
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    DeviceProcess::start(&dir.join(format!("{name}.sock")), None, &refs)
}

/// Boots one guest per plan at once (the devices were started with
/// `extra`), checks every console with [`check_scenario`] under `tag`, then that every device is still alive
/// and stops cleanly on SIGTERM.
fn boot_and_check(
    stack: &VmStack,
    mode: &str,
    tag: &str,
    extra: &[&str],
    timeout: Duration,
    plans: Vec<GuestPlan>,
) {
    let vms: Vec<VmConfig> = plans
        .iter()
        .map(|p| {
            let mut vm = VmConfig::new(&p.dev.socket, mode);
            vm.append = p.append.clone();
            vm.timeout = timeout;
            vm
        })
        .collect();
    let runs: Vec<VmRun> = std::thread::scope(|s| {
        let handles: Vec<_> = vms.iter().map(|vm| s.spawn(|| stack.boot(vm))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (p, run) in plans.iter().zip(&runs) {
        eprintln!(
            "{mode} {extra:?}: {} guest {:.1} s",
            p.who,
            run.elapsed.as_secs_f64()
        );
    }
    let logs: String = plans
        .iter()
        .map(|p| format!("device of the {} log:\n{}\n", p.who, p.dev.log_text()))
        .collect();
    for (p, run) in plans.iter().zip(&runs) {
        check_scenario(tag, &p.who, run, p.checks, &logs);
    }
    for mut p in plans {
        assert!(p.dev.alive(), "device of the {} died:\n{logs}", p.who);
        assert!(
            p.dev.stop(),
            "device of the {} did not exit cleanly on SIGTERM",
            p.who
        );
    }
}

/// Two `ibtca-device` processes joined by a link (LIDs 1 and 2, each also
/// given `extra` arguments), one guest on each in `mode` — the server on
/// LID 1, the client on LID 2 — booted at once; checks both consoles with
/// [`check_scenario`] under `tag`, then that both devices are still alive
/// and stop cleanly on SIGTERM.
pub fn run_guest_pair(
    mode: &str,
    tag: &str,
    extra: &[&str],
    timeout: Duration,
    server_checks: &[&str],
    client_checks: &[&str],
) {
    let stack = VmStack::get();
    let dir = stack.scratch(mode);
    let link = dir.join("ab.link");
    let a = start_linked_device(&dir.0, "a", 1, format!("listen:{}", link.display()), extra);
    let b = start_linked_device(&dir.0, "b", 2, format!("connect:{}", link.display()), extra);
    let plan = |dev, who: &str, role: &str, peer_lid: u16, checks| GuestPlan {
        dev,
        who: who.to_owned(),
        append: format!("ibtca.mode={mode} ibtca.role={role} ibtca.peer_lid={peer_lid}"),
        checks,
    };
    let plans = vec![
        plan(a, "server", "server", 2, server_checks),
        plan(b, "client", "client", 1, client_checks),
    ];
    boot_and_check(&stack, mode, tag, extra, timeout, plans);
}

/// Three `ibtca-device` processes (LIDs 1, 2 and 3, each also given
/// `extra` arguments) on one in-process `ibtca-switch`, one guest on each
/// in `mode`, booted at once: the server on LID 1 (`ibtca.peer_lid=2,3`),
/// clients on LIDs 2 and 3 (`ibtca.peer_lid=1`, `ibtca.peer_index=0` and
/// `1`). Checks the three consoles with [`check_scenario`] under `tag`,
/// then that every device is still alive and stops cleanly on SIGTERM.
pub fn run_guest_trio(
    mode: &str,
    tag: &str,
    extra: &[&str],
    timeout: Duration,
    server_checks: &[&str],
    client_checks: &[&str],
) {
    use ibtca_device::link::{LinkConfig, LinkEndpoint};
    use ibtca_switch::{PortConfig, Switch, SwitchConfig};

    let stack = VmStack::get();
    let dir = stack.scratch(mode);
    let port = |lid: u16| dir.join(&format!("sw-p{lid}.link"));
    let switch = Switch::start(SwitchConfig {
        name: "sw0".into(),
        guid: ibtca_device::guid::FABRIC_SWITCH_BASE + 1,
        lid: 0,
        ports: (1..=3)
            .map(|lid| PortConfig::new(LinkEndpoint::Listen(port(lid))))
            .collect(),
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .expect("switch starts");
    let plans = (1..=3u16)
        .map(|lid| {
            let link = format!("connect:{}", port(lid).display());
            let dev = start_linked_device(&dir.0, &format!("n{lid}"), lid, link, extra);
            let (who, append, checks) = match lid {
                1 => (
                    "server (LID 1)".to_owned(),
                    format!("ibtca.mode={mode} ibtca.role=server ibtca.peer_lid=2,3"),
                    server_checks,
                ),
                _ => (
                    format!("client (LID {lid})"),
                    format!(
                        "ibtca.mode={mode} ibtca.role=client ibtca.peer_lid=1 ibtca.peer_index={}",
                        lid - 2
                    ),
                    client_checks,
                ),
            };
            GuestPlan {
                dev,
                who,
                append,
                checks,
            }
        })
        .collect();
    boot_and_check(&stack, mode, tag, extra, timeout, plans);
    switch.stop();
}
