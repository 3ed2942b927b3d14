//! `ibtca-bench drdma`: Direct RDMA WRITE bandwidth through the trapped and
//! the mapped window, next to memcpy bandwidth and an ordinary RDMA WRITE
//! from guest memory, all measured in one run.
//!
//! Two device instances in this process, joined by a link, each driven by a
//! simulated guest over vfio-user (as in `verbs`). Each row keeps all 32
//! ranges busy: each range carries a WR_DRDMA_WRITE of 4 KiB to its own
//! 4 KiB of B's buffer, and the guest fills it:
//!
//! - trapped: 512 posted 8-byte stores, one vfio-user message each — what
//!   QEMU sends for a guest's `writeq` loop or `memcpy_toio` into a trapped
//!   BAR;
//! - mapped: a 4 KiB memcpy into each mmapped PMB page, with one
//!   DRDMA_SUBMIT_MASK before and one DRDMA_COMMIT_MASK after for all 32
//!   ranges, both non-posted writes (QEMU stops posting BAR writes once a
//!   region is mmappable), and one SQ doorbell for the 32 work requests.
//!
//! It then waits for the completions and starts the next round. Bandwidth
//! is payload bytes acknowledged by B per second. "fill only" rows time the
//! guest side alone (stores + commit), which is what the window costs the
//! bus; the end-to-end rows include the link and B's ACK.
//!
//! A second table (`drdma_vs_wqe.rs`) sets DRDMA WRITE and READ through the
//! mapped window against ordinary RDMA WRITE and READ work requests of
//! 64 B to 4 KiB.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ibtca_device::drdma::DrdmaConfig;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::{self as d, direct_wqe};
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{remote, send_wqe};
use vm_memory::{Bytes, GuestAddress};

const RANGES: u32 = 32;
const SIZE: usize = 4096;
/// Target for the mapped path (issue): ≥ 50 % of memcpy.
const TARGET_MAPPED: f64 = 0.50;

/// A and B with DRDMA windows (`mapped` or trapped), QPs connected at
/// path MTU 4096.
pub(super) fn pair(mapped: bool) -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions {
        ram: 16 << 20,
        buf: 1 << 20,
        cq_log: 8,
        qp_log: 7,
        spin: true,
        drdma: DrdmaConfig {
            mapped,
            ..Default::default()
        },
        ..Default::default()
    });
    p.connect(MTU_4096);
    p
}

/// Takes `n` completions on A's CQ, each successful.
pub(super) fn successes(p: &mut LinkedPair, n: u32) {
    for _ in 0..n {
        let c =
            p.a.g
                .poll_cq_spin(&mut p.a.cq, Duration::from_secs(20))
                .expect("completion");
        assert_eq!(c.status, WC_SUCCESS, "DRDMA bench: completion {c:?}");
    }
}

/// memcpy of 4 KiB blocks over a 1 MiB working set: bytes per second.
fn memcpy_rate(secs: f64) -> f64 {
    let src: Vec<u8> = (0..1 << 20).map(|i| i as u8).collect();
    let mut dst = vec![0u8; 1 << 20];
    let start = Instant::now();
    let mut bytes = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        for off in (0..src.len()).step_by(SIZE) {
            dst[off..off + SIZE].copy_from_slice(&src[off..off + SIZE]);
        }
        std::hint::black_box(&mut dst);
        bytes += src.len() as u64;
    }
    bytes as f64 / start.elapsed().as_secs_f64()
}

#[derive(Clone, Copy, PartialEq)]
enum Path {
    Trapped,
    Mapped,
    /// Ordinary RDMA WRITE from registered guest memory.
    Memory,
}

struct Result {
    /// End-to-end bytes per second.
    e2e: f64,
    /// Guest-side fill bytes per second (stores + commit only).
    fill: f64,
}

