//! `ibtca-device`: serves one ibtca device instance to a vfio-user client
//! (QEMU's `vfio-user-pci`) on a Unix socket.

use ibtca_device::vl_config::{self, VlConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ibtca_device::cli;
use ibtca_device::drdma::DrdmaConfig;
use ibtca_device::guid;
use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_device::link::LinkEndpoint;
use ibtca_device::sandbox::{self, Role, SandboxArgs};
use ibtca_device::sched::{self, CpuList};
use ibtca_device::transport::config::{DEFAULT_MIN_ACK_TIMEOUT_MS, MAX_MIN_ACK_TIMEOUT_MS};
use ibtca_device::vfio_user::{Server, ServerConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-device";

/// An InfiniBand TCA for QEMU guests, served over vfio-user.
///
/// Start it, then start QEMU with guest RAM shared and the device pointing at
/// the socket:
///
///   -object memory-backend-memfd,id=mem,size=1G,share=on
///   -machine q35,memory-backend=mem
///   -device '{"driver":"vfio-user-pci","socket":{"type":"unix","path":"PATH"}}'
///
/// Two devices form an IB link when one listens and the other connects:
///
///   ibtca-device --socket a.sock --lid 1 --link listen:/tmp/ab.link
///   ibtca-device --socket b.sock --lid 2 --link connect:/tmp/ab.link
///
/// When QEMU exits the server waits for the next QEMU; SIGTERM or SIGINT stops
/// it. Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Args {
    /// Unix socket to listen on (a stale socket file is replaced).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,

    /// Serve a control socket here: one command per line (`port`,
    /// `counters`, `qps`, `inspect`), one JSON reply line each (a stale
    /// socket file is replaced; docs/inspect.md).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,

    /// Most microseconds to poll for the next message before sleeping: the
    /// limit of the thread's adaptive idle budget (0: never; default 50, or
    /// 0 with --realtime; docs/thread-model.md).
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,

    /// Most microseconds the engine thread polls for its next event
    /// (doorbell, packet, timer) before it blocks, the limit of its adaptive
    /// idle budget (0: block at once). Polling saves a
    /// thread wake-up per hand-off (it yields the CPU while it polls), but
    /// costs CPU: use it only with CPUs to spare (docs/placement.md).
    #[arg(long, value_name = "US", default_value_t = 0)]
    engine_spin_us: u64,

    /// The port's LID (1-0xbfff, unicast).
    #[arg(long, default_value_t = 1, value_parser = cli::ids::lid)]
    lid: u16,

    /// A subnet manager brings the port up: it starts without a LID, is
    /// Init while its link is up, and gets its LID and goes Active only
    /// through PortInfo Sets to the device's subnet management agent.
    /// Without it the port is Active with --lid whenever its link is up.
    #[arg(long)]
    sm_managed: bool,

    /// NodeDescription the device's subnet management agent reports.
    #[arg(long, value_name = "TEXT", default_value = ibtca_device::engine::DEFAULT_NODE_DESCRIPTION)]
    node_description: String,

    /// The node GUID, an EUI-64: 0x hex, decimal or colon-separated hex (default: a random locally administered
    /// one, logged at start; give one for an identity that outlives the
    /// process). `--guid` is its older name.
    #[arg(long, alias = "guid", value_name = "GUID", value_parser = guid::parse)]
    node_guid: Option<u64>,

    /// The port GUID (default: the node GUID).
    #[arg(long, value_name = "GUID", value_parser = guid::parse)]
    port_guid: Option<u64>,

    /// Link to a peer device: listen:PATH or connect:PATH (Unix socket), or
    /// listen:tcp:HOST:PORT or connect:tcp:HOST:PORT (TCP, between hosts).
    #[arg(long, value_name = "ENDPOINT")]
    link: Option<LinkEndpoint>,

    /// Shared-memory ring per direction of the link, in KiB (rounded up to
    /// a power of two, 4 KiB to 1 GiB): when both ends have one, their
    /// frames go through the rings instead of the socket. 0: keep every
    /// frame on the socket (to watch it with strace, say).
    #[arg(long, value_name = "KIB", default_value_t = ibtca_device::link::SHARED_RING / 1024)]
    link_ring_kib: u64,

    /// Most microseconds the link reader polls its empty ring before it
    /// sleeps, the limit of its adaptive idle budget (0: sleep at once). Like --engine-spin-us, only with CPUs to spare.
    #[arg(long, value_name = "US", default_value_t = 0)]
    link_spin_us: u64,

    /// Least local ACK timeout of every QP, in ms: a shorter one the guest
    /// sets (ibv_rc_pingpong's 67 ms, say) is raised to it, an infinite
    /// one (0) stays infinite; QUERY_QP still reports what the guest set.
    /// Real HCAs enforce such a minimum; it keeps RC connections alive
    /// when a loaded host starves a guest or a device thread for a
    /// moment. 0: no floor, the guest's timeout as it is.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_MIN_ACK_TIMEOUT_MS,
          value_parser = clap::value_parser!(u64).range(0..=MAX_MIN_ACK_TIMEOUT_MS))]
    min_ack_timeout_ms: u64,

    /// DRDMA window: number of 4 KiB address ranges (ARRs), 1-256.
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    drdma_ranges: u32,

    /// DRDMA: packet memory blocks in the pool (at least the range count).
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    drdma_pmbs: u32,

    /// DRDMA window access path: `trapped` (every guest access is a
    /// vfio-user message; doorbells stay posted writes) or `mapped` (QEMU
    /// maps the PMB pages; the driver commits byte counts; note QEMU then
    /// stops posting BAR writes for the whole device).
    #[arg(long, value_name = "MODE", default_value = "trapped",
          value_parser = ["trapped", "mapped"])]
    drdma_window: String,

    /// DRDMA: default time a load waits for read-response data, in ms.
    #[arg(long, value_name = "MS", default_value_t = 200)]
    drdma_load_timeout_ms: u64,

    /// The link's SL → VL table: 16 VLs, the VL of SL0 first (default:
    /// SL n on VL n). Every entry must be a data VL the port runs (one per
    /// --vl-weights entry) with a weight above 0, and SL15's must be 15.
    #[arg(long, value_name = "VL,VL,...", value_parser = vl_config::parse_sl2vl)]
    sl2vl: Option<[u8; 16]>,

    /// VL arbitration weights: 64-byte units per turn of each data VL (the
    /// low-priority VLArbitrationTable until an SM sets one; a packet
    /// starts while weight is left, so 1 is one packet a turn), VL0 first;
    /// their number is the number of data VLs (1-15, default 15 VLs of
    /// weight 1). VL15 is always served first.
    #[arg(long, value_name = "W,W,...")]
    vl_weights: Option<String>,

    /// Run the device's threads on these CPUs only (e.g. `0` or `0,2-3`).
    /// Hand-offs between threads on one CPU are cheaper than across CPUs:
    /// with --realtime, two guests' devices together on one CPU gave the
    /// lowest latency on a 2-CPU host (qemu-configs/two-nodes-low-latency.json,
    /// BENCHMARKS.md "Verbs between two guests").
    #[arg(long, value_name = "LIST")]
    cpus: Option<CpuList>,

    /// Run the device's threads under SCHED_FIFO at this priority (1-99),
    /// so a doorbell or a packet preempts a busy-polling guest at once
    /// instead of waiting for its time slice. Needs root (CAP_SYS_NICE).
    /// Turns the default spins off: a real-time thread must not spin.
    #[arg(long, value_name = "PRIO",
          value_parser = clap::value_parser!(u8).range(1..=99))]
    realtime: Option<u8>,

    /// Run the device's threads under SCHED_BATCH: a woken thread does not
    /// preempt the one running on its CPU. More throughput where the
    /// device threads outnumber the CPUs (no-VM fabrics, bulk transfers);
    /// more latency beside busy-polling guests. No privilege needed.
    #[arg(long, conflicts_with = "realtime")]
    sched_batch: bool,

    #[command(flatten)]
    sandbox: SandboxArgs,
}

