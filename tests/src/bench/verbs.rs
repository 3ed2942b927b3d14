//! `ibtca-bench verbs`: two device instances in this process on a link,
//! driven by simulated guests, next to the raw socket baselines.

use super::*;

/// Target: 1 MiB RDMA WRITE throughput as a share of the raw stream.
pub(super) const TARGET_WRITE_SHARE: f64 = 0.70;
/// Target: 64 B SEND rate as a share of the raw small-message rate.
pub(super) const TARGET_SEND_SHARE: f64 = 0.50;
/// Simulated RAM per guest.
pub(super) const VERBS_RAM: u64 = 32 << 20;
/// Registered buffer per guest.
pub(super) const VERBS_BUF: u64 = 4 << 20;
/// Send queue of the RDMA WRITE runs: 2^6 = 64 entries, all kept busy.
pub(super) const WRITE_QP_LOG: u8 = 6;
/// QP of the SEND runs: 2^10 receives kept posted.
pub(super) const SEND_QP_LOG: u8 = 10;
/// SENDs the sender keeps outstanding.
pub(super) const SEND_DEPTH: usize = 128;
/// CQ of every run: larger than any QP's SQ + RQ.
pub(super) const VERBS_CQ_LOG: u8 = 12;
/// Completions taken per look at a CQ.
pub(super) const POLL_BATCH: usize = 64;

/// How the bench's guest threads wait when their CQ is empty: 0 = spin
/// with `sched_yield` (the default), else sleep this many µs.
pub(super) static IDLE_SLEEP_US: AtomicU64 = AtomicU64::new(0);

/// Messages from this size on: the sender sleeps on the CQ interrupt when
/// nothing is ready instead of busy-polling (perftest's `-e`; the guest
/// tool's `write_bw` does the same), leaving the CPU to the devices.
pub(super) const EVENT_WAIT_FROM: u64 = 64 << 10;

/// How a bench guest waits for completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CqWait {
    /// Busy-poll the CQ ([`idle`] between looks).
    Poll,
    /// Arm the CQ, look once more, then sleep on its interrupt.
    Event,
}

impl CqWait {
    /// The wait for messages of `size` bytes.
    pub(super) fn for_size(size: u64) -> Self {
        if size >= EVENT_WAIT_FROM {
            CqWait::Event
        } else {
            CqWait::Poll
        }
    }
}

/// Nothing was ready on `s`'s CQ: waits as `wait` says. With
/// [`CqWait::Event`] it arms the CQ and sleeps until its interrupt (the
/// device fires at once if a completion slipped in before the arm), at most
/// 100 ms as a guard.
pub(super) fn wait_for_completion(s: &mut Side, wait: CqWait) {
    match wait {
        CqWait::Poll => idle(),
        CqWait::Event => {
            s.g.arm_cq(&s.cq);
            s.g.wait_cq_irq(Duration::from_millis(100));
        }
    }
}

pub(super) fn idle() {
    match IDLE_SLEEP_US.load(Ordering::Relaxed) {
        0 => std::thread::yield_now(),
        us => std::thread::sleep(Duration::from_micros(us)),
    }
}

/// Two instances joined by a link, a guest on each, QPs connected (A: LID 1,
/// B: LID 2).
pub(super) struct Pair {
    a: Side,
    b: Side,
    servers: (TestServer, TestServer),
    _dir: TempDir,
}

pub(super) fn verbs_pair(qp_log: u8) -> Pair {
    let mut lp = LinkedPair::start(PairOptions {
        ram: VERBS_RAM,
        buf: VERBS_BUF,
        cq_log: VERBS_CQ_LOG,
        qp_log,
        b_access: ALL_ACCESS,
        spin: true,
        engine_spin: engine_spin(),
        cpus: split_cpus(),
        link_ring: link_ring(),
        link_spin: link_spin(),
        ..Default::default()
    });
    lp.connect(MTU_4096);
    let (a, b, servers, _dir) = lp.into_parts();
    Pair {
        a,
        b,
        servers,
        _dir,
    }
}

