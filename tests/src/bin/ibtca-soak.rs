//! `ibtca-soak`: the soak test (issue 19). Started by `scripts/soak.sh`,
//! which builds what it needs; not part of `scripts/test.sh`.
//!
//! ```text
//! ibtca-soak [--minutes M | --seconds S] [--kill NODE|none] [--kill-at F]
//!            [--topology FILE] [--run-dir DIR] [--rss-bound-mib N] [--keep]
//! ```
//!
//! Brings up `qemu-configs/soak-three-nodes.json` (three `ibtca-device`s on
//! one `ibtca-switch` whose every port drops, duplicates, reorders and
//! corrupts 1 % of what it sends) with the fabric launcher's library, boots
//! one TCG guest per node running `ibtca-verbs soak` (RDMA WRITE + SEND to
//! every other guest through libibverbs, every message checked byte by
//! byte; see `guest-driver/tools/verbs/soak.c`) for the run's length, and
//! at `--kill-at` of it (default a third) kills one node, its QEMU and its device, with
//! SIGKILL, then starts both again (a fresh device on the same socket and
//! switch port, a fresh guest running the soak for the time left).
//!
//! While it runs: every device's (and the switch's) RssAnon is sampled from
//! `/proc/PID/status`, and every process must stay up (a device that exits
//! by itself fails the run at once). At the end: each guest's final counts
//! (`IBTCA-SOAK-FINAL`) are checked against its peers' (`soak/check.rs`),
//! every device stops cleanly on SIGTERM, no device log has a panic, and
//! every device's RssAnon stayed within `--rss-bound-mib`. The report ends
//! with the counts as a Markdown table (RELIABILITY.md, "Soak"); the exit
//! status is 0 only if everything held.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use ibtca_fabric::guests::{self, GuestOptions, GuestPlan, VmStack};
use ibtca_fabric::launch;
use ibtca_fabric::state::{Started, State};
use ibtca_fabric::{self as fabric, Plan};
use ibtca_switch::control;

#[path = "../soak/check.rs"]
mod check;
#[path = "../soak/procs.rs"]
mod procs;
#[path = "../soak/report.rs"]
mod report;

use procs::*;
use report::report;

/// The RssAnon bound of a device, MiB: see RELIABILITY.md, "Soak".
const RSS_BOUND_MIB: u64 = 16;
/// How long a guest may still take after its run: the tool's grace for
/// its peers' BYEs.
const GRACE_S: u64 = 120;
/// Start-up (boot and set-up) allowed to each guest, on top.
const BOOT_S: u64 = 300;

/// The soak test of a faulty three-node fabric with guests.
///
/// A three-node fabric with 1 % faults on every switch
/// port, one TCG guest per node running RDMA WRITE and SEND to every
/// other guest, one node killed and restarted on the way (see the module
/// documentation of tests/src/bin/ibtca-soak.rs). Exit status 0 only if
/// everything held.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Cli {
    /// Soak length in minutes.
    #[arg(
        long,
        value_name = "M",
        default_value_t = 10.0,
        conflicts_with = "seconds"
    )]
    minutes: f64,
    /// Soak length in seconds (instead of --minutes).
    #[arg(long, value_name = "S")]
    seconds: Option<f64>,
    /// The node killed and restarted during the run (none: no kill).
    #[arg(long, value_name = "NODE", default_value = "n2")]
    kill: String,
    /// When, as a fraction of the run (0.05 to 0.9).
    #[arg(long, value_name = "F", default_value_t = 0.33)]
    kill_at: f64,
    /// The topology (default qemu-configs/soak-three-nodes.json).
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Run directory, inside the VM-stack chroot (default
    /// CHROOT/tmp/ibtca-soak-PID).
    #[arg(long, value_name = "DIR")]
    run_dir: Option<PathBuf>,
    /// The most RssAnon a device may reach, MiB.
    #[arg(long, value_name = "N", default_value_t = RSS_BOUND_MIB)]
    rss_bound_mib: u64,
    /// Keep the run directory (consoles, logs) even when the soak passed.
    #[arg(long)]
    keep: bool,
}

