//! Where `ibtca-bench verbs` puts its simulated guests and its devices
//! ([`SimPlacement`]): by default as `ibtca-fabric` places two guests and two
//! devices on this machine (`ibtca_fabric::auto_placement`,
//! docs/placement.md), so that the bench measures what a default fabric
//! runs. Each guest, and each thread of the raw baselines, runs on a named
//! thread of its own that takes its place when it starts ([`guest_thread`],
//! [`on_guest_thread`]): niceness is per thread on Linux, and a thread that
//! raised its own cannot lower it again without privilege, so the bench's
//! main thread (which starts the devices, whose threads inherit its
//! niceness) never takes a guest's. Also the scheduling conditions the
//! report states beside it ([`conditions`]): niceness orders threads only
//! within one autogroup, and other load takes the CPUs.

use std::io;
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::Duration;

use ibtca_device::sched::CpuList;
use ibtca_fabric::auto_placement::{self, Choice};

use super::{named, DEFAULT_SPIN_US};

/// The guests' niceness, CPUs and the devices' settings of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SimPlacement {
    /// What chose it, for the report.
    pub(super) origin: String,
    /// Niceness of every guest thread (and raw baseline thread).
    pub(super) guest_nice: i32,
    /// Guest A's and guest B's CPU (`None`: not pinned).
    pub(super) guest_cpus: Option<[usize; 2]>,
    /// The CPUs both devices' threads share (`None`: not pinned).
    pub(super) device_cpus: Option<CpuList>,
    /// The vfio-user servers' spin (`ibtca-device --spin-us`).
    pub(super) device_spin: Duration,
}

impl SimPlacement {
    /// What `ibtca-fabric` chooses (`choice`) for two device nodes on
    /// `cpus` CPUs: on a shared machine guests at nice
    /// [`auto_placement::SHARED_GUEST_NICE`] and devices that do not spin
    /// (the launcher passes `--spin-us=0` to the device of a niced guest),
    /// nothing pinned; with a CPU for each, guests pinned one per CPU,
    /// devices on the rest with their default spin.
    pub(super) fn from_choice(choice: &Choice, cpus: usize) -> Self {
        match choice {
            Choice::Shared => SimPlacement {
                origin: format!(
                    "ibtca-fabric's on {cpus} CPUs (fewer than 2 guests + 2 devices): \
                     guests at nice {}, devices not spinning (--spin-us 0), nothing pinned",
                    auto_placement::SHARED_GUEST_NICE
                ),
                guest_nice: i32::from(auto_placement::SHARED_GUEST_NICE),
                guest_cpus: None,
                device_cpus: None,
                device_spin: Duration::ZERO,
            },
            Choice::Dedicated { guests, devices } => {
                let first = |i: usize| guests.get(i).and_then(|g| g.cpus().first().copied());
                let guest_cpus = first(0).zip(first(1)).map(|(a, b)| [a, b]);
                SimPlacement {
                    origin: format!(
                        "ibtca-fabric's on {cpus} CPUs (a CPU for each guest and device): \
                         guests at nice 0 on CPUs {}, devices on {devices} spinning up to \
                         {DEFAULT_SPIN_US} µs",
                        guest_cpus.map_or("-".into(), |[a, b]| format!("{a} and {b}")),
                    ),
                    guest_nice: 0,
                    guest_cpus,
                    device_cpus: Some(devices.clone()),
                    device_spin: Duration::from_micros(DEFAULT_SPIN_US),
                }
            }
        }
    }

    /// The bench before it took the launcher's placement (`--unplaced`):
    /// guests at nice 0, nothing pinned, the devices' default spin.
    pub(super) fn unplaced() -> Self {
        SimPlacement {
            origin: "--unplaced: guests at nice 0, nothing pinned, devices spinning up to \
                     50 µs (the ibtca-device default)"
                .into(),
            guest_nice: 0,
            guest_cpus: None,
            device_cpus: None,
            device_spin: Duration::from_micros(DEFAULT_SPIN_US),
        }
    }

    /// This one with `--guest-nice` and `--device-spin-us` applied.
    pub(super) fn overridden(mut self, nice: Option<i32>, spin_us: Option<u64>) -> Self {
        if let Some(n) = nice {
            self.guest_nice = n;
            self.origin.push_str(&format!("; --guest-nice {n}"));
        }
        if let Some(us) = spin_us {
            self.device_spin = Duration::from_micros(us);
            self.origin.push_str(&format!("; --device-spin-us {us}"));
        }
        self
    }

    /// Whether guests get a niceness or CPUs of their own (other than
    /// nice 0, unpinned).
    pub(super) fn moves_guests(&self) -> bool {
        self.guest_nice != 0 || self.guest_cpus.is_some()
    }

