//! `ibtca-gateway`: an ATM gateway on an ibtca InfiniBand fabric (seed
//! 003, issue 24). See the crate documentation and `--help`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ibtca_agents::vl_config::{self, VlConfig};
use ibtca_cli as cli;
use ibtca_gateway::control;
use ibtca_gateway::gateway::GATEWAY_GUID_BASE;
use ibtca_gateway::map::VcMap;
use ibtca_gateway::service::{self, ServiceSl};
use ibtca_gateway::sma::SmaSettings;
use ibtca_gateway::vc_conn::QpSettings;
use ibtca_gateway::{Gateway, GatewayConfig};
use ibtca_link::LinkEndpoint;
use ibtca_sandbox::{self as sandbox, Role, SandboxArgs};
use ibtca_transport::config::ack_timeout_from_exponent;
use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
use signal_hook::iterator::Signals;

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-gateway";

/// An ATM gateway on an ibtca InfiniBand fabric.
///
/// One IB port (--link, the same framing and Hello as an ibtca-device,
/// with its own LID and GUID) and one ATM port (--atm: a Unix stream
/// socket of raw 53-byte cells back to back). --map names each ATM
/// virtual connection's AAL, service class and RC QP:
///
///   {"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
///             "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2, "remote_qpn": 16}}]}
///
/// An AAL5 frame (AAL1: `blocks` 47-byte blocks; AAL0: one cell's
/// payload) becomes one IB SEND on the VC's QP, and each message received
/// on the QP goes out as cells of the VC. QPs start at the map's `ib.sq_psn`
/// and `ib.rq_psn` (default 0);
/// the peer's path MTU must be --mtu. A VC without `remote_qpn` waits for
/// `remote-qpn VPI/VCI QPN` on the control socket.
///
///   ibtca-gateway --lid 10 --link connect:/tmp/sw-p3 --atm listen:/tmp/atm0 \
///       --map vcs.json --control /tmp/gw0.control
///
/// Counters are logged at exit (SIGTERM, SIGINT) and on SIGUSR1, and
/// answered by `stats` on the control socket. Logs go to stderr; set
/// RUST_LOG (e.g. RUST_LOG=debug) for more.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
struct Args {
    /// The IB port's link: listen:PATH or connect:PATH, or
    /// listen:tcp:HOST:PORT or connect:tcp:HOST:PORT.
    #[arg(long, value_name = "ENDPOINT")]
    link: LinkEndpoint,

    /// The ATM port's socket: listen:PATH or connect:PATH.
    #[arg(long, value_name = "ENDPOINT")]
    atm: LinkEndpoint,

    /// The VC map (JSON).
    #[arg(long, value_name = "FILE")]
    map: PathBuf,

    /// The IB port's LID (1-0xbfff).
    #[arg(long, default_value_t = 1, value_parser = cli::ids::lid)]
    lid: u16,

    /// Node GUID sent in the link's Hello (default: locally administered,
    /// 0x1200000000fd0000 + LID).
    #[arg(long, value_name = "GUID", value_parser = ibtca_agents::guid::parse)]
    node_guid: Option<u64>,

    /// SL of each service class: CLASS=SL,... (default cbr=1,rt-vbr=2,
    /// nrt-vbr=3,ubr=0).
    #[arg(long, value_name = "CLASS=SL,...", default_value = "")]
    service_sl: ServiceSl,

    /// SL → VL table of what the IB port sends: 16 VLs, SL0 first
    /// (default SL0..SL3 on VL0..VL3, the rest on VL0, SL15 on VL15).
    #[arg(long, value_name = "VL,VL,...", value_parser = vl_config::parse_sl2vl)]
    sl2vl: Option<[u8; 16]>,

