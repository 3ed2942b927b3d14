//! `ibtca-switch`: an InfiniBand switch for ibtca devices; every port is a
//! Unix-socket link, packets are forwarded by DLID.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use clap::Parser;
use ibtca_cli as cli;
use ibtca_link::{FaultPlan, LinkConfig, LinkEndpoint};
use ibtca_sandbox::{self as sandbox, Role, SandboxArgs};
use ibtca_switch::control;
use ibtca_switch::{spec, PortConfig, Switch, SwitchConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-switch";

/// An InfiniBand switch joining ibtca devices (and other switches).
///
/// Each --port is one link, in the same framing as `ibtca-device --link`;
/// ports are numbered from 1 in the order given. The forwarding table
/// learns the LID of each directly attached device from its Hello; routes
/// to LIDs behind other switches are given with --route (ibtca-fabric
/// computes them from a topology file). Packets to unknown LIDs and packets
/// with a bad ICRC/VCRC are dropped and counted.
///
///   ibtca-device --socket a.sock --lid 1 --link connect:/tmp/sw-p1
///   ibtca-device --socket b.sock --lid 2 --link connect:/tmp/sw-p2
///   ibtca-switch --port listen:/tmp/sw-p1 --port listen:/tmp/sw-p2
///
/// SIGTERM or SIGINT stops it after logging every port's counters.
/// Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Args {
    /// A port's link: listen:PATH or connect:PATH, or listen:tcp:HOST:PORT
    /// or connect:tcp:HOST:PORT between hosts (repeat for each port).
    #[arg(long = "port", value_name = "ENDPOINT", required = true)]
    ports: Vec<LinkEndpoint>,

    /// An explicit route: LID=PORT or FIRST-LAST=PORT (repeatable).
    #[arg(long = "route", value_name = "LIDS=PORT", value_parser = spec::parse_route)]
    routes: Vec<Vec<(u16, u8)>>,

    /// Faults on what PORT sends, rates in per mille:
    /// PORT=drop:N,dup:N,reorder:N,corrupt:N,seed:N (repeatable).
    #[arg(long = "faults", value_name = "PORT=SPEC", value_parser = spec::parse_faults)]
    faults: Vec<(u8, ibtca_link::FaultRates)>,

    /// Capture what PORT receives and sends into a pcap (ERF, InfiniBand)
    /// file that Wireshark/tshark decode: PORT=FILE (repeatable).
    #[arg(long = "capture", value_name = "PORT=FILE", value_parser = spec::parse_capture)]
    captures: Vec<(u8, PathBuf)>,

    /// Hold what PORT sends for US microseconds: PORT=US (repeatable).
    #[arg(long = "delay", value_name = "PORT=US", value_parser = spec::parse_delay)]
    delays: Vec<(u8, Duration)>,

    /// SL → VL table of what PORT sends: PORT=VL,VL,... (16 VLs, SL0
    /// first; default SL n on VL n; SL15's entry must be 15). Repeatable.
    #[arg(long = "sl2vl", value_name = "PORT=TABLE", value_parser = spec::parse_sl2vl)]
    sl2vl: Vec<(u8, [u8; 16])>,

    /// VL arbitration of PORT: PORT=W,W,... 64-byte units per turn of each
    /// data VL (the low-priority VLArbitrationTable until an SM sets one),
    /// VL0 first; their number is the port's data VLs (default 15 of
    /// weight 1). VL15 is always served first. Repeatable.
    #[arg(long = "vl-weights", value_name = "PORT=WEIGHTS", value_parser = spec::parse_vl_weights)]
    vl_weights: Vec<(u8, Vec<u8>)>,

    /// Name for logs.
    #[arg(long, default_value = "switch")]
    name: String,

    /// Node GUID sent in each port's Hello (default: locally administered,
    /// the first switch's of `ibtca-fabric`).
    #[arg(long, value_name = "GUID", value_parser = ibtca_agents::guid::parse, default_value = "0x1200000000ff0000")]
    guid: u64,

    /// The switch's own LID, sent in Hello (0: none; else 1-0xbfff).
    #[arg(long, default_value_t = 0, value_parser = cli::ids::lid_or_zero)]
    lid: u16,

    /// A subnet manager configures the switch: no LID until the SM sets
    /// port 0's, no routes learned from Hellos (the SM's LFT, and --route,
    /// only), ports Init until the SM makes them Active. Port 0's subnet
    /// management agent answers SMPs (VL15, QP0) either way.
    #[arg(long)]
    sm_managed: bool,

    /// Log every port's counters every SECS seconds (0: only at exit).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    stats_interval: u64,

    /// Serve a control socket at PATH: one command per line (stats, down
    /// PORT, up PORT, faults PORT SPEC|none, delay PORT US), one reply line.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,

    /// Keep a JSON file with each port's state (up, peer) and counters,
    /// rewritten when a port changes state (ibtca-fabric waits on it).
    #[arg(long, value_name = "PATH")]
    status_file: Option<PathBuf>,

    /// Shared-memory ring per direction of each port's link, in KiB (as
    /// `ibtca-device --link-ring-kib`; 0: frames stay on the sockets).
    #[arg(long, value_name = "KIB", default_value_t = ibtca_link::SHARED_RING / 1024)]
    link_ring_kib: u64,

    #[command(flatten)]
    sandbox: SandboxArgs,
}

