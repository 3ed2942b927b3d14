//! A stream of RDMA WRITEs whose peer dies, and what its requester must
//! report (issue 19, item 3): the WRITEs the peer acknowledged succeed,
//! the oldest unfinished one fails with WC_RETRY_EXC_ERR within
//! (retry_cnt + 1) × the ACK timeout of the death, every later one is
//! flushed (WC_WR_FLUSH_ERR), all in order.

use std::time::{Duration, Instant};

use ibtca_device::transport::config::DEFAULT_MIN_ACK_TIMEOUT_MS;
use ibtca_device::verbs::abi::*;

use crate::qp_retry::Retry;
use crate::sim_guest::{remote, send_wqe, Cq, Qp, SimGuest};

/// WRITEs in a stream, and the bytes of each (many packets, so that the
/// stream still runs when the peer dies).
pub const WRITES: u64 = 32;
/// Bytes per WRITE.
pub const LEN: u32 = 1 << 20;

const T: Duration = Duration::from_secs(20);

/// How long the requester of a stream tries before WC_RETRY_EXC_ERR: its
/// QP must be connected with [`Retry::PROMPT`] (2.1 s), each try at least
/// the ACK timeout floor of `ibtca-device` and `ibtca-fabric` (250 ms).
pub fn retry_bound() -> Duration {
    let floor = Duration::from_millis(DEFAULT_MIN_ACK_TIMEOUT_MS);
    let prompt = Retry::PROMPT;
    prompt
        .exhausted_after()
        .max(floor * (u32::from(prompt.retry_cnt) + 1))
}

/// How long a test waits for each completion of a stream whose peer died:
/// a hang guard, not a measurement. Ten times [`retry_bound`], a span a
/// device thread starved on a loaded two-CPU machine does not reach (its
/// eight ACK timers would each have to be late by two seconds and more),
/// and still short of the minute a peer's death once cost. What proves
/// that the requester gave up by its own retry count is the failure
/// itself (WC_RETRY_EXC_ERR, the only status the ACK timer gives) and, for
/// `ibtca-device` processes, the `timeouts=` and `retry_cnt=` of the QP
/// error it logs (`device_binary`, `vm_peer_death`).
pub fn hang_guard() -> Duration {
    retry_bound() * 10
}

/// Posts a stream of [`WRITES`] WRITEs (wr_id 0..) from `src` (address,
/// L_Key) on `qp` to `to` (address, R_Key), and waits for the first
/// completion, which must be a success: the stream runs.
pub fn start_stream(g: &mut SimGuest, qp: &mut Qp, cq: &mut Cq, src: (u64, u32), to: (u64, u32)) {
    for i in 0..WRITES {
        let w = remote(send_wqe(WR_RDMA_WRITE, i, src.0, LEN, src.1), to.0, to.1);
        g.post_send(qp, &w);
    }
    let c = g.poll_cq(cq, T).expect("the first WRITE completes");
    assert_eq!((c.wr_id.to_native(), c.status), (0, WC_SUCCESS));
}

/// Takes the rest of the stream's completions: successes (WRITEs the peer
/// acknowledged before it died), then one WC_RETRY_EXC_ERR, then
/// WC_WR_FLUSH_ERR for every later WRITE; all in order, nothing after
/// them. Each completion is waited for up to [`hang_guard`]; the time from
/// `died` to the failure is printed, not asserted. Returns how many WRITEs
/// failed or were flushed (not the first success).
pub fn expect_retry_exceeded(g: &mut SimGuest, cq: &mut Cq, died: Instant, what: &str) -> u64 {
    let mut ok = 1;
    let mut failed_at = None;
    for i in 1..WRITES {
        let c = g
            .poll_cq(cq, hang_guard())
            .unwrap_or_else(|| panic!("{what}: no completion for WRITE {i}"));
        assert_eq!(c.wr_id.to_native(), i, "{what}: completions in order");
        assert_eq!(c.opcode, WC_RDMA_WRITE, "{what}: WRITE {i}");
        match (failed_at, c.status) {
            (None, WC_SUCCESS) => ok += 1,
            (None, WC_RETRY_EXC_ERR) => failed_at = Some(died.elapsed()),
            (Some(_), WC_WR_FLUSH_ERR) => {}
            (_, s) => panic!(
                "{what}: WRITE {i} completed with {} (failed: {failed_at:?})",
                wc_status_name(s)
            ),
        }
    }
    let took = failed_at.unwrap_or_else(|| panic!("{what}: every WRITE succeeded"));
    eprintln!(
        "{what}: {ok} WRITEs done, then WC_RETRY_EXC_ERR after {:.3} s \
         ((retry_cnt + 1) x timeout = {:?}), {} flushed",
        took.as_secs_f64(),
        retry_bound(),
        WRITES - ok - 1
    );
    assert!(
        g.poll_cq(cq, Duration::from_millis(200)).is_none(),
        "{what}: nothing after the flushes"
    );
    WRITES - ok
}