/// `--cpus`, `--realtime` and `--sched-batch`, on this thread before any other starts (they
/// inherit both).
fn apply_scheduling(args: &Args) -> Result<(), String> {
    if let Some(cpus) = &args.cpus {
        sched::set_affinity(cpus).map_err(|e| format!("--cpus {cpus}: {e}"))?;
    }
    if let Some(prio) = args.realtime {
        sched::set_realtime(prio).map_err(|e| {
            format!("--realtime {prio}: {e} (SCHED_FIFO needs root or CAP_SYS_NICE)")
        })?;
        let spins = [
            ("--spin-us", args.spin_us.unwrap_or(0)),
            ("--engine-spin-us", args.engine_spin_us),
            ("--link-spin-us", args.link_spin_us),
        ];
        for (name, us) in spins.into_iter().filter(|&(_, us)| us > 0) {
            tracing::warn!(
                "{name} {us} with --realtime: a spinning real-time thread keeps \
                 everything else off its CPU while it spins"
            );
        }
    }
    if args.sched_batch {
        sched::set_batch().map_err(|e| format!("--sched-batch: {e}"))?;
    }
    if args.cpus.is_some() || args.realtime.is_some() || args.sched_batch {
        tracing::info!(cpus = ?args.cpus.as_ref().map(ToString::to_string), realtime = ?args.realtime, batch = args.sched_batch, "data-path scheduling");
    }
    Ok(())
}

