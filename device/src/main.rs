//! `ibtca-device`: serves one ibtca device instance to a vfio-user client
//! (QEMU's `vfio-user-pci`) on a Unix socket.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ibtca_device::tca::Tca;
use ibtca_device::vfio_user::{Server, ServerConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// An InfiniBand TCA for QEMU guests, served over vfio-user.
///
/// Start it, then start QEMU with guest RAM shared and the device pointing at
/// the socket:
///
///   -object memory-backend-memfd,id=mem,size=1G,share=on
///   -machine q35,memory-backend=mem
///   -device '{"driver":"vfio-user-pci","socket":{"type":"unix","path":"PATH"}}'
///
/// When QEMU exits the server waits for the next QEMU; SIGTERM or SIGINT stops
/// it. Logs go to stderr; set RUST_LOG (e.g. RUST_LOG=debug) for more.
#[derive(Parser, Debug)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// Unix socket to listen on (a stale socket file is replaced).
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,

    /// Microseconds to poll for the next message before sleeping (0: never).
    #[arg(long, value_name = "US", default_value_t = 50)]
    spin_us: u64,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = ServerConfig {
        spin: Duration::from_micros(args.spin_us),
        ..Default::default()
    };
    let mut server = match Server::bind(&args.socket, config) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot listen on {}: {e}", args.socket.display());
            return ExitCode::FAILURE;
        }
    };
    let mut signals = match Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot set up signal handling: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = server.shutdown_handle();
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            tracing::info!(signal = sig, "stopping");
            stop.stop();
        }
    });
    let mut device = Tca::new();
    let result = server.serve(&mut device);
    let stats = server.stats();
    tracing::info!(
        connections = stats.connections,
        messages = stats.messages,
        errors = stats.errors,
        "server stopped"
    );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("server failed: {e}");
            ExitCode::FAILURE
        }
    }
}
