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
//! RDMA WRITE from guest memory; then (`tests/src/bench/drdma_vs_wqe.rs`)
//! DRDMA WRITE and READ through the mapped window against ordinary RDMA
//! WRITE and READ work requests of 64 B to 4 KiB: msg/s, QD 1 µs, ratios.
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
//! messages one `write`/`read` each, a 64 B socket ping-pong). Guests,
//! devices and the raw rows' threads are placed as `ibtca-fabric` places
//! two guests and two devices on this machine (`tests/src/bench/placement.rs`;
//! `--unplaced`: guests at nice 0, devices spinning, nothing pinned).
//!
//! `guest-verbs` is the perftest-style run between two real guests: two
//! release `ibtca-device` processes joined by a link (LIDs 1 and 2), two TCG
//! guests (1 vCPU, 1 GiB) booted at once in the `verbs-bench` mode of the
//! initramfs; the client's `ibtca-verbs verbs-bench` prints `IBTCA-PERF`
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

use clap::{Args, Parser, Subcommand};
use ibtca_device::link::LinkStats;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{LinkedPair, PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe};
use ibtca_tests::vm::{VmConfig, VmStack};
use ibtca_tests::{Client, TempDir, TestServer};

/// The server's default `--spin-us` (see `ibtca-device --help`).
const DEFAULT_SPIN_US: u64 = 50;

struct Opts {
    iterations: usize,
    vm: bool,
    guest_spins: Vec<u64>,
    guest_repeat: usize,
}

/// Benchmarks of the ibtca vfio-user server, device, link and switch.
///
/// See the module documentation of tests/src/bin/ibtca-bench.rs. Nothing timed is
/// asserted: targets are printed as PASS/MISS, and the exit status is 0
/// unless something could not run at all.
///
/// Build first: cargo build --release --workspace
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

/// Which benchmark to run.
#[derive(Subcommand, Debug)]
enum Bench {
    /// vfio-user round trips: host baseline, the server without a VM, a
    /// real guest's trapped BAR0 accesses.
    Mmio(MmioArgs),
    /// Two in-process devices joined by a link, driven by simulated
    /// guests: RDMA WRITE and SEND rates next to raw socket baselines.
    Verbs(VerbsArgs),
    /// perftest-style verbs between two TCG guests.
    GuestVerbs {
        /// The devices' engine threads poll for events US µs before
        /// blocking (default 0, the ibtca-device default).
        #[arg(long, value_name = "US")]
        engine_spin_us: Option<u64>,
        /// Both devices with --sched-batch, in placements without
        /// SCHED_FIFO.
        #[arg(long)]
        sched_batch: bool,
        /// shared, nice, latency, both, all (default) or custom:A,B,VA,VB.
        #[arg(long, value_name = "P")]
        placement: Option<String>,
    },
    /// Direct RDMA WRITE bandwidth through the trapped and mapped window,
    /// and DRDMA against ordinary RDMA WRITE/READ work requests, 64 B-4 KiB.
    Drdma {
        /// Timed seconds per measurement.
        #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = positive_seconds)]
        seconds: f64,
    },
    /// RDMA WRITE through in-process switches.
    Switch {
        /// Timed seconds per measurement.
        #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = positive_seconds)]
        seconds: f64,
    },
    /// n1 - sw0 - n2 from ibtca-fabric, the sw0-n2 link over TCP between
    /// two network namespaces or over a Unix socket, 0/1/10 ms delay
    /// (root).
    CrossHost {
        /// Timed seconds per measurement.
        #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = positive_seconds)]
        seconds: f64,
    },
    /// DRDMA between two TCG guests, trapped and mapped.
    GuestDrdma {
        /// shared (default), nice, latency, both, all or custom:A,B,VA,VB.
        #[arg(long, value_name = "P")]
        placement: Option<String>,
    },
    /// Raw 4 KiB packets through one link pair.
    Link {
        /// Packets sent.
        #[arg(long, value_name = "N", default_value_t = 500_000,
              value_parser = clap::value_parser!(u64).range(1..))]
        packets: u64,
    },
    /// ICRC and VCRC next to memcpy.
    Crc,
    /// SMPs per second answered by subnet management agents.
    Sma {
        /// SMPs per measurement.
        #[arg(long, value_name = "N", default_value_t = 20_000,
              value_parser = clap::value_parser!(u64).range(1..))]
        smps: u64,
    },
}

