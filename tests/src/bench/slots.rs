//! `--trace-slots`: the SEND rate's run cut into 50 ms slots. Each slot
//! shows the messages completed, A's RC counters (RNR NAKs received, ACK
//! timeouts, retransmissions), B's (RNR NAKs sent, duplicate and
//! out-of-sequence requests) and A's trapped doorbells per ACK batch, so
//! that a run's flips between its fast and its slow state line up with the
//! NAKs and timeouts around them (plan36 E5). Without the flag nothing is
//! traced and nothing more is printed.
//!
//! The counters come from each engine's inspect snapshot, asked once per
//! slot from a thread of its own: up to 20 engine-thread wake-ups per
//! second per device, counted among the run's "engine thread wake-ups".

use std::sync::mpsc;
use std::thread::JoinHandle;

use ibtca_device::engine::{EngineEvent, EngineHandle, Handoffs};
use ibtca_device::link::Link;
use ibtca_device::transport::RcCounters;

use super::*;

/// One slot.
pub(super) const SLOT: Duration = Duration::from_millis(50);

/// `--trace-slots`.
pub(super) static TRACE_SLOTS: AtomicBool = AtomicBool::new(false);

/// Messages the traced sender completed so far (`keep_busy` keeps it).
pub(super) static SLOT_DONE: AtomicU64 = AtomicU64::new(0);

/// Whether the SEND rate is traced slot by slot.
pub(super) fn trace_slots() -> bool {
    TRACE_SLOTS.load(Ordering::Relaxed)
}

/// Messages per second from which a slot counts as fast. On the 2-CPU
/// host the fast state ran 410-700 k/s and the slow one 10-40 k/s
/// (plan36 §1): any threshold between separates them; the rates are
/// printed, so another one can be applied afterwards.
const FAST_FROM: f64 = 150_000.0;

/// What one device's snapshot gave.
#[derive(Debug, Clone, Copy, Default)]
struct Side {
    /// Every RC QP's counters, summed.
    rc: RcCounters,
    handoffs: Handoffs,
    /// Packets its link sent.
    tx_packets: u64,
}

/// Both devices at one instant, and the messages A completed by then.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at: Duration,
    done: u64,
    a: Side,
    b: Side,
}

/// The thread that samples both devices at every slot's end.
pub(super) struct SlotTrace {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<Sample>>,
}

/// One device's engine and link.
type Device = (EngineHandle, Option<Arc<Link>>);

fn device(s: &TestServer) -> Option<Device> {
    Some((s.engine.clone()?, s.link.clone()))
}

/// The device's counters now (`None`: its engine did not answer).
fn side((engine, link): &Device) -> Option<Side> {
    let (tx, rx) = mpsc::sync_channel(1);
    engine.send(EngineEvent::Inspect(tx)).ok()?;
    let snap = rx.recv_timeout(Duration::from_secs(1)).ok()?;
    let mut rc = RcCounters::default();
    for c in snap.qps.iter().filter_map(|q| q.rc) {
        rc.naks_received.rnr += c.naks_received.rnr;
        rc.naks_sent.rnr += c.naks_sent.rnr;
        rc.timeouts += c.timeouts;
        rc.retransmits += c.retransmits;
        rc.duplicate_requests += c.duplicate_requests;
        rc.out_of_sequence += c.out_of_sequence;
    }
    Some(Side {
        rc,
        handoffs: engine.handoffs(),
        tx_packets: link.as_ref().map_or(0, |l| l.stats().tx_packets),
    })
}

impl SlotTrace {
    /// Starts sampling `servers` (A, B) every [`SLOT`], with the messages A
    /// completed ([`SLOT_DONE`]).
    pub(super) fn start(servers: &(TestServer, TestServer)) -> Option<Self> {
        let devices = (device(&servers.0)?, device(&servers.1)?);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = named("trace-slots", move || {
            let start = Instant::now();
            let mut samples = Vec::new();
            for k in 0u32.. {
                let due = start + SLOT * k;
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let at = start.elapsed();
                let done = SLOT_DONE.load(Ordering::Relaxed);
                let (Some(a), Some(b)) = (side(&devices.0), side(&devices.1)) else {
                    break;
                };
                samples.push(Sample { at, done, a, b });
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
            }
            samples
        });
        Some(SlotTrace { stop, thread })
    }

    /// Stops sampling (after one last sample); the trace, one line a slot,
    /// and a summary of the flips.
    pub(super) fn finish(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().expect("trace-slots thread");
        report(&samples)
    }
}

/// Vfio-user events (doorbells) and link events (at A: ACK batches), and
/// of those the ones the engine's owner ran.
fn events(h: &Handoffs) -> (u64, u64, u64) {
    (
        h.vfio_inline + h.vfio_by_owner + h.vfio_queued,
        h.link_inline + h.link_by_owner + h.link_queued,
        h.link_by_owner,
    )
}

