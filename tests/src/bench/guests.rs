//! `ibtca-bench guest-verbs` and `guest-drdma`: perftest-style numbers
//! between two real TCG guests, and the placements they run in.

use super::*;

// ---------------------------------------------------------------------------

/// Soft-RoCE (rxe) between two such TCG guests over virtio-net, measured on
/// these machines: 1 MiB RDMA WRITE bandwidth, MiB/s (low, high).
pub(super) const RXE_WRITE_1M_MIB: (f64, f64) = (12.0, 25.0);
/// rxe: 64 B RDMA WRITE message rate, msg/s.
pub(super) const RXE_MSG_64: f64 = 6800.0;
/// rxe: 64 B latency, µs.
pub(super) const RXE_LAT_US: f64 = 1000.0;
/// Targets (issue): ≥ 50× rxe's 1 MiB bandwidth, ≥ 20× its 64 B message
/// rate, ≤ 1/20 of its latency.
pub(super) const TARGET_BW_X: f64 = 50.0;
pub(super) const TARGET_MSG_X: f64 = 20.0;
pub(super) const TARGET_LAT_X: f64 = 20.0;

/// One `IBTCA-PERF` line: the test name and its `key=value` fields.
pub(super) struct PerfLine {
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

/// Where `guest-verbs` runs the devices and the guests (`--placement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placement {
    name: String,
    /// `ibtca-device --cpus` of device A (server) and B (client).
    dev_cpus: [Option<String>; 2],
    /// `ibtca-device --realtime` of both devices.
    realtime: Option<u8>,
    /// QEMU's CPUs for the server and the client guest.
    vm_cpus: [Option<String>; 2],
    /// Both guests' QEMU niceness (run-vm.sh `--nice`).
    vm_nice: Option<i8>,
}

impl Placement {
    /// Nothing pinned, normal priorities: what a user gets by default.
    fn shared() -> Self {
        Placement {
            name: "shared".into(),
            dev_cpus: [None, None],
            realtime: None,
            vm_cpus: [None, None],
            vm_nice: None,
        }
    }

    /// Nothing pinned, no privilege: both guests' QEMU at nice 19, so a
    /// woken device thread preempts a busy-polling vCPU at once (what a
    /// topology's `guest.nice` gives).
    fn nice() -> Self {
        Placement {
            name: "nice".into(),
            vm_nice: Some(19),
            ..Self::shared()
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
            vm_nice: None,
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
        } else if SCHED_BATCH.load(Ordering::Relaxed) {
            args.push("--sched-batch".to_owned());
        }
        args
    }

    /// Pins the server's and the client's QEMU.
    fn pin(&self, server: &mut VmConfig, client: &mut VmConfig) {
        server.cpu_affinity = self.vm_cpus[0].clone();
        client.cpu_affinity = self.vm_cpus[1].clone();
        server.nice = self.vm_nice;
        client.nice = self.vm_nice;
    }

    fn describe(&self) -> String {
        let show = |c: &Option<String>| c.clone().unwrap_or_else(|| "any".into());
        format!(
            "device A CPUs {}, device B CPUs {}, {}; server guest CPUs {}, client guest CPUs {}{}",
            show(&self.dev_cpus[0]),
            show(&self.dev_cpus[1]),
            self.realtime.map_or("normal priority".into(), |p| format!(
                "SCHED_FIFO {p} (no spins)"
            )),
            show(&self.vm_cpus[0]),
            show(&self.vm_cpus[1]),
            self.vm_nice
                .map(|n| format!(", guests' QEMU at nice {n}"))
                .unwrap_or_default(),
        )
    }
}

/// Devices A (LID 1, `links[0]`) and B (LID 2, `links[1]`) for two
/// guests, placed as `placement` says, with `extra` options for both.
pub(super) fn start_pair(
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
pub(super) static PLACEMENTS: std::sync::OnceLock<Vec<Placement>> = std::sync::OnceLock::new();

pub(super) fn parse_placement(v: Option<String>) -> Result<(), String> {
    let list = match v.as_deref() {
        Some("shared") => vec![Placement::shared()],
        Some("nice") => vec![Placement::nice()],
        Some("latency") => vec![Placement::latency()],
        Some("both") => vec![Placement::shared(), Placement::latency()],
        Some("all") => vec![Placement::shared(), Placement::nice(), Placement::latency()],
        Some(c) if c.starts_with("custom:") => vec![Placement::custom("custom", &c[7..])?],
        _ => {
            return Err(
                "--placement needs shared, nice, latency, both, all or custom:A,B,VA,VB".into(),
            )
        }
    };
    PLACEMENTS
        .set(list)
        .map_err(|_| "--placement given twice".to_string())
}

pub(super) fn run_guest_verbs() -> ExitCode {
    let Some(bin) = device_bin() else {
        return ExitCode::from(ibtca_device::cli::EXIT_RUNTIME);
    };
    let Ok(stack) = std::panic::catch_unwind(VmStack::get) else {
        return ibtca_device::cli::runtime_error(super::NAME, "no VM stack (see above)");
    };
    let placements = PLACEMENTS
        .get()
        .cloned()
        .unwrap_or_else(|| vec![Placement::shared(), Placement::nice(), Placement::latency()]);
    let mut code = ExitCode::SUCCESS;
    for placement in &placements {
        if guest_verbs_once(&bin, &stack, placement) != ExitCode::SUCCESS {
            code = ExitCode::from(1);
        }
    }
    code
}

/// One `guest-verbs` boot pair in `placement`; prints its table.
pub(super) fn guest_verbs_once(bin: &Path, stack: &VmStack, placement: &Placement) -> ExitCode {
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
         ibtca-device each, joined by a Unix-socket link; the client's `ibtca-verbs \
         verbs-bench` (libibverbs), path MTU 4096.",
        placement.name
    );
    println!("Placement: {}.", placement.describe());
    println!(
        "write_bw: RDMA WRITEs, 64 outstanding (the whole SQ), refilled 16 or more at a time with one \
         ibv_post_send chain (one doorbell), ~2 s per size, CQ polled without waiting, up to 32 completions \
         per ibv_poll_cq; from 64 KiB on an empty poll sleeps until \
         the CQ's completion event (ib_write_bw -e). write_lat: 64 B RDMA WRITE \
         ping-pong, each side spinning on its own memory (no CQ, no interrupts); (sleep): \
         the same, but after 20 µs of spinning each side sleeps 10 µs between looks, so its \
         vCPU halts and leaves the host CPU to QEMU and the device. send_lat: 64 B SEND/RECV ping-pong waiting for the CQ's \
         completion event. Latencies are one-way (round trip / 2): typical = median."
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
pub(super) const TARGET_DRDMA_MAPPED: f64 = 0.5;

/// One `guest-drdma` configuration: two guests in `drdma-bench` mode, the
/// window as `window` says. Returns the server's perf lines or a problem.
pub(super) fn guest_drdma_run(
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

pub(super) fn run_guest_drdma() -> ExitCode {
    let Some(bin) = device_bin() else {
        return ExitCode::from(ibtca_device::cli::EXIT_RUNTIME);
    };
    let Ok(stack) = std::panic::catch_unwind(VmStack::get) else {
        return ibtca_device::cli::runtime_error(super::NAME, "no VM stack (see above)");
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
        let perf = match guest_drdma_run(&bin, &stack, window, placement) {
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