/// `mmio`'s options.
#[derive(Args, Debug)]
struct MmioArgs {
    /// Host round trips per measurement.
    #[arg(long, value_name = "N", default_value_t = 20_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    iterations: u64,
    /// Skip the guest measurements.
    #[arg(long)]
    no_vm: bool,
    /// Server --spin-us values for the pinned guest runs (default 50, the
    /// server default); e.g. 0,20,50,200.
    #[arg(
        long,
        value_name = "US,...",
        value_delimiter = ',',
        default_value = "50"
    )]
    guest_spins: Vec<u64>,
    /// Boot each pinned guest configuration N times.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    guest_repeat: u64,
}

/// `verbs`' options.
#[derive(Args, Debug)]
struct VerbsArgs {
    /// Timed seconds per measurement (a tenth of that more as warm-up for
    /// the verbs rows).
    #[arg(long, value_name = "S", default_value_t = 2.0, value_parser = positive_seconds)]
    seconds: f64,
    /// Run only these rows (write-1m, write-4k, write-64, read-1m, send,
    /// ping, write-ping); the raw rows always run.
    #[arg(long, value_name = "ROWS", value_delimiter = ',', value_parser = VERBS_ROWS)]
    only: Option<Vec<String>>,
    /// Measure the 1 MiB WRITE row as N pairs of a raw stream run and a
    /// WRITE run, interleaved; the row shows the pair with the median ratio
    /// (the lower one for even N) and every pair is listed.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    pairs: u64,
    /// The simulated guests sleep US µs when their CQ is empty instead of
    /// spinning with sched_yield.
    #[arg(long, value_name = "US", default_value_t = 0)]
    idle_sleep_us: u64,
    /// The devices' engine threads poll for events US µs before blocking
    /// (the ibtca-device default: 0).
    #[arg(long, value_name = "US")]
    engine_spin_us: Option<u64>,
    /// Every thread of the run under SCHED_BATCH, the raw rows' too.
    #[arg(long)]
    sched_batch: bool,
    /// Every device event goes through the engine thread's queue, none
    /// runs to completion on the thread it arrived on
    /// (docs/thread-model.md): the baseline run to completion is measured
    /// against.
    #[arg(long)]
    engine_thread_only: bool,
    /// Every polling thread (vfio-user server, engine, link reader) spins
    /// its whole limit before it blocks, instead of the adaptive idle
    /// budget: the baseline that budget is measured against
    /// (docs/thread-model.md).
    #[arg(long)]
    fixed_spins: bool,
    /// The WRITE ping-pong's simulated guests return CQ slots with a CQ
    /// doorbell per completion instead of the CQ's doorbell record (as the
    /// provider does; docs/thread-model.md).
    #[arg(long)]
    cq_doorbells: bool,
    /// The SEND rate's simulated guests ring a doorbell per post and per
    /// look at a CQ that took completions, instead of posting and returning
    /// CQ slots through doorbell records as the provider does
    /// (docs/thread-model.md).
    #[arg(long)]
    send_doorbells: bool,
    /// The SEND rate also prints, per 50 ms slot, the messages done, both
    /// RC QPs' RNR NAKs, timeouts, retransmissions and duplicates, and A's
    /// doorbells per ACK batch (plan36 E5).
    #[arg(long)]
    trace_slots: bool,
    /// Device A's threads on CPU 0 and B's on CPU 1, and the raw stream and
    /// message rows' writer on CPU 0 and reader on CPU 1 (default: nothing
    /// pinned).
    #[arg(long)]
    split: bool,
    /// The link's shared-memory ring per direction, as `ibtca-device
    /// --link-ring-kib` (default 4096; 0: frames on the Unix socket).
    #[arg(long, value_name = "KIB")]
    link_ring_kib: Option<u64>,
    /// The link readers poll an empty ring US µs before they sleep (the
    /// ibtca-device default: 0).
    #[arg(long, value_name = "US")]
    link_spin_us: Option<u64>,
    /// Guests and devices placed as before the bench took ibtca-fabric's
    /// placement: guests at nice 0, nothing pinned, the devices' vfio-user
    /// servers spinning up to 50 µs (the ibtca-device default). Default:
    /// what ibtca-fabric chooses for two guests and two devices on this
    /// machine's CPUs (docs/placement.md); on fewer than 4 CPUs, guests at
    /// nice 19 and devices with --spin-us 0.
    #[arg(long)]
    unplaced: bool,
    /// The simulated guests' (and raw baseline threads') niceness, over
    /// the placement's.
    #[arg(long, value_name = "N", allow_hyphen_values = true,
          value_parser = clap::value_parser!(i32).range(-20..=19))]
    guest_nice: Option<i32>,
    /// The devices' vfio-user servers poll their socket US µs after a
    /// message before they block, over the placement's.
    #[arg(long, value_name = "US")]
    device_spin_us: Option<u64>,
    /// Path MTU of the verbs rows' QPs: 256, 512, 1024, 2048 or 4096
    /// (default). A small one shows the per-packet cost: a 1 MiB WRITE at
    /// 256 is 4096 packets.
    #[arg(long, value_name = "BYTES", default_value = "4096", value_parser = path_mtu_code)]
    mtu: u8,
}