/// One slot's line; whether it was fast, and whether A saw an RNR NAK or
/// an ACK timeout in it.
fn slot_line(p: &Sample, s: &Sample) -> (String, bool, bool) {
    let secs = (s.at - p.at).as_secs_f64().max(1e-9);
    let msgs = s.done - p.done;
    let rate = msgs as f64 / secs;
    let fast = rate >= FAST_FROM;
    let (a, b) = ((&p.a.rc, &s.a.rc), (&p.b.rc, &s.b.rc));
    let rnr = a.1.naks_received.rnr - a.0.naks_received.rnr;
    let timeouts = a.1.timeouts - a.0.timeouts;
    let (db0, ack0, own0) = events(&p.a.handoffs);
    let (db1, ack1, own1) = events(&s.a.handoffs);
    let (doorbells, batches) = (db1 - db0, ack1 - ack0);
    let per_batch = if batches == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}", doorbells as f64 / batches as f64)
    };
    let line = format!(
        "{:>6.0} {:>7} {:>7.0} {:>4} | {:>3} {:>3} {:>5} | {:>3} {:>4} {:>5} | {:>6} {:>5} {:>5} {:>4} | {:>5} {:>6}",
        s.at.as_secs_f64() * 1000.0,
        msgs,
        rate / 1000.0,
        if fast { "fast" } else { "slow" },
        rnr,
        timeouts,
        a.1.retransmits - a.0.retransmits,
        b.1.naks_sent.rnr - b.0.naks_sent.rnr,
        b.1.duplicate_requests - b.0.duplicate_requests,
        b.1.out_of_sequence - b.0.out_of_sequence,
        doorbells,
        batches,
        per_batch,
        own1 - own0,
        s.a.tx_packets - p.a.tx_packets,
        s.b.tx_packets - p.b.tx_packets,
    );
    (line, fast, rnr + timeouts > 0)
}

/// The trace of `samples`, one line per slot, then how often the run
/// flipped and whether an RNR NAK or timeout came with each flip to slow.
fn report(samples: &[Sample]) -> String {
    let mut out = format!(
        "SEND 64 B, per {} ms slot (--trace-slots; from the start of the warm-up; fast from \
         {:.0} k msg/s):\n\
         {:>6} {:>7} {:>7} {:>4} | {:>3} {:>3} {:>5} | {:>3} {:>4} {:>5} | {:>6} {:>5} {:>5} {:>4} | {:>5} {:>6}\n",
        SLOT.as_millis(),
        FAST_FROM / 1000.0,
        "t ms",
        "msgs",
        "k/s",
        "",
        "Arn",
        "Ato",
        "Aretx",
        "Brn",
        "Bdup",
        "Boos",
        "A db",
        "A ack",
        "db/ab",
        "own",
        "A→B",
        "B→A",
    );
    let mut states = Vec::new();
    for w in samples.windows(2) {
        let (line, fast, trouble) = slot_line(&w[0], &w[1]);
        out.push_str(&line);
        out.push('\n');
        states.push((fast, trouble));
    }
    out.push_str(&summary(&states));
    out
}

/// Slots fast and slow, flips each way, and of the flips to slow those
/// with an RNR NAK or ACK timeout at A in the flip's slot or the one
/// before.
fn summary(states: &[(bool, bool)]) -> String {
    let fast = states.iter().filter(|s| s.0).count();
    let mut to_slow = 0;
    let mut to_slow_after_trouble = 0;
    let mut to_fast = 0;
    for (i, w) in states.windows(2).enumerate() {
        match (w[0].0, w[1].0) {
            (true, false) => {
                to_slow += 1;
                if w[1].1 || w[0].1 || (i > 0 && states[i - 1].1) {
                    to_slow_after_trouble += 1;
                }
            }
            (false, true) => to_fast += 1,
            _ => {}
        }
    }
    let first = match states.first() {
        Some((true, _)) => "fast",
        Some((false, _)) => "slow",
        None => "-",
    };
    format!(
        "slots: {fast} fast, {} slow; first slot {first}; flips fast→slow {to_slow} ({} with an \
         RNR NAK or ACK timeout at A within the flip's slot or the two before), slow→fast \
         {to_fast}\n\
         columns: A's RNR NAKs received, ACK timeouts, packets resent; B's RNR NAKs sent, \
         duplicate and out-of-sequence requests; A's vfio-user events (trapped doorbells), \
         link events (ACK batches), doorbells per ACK batch, ACK batches run by the engine's \
         owner (the vfio-user thread); packets each link sent\n",
        states.len() - fast,
        to_slow_after_trouble,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flips_to_slow_are_told_apart_by_trouble_around_them() {
        // fast, fast+RNR, slow, fast, fast, slow (no trouble), slow→ fast
        let s = [
            (true, false),
            (true, true),
            (false, false),
            (true, false),
            (true, false),
            (false, false),
            (true, false),
        ];
        let text = summary(&s);
        assert!(
            text.starts_with("slots: 5 fast, 2 slow; first slot fast"),
            "{text}"
        );
        assert!(text.contains("fast→slow 2 (1 with"), "{text}");
        assert!(text.contains("slow→fast 2"), "{text}");
    }
}