/// Link counters of A and B so far.
pub(super) fn link_stats(servers: &(TestServer, TestServer)) -> (LinkStats, LinkStats) {
    let s = |t: &TestServer| t.link.as_ref().map(|l| l.stats()).unwrap_or_default();
    (s(&servers.0), s(&servers.1))
}

/// What one throughput run measured, plus the link counters for the report.
pub(super) struct Rate {
    pub(super) msgs: u64,
    pub(super) bytes: u64,
    pub(super) secs: f64,
    pub(super) link: Option<LinkDelta>,
    pub(super) cpu: Option<CpuSplit>,
}

/// On-CPU time of this process's threads over a timed part, by role, in
/// nanoseconds (from `/proc/self/task/*/schedstat`, so it counts only time
/// actually on a CPU: robust against other load on the machine, unlike the
/// wall-clock rates).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct CpuSplit {
    /// `ibtca-engine` threads (both devices).
    engine: u64,
    /// `ibtca-link` threads: the link readers.
    link_rx: u64,
    /// `ibtca-link-tx` threads: the link writers.
    link_tx: u64,
    /// The other device threads (the vfio-user servers, unnamed).
    vfio: u64,
    /// The simulated guests (the main thread and `guest-*` threads) and the
    /// raw rows' `raw-*` threads.
    guests: u64,
}

impl CpuSplit {
    /// Device CPU (everything but the guests).
    fn device(&self) -> u64 {
        self.engine + self.link_rx + self.link_tx + self.vfio
    }
}

/// (thread name, on-CPU ns) of every thread of this process, by tid.
pub(super) type CpuSnapshot = std::collections::HashMap<u32, (String, u64)>;

pub(super) fn cpu_snapshot() -> CpuSnapshot {
    let mut out = CpuSnapshot::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) else {
            continue;
        };
        let path = e.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        if let Some(ns) = ns {
            out.insert(tid, (comm.trim().to_string(), ns));
        }
    }
    out
}

/// CPU used between two snapshots by the threads alive at the second.
pub(super) fn cpu_delta(before: &CpuSnapshot, after: &CpuSnapshot) -> CpuSplit {
    let main = std::process::id();
    let mut split = CpuSplit::default();
    for (tid, (comm, ns)) in after {
        let used = ns - before.get(tid).map_or(0, |b| b.1).min(*ns);
        let slot = match comm.as_str() {
            "ibtca-engine" => &mut split.engine,
            "ibtca-link" => &mut split.link_rx,
            "ibtca-link-tx" => &mut split.link_tx,
            c if *tid == main || c.starts_with("guest") || c.starts_with("raw") => {
                &mut split.guests
            }
            _ => &mut split.vfio,
        };
        *slot += used;
    }
    split
}

impl Rate {
    pub(super) fn msg_per_s(&self) -> f64 {
        self.msgs as f64 / self.secs
    }
    pub(super) fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / self.secs / (1 << 20) as f64
    }
}

/// Link counters over one run, both directions.
pub(super) struct LinkDelta {
    a: LinkStats,
    b: LinkStats,
}

pub(super) fn delta(before: &LinkStats, after: &LinkStats) -> LinkStats {
    LinkStats {
        tx_packets: after.tx_packets - before.tx_packets,
        tx_bytes: after.tx_bytes - before.tx_bytes,
        tx_writes: after.tx_writes - before.tx_writes,
        tx_built_in_place: after.tx_built_in_place - before.tx_built_in_place,
        rx_packets: after.rx_packets - before.rx_packets,
        rx_bytes: after.rx_bytes - before.rx_bytes,
        tx_dropped_down: after.tx_dropped_down - before.tx_dropped_down,
        tx_dropped_full: after.tx_dropped_full - before.tx_dropped_full,
        credit_stalls: after.credit_stalls - before.credit_stalls,
        credit_frames_tx: after.credit_frames_tx - before.credit_frames_tx,
        tx_rings: after.tx_rings,
        ..LinkStats::default()
    }
}

