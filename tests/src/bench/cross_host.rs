//! `ibtca-bench cross-host`: n1 — sw0 — n2 launched by `ibtca-fabric`,
//! the sw0—n2 link over TCP between two network namespaces (two "hosts"
//! joined by a veth pair, `up --host`) or over a Unix socket on one host,
//! with 0, 1 and 10 ms of delay on that link (the switch's delay line on
//! what sw0 sends to n2, `"delay_us"`, so both transports get the same
//! delay). Simulated guests measure 1 MiB RDMA WRITE throughput (16
//! outstanding) and the median 64 B WRITE round trip. Needs root (the
//! namespaces). Nothing is asserted.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use ibtca_device::verbs::abi::*;
use ibtca_tests::launcher::{up_json, Down, Up};
use ibtca_tests::netns::{is_root, TwoHosts};
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{remote, send_wqe};
use ibtca_tests::TempDir;

/// WRITE size of the throughput column.
const SIZE: u64 = 1 << 20;
/// WRITEs kept outstanding.
const DEPTH: usize = 16;
/// Target slots in the receiver's buffer.
const SLOTS: u64 = 4;
/// The delays measured, ms.
const DELAYS_MS: [u64; 3] = [0, 1, 10];

/// The topology: `hosts` (with each side's address) or none.
fn topology(delay_us: u64, hosts: Option<&TwoHosts>) -> String {
    let (hosts, a, b) = match hosts {
        Some(h) => (
            format!(
                r#""hosts": {{"a": {{"address": "{}"}}, "b": {{"address": "{}"}}}},"#,
                h.addr[0], h.addr[1]
            ),
            r#", "host": "a""#,
            r#", "host": "b""#,
        ),
        None => (String::new(), "", ""),
    };
    format!(
        r#"{{ {hosts}
  "nodes": [{{"name": "n1", "lid": 1{a}}}, {{"name": "n2", "lid": 2{b}}}],
  "switches": [{{"name": "sw0", "ports": 2{a}}}],
  "links": [{{"a": "n1", "b": "sw0:1"}}, {{"a": "sw0:2", "b": "n2", "delay_us": {delay_us}}}]
}}"#
    )
}

/// A guest of the device at `socket` with a buffer, a CQ and a QP.
fn side(socket: &Path) -> Side {
    let options = PairOptions {
        ram: 16 << 20,
        buf: 8 << 20,
        cq_log: 8,
        qp_log: 5,
        ..PairOptions::default()
    };
    Side::new(socket, &options, ALL_ACCESS)
}

fn write(a: &Side, b: &Side, size: u64, wr_id: u64) -> SendWqe {
    let slot = (wr_id % SLOTS) * SIZE;
    remote(
        send_wqe(WR_RDMA_WRITE, wr_id, a.buf, size as u32, a.lkey),
        b.buf + slot,
        b.rkey,
    )
}

/// MB/s of `SIZE` WRITEs from `a` to `b`, `DEPTH` outstanding, for
/// `secs` after a warm-up of a tenth of that.
fn throughput(a: &mut Side, b: &Side, secs: f64) -> f64 {
    let warm = Instant::now() + Duration::from_secs_f64(secs / 10.0);
    let (mut t0, mut done_at_t0) = (None, 0u64);
    let (mut outstanding, mut posted, mut done) = (0usize, 0u64, 0u64);
    let mut cqes = Vec::with_capacity(64);
    loop {
        let now = Instant::now();
        if t0.is_none() && now >= warm {
            (t0, done_at_t0) = (Some(now), done);
        }
        if t0.is_some_and(|t: Instant| now.duration_since(t).as_secs_f64() >= secs) {
            break;
        }
        let wqes: Vec<_> = (outstanding..DEPTH)
            .map(|_| {
                posted += 1;
                write(a, b, SIZE, posted)
            })
            .collect();
        outstanding += wqes.len();
        a.g.post_send_batch(&mut a.qp, &wqes);
        cqes.clear();
        let n = a.g.poll_cq_batch(&mut a.cq, 64, &mut cqes);
        assert!(cqes.iter().all(|c| c.status == WC_SUCCESS), "{cqes:?}");
        if n == 0 {
            a.g.arm_cq(&a.cq);
            a.g.wait_cq_irq(Duration::from_millis(100));
        }
        (outstanding, done) = (outstanding - n, done + n as u64);
    }
    let secs = t0.map_or(secs, |t| t.elapsed().as_secs_f64());
    let bytes = (done - done_at_t0) * SIZE;
    while outstanding > 0 {
        let c =
            a.g.poll_cq(&mut a.cq, Duration::from_secs(30))
                .expect("drain");
        assert_eq!(c.status, WC_SUCCESS);
        outstanding -= 1;
    }
    bytes as f64 / secs / 1e6
}

