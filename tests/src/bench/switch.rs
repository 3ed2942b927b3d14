//! `ibtca-bench switch`: RDMA WRITE through in-process switches
//! (`ibtca_tests::fabric`), no VM: aggregate throughput of 1, 2 and 4
//! pairs through one switch, and the latency a switch hop adds, next to the
//! raw Unix-socket baseline of the same run.

use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use ibtca_device::verbs::abi::*;
use ibtca_tests::fabric::{Attach, Fabric, FabricOptions, Node};
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{remote, send_wqe, Cq, Qp, SimGuest};

use super::{fmt_rate, fmt_us, median_ns, print_grid, raw_pingpong, raw_stream};

/// RDMA WRITE size of the throughput rows.
const SIZE: u64 = 64 << 10;
/// Outstanding WRITEs per pair.
const DEPTH: usize = 32;
/// Completions taken per poll.
const BATCH: usize = 64;

fn options() -> FabricOptions {
    FabricOptions {
        ram: 16 << 20,
        buf: 4 << 20,
        cq_log: 10,
        qp_log: 6,
        spin: true,
        mtu: MTU_4096,
        all_to_all: false,
        ..FabricOptions::default()
    }
}

/// The sending side of one pair: guest, QP, CQ and source buffer.
struct Sender<'a> {
    g: &'a mut SimGuest,
    qp: &'a mut Qp,
    cq: &'a mut Cq,
    buf: u64,
    lkey: u32,
}

/// Keeps `DEPTH` WRITEs of `SIZE` from `a` to `(dst, rkey)` outstanding for
/// `secs`; returns the WRITEs completed.
fn drive(a: &mut Sender<'_>, dst: u64, rkey: u32, secs: f64) -> u64 {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let slots = (1 << 20) / SIZE;
    let (mut outstanding, mut posted, mut done) = (0usize, 0u64, 0u64);
    let mut cqes = Vec::with_capacity(BATCH);
    let mut wqes = Vec::with_capacity(DEPTH);
    while Instant::now() < end {
        wqes.clear();
        while outstanding + wqes.len() < DEPTH {
            let off = (posted % slots) * SIZE;
            wqes.push(remote(
                send_wqe(WR_RDMA_WRITE, posted, a.buf + off, SIZE as u32, a.lkey),
                dst + off,
                rkey,
            ));
            posted += 1;
        }
        outstanding += wqes.len();
        a.g.post_send_batch(a.qp, &wqes);
        cqes.clear();
        let n = a.g.poll_cq_batch(a.cq, BATCH, &mut cqes);
        for c in &cqes {
            assert_eq!(c.status, WC_SUCCESS, "{c:?}");
        }
        if n == 0 {
            std::thread::yield_now();
        }
        outstanding -= n;
        done += n as u64;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while outstanding > 0 && Instant::now() < deadline {
        cqes.clear();
        outstanding -= a.g.poll_cq_batch(a.cq, BATCH, &mut cqes);
        std::thread::yield_now();
    }
    done
}

/// Warm-up then a timed run; MiB/s and the timed seconds.
fn timed(a: &mut Sender<'_>, dst: u64, rkey: u32, secs: f64) -> (u64, f64) {
    drive(a, dst, rkey, secs / 10.0);
    let t = Instant::now();
    let n = drive(a, dst, rkey, secs);
    (n * SIZE, t.elapsed().as_secs_f64())
}

/// One pair on a direct link (no switch), for reference; MiB/s.
fn direct(secs: f64) -> f64 {
    let mut p = LinkedPair::start(PairOptions {
        spin: true,
        ..Default::default()
    });
    p.connect(MTU_4096);
    let (dst, rkey) = (p.b.buf, p.b.rkey);
    let a = &mut p.a;
    let mut s = Sender {
        g: &mut a.g,
        qp: &mut a.qp,
        cq: &mut a.cq,
        buf: a.buf,
        lkey: a.lkey,
    };
    let (bytes, t) = timed(&mut s, dst, rkey, secs);
    bytes as f64 / t / f64::from(1u32 << 20)
}

/// `pairs` senders (nodes `0..pairs`) writing to receivers (`pairs..`)
/// through one switch, each sender on its own thread; MiB/s in total.
fn aggregate(pairs: usize, secs: f64) -> f64 {
    let mut f = Fabric::star(2 * pairs, options());
    for i in 0..pairs {
        f.connect(i, pairs + i, MTU_4096);
    }
    let targets: Vec<(u16, u64, u32)> = f.nodes[pairs..]
        .iter()
        .map(|n| (n.lid, n.buf, n.rkey))
        .collect();
    let senders: Vec<Node> = f.nodes.drain(..pairs).collect();
    let barrier = Arc::new(Barrier::new(pairs));
    let threads: Vec<_> = senders
        .into_iter()
        .zip(targets)
        .map(|(mut a, (peer, dst, rkey))| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let (buf, lkey) = (a.buf, a.lkey);
                let mut qp = a.qps[&peer];
                let mut s = Sender {
                    g: &mut a.g,
                    qp: &mut qp,
                    cq: &mut a.cq,
                    buf,
                    lkey,
                };
                let (bytes, t) = timed(&mut s, dst, rkey, secs);
                (bytes, t, a)
            })
        })
        .collect();
    let mut bytes = 0u64;
    let mut longest = 0f64;
    for t in threads {
        let (n, s, node) = t.join().expect("sender thread");
        bytes += n;
        longest = longest.max(s);
        f.nodes.push(node);
    }
    let drops: u64 = f.switches[0].all_stats().iter().map(|s| s.drops()).sum();
    if drops > 0 {
        eprintln!("[bench]   switch dropped {drops} packets (RC retransmitted them)");
    }
    bytes as f64 / longest / f64::from(1u32 << 20)
}

