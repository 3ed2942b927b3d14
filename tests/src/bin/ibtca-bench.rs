//! `ibtca-bench`: benchmarks for the ibtca vfio-user server and device.
//!
//! ```text
//! cargo build --release --workspace
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- mmio [--iterations N] [--no-vm]
//!     [--guest-spins LIST] [--guest-repeat N]
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- verbs [--seconds S]
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- guest-verbs
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- drdma [--seconds S]
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- switch [--seconds S]
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- guest-drdma
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- link [--packets N]
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- crc
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- sma [--smps N]
//! ```
//!
//! `sma` (see `tests/src/bench/sma.rs`): SMPs per second answered by a
//! device's subnet management agent, next to a test SM and behind two
//! switches, and by a switch's (port 0), next to a raw link round trip
//! of the same SMP (echoed, no agent) in the same run.
//!
//! `drdma` (see `tests/src/bench/drdma.rs`): Direct RDMA WRITE bandwidth
//! through the trapped and the mapped window, next to memcpy and an ordinary
//! RDMA WRITE from guest memory.
//!
//! `mmio` measures, in one run, and prints one table:
//!
//! - the host baseline: a 16-byte request / 32-byte reply ping-pong over a
//!   `UnixStream` pair between two threads (blocking reads), both threads on
//!   one CPU and on two CPUs;
//! - the server without a VM: the harness `Client` doing 4-byte REGION_READs
//!   of BAR0 SCRATCH against an `ibtca-device` process, on one CPU and on two,
//!   with `--spin-us 0` and with the default spin;
//! - a real guest (unless `--no-vm`): the foundation guest's `IBTCA-BENCH`
//!   line (trapped 32-bit BAR0 reads and posted writes, timed in the guest
//!   kernel) with QEMU and the server on one CPU, on two CPUs, and unpinned.
//!
//! `verbs` measures, in one run, two device instances of this process joined
//! by a Unix-socket link, each driven through vfio-user by a simulated guest
//! (`ibtca_tests::sim_guest`, busy-polling its CQ): RDMA WRITE throughput and
//! message rate at 1 MiB, 4 KiB and 64 B with 64 WQEs outstanding, the 64 B
//! SEND message rate with 128 outstanding, and a 64 B SEND ping-pong; next to
//! the raw baselines of the same run (a 64 KiB `UnixStream` stream, 64 B
//! messages one `write`/`read` each, a 64 B socket ping-pong).
//!
//! `guest-verbs` is the perftest-style run between two real guests: two
//! release `ibtca-device` processes joined by a link (LIDs 1 and 2), two TCG
//! guests (1 vCPU, 1 GiB) booted at once in the `verbs-bench` mode of the
//! initramfs; the client's `ibtca-tool verbs-bench` prints `IBTCA-PERF`
//! lines (`write_bw` at 64 B, 4 KiB and 1 MiB, `write_lat` spinning on
//! memory, `write_lat_sleep` napping between looks, `send_lat` through the
//! CQ interrupt), shown next to the soft-RoCE reference measured between
//! two such guests. `--engine-spin-us` is passed to both devices. It runs
//! three times (`--placement`): "shared" (nothing pinned, default
//! priorities), "nice" (the same with both guests' QEMU at nice 19, no
//! privilege needed) and "latency" (both devices' threads on CPU 0 under
//! `SCHED_FIFO`, one guest per CPU), each with its own table.
//!
//! `switch` measures RDMA WRITE through in-process switches: aggregate
//! 64 KiB throughput of 1, 2 and 4 pairs through one switch, and 64 B
//! round trips over a direct link, one switch and two switches (the
//! difference is the per-hop latency), next to the raw socket baselines.
//!
//! `guest-drdma` boots the same two guests in the `drdma-bench` mode, once
//! with the DRDMA window trapped and once mapped: the server guest's
//! `ibtca-tool drdma-bench` prints `IBTCA-DRDMA-PERF` lines for memcpy of
//! 4 KiB in guest memory, DRDMA WRITEs of 4 KiB (32 ranges at a time,
//! filled with memcpy_toio, 8-byte stores or mixed sizes), DRDMA READs
//! drained with memcpy_fromio (trapped only) and ordinary 4 KiB RDMA
//! WRITEs from memory, shown as one table with each rate as a share of the
//! memcpy rate of the same run.
//!
//! `link` (see `tests/src/bench/link.rs`): raw 4 KiB packets through one
//! `link::Link` pair, no device: GB/s, packets per second, packets per
//! socket write.
//!
//! `crc` (see `tests/src/bench/crc.rs`): the ICRC and VCRC on 4 KiB RDMA
//! WRITE packets next to memcpy and the byte-at-a-time tables, and whole
//! `Packet::build` / `PacketView::parse`.
//!
//! Nothing timed is asserted: the targets are printed as PASS/MISS and the
//! exit status is 0 unless something could not run at all.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibtca_device::link::LinkStats;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe};
use ibtca_tests::vm::{VmConfig, VmStack};
use ibtca_tests::{Client, TempDir, TestServer};

