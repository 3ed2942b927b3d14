//! How this process's threads used and waited for the CPUs, by role
//! ([`CpuSplit`]): on-CPU time, run delay, timeslices and context switches
//! from `/proc/self/task/*/schedstat` and `status`.

/// The thread roles, in the order of [`CpuSplit::sched`].
pub(super) const ROLES: [&str; 5] = ["engine", "link rx", "link tx", "vfio", "guests"];

/// On-CPU time of this process's threads over a timed part, by role, in
/// nanoseconds (from `/proc/self/task/*/schedstat`, so it counts only time
/// actually on a CPU: robust against other load on the machine, unlike the
/// wall-clock rates), and how they were scheduled.
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
    /// How each role ([`ROLES`]) was scheduled.
    pub(super) sched: [Sched; ROLES.len()],
}

/// How the threads of one role were scheduled over a timed part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Sched {
    /// ns runnable but waiting for a CPU (`schedstat` field 2).
    pub(super) run_delay: u64,
    /// Times put on a CPU (`schedstat` field 3).
    pub(super) slices: u64,
    /// Switches away because the thread blocked (`voluntary_ctxt_switches`).
    pub(super) voluntary: u64,
    /// Switches away while still runnable, preempted
    /// (`nonvoluntary_ctxt_switches`).
    pub(super) involuntary: u64,
}

impl CpuSplit {
    /// Device CPU (everything but the guests).
    pub(super) fn device(&self) -> u64 {
        self.engine + self.link_rx + self.link_tx + self.vfio
    }
}

/// One thread's counters: on-CPU ns, then [`Sched`] (all since it started).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ThreadStat {
    pub(super) comm: String,
    pub(super) on_cpu: u64,
    pub(super) sched: Sched,
}

/// Every thread of this process, by tid.
pub(super) type CpuSnapshot = std::collections::HashMap<u32, ThreadStat>;

/// `schedstat`'s three fields: on-CPU ns, run delay ns, timeslices.
pub(super) fn parse_schedstat(text: &str) -> Option<(u64, u64, u64)> {
    let mut f = text.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??, f.next()??))
}

/// `status`' voluntary and involuntary context switches (0 for a missing
/// line).
pub(super) fn parse_ctxt_switches(status: &str) -> (u64, u64) {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        field("voluntary_ctxt_switches"),
        field("nonvoluntary_ctxt_switches"),
    )
}

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
        let Some((on_cpu, run_delay, slices)) = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| parse_schedstat(&s))
        else {
            continue;
        };
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        let (voluntary, involuntary) = parse_ctxt_switches(&status);
        out.insert(
            tid,
            ThreadStat {
                comm: comm.trim().to_string(),
                on_cpu,
                sched: Sched {
                    run_delay,
                    slices,
                    voluntary,
                    involuntary,
                },
            },
        );
    }
    out
}

/// The role ([`ROLES`] index) of thread `tid` named `comm`.
fn role(tid: u32, comm: &str) -> usize {
    match comm {
        "ibtca-engine" => 0,
        "ibtca-link" => 1,
        "ibtca-link-tx" => 2,
        c if tid == std::process::id() || c.starts_with("guest") || c.starts_with("raw") => 4,
        _ => 3,
    }
}

/// CPU used, and scheduling, between two snapshots by the threads alive
/// at the second.
pub(super) fn cpu_delta(before: &CpuSnapshot, after: &CpuSnapshot) -> CpuSplit {
    let mut split = CpuSplit::default();
    for (tid, t) in after {
        let b = before.get(tid).cloned().unwrap_or_default();
        let since = |now: u64, then: u64| now - then.min(now);
        let r = role(*tid, &t.comm);
        let used = since(t.on_cpu, b.on_cpu);
        *[
            &mut split.engine,
            &mut split.link_rx,
            &mut split.link_tx,
            &mut split.vfio,
            &mut split.guests,
        ][r] += used;
        let s = &mut split.sched[r];
        s.run_delay += since(t.sched.run_delay, b.sched.run_delay);
        s.slices += since(t.sched.slices, b.sched.slices);
        s.voluntary += since(t.sched.voluntary, b.sched.voluntary);
        s.involuntary += since(t.sched.involuntary, b.sched.involuntary);
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

/// How each role was scheduled, per `unit` (`units` of them): run delay
/// (µs runnable but waiting for a CPU), timeslices, voluntary and
/// involuntary context switches.
pub(super) fn sched_note(what: &str, c: &CpuSplit, units: u64, unit: &str) -> String {
    let per = |n: u64| n as f64 / units.max(1) as f64;
    let row = |name: &str, get: &dyn Fn(&Sched) -> f64| {
        let cells: Vec<String> = c.sched.iter().map(|s| format!("{:8.2}", get(s))).collect();
        format!("    {name:<22}{}", cells.join(""))
    };
    let head: Vec<String> = ROLES.iter().map(|r| format!("{r:>8}")).collect();
    [
        format!("  {what}, per {unit}:   {}", head.join("")),
        row("run delay µs", &|s| per(s.run_delay) / 1000.0),
        row("timeslices", &|s| per(s.slices)),
        row("voluntary switches", &|s| per(s.voluntary)),
        row("involuntary switches", &|s| per(s.involuntary)),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_on_cpu_time_run_delay_and_timeslices() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some((123, 456, 7)));
        assert_eq!(parse_schedstat("123 456"), None);
        let status = "Name:\tibtca-link\nvoluntary_ctxt_switches:\t12\n\
                      nonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_ctxt_switches(status), (12, 3));
    }

    #[test]
    fn a_delta_puts_each_threads_counts_in_its_role() {
        let stat = |comm: &str, n: u64| ThreadStat {
            comm: comm.into(),
            on_cpu: 10 * n,
            sched: Sched {
                run_delay: 5 * n,
                slices: n,
                voluntary: 2 * n,
                involuntary: 3 * n,
            },
        };
        let before = CpuSnapshot::from([(1, stat("ibtca-link", 1)), (2, stat("x", 1))]);
        let after = CpuSnapshot::from([
            (1, stat("ibtca-link", 4)),
            (2, stat("x", 2)),
            (3, stat("guest-a", 1)),
        ]);
        let d = cpu_delta(&before, &after);
        assert_eq!((d.link_rx, d.vfio, d.guests), (30, 10, 10));
        let want = |n: u64| Sched {
            run_delay: 5 * n,
            slices: n,
            voluntary: 2 * n,
            involuntary: 3 * n,
        };
        assert_eq!(d.sched[1], want(3));
        assert_eq!(d.sched[3], want(1));
        assert_eq!(d.sched[4], want(1));
        assert_eq!(d.sched[0], Sched::default());
    }
}