/// `--mtu`: the IBTCA_MTU_* code of a path MTU in bytes.
fn path_mtu_code(text: &str) -> Result<u8, String> {
    let bytes: u32 = text
        .parse()
        .map_err(|_| format!("'{text}' is not a number"))?;
    (MTU_256..=MTU_4096)
        .find(|&c| 128u32 << c == bytes)
        .ok_or_else(|| format!("{bytes} is not a path MTU (256, 512, 1024, 2048, 4096)"))
}

fn positive_seconds(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0 && s.is_finite())
        .ok_or_else(|| format!("'{text}' is not a positive number of seconds"))
}

#[path = "../bench/cpu.rs"]
mod cpu;
#[path = "../bench/crc.rs"]
mod crc;
#[path = "../bench/cross_host.rs"]
mod cross_host;
#[path = "../bench/device_process.rs"]
mod device_process;
#[path = "../bench/drdma.rs"]
mod drdma;
#[path = "../bench/drdma_vs_wqe.rs"]
mod drdma_vs_wqe;
#[path = "../bench/guests.rs"]
mod guests;
#[path = "../bench/link.rs"]
mod link;
#[path = "../bench/mmio.rs"]
mod mmio;
#[path = "../bench/placement.rs"]
mod placement;
#[path = "../bench/rate.rs"]
mod rate;
#[path = "../bench/raw.rs"]
mod raw;
#[path = "../bench/slots.rs"]
mod slots;
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
#[path = "../bench/write_pingpong.rs"]
mod write_pingpong;

use cpu::*;
use device_process::*;
use guests::*;
use placement::*;
use rate::*;
use raw::*;
use slots::*;
use table::*;
use verbs::*;
use verbs_pair::*;
use write_pingpong::*;