/// The server's default `--spin-us` (see `ibtca-device --help`).
const DEFAULT_SPIN_US: u64 = 50;

const USAGE: &str = "usage: ibtca-bench mmio [--iterations N] [--no-vm] \
[--guest-spins US[,US...]] [--guest-repeat N]
       ibtca-bench verbs [--seconds S] [--only ROWS] [--pairs N] [--idle-sleep-us US] [--engine-spin-us US] [--sched-batch] [--split] [--link-ring-kib KIB] [--link-spin-us US]
       ibtca-bench guest-verbs [--engine-spin-us US] [--sched-batch] [--placement P]
       ibtca-bench drdma [--seconds S]
       ibtca-bench switch [--seconds S]
       ibtca-bench guest-drdma [--placement P]
       ibtca-bench link [--packets N]
       ibtca-bench crc
       ibtca-bench sma [--smps N]

  --iterations N      host round trips per measurement (default 20000)
  --no-vm             skip the guest measurements
  --guest-spins LIST  server --spin-us values for the pinned guest runs
                      (default 50, the server default); e.g. 0,20,50,200
  --guest-repeat N    boot each pinned guest configuration N times (default 1)

  --seconds S         (verbs) timed seconds per measurement (default 2; a
                      tenth of that more as warm-up for the verbs rows)
  --only ROWS         (verbs) run only these rows (comma list of write-1m,
                      write-4k, write-64, read-1m, send, ping); the raw rows always run
  --pairs N           (verbs) measure the 1 MiB WRITE row as N pairs of a raw
                      stream run and a WRITE run, interleaved (default 1); the
                      row shows the pair with the median ratio (the lower
                      one for even N) and every pair is listed: on a machine
                      whose speed drifts, a fairer ratio than one pair
  --idle-sleep-us US  (verbs) the simulated guests sleep US µs when their CQ
                      is empty instead of spinning with sched_yield (default 0)
  --split             (verbs) device A's threads on CPU 0 and B's on CPU 1 (as
                      two `ibtca-device --cpus` processes would run), and the
                      raw stream and message rows' writer on CPU 0 and reader
                      on CPU 1 (the raw ping-pong stays unpinned); default:
                      nothing pinned
  --link-ring-kib KIB (verbs) the link's shared-memory ring per direction, as
                      `ibtca-device --link-ring-kib` (default 4096; 0: frames
                      on the Unix socket)
  --link-spin-us US   (verbs) the link readers poll an empty ring US µs before
                      they sleep (default 0, the ibtca-device default)
  --sched-batch       (verbs) every thread of the run under SCHED_BATCH, the
                      raw rows' too (a woken thread does not preempt a
                      running one; `ibtca-device --sched-batch`);
                      (guest-verbs) both devices with --sched-batch, in
                      placements without SCHED_FIFO
  --engine-spin-us US (verbs, guest-verbs) the devices' engine threads poll
                      for events US µs before blocking (default 0, the
                      ibtca-device default)
  --packets N         (link) packets sent (default 500000)
  --smps N            (sma) SMPs per measurement (default 20000)
  --placement P       (guest-verbs, guest-drdma) shared (nothing pinned), nice (nothing
                      pinned, the guests' QEMU at nice 19), latency (devices
                      on CPU 0 under SCHED_FIFO, one guest per CPU), both
                      (shared and latency), all (the three; guest-verbs'
                      default; guest-drdma's: shared) or custom:A,B,VA,VB (CPU
                      lists of device A, device B, the server's and the
                      client's QEMU; - unpinned, 0+1 for two CPUs; devices
                      under SCHED_FIFO)