/// Median µs of a 64 B WRITE posted alone until it completes, over
/// `secs` (at least 10 WRITEs).
fn round_trip_us(a: &mut Side, b: &Side, secs: f64) -> f64 {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut times = Vec::new();
    while times.len() < 10 || Instant::now() < end {
        let t = Instant::now();
        let w = write(a, b, 64, times.len() as u64);
        a.g.post_send(&mut a.qp, &w);
        let c =
            a.g.poll_cq(&mut a.cq, Duration::from_secs(30))
                .expect("write");
        assert_eq!(c.status, WC_SUCCESS);
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// Runs both measurements on the fabric whose n1 and n2 serve at
/// `sockets`.
fn measure(sockets: [PathBuf; 2], secs: f64) -> (f64, f64) {
    let mut a = side(&sockets[0]);
    let mut b = side(&sockets[1]);
    a.g.connect(&a.qp, 2, b.qp.qpn, MTU_4096, ALL_ACCESS);
    b.g.connect(&b.qp, 1, a.qp.qpn, MTU_4096, ALL_ACCESS);
    let lat = round_trip_us(&mut a, &b, secs / 2.0);
    (throughput(&mut a, &b, secs), lat)
}

/// One row: the pair over a Unix link or a TCP link between namespaces.
fn row(delay_ms: u64, tcp: bool, secs: f64) -> (f64, f64) {
    let dir = TempDir::new("bench-cross-host");
    let json = |hosts| topology(delay_ms * 1000, hosts);
    if !tcp {
        let up: Up = up_json(&json(None), &dir);
        return measure([up.run.join("n1.sock"), up.run.join("n2.sock")], secs);
    }
    let hosts = TwoHosts::new("ibb", 202);
    let file = dir.join("topology.json");
    std::fs::write(&file, json(Some(&hosts))).expect("write the topology");
    let runs = [dir.join("run-a"), dir.join("run-b")];
    let _down: [Down; 2] = hosts.up_fabric(&file, &runs);
    measure([runs[0].join("n1.sock"), runs[1].join("n2.sock")], secs)
}

pub(super) fn run(secs: f64) -> ExitCode {
    if !is_root() {
        eprintln!("ibtca-bench cross-host makes network namespaces: run it as root");
        return ExitCode::FAILURE;
    }
    println!(
        "n1 - sw0 - n2, the sw0-n2 link delayed; 1 MiB RDMA WRITE x{DEPTH}, 64 B WRITE round trip"
    );
    println!(
        "{:>8}  {:>6}  {:>12}  {:>14}",
        "delay", "link", "MB/s", "64 B RTT µs"
    );
    for delay in DELAYS_MS {
        for tcp in [false, true] {
            let (mbs, rtt) = row(delay, tcp, secs);
            let link = if tcp { "tcp" } else { "unix" };
            println!("{delay:>6}ms  {link:>6}  {mbs:>12.0}  {rtt:>14.0}");
        }
    }
    ExitCode::SUCCESS
}
