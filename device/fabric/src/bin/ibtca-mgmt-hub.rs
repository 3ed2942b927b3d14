//! `ibtca-mgmt-hub`: the guests' management wire, a learning Ethernet
//! switch on one Unix socket for QEMU's stream netdevs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ibtca_cli as cli;
use ibtca_fabric::mgmt_hub::Hub;

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-mgmt-hub";

/// The guests' management wire: a learning Ethernet switch on a Unix socket.
///
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
#[command(version, long_about, verbatim_doc_comment)]
struct Args {
    /// The Unix socket to listen on.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,
}

fn main() -> ExitCode {
    ibtca_log::logging::init("info");
    let args: Args = cli::parse(NAME);
    let mut hub = match Hub::bind(&args.socket) {
        Ok(h) => h,
        Err(e) => return cli::runtime_error(NAME, e),
    };
    tracing::info!(socket = %args.socket.display(), "management hub listening");
    match hub.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => cli::runtime_error(NAME, e),
    }
}
