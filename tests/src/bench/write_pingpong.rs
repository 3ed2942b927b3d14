//! `ibtca-bench verbs`' WRITE ping-pong row: a 64 B RDMA WRITE answered
//! by an RDMA WRITE, as perftest's `ib_write_lat` does it. Each side polls
//! the last 8 bytes of its own buffer for the sequence number the peer
//! wrote, so a one-way trip is doorbell → device A → link → device B →
//! B's memory, with no completion on the receiving side.

use super::*;
use ibtca_device::engine::Handoffs;

/// Latencies of a ping-pong: one way (round trip / 2), µs.
#[derive(Debug, Clone)]
pub(super) struct PingPong {
    pub(super) median_us: f64,
    pub(super) p99_us: f64,
    pub(super) round_trips: usize,
    /// Where the devices' events ran over the timed part and the rings'
    /// wake-ups (WRITE runs only).
    pub(super) handoffs: Option<String>,
    /// How each thread role was scheduled over the timed part (WRITE runs
    /// only).
    pub(super) sched: Option<String>,
}

impl PingPong {
    /// From round-trip samples in ns.
    pub(super) fn from_round_trips(mut ns: Vec<u64>) -> Self {
        ns.sort_unstable();
        let at = |q: f64| {
            let i = ((ns.len() as f64 * q) as usize).min(ns.len().saturating_sub(1));
            ns.get(i).copied().unwrap_or(0) as f64 / 2000.0
        };
        PingPong {
            median_us: at(0.5),
            p99_us: at(0.99),
            round_trips: ns.len(),
            handoffs: None,
            sched: None,
        }
    }
}

/// Where in each side's buffer the peer's message lands.
const SLOT: u64 = 2 << 20;

/// Waits until the 8 bytes before `SLOT + size` on `s` hold `seq` (false:
/// `stop` was set or 20 s passed), yielding between looks as the other
/// rows' guests do (a guest spinning without yielding takes a CPU from
/// the devices).
fn wait_for(s: &Side, size: u32, seq: u64, stop: &AtomicBool) -> bool {
    let at = s.buf + SLOT + u64::from(size) - 8;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = u64::from_le_bytes(s.g.read(at, 8).try_into().expect("8 bytes"));
        if got == seq {
            return true;
        }
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return false;
        }
        idle();
    }
}

/// Posts one signaled WRITE of `size` bytes carrying `seq` from `s` into the
/// peer's slot (`dst`, `rkey`), taking the completions of earlier ones
/// (their slots returned through the CQ's doorbell record at `record`, or
/// with a CQ doorbell each without one).
fn write_seq(s: &mut Side, size: u32, seq: u64, (dst, rkey): (u64, u64), record: Option<u64>) {
    let src = s.buf + (1 << 20);
    let mut msg = vec![0u8; size as usize];
    msg[size as usize - 8..].copy_from_slice(&seq.to_le_bytes());
    s.g.write(src, &msg);
    let w = send_wqe(WR_RDMA_WRITE, seq, src, size, s.lkey);
    s.g.post_send_batch(&mut s.qp, &[remote(w, dst + SLOT, rkey as u32)]);
    loop {
        let c = match record {
            Some(r) => s.g.try_poll_cq_recorded(&mut s.cq, r),
            None => s.g.try_poll_cq(&mut s.cq),
        };
        let Some(c) = c else { break };
        assert_eq!(c.status, WC_SUCCESS, "{c:?}");
    }
}

/// `s`'s CQ doorbell record, unless `--cq-doorbells`.
fn cq_record(s: &mut Side) -> Option<u64> {
    (!cq_doorbells()).then(|| s.g.bind_cq_record(&s.cq))
}