impl std::fmt::Display for LinkDelta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (name, s) in [("A→B", &self.a), ("B→A", &self.b)] {
            write!(
                f,
                "  {name} ({}): {} packets, {} built in place, the rest in {} writes ({:.1}/write), {} dropped (queue full), {} credit frames, {} credit stalls",
                if s.tx_rings > 0 { "shared ring" } else { "socket" },
                s.tx_packets,
                s.tx_built_in_place,
                s.tx_writes,
                (s.tx_packets - s.tx_built_in_place) as f64 / s.tx_writes.max(1) as f64,
                s.tx_dropped_full,
                s.credit_frames_tx,
                s.credit_stalls,
            )?;
            if name == "A→B" {
                writeln!(f)?;
            }
        }
        Ok(())
    }
}

/// Drives a sender: keeps `depth` WQEs made by `make(i)` outstanding on
/// `s`, refilling (one doorbell per refill) as completions arrive, for
/// `secs` after a warm-up of a tenth of that, waiting for completions as
/// `wait` says. Returns messages completed in the timed part, its length and
/// the link counters over it (`link` reads them).
pub(super) fn keep_busy(
    s: &mut Side,
    depth: usize,
    secs: f64,
    wait: CqWait,
    link: impl Fn() -> (LinkStats, LinkStats),
    make: impl Fn(&Side, u64) -> SendWqe,
) -> (u64, f64, LinkDelta, CpuSplit) {
    let warm = Duration::from_secs_f64(secs / 10.0);
    let timed = Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut t0 = None;
    let mut outstanding = 0usize;
    let mut posted = 0u64;
    let mut done = 0u64;
    let mut done_at_t0 = 0;
    let mut link_at_t0 = link();
    let mut cpu_at_t0 = CpuSnapshot::new();
    let mut cqes = Vec::with_capacity(POLL_BATCH);
    let mut wqes = Vec::with_capacity(depth);
    let last_post = loop {
        let now = Instant::now();
        if t0.is_none() && now >= start + warm {
            t0 = Some(now);
            done_at_t0 = done;
            link_at_t0 = link();
            cpu_at_t0 = cpu_snapshot();
        }
        if t0.is_some_and(|t| now >= t + timed) {
            break now;
        }
        wqes.clear();
        while outstanding + wqes.len() < depth {
            wqes.push(make(s, posted));
            posted += 1;
        }
        outstanding += wqes.len();
        s.g.post_send_batch(&mut s.qp, &wqes);
        cqes.clear();
        let n = s.g.poll_cq_batch(&mut s.cq, POLL_BATCH, &mut cqes);
        for c in &cqes {
            assert_eq!(c.status, WC_SUCCESS, "completion {c:?}");
        }
        if n == 0 {
            wait_for_completion(s, wait);
        }
        outstanding -= n;
        done += n as u64;
    };
    let t0 = t0.expect("warm-up ended");
    let msgs = done - done_at_t0;
    let secs = (last_post - t0).as_secs_f64();
    let end = link();
    let cpu = cpu_delta(&cpu_at_t0, &cpu_snapshot());
    let link = LinkDelta {
        a: delta(&link_at_t0.0, &end.0),
        b: delta(&link_at_t0.1, &end.1),
    };
    // Drain what is still in flight, so the pair shuts down quietly.
    let deadline = Instant::now() + Duration::from_secs(20);
    while outstanding > 0 && Instant::now() < deadline {
        cqes.clear();
        outstanding -= s.g.poll_cq_batch(&mut s.cq, POLL_BATCH, &mut cqes);
        idle();
    }
    (msgs, secs, link, cpu)
}

