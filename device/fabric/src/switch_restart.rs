//! `ibtca-fabric restart SWITCH`: one switch process stopped and started
//! again with the same arguments, so the same sockets: its listening ports
//! are bound afresh and the devices, gateways and switches on them
//! reconnect (their links retry), its connecting ports connect again.
//!
//! The new switch knows only what its command line says: without an SM
//! its routes come from the file again (`--route`); with one
//! (`--sm-managed`) it starts without routes and with its ports Init, and
//! the SM must sweep again to bring them Active (IBA: a switch that
//! restarts comes back unconfigured). Nodes see their link go down and up
//! (a port event in their guests).

use std::path::Path;
use std::time::Duration;

use super::launch::{
    is_ours, keep_old, log_path, spawn, stop_group, stop_one, switch_args, switch_control_path,
    switch_status_path, wait_socket_closed, wait_up, LaunchError, SWITCH_EXE,
};
use super::plan::Plan;
use super::state::{Started, State};

/// Restarts switch `name` of the fabric running in `run_dir` (`plan` is
/// the plan `up` started): SIGTERM (or SIGKILL with `kill`), the old log
/// kept as `NAME.log.1`, ..., the switch started again and waited for
/// until every linked port of it is up (within `timeout`). The state file
/// gets the new PID; returns the new process.
pub fn restart(
    plan: &Plan,
    run_dir: &Path,
    bin_dir: &Path,
    name: &str,
    kill: bool,
    timeout: Duration,
) -> Result<Started, LaunchError> {
    let (mut state, index) = switch_process(run_dir, name)?;
    let sw = plan
        .switches
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| LaunchError::NoSuchNode(format!("`{name}` is no switch of the fabric")))?;
    stop_one(&state.processes[index], kill, Duration::from_secs(10));
    // Its sockets go with its last thread; the new switch binds them again.
    wait_socket_closed(&switch_control_path(run_dir, name), Duration::from_secs(10));
    keep_old(&log_path(run_dir, name))?;
    // The new switch writes its own status: until then its ports are down.
    let _ = std::fs::remove_file(switch_status_path(run_dir, name));
    let mut running = vec![spawn(
        bin_dir,
        SWITCH_EXE,
        name,
        &switch_args(sw, run_dir),
        run_dir,
    )?];
    let only = Plan {
        nodes: Vec::new(),
        switches: vec![sw.clone()],
        links: Vec::new(),
        sm: None,
    };
    let up = wait_up(&only, run_dir, timeout, &mut running);
    let started = running.remove(0).started;
    if let Err(e) = up {
        stop_group(&[started], Duration::from_secs(5));
        return Err(e);
    }
    tracing::info!(name, pid = started.pid, "switch restarted");
    state.processes[index] = started.clone();
    state.save(run_dir).map_err(|source| LaunchError::Io {
        what: "writing the state file".into(),
        source,
    })?;
    Ok(started)
}

/// The state file and the index in it of switch `name`'s process.
fn switch_process(run_dir: &Path, name: &str) -> Result<(State, usize), LaunchError> {
    let state = State::load(run_dir)
        .map_err(|source| LaunchError::Io {
            what: "reading the state file".into(),
            source,
        })?
        .ok_or_else(|| LaunchError::NotUp(run_dir.to_path_buf()))?;
    let index = state
        .processes
        .iter()
        .position(|p| !p.guest && p.name == name && p.exe == SWITCH_EXE)
        .ok_or_else(|| LaunchError::NoSuchNode(format!("no switch `{name}` was started")))?;
    Ok((state, index))
}

/// Whether switch `name`'s process (the state file's) runs.
pub fn is_running(run_dir: &Path, name: &str) -> Result<bool, LaunchError> {
    let (state, index) = switch_process(run_dir, name)?;
    Ok(is_ours(&state.processes[index]))
}

/// Powers switch `name` off as a switch loses power: SIGKILL, its
/// sockets closed with it, so every peer sees its link go down and its
/// listening ports refuse the peers' reconnects; it forgets what the SM
/// set. The state file keeps its entry: [`restart`] powers it on again.
/// Returns false if it was not running.
pub fn power_off(run_dir: &Path, name: &str) -> Result<bool, LaunchError> {
    let (state, index) = switch_process(run_dir, name)?;
    let p = &state.processes[index];
    if !is_ours(p) {
        return Ok(false);
    }
    stop_one(p, true, Duration::from_secs(10));
    wait_socket_closed(&switch_control_path(run_dir, name), Duration::from_secs(10));
    // Its status file said its ports were up: they are not.
    let _ = std::fs::remove_file(switch_status_path(run_dir, name));
    tracing::info!(name, pid = p.pid, "switch powered off");
    Ok(true)
}
