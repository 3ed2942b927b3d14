//! `ibtca-simport`: a fabric port that host programs own through ibsim's
//! client protocol. See the crate documentation and `--help`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ibtca_cli as cli;
use ibtca_link::LinkEndpoint;
use ibtca_sandbox::{self as sandbox, Role, SandboxArgs};
use ibtca_simport::port::PortSettings;
use ibtca_simport::server::{Event, Server, ServerConfig};
use ibtca_simport::sockets::DEFAULT_BASE;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-simport";

/// A fabric port host programs own: ibsim's server side for one channel
/// adapter.
///
/// The port is a channel adapter of one port on --link (the same framing
/// and Hello as an ibtca-device), whose QP0 and QP1 belong to the programs
/// that attach through Debian's libumad2sim (package libumad2sim0):
///
///   ibtca-simport --link connect:/tmp/fab/sw0-p3.sock --lid 3 --sockname host &
///   IBSIM_SOCKNAME=host LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so \
///       SIM_SET_ISSM=1 opensm -o
///   IBSIM_SOCKNAME=host LD_PRELOAD=... ibnetdiscover
///
/// The port answers the SM with the device's own agent (NodeInfo,
/// PortInfo, ...) and PerfMgt requests with the device's PMA. A request a
/// program sends gets its response or, after --mad-timeout-ms, comes back
/// with status ETIMEDOUT, as the kernel's MAD layer returns it. Logs go to
/// stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Args {
    /// The fabric link: listen:PATH or connect:PATH.
    #[arg(long, value_name = "ENDPOINT")]
    link: LinkEndpoint,

    /// The socket base name clients give as IBSIM_SOCKNAME (abstract Unix
    /// sockets NAME:ctl and NAME:out0..9).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_BASE)]
    sockname: String,

    /// The port's LID (0: none until the SM sets one).
    #[arg(long, default_value_t = 0, value_parser = cli::ids::lid_or_zero)]
    lid: u16,

    /// Node GUID (default 0x1200000000510000 + LID).
    #[arg(long, value_name = "GUID", value_parser = ibtca_agents::guid::parse)]
    node_guid: Option<u64>,

    /// Port GUID (default: the node GUID).
    #[arg(long, value_name = "GUID", value_parser = ibtca_agents::guid::parse)]
    port_guid: Option<u64>,

    /// NodeDescription the subnet manager reads.
    #[arg(long, value_name = "TEXT", default_value = "ibtca simport")]
    description: String,

    /// The node id clients may ask for with SIM_HOST (besides the
    /// description); default: the description.
    #[arg(long, value_name = "ID")]
    node_id: Option<String>,

    /// An SM brings the port up: Init on link up, Active once the SM says.
    /// Without it the port is Active with --lid as soon as its link is up.
    #[arg(long)]
    sm_managed: bool,

    /// How long a program's request waits for its response before it
    /// comes back with ETIMEDOUT.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    mad_timeout_ms: u64,

    /// The link's shared ring per direction, in KiB (0: the socket).
    #[arg(long, value_name = "KIB", default_value_t = ibtca_link::SHARED_RING / 1024)]
    link_ring_kib: u64,

    #[command(flatten)]
    sandbox: SandboxArgs,
}

/// Locally administered node GUIDs of host ports: this plus the LID.
const SIMPORT_GUID_BASE: u64 = 0x1200_0000_0051_0000;

fn main() -> ExitCode {
    ibtca_log::logging::init("info");
    let args: Args = cli::parse(NAME);
    let node_guid = args
        .node_guid
        .unwrap_or(SIMPORT_GUID_BASE + u64::from(args.lid));
    let cfg = ServerConfig {
        base: args.sockname.clone(),
        link: args.link.clone(),
        link_ring: args.link_ring_kib.saturating_mul(1024),
        port: PortSettings {
            node_guid,
            port_guid: args.port_guid.unwrap_or(node_guid),
            description: args.description.clone(),
            lid: args.lid,
            managed: args.sm_managed,
            node_id: args.node_id.clone().unwrap_or(args.description.clone()),
        },
        mad_timeout: Duration::from_millis(args.mad_timeout_ms.max(1)),
    };
    if let Err(e) = sandbox::enable(NAME, &args.sandbox) {
        return cli::runtime_error(NAME, format_args!("seccomp: {e}"));
    }
    let signals = match Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            return cli::runtime_error(NAME, format_args!("cannot set up signal handling: {e}"))
        }
    };
    let server = match Server::start(&cfg) {
        Ok(s) => s,
        Err(e) => return cli::runtime_error(NAME, format_args!("cannot start: {e}")),
    };
    let stop = server.stopper();
    let signal_thread = sandbox::start_signal_thread(signals, move |sig| {
        tracing::info!(signal = sig, "stopping");
        let _ = stop.send(Event::Stop);
    });
    if let Err(e) = signal_thread {
        return cli::runtime_error(NAME, format_args!("cannot start the signal thread: {e}"));
    }
    tracing::info!(
        sockname = %cfg.base,
        lid = cfg.port.lid,
        node_guid = format_args!("{:#018x}", cfg.port.node_guid),
        link = %cfg.link,
        "simport running"
    );
    sandbox::enter(Role::SimportMain);
    let port = server.run();
    tracing::info!(counts = ?port.counts(), "counters at exit");
    ExitCode::SUCCESS
}