fn main() -> ExitCode {
    ibtca_device::logging::init("info");
    let args: Args = cli::parse(NAME);
    if let Err(e) = sandbox::enable(NAME, &args.sandbox) {
        return cli::runtime_error(NAME, format_args!("seccomp: {e}"));
    }
    let defaults = VlConfig::default();
    let weights = match args.vl_weights.as_deref().map(vl_config::parse_weights) {
        Some(Ok(w)) => w,
        Some(Err(e)) => {
            return cli::usage_error(NAME, format_args!("--vl-weights: {e}"));
        }
        None => defaults.weights,
    };
    let vl = VlConfig {
        sl2vl: args.sl2vl.unwrap_or(defaults.sl2vl),
        weights,
    };
    if let Err(e) = vl.validate() {
        return cli::usage_error(NAME, format_args!("--sl2vl/--vl-weights: {e}"));
    }
    if let Err(e) = apply_scheduling(&args) {
        return cli::usage_error(NAME, e);
    }
    let spin_us = args
        .spin_us
        .unwrap_or(if args.realtime.is_some() { 0 } else { 50 });
    let config = ServerConfig {
        spin: Duration::from_micros(spin_us),
        ..Default::default()
    };
    let mut server = match Server::bind(&args.socket, config) {
        Ok(s) => s,
        Err(e) => {
            return cli::runtime_error(NAME, format_args!("--socket: {e}"));
        }
    };
    let signals = match Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            return cli::runtime_error(NAME, format_args!("cannot set up signal handling: {e}"));
        }
    };
    let stop = server.shutdown_handle();
    let signal_thread = sandbox::start_signal_thread(signals, move |sig| {
        tracing::info!(signal = sig, "stopping");
        stop.stop();
    });
    if let Err(e) = signal_thread {
        tracing::error!("cannot start the signal thread: {e}");
        return ExitCode::FAILURE;
    }
    let node_guid = args.node_guid.unwrap_or_else(guid::random_local);
    let instance_cfg = InstanceConfig {
        lid: args.lid,
        sm_managed: args.sm_managed,
        node_description: args.node_description.clone(),
        node_guid,
        port_guid: args.port_guid.unwrap_or(node_guid),
        link: args.link.clone(),
        drdma: DrdmaConfig {
            ranges: args.drdma_ranges,
            pmbs: args.drdma_pmbs.max(args.drdma_ranges),
            mapped: args.drdma_window == "mapped",
            load_timeout: Duration::from_millis(args.drdma_load_timeout_ms),
        },
        vl,
        engine_spin: Duration::from_micros(args.engine_spin_us),
        link_ring: args.link_ring_kib.saturating_mul(1024),
        link_spin: Duration::from_micros(args.link_spin_us),
        min_ack_timeout: Duration::from_millis(args.min_ack_timeout_ms),
        run_to_completion: true,
        ..InstanceConfig::default()
    };
    let mut device = match Instance::start(&instance_cfg) {
        Ok(d) => d,
        Err(e) => {
            return cli::runtime_error(NAME, format_args!("cannot start the device: {e}"));
        }
    };
    let control = match &args.control {
        Some(path) => match ibtca_device::device_control::serve(device.engine(), path) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::error!("cannot serve the control socket: {e}");
                device.stop();
                return ExitCode::FAILURE;
            }
        },
        None => None,
    };
    tracing::info!(
        lid = instance_cfg.lid,
        node_guid = format!("{:#018x}", instance_cfg.node_guid),
        port_guid = format!("{:#018x}", instance_cfg.port_guid),
        link = ?instance_cfg.link,
        "device ready"
    );
    sandbox::enter(Role::VfioServer);
    let result = server.serve(&mut device.tca);
    drop(control);
    if let Some(l) = device.link_stats() {
        tracing::info!(?l, "link counters");
    }
    let es = device.stop();
    tracing::info!(?es, "engine counters");
    let stats = server.stats();
    tracing::info!(
        connections = stats.connections,
        messages = stats.messages,
        errors = stats.errors,
        "server stopped"
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => cli::runtime_error(NAME, format_args!("server failed: {e}")),
    }
}
