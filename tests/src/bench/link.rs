//! `ibtca-bench link`: raw 4 KiB packets through one `link::Link` pair in
//! this process (default configuration: Unix socket and shared-memory
//! rings), no device, no transport: what the link layer alone carries.
//! One sender thread queues packets, retrying while the send queue is full;
//! the receiving link's sink counts the bytes.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibtca_device::link::{Link, LinkEndpoint, LinkError, LinkEvent, LocalPort};
use ibtca_tests::TempDir;

/// Bytes per packet: a 4 KiB payload and headers.
const LEN: usize = 4096 + 64;
/// How long the run may take before it is given up.
const PATIENCE: Duration = Duration::from_secs(120);

fn port(n: u8) -> LocalPort {
    LocalPort {
        node_guid: 0x0002_c903_0000_0000 | u64::from(n),
        port: 1,
        lid: u16::from(n) * 0x10,
    }
}

/// Polls `cond` until it holds or [`PATIENCE`] has passed since `start`.
fn wait_until(start: Instant, mut cond: impl FnMut() -> bool) -> bool {
    while !cond() {
        if start.elapsed() > PATIENCE {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Sends `packets` packets of [`LEN`] bytes from one link to the other
/// and prints the rate.
pub(super) fn run(packets: u64) -> ExitCode {
    let dir = TempDir::new("bench-link");
    let path = dir.join("link.sock");
    let received = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&received);
    let started = |r: std::io::Result<Link>| {
        r.unwrap_or_else(|e| panic!("cannot start a link on {}: {e}", path.display()))
    };
    let a = started(Link::start(
        LinkEndpoint::Listen(path.clone()),
        port(1),
        move |ev| {
            if let LinkEvent::Packet(p) = ev {
                counter.fetch_add(p.len() as u64, Ordering::Relaxed);
            }
        },
    ));
    let b = started(Link::start(
        LinkEndpoint::Connect(path.clone()),
        port(2),
        |_| {},
    ));
    if !wait_until(Instant::now(), || a.is_up() && b.is_up()) {
        eprintln!("ibtca-bench link: the links did not come up");
        return ExitCode::FAILURE;
    }
    let t = Instant::now();
    for _ in 0..packets {
        loop {
            match b.send(vec![0x5a; LEN]) {
                Ok(()) => break,
                Err(LinkError::QueueFull) if t.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => {
                    eprintln!("ibtca-bench link: send: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    let total = packets * LEN as u64;
    if !wait_until(t, || received.load(Ordering::Relaxed) == total) {
        eprintln!(
            "ibtca-bench link: {} of {total} bytes arrived in {PATIENCE:?}",
            received.load(Ordering::Relaxed)
        );
        return ExitCode::FAILURE;
    }
    let secs = t.elapsed().as_secs_f64();
    let s = b.stats();
    println!(
        "link: {packets} packets of {LEN} B in {secs:.3} s: {:.2} GB/s, {:.0} kpps, \
         {:.1} packets/write, {} full retries",
        total as f64 / secs / 1e9,
        packets as f64 / secs / 1e3,
        s.tx_packets as f64 / s.tx_writes.max(1) as f64,
        s.tx_dropped_full,
    );
    ExitCode::SUCCESS
}
