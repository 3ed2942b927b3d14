//! `ibtca-bench mmio`: trapped BAR reads and posted writes, through the
//! server without a VM and from a real guest, next to the socket round trip.

use super::*;

/// Iterations the guest's /init passes to `ibtca-tool bench-mmio`.
pub(super) const GUEST_ITERATIONS: u32 = 2000;

/// Target: trapped read on one CPU, as a multiple of the socket round trip.
pub(super) const TARGET_SAME_RATIO: f64 = 2.0;

/// Target: trapped read across CPUs, µs.
pub(super) const TARGET_CROSS_US: f64 = 20.0;

/// Target: posted write "~2 µs"; counted as met up to this, µs.
pub(super) const TARGET_WRITE_US: f64 = 2.5;

/// Pins the calling thread to one CPU.
pub(super) fn pin_current_thread(cpu: usize) {
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
pub(super) struct Stats {
    median_us: f64,
    p99_us: f64,
}

pub(super) fn stats(mut ns: Vec<u64>) -> Stats {
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
pub(super) fn time_each(n: usize, mut f: impl FnMut()) -> Vec<u64> {
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
pub(super) fn socket_rtt(n: usize, client_cpu: usize, server_cpu: usize) -> Stats {
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

/// The server without a VM: REGION_READs of BAR0 SCRATCH, server on CPU 0,
/// client thread on `client_cpu`.
pub(super) fn server_rtt(bin: &Path, n: usize, client_cpu: usize, spin_us: u64) -> Stats {
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
pub(super) struct GuestConfig {
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
pub(super) struct GuestResult {
    read_us: f64,
    write_us: f64,
    boot_s: f64,
}

/// Boots the foundation guest against a fresh server; QEMU on `qemu_cpus`,
/// the server on `server_cpus`.
pub(super) fn guest_run(
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
pub(super) enum Base {
    Same,
    Cross,
}

#[derive(Clone, Copy)]
pub(super) enum Target {
    None,
    SameRatio,
    CrossUs,
    WriteUs,
}

pub(super) struct Row {
    what: String,
    placement: &'static str,
    spin: String,
    value_us: f64,
    p99_us: Option<f64>,
    base: Base,
    target: Target,
}

pub(super) fn print_table(rows: &[Row], sock_same: f64, sock_cross: f64) {
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

/// `ibtca-bench mmio` (module docs of the binary).
pub(super) fn run(opts: Opts) -> ExitCode {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        return ibtca_device::cli::runtime_error(
            super::NAME,
            format_args!("needs at least 2 CPUs for the cross-CPU figures (have {cpus})"),
        );
    }
    let Some(device_bin) = device_bin() else {
        return ExitCode::from(ibtca_device::cli::EXIT_RUNTIME);
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
                    match guest_run(&stack, &device_bin, qemu, server, spin) {
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