struct Opts {
    seconds: u64,
    kill: Option<String>,
    kill_at: f64,
    topology: PathBuf,
    run_dir: Option<PathBuf>,
    rss_bound_mib: u64,
    keep: bool,
}

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-soak";

/// The options, checked (a usage error otherwise).
fn options(cli: Cli) -> Result<Opts, String> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let seconds = cli.seconds.unwrap_or(cli.minutes * 60.0);
    if !seconds.is_finite() || seconds < 30.0 {
        return Err("the soak runs at least 30 s".into());
    }
    if !(0.05..=0.9).contains(&cli.kill_at) {
        return Err("--kill-at is a fraction of the run, 0.05 to 0.9".into());
    }
    Ok(Opts {
        seconds: seconds.round() as u64,
        kill: Some(cli.kill).filter(|k| k != "none"),
        kill_at: cli.kill_at,
        topology: cli
            .topology
            .unwrap_or_else(|| repo.join("qemu-configs/soak-three-nodes.json")),
        run_dir: cli.run_dir,
        rss_bound_mib: cli.rss_bound_mib,
        keep: cli.keep,
    })
}

fn say(t0: Instant, text: &str) {
    eprintln!("[soak {:>6.0} s] {text}", t0.elapsed().as_secs_f64());
}

/// The run: what was started and what was seen.
struct Soak {
    opts: Opts,
    plan: Plan,
    run_dir: PathBuf,
    bin_dir: PathBuf,
    run_vm: PathBuf,
    state: State,
    guests: Vec<GuestPlan>,
    /// Each node's guest (`run-vm.sh`, our child) and how it ended.
    guest_pids: Vec<u32>,
    guests_done: Vec<Option<i32>>,
    /// When each guest was started and when its soak started.
    booted: Vec<(Instant, Option<Instant>)>,
    rss: Vec<Rss>,
    stalls: Stalls,
    t0: Instant,
    failures: Vec<String>,
    events: Vec<String>,
    killed: Option<usize>,
}

impl Soak {
    fn event(&mut self, text: String) {
        say(self.t0, &text);
        self.events
            .push(format!("{:.0} s: {text}", self.t0.elapsed().as_secs_f64()));
    }

