//! The device's local ACK timeout floor (`InstanceConfig::min_ack_timeout`,
//! `ibtca-device --min-ack-timeout-ms`): a QP that asks for a tiny ACK
//! timeout, against a peer that never answers, runs with the floor, so it
//! gives up no earlier than (retry_cnt + 1) × the floor after its post;
//! without a floor the same QP still gives up.

use std::time::{Duration, Instant};

use ibtca_device::instance::InstanceConfig;
use ibtca_device::verbs::abi::*;
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::send_wqe;
use ibtca_tests::{TempDir, TestServer};

/// The timeout exponent the QP asks for: 4.096 µs × 2 = 8 µs.
const TINY_TIMEOUT: u8 = 1;
/// Retries after the first try: three ACK timeouts in all.
const RETRY_CNT: u8 = 2;
/// A LID nothing answers at (the device has no link).
const SILENT_LID: u16 = 2;

/// The QP to RTS towards [`SILENT_LID`] with [`TINY_TIMEOUT`] and
/// [`RETRY_CNT`].
fn connect_to_silence(s: &mut Side) {
    let base = CmdModifyQp {
        qpn: s.qp.qpn.into(),
        ..Default::default()
    };
    let steps = [
        CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_ACCESS).into(),
            state: QPS_INIT,
            ..base
        },
        CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_PATH | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN).into(),
            state: QPS_RTR,
            path_mtu: MTU_4096,
            dlid: SILENT_LID.into(),
            dest_qpn: 0x99.into(),
            ..base
        },
        CmdModifyQp {
            attr_mask: (QP_ATTR_STATE | QP_ATTR_SQ_PSN | QP_ATTR_RETRY).into(),
            state: QPS_RTS,
            timeout: TINY_TIMEOUT,
            retry_cnt: RETRY_CNT,
            rnr_retry: 7,
            max_rd_atomic: 1,
            ..base
        },
    ];
    for step in &steps {
        s.g.modify_qp(step)
            .unwrap_or_else(|e| panic!("QP to state {}: status {}", step.state, e.0));
    }
}

/// A device with ACK timeout floor `floor` and no link: a SEND from its
/// QP to [`SILENT_LID`] must fail with WC_RETRY_EXC_ERR; returns how long
/// after its post.
fn send_into_silence(floor: Duration) -> Duration {
    let cfg = InstanceConfig {
        min_ack_timeout: floor,
        ..InstanceConfig::default()
    };
    let server = TestServer::start_instance(TempDir::new("ackfloor"), cfg);
    let mut s = Side::new(&server.socket, &PairOptions::default(), ALL_ACCESS);
    s.wait_active();
    connect_to_silence(&mut s);
    let posted = Instant::now();
    s.g.post_send(&mut s.qp, &send_wqe(WR_SEND, 7, s.buf, 64, s.lkey));
    s.expect_completion(7, WC_RETRY_EXC_ERR, Duration::from_secs(30));
    let took = posted.elapsed();
    eprintln!("floor {floor:?}: WC_RETRY_EXC_ERR {took:?} after the post");
    took
}

#[test]
fn a_tiny_ack_timeout_is_raised_to_the_devices_floor() {
    let floor = Duration::from_millis(300);
    let took = send_into_silence(floor);
    let least = floor * (u32::from(RETRY_CNT) + 1);
    assert!(
        took >= least,
        "WC_RETRY_EXC_ERR {took:?} after the post: the floor's (retry_cnt + 1) x {floor:?} \
         = {least:?} not waited"
    );
}

#[test]
fn without_a_floor_the_tiny_ack_timeout_still_fails_the_qp() {
    send_into_silence(Duration::ZERO);
}
