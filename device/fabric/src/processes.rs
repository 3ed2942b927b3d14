//! The fabric's processes once started: whether each still runs the
//! binary it was started as, and stopping them (SIGTERM, a grace period,
//! then SIGKILL; a guest with everything under it).

use std::fs;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use super::guests;
use super::state::Started;

/// True if `p` still runs the binary it was started as (a zombie counts as
/// gone).
pub fn is_ours(p: &Started) -> bool {
    let proc_dir = PathBuf::from(format!("/proc/{}", p.pid));
    let exe_ok = fs::read_link(proc_dir.join("exe"))
        .ok()
        .and_then(|e| e.file_name().map(|n| n.to_string_lossy().into_owned()))
        .is_some_and(|n| n == p.exe || n.starts_with(&format!("{} ", p.exe)));
    let zombie = fs::read_to_string(proc_dir.join("stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true);
    exe_ok && !zombie
}

/// True once process `pid`'s main thread has finished exiting: gone, a
/// zombie or dead (its other threads may still be exiting: see
/// `launch::wait_socket_closed`).
/// Not [`is_ours`] turning false: a dying process's `/proc/PID/exe` goes
/// with its memory, before its files are closed (the kernel's `do_exit`
/// releases the mm before the file table), so a device being killed may
/// still hold its vfio-user socket for a moment after `exe` vanished, and a
/// new device on that socket finds it "in use by another process" (seen in the
/// soak, `scripts/soak.sh`, on a loaded machine).
pub(crate) fn exited(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        })
        .is_none_or(|state| matches!(state, 'Z' | 'X' | 'x'))
}

pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // the PID was checked to still run our binary just before.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Sends `sig` to `p` and, for a guest, to everything under it first
/// (`run-vm.sh` waits for `timeout`, which runs QEMU in its own process
/// group: signalling the script alone would not reach QEMU).
pub(crate) fn signal_tree(p: &Started, sig: libc::c_int) {
    if p.guest {
        for child in guests::descendants(p.pid) {
            signal(child, sig);
        }
    }
    signal(p.pid, sig);
}

/// Sends SIGTERM to every process of `processes` that is still ours (last
/// started first), waits up to `grace` for them, then SIGKILLs the rest.
/// Guests go first: the devices and switches get their signal only once
/// every guest has stopped (or was killed). Returns the names of those that
/// were running.
pub fn stop_all(processes: &[Started], grace: Duration) -> Vec<String> {
    let (guests, rest): (Vec<Started>, Vec<Started>) =
        processes.iter().cloned().partition(|p| p.guest);
    let mut stopped = stop_group(&guests, grace);
    stopped.extend(stop_group(&rest, grace));
    stopped
}

pub(crate) fn stop_group(processes: &[Started], grace: Duration) -> Vec<String> {
    let live: Vec<&Started> = processes.iter().rev().filter(|p| is_ours(p)).collect();
    for p in &live {
        signal_tree(p, libc::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while live.iter().any(|p| !exited(p.pid)) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    for p in live.iter().filter(|p| is_ours(p)) {
        tracing::warn!(name = %p.name, pid = p.pid, "did not stop on SIGTERM; killing it");
        signal_tree(p, libc::SIGKILL);
    }
    live.iter().map(|p| p.name.clone()).collect()
}
