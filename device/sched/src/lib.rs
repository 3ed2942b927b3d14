//! Scheduling of the data-path threads: CPU affinity and a real-time
//! (`SCHED_FIFO`) priority, for low-latency placements (`ibtca-device
//! --cpus`, `--realtime`), or `SCHED_BATCH` for throughput where nothing
//! busy-polls beside the device (`--sched-batch`, [`set_batch`]).
//!
//! Both are set on the calling thread before the device starts its threads
//! (vfio-user server, engine, link reader and writer), which inherit them.
//! Why this matters on a small host: a guest that polls its completions
//! keeps its vCPU thread busy, and a device thread woken by a doorbell or a
//! packet then waits for the scheduler to preempt it (milliseconds under
//! the fair scheduler). With `SCHED_FIFO` the device thread runs at once,
//! and with the device threads of both ends on one CPU their hand-offs
//! stay on that CPU (a wake-up across CPUs costs tens of µs on a virtual
//! host). A real-time thread must never spin (it would starve everything
//! below it on its CPU), so `--realtime` turns the default spins off; and
//! it should not share its CPU with the QEMU of a busy guest, which it
//! would starve while it moves data (see BENCHMARKS.md, "Verbs between two
//! guests", for the placements measured).

use std::fmt;
use std::io;

pub mod idle_budget;
pub use idle_budget::IdleBudget;

/// A set of CPUs, parsed from a list like `0`, `0-3` or `0,2,4-5`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

/// Largest CPU number accepted (the size of the kernel's `cpu_set_t`).
const MAX_CPU: usize = libc::CPU_SETSIZE as usize - 1;

impl CpuList {
    /// The CPUs, ascending, without duplicates.
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// The list of `cpus` (any order, repeats allowed); `None` when it is
    /// empty or a CPU is above the largest the kernel's set holds.
    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> Option<Self> {
        let mut cpus: Vec<usize> = cpus.into_iter().collect();
        if cpus.is_empty() || cpus.iter().any(|&c| c > MAX_CPU) {
            return None;
        }
        cpus.sort_unstable();
        cpus.dedup();
        Some(CpuList(cpus))
    }
}

impl std::str::FromStr for CpuList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_cpu(a, s)?, parse_cpu(b, s)?),
                None => {
                    let c = parse_cpu(part, s)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(format!(
                    "bad CPU list '{s}': range {lo}-{hi} runs backwards"
                ));
            }
            cpus.extend(lo..=hi);
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

fn parse_cpu(text: &str, whole: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(c) if c <= MAX_CPU => Ok(c),
        Ok(c) => Err(format!(
            "bad CPU list '{whole}': CPU {c} is above {MAX_CPU}"
        )),
        Err(_) => Err(format!(
            "bad CPU list '{whole}': expected CPU numbers and ranges like 0,2-3"
        )),
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&text.join(","))
    }
}

/// Restricts the calling thread (and the threads it starts later) to `cpus`.
pub fn set_affinity(cpus: &CpuList) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bitmask for which all-zero is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus.cpus() {
        // SAFETY: `cpu` is at most MAX_CPU (checked when parsed), inside the set.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: pid 0 is the calling thread; the kernel only reads `set`,
    // whose size is passed with it.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on (its affinity mask).
pub fn allowed_cpus() -> io::Result<CpuList> {
    // SAFETY: cpu_set_t is a plain bitmask for which all-zero is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the kernel writes at most the
    // size passed into `set`, which lives for the call.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: every index is below CPU_SETSIZE, inside the set.
    let cpus = (0..=MAX_CPU).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    CpuList::from_cpus(cpus)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no CPU in the affinity mask"))
}

/// Lowest and highest `SCHED_FIFO` priority.
pub const REALTIME_PRIORITIES: std::ops::RangeInclusive<u8> = 1..=99;

/// Puts the calling thread (and the threads it starts later) under
/// `SCHED_FIFO` at `priority` (1–99). Needs `CAP_SYS_NICE` (root) or an
/// `RLIMIT_RTPRIO` that allows it.
pub fn set_realtime(priority: u8) -> io::Result<()> {
    if !REALTIME_PRIORITIES.contains(&priority) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("real-time priority {priority} is outside 1-99"),
        ));
    }
    let param = libc::sched_param {
        sched_priority: i32::from(priority),
    };
    // SAFETY: pid 0 is the calling thread; the kernel only reads `param`.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Puts the calling thread (and the threads it starts later) under
