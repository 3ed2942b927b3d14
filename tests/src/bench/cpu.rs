//! On-CPU time of this process's threads by role ([`CpuSplit`]), from
//! `/proc/self/task/*/schedstat`.

/// On-CPU time of this process's threads over a timed part, by role, in
/// nanoseconds (from `/proc/self/task/*/schedstat`, so it counts only time
/// actually on a CPU: robust against other load on the machine, unlike the
/// wall-clock rates).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuSplit {
    /// `ibtca-engine` threads (both devices).
    pub(super) engine: u64,
    /// `ibtca-link` threads: the link readers.
    pub(super) link_rx: u64,
    /// `ibtca-link-tx` threads: the link writers.
    pub(super) link_tx: u64,
    /// The other device threads (the vfio-user servers, unnamed).
    pub(super) vfio: u64,
    /// The simulated guests (the main thread and `guest-*` threads) and the
    /// raw rows' `raw-*` threads.
    pub(super) guests: u64,
}

impl CpuSplit {
    /// Device CPU (everything but the guests).
    pub(super) fn device(&self) -> u64 {
        self.engine + self.link_rx + self.link_tx + self.vfio
    }
}

/// (thread name, on-CPU ns) of every thread of this process, by tid.
pub(super) type CpuSnapshot = std::collections::HashMap<u32, (String, u64)>;

pub(super) fn cpu_snapshot() -> CpuSnapshot {
    let mut out = CpuSnapshot::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let path = e.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        if let Some(ns) = ns {
            out.insert(tid, (comm.trim().to_string(), ns));
        }
    }
    out
}

/// CPU used between two snapshots by the threads alive at the second.
pub(super) fn cpu_delta(before: &CpuSnapshot, after: &CpuSnapshot) -> CpuSplit {
    let main = std::process::id();
    let mut split = CpuSplit::default();
    for (tid, (comm, ns)) in after {
        let used = ns - before.get(tid).map_or(0, |b| b.1).min(*ns);
        let slot = match comm.as_str() {
            "ibtca-engine" => &mut split.engine,
            "ibtca-link" => &mut split.link_rx,
            "ibtca-link-tx" => &mut split.link_tx,
            c if *tid == main || c.starts_with("guest") || c.starts_with("raw") => {
                &mut split.guests
            }
            _ => &mut split.vfio,
        };
        *slot += used;
    }
    split
}

/// One line of the CPU breakdown: µs per message by thread role.
pub(super) fn cpu_note(what: &str, c: &CpuSplit, msgs: u64) -> String {
    let per = |ns: u64| ns as f64 / 1000.0 / msgs.max(1) as f64;
    format!(
        "  {what:<16} device {:6.2} = engine {:5.2} + link rx {:5.2} + link tx {:5.2} + vfio {:5.2}; guests {:5.2}",
        per(c.device()),
        per(c.engine),
        per(c.link_rx),
        per(c.link_tx),
        per(c.vfio),
        per(c.guests),
    )
}