fn run_path(path: Path, secs: f64) -> Result {
    let mut p = pair(path == Path::Mapped);
    let window = match path {
        Path::Mapped => Some(d::map_window(&mut p.a.g).expect("mapped window")),
        _ => None,
    };
    let data: Vec<u8> = (0..SIZE).map(|i| (i * 7) as u8).collect();
    p.a.g.write(p.a.buf, &data);
    let words: Vec<[u8; 8]> = data
        .chunks(8)
        .map(|c| c.try_into().expect("8 bytes"))
        .collect();
    let start = Instant::now();
    let mut fill_time = Duration::ZERO;
    let mut bytes = 0u64;
    let mut rounds = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let t0 = Instant::now();
        let wqes: Vec<_> = (0..RANGES)
            .map(|arr| {
                let raddr = p.b.buf + u64::from(arr) * SIZE as u64;
                let id = u64::from(arr);
                match path {
                    Path::Memory => remote(
                        send_wqe(WR_RDMA_WRITE, id, p.a.buf, SIZE as u32, p.a.lkey),
                        raddr,
                        p.b.rkey,
                    ),
                    _ => direct_wqe(WR_DRDMA_WRITE, id, arr, SIZE as u32, raddr, p.b.rkey),
                }
            })
            .collect();
        match path {
            Path::Memory => p.a.g.post_send_batch(&mut p.a.qp, &wqes),
            Path::Trapped => {
                // Per range, as a driver for the trapped window does it:
                // submit, post, then 512 posted 8-byte stores.
                for (arr, w) in (0..RANGES).zip(&wqes) {
                    d::submit(&mut p.a.g, arr, true, SIZE as u32, None);
                    p.a.g.post_send(&mut p.a.qp, w);
                    for (i, word) in words.iter().enumerate() {
                        let at = d::addr(arr, i as u64 * 8);
                        p.a.g.client.post_write(d::WINDOW, at, word);
                    }
                }
            }
            Path::Mapped => {
                // Every BAR0 write is synchronous here (QEMU stops posting
                // once a region is mmappable): one submit for all ranges,
                // one doorbell, the stores into the mapping, one commit.
                let all = u32::MAX >> (32 - RANGES);
                d::submit_mask(&mut p.a.g, 0, all, true, SIZE as u32, false);
                p.a.g.post_send_batch(&mut p.a.qp, &wqes);
                let win = window.as_ref().expect("mapped");
                for arr in 0..RANGES {
                    let at = GuestAddress(u64::from(arr) * SIZE as u64);
                    win.write_slice(&data, at).expect("window store");
                }
                d::commit_mask(&mut p.a.g, 0, all, false);
            }
        }
        fill_time += t0.elapsed();
        successes(&mut p, RANGES);
        bytes += u64::from(RANGES) * SIZE as u64;
        rounds += 1;
    }
    let e2e = bytes as f64 / start.elapsed().as_secs_f64();
    let fill = if path == Path::Memory {
        0.0
    } else {
        bytes as f64 / fill_time.as_secs_f64()
    };
    let got =
        p.b.g
            .read(p.b.buf + u64::from(RANGES - 1) * SIZE as u64, SIZE);
    assert_eq!(got, data, "DRDMA bench: bytes in B after {rounds} rounds");
    Result { e2e, fill }
}

fn mib(v: f64) -> String {
    format!("{:.1}", v / (1024.0 * 1024.0))
}

/// Runs the DRDMA rows and prints one table.
pub fn run(secs: f64) -> ExitCode {
    eprintln!("[bench] memcpy 4 KiB blocks, {secs} s");
    let memcpy = memcpy_rate(secs);
    let mut rows = vec![vec![
        "memcpy".to_string(),
        "4 KiB".into(),
        mib(memcpy),
        "1.000".into(),
        "-".into(),
        "-".into(),
    ]];
    for (name, path) in [
        ("RDMA WRITE from memory", Path::Memory),
        ("DRDMA WRITE trapped", Path::Trapped),
        ("DRDMA WRITE mapped", Path::Mapped),
    ] {
        eprintln!("[bench] {name}, {RANGES} ranges in flight, {secs} s");
        let r = run_path(path, secs);
        let target = (path == Path::Mapped).then_some(TARGET_MAPPED);
        rows.push(vec![
            format!("{name} (end to end)"),
            "4 KiB".into(),
            mib(r.e2e),
            format!("{:.3}", r.e2e / memcpy),
            target.map_or("-".into(), |t| format!("≥ {t:.2}")),
            target.map_or("-".into(), |t| super::pass_miss(r.e2e / memcpy >= t)),
        ]);
        if path != Path::Memory {
            rows.push(vec![
                format!("{name} (fill only)"),
                "4 KiB".into(),
                mib(r.fill),
                format!("{:.3}", r.fill / memcpy),
                "-".into(),
                "-".into(),
            ]);
        }
    }
    super::print_grid(
        &[
            "measurement",
            "size",
            "MiB/s",
            "× memcpy",
            "target",
            "result",
        ],
        &rows,
        &[2, 3],
    );
    ExitCode::SUCCESS
}