/// `SCHED_BATCH`: the fair scheduler as under `SCHED_OTHER`, but a thread
/// it wakes never preempts the one running on its CPU; it waits for that
/// thread to block or use up its slice. For throughput where the device's
/// threads outnumber the CPUs: each wake-up of a link reader or an engine
/// then costs no context switch away from a thread in the middle of a
/// burst, and hand-offs come in larger batches. On 2 CPUs with simulated
/// guests it does not raise the 1 MiB WRITE's rate (BENCHMARKS.md, "Verbs
/// (no VM)", the alternated pairs). Not for
/// latency beside busy-polling guests: a woken device thread then waits up
/// to a time slice behind a spinning vCPU (use `--realtime` there). Needs
/// no privilege.
pub fn set_batch() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; the kernel only reads `param`.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's scheduling policy and priority, for logs and tests.
pub fn current() -> (i32, i32) {
    // SAFETY: pid 0 is the calling thread; no memory is passed.
    let policy = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; the kernel writes `param`, which
    // lives for the call.
    unsafe { libc::sched_getparam(0, &mut param) };
    (policy, param.sched_priority)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_singles_ranges_and_mixes() {
        let l: CpuList = "0".parse().unwrap();
        assert_eq!(l.cpus(), &[0]);
        let l: CpuList = "3,0-1, 1".parse().unwrap();
        assert_eq!(l.cpus(), &[0, 1, 3]);
        assert_eq!(l.to_string(), "0,1,3");
    }

    #[test]
    fn bad_cpu_lists_are_refused_with_the_reason() {
        for (text, why) in [
            ("", "expected CPU numbers"),
            ("a", "expected CPU numbers"),
            ("2-1", "runs backwards"),
            ("0,", "expected CPU numbers"),
            ("5000", "above"),
        ] {
            let err = text.parse::<CpuList>().unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }

    #[test]
    fn affinity_is_set_on_the_calling_thread_only_to_the_given_cpus() {
        std::thread::spawn(|| {
            set_affinity(&"0".parse().unwrap()).unwrap();
            // SAFETY: all-zero is a valid cpu_set_t; the kernel writes it.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            // SAFETY: pid 0 is this thread; size matches the set.
            let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
            assert_eq!(rc, 0);
            // SAFETY: reading bits of an initialised set.
            let on: Vec<usize> = (0..8)
                .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
                .collect();
            assert_eq!(on, vec![0]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn allowed_cpus_are_the_calling_threads_affinity_mask() {
        std::thread::spawn(|| {
            let all = allowed_cpus().unwrap();
            let last = *all.cpus().last().unwrap();
            set_affinity(&CpuList::from_cpus([last]).unwrap()).unwrap();
            assert_eq!(allowed_cpus().unwrap().cpus(), &[last]);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn cpu_lists_from_numbers_are_sorted_and_refuse_empty_or_too_large() {
        assert_eq!(CpuList::from_cpus([3, 1, 3]).unwrap().to_string(), "1,3");
        assert_eq!(CpuList::from_cpus([]), None);
        assert_eq!(CpuList::from_cpus([MAX_CPU + 1]), None);
    }

    #[test]
    fn batch_is_set_on_the_calling_thread_and_inherited_by_its_threads() {
        std::thread::spawn(|| {
            set_batch().unwrap();
            assert_eq!(current(), (libc::SCHED_BATCH, 0));
            let child = std::thread::spawn(current).join().unwrap();
            assert_eq!(child, (libc::SCHED_BATCH, 0));
        })
        .join()
        .unwrap();
        assert_eq!(current().0, libc::SCHED_OTHER, "other threads keep theirs");
    }

    #[test]
    fn an_out_of_range_priority_is_refused_before_the_kernel_is_asked() {
        let err = set_realtime(0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("1-99"));
        assert_eq!(current().0, libc::SCHED_OTHER);
    }
}