    /// VL arbitration weights in 64-byte units per turn (the low-priority
    /// VLArbitrationTable until an SM sets one), VL0 first; their number is
    /// the port's data VLs (default 16,128,64,32: CBR's VL1 8 KiB per turn,
    /// rt-VBR's 4 KiB, nrt-VBR's 2 KiB, UBR's 1 KiB).
    #[arg(long, value_name = "W,W,...", value_parser = vl_config::parse_weights)]
    vl_weights: Option<Vec<u8>>,

    /// Path MTU of every QP: 256, 512, 1024, 2048 or 4096.
    #[arg(long, default_value_t = 4096)]
    mtu: u32,

    /// ACK timeout exponent: 4.096 µs × 2^N (0: none; default 14, 67 ms).
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u8).range(0..32))]
    timeout: u8,

    /// Transport retries before a QP fails (and restarts).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u8).range(0..8))]
    retry: u8,

    /// AAL5 reassembly timeout in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    reassembly_timeout_ms: u64,

    /// Cells each service class's queue toward the ATM port holds.
    #[arg(long, value_name = "CELLS", default_value_t = 8192)]
    queue_cells: usize,

    /// ATM messages a VC holds for its QP before dropping them.
    #[arg(long, value_name = "MESSAGES", default_value_t = 1024)]
    backlog: usize,

    /// Capture every cell in and out of the ATM port into a pcap file (ERF
    /// ATM records: interface 0 received, 1 sent) that tshark decodes.
    #[arg(long, value_name = "FILE")]
    capture: Option<PathBuf>,

    /// Serve a control socket at PATH (stats, remote-qpn VPI/VCI QPN).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,

    /// Log the counters every SECS seconds (0: at exit and on SIGUSR1).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    stats_interval: u64,

    /// Check the options and the map, print a summary and exit (status 2
    /// and the problems if any): `ibtca-fabric` runs this before it
    /// starts anything.
    #[arg(long)]
    check: bool,

    #[command(flatten)]
    sandbox: SandboxArgs,

    /// An SM brings the IB port up: it starts without a LID, Init on link
    /// up, and carries data only once the SM made it Active (the gateway's
    /// agent answers the SM like a device's).
    #[arg(long)]
    sm_managed: bool,

    /// NodeDescription the subnet manager reads.
    #[arg(long, value_name = "TEXT", default_value = ibtca_gateway::sma::DEFAULT_DESCRIPTION)]
    description: String,

    /// The IB link's shared ring per direction, in KiB (0: the socket).
    #[arg(long, value_name = "KIB", default_value_t = ibtca_link::SHARED_RING / 1024)]
    link_ring_kib: u64,
}

fn config(args: &Args) -> Result<GatewayConfig, String> {
    let text = std::fs::read_to_string(&args.map)
        .map_err(|e| format!("--map {}: {e}", args.map.display()))?;
    let map = VcMap::from_json(&text).map_err(|e| {
        let lines: Vec<String> = e.0.iter().map(|l| format!("  {l}")).collect();
        format!(
            "--map {}: refused:\n{}",
            args.map.display(),
            lines.join("\n")
        )
    })?;
    let vl = VlConfig {
        sl2vl: args.sl2vl.unwrap_or_else(service::default_sl2vl),
        weights: args
            .vl_weights
            .clone()
            .unwrap_or_else(service::default_vl_weights),
    };
    vl.validate()
        .map_err(|e| format!("--sl2vl/--vl-weights: {e}"))?;
    if !(256..=4096).contains(&args.mtu) || !args.mtu.is_power_of_two() {
        return Err(format!("--mtu {}: 256, 512, 1024, 2048 or 4096", args.mtu));
    }
    Ok(GatewayConfig {
        link: args.link.clone(),
        atm: args.atm.clone(),
        map,
        service_sl: args.service_sl,
        vl,
        node_guid: args
            .node_guid
            .unwrap_or(GATEWAY_GUID_BASE + u64::from(args.lid)),
        qp: QpSettings {
            lid: args.lid,
            mtu: args.mtu,
            ack_timeout: ack_timeout_from_exponent(args.timeout),
            retry_cnt: args.retry,
            backlog: args.backlog.max(1),
        },
        reassembly_timeout: Duration::from_millis(args.reassembly_timeout_ms),
        queue_cells: args.queue_cells,
        link_ring: args.link_ring_kib.saturating_mul(1024),
        capture: args.capture.clone(),
        sma: SmaSettings {
            description: args.description.clone(),
            managed: args.sm_managed,
        },
    })
}

