//! `ibtca-bench verbs`: two device instances in this process on a link,
//! driven by simulated guests, next to the raw socket baselines: the runs
//! (RDMA WRITE, READ and SEND rates, SEND ping-pong) and the table.

use super::*;

/// Target: 1 MiB RDMA WRITE throughput as a share of the raw stream.
pub(super) const TARGET_WRITE_SHARE: f64 = 0.70;
/// Target: 64 B SEND rate as a share of the raw small-message rate.
pub(super) const TARGET_SEND_SHARE: f64 = 0.50;

/// SENDs the sender keeps outstanding.
pub(super) const SEND_DEPTH: usize = 128;

/// RDMA READs A keeps outstanding (the depth the published numbers use;
/// the device answers up to 16).
pub(super) const READ_DEPTH: usize = 3;

/// RDMA WRITE of `size` bytes from A to B, `depth` outstanding.
pub(super) fn verbs_write(size: u64, depth: usize, secs: f64) -> Rate {
    verbs_rdma(WR_RDMA_WRITE, size, depth, secs)
}

/// RDMA `opcode` (WRITE or READ) of `size` bytes between A's buffer and
/// B's, `depth` outstanding.
pub(super) fn verbs_rdma(opcode: u8, size: u64, depth: usize, secs: f64) -> Rate {
    let mut p = verbs_pair(WRITE_QP_LOG);
    let (dst, rkey) = (p.b.buf, p.b.rkey);
    // Spread the messages over the buffer (for small ones: distinct lines).
    let slots = (VERBS_BUF / size).max(1);
    let servers = &p.servers;
    let a = &mut p.a;
    let (msgs, secs, link, cpu) = on_guest_thread("guest-a", 0, move || {
        keep_busy(
            a,
            depth,
            secs,
            CqWait::for_size(size),
            Posting::Doorbells,
            || link_stats(servers),
            |s, i| {
                let off = (i % slots) * size;
                remote(
                    send_wqe(opcode, i, s.buf + off, size as u32, s.lkey),
                    dst + off,
                    rkey,
                )
            },
        )
    });
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
/// SEND completes once B has placed it and acknowledged it). Both guests
/// post and return CQ slots through doorbell records, as the provider does
/// (a trapped doorbell only where a record says the device sleeps on the
/// queue), unless `--send-doorbells`: then every post and every look at a
/// CQ that took completions is a vfio-user message. Each guest runs on a
/// thread of its own at the run's guest placement. Also returns a note:
/// trapped doorbells per message and where each device's events ran.
pub(super) fn verbs_send_rate(size: u32, depth: usize, secs: f64) -> (Rate, String) {
    let Pair {
        mut a,
        mut b,
        servers,
        _dir,
    } = verbs_pair(SEND_QP_LOG);
    let records = !send_doorbells();
    let post_a = Posting::bind(&mut a, records);
    let post_b = Posting::bind(&mut b, records);
    let rq = 1usize << SEND_QP_LOG;
    let recv = |b: &Side, i: u64| {
        let slot = i % (VERBS_BUF / 4096);
        recv_wqe(i, b.buf + slot * 4096, 4096, b.lkey)
    };
    let all: Vec<RecvWqe> = (0..rq as u64).map(|i| recv(&b, i)).collect();
    post_b.post_recvs(&mut b, &all);
    let at_start = handoffs(&servers);
    let doorbells_a_from = a.g.client.read32(0, regs::DOORBELLS);
    let stop = Arc::new(AtomicBool::new(false));
    let stop_rx = stop.clone();
    let receiver = guest_thread("guest-b", 1, move || {
        let doorbells_from = b.g.client.read32(0, regs::DOORBELLS);
        let mut cqes = Vec::with_capacity(POLL_BATCH);
        let mut wqes = Vec::with_capacity(POLL_BATCH);
        let mut next = rq as u64;
        let mut received = 0u64;
        while !stop_rx.load(Ordering::Relaxed) {
            cqes.clear();
            let n = post_b.poll(&mut b, POLL_BATCH, &mut cqes);
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
            post_b.post_recvs(&mut b, &wqes);
        }
        let doorbells =
            b.g.client
                .read32(0, regs::DOORBELLS)
                .wrapping_sub(doorbells_from);
        (b, received, doorbells)
    });
    SLOT_DONE.store(0, Ordering::Relaxed);
    let trace = trace_slots().then(|| SlotTrace::start(&servers)).flatten();
    let (msgs, secs, link, cpu) = on_guest_thread("guest-a", 0, || {
        keep_busy(
            &mut a,
            depth,
            secs,
            CqWait::Poll,
            post_a,
            || link_stats(&servers),
            |s, i| send_wqe(WR_SEND, i, s.buf + (i % 1024) * 64, size, s.lkey),
        )
    });
    let slots = trace.map(SlotTrace::finish);
    stop.store(true, Ordering::Relaxed);
    let (_b, received, doorbells_b) = receiver.join().expect("receiver thread");
    let doorbells_a =
        a.g.client
            .read32(0, regs::DOORBELLS)
            .wrapping_sub(doorbells_a_from);
    let at_end = handoffs(&servers);
    eprintln!("[bench]   receiver saw {received} receives");
    drop(a);
    let per = |n: u32| f64::from(n) / received.max(1) as f64;
    let per_msg = |n: u64| n as f64 / msgs.max(1) as f64;
    let mut note = format!(
        "SEND 64 B, {}: timed part, packets per message A→B {:.3} (above 1: \
         retransmissions), B→A {:.3}; whole run ({received} messages), trapped doorbells \
         per message A {:.3}, B {:.3}; {}",
        if records {
            "posted through doorbell records"
        } else {
            "a doorbell per post and per CQ look (--send-doorbells)"
        },
        per_msg(link.a.tx_packets),
        per_msg(link.b.tx_packets),
        per(doorbells_a),
        per(doorbells_b),
        handoffs_note(
            &at_start,
            &at_end,
            received as f64 / 1000.0,
            "1000 messages"
        ),
    );
    if let Some(slots) = slots {
        note.push('\n');
        note.push_str(&slots);
    }
    let rate = Rate {
        msgs,
        bytes: msgs * u64::from(size),
        secs,
        link: Some(link),
        cpu: Some(cpu),
    };
    (rate, note)
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
    let echo = guest_thread("guest-b", 1, move || {
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
    let samples = on_guest_thread("guest-a", 0, || {
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
        samples
    });
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

pub(super) fn run_verbs(secs: f64) -> ExitCode {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let load_at_start = load_average();

    eprintln!("[bench] placement: {}", placement().origin);
    eprintln!("[bench] raw socket stream, 64 KiB writes, {secs} s");
    let stream = raw_stream(64 << 10, secs);
    eprintln!("[bench] raw socket messages, 64 B writes, {secs} s");
    let small = raw_stream(64, secs);
    eprintln!("[bench] raw socket ping-pong, 64 B, {secs} s");
    let raw_ping = raw_pingpong(64, secs);
    let raw_lat = raw_ping.median_us;
    // The same, both threads at nice 0 and unpinned: the guests' placement
    // must not have made the baseline slower (the ratios would flatter the
    // device).
    let raw_ping_unplaced = (placement().moves_guests()
        && (row_chosen("write-ping") || row_chosen("ping")))
    .then(|| {
        eprintln!("[bench] raw socket ping-pong, 64 B, {secs} s, threads unplaced");
        raw_pingpong_placed(64, secs, false)
    });
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

    if row_chosen("read-1m") {
        eprintln!("[bench] RDMA READ 1 MiB, {READ_DEPTH} outstanding, {secs} s");
        let r = verbs_rdma(WR_RDMA_READ, 1 << 20, READ_DEPTH, secs);
        eprintln!("[bench]   {:.1} MiB/s", r.mib_per_s());
        if let Some(c) = &r.cpu {
            cpu_notes.push(cpu_note("RDMA READ 1 MiB", c, r.msgs));
        }
        rows.push(VRow {
            what: format!("RDMA READ (QD {READ_DEPTH})"),
            size: "1 MiB",
            mib_s: Some(r.mib_per_s()),
            msg_s: Some(r.msg_per_s()),
            us: None,
            ratio: Some((r.mib_per_s() / stream_mib, "stream")),
            target: None,
            cpu_us: r
                .cpu
                .map(|c| c.device() as f64 / 1000.0 / r.msgs.max(1) as f64),
        });
    }

    if row_chosen("send") {
        eprintln!("[bench] SEND 64 B, {SEND_DEPTH} outstanding, {secs} s");
        let (r, posting_note) = verbs_send_rate(64, SEND_DEPTH, secs);
        eprintln!("[bench]   {:.0} msg/s", r.msg_per_s());
        notes.push(posting_note);
        if let Some(l) = &r.link {
            notes.push(format!("SEND 64 B:\n{l}"));
            notes.push(format!(
                "SEND 64 B, {}",
                l.ring_note(r.msgs as f64, "message")
            ));
        }
        if let Some(c) = &r.cpu {
            cpu_notes.push(cpu_note("SEND 64 B", c, r.msgs));
            cpu_notes.push(sched_note("SEND 64 B", c, r.msgs, "message"));
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

    if row_chosen("write-ping") {
        eprintln!("[bench] RDMA WRITE ping-pong 64 B, {secs} s");
        let p = verbs_write_pingpong(64, secs);
        eprintln!("[bench]   {:.1} µs (p99 {:.1})", p.median_us, p.p99_us);
        notes.push(format!(
            "RDMA WRITE ping-pong 64 B, one way: median {:.1} µs, p99 {:.1} µs over {} round trips; raw socket ping-pong: median {:.1} µs, p99 {:.1} µs over {}",
            p.median_us, p.p99_us, p.round_trips, raw_ping.median_us, raw_ping.p99_us, raw_ping.round_trips
        ));
        if let Some(u) = &raw_ping_unplaced {
            notes.push(format!(
                "raw socket ping-pong 64 B with both threads unplaced (nice 0, not pinned): \
                 median {:.1} µs, p99 {:.1} µs; the WRITE ping-pong over it: {:.2}×",
                u.median_us,
                u.p99_us,
                p.median_us / u.median_us
            ));
        }
        if let Some(h) = &p.handoffs {
            notes.push(format!("RDMA WRITE ping-pong 64 B, where events ran: {h}"));
        }
        if let Some(s) = &p.sched {
            cpu_notes.push(s.clone());
        }
        rows.push(VRow {
            what: "RDMA WRITE ping-pong".into(),
            size: "64 B",
            mib_s: None,
            msg_s: None,
            us: Some(p.median_us),
            ratio: Some((p.median_us / raw_lat, "ping")),
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
         {secs} s per row, path MTU {}, one doorbell per refill ({}){}.",
        if link_ring() > 0 {
            "frames through shared-memory rings, the Unix socket for liveness"
        } else {
            "frames on the Unix socket, --link-ring-kib 0"
        },
        128u32 << path_mtu(),
        if send_doorbells() {
            "the SEND rate's guests too, and one per look at a CQ that took completions: \
             --send-doorbells"
        } else {
            "the SEND rate's guests post and return CQ slots through doorbell records \
             instead, as the provider does: a doorbell only where a record says the \
             device sleeps on the queue"
        },
        if SCHED_BATCH.load(Ordering::Relaxed) {
            "; every thread (raw rows too) under SCHED_BATCH"
        } else {
            "; default scheduling (--sched-batch: every thread under SCHED_BATCH, as \
             `ibtca-device --sched-batch` runs; more bulk throughput where threads \
             outnumber CPUs, BENCHMARKS.md)"
        }
    );
    for line in conditions(&load_at_start) {
        println!("{line}");
    }
    if ibtca_device::sched::idle_budget::fixed_spins() {
        println!("--fixed-spins: every polling thread spun its whole limit before blocking.");
    }
    if !run_to_completion() {
        println!(
            "--engine-thread-only: every device event went through its engine thread's queue."
        );
    }
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
         link readers, link writers, vfio-user servers; then the simulated guests. \
         Scheduling by role (schedstat, status): run delay = time runnable but \
         waiting for a CPU; involuntary switches = preempted."
    );
    for n in cpu_notes {
        println!("{n}");
    }
    ExitCode::SUCCESS
}