Build first: cargo build --release --workspace";

struct Opts {
    iterations: usize,
    vm: bool,
    guest_spins: Vec<u64>,
    guest_repeat: usize,
}

/// Which benchmark to run.
enum Bench {
    Mmio(Opts),
    Verbs { seconds: f64, idle_us: u64 },
    GuestVerbs,
    Drdma { seconds: f64 },
    Switch { seconds: f64 },
    GuestDrdma,
    Link { packets: u64 },
    Crc,
    Sma { smps: u64 },
}

#[path = "../bench/cpu.rs"]
mod cpu;
#[path = "../bench/crc.rs"]
mod crc;
#[path = "../bench/drdma.rs"]
mod drdma;
#[path = "../bench/guests.rs"]
mod guests;
#[path = "../bench/link.rs"]
mod link;
#[path = "../bench/mmio.rs"]
mod mmio;
#[path = "../bench/rate.rs"]
mod rate;
#[path = "../bench/raw.rs"]
mod raw;
#[path = "../bench/sma.rs"]
mod sma;
#[path = "../bench/switch.rs"]
mod switch;
#[path = "../bench/table.rs"]
mod table;
#[path = "../bench/verbs.rs"]
mod verbs;
#[path = "../bench/verbs_pair.rs"]
mod verbs_pair;

use cpu::*;
use guests::*;
use rate::*;
use raw::*;
use table::*;
use verbs::*;
use verbs_pair::*;

fn parse_args() -> Result<Bench, String> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("mmio") => parse_mmio(args).map(Bench::Mmio),
        Some("verbs") => parse_verbs(args),
        Some("drdma") => match parse_verbs(args)? {
            Bench::Verbs { seconds, .. } => Ok(Bench::Drdma { seconds }),
            other => Ok(other),
        },
        Some("guest-verbs") => {
            while let Some(a) = args.next() {
                match a.as_str() {
                    "--engine-spin-us" => parse_engine_spin(args.next())?,
                    "--sched-batch" => SCHED_BATCH.store(true, Ordering::Relaxed),
                    "--placement" => parse_placement(args.next())?,
                    "-h" | "--help" => return Err(String::new()),
                    other => return Err(format!("unknown option '{other}'")),
                }
            }
            Ok(Bench::GuestVerbs)
        }
        Some("switch") => match parse_verbs(args)? {
            Bench::Verbs { seconds, .. } => Ok(Bench::Switch { seconds }),
            other => Ok(other),
        },
        Some("guest-drdma") => {
            while let Some(a) = args.next() {
                match a.as_str() {
                    "--placement" => parse_placement(args.next())?,
                    "-h" | "--help" => return Err(String::new()),
                    other => return Err(format!("unknown option '{other}'")),
                }
            }
            Ok(Bench::GuestDrdma)
        }
        Some("link") => {
            let mut packets = 500_000;
            while let Some(a) = args.next() {
                match a.as_str() {
                    "--packets" => {
                        packets = args
                            .next()
                            .and_then(|v| v.parse().ok())
                            .filter(|&n| n > 0)
                            .ok_or("--packets needs a positive integer")?
                    }
                    "-h" | "--help" => return Err(String::new()),
                    other => return Err(format!("unknown option '{other}'")),
                }
            }
            Ok(Bench::Link { packets })
        }
        Some("sma") => {
            let mut smps = 20_000;
            while let Some(a) = args.next() {
                match a.as_str() {
                    "--smps" => {
                        smps = args
                            .next()
                            .and_then(|v| v.parse().ok())
                            .filter(|&n| n > 0)
                            .ok_or("--smps needs a positive number")?;
                    }
                    "-h" | "--help" => return Err(String::new()),
                    other => return Err(format!("unknown option '{other}'")),
                }
            }
            Ok(Bench::Sma { smps })
        }
        Some("crc") => match args.next().as_deref() {
            None => Ok(Bench::Crc),
            Some("-h" | "--help") => Err(String::new()),
            Some(other) => Err(format!("unknown option '{other}'")),
        },
        Some("-h" | "--help") => Err(String::new()),
        Some(other) => Err(format!("unknown benchmark '{other}'")),
        None => Err(
            "which benchmark? (mmio, verbs, guest-verbs, drdma, switch, guest-drdma, link, crc, sma)"
                .into(),
        ),
    }
}

