//! `ibtca-gateway-bench`: cells per second and AAL5 frames per second
//! through two `ibtca-gateway`s joined by one IB link (in this process,
//! each with its threads), against the raw Unix-socket rate of the same
//! cells measured in the same run; and the delay of CBR cells through the
//! two gateways, idle and beside a saturated UBR connection.
//!
//!   ibtca-gateway-bench [--frames N] [--seconds S]
//!
//! The source keeps a window of frames in flight (it sends a frame only
//! while fewer than the window have reached the sink), because ATM has no
//! flow control toward the gateway: past its backlog the gateway drops.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use ibtca_agents::vl_config::VlConfig;
use ibtca_gateway::map::VcMap;
use ibtca_gateway::service::{default_sl2vl, default_vl_weights, ServiceSl};
use ibtca_gateway::vc_conn::QpSettings;
use ibtca_gateway::{Gateway, GatewayConfig};
use ibtca_link::LinkEndpoint;
use ibtca_protocol::atm::aal5;
use ibtca_protocol::atm::cell::PTI_AUU;
use ibtca_protocol::atm::{Cell, CellHeader, Vc, CELL_LEN};

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-gateway-bench";

/// Throughput and delay of the ATM gateway.
#[derive(Parser, Debug)]
#[command(version, long_about)]
struct Args {
    /// Frames per throughput row (at most; a row also stops after
    /// --seconds).
    #[arg(long, default_value_t = 20_000)]
    frames: u64,
    /// Longest a throughput row runs.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Frames in flight from the source.
    #[arg(long, default_value_t = 256)]
    window: u64,
    /// CBR cells per delay row, one every 2 ms.
    #[arg(long, default_value_t = 500)]
    samples: usize,
}

const UBR: Vc = Vc { vpi: 0, vci: 32 };
const CBR: Vc = Vc { vpi: 0, vci: 33 };

fn map(peer_lid: u16, local: u32, remote: u32) -> VcMap {
    VcMap::from_json(&format!(
        r#"{{"vcs": [
        {{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
          "ib": {{"qp": "rc", "local_qpn": {local}, "remote_lid": {peer_lid}, "remote_qpn": {remote}}}}},
        {{"vpi": 0, "vci": 33, "aal": 0, "service": "cbr",
          "ib": {{"qp": "rc", "local_qpn": {}, "remote_lid": {peer_lid}, "remote_qpn": {}}}}}]}}"#,
        local + 1,
        remote + 1
    ))
    .expect("the bench's map is good")
}

fn gateway(
    lid: u16,
    peer: u16,
    local: u32,
    remote: u32,
    link: LinkEndpoint,
    atm: &Path,
) -> Gateway {
    Gateway::start(&GatewayConfig {
        link,
        atm: LinkEndpoint::Listen(atm.to_path_buf()),
        map: map(peer, local, remote),
        service_sl: ServiceSl::default(),
        vl: VlConfig {
            sl2vl: default_sl2vl(),
            weights: default_vl_weights(),
        },
        node_guid: 0x1200_0000_00fd_0000 + u64::from(lid),
        qp: QpSettings {
            lid,
            mtu: 4096,
            ack_timeout: Some(Duration::from_millis(67)),
            retry_cnt: 7,
            backlog: 1024,
        },
        reassembly_timeout: Duration::from_secs(1),
        queue_cells: 1 << 16,
        link_ring: ibtca_link::SHARED_RING,
        capture: None,
        sma: Default::default(),
    })
    .unwrap_or_else(|e| panic!("gateway LID {lid}: {e}"))
}

fn connect(p: &Path) -> UnixStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UnixStream::connect(p) {
            Ok(s) => return s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => panic!("{}: {e}", p.display()),
        }
    }
}

/// What the sink has seen.
#[derive(Default)]
struct SinkState {
    frames: AtomicU64,
    cells: AtomicU64,
}

/// Reads B's ATM side: counts UBR frames and cells, sends each CBR
/// cell's delay (its payload starts with the nanoseconds since `base`
/// when it was sent).
fn sink(mut s: UnixStream, state: Arc<SinkState>, delays: mpsc::Sender<Duration>, base: Instant) {
    let mut buf = vec![0u8; CELL_LEN * 1024];
    let mut have = 0;
    loop {
        match s.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
        let whole = have - have % CELL_LEN;
        for c in buf[..whole].chunks_exact(CELL_LEN) {
            let Some(cell) = Cell::from_slice(c) else {
                continue;
            };
            let h = cell.header();
            if h.vc() == CBR {
                let sent = u64::from_le_bytes(cell.payload()[..8].try_into().unwrap_or_default());
                let now = base.elapsed().as_nanos() as u64;
                let _ = delays.send(Duration::from_nanos(now.saturating_sub(sent)));
            } else {
                state.cells.fetch_add(1, Ordering::Relaxed);
                if h.pti & PTI_AUU != 0 {
                    state.frames.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        buf.copy_within(whole..have, 0);
        have -= whole;
    }
}

/// The raw rate: `cells` written through a socket pair and read back.
fn raw_rate(bytes: &[u8], total_cells: u64) -> f64 {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let n = total_cells;
    let per = (bytes.len() / CELL_LEN) as u64;
    let start = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0u64;
        while got < n * CELL_LEN as u64 {
            match b.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => got += k as u64,
            }
        }
    });
    let mut sent = 0;
    while sent < n {
        a.write_all(bytes).expect("raw write");
        sent += per;
    }
    let _ = reader.join();
    sent as f64 / start.elapsed().as_secs_f64()
}

struct Row {
    what: String,
    frames: u64,
    cells: u64,
    secs: f64,
    raw_cells_per_sec: f64,
}