/// `size`-byte RDMA WRITE ping-pong A → B → A for `secs` (after a tenth of
/// that as warm-up), each guest on a thread of its own at the run's guest
/// placement.
pub(super) fn verbs_write_pingpong(size: u32, secs: f64) -> PingPong {
    assert!(size >= 8, "the sequence number takes 8 bytes");
    let Pair {
        mut a,
        mut b,
        servers,
        _dir,
    } = verbs_pair(WRITE_QP_LOG);
    let (rec_a, rec_b) = (cq_record(&mut a), cq_record(&mut b));
    let to_a = (a.buf, u64::from(a.rkey));
    let to_b = (b.buf, u64::from(b.rkey));
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    let echo = guest_thread("guest-b", 1, move || {
        let mut seq = 1u64;
        while wait_for(&b, size, seq, &stop_b) {
            write_seq(&mut b, size, seq, to_a, rec_b);
            seq += 1;
        }
        // Leave the QP drained so the pair shuts down quietly.
        while b.g.try_poll_cq(&mut b.cq).is_some() {}
    });
    // Guest A's thread borrows it: A stays up until B has stopped.
    let (servers, a) = (&servers, &mut a);
    let (samples, counts) = on_guest_thread("guest-a", 0, move || {
        let never = AtomicBool::new(false);
        let mut samples = Vec::new();
        let warm = Instant::now() + Duration::from_secs_f64(secs / 10.0);
        let end = warm + Duration::from_secs_f64(secs);
        let mut seq = 1u64;
        let mut at_warm = None;
        loop {
            let now = Instant::now();
            if now >= end {
                break;
            }
            if now >= warm && at_warm.is_none() {
                at_warm = Some(Counts::now(servers));
            }
            // After the snapshot, which reads /proc for every thread.
            let t = Instant::now();
            write_seq(a, size, seq, to_b, rec_a);
            assert!(wait_for(a, size, seq, &never), "no reply to WRITE {seq}");
            if now >= warm {
                samples.push(t.elapsed().as_nanos() as u64);
            }
            seq += 1;
        }
        (samples, at_warm.map(|w| (w, Counts::now(servers))))
    });
    stop.store(true, Ordering::Relaxed);
    echo.join().expect("echo thread");
    let mut p = PingPong::from_round_trips(samples);
    if let Some((from, to)) = counts {
        let trips = p.round_trips as f64;
        p.handoffs = Some(format!(
            "{}\nRDMA WRITE ping-pong 64 B, {}",
            handoffs_note(&from.handoffs, &to.handoffs, trips, "round trip"),
            LinkDelta::between(&from.link, &to.link).ring_note(trips, "round trip"),
        ));
        p.sched = Some(sched_note(
            "RDMA WRITE ping-pong 64 B",
            &cpu_delta(&from.cpu, &to.cpu),
            p.round_trips as u64,
            "round trip",
        ));
    }
    p
}

/// The counters a timed part is measured between.
struct Counts {
    handoffs: [Handoffs; 2],
    link: (LinkStats, LinkStats),
    cpu: CpuSnapshot,
}

impl Counts {
    fn now(servers: &(TestServer, TestServer)) -> Self {
        Counts {
            handoffs: handoffs(servers),
            link: link_stats(servers),
            cpu: cpu_snapshot(),
        }
    }
}

/// Both devices' counts of where their events ran.
pub(super) fn handoffs(servers: &(TestServer, TestServer)) -> [Handoffs; 2] {
    let h = |s: &TestServer| s.engine.as_ref().map(|e| e.handoffs()).unwrap_or_default();
    [h(&servers.0), h(&servers.1)]
}

/// Per `unit` (`units` of them between the two counts), each device's
/// events run on their arriving thread, on the thread that owned the
/// engine when they came, and on its engine thread, and the engine
/// thread's wake-ups.
pub(super) fn handoffs_note(
    from: &[Handoffs; 2],
    to: &[Handoffs; 2],
    units: f64,
    unit: &str,
) -> String {
    let per = |n: u64| n as f64 / units.max(1.0);
    let side = |name: &str, f: &Handoffs, t: &Handoffs| {
        format!(
            "{name}: doorbells {:.2} on the vfio-user thread, {:.2} on the engine's owner, \
             {:.2} on the engine thread; link batches {:.2} on the reader, {:.2} on the \
             engine's owner, {:.2} on the engine thread; engine thread wake-ups {:.2} \
             (timer {:.2})",
            per(t.vfio_inline - f.vfio_inline),
            per(t.vfio_by_owner - f.vfio_by_owner),
            per(t.vfio_queued - f.vfio_queued),
            per(t.link_inline - f.link_inline),
            per(t.link_by_owner - f.link_by_owner),
            per(t.link_queued - f.link_queued),
            per(t.engine_wakes - f.engine_wakes),
            per(t.timer_wakes - f.timer_wakes),
        )
    };
    format!(
        "per {unit}, {}; {}",
        side("A", &from[0], &to[0]),
        side("B", &from[1], &to[1])
    )
}