fn config(args: &Args) -> Result<SwitchConfig, String> {
    let n = args.ports.len();
    let mut ports: Vec<PortConfig> = args.ports.iter().cloned().map(PortConfig::new).collect();
    let get = |p: u8, what: &str| {
        usize::from(p)
            .checked_sub(1)
            .filter(|i| *i < n)
            .ok_or_else(|| format!("{what} for port {p}, but the switch has ports 1..={n}"))
    };
    let mut plans = Vec::new();
    for (p, rates) in &args.faults {
        plans.push((get(*p, "--faults")?, *rates));
    }
    let mut captures = Vec::new();
    for (p, file) in &args.captures {
        captures.push((get(*p, "--capture")?, file.clone()));
    }
    for (p, table) in &args.sl2vl {
        let i = get(*p, "--sl2vl")?;
        if let Some(port) = ports.get_mut(i) {
            port.vl.sl2vl = *table;
        }
    }
    for (p, weights) in &args.vl_weights {
        let i = get(*p, "--vl-weights")?;
        if let Some(port) = ports.get_mut(i) {
            port.vl.weights = weights.clone();
        }
    }
    for (i, port) in ports.iter().enumerate() {
        port.vl
            .validate()
            .map_err(|e| format!("port {}: --sl2vl/--vl-weights: {e}", i + 1))?;
    }
    let mut delays = Vec::new();
    for (p, d) in &args.delays {
        delays.push((get(*p, "--delay")?, *d));
    }
    for (i, d) in delays {
        if let Some(port) = ports.get_mut(i) {
            port.delay = d;
        }
    }
    for (i, rates) in plans {
        if let Some(port) = ports.get_mut(i) {
            port.faults = FaultPlan::default().with_rates(rates);
        }
    }
    for (i, file) in captures {
        if let Some(port) = ports.get_mut(i) {
            port.capture = Some(file);
        }
    }
    Ok(SwitchConfig {
        name: args.name.clone(),
        guid: args.guid,
        lid: args.lid,
        ports,
        routes: args.routes.iter().flatten().copied().collect(),
        link: LinkConfig {
            shared_ring: args.link_ring_kib.saturating_mul(1024),
            ..LinkConfig::default()
        },
        sm_managed: args.sm_managed,
    })
}

fn status_json(switch: &Switch) -> serde_json::Value {
    serde_json::json!({ "pid": std::process::id(), "ports": control::stats_json(switch) })
}

fn write_status(path: &PathBuf, switch: &Switch) {
    let tmp = path.with_extension("tmp");
    let text = status_json(switch).to_string();
    if let Err(e) = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path)) {
        tracing::warn!(error = %e, file = %path.display(), "cannot write the status file");
    }
}

fn main() -> ExitCode {
    ibtca_log::logging::init("info");
    let args: Args = cli::parse(NAME);
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(e) => return cli::usage_error(NAME, e),
    };
    if let Err(e) = sandbox::enable(NAME, &args.sandbox) {
        return cli::runtime_error(NAME, format_args!("seccomp: {e}"));
    }
    let (tx, rx) = mpsc::channel();
    let signals = match Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            return cli::runtime_error(NAME, format_args!("cannot set up signal handling: {e}"))
        }
    };
    let signal_thread = sandbox::start_signal_thread(signals, move |sig| {
        let _ = tx.send(sig);
    });
    if let Err(e) = signal_thread {
        tracing::error!("cannot start the signal thread: {e}");
        return ExitCode::FAILURE;
    }
    let switch = match Switch::start(cfg) {
        Ok(s) => Arc::new(s),
        Err(e) => return cli::runtime_error(NAME, format_args!("cannot start the switch: {e}")),
    };
    let control = match &args.control {
        Some(path) => match control::serve(Arc::clone(&switch), path) {
            Ok(c) => Some(c),
            Err(e) => {
                return cli::runtime_error(
                    NAME,
                    format_args!("cannot serve the control socket: {e}"),
                )
            }
        },
        None => None,
    };
    sandbox::enter(Role::SwitchMain);
    // Wake often enough to notice port changes for the status file.
    let tick = Duration::from_millis(50);
    let interval = Duration::from_secs(args.stats_interval);
    let mut since_log = Duration::ZERO;
    let mut last_state: Option<Vec<(bool, Option<u16>)>> = None;
    loop {
        if let Some(path) = &args.status_file {
            let state: Vec<_> = (1..=switch.ports())
                .filter_map(|p| u8::try_from(p).ok())
                .map(|p| (switch.is_port_up(p), switch.peer(p).map(|x| x.lid)))
                .collect();
            if last_state.as_ref() != Some(&state) {
                write_status(path, &switch);
                last_state = Some(state);
            }
        }
        match rx.recv_timeout(tick) {
            Ok(sig) => {
                tracing::info!(signal = sig, "stopping");
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        since_log += tick;
        if !interval.is_zero() && since_log >= interval {
            since_log = Duration::ZERO;
            switch.log_stats();
        }
    }
    if let Some(c) = control {
        c.stop();
    }
    switch.log_stats();
    if let Some(path) = &args.status_file {
        write_status(path, &switch);
    }
    // The control thread is joined: this is the last reference.
    drop(switch);
    ExitCode::SUCCESS
}
