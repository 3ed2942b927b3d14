//! Processes of a soak run: signals, reaping, RssAnon samples, host stalls.

#![allow(clippy::wildcard_imports)]

use super::*;

pub(crate) fn kill(pid: u32, sig: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) takes plain integers and touches no memory of
        // ours; the PIDs are our own children or their descendants.
        unsafe { libc::kill(pid, sig) };
    }
}

/// Our child `pid`'s wait status if it has ended (reaped), else `None`.
pub(crate) fn try_reap(pid: u32) -> Option<i32> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut status = 0;
    // SAFETY: waitpid(2) writes the status into our local integer only.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    (r == pid).then_some(status)
}

/// Reaps our child `pid` (blocking) and returns its wait status.
pub(crate) fn reap(pid: u32) -> Option<i32> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    let mut status = 0;
    // SAFETY: waitpid(2) writes the status into our local integer only.
    let r = unsafe { libc::waitpid(pid, &mut status, 0) };
    (r == pid).then_some(status)
}

pub(crate) fn describe_status(status: Option<i32>) -> String {
    match status {
        None => "not our child".into(),
        Some(s) if libc::WIFEXITED(s) => format!("exit status {}", libc::WEXITSTATUS(s)),
        Some(s) if libc::WIFSIGNALED(s) => format!("killed by signal {}", libc::WTERMSIG(s)),
        Some(s) => format!("wait status {s:#x}"),
    }
}

/// RssAnon and VmRSS of `pid`, KiB.
pub(crate) fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse::<u64>()
            .ok()
    };
    Some((kib("RssAnon:")?, kib("VmRSS:")?))
}

/// Min and max of a device's (or the switch's) samples, KiB.
#[derive(Debug, Clone)]
pub(crate) struct Rss {
    pub(crate) name: String,
    pub(crate) pid: u32,
    pub(crate) samples: u64,
    pub(crate) anon_min: u64,
    pub(crate) anon_max: u64,
    pub(crate) rss_max: u64,
}

impl Rss {
    pub(crate) fn new(name: &str, pid: u32) -> Self {
        Rss {
            name: name.to_owned(),
            pid,
            samples: 0,
            anon_min: u64::MAX,
            anon_max: 0,
            rss_max: 0,
        }
    }

    pub(crate) fn sample(&mut self) {
        if let Some((anon, rss)) = rss_kib(self.pid) {
            self.samples += 1;
            self.anon_min = self.anon_min.min(anon);
            self.anon_max = self.anon_max.max(anon);
            self.rss_max = self.rss_max.max(rss);
        }
    }
}

/// How late the runner's own 10 ms sleeps woke, where more than 100 ms:
/// (seconds into the run, lateness in seconds). A device starved that long
/// answers nothing either, and (retry_cnt + 1) x 67 ms of silence breaks
/// every connection to it; the report lists these next to the breaks.
#[derive(Clone, Default)]
pub(crate) struct Stalls(Arc<Mutex<Vec<(f64, f64)>>>);

impl Stalls {
    pub(crate) fn watch(&self, t0: Instant, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
        let seen = self.0.clone();
        std::thread::spawn(move || {
            let tick = Duration::from_millis(10);
            while !stop.load(Ordering::Relaxed) {
                let before = Instant::now();
                std::thread::sleep(tick);
                let late = before.elapsed().saturating_sub(tick);
                if late > Duration::from_millis(100) {
                    let at = before.duration_since(t0).as_secs_f64();
                    seen.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((at, late.as_secs_f64()));
                }
            }
        })
    }

    pub(crate) fn list(&self) -> Vec<(f64, f64)> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}