    /// Puts the calling thread where guest `role` (0: A, 1: B) belongs:
    /// its niceness, and its CPU if guests are pinned.
    pub(super) fn take_guest_place(&self, role: usize) -> io::Result<()> {
        set_own_nice(self.guest_nice)?;
        if let Some(cpus) = self.guest_cpus {
            let cpu = CpuList::from_cpus([cpus[role % 2]]).expect("one CPU");
            ibtca_device::sched::set_affinity(&cpu)?;
        }
        Ok(())
    }
}

/// The run's placement, once `verbs` set it; other benches run unplaced.
static PLACEMENT: OnceLock<SimPlacement> = OnceLock::new();

/// Sets the run's placement (once, before anything runs).
pub(super) fn set_placement(p: SimPlacement) {
    let _ = PLACEMENT.set(p);
}

/// The run's placement ([`SimPlacement::unplaced`] unless `verbs` set one).
pub(super) fn placement() -> &'static SimPlacement {
    PLACEMENT.get_or_init(SimPlacement::unplaced)
}

/// What `ibtca-fabric` would choose for two guests and two devices on
/// the CPUs this process may use.
pub(super) fn fabric_placement() -> SimPlacement {
    let cpus = auto_placement::machine_cpus();
    SimPlacement::from_choice(&auto_placement::choose(&cpus, 2), cpus.len())
}

/// Sets the calling thread's niceness (Linux: per thread).
fn set_own_nice(nice: i32) -> io::Result<()> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority reads only its integer arguments; `tid` is the
    // calling thread, so only this thread's niceness changes.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The calling thread's niceness (the tests check placement with it).
#[cfg(test)]
pub(super) fn own_nice() -> io::Result<i32> {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // getpriority may return -1 as a niceness: errno tells it apart.
    // SAFETY: errno is this thread's own; getpriority reads only its
    // integer arguments.
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t)
    };
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(0) | None => Ok(nice),
        Some(_) => Err(e),
    }
}

/// Starts a named thread (a guest or a raw baseline's side, `role` 0 or 1)
/// that takes the run's guest placement before it runs `f`.
pub(super) fn guest_thread<T: Send + 'static>(
    name: &str,
    role: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let what = name.to_string();
    named(name, move || {
        placement()
            .take_guest_place(role)
            .unwrap_or_else(|e| panic!("{what}: cannot take the guests' placement: {e}"));
        f()
    })
}

/// Runs `f` on a named thread that takes the run's guest placement
/// (`role` 0 or 1) first, and returns its result.
pub(super) fn on_guest_thread<T: Send>(name: &str, role: usize, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn_scoped(s, || {
                placement()
                    .take_guest_place(role)
                    .unwrap_or_else(|e| panic!("{name}: cannot take the guests' placement: {e}"));
                f()
            })
            .expect("spawn a bench guest thread")
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// `/proc/loadavg`'s text (empty if unreadable).
pub(super) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The report's lines on the run's scheduling: the placement, this
/// process's autogroup (niceness orders threads only within it), and the
/// load average at the start (`at_start`) and now.
pub(super) fn conditions(at_start: &str) -> Vec<String> {
    let autogroup = std::fs::read_to_string("/proc/self/autogroup")
        .map(|a| a.trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"));
    vec![
        format!("SimPlacement: {}.", placement().origin),
        format!(
            "Autogroup: {autogroup}; load average at the start {at_start}, at the end {}.",
            load_average()
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_threads_take_the_placements_nice_and_devices_do_not_spin_on_two_cpus() {
        let p = SimPlacement::from_choice(&auto_placement::choose(&[0, 1], 2), 2);
        assert_eq!(p.device_spin, Duration::ZERO);
        assert_eq!((p.guest_cpus, p.device_cpus.clone()), (None, None));
        set_placement(p);
        let before = own_nice().unwrap();
        let nice = guest_thread("guest-test", 0, || own_nice().unwrap())
            .join()
            .unwrap();
        assert_eq!(nice, 19);
        let scoped = on_guest_thread("guest-test", 1, || own_nice().unwrap());
        assert_eq!(scoped, 19);
        assert_eq!(own_nice().unwrap(), before, "the caller keeps its niceness");
    }

    #[test]
    fn with_a_cpu_each_guests_are_pinned_at_nice_0_and_devices_spin_on_the_rest() {
        let p = SimPlacement::from_choice(&auto_placement::choose(&[0, 1, 2, 3], 2), 4);
        assert_eq!(p.guest_nice, 0);
        assert_eq!(p.guest_cpus, Some([0, 1]));
        assert_eq!(p.device_cpus.map(|c| c.to_string()), Some("2,3".into()));
        assert_eq!(p.device_spin, Duration::from_micros(DEFAULT_SPIN_US));
    }
}