/// Median round trip of a 64 B RDMA WRITE (request out, ACK back, CQE), µs.
#[allow(clippy::too_many_arguments)]
fn write_rtt(
    g: &mut SimGuest,
    qp: &mut Qp,
    cq: &mut Cq,
    src: u64,
    lkey: u32,
    dst: u64,
    rkey: u32,
    secs: f64,
) -> f64 {
    let mut samples = Vec::new();
    let warm = Instant::now() + Duration::from_secs_f64(secs / 10.0);
    let end = warm + Duration::from_secs_f64(secs);
    let mut i = 0u64;
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        g.post_send_batch(
            qp,
            &[remote(send_wqe(WR_RDMA_WRITE, i, src, 64, lkey), dst, rkey)],
        );
        let c = loop {
            if let Some(c) = g.try_poll_cq(cq) {
                break c;
            }
            // Two CPUs for guests, devices and switches: let them run.
            std::thread::yield_now();
        };
        assert_eq!(c.status, WC_SUCCESS, "{c:?}");
        if t >= warm {
            samples.push(t.elapsed().as_nanos() as u64);
        }
        i += 1;
    }
    median_ns(samples) / 1000.0
}

fn rtt_direct(secs: f64) -> f64 {
    let mut p = LinkedPair::start(PairOptions {
        spin: true,
        ..Default::default()
    });
    p.connect(MTU_4096);
    let (dst, rkey) = (p.b.buf, p.b.rkey);
    let a = &mut p.a;
    write_rtt(
        &mut a.g, &mut a.qp, &mut a.cq, a.buf, a.lkey, dst, rkey, secs,
    )
}

fn rtt_fabric(mut f: Fabric, secs: f64) -> f64 {
    f.connect(0, 1, MTU_4096);
    let (peer, dst, rkey) = (f.nodes[1].lid, f.nodes[1].buf, f.nodes[1].rkey);
    let a = &mut f.nodes[0];
    let mut qp = a.qps[&peer];
    write_rtt(&mut a.g, &mut qp, &mut a.cq, a.buf, a.lkey, dst, rkey, secs)
}