fn aal_number(aal: ibtca_protocol::atm::Aal) -> u8 {
    match aal {
        ibtca_protocol::atm::Aal::Aal5 { .. } => 5,
        ibtca_protocol::atm::Aal::Aal1 { .. } => 1,
        ibtca_protocol::atm::Aal::Aal0 => 0,
    }
}

fn main() -> ExitCode {
    ibtca_log::logging::init("info");
    let args: Args = cli::parse(NAME);
    let cfg = match config(&args) {
        Ok(c) => c,
        Err(e) => return cli::usage_error(NAME, e),
    };
    if args.check {
        println!(
            "ok: LID {}, {} VCs ({})",
            cfg.qp.lid,
            cfg.map.vcs.iter().map(|v| v.vcs().count()).sum::<usize>(),
            cfg.map
                .vcs
                .iter()
                .map(|v| {
                    let vcs = if v.last == v.vc {
                        v.vc.to_string()
                    } else {
                        format!("{}..={}", v.vc, v.last)
                    };
                    format!("{vcs} AAL{} {}", aal_number(v.aal), v.service)
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::SUCCESS;
    }
    if let Err(e) = sandbox::enable(NAME, &args.sandbox) {
        return cli::runtime_error(NAME, format_args!("seccomp: {e}"));
    }
    let mut signals = match Signals::new([SIGTERM, SIGINT, SIGUSR1]) {
        Ok(s) => s,
        Err(e) => {
            return cli::runtime_error(NAME, format_args!("cannot set up signal handling: {e}"))
        }
    };
    let gw = match Gateway::start(&cfg) {
        Ok(g) => Arc::new(g),
        Err(e) => return cli::runtime_error(NAME, format_args!("cannot start: {e}")),
    };
    tracing::info!(
        lid = cfg.qp.lid,
        node_guid = format_args!("{:#018x}", cfg.node_guid),
        link = %cfg.link,
        atm = %cfg.atm,
        vcs = cfg.map.vcs.len(),
        "gateway running"
    );
    let control = match &args.control {
        Some(p) => match control::serve(gw.clone(), p) {
            Ok(c) => Some(c),
            Err(e) => return cli::runtime_error(NAME, format_args!("control socket: {e}")),
        },
        None => None,
    };
    if args.stats_interval > 0 {
        let gw = Arc::downgrade(&gw);
        let every = Duration::from_secs(args.stats_interval);
        let stats = std::thread::Builder::new()
            .name("ibtca-gw-stats".into())
            .spawn(move || {
                sandbox::enter(Role::GatewayStats);
                loop {
                    std::thread::sleep(every);
                    match gw.upgrade() {
                        Some(g) => tracing::info!(counters = %g.counters().to_json(), "counters"),
                        None => return,
                    }
                }
            });
        if let Err(e) = stats {
            tracing::error!("cannot start the stats thread: {e}");
            return ExitCode::FAILURE;
        }
    }
    sandbox::enter(Role::GatewayMain);
    for sig in signals.forever() {
        if sig == SIGUSR1 {
            tracing::info!(counters = %gw.counters().to_json(), "counters");
            continue;
        }
        tracing::info!(signal = sig, "stopping");
        break;
    }
    drop(control);
    let counters = match Arc::try_unwrap(gw) {
        Ok(g) => g.stop(),
        Err(g) => g.counters(),
    };
    tracing::info!(counters = %counters.to_json(), "counters at exit");
    ExitCode::SUCCESS
}