    /// Samples RSS and checks that every device and switch still runs.
    fn watch(&mut self) -> Result<(), String> {
        for r in &mut self.rss {
            r.sample();
        }
        for p in self.state.processes.iter().filter(|p| !p.guest) {
            if !launch::is_ours(p) {
                let log = fs::read_to_string(&p.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                return Err(format!(
                    "{} (pid {}) exited by itself; last log lines:\n{}",
                    p.name,
                    p.pid,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                ));
            }
        }
        for (i, g) in self.guests.iter().enumerate() {
            if self.booted[i].1.is_none()
                && fs::read_to_string(&g.console)
                    .unwrap_or_default()
                    .contains("IBTCA-SOAK-START")
            {
                self.booted[i].1 = Some(Instant::now());
            }
        }
        Ok(())
    }

    /// Kills node `i`'s QEMU and device with SIGKILL and starts both
    /// afresh (`launch::restart`: a new device on the same socket and
    /// switch port, then the guest's command again), the guest soaking for
    /// `seconds`, the time left.
    fn kill_and_restart(&mut self, i: usize, seconds: u64) -> Result<(), String> {
        let node = self.plan.nodes[i].name.clone();
        let old_dev = dev_pid_of(&self.state, &node);
        let old_guest = self.guest_pids[i];
        // The guest's command is in the state file: the new life soaks for
        // the time left, not the whole run.
        let from = format!("ibtca.seconds={}", self.opts.seconds);
        for p in self
            .state
            .processes
            .iter_mut()
            .filter(|p| p.guest && p.pid == old_guest)
        {
            for a in &mut p.args {
                *a = a.replace(&from, &format!("ibtca.seconds={seconds}"));
            }
        }
        self.state
            .save(&self.run_dir)
            .map_err(|e| format!("state file: {e}"))?;
        // SIGKILL to QEMU (everything under run-vm.sh) and the device, and
        // both reaped (our children): only then is the device's socket
        // surely closed. launch::restart then finds nothing left to stop.
        for d in guests::descendants(old_guest) {
            kill(d, libc::SIGKILL);
        }
        kill(old_guest, libc::SIGKILL);
        kill(old_dev, libc::SIGKILL);
        let statuses = (reap(old_guest), reap(old_dev));
        self.event(format!(
            "killed {node}: QEMU ({}) and device pid {old_dev} ({}) by SIGKILL",
            describe_status(statuses.0),
            describe_status(statuses.1)
        ));
        let opts = launch::RestartOptions {
            kill: true,
            guest_only: false,
            timeout: Duration::from_secs(30),
        };
        let restarted = launch::restart(&self.plan, &self.run_dir, &self.bin_dir, &node, opts)
            .map_err(|e| format!("restarting {node}: {e}"))?;
        self.state = State::load(&self.run_dir)
            .map_err(|e| format!("state file: {e}"))?
            .ok_or("no state file after the restart")?;
        let dev = dev_pid_of(&self.state, &node);
        let guest = restarted
            .iter()
            .find(|p| p.guest)
            .map(|p| p.pid)
            .ok_or("the restart booted no guest")?;
        self.rss.push(Rss::new(&format!("{node} (restarted)"), dev));
        self.guest_pids[i] = guest;
        self.guests_done[i] = None;
        self.booted[i] = (Instant::now(), None);
        self.killed = Some(i);
        self.event(format!(
            "{node} started again: device pid {dev}, guest soaking {seconds} s"
        ));
        Ok(())
    }
}

fn dev_pid_of(state: &State, name: &str) -> u32 {
    state
        .processes
        .iter()
        .find(|p| p.name == name && !p.guest)
        .map_or(0, |p| p.pid)
}

fn run(opts: Opts) -> Result<Soak, String> {
    let t0 = Instant::now();
    let stack = VmStack::find(&guests::cache_dir()).map_err(|e| e.to_string())?;
    let bin_dir = std::env::current_exe()
        .map_err(|e| e.to_string())?
        .parent()
        .map(Path::to_path_buf)
        .ok_or("no binary directory")?;
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let run_dir = opts.run_dir.clone().unwrap_or_else(|| {
        stack
            .chroot
            .join(format!("tmp/ibtca-soak-{stamp}-{}", std::process::id()))
    });
    let text = fs::read_to_string(&opts.topology)
        .map_err(|e| format!("{}: {e}", opts.topology.display()))?;
    let topo = fabric::parse(&text).map_err(|e| e.to_string())?;
    let plan = fabric::plan(&topo, &run_dir).map_err(|e| e.to_string())?;
    let kill_index = match &opts.kill {
        Some(k) => Some(
            plan.nodes
                .iter()
                .position(|n| &n.name == k)
                .ok_or_else(|| format!("--kill {k}: no such node"))?,
        ),
        None => None,
    };
    let mut append = vec![(None, format!("ibtca.grace={GRACE_S}"))];
    for n in &plan.nodes {
        append.push((Some(n.name.clone()), format!("ibtca.self_lid={}", n.lid)));
    }
    let gopts = GuestOptions {
        append,
        timeout: Duration::from_secs(opts.seconds + GRACE_S + BOOT_S),
        ..GuestOptions::default()
    };
    let mut guest_plans =
        guests::resolve(&topo, &plan.nodes, &run_dir, &stack, &gopts).map_err(|e| e.to_string())?;
    // The first lives soak the whole run; a restarted one the time left.
    for g in &mut guest_plans {
        g.append = format!("{} ibtca.seconds={}", g.append, opts.seconds);
    }
    let run_vm = guests::find_run_vm(None, &bin_dir).map_err(|e| e.to_string())?;
    fs::create_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    say(
        t0,
        &format!(
            "{}: {} nodes, soak {} s, kill {} at {:.0} %, run directory {}",
            opts.topology.display(),
            plan.nodes.len(),
            opts.seconds,
            opts.kill.as_deref().unwrap_or("none"),
            opts.kill_at * 100.0,
            run_dir.display()
        ),
    );
    let state = launch::up(
        &plan,
        &opts.topology,
        &text,
        &run_dir,
        &bin_dir,
        Duration::from_secs(30),
    )
    .map_err(|e| e.to_string())?;
    let rss = state
        .processes
        .iter()
        .map(|p| Rss::new(&p.name, p.pid))
        .collect();
    let mut s = Soak {
        opts,
        plan,
        run_dir,
        bin_dir,
        run_vm,
        state,
        guests: guest_plans,
        guest_pids: Vec::new(),
        guests_done: Vec::new(),
        booted: Vec::new(),
        rss,
        stalls: Stalls::default(),
        t0,
        failures: Vec::new(),
        events: Vec::new(),
        killed: None,
    };
    s.event("fabric up: switch and devices".into());
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = s.stalls.watch(t0, stop.clone());
    if let Err(e) = soak(&mut s, kill_index) {
        s.failures.push(e);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    Ok(s)
}

/// Boots the guests, kills and restarts a node on time, waits for the end.
fn soak(s: &mut Soak, kill_index: Option<usize>) -> Result<(), String> {
    let children = launch::start_guests(&mut s.state, &s.guests, &s.run_vm, &s.run_dir)
        .map_err(|e| e.to_string())?;
    s.booted = vec![(Instant::now(), None); children.len()];
    // Followed by PID (a restarted guest is started by `launch::restart`).
    s.guest_pids = children.iter().map(Child::id).collect();
    s.guests_done = vec![None; children.len()];
    drop(children);
    s.event(format!("{} guests booting", s.guest_pids.len()));
    let seconds = s.opts.seconds;
    let mut soak_start: Option<Instant> = None;
    let mut kill_pending = kill_index;
    let mut last_note = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(seconds + GRACE_S + 2 * BOOT_S);
    loop {
        s.watch()?;
        if soak_start.is_none() && s.booted.iter().all(|b| b.1.is_some()) {
            soak_start = s.booted.iter().filter_map(|b| b.1).max();
            let boot = s
                .booted
                .iter()
                .map(|(a, b)| b.unwrap_or(*a).duration_since(*a).as_secs_f64())
                .fold(0.0, f64::max);
            s.event(format!(
                "every guest soaking (the slowest booted in {boot:.0} s)"
            ));
        }
        if let (Some(i), Some(start)) = (kill_pending, soak_start) {
            let at = start + Duration::from_secs_f64(seconds as f64 * s.opts.kill_at);
            if Instant::now() >= at {
                // The new life ends with the others: the time left less
                // the time a guest took to boot.
                let boot = s.booted[i]
                    .1
                    .map_or(30.0, |b| b.duration_since(s.booted[i].0).as_secs_f64());
                let end = start + Duration::from_secs(seconds);
                let left = end.saturating_duration_since(Instant::now()).as_secs_f64() - boot;
                s.kill_and_restart(i, left.max(30.0) as u64)?;
                kill_pending = None;
            }
        }
        let mut running = 0;
        for i in 0..s.guest_pids.len() {
            if s.guests_done[i].is_some() {
                continue;
            }
            match try_reap(s.guest_pids[i]) {
                None => running += 1,
                Some(st) => {
                    s.guests_done[i] = Some(st);
                    let text = format!(
                        "guest {} powered off ({})",
                        s.plan.nodes[i].name,
                        describe_status(Some(st))
                    );
                    if !(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0) {
                        s.failures.push(text.clone());
                    }
                    s.event(text);
                }
            }
        }
        if running == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{running} guests still running past the deadline"));
        }
        if last_note.elapsed() >= Duration::from_secs(60) {
            last_note = Instant::now();
            let rss: Vec<String> = s
                .rss
                .iter()
                .map(|r| format!("{} {} MiB", r.name, mib(r.anon_max)))
                .collect();
            say(
                s.t0,
                &format!("running; RssAnon max so far: {}", rss.join(", ")),
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Stops everything (SIGTERM: devices log their counters), checks how the
/// devices ended, parses and checks the consoles, prints the report.
fn finish(mut s: Soak) -> bool {
    // Guests still up (a failure path) go first, with the rest.
    for (i, &pid) in s.guest_pids.iter().enumerate() {
        if s.guests_done[i].is_none() {
            for d in guests::descendants(pid) {
                kill(d, libc::SIGKILL);
            }
            kill(pid, libc::SIGKILL);
            reap(pid);
        }
    }
    let stats = s
        .plan
        .switches
        .iter()
        .map(|sw| {
            let reply =
                control::request(&launch::switch_control_path(&s.run_dir, &sw.name), "stats")
                    .unwrap_or_else(|e| format!("error {e}"));
            (sw.name.clone(), reply)
        })
        .collect::<Vec<_>>();
    for p in &s.state.processes {
        if !p.guest && !launch::is_ours(p) {
            s.failures.push(format!(
                "{} (pid {}) was gone before the end",
                p.name, p.pid
            ));
        }
    }
    let procs: Vec<Started> = s.state.processes.clone();
    launch::stop_all(&procs, Duration::from_secs(15));
    for p in procs.iter().filter(|p| !p.guest) {
        let st = reap(p.pid);
        let clean = st.is_some_and(|v| libc::WIFEXITED(v) && libc::WEXITSTATUS(v) == 0);
        if !clean {
            s.failures.push(format!(
                "{} (pid {}) did not stop cleanly on SIGTERM: {}",
                p.name,
                p.pid,
                describe_status(st)
            ));
        }
    }
    let _ = State::remove(&s.run_dir);
    let mut logs: Vec<(String, String)> = Vec::new();
    if let Ok(dir) = fs::read_dir(&s.run_dir) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            // Device and switch logs, a restarted device's old ones too.
            if name.contains(".log") && !name.contains(".qemu.log") {
                logs.push((name, fs::read_to_string(e.path()).unwrap_or_default()));
            }
        }
    }
    logs.sort();
    for (name, text) in &logs {
        if let Some(l) = text.lines().find(|l| l.contains("panicked")) {
            s.failures.push(format!("{name}: {l}"));
        }
    }
    let lids: Vec<u16> = s.plan.nodes.iter().map(|n| n.lid).collect();
    let consoles: BTreeMap<u16, check::Console> = s
        .plan
        .nodes
        .iter()
        .zip(&s.guests)
        .map(|(n, g)| {
            (
                n.lid,
                check::console(&fs::read_to_string(&g.console).unwrap_or_default()),
            )
        })
        .collect();
    let first = s.killed.map(|i| {
        let n = &s.plan.nodes[i];
        let path = s.run_dir.join(format!("{}.console.1", n.name));
        (
            n.lid,
            check::console(&fs::read_to_string(path).unwrap_or_default()),
        )
    });
    if s.opts.kill.is_some() && s.killed.is_none() {
        s.failures.push("no node was killed".into());
    }
    let verdict = check::check(&lids, &consoles, first.as_ref().map(|(l, c)| (*l, c)));
    s.failures.extend(verdict.failures.iter().cloned());
    let bound = s.opts.rss_bound_mib * 1024;
    for r in s
        .rss
        .iter()
        .filter(|r| r.name != "sw0" && !r.name.starts_with("sw"))
    {
        if r.anon_max > bound {
            s.failures.push(format!(
                "{}: RssAnon reached {} MiB, over the bound of {} MiB",
                r.name,
                mib(r.anon_max),
                s.opts.rss_bound_mib
            ));
        }
    }
    report(&s, &verdict, &stats, &logs);
    let ok = s.failures.is_empty();
    if ok && !s.opts.keep {
        let _ = fs::remove_dir_all(&s.run_dir);
    } else {
        eprintln!("consoles and logs kept in {}", s.run_dir.display());
    }
    ok
}

fn count(text: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(needle)).count()
}

fn main() -> ExitCode {
    let opts = match options(ibtca_device::cli::parse(NAME)) {
        Ok(o) => o,
        Err(e) => return ibtca_device::cli::usage_error(NAME, e),
    };
    match run(opts) {
        Ok(s) => {
            if finish(s) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => ibtca_device::cli::runtime_error(NAME, e),
    }
}