/// Runs the switch benchmark and prints its table.
pub fn run(secs: f64) -> ExitCode {
    let mut rows: Vec<Vec<String>> = Vec::new();
    eprintln!("[bench] raw socket stream, 64 KiB writes, {secs} s");
    let stream = raw_stream(64 << 10, secs).mib_per_s();
    eprintln!("[bench] raw socket ping-pong, 64 B, {secs} s");
    let raw_rtt = 2.0 * raw_pingpong(64, secs).median_us;
    rows.push(vec![
        "raw socket stream".into(),
        "64 KiB".into(),
        fmt_rate(stream),
        "-".into(),
        "1.00".into(),
    ]);
    eprintln!("[bench] RDMA WRITE on a direct link, 1 pair, {secs} s");
    let d = direct(secs);
    rows.push(vec![
        format!("RDMA WRITE (QD {DEPTH}), 1 pair, direct link"),
        "64 KiB".into(),
        fmt_rate(d),
        "-".into(),
        format!("{:.2}", d / stream),
    ]);
    for pairs in [1usize, 2, 4] {
        eprintln!("[bench] RDMA WRITE through one switch, {pairs} pair(s), {secs} s");
        let mib = aggregate(pairs, secs);
        eprintln!("[bench]   {mib:.1} MiB/s");
        rows.push(vec![
            format!("RDMA WRITE (QD {DEPTH}), {pairs} pair(s), 1 switch"),
            "64 KiB".into(),
            fmt_rate(mib),
            "-".into(),
            format!("{:.2}", mib / stream),
        ]);
    }
    rows.push(vec![
        "raw socket round trip".into(),
        "64 B".into(),
        "-".into(),
        fmt_us(raw_rtt),
        "1.00".into(),
    ]);
    eprintln!("[bench] 64 B RDMA WRITE round trip: direct, 1 switch, 2 switches");
    let direct = rtt_direct(secs);
    let one = rtt_fabric(Fabric::star(2, options()), secs);
    let two = rtt_fabric(
        Fabric::build(
            2,
            &[
                vec![Attach::Node(0), Attach::Switch { switch: 1, port: 2 }],
                vec![Attach::Node(1), Attach::Switch { switch: 0, port: 2 }],
            ],
            &[vec![(2, 2)], vec![(1, 2)]],
            options(),
        ),
        secs,
    );
    for (what, v) in [
        ("RDMA WRITE round trip, direct link", direct),
        ("RDMA WRITE round trip, 1 switch", one),
        ("RDMA WRITE round trip, 2 switches", two),
    ] {
        rows.push(vec![
            what.into(),
            "64 B".into(),
            "-".into(),
            fmt_us(v),
            format!("{:.2}", v / raw_rtt),
        ]);
    }
    let hop1 = (one - direct) / 2.0;
    let hop2 = (two - one) / 2.0;
    rows.push(vec![
        "per switch hop, one way (1 switch − direct) / 2".into(),
        "64 B".into(),
        "-".into(),
        fmt_us(hop1),
        "-".into(),
    ]);
    rows.push(vec![
        "per switch hop, one way (2 switches − 1) / 2".into(),
        "64 B".into(),
        "-".into(),
        fmt_us(hop2),
        "-".into(),
    ]);
    println!();
    println!(
        "ibtca-bench switch: device instances and switches in this process, each device \
         driven through vfio-user by a simulated guest that busy-polls its CQ; \
         {secs} s per row, path MTU 4096. Throughput is the sum over the pairs; \
         × baseline is over the raw 64 KiB socket stream or the raw 64 B socket round trip."
    );
    println!();
    print_grid(
        &["measurement", "size", "MiB/s", "µs", "× baseline"],
        &rows,
        &[2, 3, 4],
    );
    ExitCode::SUCCESS
}