/// Frames of `len` bytes through the two gateways for at most `frames`
/// or `limit`.
fn through(
    src: &Mutex<UnixStream>,
    state: &SinkState,
    len: usize,
    frames: u64,
    window: u64,
    limit: Duration,
) -> Row {
    let frame: Vec<u8> = (0..len).map(|i| i as u8).collect();
    let mut cells = Vec::new();
    aal5::segment(UBR, &frame, 0, &mut cells).expect("segments");
    let bytes: Vec<u8> = cells.iter().flat_map(|c| c.bytes).collect();
    let (f0, c0) = (
        state.frames.load(Ordering::Relaxed),
        state.cells.load(Ordering::Relaxed),
    );
    let start = Instant::now();
    let mut sent = 0;
    while sent < frames && start.elapsed() < limit {
        if sent - (state.frames.load(Ordering::Relaxed) - f0) >= window {
            std::thread::yield_now();
            continue;
        }
        src.lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(&bytes)
            .expect("source write");
        sent += 1;
    }
    while state.frames.load(Ordering::Relaxed) - f0 < sent {
        assert!(
            start.elapsed() < limit + Duration::from_secs(30),
            "frames lost in the gateways"
        );
        std::thread::yield_now();
    }
    let secs = start.elapsed().as_secs_f64();
    let raw = raw_rate(&bytes, (sent * cells.len() as u64).max(1));
    Row {
        what: format!("AAL5 {len} B"),
        frames: sent,
        cells: state.cells.load(Ordering::Relaxed) - c0,
        secs,
        raw_cells_per_sec: raw,
    }
}

/// CBR cells (AAL0, one every 2 ms) with and without a saturated UBR
/// connection beside them: (p50, p99, max) of their delay.
fn cbr_delays(
    src: &Arc<Mutex<UnixStream>>,
    state: &Arc<SinkState>,
    delays: &mpsc::Receiver<Duration>,
    base: Instant,
    samples: usize,
    ubr_load: bool,
    window: u64,
) -> (Duration, Duration, Duration) {
    while delays.try_recv().is_ok() {}
    let stop = Arc::new(AtomicBool::new(false));
    let load = ubr_load.then(|| {
        let (src, state, stop) = (src.clone(), state.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                through(&src, &state, 9180, 64, window, Duration::from_secs(5));
            }
        })
    });
    let mut got = Vec::with_capacity(samples);
    for _ in 0..samples {
        let mut payload = [0u8; 48];
        payload[..8].copy_from_slice(&(base.elapsed().as_nanos() as u64).to_le_bytes());
        let cell = Cell::new(&CellHeader::user(CBR, 0), &payload);
        src.lock()
            .unwrap_or_else(|p| p.into_inner())
            .write_all(&cell.bytes)
            .expect("source write");
        got.push(
            delays
                .recv_timeout(Duration::from_secs(10))
                .expect("a CBR cell through"),
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = load {
        let _ = t.join();
    }
    got.sort();
    let at = |q: f64| got[((got.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99), at(1.0))
}

fn main() {
    ibtca_log::logging::init("warn");
    let args: Args = ibtca_cli::parse(NAME);
    let dir: PathBuf = std::env::temp_dir().join(format!("ibtca-gw-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("run directory");
    let link = dir.join("link");
    let (atm_a, atm_b) = (dir.join("atm-a"), dir.join("atm-b"));
    let ga = gateway(10, 20, 16, 116, LinkEndpoint::Listen(link.clone()), &atm_a);
    let gb = gateway(20, 10, 116, 16, LinkEndpoint::Connect(link), &atm_b);
    let src = Arc::new(Mutex::new(connect(&atm_a)));
    let state = Arc::new(SinkState::default());
    let (tx, delays) = mpsc::channel();
    let base = Instant::now();
    {
        let (s, state) = (connect(&atm_b), state.clone());
        std::thread::spawn(move || sink(s, state, tx, base));
    }
    // One frame first: the link and the QPs are up once it arrives.
    through(&src, &state, 64, 1, 1, Duration::from_secs(30));

    let limit = Duration::from_secs_f64(args.seconds);
    println!(
        "{:<14} {:>8} {:>12} {:>10} {:>11} {:>14} {:>6}",
        "frames", "count", "frames/s", "MB/s", "cells/s", "raw cells/s", "ratio"
    );
    for len in [64, 1500, 9180] {
        let r = through(&src, &state, len, args.frames, args.window, limit);
        let cps = r.cells as f64 / r.secs;
        println!(
            "{:<14} {:>8} {:>12.0} {:>10.1} {:>11.0} {:>14.0} {:>6.3}",
            r.what,
            r.frames,
            r.frames as f64 / r.secs,
            (r.frames as f64 * len as f64) / r.secs / 1e6,
            cps,
            r.raw_cells_per_sec,
            cps / r.raw_cells_per_sec
        );
    }
    for (what, load) in [("idle", false), ("beside saturated UBR", true)] {
        let (p50, p99, max) =
            cbr_delays(&src, &state, &delays, base, args.samples, load, args.window);
        println!(
            "CBR cell delay, {what}: p50 {p50:?}, p99 {p99:?}, max {max:?} ({} cells)",
            args.samples
        );
    }
    let (ca, cb) = (ga.stop(), gb.stop());
    println!(
        "gateway A: {} messages to IB, {} dropped (backlog); gateway B: {} cells out, {} dropped (queue)",
        ca.engine.messages_to_ib, ca.engine.dropped_backlog, cb.cells_out, cb.queue_dropped_cells
    );
    let _ = std::fs::remove_dir_all(&dir);
}