/// Names of the verbs rows, for `--only`.
const VERBS_ROWS: [&str; 7] = [
    "write-1m",
    "write-4k",
    "write-64",
    "read-1m",
    "send",
    "ping",
    "write-ping",
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

/// The verbs rows' path MTU, an IBTCA_MTU_* code (`--mtu`).
static PATH_MTU: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(MTU_4096);

fn path_mtu() -> u8 {
    PATH_MTU.load(Ordering::Relaxed)
}

/// `--engine-thread-only`: no event runs to completion where it arrived.
static ENGINE_THREAD_ONLY: AtomicBool = AtomicBool::new(false);

/// `--cq-doorbells`: the WRITE ping-pong's guests ring a CQ doorbell per
/// completion.
static CQ_DOORBELLS: AtomicBool = AtomicBool::new(false);

fn cq_doorbells() -> bool {
    CQ_DOORBELLS.load(Ordering::Relaxed)
}

/// `--send-doorbells`: the SEND rate's guests ring a doorbell per post and
/// per CQ look instead of using doorbell records.
static SEND_DOORBELLS: AtomicBool = AtomicBool::new(false);

fn send_doorbells() -> bool {
    SEND_DOORBELLS.load(Ordering::Relaxed)
}

fn run_to_completion() -> bool {
    !ENGINE_THREAD_ONLY.load(Ordering::Relaxed)
}

fn engine_spin() -> Duration {
    Duration::from_micros(ENGINE_SPIN_US.load(Ordering::Relaxed))
}

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-bench";

fn main() -> ExitCode {
    let cli: Cli = ibtca_device::cli::parse(NAME);
    match cli.bench {
        Bench::Mmio(a) => mmio::run(Opts {
            iterations: a.iterations as usize,
            vm: !a.no_vm,
            guest_spins: a.guest_spins,
            guest_repeat: a.guest_repeat as usize,
        }),
        Bench::Verbs(a) => {
            if let Err(e) = apply_verbs_args(&a) {
                return ibtca_device::cli::usage_error(NAME, e);
            }
            IDLE_SLEEP_US.store(a.idle_sleep_us, Ordering::Relaxed);
            run_verbs(a.seconds)
        }
        Bench::GuestVerbs {
            engine_spin_us,
            sched_batch,
            placement,
        } => {
            if let Some(us) = engine_spin_us {
                ENGINE_SPIN_US.store(us, Ordering::Relaxed);
            }
            SCHED_BATCH.store(sched_batch, Ordering::Relaxed);
            if let Err(e) = placement.map(|p| parse_placement(Some(p))).transpose() {
                return ibtca_device::cli::usage_error(NAME, e);
            }
            run_guest_verbs()
        }
        Bench::Drdma { seconds } => {
            let code = drdma::run(seconds);
            drdma_vs_wqe::run(seconds);
            code
        }
        Bench::Switch { seconds } => switch::run(seconds),
        Bench::CrossHost { seconds } => cross_host::run(seconds),
        Bench::GuestDrdma { placement } => {
            if let Err(e) = placement.map(|p| parse_placement(Some(p))).transpose() {
                return ibtca_device::cli::usage_error(NAME, e);
            }
            run_guest_drdma()
        }
        Bench::Link { packets } => link::run(packets),
        Bench::Sma { smps } => sma::run(smps),
        Bench::Crc => crc::run(),
    }
}

/// Sets the run-wide settings `verbs` takes.
fn apply_verbs_args(a: &VerbsArgs) -> Result<(), String> {
    if let Some(us) = a.engine_spin_us {
        ENGINE_SPIN_US.store(us, Ordering::Relaxed);
    }
    if a.sched_batch {
        // Every thread of the run, the raw rows' too: a fair baseline
        // under the same policy.
        ibtca_device::sched::set_batch().map_err(|e| format!("--sched-batch: {e}"))?;
        SCHED_BATCH.store(true, Ordering::Relaxed);
    }
    SPLIT.store(a.split, Ordering::Relaxed);
    ENGINE_THREAD_ONLY.store(a.engine_thread_only, Ordering::Relaxed);
    CQ_DOORBELLS.store(a.cq_doorbells, Ordering::Relaxed);
    SEND_DOORBELLS.store(a.send_doorbells, Ordering::Relaxed);
    TRACE_SLOTS.store(a.trace_slots, Ordering::Relaxed);
    ibtca_device::sched::idle_budget::set_fixed_spins(a.fixed_spins);
    if let Some(kib) = a.link_ring_kib {
        LINK_RING.store(kib.saturating_mul(1024), Ordering::Relaxed);
    }
    if let Some(us) = a.link_spin_us {
        LINK_SPIN_US.store(us, Ordering::Relaxed);
    }
    PAIRS.store(a.pairs, Ordering::Relaxed);
    let base = if a.unplaced {
        SimPlacement::unplaced()
    } else {
        fabric_placement()
    };
    set_placement(base.overridden(a.guest_nice, a.device_spin_us));
    PATH_MTU.store(a.mtu, Ordering::Relaxed);
    if let Some(rows) = &a.only {
        let _ = ONLY_ROWS.set(rows.clone());
    }
    Ok(())
}
