//! What the verbs benches stand on: two device instances in this process
//! on a link with a simulated guest each ([`verbs_pair()`]), how a guest
//! waits for completions, and the loop that keeps a sender's queue full
//! ([`keep_busy`]).

use super::*;

/// Simulated RAM per guest.
pub(super) const VERBS_RAM: u64 = 32 << 20;
/// Registered buffer per guest.
pub(super) const VERBS_BUF: u64 = 4 << 20;
/// Send queue of the RDMA WRITE runs: 2^6 = 64 entries, all kept busy.
pub(super) const WRITE_QP_LOG: u8 = 6;
/// QP of the SEND runs: 2^10 receives kept posted.
pub(super) const SEND_QP_LOG: u8 = 10;

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

/// How a bench guest hands the device its WQEs and CQ slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Posting {
    /// A trapped doorbell (a vfio-user message) per post, and a CQ
    /// doorbell per look at the CQ that took completions.
    Doorbells,
    /// Through the QP's doorbell record (`qp`) and the CQ's (`cq`), as the
    /// provider does: a post rings only when the record says the device
    /// sleeps on the queue, CQ slots go back without a doorbell.
    Records { qp: u64, cq: u64 },
}

impl Posting {
    /// `Records` with `s`'s QP and CQ records bound now (QP_DB_RECORD and
    /// CQ_DB_RECORD), or `Doorbells`.
    pub(super) fn bind(s: &mut Side, records: bool) -> Self {
        if !records {
            return Posting::Doorbells;
        }
        let qp = s.g.bind_qp_record(&s.qp);
        let cq = s.g.bind_cq_record(&s.cq);
        Posting::Records { qp, cq }
    }

    /// Posts `wqes` on `s`'s SQ.
    pub(super) fn post_sends(self, s: &mut Side, wqes: &[SendWqe]) {
        match self {
            Posting::Doorbells => s.g.post_send_batch(&mut s.qp, wqes),
            Posting::Records { qp, .. } => {
                s.g.post_send_recorded(&mut s.qp, wqes, qp);
            }
        }
    }

    /// Posts `wqes` on `s`'s RQ.
    pub(super) fn post_recvs(self, s: &mut Side, wqes: &[RecvWqe]) {
        match self {
            Posting::Doorbells => s.g.post_recv_batch(&mut s.qp, wqes),
            Posting::Records { qp, .. } => {
                s.g.post_recv_recorded(&mut s.qp, wqes, qp);
            }
        }
    }

    /// Moves up to `max` ready CQEs of `s` into `out` and hands their slots
    /// back; how many.
    pub(super) fn poll(self, s: &mut Side, max: usize, out: &mut Vec<Cqe>) -> usize {
        match self {
            Posting::Doorbells => s.g.poll_cq_batch(&mut s.cq, max, out),
            Posting::Records { cq, .. } => s.g.poll_cq_batch_recorded(&mut s.cq, max, out, cq),
        }
    }
}

/// Two instances joined by a link, a guest on each, QPs connected (A: LID 1,
/// B: LID 2).
pub(super) struct Pair {
    pub(super) a: Side,
    pub(super) b: Side,
    pub(super) servers: (TestServer, TestServer),
    pub(super) _dir: TempDir,
}

/// Starts the pair as the run's placement says: the vfio-user servers'
/// spin, and (unless `--split` binds each device to a CPU of its own) the
/// CPUs both devices' threads share, which every thread they start
/// inherits from the thread that starts them.
pub(super) fn verbs_pair(qp_log: u8) -> Pair {
    let place = placement();
    let options = PairOptions {
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
        server_spin: place.device_spin,
        run_to_completion: run_to_completion(),
        ..Default::default()
    };
    let mut lp = match (&place.device_cpus, options.cpus) {
        (Some(cpus), None) => std::thread::scope(|s| {
            s.spawn(|| {
                ibtca_device::sched::set_affinity(cpus)
                    .unwrap_or_else(|e| panic!("cannot bind the devices to CPUs {cpus}: {e}"));
                LinkedPair::start(options)
            })
            .join()
            .expect("pair start-up thread")
        }),
        _ => LinkedPair::start(options),
    };
    lp.connect(path_mtu());
    let (a, b, servers, _dir) = lp.into_parts();
    Pair {
        a,
        b,
        servers,
        _dir,
    }
}

/// Drives a sender: keeps `depth` WQEs made by `make(i)` outstanding on
/// `s`, refilling (one post per refill, as `posting` says) as completions
/// arrive, for
/// `secs` after a warm-up of a tenth of that, waiting for completions as
/// `wait` says; with `--trace-slots` it keeps [`SLOT_DONE`] at the messages
/// completed since the start. Returns messages completed in the timed part, its length and
/// the link counters over it (`link` reads them).
pub(super) fn keep_busy(
    s: &mut Side,
    depth: usize,
    secs: f64,
    wait: CqWait,
    posting: Posting,
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
        posting.post_sends(s, &wqes);
        cqes.clear();
        let n = posting.poll(s, POLL_BATCH, &mut cqes);
        for c in &cqes {
            assert_eq!(c.status, WC_SUCCESS, "completion {c:?}");
        }
        if n == 0 {
            wait_for_completion(s, wait);
        }
        outstanding -= n;
        done += n as u64;
        if trace_slots() {
            SLOT_DONE.store(done, Ordering::Relaxed);
        }
    };
    let t0 = t0.expect("warm-up ended");
    let msgs = done - done_at_t0;
    let secs = (last_post - t0).as_secs_f64();
    let end = link();
    let cpu = cpu_delta(&cpu_at_t0, &cpu_snapshot());
    let link = LinkDelta::between(&link_at_t0, &end);
    // Drain what is still in flight, so the pair shuts down quietly.
    let deadline = Instant::now() + Duration::from_secs(20);
    while outstanding > 0 && Instant::now() < deadline {
        cqes.clear();
        outstanding -= posting.poll(s, POLL_BATCH, &mut cqes);
        idle();
    }
    (msgs, secs, link, cpu)
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
