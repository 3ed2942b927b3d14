//! `ibtca-mgmt-hub`: the guests' management wire, a learning Ethernet
//! switch on one Unix socket for QEMU's stream netdevs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ibtca_fabric::mgmt_hub::Hub;

/// Joins the virtio-net NICs of any number of QEMU guests into one
/// Ethernet segment, the fabric's management wire. Each guest connects
/// with
///
///   -netdev stream,id=mgmt,server=off,addr.type=unix,addr.path=SOCKET
///   -device virtio-net-pci,netdev=mgmt,mac=52:54:00:...
///
/// Frames carry QEMU's stream framing (a 4-byte big-endian length before
/// each). The hub learns source MACs and floods broadcast, multicast and
/// unknown destinations. A client sending a length above 69632 bytes is
/// disconnected; one that stops reading loses frames past 1 MiB queued.
/// `ibtca-fabric up --guests` starts it as `mgmt-hub` (log: mgmt-hub.log).
/// SIGTERM stops it. Set RUST_LOG=debug for more.
#[derive(Parser, Debug)]
#[command(version, about, long_about, verbatim_doc_comment)]
struct Args {
    /// The Unix socket to listen on.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
}

fn main() -> ExitCode {
    ibtca_device::logging::init("info");
    let args = Args::parse();
    let mut hub = match Hub::bind(&args.socket) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("ibtca-mgmt-hub: {}: {e}", args.socket.display());
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(socket = %args.socket.display(), "management hub listening");
    match hub.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ibtca-mgmt-hub: {e}");
            ExitCode::FAILURE
        }
    }
}
