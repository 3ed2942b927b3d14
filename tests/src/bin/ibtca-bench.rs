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
//! ```
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
//! twice (`--placement`): "shared" (nothing pinned, default priorities) and
//! "latency" (both devices' threads on CPU 0 under `SCHED_FIFO`, one guest
//! per CPU), each with its own table.
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

#[path = "../bench/switch.rs"]
mod switch;

/// The server's default `--spin-us` (see `ibtca-device --help`).
const DEFAULT_SPIN_US: u64 = 50;
/// Iterations the guest's /init passes to `ibtca-tool bench-mmio`.
const GUEST_ITERATIONS: u32 = 2000;
/// Target: trapped read on one CPU, as a multiple of the socket round trip.
const TARGET_SAME_RATIO: f64 = 2.0;
/// Target: trapped read across CPUs, µs.
const TARGET_CROSS_US: f64 = 20.0;
/// Target: posted write "~2 µs"; counted as met up to this, µs.
const TARGET_WRITE_US: f64 = 2.5;

const USAGE: &str = "usage: ibtca-bench mmio [--iterations N] [--no-vm] \
[--guest-spins US[,US...]] [--guest-repeat N]
       ibtca-bench verbs [--seconds S] [--only ROWS] [--idle-sleep-us US] [--engine-spin-us US]
       ibtca-bench guest-verbs [--engine-spin-us US] [--placement shared|latency|both]
       ibtca-bench drdma [--seconds S]
       ibtca-bench switch [--seconds S]
       ibtca-bench guest-drdma [--placement P]

  --iterations N      host round trips per measurement (default 20000)
  --no-vm             skip the guest measurements
  --guest-spins LIST  server --spin-us values for the pinned guest runs
                      (default 50, the server default); e.g. 0,20,50,200
  --guest-repeat N    boot each pinned guest configuration N times (default 1)

  --seconds S         (verbs) timed seconds per measurement (default 2; a
                      tenth of that more as warm-up for the verbs rows)
  --only ROWS         (verbs) run only these rows (comma list of write-1m,
                      write-4k, write-64, send, ping); the raw rows always run
  --idle-sleep-us US  (verbs) the simulated guests sleep US µs when their CQ
                      is empty instead of spinning with sched_yield (default 0)
  --engine-spin-us US (verbs, guest-verbs) the devices' engine threads poll
                      for events US µs before blocking (default 0, the
                      ibtca-device default)
  --placement P       (guest-verbs, guest-drdma) shared (nothing pinned), latency (devices
                      on CPU 0 under SCHED_FIFO, one guest per CPU), both
                      (guest-verbs' default; guest-drdma's: shared) or custom:A,B,VA,VB (CPU
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
}

#[path = "../bench/drdma.rs"]
mod drdma;

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
        Some("-h" | "--help") => Err(String::new()),
        Some(other) => Err(format!("unknown benchmark '{other}'")),
        None => {
            Err("which benchmark? (mmio, verbs, guest-verbs, drdma, switch, guest-drdma)".into())
        }
    }
}

/// Names of the verbs rows, for `--only`.
const VERBS_ROWS: [&str; 5] = ["write-1m", "write-4k", "write-64", "send", "ping"];
/// The rows `--only` chose (all when unset).
static ONLY_ROWS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Whether the verbs row `name` is to run.
fn row_chosen(name: &str) -> bool {
    match ONLY_ROWS.get() {
        Some(rows) => rows.iter().any(|r| r == name),
        None => true,
    }
}

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

/// Pins the calling thread to one CPU.
fn pin_current_thread(cpu: usize) {
    // SAFETY: cpu_set_t is a plain bitmask for which all-zero is valid (the
    // empty set); CPU_ZERO/CPU_SET only write inside the set we own.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        set
    };
    // SAFETY: pid 0 is the calling thread; the pointer and size describe the
    // cpu_set_t above, which the kernel only reads.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    assert_eq!(
        rc,
        0,
        "sched_setaffinity(cpu {cpu}): {}",
        std::io::Error::last_os_error()
    );
}

/// Median and 99th percentile of samples, µs.
#[derive(Clone, Copy)]
struct Stats {
    median_us: f64,
    p99_us: f64,
}

fn stats(mut ns: Vec<u64>) -> Stats {
    ns.sort_unstable();
    let at = |q: f64| {
        let i = ((ns.len() as f64 * q) as usize).min(ns.len() - 1);
        ns[i] as f64 / 1000.0
    };
    Stats {
        median_us: at(0.5),
        p99_us: at(0.99),
    }
}

/// Times `n` calls of `f` after `n / 10` untimed ones; nanoseconds each.
fn time_each(n: usize, mut f: impl FnMut()) -> Vec<u64> {
    for _ in 0..(n / 10).max(100) {
        f();
    }
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as u64
        })
        .collect()
}