/// RDMA WRITE of `size` bytes from A to B, `depth` outstanding.
pub(super) fn verbs_write(size: u64, depth: usize, secs: f64) -> Rate {
    let mut p = verbs_pair(WRITE_QP_LOG);
    let (dst, rkey) = (p.b.buf, p.b.rkey);
    // Spread the messages over the buffer (for small ones: distinct lines).
    let slots = (VERBS_BUF / size).max(1);
    let servers = &p.servers;
    let (msgs, secs, link, cpu) = keep_busy(
        &mut p.a,
        depth,
        secs,
        CqWait::for_size(size),
        || link_stats(servers),
        |s, i| {
            let off = (i % slots) * size;
            remote(
                send_wqe(WR_RDMA_WRITE, i, s.buf + off, size as u32, s.lkey),
                dst + off,
                rkey,
            )
        },
    );
    Rate {
        msgs,
        bytes: msgs * size,
        secs,
        link: Some(link),
        cpu: Some(cpu),
    }
}

/// 64 B SENDs from A to B: B keeps its RQ full, reposting as receives
/// complete; A keeps `depth` SENDs outstanding. Counted at the sender (an RC
/// SEND completes once B has placed it and acknowledged it).
pub(super) fn verbs_send_rate(size: u32, depth: usize, secs: f64) -> Rate {
    let Pair {
        mut a,
        mut b,
        servers,
        _dir,
    } = verbs_pair(SEND_QP_LOG);
    let rq = 1usize << SEND_QP_LOG;
    let recv = |b: &Side, i: u64| {
        let slot = i % (VERBS_BUF / 4096);
        recv_wqe(i, b.buf + slot * 4096, 4096, b.lkey)
    };
    let all: Vec<RecvWqe> = (0..rq as u64).map(|i| recv(&b, i)).collect();
    b.g.post_recv_batch(&mut b.qp, &all);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_rx = stop.clone();
    let receiver = named("guest-b", move || {
        let mut cqes = Vec::with_capacity(POLL_BATCH);
        let mut wqes = Vec::with_capacity(POLL_BATCH);
        let mut next = rq as u64;
        let mut received = 0u64;
        while !stop_rx.load(Ordering::Relaxed) {
            cqes.clear();
            let n = b.g.poll_cq_batch(&mut b.cq, POLL_BATCH, &mut cqes);
            if n == 0 {
                idle();
                continue;
            }
            wqes.clear();
            for c in &cqes {
                assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_RECV), "{c:?}");
                wqes.push(recv(&b, next));
                next += 1;
            }
            received += n as u64;
            b.g.post_recv_batch(&mut b.qp, &wqes);
        }
        (b, received)
    });
    let (msgs, secs, link, cpu) = keep_busy(
        &mut a,
        depth,
        secs,
        CqWait::Poll,
        || link_stats(&servers),
        |s, i| send_wqe(WR_SEND, i, s.buf + (i % 1024) * 64, size, s.lkey),
    );
    stop.store(true, Ordering::Relaxed);
    let (_b, received) = receiver.join().expect("receiver thread");
    eprintln!("[bench]   receiver saw {received} receives");
    drop(a);
    Rate {
        msgs,
        bytes: msgs * u64::from(size),
        secs,
        link: Some(link),
        cpu: Some(cpu),
    }
}

/// Waits (spinning) for the next receive completion on `s`, consuming send
/// completions on the way.
pub(super) fn wait_recv(s: &mut Side) -> Cqe {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(c) = s.g.try_poll_cq(&mut s.cq) {
            assert_eq!(c.status, WC_SUCCESS, "{c:?}");
            if c.opcode == WC_RECV {
                return c;
            }
            continue;
        }
        assert!(Instant::now() < deadline, "no receive completion");
        idle();
    }
}

