//! `ibtca-hive`: hosts many guestless CAs and switches in one process.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ibtca_cli as cli;
use ibtca_hive::hive::idle_wait::default_spin;
use ibtca_hive::{Hive, HiveConfig};
use ibtca_sandbox::{self as sandbox, Role, SandboxArgs};
use signal_hook::consts::{SIGINT, SIGTERM};

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-hive";

/// Many guestless InfiniBand nodes (switches, CAs without a guest) in one
/// event-driven process.
///
/// The hive file (JSON) lists the switches and CAs and where each port's
/// wire goes: `hive:NODE:PORT` (another hosted node, carried in memory),
/// `listen:PATH` or `connect:PATH` (a node outside, over the same
/// Unix-socket link protocol as `ibtca-device --link`), or null.
///
///   ibtca-hive --config fabric.hive.json
///
/// Switches forward and answer SMPs and PM MADs as `ibtca-switch` does;
/// CAs answer SMPs and PM MADs as an `ibtca-device` port does. SIGTERM or
/// SIGINT stops it. Logs go to stderr; set RUST_LOG for more.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Args {
    /// The hive file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Keep FILE up to date with each hosted node's ports (link up or
    /// down), as JSON.
    #[arg(long, value_name = "FILE")]
    status_file: Option<PathBuf>,
    /// Serve a control socket at PATH: `inspect` answers every hosted
    /// node's port states and counters (IBA names) as JSON; `link NODE
    /// PORT down|up` takes an in-memory wire down or up; `switch NODE
    /// down|up` powers a hosted switch off or on.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,
    /// Most microseconds the event loop polls for its next event before
    /// it sleeps, the limit of its adaptive idle budget (0: sleep at
    /// once). Polling saves a host port's client (OpenSM) a wake-up of
    /// the hive per MAD, but takes a CPU while it lasts. Default: 50 when
    /// the hive may run on two CPUs or more, 0 on one (docs/hive.md).
    #[arg(long, value_name = "US")]
    spin_us: Option<u64>,
    #[command(flatten)]
    sandbox: SandboxArgs,
}

fn main() -> ExitCode {
    ibtca_log::logging::init("info");
    let args: Args = cli::parse(NAME);
    let text = match std::fs::read_to_string(&args.config) {
        Ok(t) => t,
        Err(e) => {
            return cli::runtime_error(
                NAME,
                format_args!("cannot read {}: {e}", args.config.display()),
            )
        }
    };
    let cfg = match HiveConfig::parse(&text) {
        Ok(c) => c,
        Err(e) => return cli::usage_error(NAME, format_args!("{}: {e}", args.config.display())),
    };
    if let Err(e) = sandbox::enable(NAME, &args.sandbox) {
        return cli::runtime_error(NAME, format_args!("seccomp: {e}"));
    }
    let (mut stop_rx, stop_tx) = match UnixStream::pair() {
        Ok(p) => p,
        Err(e) => return cli::runtime_error(NAME, format_args!("stop pipe: {e}")),
    };
    for sig in [SIGTERM, SIGINT] {
        let tx = match stop_tx.try_clone() {
            Ok(t) => t,
            Err(e) => return cli::runtime_error(NAME, format_args!("stop pipe: {e}")),
        };
        if let Err(e) = signal_hook::low_level::pipe::register(sig, tx) {
            return cli::runtime_error(NAME, format_args!("cannot set up signal handling: {e}"));
        }
    }
    let mut hive = match Hive::new(&cfg) {
        Ok(h) => h,
        Err(e) => return cli::runtime_error(NAME, format_args!("cannot start the hive: {e}")),
    };
    // The hive keeps what it needs of the file (its switches, to power
    // one on again).
    drop(cfg);
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let spin = args
        .spin_us
        .map_or_else(|| default_spin(cpus), Duration::from_micros);
    hive.set_idle_spin(spin);
    if let Some(path) = args.status_file {
        hive.set_status_file(path);
    }
    if let Some(path) = &args.control {
        if let Err(e) = hive.set_control_socket(path) {
            return cli::runtime_error(NAME, format_args!("cannot bind {}: {e}", path.display()));
        }
    }
    tracing::info!(
        nodes = hive.node_count(),
        sockets = hive.socket_count(),
        spin_us = spin.as_micros(),
        "hive started"
    );
    sandbox::enter(Role::Hive);
    if let Err(e) = hive.run(stop_rx.as_raw_fd()) {
        return cli::runtime_error(NAME, format_args!("event loop: {e}"));
    }
    let mut byte = [0u8; 1];
    let _ = stop_rx.read(&mut byte);
    hive.log_host_ports("at exit");
    let (caught, slept) = hive.idle_waits();
    tracing::info!(
        waits_caught_spinning = caught,
        waits_slept = slept,
        passed_at_once = hive.passed_at_once(),
        "hive event loop"
    );
    let d = hive.drops();
    tracing::info!(
        dropped_unwired = d.unwired,
        dropped_cut = d.cut,
        dropped_unpowered = d.unpowered,
        dropped_link_down = d.link_down,
        dropped_queue_full = d.queue_full,
        "hive stopped"
    );
    ExitCode::SUCCESS
}
