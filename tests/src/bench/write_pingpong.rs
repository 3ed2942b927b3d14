//! `ibtca-bench verbs`' WRITE ping-pong row: a 64 B RDMA WRITE answered
//! by an RDMA WRITE, as perftest's `ib_write_lat` does it. Each side polls
//! the last 8 bytes of its own buffer for the sequence number the peer
//! wrote, so a one-way trip is doorbell → device A → link → device B →
//! B's memory, with no completion on the receiving side.

use super::*;

/// Latencies of a ping-pong: one way (round trip / 2), µs.
#[derive(Debug, Clone, Copy)]
pub(super) struct PingPong {
    pub(super) median_us: f64,
    pub(super) p99_us: f64,
    pub(super) round_trips: usize,
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
        }
    }
}

/// Where in each side's buffer the peer's message lands.
const SLOT: u64 = 2 << 20;

/// Waits until the 8 bytes before `SLOT + size` on `s` hold `seq` (false:
/// `stop` was set or 20 s passed).
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
        std::hint::spin_loop();
    }
}

/// Posts one signaled WRITE of `size` bytes carrying `seq` from `s` into the
/// peer's slot (`dst`, `rkey`), taking the completions of earlier ones.
fn write_seq(s: &mut Side, size: u32, seq: u64, (dst, rkey): (u64, u64)) {
    let src = s.buf + (1 << 20);
    let mut msg = vec![0u8; size as usize];
    msg[size as usize - 8..].copy_from_slice(&seq.to_le_bytes());
    s.g.write(src, &msg);
    let w = send_wqe(WR_RDMA_WRITE, seq, src, size, s.lkey);
    s.g.post_send_batch(&mut s.qp, &[remote(w, dst + SLOT, rkey as u32)]);
    while let Some(c) = s.g.try_poll_cq(&mut s.cq) {
        assert_eq!(c.status, WC_SUCCESS, "{c:?}");
    }
}

/// `size`-byte RDMA WRITE ping-pong A → B → A for `secs` (after a tenth of
/// that as warm-up).
pub(super) fn verbs_write_pingpong(size: u32, secs: f64) -> PingPong {
    assert!(size >= 8, "the sequence number takes 8 bytes");
    let Pair {
        mut a,
        mut b,
        servers: _servers,
        _dir,
    } = verbs_pair(WRITE_QP_LOG);
    let to_a = (a.buf, u64::from(a.rkey));
    let to_b = (b.buf, u64::from(b.rkey));
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    let echo = named("guest-b", move || {
        let mut seq = 1u64;
        while wait_for(&b, size, seq, &stop_b) {
            write_seq(&mut b, size, seq, to_a);
            seq += 1;
        }
        // Leave the QP drained so the pair shuts down quietly.
        while b.g.try_poll_cq(&mut b.cq).is_some() {}
    });
    let never = AtomicBool::new(false);
    let mut samples = Vec::new();
    let warm = Instant::now() + Duration::from_secs_f64(secs / 10.0);
    let end = warm + Duration::from_secs_f64(secs);
    let mut seq = 1u64;
    loop {
        let t = Instant::now();
        if t >= end {
            break;
        }
        write_seq(&mut a, size, seq, to_b);
        assert!(wait_for(&a, size, seq, &never), "no reply to WRITE {seq}");
        if t >= warm {
            samples.push(t.elapsed().as_nanos() as u64);
        }
        seq += 1;
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().expect("echo thread");
    PingPong::from_round_trips(samples)
}