/// 64 B SEND ping-pong A → B → A; µs per one-way trip (round trip / 2),
/// median.
pub(super) fn verbs_pingpong(size: u32, secs: f64) -> f64 {
    let Pair {
        mut a,
        mut b,
        servers: _servers,
        _dir,
    } = verbs_pair(WRITE_QP_LOG);
    let depth = 1usize << WRITE_QP_LOG;
    for s in [&mut a, &mut b] {
        let all: Vec<RecvWqe> = (0..depth as u64)
            .map(|i| recv_wqe(i, s.buf + i * 4096, 4096, s.lkey))
            .collect();
        s.g.post_recv_batch(&mut s.qp, &all);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    let echo = named("guest-b", move || {
        let mut i = 0u64;
        loop {
            // Poll until a ping arrives or the bench stops.
            let deadline = Instant::now() + Duration::from_secs(20);
            let c = loop {
                if let Some(c) = b.g.try_poll_cq(&mut b.cq) {
                    assert_eq!(c.status, WC_SUCCESS, "{c:?}");
                    if c.opcode == WC_RECV {
                        break Some(c);
                    }
                    continue;
                }
                if stop_b.load(Ordering::Relaxed) || Instant::now() >= deadline {
                    break None;
                }
                idle();
            };
            let Some(c) = c else { return };
            let w = send_wqe(WR_SEND, i, b.buf + (1 << 20), size, b.lkey);
            b.g.post_send_batch(&mut b.qp, &[w]);
            let slot = c.wr_id.to_native();
            let r = recv_wqe(slot, b.buf + (slot % depth as u64) * 4096, 4096, b.lkey);
            b.g.post_recv_batch(&mut b.qp, &[r]);
            i += 1;
        }
    });
    let mut samples = Vec::new();
    let warm = Instant::now() + Duration::from_secs_f64(secs / 10.0);
    let end = warm + Duration::from_secs_f64(secs);
    let mut i = 0u64;
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        let w = send_wqe(WR_SEND, i, a.buf + (1 << 20), size, a.lkey);
        a.g.post_send_batch(&mut a.qp, &[w]);
        let c = wait_recv(&mut a);
        if t >= warm {
            samples.push(t.elapsed().as_nanos() as u64);
        }
        let slot = c.wr_id.to_native();
        let r = recv_wqe(slot, a.buf + (slot % depth as u64) * 4096, 4096, a.lkey);
        a.g.post_recv_batch(&mut a.qp, &[r]);
        i += 1;
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().expect("echo thread");
    median_ns(samples) / 2000.0
}

/// Of (raw stream MiB/s, WRITE run) pairs, the one with the median ratio
/// (the lower of the two middle ones for an even count); with more than
/// one pair, all of them go into `notes`.
pub(super) fn median_pair(
    mut runs: Vec<(f64, Rate)>,
    notes: &mut Vec<String>,
    label: &str,
) -> (f64, Rate) {
    let ratio = |(base, r): &(f64, Rate)| r.mib_per_s() / base;
    runs.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    if runs.len() > 1 {
        let list: Vec<String> = runs
            .iter()
            .map(|p| format!("{:.0}/{:.0} = {:.2}", p.1.mib_per_s(), p.0, ratio(p)))
            .collect();
        notes.push(format!(
            "RDMA WRITE {label}, {} interleaved pairs (WRITE MiB/s / raw stream MiB/s, by ratio; the WRITE row shows the median pair, its ratio against that pair's raw stream, while the raw stream row is the first pair's): {}",
            runs.len(),
            list.join(", ")
        ));
    }
    let mid = (runs.len() - 1) / 2;
    runs.swap_remove(mid)
}

/// One row of the verbs table.
pub(super) struct VRow {
    what: String,
    size: &'static str,
    mib_s: Option<f64>,
    msg_s: Option<f64>,
    us: Option<f64>,
    ratio: Option<(f64, &'static str)>,
    target: Option<f64>,
    /// Device CPU µs per message (raw rows: both threads').
    cpu_us: Option<f64>,
}

/// One line of the CPU breakdown: µs per message by thread role.
pub(super) fn cpu_note(what: &str, c: &CpuSplit, msgs: u64) -> String {
    let per = |ns: u64| ns as f64 / 1000.0 / msgs.max(1) as f64;
    format!(
        "  {what:<16} device {:6.2} = engine {:5.2} + link rx {:5.2} + link tx {:5.2} + vfio {:5.2}; guests {:5.2}",
        per(c.device()),
        per(c.engine),
        per(c.link_rx),
        per(c.link_tx),
        per(c.vfio),
        per(c.guests),
    )
}

pub(super) fn run_verbs(secs: f64) -> ExitCode {
    let mut rows = Vec::new();
    let mut notes = Vec::new();

    eprintln!("[bench] raw socket stream, 64 KiB writes, {secs} s");
    let stream = raw_stream(64 << 10, secs);
    eprintln!("[bench] raw socket messages, 64 B writes, {secs} s");
    let small = raw_stream(64, secs);
    eprintln!("[bench] raw socket ping-pong, 64 B, {secs} s");
    let raw_lat = raw_pingpong(64, secs);
    let stream_mib = stream.mib_per_s();
    let small_msg = small.msg_per_s();
    let raw_cpu = |r: &Rate| {
        r.cpu
            .map(|c| (c.guests + c.device()) as f64 / 1000.0 / r.msgs.max(1) as f64)
    };
    let mut cpu_notes = Vec::new();
    rows.push(VRow {
        what: "raw socket stream".into(),
        size: "64 KiB",
        mib_s: Some(stream_mib),
        msg_s: Some(stream.msg_per_s()),
        us: None,
        ratio: Some((1.0, "stream")),
        target: None,
        cpu_us: raw_cpu(&stream),
    });
    rows.push(VRow {
        what: "raw socket messages".into(),
        size: "64 B",
        mib_s: Some(small.mib_per_s()),
        msg_s: Some(small_msg),
        us: None,
        ratio: Some((1.0, "msgs")),
        target: None,
        cpu_us: raw_cpu(&small),
    });
    rows.push(VRow {
        what: "raw socket ping-pong".into(),
        size: "64 B",
        mib_s: None,
        msg_s: None,
        us: Some(raw_lat),
        ratio: Some((1.0, "ping")),
        target: None,
        cpu_us: None,
    });

    for (size, label, target, row) in [
        (1u64 << 20, "1 MiB", Some(TARGET_WRITE_SHARE), "write-1m"),
        (4096, "4 KiB", None, "write-4k"),
        (64, "64 B", None, "write-64"),
    ] {
        if !row_chosen(row) {
            continue;
        }
        let n = if size == 1 << 20 { pairs() } else { 1 };
        let mut runs = Vec::new();
        for i in 0..n {
            let base = if i == 0 {
                stream_mib
            } else {
                eprintln!(
                    "[bench] raw socket stream, 64 KiB writes, {secs} s (pair {})",
                    i + 1
                );
                raw_stream(64 << 10, secs).mib_per_s()
            };
            eprintln!(
                "[bench] RDMA WRITE {label}, {} outstanding, {secs} s",
                1 << WRITE_QP_LOG
            );
            let r = verbs_write(size, 1 << WRITE_QP_LOG, secs);
            eprintln!(
                "[bench]   {:.1} MiB/s, {:.0} msg/s",
                r.mib_per_s(),
                r.msg_per_s()
            );
            runs.push((base, r));
        }
        let (base, r) = median_pair(runs, &mut notes, label);
        if let Some(l) = &r.link {
            notes.push(format!("RDMA WRITE {label}:\n{l}"));
        }
        if let Some(c) = &r.cpu {
            cpu_notes.push(cpu_note(&format!("RDMA WRITE {label}"), c, r.msgs));
        }
        rows.push(VRow {
            what: format!("RDMA WRITE (QD {})", 1 << WRITE_QP_LOG),
            size: label,
            mib_s: Some(r.mib_per_s()),
            msg_s: Some(r.msg_per_s()),
            us: None,
            ratio: Some(if size >= 4096 {
                (r.mib_per_s() / base, "stream")
            } else {
                (r.msg_per_s() / small_msg, "msgs")
            }),
            target,
            cpu_us: r
                .cpu
                .map(|c| c.device() as f64 / 1000.0 / r.msgs.max(1) as f64),
        });
    }

    if row_chosen("send") {
        eprintln!("[bench] SEND 64 B, {SEND_DEPTH} outstanding, {secs} s");
        let r = verbs_send_rate(64, SEND_DEPTH, secs);
        eprintln!("[bench]   {:.0} msg/s", r.msg_per_s());
        if let Some(l) = &r.link {
            notes.push(format!("SEND 64 B:\n{l}"));
        }
        if let Some(c) = &r.cpu {
            cpu_notes.push(cpu_note("SEND 64 B", c, r.msgs));
        }
        rows.push(VRow {
            what: format!("SEND rate (QD {SEND_DEPTH})"),
            size: "64 B",
            mib_s: Some(r.mib_per_s()),
            msg_s: Some(r.msg_per_s()),
            us: None,
            ratio: Some((r.msg_per_s() / small_msg, "msgs")),
            target: Some(TARGET_SEND_SHARE),
            cpu_us: r
                .cpu
                .map(|c| c.device() as f64 / 1000.0 / r.msgs.max(1) as f64),
        });
    }

    if row_chosen("ping") {
        eprintln!("[bench] SEND ping-pong 64 B, {secs} s");
        let lat = verbs_pingpong(64, secs);
        eprintln!("[bench]   {lat:.1} µs");
        rows.push(VRow {
            what: "SEND ping-pong".into(),
            size: "64 B",
            mib_s: None,
            msg_s: None,
            us: Some(lat),
            ratio: Some((lat / raw_lat, "ping")),
            target: None,
            cpu_us: None,
        });
    }

    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let opt = |v: Option<f64>, f: fn(f64) -> String| v.map_or("-".into(), f);
            let (ratio, target, result) = match (r.ratio, r.target) {
                (None, _) => ("-".into(), "-".into(), "-".into()),
                (Some((x, base)), t) => (
                    format!("{x:.2} ({base})"),
                    t.map_or("-".into(), |t| format!("≥ {t:.2}")),
                    t.map_or("-".into(), |t| if x >= t { "PASS" } else { "MISS" }.into()),
                ),
            };
            vec![
                r.what.clone(),
                r.size.into(),
                opt(r.mib_s, |v| format!("{v:.1}")),
                opt(r.msg_s, fmt_rate),
                opt(r.us, fmt_us),
                opt(r.cpu_us, |v| format!("{v:.2}")),
                ratio,
                target,
                result,
            ]
        })
        .collect();
    println!();
    println!(
        "ibtca-bench verbs: two device instances (in this process) on a link ({}), \
         each driven through vfio-user by a simulated guest that busy-polls its CQ; \
         {secs} s per row, path MTU 4096, one doorbell per refill{}.",
        if link_ring() > 0 {
            "frames through shared-memory rings, the Unix socket for liveness"
        } else {
            "frames on the Unix socket, --link-ring-kib 0"
        },
        if SCHED_BATCH.load(Ordering::Relaxed) {
            "; every thread (raw rows too) under SCHED_BATCH"
        } else {
            "; default scheduling (--sched-batch: every thread under SCHED_BATCH, as \
             `ibtca-device --sched-batch` runs; more bulk throughput where threads \
             outnumber CPUs, BENCHMARKS.md)"
        }
    );
    println!(
        "Ratios: stream = MiB/s over the raw 64 KiB stream; msgs = msg/s over the raw \
         64 B message rate; ping = one-way µs over the raw 64 B socket ping-pong."
    );
    println!(
        "CPU µs/msg: on-CPU time of the device threads of both instances per message \
         (raw rows: of both socket threads); unlike the rates it barely depends on other \
         load on the machine."
    );
    println!();
    print_grid(
        &[
            "measurement",
            "size",
            "MiB/s",
            "msg/s",
            "µs",
            "CPU µs/msg",
            "× baseline",
            "target",
            "result",
        ],
        &cells,
        &[2, 3, 4, 5],
    );
    println!();
    println!("Link counters (per direction, over the timed part of each run):");
    for n in notes {
        println!("{n}");
    }
    println!();
    println!(
        "Device CPU per message (µs on a CPU, both devices, timed part): engine threads, \
         link readers, link writers, vfio-user servers; then the simulated guests."
    );
    for n in cpu_notes {
        println!("{n}");
    }
    ExitCode::SUCCESS
}
