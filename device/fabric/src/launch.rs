//! Starting and stopping a fabric's processes: switches first, then
//! devices, each a child process of the built binaries with its log in the
//! run directory; then waiting until every linked port is up.

use std::fs::{self, File};
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ibtca_link::LinkEndpoint;

use super::gateway_launch::{self, GATEWAY_EXE};
use super::guests::{self, GuestPlan};
use super::hive_plan::{self, Hosted, HIVE_EXE, HIVE_NAME};
use super::inherited_fds::only_standard_fds;
pub use super::node_args::{
    control_path, device_args, switch_args, switch_control_path, switch_status_path,
};
use super::plan::{NodePlan, Plan};
pub(crate) use super::processes::stop_group;
use super::processes::{exited, signal_tree};
pub use super::processes::{is_ours, stop_all};
use super::sim_port_node;
use super::state::{Started, State, TOPOLOGY_FILE};

/// Switch binary name.
pub const SWITCH_EXE: &str = "ibtca-switch";
/// Device binary name.
pub const DEVICE_EXE: &str = "ibtca-device";

/// Why bringing a fabric up or down failed.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The run directory already has a running fabric.
    #[error("{0} already holds a running fabric; run `ibtca-fabric down` first")]
    AlreadyUp(PathBuf),
    /// A binary is missing next to the launcher.
    #[error("{0} not found (build the workspace's binaries)")]
    MissingBinary(PathBuf),
    /// A process exited while the fabric came up.
    #[error("{name} exited during start-up ({status}); last log lines:\n{log}")]
    Exited {
        /// Node or switch.
        name: String,
        /// Its exit status.
        status: String,
        /// The end of its log.
        log: String,
    },
    /// Ports still down at the deadline.
    #[error("ports not up after {timeout:?}: {ports}")]
    Timeout {
        /// The timeout.
        timeout: Duration,
        /// Which ports.
        ports: String,
    },
    /// A gateway node's map could not be written.
    #[error("{0}")]
    Gateway(String),
    /// No fabric runs in the run directory.
    #[error("no fabric is up in {0}")]
    NotUp(PathBuf),
    /// A name that is no node of the running fabric, or a node without
    /// the process asked for.
    #[error("{0}")]
    NoSuchNode(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

pub(crate) fn log_path(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.log"))
}

/// A process being started, with its handle for early-exit checks.
pub(crate) struct Running {
    pub(crate) started: Started,
    pub(crate) child: Child,
}

pub(crate) fn spawn(
    bin_dir: &Path,
    exe: &str,
    name: &str,
    args: &[String],
    run_dir: &Path,
) -> Result<Running, LaunchError> {
    let bin = bin_dir.join(exe);
    if !bin.exists() {
        return Err(LaunchError::MissingBinary(bin));
    }
    let log = log_path(run_dir, name);
    let file = File::create(&log).map_err(io_err(format!("creating {}", log.display())))?;
    let mut cmd = Command::new(&bin);
    let child = only_standard_fds(&mut cmd)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .spawn()
        .map_err(io_err(format!("starting {}", bin.display())))?;
    tracing::info!(name, pid = child.id(), "{exe} started");
    Ok(Running {
        started: Started {
            name: name.to_owned(),
            exe: exe.to_owned(),
            pid: child.id(),
            log,
            guest: false,
            args: Vec::new(),
            console: None,
        },
        child,
    })
}

/// Starts every switch, then every device, waits until every linked port
/// is up, and records the processes in the run directory's state file. On
/// any failure, what was started is stopped again. `text` is the topology
/// `plan` was made from (the file `topology`'s text as checked): it is
/// copied into the run directory ([`TOPOLOGY_FILE`]), where the run-time
/// commands read it.
pub fn up(
    plan: &Plan,
    topology: &Path,
    text: &str,
    run_dir: &Path,
    bin_dir: &Path,
    timeout: Duration,
) -> Result<State, LaunchError> {
    up_hosting(
        plan,
        &Hosted::none(),
        topology,
        text,
        run_dir,
        bin_dir,
        timeout,
    )
}

/// As [`up`], with the nodes `hosted` names in one `ibtca-hive`
/// ([`hive_plan`]), started first.
pub fn up_hosting(
    plan: &Plan,
    hosted: &Hosted,
    topology: &Path,
    text: &str,
    run_dir: &Path,
    bin_dir: &Path,
    timeout: Duration,
) -> Result<State, LaunchError> {
    if let Some(old) = State::load(run_dir).map_err(io_err("reading the state file"))? {
        if old.processes.iter().any(is_ours) {
            return Err(LaunchError::AlreadyUp(run_dir.to_path_buf()));
        }
    }
    fs::create_dir_all(run_dir.join("links"))
        .map_err(io_err(format!("creating {}", run_dir.display())))?;
    let copy = run_dir.join(TOPOLOGY_FILE);
    fs::write(&copy, text).map_err(io_err(format!("writing {}", copy.display())))?;
    gateway_launch::write_maps(&plan.nodes).map_err(LaunchError::Gateway)?;
    let mut running: Vec<Running> = Vec::new();
    let result = start_all(plan, hosted, run_dir, bin_dir, timeout, &mut running);
    let state = State {
        topology: topology.to_path_buf(),
        processes: running.iter().map(|r| r.started.clone()).collect(),
        mounts: Vec::new(),
    };
    match result {
        Ok(()) => {
            state
                .save(run_dir)
                .map_err(io_err("writing the state file"))?;
            Ok(state)
        }
        Err(e) => {
            stop_all(&state.processes, Duration::from_secs(5));
            for mut r in running {
                let _ = r.child.wait();
            }
            Err(e)
        }
    }
}

fn start_all(
    plan: &Plan,
    hosted: &Hosted,
    run_dir: &Path,
    bin_dir: &Path,
    timeout: Duration,
    running: &mut Vec<Running>,
) -> Result<(), LaunchError> {
    let _ = fs::remove_file(hive_plan::hive_status_file(run_dir));
    let _ = fs::remove_file(hive_plan::hive_file(run_dir));
    if !hosted.is_empty() {
        let file = hive_plan::hive_file(run_dir);
        let config = hive_plan::hive_config(plan, hosted).to_string();
        fs::write(&file, config).map_err(io_err(format!("writing {}", file.display())))?;
        let mut args = hive_plan::hive_args(plan, hosted, run_dir);
        // One process, one filter: off if any node it hosts has it off.
        let switches = plan.switches.iter().map(|s| (&s.name, s.no_seccomp));
        let nodes = plan.nodes.iter().map(|n| (&n.name, n.no_seccomp));
        if switches
            .chain(nodes)
            .any(|(name, off)| off && hosted.has(name))
        {
            args.push("--no-seccomp".to_owned());
        }
        running.push(spawn(bin_dir, HIVE_EXE, HIVE_NAME, &args, run_dir)?);
    }
    for sw in plan.switches.iter().filter(|s| !hosted.has(&s.name)) {
        let _ = fs::remove_file(switch_status_path(run_dir, &sw.name));
        let args = switch_args(sw, run_dir);
        running.push(spawn(bin_dir, SWITCH_EXE, &sw.name, &args, run_dir)?);
    }
    for n in plan.nodes.iter().filter(|n| !hosted.has(&n.name)) {
        let (exe, args) = node_command(n, run_dir);
        running.push(spawn(bin_dir, exe, &n.name, &args, run_dir)?);
    }
    wait_up(plan, run_dir, timeout, running)
}

/// The binary and arguments of node `n`: a device (with its control
/// socket in `run_dir`), or a gateway.
fn node_command(n: &NodePlan, run_dir: &Path) -> (&'static str, Vec<String>) {
    if let Some(name) = &n.sim_port {
        return (sim_port_node::SIMPORT_EXE, sim_port_node::args(n, name));
    }
    match &n.gateway {
        Some(g) => (GATEWAY_EXE, gateway_launch::args(n, g)),
        None => {
            let mut args = device_args(n);
            args.push(format!(
                "--control={}",
                control_path(run_dir, &n.name).display()
            ));
            (DEVICE_EXE, args)
        }
    }
}

/// Every linked port of `plan`, as "name[:port]", with what is known of
/// it once it is up (`None` while it is down).
/// A node the hive hosts is up as its ports are in the hive's status
/// file.
fn port_states(plan: &Plan, run_dir: &Path) -> Vec<(String, Option<String>)> {
    let mut ports = Vec::new();
    let hive = hive_plan::read_status(run_dir);
    for sw in &plan.switches {
        let status: Option<serde_json::Value> = hive.get(&sw.name).cloned().or_else(|| {
            fs::read_to_string(switch_status_path(run_dir, &sw.name))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
        });
        for (i, port) in sw.ports.iter().enumerate() {
            if port.is_none() {
                continue;
            }
            let state = status.as_ref().and_then(|s| s.get("ports")?.get(i));
            let up = state.and_then(|p| p.get("up")?.as_bool()).unwrap_or(false);
            let peer = state.and_then(|p| p.get("peer_lid")?.as_u64());
            let seen = up.then(|| match peer {
                Some(lid) if lid > 0 => format!("link up, peer LID {lid}"),
                _ => "link up".to_owned(),
            });
            ports.push((format!("{}:{}", sw.name, i + 1), seen));
        }
    }
    for n in &plan.nodes {
        if let Some(status) = hive.get(&n.name) {
            let up = status["ports"][0]["up"].as_bool().unwrap_or(false);
            let seen = match &n.link {
                None => Some(format!("hosted, no link, LID {}", n.lid)),
                Some(_) => up.then(|| format!("hosted, link up, LID {}", n.lid)),
            };
            ports.push((n.name.clone(), seen));
            continue;
        }
        let log = fs::read_to_string(log_path(run_dir, &n.name)).unwrap_or_default();
        let ready = log.contains(if n.sim_port.is_some() {
            "simport running"
        } else if n.gateway.is_some() {
            "gateway running"
        } else {
            "device ready"
        });
        let seen = match (&n.link, ready) {
            (_, false) => None,
            (None, true) => Some(format!("ready, no link, LID {}", n.lid)),
            (Some(_), true) => log
                .contains("link up")
                .then(|| format!("link up, LID {}", n.lid)),
        };
        ports.push((n.name.clone(), seen));
    }
    ports
}

pub(crate) fn wait_up(
    plan: &Plan,
    run_dir: &Path,
    timeout: Duration,
    running: &mut [Running],
) -> Result<(), LaunchError> {
    let deadline = Instant::now() + timeout;
    let mut logged = std::collections::HashSet::new();
    loop {
        for r in running.iter_mut() {
            if let Ok(Some(status)) = r.child.try_wait() {
                return Err(LaunchError::Exited {
                    name: r.started.name.clone(),
                    status: status.to_string(),
                    log: log_tail(&r.started.log, 10),
                });
            }
        }
        let mut down = Vec::new();
        for (port, seen) in port_states(plan, run_dir) {
            match seen {
                Some(what) => {
                    if logged.insert(port.clone()) {
                        tracing::info!("{port}: {what}");
                    }
                }
                None => down.push(port),
            }
        }
        if down.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(LaunchError::Timeout {
                timeout,
                ports: down.join(", "),
            });
        }
        thread::sleep(Duration::from_millis(50));
    }
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Boots every guest of `guests` through `run_vm` (`bash run-vm.sh`), each
/// with its console in `GuestPlan::console` and run-vm.sh's messages in
/// `GuestPlan::log`, adds them to `state` and saves it. On a failure the
/// guests started so far are stopped again (the fabric stays up).
pub fn start_guests(
    state: &mut State,
    guests: &[GuestPlan],
    run_vm: &Path,
    run_dir: &Path,
) -> Result<Vec<Child>, LaunchError> {
    // A console is the file QEMU writes the guest's serial port to
    // (`-serial file:`): an earlier run's is kept as `CONSOLE.N`.
    for g in guests {
        keep_old(&g.console)?;
    }
    let mut children = Vec::new();
    let mut started = Vec::new();
    for g in guests {
        let mut args = vec![run_vm.display().to_string()];
        args.extend(guests::run_vm_args(g));
        let guest = Started {
            name: guest_name(&g.node),
            exe: "bash".to_owned(),
            pid: 0,
            log: g.log.clone(),
            guest: true,
            args,
            console: Some(g.console.clone()),
        };
        match spawn_guest(&guest) {
            Ok(child) => {
                tracing::info!(node = %g.node, pid = child.id(), "guest started");
                started.push(Started {
                    pid: child.id(),
                    ..guest
                });
                children.push(child);
            }
            Err(e) => {
                stop_all(&started, Duration::from_secs(10));
                for mut c in children {
                    let _ = c.wait();
                }
                return Err(e);
            }
        }
    }
    state.processes.extend(started);
    state
        .save(run_dir)
        .map_err(io_err("writing the state file"))?;
    Ok(children)
}

/// The state file's name for node `node`'s guest.
pub(crate) fn guest_name(node: &str) -> String {
    format!("{node} (guest)")
}

/// Starts the guest `g` records (`bash` with its arguments), its
/// run-vm.sh messages going to its log.
fn spawn_guest(g: &Started) -> Result<Child, LaunchError> {
    let log = File::create(&g.log).map_err(io_err(format!("creating {}", g.log.display())))?;
    only_standard_fds(&mut Command::new("bash"))
        .args(&g.args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(io_err(format!("starting the guest of {}", g.name)))
}

/// Moves `path` (the log or console of a process about to start again)
/// to the first free `PATH.N` (N from 1): each run's file is kept.
pub(crate) fn keep_old(path: &Path) -> Result<(), LaunchError> {
    if !path.exists() {
        return Ok(());
    }
    let mut n = 1;
    loop {
        let old = PathBuf::from(format!("{}.{n}", path.display()));
        if !old.exists() {
            return fs::rename(path, &old).map_err(io_err(format!("renaming {}", path.display())));
        }
        n += 1;
    }
}

/// How [`restart`] restarts a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartOptions {
    /// SIGKILL instead of SIGTERM: the node crashes.
    pub kill: bool,
    /// Only the guest: the device keeps running and serves the new QEMU.
    pub guest_only: bool,
    /// How long the restarted device may take to bring its link up.
    pub timeout: Duration,
}

/// Stops `p` (a guest with everything under it) with SIGKILL, or with
/// SIGTERM and SIGKILL after `grace`, and waits until it is gone.
pub(crate) fn stop_one(p: &Started, kill: bool, grace: Duration) {
    if !kill {
        stop_group(std::slice::from_ref(p), grace);
        return;
    }
    if is_ours(p) {
        signal_tree(p, libc::SIGKILL);
    }
    let deadline = Instant::now() + grace;
    while !exited(p.pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `grace` until nothing listens on the vfio-user socket
/// `path` any more. [`exited`] sees a killed device's main thread turn
/// zombie, but its other threads may still be exiting and the file table,
/// with the listening socket, goes with the last of them (seen in CI: the
/// new device found it "in use by another process"). A refused or missing
/// socket is the condition the new device's bind checks.
pub(crate) fn wait_socket_closed(path: &Path, grace: Duration) {
    let deadline = Instant::now() + grace;
    while UnixStream::connect(path).is_ok() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
}

/// Restarts node `name` of the fabric running in `run_dir` (`plan` is
/// the plan `up` started), as a machine restarts: its guest (if `up
/// --guests` booted one) is stopped, then its device (or gateway: its QPs
/// start again from the map's PSNs, run-time `remote-qpn`s are gone and
/// must be set again); the device starts
/// again with the same arguments and nothing of the old one (no objects,
/// no QPs: its peers' QPs to it fail as if it had died), and once its link
/// is up the guest boots again as before. QEMU's vfio-user client does
/// not reconnect to a new device, so the guest always goes with it; with
/// [`RestartOptions::guest_only`] the guest alone restarts (the device
/// forgets the old QEMU's objects and serves the new one). Each run's log
/// and console are kept (`NAME.log.1`, ...). The state file gets the new
/// PIDs; returns the restarted processes.
pub fn restart(
    plan: &Plan,
    run_dir: &Path,
    bin_dir: &Path,
    name: &str,
    opts: RestartOptions,
) -> Result<Vec<Started>, LaunchError> {
    let mut state = State::load(run_dir)
        .map_err(io_err("reading the state file"))?
        .ok_or_else(|| LaunchError::NotUp(run_dir.to_path_buf()))?;
    let node = plan
        .nodes
        .iter()
        .find(|n| n.name == name)
        .ok_or_else(|| LaunchError::NoSuchNode(format!("`{name}` is no node of the fabric")))?;
    let guest = state
        .processes
        .iter()
        .position(|p| p.guest && p.name == guest_name(name));
    let device = state
        .processes
        .iter()
        .position(|p| {
            let exe = p.exe.as_str();
            !p.guest
                && p.name == name
                && [DEVICE_EXE, GATEWAY_EXE, sim_port_node::SIMPORT_EXE].contains(&exe)
        })
        .ok_or_else(|| {
            LaunchError::NoSuchNode(format!("no device or gateway of `{name}` was started"))
        })?;
    if opts.guest_only && guest.is_none() {
        return Err(LaunchError::NoSuchNode(format!(
            "`{name}` has no guest (`up --guests` boots them)"
        )));
    }
    let grace = Duration::from_secs(10);
    if let Some(g) = guest {
        stop_one(&state.processes[g], opts.kill, grace);
    }
    let mut restarted = Vec::new();
    if !opts.guest_only {
        stop_one(&state.processes[device], opts.kill, grace);
        // The new process binds the same sockets: the old one's must be
        // gone first (its file table goes with its last thread).
        match &node.gateway {
            None => wait_socket_closed(&node.socket, grace),
            Some(g) => {
                wait_socket_closed(&g.control, grace);
                if let LinkEndpoint::Listen(atm) = &g.atm {
                    wait_socket_closed(atm, grace);
                }
            }
        }
        keep_old(&log_path(run_dir, name))?;
        let (exe, args) = node_command(node, run_dir);
        let mut running = vec![spawn(bin_dir, exe, name, &args, run_dir)?];
        let only = Plan {
            nodes: vec![node.clone()],
            switches: Vec::new(),
            links: Vec::new(),
            sm: None,
        };
        let up = wait_up(&only, run_dir, opts.timeout, &mut running);
        let started = running.remove(0).started;
        if let Err(e) = up {
            stop_group(&[started], Duration::from_secs(5));
            return Err(e);
        }
        state.processes[device] = started.clone();
        restarted.push(started);
    }
    if let Some(g) = guest {
        let old = state.processes[g].clone();
        keep_old(&old.log)?;
        if let Some(console) = &old.console {
            keep_old(console)?;
        }
        let child = spawn_guest(&old)?;
        tracing::info!(node = name, pid = child.id(), "guest started again");
        state.processes[g].pid = child.id();
        restarted.push(state.processes[g].clone());
    }
    state
        .save(run_dir)
        .map_err(io_err("writing the state file"))?;
    Ok(restarted)
}

/// Stops what `up` started in `run_dir` and removes the state file;
/// returns the names of the processes that were running.
pub fn down(run_dir: &Path) -> Result<Vec<String>, LaunchError> {
    let Some(state) = State::load(run_dir).map_err(io_err("reading the state file"))? else {
        return Ok(Vec::new());
    };
    // A guest gets longer: QEMU tears its device connection down first.
    let stopped = stop_all(&state.processes, Duration::from_secs(10));
    for m in &state.mounts {
        super::guest_run::unmount_share(m);
    }
    State::remove(run_dir).map_err(io_err("removing the state file"))?;
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::processes::signal;

    /// A process has exited when it is a zombie or gone, not before.
    #[test]
    fn exited_is_a_zombie_or_nothing() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id();
        assert!(!exited(pid), "a sleeping process runs");
        signal(pid, libc::SIGKILL);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !exited(pid) {
            assert!(Instant::now() < deadline, "still running after SIGKILL");
            thread::sleep(Duration::from_millis(5));
        }
        assert!(
            fs::metadata(format!("/proc/{pid}")).is_ok(),
            "not reaped yet: a zombie"
        );
        child.wait().unwrap();
        assert!(exited(pid), "reaped: gone");
    }
}