/// Host baseline: 16-byte request, 32-byte reply over a socket pair, the
/// client thread on `client_cpu` and the echo thread on `server_cpu`.
fn socket_rtt(n: usize, client_cpu: usize, server_cpu: usize) -> Stats {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let echo = std::thread::spawn(move || {
        pin_current_thread(server_cpu);
        let mut req = [0u8; 16];
        let reply = [0x5au8; 32];
        while b.read_exact(&mut req).is_ok() {
            if b.write_all(&reply).is_err() {
                break;
            }
        }
    });
    let samples = std::thread::spawn(move || {
        pin_current_thread(client_cpu);
        let req = [0xa5u8; 16];
        let mut reply = [0u8; 32];
        let s = time_each(n, || {
            a.write_all(&req).unwrap();
            a.read_exact(&mut reply).unwrap();
        });
        drop(a);
        s
    })
    .join()
    .expect("socket client thread");
    echo.join().expect("socket echo thread");
    stats(samples)
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

/// The server without a VM: REGION_READs of BAR0 SCRATCH, server on CPU 0,
/// client thread on `client_cpu`.
fn server_rtt(bin: &Path, n: usize, client_cpu: usize, spin_us: u64) -> Stats {
    let dir = TempDir::new("bench");
    let socket = dir.join("tca.sock");
    let _dev = Device::start(bin, &socket, Some("0"), spin_us, &[]);
    let samples = std::thread::spawn(move || {
        pin_current_thread(client_cpu);
        let mut c = Client::connect(&socket).expect("connect to ibtca-device");
        c.write32(0, regs::SCRATCH, 0x1234_5678);
        time_each(n, || {
            std::hint::black_box(c.read32(0, regs::SCRATCH));
        })
    })
    .join()
    .expect("server client thread");
    stats(samples)
}

/// Where QEMU and the server run for one guest boot.
#[derive(Clone, Copy)]
struct GuestConfig {
    placement: &'static str,
    qemu: Option<&'static str>,
    server: Option<&'static str>,
    spin: u64,
    base: Base,
}

impl GuestConfig {
    const SAME: Self = GuestConfig {
        placement: "same CPU",
        qemu: Some("0"),
        server: Some("0"),
        spin: DEFAULT_SPIN_US,
        base: Base::Same,
    };
    const CROSS: Self = GuestConfig {
        placement: "CPUs 0/1",
        qemu: Some("0"),
        server: Some("1"),
        spin: DEFAULT_SPIN_US,
        base: Base::Cross,
    };
    const UNPINNED: Self = GuestConfig {
        placement: "unpinned",
        qemu: None,
        server: None,
        spin: DEFAULT_SPIN_US,
        base: Base::Same,
    };

    fn spin(self, spin: u64) -> Self {
        GuestConfig { spin, ..self }
    }
}

/// What one guest boot measured.
struct GuestResult {
    read_us: f64,
    write_us: f64,
    boot_s: f64,
}

/// Boots the foundation guest against a fresh server; QEMU on `qemu_cpus`,
/// the server on `server_cpus`.
fn guest_run(
    stack: &VmStack,
    bin: &Path,
    qemu_cpus: Option<&str>,
    server_cpus: Option<&str>,
    spin_us: u64,
) -> Result<GuestResult, String> {
    let dir = stack.scratch("bench");
    let socket = dir.join("tca0.sock");
    let _dev = Device::start(bin, &socket, server_cpus, spin_us, &[]);
    let mut vm = VmConfig::new(&socket, "foundation");
    vm.cpu_affinity = qemu_cpus.map(str::to_string);
    let run = stack.boot(&vm);
    let field = |k: &str| {
        run.field("IBTCA-BENCH ", k)
            .and_then(|v| v.parse::<f64>().ok())
    };
    match (field("mmio_read_ns"), field("mmio_write_ns")) {
        (Some(r), Some(w)) => Ok(GuestResult {
            read_us: r / 1000.0,
            write_us: w / 1000.0,
            boot_s: run.elapsed.as_secs_f64(),
        }),
        _ => Err(format!(
            "no IBTCA-BENCH line (run-vm.sh status {:?}); console tail:\n{}",
            run.status,
            run.serial
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        )),
    }
}

/// Which socket round trip a figure is compared with.
#[derive(Clone, Copy)]
enum Base {
    Same,
    Cross,
}

#[derive(Clone, Copy)]
enum Target {
    None,
    SameRatio,
    CrossUs,
    WriteUs,
}

struct Row {
    what: String,
    placement: &'static str,
    spin: String,
    value_us: f64,
    p99_us: Option<f64>,
    base: Base,
    target: Target,
}

fn fmt_us(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

fn print_table(rows: &[Row], sock_same: f64, sock_cross: f64) {
    let header = [
        "measurement",
        "placement",
        "spin µs",
        "µs",
        "p99 µs",
        "× socket RTT",
        "target",
        "result",
    ];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            let (base, tag) = match r.base {
                Base::Same => (sock_same, "same"),
                Base::Cross => (sock_cross, "cross"),
            };
            let ratio = r.value_us / base;
            let (target, ok) = match r.target {
                Target::None => ("-".to_string(), None),
                Target::SameRatio => (
                    format!("≤ {TARGET_SAME_RATIO}× same"),
                    Some(ratio <= TARGET_SAME_RATIO),
                ),
                Target::CrossUs => (
                    format!("≤ {TARGET_CROSS_US} µs"),
                    Some(r.value_us <= TARGET_CROSS_US),
                ),
                Target::WriteUs => (
                    format!("~2 µs (≤ {TARGET_WRITE_US})"),
                    Some(r.value_us <= TARGET_WRITE_US),
                ),
            };
            [
                r.what.clone(),
                r.placement.to_string(),
                r.spin.clone(),
                fmt_us(r.value_us),
                r.p99_us.map_or("-".into(), fmt_us),
                format!("{ratio:.2} ({tag})"),
                target,
                match ok {
                    None => "-".into(),
                    Some(true) => "PASS".into(),
                    Some(false) => "MISS".into(),
                },
            ]
        })
        .collect();
    let mut width = header.map(|h| h.chars().count());
    for c in &cells {
        for (w, s) in width.iter_mut().zip(c) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(width).enumerate() {
            let pad = w - cell.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if (3..=5).contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&" ".repeat(pad));
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    line(&header.map(String::from));
    println!(
        "{}",
        "-".repeat(width.iter().sum::<usize>() + 2 * (width.len() - 1))
    );
    for c in &cells {
        line(c);
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
        Err(e) => {
            if !e.is_empty() {
                eprintln!("ibtca-bench: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        eprintln!("ibtca-bench: needs at least 2 CPUs for the cross-CPU figures (have {cpus})");
        return ExitCode::from(2);
    }
    let Some(device_bin) = device_bin() else {
        return ExitCode::from(2);
    };
    let n = opts.iterations;
    let mut rows = Vec::new();

    eprintln!("[bench] socket round trip, {n} iterations");
    let sock_same = socket_rtt(n, 0, 0);
    let sock_cross = socket_rtt(n, 0, 1);
    for (placement, s, base) in [
        ("same CPU", sock_same, Base::Same),
        ("CPUs 0/1", sock_cross, Base::Cross),
    ] {
        rows.push(Row {
            what: "socket RTT 16B/32B".into(),
            placement,
            spin: "-".into(),
            value_us: s.median_us,
            p99_us: Some(s.p99_us),
            base,
            target: Target::None,
        });
    }

    eprintln!("[bench] server REGION_READ, {n} iterations");
    for (placement, client_cpu, base) in [("same CPU", 0, Base::Same), ("CPUs 1/0", 1, Base::Cross)]
    {
        for spin in [0, DEFAULT_SPIN_US] {
            let s = server_rtt(&device_bin, n, client_cpu, spin);
            rows.push(Row {
                what: "server read (no VM)".into(),
                placement,
                spin: spin.to_string(),
                value_us: s.median_us,
                p99_us: Some(s.p99_us),
                base,
                target: Target::None,
            });
        }
    }

    let mut failures = 0;
    if opts.vm {
        let stack = std::panic::catch_unwind(VmStack::get);
        match stack {
            Err(_) => {
                eprintln!("[bench] no VM stack (see above): guest rows skipped");
                failures += 1;
            }
            Ok(stack) => {
                let mut configs = Vec::new();
                for &spin in &opts.guest_spins {
                    for _ in 0..opts.guest_repeat {
                        configs.push(GuestConfig::SAME.spin(spin));
                    }
                    for _ in 0..opts.guest_repeat {
                        configs.push(GuestConfig::CROSS.spin(spin));
                    }
                }
                configs.push(GuestConfig::UNPINNED);
                for GuestConfig {
                    placement,
                    qemu,
                    server,
                    spin,
                    base,
                } in configs
                {
                    eprintln!("[bench] guest: {placement}, server --spin-us {spin}");
                    match guest_run(stack, &device_bin, qemu, server, spin) {
                        Ok(g) => {
                            eprintln!(
                                "[bench]   read {:.2} µs, write {:.2} µs (boot {:.1} s)",
                                g.read_us, g.write_us, g.boot_s
                            );
                            let pinned = qemu.is_some();
                            rows.push(Row {
                                what: "guest trapped read".into(),
                                placement,
                                spin: spin.to_string(),
                                value_us: g.read_us,
                                p99_us: None,
                                base,
                                target: match (pinned, base) {
                                    (false, _) => Target::None,
                                    (true, Base::Same) => Target::SameRatio,
                                    (true, Base::Cross) => Target::CrossUs,
                                },
                            });
                            rows.push(Row {
                                what: "guest posted write".into(),
                                placement,
                                spin: spin.to_string(),
                                value_us: g.write_us,
                                p99_us: None,
                                base,
                                target: Target::WriteUs,
                            });
                        }
                        Err(e) => {
                            eprintln!("[bench]   guest run failed: {e}");
                            failures += 1;
                        }
                    }
                }
            }
        }
    }

    println!();
    println!(
        "ibtca-bench mmio: host rows are the median (and p99) of {n} round trips; guest rows \
         are the mean of {GUEST_ITERATIONS} accesses timed in the guest kernel (TCG)."
    );
    println!(
        "Placement: socket and server rows are client/server CPUs, guest rows QEMU/server CPUs. \
         The ratio compares with the socket RTT on the same placement (unpinned: same CPU)."
    );
    println!();
    print_table(&rows, sock_same.median_us, sock_cross.median_us);
    if failures > 0 {
        println!();
        println!("{failures} guest measurement(s) could not run (see stderr).");
    }
    ExitCode::SUCCESS
}

// ---------------------------------------------------------------------------
// verbs: two device instances on a link, driven by simulated guests.
// ---------------------------------------------------------------------------

/// Target: 1 MiB RDMA WRITE throughput as a share of the raw stream.
const TARGET_WRITE_SHARE: f64 = 0.70;
/// Target: 64 B SEND rate as a share of the raw small-message rate.
const TARGET_SEND_SHARE: f64 = 0.50;
/// Simulated RAM per guest.
const VERBS_RAM: u64 = 32 << 20;
/// Registered buffer per guest.
const VERBS_BUF: u64 = 4 << 20;
/// Send queue of the RDMA WRITE runs: 2^6 = 64 entries, all kept busy.
const WRITE_QP_LOG: u8 = 6;
/// QP of the SEND runs: 2^10 receives kept posted.
const SEND_QP_LOG: u8 = 10;
/// SENDs the sender keeps outstanding.
const SEND_DEPTH: usize = 128;
/// CQ of every run: larger than any QP's SQ + RQ.
const VERBS_CQ_LOG: u8 = 12;
/// Completions taken per look at a CQ.
const POLL_BATCH: usize = 64;

/// How the bench's guest threads wait when their CQ is empty: 0 = spin
/// with `sched_yield` (the default), else sleep this many µs.
static IDLE_SLEEP_US: AtomicU64 = AtomicU64::new(0);

fn idle() {
    match IDLE_SLEEP_US.load(Ordering::Relaxed) {
        0 => std::thread::yield_now(),
        us => std::thread::sleep(Duration::from_micros(us)),
    }
}

/// Two instances joined by a link, a guest on each, QPs connected (A: LID 1,
/// B: LID 2).
struct Pair {
    a: Side,
    b: Side,
    servers: (TestServer, TestServer),
    _dir: TempDir,
}

fn verbs_pair(qp_log: u8) -> Pair {
    let mut lp = LinkedPair::start(PairOptions {
        ram: VERBS_RAM,
        buf: VERBS_BUF,
        cq_log: VERBS_CQ_LOG,
        qp_log,
        b_access: ALL_ACCESS,
        spin: true,
        engine_spin: engine_spin(),
        ..Default::default()
    });
    lp.connect(MTU_4096);
    let (a, b, servers, _dir) = lp.into_parts();
    Pair {
        a,
        b,
        servers,
        _dir,
    }
}

/// Link counters of A and B so far.
fn link_stats(servers: &(TestServer, TestServer)) -> (LinkStats, LinkStats) {
    let s = |t: &TestServer| t.link.as_ref().map(|l| l.stats()).unwrap_or_default();
    (s(&servers.0), s(&servers.1))
}

/// What one throughput run measured, plus the link counters for the report.
struct Rate {
    msgs: u64,
    bytes: u64,
    secs: f64,
    link: Option<LinkDelta>,
    cpu: Option<CpuSplit>,
}

/// On-CPU time of this process's threads over a timed part, by role, in
/// nanoseconds (from `/proc/self/task/*/schedstat`, so it counts only time
/// actually on a CPU: robust against other load on the machine, unlike the
/// wall-clock rates).
#[derive(Debug, Clone, Copy, Default)]
struct CpuSplit {
    /// `ibtca-engine` threads (both devices).
    engine: u64,
    /// `ibtca-link` threads: the link readers.
    link_rx: u64,
    /// `ibtca-link-tx` threads: the link writers.
    link_tx: u64,
    /// The other device threads (the vfio-user servers, unnamed).
    vfio: u64,
    /// The simulated guests (the main thread and `guest-*` threads) and the
    /// raw rows' `raw-*` threads.
    guests: u64,
}

impl CpuSplit {
    /// Device CPU (everything but the guests).
    fn device(&self) -> u64 {
        self.engine + self.link_rx + self.link_tx + self.vfio
    }
}

/// (thread name, on-CPU ns) of every thread of this process, by tid.
type CpuSnapshot = std::collections::HashMap<u32, (String, u64)>;

fn cpu_snapshot() -> CpuSnapshot {
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
fn cpu_delta(before: &CpuSnapshot, after: &CpuSnapshot) -> CpuSplit {
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

impl Rate {
    fn msg_per_s(&self) -> f64 {
        self.msgs as f64 / self.secs
    }
    fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / self.secs / (1 << 20) as f64
    }
}

/// Link counters over one run, both directions.
struct LinkDelta {
    a: LinkStats,
    b: LinkStats,
}

fn delta(before: &LinkStats, after: &LinkStats) -> LinkStats {
    LinkStats {
        tx_packets: after.tx_packets - before.tx_packets,
        tx_bytes: after.tx_bytes - before.tx_bytes,
        tx_writes: after.tx_writes - before.tx_writes,
        rx_packets: after.rx_packets - before.rx_packets,
        rx_bytes: after.rx_bytes - before.rx_bytes,
        tx_dropped_down: after.tx_dropped_down - before.tx_dropped_down,
        tx_dropped_full: after.tx_dropped_full - before.tx_dropped_full,
        credit_stalls: after.credit_stalls - before.credit_stalls,
        credit_frames_tx: after.credit_frames_tx - before.credit_frames_tx,
        ..LinkStats::default()
    }
}

impl std::fmt::Display for LinkDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, s) in [("A→B", &self.a), ("B→A", &self.b)] {
            write!(
                f,
                "  {name}: {} packets in {} writes ({:.1}/write, {:.0} KiB/write), {} dropped (queue full), {} credit frames, {} credit stalls",
                s.tx_packets,
                s.tx_writes,
                s.tx_packets as f64 / s.tx_writes.max(1) as f64,
                s.tx_bytes as f64 / s.tx_writes.max(1) as f64 / 1024.0,
                s.tx_dropped_full,
                s.credit_frames_tx,
                s.credit_stalls,
            )?;
            if name == "A→B" {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// Raw `UnixStream` throughput: one thread writes `chunk`-byte buffers
/// (one `write_all` each) for `secs`, the other reads them with `read_exact`
/// of `chunk` bytes; counted at the reader.
fn raw_stream(chunk: usize, secs: f64) -> Rate {
    let (mut w, mut r) = UnixStream::pair().expect("socketpair");
    let cpu0 = cpu_snapshot();
    let writer = named("raw-writer", move || {
        let buf = vec![0x5au8; chunk];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        // Check the clock every 64 writes: a clock read costs as much as a
        // small write.
        'outer: loop {
            for _ in 0..64 {
                if w.write_all(&buf).is_err() {
                    break 'outer;
                }
            }
            if Instant::now() >= end {
                break;
            }
        }
    });
    let mut buf = vec![0u8; chunk];
    r.read_exact(&mut buf).expect("first chunk");
    let t = Instant::now();
    let mut msgs = 0u64;
    while r.read_exact(&mut buf).is_ok() {
        msgs += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    // The writer's time before it exits; the reader is this thread.
    let cpu = cpu_delta(&cpu0, &cpu_snapshot());
    writer.join().expect("raw writer");
    Rate {
        msgs,
        bytes: msgs * chunk as u64,
        secs,
        link: None,
        cpu: Some(cpu),
    }
}

/// Spawns a named thread (the name is what [`cpu_delta`] classifies by).
fn named<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<T> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .expect("spawn a bench thread")
}

/// Raw `UnixStream` ping-pong of `size` bytes each way; µs per one-way trip
/// (round trip / 2), median.
fn raw_pingpong(size: usize, secs: f64) -> f64 {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let echo = named("raw-echo", move || {
        let mut m = vec![0u8; size];
        while b.read_exact(&mut m).is_ok() {
            if b.write_all(&m).is_err() {
                break;
            }
        }
    });
    let mut m = vec![0xa5u8; size];
    let mut samples = Vec::new();
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        let t = Instant::now();
        a.write_all(&m).unwrap();
        a.read_exact(&mut m).unwrap();
        samples.push(t.elapsed().as_nanos() as u64);
    }
    drop(a);
    echo.join().expect("raw echo");
    median_ns(samples) / 2000.0
}

fn median_ns(mut ns: Vec<u64>) -> f64 {
    ns.sort_unstable();
    ns.get(ns.len() / 2).copied().unwrap_or(0) as f64
}

/// Drives a sender: keeps `depth` WQEs made by `make(i)` outstanding on
/// `s`, refilling (one doorbell per refill) as completions arrive, for
/// `secs` after a warm-up of a tenth of that. Returns messages completed in
/// the timed part, its length and the link counters over it (`link` reads
/// them).
fn keep_busy(
    s: &mut Side,
    depth: usize,
    secs: f64,
    link: impl Fn() -> (LinkStats, LinkStats),
    make: impl Fn(&Side, u64) -> SendWqe,
) -> (u64, f64, LinkDelta, CpuSplit) {
    let warm = Duration::from_secs_f64(secs / 10.0);
    let timed = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut t0 = None;
    let mut outstanding = 0usize;
    let mut posted = 0u64;
    let mut done = 0u64;
    let mut done_at_t0 = 0;
    let mut link_at_t0 = link();
    let mut cpu_at_t0 = CpuSnapshot::new();
    let mut cqes = Vec::with_capacity(POLL_BATCH);
    let mut wqes = Vec::with_capacity(depth);
    let last_post = loop {
        let now = Instant::now();
        if t0.is_none() && now >= start + warm {
            t0 = Some(now);
            done_at_t0 = done;
            link_at_t0 = link();
            cpu_at_t0 = cpu_snapshot();
        }
        if t0.is_some_and(|t| now >= t + timed) {
            break now;
        }
        wqes.clear();
        while outstanding + wqes.len() < depth {
            wqes.push(make(s, posted));
            posted += 1;
        }
        outstanding += wqes.len();
        s.g.post_send_batch(&mut s.qp, &wqes);
        cqes.clear();
        let n = s.g.poll_cq_batch(&mut s.cq, POLL_BATCH, &mut cqes);
        for c in &cqes {
            assert_eq!(c.status, WC_SUCCESS, "completion {c:?}");
        }
        if n == 0 {
            idle();
        }
        outstanding -= n;
        done += n as u64;
    };
    let t0 = t0.expect("warm-up ended");
    let msgs = done - done_at_t0;
    let secs = (last_post - t0).as_secs_f64();
    let end = link();
    let cpu = cpu_delta(&cpu_at_t0, &cpu_snapshot());
    let link = LinkDelta {
        a: delta(&link_at_t0.0, &end.0),
        b: delta(&link_at_t0.1, &end.1),
    };
    // Drain what is still in flight, so the pair shuts down quietly.
    let deadline = Instant::now() + Duration::from_secs(20);
    while outstanding > 0 && Instant::now() < deadline {
        cqes.clear();
        outstanding -= s.g.poll_cq_batch(&mut s.cq, POLL_BATCH, &mut cqes);
        idle();
    }
    (msgs, secs, link, cpu)
}

/// RDMA WRITE of `size` bytes from A to B, `depth` outstanding.
fn verbs_write(size: u64, depth: usize, secs: f64) -> Rate {
    let mut p = verbs_pair(WRITE_QP_LOG);
    let (dst, rkey) = (p.b.buf, p.b.rkey);
    // Spread the messages over the buffer (for small ones: distinct lines).
    let slots = (VERBS_BUF / size).max(1);
    let servers = &p.servers;
    let (msgs, secs, link, cpu) = keep_busy(
        &mut p.a,
        depth,
        secs,
        || link_stats(servers),
        |s, i| {
            let off = (i % slots) * size;
            remote(
                send_wqe(WR_RDMA_WRITE, i, s.buf + off, size as u32, s.lkey),
                dst + off,
                rkey,
            )
        },
    );
    Rate {
        msgs,
        bytes: msgs * size,
        secs,
        link: Some(link),
        cpu: Some(cpu),
    }
}

/// 64 B SENDs from A to B: B keeps its RQ full, reposting as receives
/// complete; A keeps `depth` SENDs outstanding. Counted at the sender (an RC
/// SEND completes once B has placed it and acknowledged it).
fn verbs_send_rate(size: u32, depth: usize, secs: f64) -> Rate {
    let Pair {
        mut a,
        mut b,
        servers,
        _dir,
    } = verbs_pair(SEND_QP_LOG);
    let rq = 1usize << SEND_QP_LOG;
    let recv = |b: &Side, i: u64| {
        let slot = i % (VERBS_BUF / 4096);
        recv_wqe(i, b.buf + slot * 4096, 4096, b.lkey)
    };
    let all: Vec<RecvWqe> = (0..rq as u64).map(|i| recv(&b, i)).collect();
    b.g.post_recv_batch(&mut b.qp, &all);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_rx = stop.clone();
    let receiver = named("guest-b", move || {
        let mut cqes = Vec::with_capacity(POLL_BATCH);
        let mut wqes = Vec::with_capacity(POLL_BATCH);
        let mut next = rq as u64;
        let mut received = 0u64;
        while !stop_rx.load(Ordering::Relaxed) {
            cqes.clear();
            let n = b.g.poll_cq_batch(&mut b.cq, POLL_BATCH, &mut cqes);
            if n == 0 {
                idle();
                continue;
            }
            wqes.clear();
            for c in &cqes {
                assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_RECV), "{c:?}");
                wqes.push(recv(&b, next));
                next += 1;
            }
            received += n as u64;
            b.g.post_recv_batch(&mut b.qp, &wqes);
        }
        (b, received)
    });
    let (msgs, secs, link, cpu) = keep_busy(
        &mut a,
        depth,
        secs,
        || link_stats(&servers),
        |s, i| send_wqe(WR_SEND, i, s.buf + (i % 1024) * 64, size, s.lkey),
    );
    stop.store(true, Ordering::Relaxed);
    let (_b, received) = receiver.join().expect("receiver thread");
    eprintln!("[bench]   receiver saw {received} receives");
    drop(a);
    Rate {
        msgs,
        bytes: msgs * u64::from(size),
        secs,
        link: Some(link),
        cpu: Some(cpu),
    }
}

/// Waits (spinning) for the next receive completion on `s`, consuming send
/// completions on the way.
fn wait_recv(s: &mut Side) -> Cqe {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(c) = s.g.try_poll_cq(&mut s.cq) {
            assert_eq!(c.status, WC_SUCCESS, "{c:?}");
            if c.opcode == WC_RECV {
                return c;
            }
            continue;
        }
        assert!(Instant::now() < deadline, "no receive completion");
        idle();
    }
}

/// 64 B SEND ping-pong A → B → A; µs per one-way trip (round trip / 2),
/// median.
fn verbs_pingpong(size: u32, secs: f64) -> f64 {
    let Pair {
        mut a,
        mut b,
        servers: _servers,
        _dir,
    } = verbs_pair(WRITE_QP_LOG);
    let depth = 1usize << WRITE_QP_LOG;
    for s in [&mut a, &mut b] {
        let all: Vec<RecvWqe> = (0..depth as u64)
            .map(|i| recv_wqe(i, s.buf + i * 4096, 4096, s.lkey))
            .collect();
        s.g.post_recv_batch(&mut s.qp, &all);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    let echo = named("guest-b", move || {
        let mut i = 0u64;
        loop {
            // Poll until a ping arrives or the bench stops.
            let deadline = Instant::now() + Duration::from_secs(20);
            let c = loop {
                if let Some(c) = b.g.try_poll_cq(&mut b.cq) {
                    assert_eq!(c.status, WC_SUCCESS, "{c:?}");
                    if c.opcode == WC_RECV {
                        break Some(c);
                    }
                    continue;
                }
                if stop_b.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    break None;
                }
                idle();
            };
            let Some(c) = c else { return };
            let w = send_wqe(WR_SEND, i, b.buf + (1 << 20), size, b.lkey);
            b.g.post_send_batch(&mut b.qp, &[w]);
            let slot = c.wr_id.to_native();
            let r = recv_wqe(slot, b.buf + (slot % depth as u64) * 4096, 4096, b.lkey);
            b.g.post_recv_batch(&mut b.qp, &[r]);
            i += 1;
        }
    });
    let mut samples = Vec::new();
    let warm = Instant::now() + Duration::from_secs_f64(secs / 10.0);
    let end = warm + Duration::from_secs_f64(secs);
    let mut i = 0u64;
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        let w = send_wqe(WR_SEND, i, a.buf + (1 << 20), size, a.lkey);
        a.g.post_send_batch(&mut a.qp, &[w]);
        let c = wait_recv(&mut a);
        if t >= warm {
            samples.push(t.elapsed().as_nanos() as u64);
        }
        let slot = c.wr_id.to_native();
        let r = recv_wqe(slot, a.buf + (slot % depth as u64) * 4096, 4096, a.lkey);
        a.g.post_recv_batch(&mut a.qp, &[r]);
        i += 1;
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().expect("echo thread");
    median_ns(samples) / 2000.0
}

/// One row of the verbs table.
struct VRow {
    what: String,
    size: &'static str,
    mib_s: Option<f64>,
    msg_s: Option<f64>,
    us: Option<f64>,
    ratio: Option<(f64, &'static str)>,
    target: Option<f64>,
    /// Device CPU µs per message (raw rows: both threads').
    cpu_us: Option<f64>,
}

fn fmt_rate(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn print_grid(header: &[&str], rows: &[Vec<String>], numeric: &[usize]) {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, s) in width.iter_mut().zip(r) {
            *w = (*w).max(s.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, (cell, w)) in c.iter().zip(&width).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            if numeric.contains(&i) {
                s.push_str(&pad);
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.push_str(&pad);
            }
            s.push_str("  ");
        }
        println!("{}", s.trim_end());
    };
    line(&header.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    println!(
        "{}",
        "-".repeat(width.iter().sum::<usize>() + 2 * (width.len() - 1))
    );
    for r in rows {
        line(r);
    }
}

/// One line of the CPU breakdown: µs per message by thread role.
fn cpu_note(what: &str, c: &CpuSplit, msgs: u64) -> String {
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

fn run_verbs(secs: f64) -> ExitCode {
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    eprintln!("[bench] raw socket stream, 64 KiB writes, {secs} s");
    let stream = raw_stream(64 << 10, secs);
    eprintln!("[bench] raw socket messages, 64 B writes, {secs} s");
    let small = raw_stream(64, secs);
    eprintln!("[bench] raw socket ping-pong, 64 B, {secs} s");
    let raw_lat = raw_pingpong(64, secs);
    let stream_mib = stream.mib_per_s();
    let small_msg = small.msg_per_s();
    let raw_cpu = |r: &Rate| {
        r.cpu
            .map(|c| (c.guests + c.device()) as f64 / 1000.0 / r.msgs.max(1) as f64)
    };
    let mut cpu_notes = Vec::new();
    rows.push(VRow {
        what: "raw socket stream".into(),
        size: "64 KiB",
        mib_s: Some(stream_mib),
        msg_s: Some(stream.msg_per_s()),
        us: None,
        ratio: Some((1.0, "stream")),
        target: None,
        cpu_us: raw_cpu(&stream),
    });
    rows.push(VRow {
        what: "raw socket messages".into(),
        size: "64 B",
        mib_s: Some(small.mib_per_s()),
        msg_s: Some(small_msg),
        us: None,
        ratio: Some((1.0, "msgs")),
        target: None,
        cpu_us: raw_cpu(&small),
    });
    rows.push(VRow {
        what: "raw socket ping-pong".into(),
        size: "64 B",
        mib_s: None,
        msg_s: None,
        us: Some(raw_lat),
        ratio: Some((1.0, "ping")),
        target: None,
        cpu_us: None,
    });

    for (size, label, target, row) in [
        (1u64 << 20, "1 MiB", Some(TARGET_WRITE_SHARE), "write-1m"),
        (4096, "4 KiB", None, "write-4k"),
        (64, "64 B", None, "write-64"),
    ] {
        if !row_chosen(row) {
            continue;
        }
        eprintln!(
            "[bench] RDMA WRITE {label}, {} outstanding, {secs} s",
            1 << WRITE_QP_LOG
        );
        let r = verbs_write(size, 1 << WRITE_QP_LOG, secs);
        eprintln!(
            "[bench]   {:.1} MiB/s, {:.0} msg/s",
            r.mib_per_s(),
            r.msg_per_s()
        );
        if let Some(l) = &r.link {
            notes.push(format!("RDMA WRITE {label}:\n{l}"));
        }
        if let Some(c) = &r.cpu {
            cpu_notes.push(cpu_note(&format!("RDMA WRITE {label}"), c, r.msgs));
        }
        rows.push(VRow {
            what: format!("RDMA WRITE (QD {})", 1 << WRITE_QP_LOG),
            size: label,
            mib_s: Some(r.mib_per_s()),
            msg_s: Some(r.msg_per_s()),
            us: None,
            ratio: Some(if size >= 4096 {
                (r.mib_per_s() / stream_mib, "stream")
            } else {
                (r.msg_per_s() / small_msg, "msgs")
            }),
            target,
            cpu_us: r
                .cpu
                .map(|c| c.device() as f64 / 1000.0 / r.msgs.max(1) as f64),
        });
    }

    if row_chosen("send") {
        eprintln!("[bench] SEND 64 B, {SEND_DEPTH} outstanding, {secs} s");
        let r = verbs_send_rate(64, SEND_DEPTH, secs);
        eprintln!("[bench]   {:.0} msg/s", r.msg_per_s());
        if let Some(l) = &r.link {
            notes.push(format!("SEND 64 B:\n{l}"));
        }
        if let Some(c) = &r.cpu {
            cpu_notes.push(cpu_note("SEND 64 B", c, r.msgs));
        }
        rows.push(VRow {
            what: format!("SEND rate (QD {SEND_DEPTH})"),
            size: "64 B",
            mib_s: Some(r.mib_per_s()),
            msg_s: Some(r.msg_per_s()),
            us: None,
            ratio: Some((r.msg_per_s() / small_msg, "msgs")),
            target: Some(TARGET_SEND_SHARE),
            cpu_us: r
                .cpu
                .map(|c| c.device() as f64 / 1000.0 / r.msgs.max(1) as f64),
        });
    }

    if row_chosen("ping") {
        eprintln!("[bench] SEND ping-pong 64 B, {secs} s");
        let lat = verbs_pingpong(64, secs);
        eprintln!("[bench]   {lat:.1} µs");
        rows.push(VRow {
            what: "SEND ping-pong".into(),
            size: "64 B",
            mib_s: None,
            msg_s: None,
            us: Some(lat),
            ratio: Some((lat / raw_lat, "ping")),
            target: None,
            cpu_us: None,
        });
    }

    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let opt = |v: Option<f64>, f: fn(f64) -> String| v.map_or("-".into(), f);
            let (ratio, target, result) = match (r.ratio, r.target) {
                (None, _) => ("-".into(), "-".into(), "-".into()),
                (Some((x, base)), t) => (
                    format!("{x:.2} ({base})"),
                    t.map_or("-".into(), |t| format!("≥ {t:.2}")),
                    t.map_or("-".into(), |t| if x >= t { "PASS" } else { "MISS" }.into()),
                ),
            };
            vec![
                r.what.clone(),
                r.size.into(),
                opt(r.mib_s, |v| format!("{v:.1}")),
                opt(r.msg_s, fmt_rate),
                opt(r.us, fmt_us),
                opt(r.cpu_us, |v| format!("{v:.2}")),
                ratio,
                target,
                result,
            ]
        })
        .collect();
    println!();
    println!(
        "ibtca-bench verbs: two device instances (in this process) on a Unix-socket link, \
         each driven through vfio-user by a simulated guest that busy-polls its CQ; \
         {secs} s per row, path MTU 4096, one doorbell per refill."
    );
    println!(
        "Ratios: stream = MiB/s over the raw 64 KiB stream; msgs = msg/s over the raw \
         64 B message rate; ping = one-way µs over the raw 64 B socket ping-pong."
    );
    println!(
        "CPU µs/msg: on-CPU time of the device threads of both instances per message \
         (raw rows: of both socket threads); unlike the rates it barely depends on other \
         load on the machine."
    );
    println!();
    print_grid(
        &[
            "measurement",
            "size",
            "MiB/s",
            "msg/s",
            "µs",
            "CPU µs/msg",
            "× baseline",
            "target",
            "result",
        ],
        &cells,
        &[2, 3, 4, 5],
    );
    println!();
    println!("Link counters (per direction, over the timed part of each run):");
    for n in notes {
        println!("{n}");
    }
    println!();
    println!(
        "Device CPU per message (µs on a CPU, both devices, timed part): engine threads, \
         link readers, link writers, vfio-user servers; then the simulated guests."
    );
    for n in cpu_notes {
        println!("{n}");
    }
    ExitCode::SUCCESS
}

// ---------------------------------------------------------------------------
// guest-verbs: perftest-style numbers between two real guests.
// ---------------------------------------------------------------------------

/// Soft-RoCE (rxe) between two such TCG guests over virtio-net, measured on
/// these machines: 1 MiB RDMA WRITE bandwidth, MiB/s (low, high).
const RXE_WRITE_1M_MIB: (f64, f64) = (12.0, 25.0);
/// rxe: 64 B RDMA WRITE message rate, msg/s.
const RXE_MSG_64: f64 = 6800.0;
/// rxe: 64 B latency, µs.
const RXE_LAT_US: f64 = 1000.0;
/// Targets (issue): ≥ 50× rxe's 1 MiB bandwidth, ≥ 20× its 64 B message
/// rate, ≤ 1/20 of its latency.
const TARGET_BW_X: f64 = 50.0;
const TARGET_MSG_X: f64 = 20.0;
const TARGET_LAT_X: f64 = 20.0;

/// One `IBTCA-PERF` line: the test name and its `key=value` fields.
struct PerfLine {
    test: String,
    fields: Vec<(String, f64)>,
}

impl PerfLine {
    fn parse(line: &str) -> Option<Self> {
        Self::parse_tagged(line, "IBTCA-PERF ")
    }

    /// A `<tag><test> key=value ...` line.
    fn parse_tagged(line: &str, tag: &str) -> Option<Self> {
        let rest = &line[line.find(tag)? + tag.len()..];
        let mut words = rest.split_whitespace();
        let test = words.next()?.to_string();
        let fields = words
            .filter_map(|w| {
                let (k, v) = w.split_once('=')?;
                Some((k.to_string(), v.parse().ok()?))
            })
            .collect();
        Some(PerfLine { test, fields })
    }

    fn get(&self, key: &str) -> Option<f64> {
        self.fields.iter().find(|(k, _)| k == key).map(|&(_, v)| v)
    }
}

fn fmt_size(bytes: f64) -> String {
    let b = bytes as u64;
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b.is_multiple_of(1024) {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

fn pass_miss(ok: bool) -> String {
    if ok { "PASS" } else { "MISS" }.into()
}

/// The last `n` lines of a console, for error reports.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Where `guest-verbs` runs the devices and the guests (`--placement`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Placement {
    name: String,
    /// `ibtca-device --cpus` of device A (server) and B (client).
    dev_cpus: [Option<String>; 2],
    /// `ibtca-device --realtime` of both devices.
    realtime: Option<u8>,
    /// QEMU's CPUs for the server and the client guest.
    vm_cpus: [Option<String>; 2],
}

impl Placement {
    /// Nothing pinned, normal priorities: what a user gets by default.
    fn shared() -> Self {
        Placement {
            name: "shared".into(),
            dev_cpus: [None, None],
            realtime: None,
            vm_cpus: [None, None],
        }
    }

    /// Tuned for latency on this 2-CPU host: both devices' threads on CPU 0
    /// under `SCHED_FIFO` (`--cpus 0 --realtime 10`, so their spins are
    /// off), the server guest's QEMU on CPU 0 and the client's on CPU 1.
    fn latency() -> Self {
        Self::custom("latency", "0,0,0,1").expect("valid")
    }

    /// `DEV_A,DEV_B,VM_A,VM_B` CPU lists (`-` for unpinned; `+` joins
    /// CPUs of one list, e.g. `0+1`), devices under `SCHED_FIFO` 10.
    fn custom(name: &str, spec: &str) -> Result<Self, String> {
        let parts: Vec<Option<String>> = spec
            .split(',')
            .map(|p| (p != "-").then(|| p.replace('+', ",")))
            .collect();
        let [a, b, va, vb] = <[Option<String>; 4]>::try_from(parts)
            .map_err(|_| format!("placement '{spec}': expected DEV_A,DEV_B,VM_A,VM_B"))?;
        Ok(Placement {
            name: name.into(),
            dev_cpus: [a, b],
            realtime: Some(10),
            vm_cpus: [va, vb],
        })
    }

    /// Extra `ibtca-device` options of device `i` (0: A, 1: B).
    fn device_args(&self, i: usize) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(c) = &self.dev_cpus[i] {
            args.extend(["--cpus".to_owned(), c.clone()]);
        }
        if let Some(p) = self.realtime {
            args.extend(["--realtime".to_owned(), p.to_string()]);
        }
        args
    }

    /// Pins the server's and the client's QEMU.
    fn pin(&self, server: &mut VmConfig, client: &mut VmConfig) {
        server.cpu_affinity = self.vm_cpus[0].clone();
        client.cpu_affinity = self.vm_cpus[1].clone();
    }

    fn describe(&self) -> String {
        let show = |c: &Option<String>| c.clone().unwrap_or_else(|| "any".into());
        format!(
            "device A CPUs {}, device B CPUs {}, {}; server guest CPUs {}, client guest CPUs {}",
            show(&self.dev_cpus[0]),
            show(&self.dev_cpus[1]),
            self.realtime.map_or("normal priority".into(), |p| format!(
                "SCHED_FIFO {p} (no spins)"
            )),
            show(&self.vm_cpus[0]),
            show(&self.vm_cpus[1]),
        )
    }
}

/// Devices A (LID 1, `links[0]`) and B (LID 2, `links[1]`) for two
/// guests, placed as `placement` says, with `extra` options for both.
fn start_pair(
    bin: &Path,
    sockets: [&Path; 2],
    links: [&str; 2],
    placement: &Placement,
    extra: &[&str],
) -> (Device, Device) {
    // Real-time devices must not spin.
    let spin = if placement.realtime.is_none() {
        DEFAULT_SPIN_US
    } else {
        0
    };
    let start = |i: usize| {
        let lid = (i + 1).to_string();
        let args: Vec<String> = ["--lid", &lid, "--link", links[i]]
            .iter()
            .chain(extra)
            .map(|a| a.to_string())
            .chain(placement.device_args(i))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Device::start(bin, sockets[i], None, spin, &args)
    };
    (start(0), start(1))
}

/// The placements `guest-verbs` and `guest-drdma` run, in order
/// (`--placement`).
static PLACEMENTS: std::sync::OnceLock<Vec<Placement>> = std::sync::OnceLock::new();

fn parse_placement(v: Option<String>) -> Result<(), String> {
    let list = match v.as_deref() {
        Some("shared") => vec![Placement::shared()],
        Some("latency") => vec![Placement::latency()],
        Some("both") => vec![Placement::shared(), Placement::latency()],
        Some(c) if c.starts_with("custom:") => vec![Placement::custom("custom", &c[7..])?],
        _ => return Err("--placement needs shared, latency, both or custom:A,B,VA,VB".into()),
    };
    PLACEMENTS
        .set(list)
        .map_err(|_| "--placement given twice".to_string())
}

fn run_guest_verbs() -> ExitCode {
    let Some(bin) = device_bin() else {
        return ExitCode::from(2);
    };
    let Ok(stack) = std::panic::catch_unwind(VmStack::get) else {
        eprintln!("ibtca-bench: no VM stack (see above)");
        return ExitCode::from(2);
    };
    let placements = PLACEMENTS
        .get()
        .cloned()
        .unwrap_or_else(|| vec![Placement::shared(), Placement::latency()]);
    let mut code = ExitCode::SUCCESS;
    for placement in &placements {
        if guest_verbs_once(&bin, stack, placement) != ExitCode::SUCCESS {
            code = ExitCode::from(1);
        }
    }
    code
}

/// One `guest-verbs` boot pair in `placement`; prints its table.
fn guest_verbs_once(bin: &Path, stack: &VmStack, placement: &Placement) -> ExitCode {
    let dir = stack.scratch("bench-verbs");
    let link = dir.join("ab.link");
    let listen = format!("listen:{}", link.display());
    let connect = format!("connect:{}", link.display());
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    eprintln!("[bench] two release ibtca-device processes (LIDs 1/2) on one link");
    let espin = ENGINE_SPIN_US.load(Ordering::Relaxed).to_string();
    eprintln!(
        "[bench] placement {}: {}; ibtca-device --engine-spin-us {espin}",
        placement.name,
        placement.describe()
    );
    let (dev_a, dev_b) = start_pair(
        bin,
        [&sock_a, &sock_b],
        [&listen, &connect],
        placement,
        &["--engine-spin-us", &espin],
    );
    let guest = |socket: &Path, role: &str, peer_lid: u16| {
        let mut vm = VmConfig::new(socket, "verbs-bench");
        vm.append = format!("ibtca.mode=verbs-bench ibtca.role={role} ibtca.peer_lid={peer_lid}");
        vm.mem = "1G".into();
        vm.timeout = Duration::from_secs(300);
        vm
    };
    let mut server_vm = guest(&sock_a, "server", 2);
    let mut client_vm = guest(&sock_b, "client", 1);
    placement.pin(&mut server_vm, &mut client_vm);
    eprintln!("[bench] booting two guests (TCG, 1 vCPU, 1 GiB each) in verbs-bench mode");
    let (server, client) = std::thread::scope(|s| {
        let server = s.spawn(|| stack.boot(&server_vm));
        let client = s.spawn(|| stack.boot(&client_vm));
        (server.join().unwrap(), client.join().unwrap())
    });
    drop((dev_a, dev_b));
    eprintln!(
        "[bench] server guest {:.1} s, client guest {:.1} s",
        server.elapsed.as_secs_f64(),
        client.elapsed.as_secs_f64()
    );

    let perf: Vec<PerfLine> = client
        .lines_with("IBTCA-PERF ")
        .filter_map(PerfLine::parse)
        .collect();
    let mut problems = Vec::new();
    for (role, run) in [("server", &server), ("client", &client)] {
        for l in run
            .lines_with("IBTCA-VERBS ")
            .filter(|l| l.contains(" FAIL"))
        {
            problems.push(format!("{role}: {}", l.trim()));
        }
        if !run.serial.contains("IBTCA-VERBS-RC 0") {
            problems.push(format!(
                "{role}: no IBTCA-VERBS-RC 0 (run-vm.sh status {:?}); console tail:\n{}",
                run.status,
                tail(&run.serial, 15)
            ));
        }
    }

    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut bw_rows = 0;
    for p in perf.iter().filter(|p| p.test == "write_bw") {
        let (Some(size), Some(iters), Some(mbps), Some(mmsg)) = (
            p.get("size"),
            p.get("iters"),
            p.get("MBps"),
            p.get("Mmsgps"),
        ) else {
            continue;
        };
        bw_rows += 1;
        let mib = mbps * 1e6 / (1 << 20) as f64;
        let msg = mmsg * 1e6;
        let (ratio, target, result) = if size as u64 == 1 << 20 {
            let (lo, hi) = RXE_WRITE_1M_MIB;
            (
                format!("{:.1}–{:.1}× MiB/s", mib / hi, mib / lo),
                format!("≥ {TARGET_BW_X:.0}×"),
                pass_miss(mib / hi >= TARGET_BW_X),
            )
        } else if size as u64 == 64 {
            (
                format!("{:.1}× msg/s", msg / RXE_MSG_64),
                format!("≥ {TARGET_MSG_X:.0}×"),
                pass_miss(msg / RXE_MSG_64 >= TARGET_MSG_X),
            )
        } else {
            ("-".into(), "-".into(), "-".into())
        };
        rows.push(vec![
            "write_bw".into(),
            fmt_size(size),
            format!("{iters:.0}"),
            format!("{mib:.2}"),
            format!("{mmsg:.6}"),
            "-".into(),
            "-".into(),
            ratio,
            target,
            result,
        ]);
    }
    let mut lat_rows = 0;
    for p in perf
        .iter()
        .filter(|p| ["write_lat", "write_lat_sleep", "send_lat"].contains(&p.test.as_str()))
    {
        let (Some(size), Some(iters), Some(typ), Some(p99)) = (
            p.get("size"),
            p.get("iters"),
            p.get("typical_us"),
            p.get("p99_us"),
        ) else {
            continue;
        };
        let (name, spin) = match p.test.as_str() {
            "write_lat" => ("write_lat (spin)", true),
            "write_lat_sleep" => ("write_lat (sleep)", true),
            _ => ("send_lat (irq)", false),
        };
        lat_rows += usize::from(spin);
        let x = RXE_LAT_US / typ;
        rows.push(vec![
            name.into(),
            fmt_size(size),
            format!("{iters:.0}"),
            "-".into(),
            "-".into(),
            fmt_us(typ),
            fmt_us(p99),
            format!("{x:.2}× (rxe µs / µs)"),
            if spin {
                format!("≥ {TARGET_LAT_X:.0}×")
            } else {
                "-".into()
            },
            if spin {
                pass_miss(x >= TARGET_LAT_X)
            } else {
                "-".into()
            },
        ]);
    }

    println!();
    println!(
        "ibtca-bench guest-verbs, placement {}: two TCG guests (1 vCPU, 1 GiB each), one release \
         ibtca-device each, joined by a Unix-socket link; the client's `ibtca-tool \
         verbs-bench`, path MTU 4096.",
        placement.name
    );
    println!("Placement: {}.", placement.describe());
    println!(
        "write_bw: RDMA WRITEs, 32 outstanding, refilled 8 or more at a time with one \
         POST_SEND_BATCH ioctl (one doorbell), ~2 s per size, CQ polled without waiting, up to 32 completions and one CQ \
         doorbell per ioctl (POLL_CQ_BATCH). write_lat: 64 B RDMA WRITE \
         ping-pong, each side spinning on its own memory (no CQ, no interrupts); (sleep): \
         the same, but after 20 µs of spinning each side sleeps 10 µs between looks, so its \
         vCPU halts and leaves the host CPU to QEMU and the device. send_lat: 64 B SEND/RECV ping-pong waiting in the driver for the CQ \
         interrupt. Latencies are one-way (round trip / 2): typical = median."
    );
    println!(
        "Reference (soft-RoCE between two such guests over virtio-net, measured on these \
         machines): 1 MiB WRITE {}–{} MiB/s, 64 B {:.1}k msg/s, latency ~{:.0} µs.",
        RXE_WRITE_1M_MIB.0,
        RXE_WRITE_1M_MIB.1,
        RXE_MSG_64 / 1000.0,
        RXE_LAT_US
    );
    println!();
    print_grid(
        &[
            "test",
            "size",
            "iterations",
            "MiB/s",
            "Mmsg/s",
            "t_typical µs",
            "p99 µs",
            "× rxe",
            "target",
            "result",
        ],
        &rows,
        &[2, 3, 4, 5, 6],
    );
    for (role, run) in [("server", &server), ("client", &client)] {
        if let Some(l) = run.lines_with("IBTCA-VERBS-IRQS ").next() {
            let counts: Vec<&str> = l
                .split_whitespace()
                .skip(1)
                .filter(|c| !c.ends_with(":0"))
                .collect();
            println!(
                "{role} guest interrupts over the whole run (vector:count): {}",
                counts.join(" ")
            );
        }
    }
    if !problems.is_empty() {
        println!();
        println!("Problems:");
        for p in &problems {
            println!("  {p}");
        }
    }
    if bw_rows < 3 || lat_rows < 2 {
        eprintln!(
            "ibtca-bench: the client printed {bw_rows} write_bw and {lat_rows} write_lat \
             results (expected 3 and 2); client console tail:\n{}",
            tail(&client.serial, 30)
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Target (issue 4): DRDMA WRITE through the mapped window, share of memcpy.
const TARGET_DRDMA_MAPPED: f64 = 0.5;

/// One `guest-drdma` configuration: two guests in `drdma-bench` mode, the
/// window as `window` says. Returns the server's perf lines or a problem.
fn guest_drdma_run(
    bin: &Path,
    stack: &VmStack,
    window: &str,
    placement: &Placement,
) -> Result<Vec<PerfLine>, String> {
    let dir = stack.scratch("bench-drdma");
    let link = dir.join("ab.link");
    let listen = format!("listen:{}", link.display());
    let connect = format!("connect:{}", link.display());
    let (sock_a, sock_b) = (dir.join("a.sock"), dir.join("b.sock"));
    let (dev_a, dev_b) = start_pair(
        bin,
        [&sock_a, &sock_b],
        [&listen, &connect],
        placement,
        &["--drdma-window", window],
    );
    let guest = |socket: &Path, role: &str, peer_lid: u16| {
        let mut vm = VmConfig::new(socket, "drdma-bench");
        vm.append = format!("ibtca.mode=drdma-bench ibtca.role={role} ibtca.peer_lid={peer_lid}");
        vm.mem = "1G".into();
        vm.timeout = Duration::from_secs(400);
        vm
    };
    let mut server_vm = guest(&sock_a, "server", 2);
    let mut client_vm = guest(&sock_b, "client", 1);
    placement.pin(&mut server_vm, &mut client_vm);
    eprintln!(
        "[bench] booting two guests (TCG, 1 vCPU, 1 GiB each), {window} DRDMA window, placement {}: {}",
        placement.name,
        placement.describe()
    );
    let (server, client) = std::thread::scope(|s| {
        let server = s.spawn(|| stack.boot(&server_vm));
        let client = s.spawn(|| stack.boot(&client_vm));
        (server.join().unwrap(), client.join().unwrap())
    });
    drop((dev_a, dev_b));
    let perf: Vec<PerfLine> = server
        .lines_with("IBTCA-DRDMA-PERF ")
        .filter_map(|l| PerfLine::parse_tagged(l, "IBTCA-DRDMA-PERF "))
        .collect();
    let mut problems = Vec::new();
    for (role, run) in [("server", &server), ("client", &client)] {
        for l in run
            .lines_with("IBTCA-DRDMA ")
            .filter(|l| l.contains(" FAIL"))
        {
            problems.push(format!("{role}: {}", l.trim()));
        }
        if !run.serial.contains("IBTCA-DRDMA-RC 0") {
            problems.push(format!(
                "{role}: no IBTCA-DRDMA-RC 0 (run-vm.sh status {:?}); console tail:\n{}",
                run.status,
                tail(&run.serial, 15)
            ));
        }
    }
    if problems.is_empty() || !perf.is_empty() {
        for p in &problems {
            eprintln!("[bench] {window}: {p}");
        }
        Ok(perf)
    } else {
        Err(problems.join("\n"))
    }
}

fn run_guest_drdma() -> ExitCode {
    let Some(bin) = device_bin() else {
        return ExitCode::from(2);
    };
    let Ok(stack) = std::panic::catch_unwind(VmStack::get) else {
        eprintln!("ibtca-bench: no VM stack (see above)");
        return ExitCode::from(2);
    };
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut phases: Vec<Vec<String>> = Vec::new();
    let mut failed = false;
    let placements = PLACEMENTS
        .get()
        .cloned()
        .unwrap_or_else(|| vec![Placement::shared()]);
    let runs = placements
        .iter()
        .flat_map(|p| ["trapped", "mapped"].map(|w| (p, w)));
    for (placement, window) in runs {
        let perf = match guest_drdma_run(&bin, stack, window, placement) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("ibtca-bench: {window} window: {e}");
                failed = true;
                continue;
            }
        };
        // Rows say the placement when it is not the default one.
        let window = if placement.name == "shared" {
            window.to_owned()
        } else {
            format!("{window} ({})", placement.name)
        };
        let window = window.as_str();
        let memcpy = perf
            .iter()
            .find(|p| p.test == "memcpy")
            .and_then(|p| p.get("MBps"));
        for p in &perf {
            let (Some(mbps), Some(iters)) = (p.get("MBps"), p.get("iters")) else {
                continue;
            };
            let store = p.get("store_MBps").filter(|&v| v > 0.0);
            let share = memcpy.map(|m| mbps / m);
            let us = ["submit_us", "post_us", "fill_us", "commit_us", "wait_us"];
            if let (Some(batch), Some(t)) = (
                p.get("batch"),
                us.iter().map(|k| p.get(k)).collect::<Option<Vec<f64>>>(),
            ) {
                let mut row = vec![window.into(), p.test.clone(), format!("{batch:.0}")];
                row.extend(t.iter().map(|v| format!("{v:.0}")));
                phases.push(row);
            }
            let target = window.starts_with("mapped") && p.test == "drdma_write_memcpy_toio";
            rows.push(vec![
                window.into(),
                p.test.clone(),
                format!("{iters:.0}"),
                format!("{:.1}", mbps * 1e6 / (1 << 20) as f64),
                store.map_or("-".into(), |v| format!("{:.1}", v * 1e6 / (1 << 20) as f64)),
                share.map_or("-".into(), |x| format!("{:.2} %", x * 100.0)),
                if target {
                    format!("≥ {:.0} %", TARGET_DRDMA_MAPPED * 100.0)
                } else {
                    "-".into()
                },
                if target {
                    pass_miss(share.is_some_and(|x| x >= TARGET_DRDMA_MAPPED))
                } else {
                    "-".into()
                },
            ]);
        }
    }
    println!();
    println!(
        "ibtca-bench guest-drdma: two TCG guests (1 vCPU, 1 GiB each), one release \
         ibtca-device each, joined by a Unix-socket link; the server guest's `ibtca-tool \
         drdma-bench`, 4 KiB transfers, ~2 s per row."
    );
    println!(
        "drdma_write_*: DRDMA WRITEs into the client's memory, 32 ranges at a time (submit and \
         post all, fill all, take the completions; mapped: one DRDMA_SUBMIT_MASK, one SQ \
         doorbell and one DRDMA_COMMIT_MASK per batch, except *_per_range); MiB/s end to \
         end, store MiB/s = the time inside the fills and the commit. memcpy: 4 KiB \
         memcpy() in the guest, same run. rdma_write_mem: ordinary 4 KiB RDMA WRITEs from \
         memory, 32 outstanding, one doorbell per 32."
    );
    println!();
    print_grid(
        &[
            "window",
            "test",
            "transfers",
            "MiB/s",
            "store MiB/s",
            "of memcpy",
            "target",
            "result",
        ],
        &rows,
        &[2, 3, 4, 5],
    );
    if !phases.is_empty() {
        println!();
        println!(
            "Where a batch goes (µs per batch, guest clock): submit (DRDMA_SUBMIT each, or \
             one DRDMA_SUBMIT_MASK), post (32 POST_SEND: one SQ doorbell each, or one for the \
             batch where the masks are used), fill (the stores; per-range commits inside), \
             commit (one DRDMA_COMMIT_MASK), completions (POLL_CQ until the last CQE)."
        );
        println!();
        print_grid(
            &[
                "window",
                "test",
                "batch",
                "submit",
                "post",
                "fill",
                "commit",
                "completions",
            ],
            &phases,
            &[2, 3, 4, 5, 6, 7],
        );
    }
    if failed || rows.is_empty() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