/// Names of the verbs rows, for `--only`.
const VERBS_ROWS: [&str; 6] = [
    "write-1m", "write-4k", "write-64", "read-1m", "send", "ping",
];
/// The rows `--only` chose (all when unset).
static ONLY_ROWS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Whether the verbs row `name` is to run.
fn row_chosen(name: &str) -> bool {
    match ONLY_ROWS.get() {
        Some(rows) => rows.iter().any(|r| r == name),
        None => true,
    }
}

/// `--pairs`: interleaved (raw stream, 1 MiB WRITE) pairs for the 1 MiB row.
static PAIRS: AtomicU64 = AtomicU64::new(1);

/// How many (raw stream, 1 MiB WRITE) pairs the 1 MiB row takes.
fn pairs() -> u64 {
    PAIRS.load(Ordering::Relaxed)
}

/// `--split`: the two devices (and the raw rows' two threads) on CPUs 0
/// and 1.
static SPLIT: AtomicBool = AtomicBool::new(false);

/// The CPUs of device A and device B (`--split`), or `None`.
fn split_cpus() -> Option<(usize, usize)> {
    SPLIT.load(Ordering::Relaxed).then_some((0, 1))
}

/// `--link-ring-kib`: the verbs pair's shared link rings, in bytes (0:
/// frames on the socket, to compare the two).
static LINK_RING: AtomicU64 = AtomicU64::new(ibtca_device::link::SHARED_RING);

/// The verbs pair's shared link ring (`InstanceConfig::link_ring`).
fn link_ring() -> u64 {
    LINK_RING.load(Ordering::Relaxed)
}

/// The verbs pair's link reader spin in µs (`--link-spin-us`).
static LINK_SPIN_US: AtomicU64 = AtomicU64::new(u64::MAX);

/// The verbs pair's link reader spin (`InstanceConfig::link_spin`).
fn link_spin() -> Duration {
    match LINK_SPIN_US.load(Ordering::Relaxed) {
        u64::MAX => ibtca_device::link::RX_SPIN,
        us => Duration::from_micros(us),
    }
}

/// `--sched-batch`: the verbs rows run entirely under `SCHED_BATCH`
/// (raw rows included); guest-verbs passes `ibtca-device --sched-batch`
/// (placements without `--realtime`).
static SCHED_BATCH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The devices' engine spin in µs (`--engine-spin-us`).
static ENGINE_SPIN_US: AtomicU64 = AtomicU64::new(DEFAULT_ENGINE_SPIN_US);
/// `ibtca-device --engine-spin-us` default.
const DEFAULT_ENGINE_SPIN_US: u64 = 0;

fn parse_engine_spin(v: Option<String>) -> Result<(), String> {
    let us: u64 = v
        .and_then(|v| v.parse().ok())
        .ok_or("--engine-spin-us needs a non-negative integer")?;
    ENGINE_SPIN_US.store(us, Ordering::Relaxed);
    Ok(())
}

fn engine_spin() -> Duration {
    Duration::from_micros(ENGINE_SPIN_US.load(Ordering::Relaxed))
}

