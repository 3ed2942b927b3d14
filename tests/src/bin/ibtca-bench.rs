//! `ibtca-bench`: latency benchmarks for the ibtca vfio-user server.
//!
//! ```text
//! cargo build --release --workspace
//! cargo run --release -p ibtca-tests --bin ibtca-bench -- mmio [--iterations N] [--no-vm]
//!     [--guest-spins LIST] [--guest-repeat N]
//! ```
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
//! Nothing timed is asserted: the targets are printed as PASS/MISS and the
//! exit status is 0 unless something could not run at all.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_tests::vm::{VmConfig, VmStack};
use ibtca_tests::{Client, TempDir};

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

  --iterations N      host round trips per measurement (default 20000)
  --no-vm             skip the guest measurements
  --guest-spins LIST  server --spin-us values for the pinned guest runs
                      (default 50, the server default); e.g. 0,20,50,200
  --guest-repeat N    boot each pinned guest configuration N times (default 1)

Build first: cargo build --release --workspace";

struct Opts {
    iterations: usize,
    vm: bool,
    guest_spins: Vec<u64>,
    guest_repeat: usize,
}

fn parse_args() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("mmio") => {}
        Some("-h" | "--help") => return Err(String::new()),
        Some(other) => return Err(format!("unknown benchmark '{other}'")),
        None => return Err("which benchmark? (mmio)".into()),
    }
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
    fn start(bin: &Path, socket: &Path, cpus: Option<&str>, spin_us: u64) -> Self {
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
    let _dev = Device::start(bin, &socket, Some("0"), spin_us);
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
    let _dev = Device::start(bin, &socket, server_cpus, spin_us);
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

fn main() -> ExitCode {
    let opts = match parse_args() {
        Ok(o) => o,
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
    let exe = std::env::current_exe().expect("current_exe");
    let device_bin: PathBuf = exe.with_file_name("ibtca-device");
    if !device_bin.exists() {
        eprintln!(
            "ibtca-bench: {} is missing: build the server next to this binary first,\n    \
             cargo build --release --workspace\n\
             (and run the bench with --release too)",
            device_bin.display()
        );
        return ExitCode::from(2);
    }
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