fn parse_verbs(mut args: impl Iterator<Item = String>) -> Result<Bench, String> {
    let mut seconds = 2.0;
    let mut idle_us = 0;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--idle-sleep-us" => {
                idle_us = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--idle-sleep-us needs a non-negative integer")?
            }
            "--engine-spin-us" => parse_engine_spin(args.next())?,
            "--sched-batch" => {
                // Every thread of the run, the raw rows' too: a fair
                // baseline under the same policy.
                ibtca_device::sched::set_batch().map_err(|e| format!("--sched-batch: {e}"))?;
                SCHED_BATCH.store(true, Ordering::Relaxed);
            }
            "--split" => SPLIT.store(true, Ordering::Relaxed),
            "--link-ring-kib" => {
                let kib: u64 = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--link-ring-kib needs a non-negative integer")?;
                LINK_RING.store(kib.saturating_mul(1024), Ordering::Relaxed);
            }
            "--link-spin-us" => {
                let us = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--link-spin-us needs a non-negative integer")?;
                LINK_SPIN_US.store(us, Ordering::Relaxed);
            }
            "--pairs" => {
                let n: u64 = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n > 0)
                    .ok_or("--pairs needs a positive integer")?;
                PAIRS.store(n, Ordering::Relaxed);
            }
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .filter(|&s| s > 0.0 && s.is_finite())
                    .ok_or("--seconds needs a positive number")?
            }
            "--only" => {
                let list = args.next().ok_or("--only needs a list of rows")?;
                let rows: Vec<String> = list.split(',').map(str::to_string).collect();
                if let Some(bad) = rows.iter().find(|r| !VERBS_ROWS.contains(&r.as_str())) {
                    return Err(format!(
                        "unknown row '{bad}' (rows: {})",
                        VERBS_ROWS.join(", ")
                    ));
                }
                let _ = ONLY_ROWS.set(rows);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(Bench::Verbs { seconds, idle_us })
}

fn parse_mmio(mut args: impl Iterator<Item = String>) -> Result<Opts, String> {
    let mut o = Opts {
        iterations: 20_000,
        vm: true,
        guest_spins: vec![DEFAULT_SPIN_US],
        guest_repeat: 1,
    };
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--iterations" => {
                o.iterations = value("--iterations")?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--iterations needs a positive integer")?
            }
            "--no-vm" => o.vm = false,
            "--guest-spins" => {
                o.guest_spins = value("--guest-spins")?
                    .split(',')
                    .map(|s| s.trim().parse())
                    .collect::<Result<_, _>>()
                    .map_err(|_| "--guest-spins needs comma-separated integers")?
            }
            "--guest-repeat" => {
                o.guest_repeat = value("--guest-repeat")?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or("--guest-repeat needs a positive integer")?
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option '{other}'")),
        }
    }
    Ok(o)
}

/// An `ibtca-device` process, optionally under `taskset`.
///
/// `DeviceProcess` of the harness finds the binary with `workspace_bin`,
/// which assumes the caller is a test in `target/<profile>/deps`; this
/// binary lives in `target/<profile>`, next to `ibtca-device`.
struct Device {
    child: Child,
}

impl Device {
    fn start(bin: &Path, socket: &Path, cpus: Option<&str>, spin_us: u64, extra: &[&str]) -> Self {
        let log = std::fs::File::create(socket.with_extension("log")).expect("device log");
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
            .arg("--spin-us")
            .arg(spin_us.to_string())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start ibtca-device");
        let mut dev = Device { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            if let Some(st) = dev.child.try_wait().unwrap() {
                panic!("ibtca-device exited ({st}); log: {}", socket.display());
            }
            assert!(Instant::now() < deadline, "no socket {}", socket.display());
            std::thread::sleep(Duration::from_millis(10));
        }
        dev
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ibtca-device` next to this binary, or `None` (after saying so).
fn device_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe.with_file_name("ibtca-device");
    if bin.exists() {
        return Some(bin);
    }
    eprintln!(
        "ibtca-bench: {} is missing: build the server next to this binary first,\n    \
         cargo build --release --workspace\n\
         (and run the bench with --release too)",
        bin.display()
    );
    None
}

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(Bench::Mmio(o)) => o,
        Ok(Bench::Verbs { seconds, idle_us }) => {
            IDLE_SLEEP_US.store(idle_us, Ordering::Relaxed);
            return run_verbs(seconds);
        }
        Ok(Bench::GuestVerbs) => return run_guest_verbs(),
        Ok(Bench::Drdma { seconds }) => return drdma::run(seconds),
        Ok(Bench::Switch { seconds }) => return switch::run(seconds),
        Ok(Bench::GuestDrdma) => return run_guest_drdma(),
        Ok(Bench::Link { packets }) => return link::run(packets),
        Ok(Bench::Sma { smps }) => return sma::run(smps),
        Ok(Bench::Crc) => return crc::run(),
        Err(e) => {
            if !e.is_empty() {
                eprintln!("ibtca-bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    mmio::run(opts)
}
