//! Per-QP connection parameters of an RC QP and its counters.

use std::time::Duration;

use ibtca_protocol::headers::Bth;

use super::psn;
use ibtca_abi::verbs::{ACK_COALESCED, ACK_PER_PACKET};

/// When ACKs are asked for and sent (seed 002 item 4), per QP. Whatever
/// the policy, the requester asks for an ACK at least every quarter of its
/// send window (so the window reopens in steps) and on the last packet it
/// has to send; the responder ACKs every packet with AckReq and every
/// READ/atomic with its responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckPolicy {
    /// One ACK per message: AckReq on the last packet of each message,
    /// and the responder ACKs every message's last packet. The default.
    PerMessage,
    /// One ACK per packet: AckReq on every packet (seed 002 Table 1).
    PerPacket,
    /// One ACK every N packets, across message boundaries: AckReq on every
    /// Nth packet only, and the responder ACKs only packets with AckReq
    /// (a message's end alone is not ACKed). The MSN in each ACK completes
    /// every message it covers at once.
    Coalesced(u16),
}

impl AckPolicy {
    /// The policy MODIFY_QP names (`ack_mode` IBTCA_ACK_*, `ack_every`);
    /// an unknown mode, which MODIFY_QP refuses, means one per message.
    pub fn from_abi(mode: u8, every: u16) -> Self {
        match mode {
            ACK_PER_PACKET => AckPolicy::PerPacket,
            ACK_COALESCED => AckPolicy::Coalesced(every),
            _ => AckPolicy::PerMessage,
        }
    }

    /// Packets between two AckReqs the requester sets unasked, for a send
    /// window of `window` packets.
    pub(crate) fn ack_req_every(self, window: u32) -> i32 {
        let quarter = (window / 4).max(1);
        let every = match self {
            AckPolicy::PerPacket => 1,
            AckPolicy::PerMessage => quarter,
            AckPolicy::Coalesced(n) => u32::from(n).clamp(1, quarter),
        };
        every as i32
    }

    /// Whether the responder ACKs the last packet of every message even
    /// without AckReq.
    pub(crate) fn acks_message_ends(self) -> bool {
        !matches!(self, AckPolicy::Coalesced(_))
    }
}

/// Connection parameters of an RC QP (what MODIFY_QP to RTR/RTS sets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RcConfig {
    /// Local QP number (24 bits).
    pub qpn: u32,
    /// Peer QP number (24 bits).
    pub dest_qpn: u32,
    /// This port's LID (LRH SLID of sent packets, DLID of accepted ones).
    pub slid: u16,
    /// The peer port's LID.
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Partition key (0xffff: default partition, full member).
    pub pkey: u16,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096.
    pub path_mtu: u32,
    /// First PSN the requester sends.
    pub sq_psn: u32,
    /// First PSN the responder expects.
    pub rq_psn: u32,
    /// The MSN before the first completed message, agreed by both ends of
    /// the connection (seed 002 item 2): the responder counts its completed
    /// messages from it, the requester expects the peer's ACKs to. 0 (IBA,
    /// rxe: the first message is acknowledged with MSN 1) by default;
    /// 0xFFFFFF is the seed's choice (the first is acknowledged with 0).
    pub initial_msn: u32,
    /// Transport retries (ACK timeout, PSN sequence NAK) before
    /// WC_RETRY_EXC_ERR (0-7).
    pub retry_cnt: u8,
    /// RNR retries before WC_RNR_RETRY_EXC_ERR (0-7; 7 = forever).
    pub rnr_retry: u8,
    /// RNR NAK timer code this responder sends (0-31, IBA Table 45).
    pub min_rnr_timer: u8,
    /// Time without progress before the requester retransmits; `None`:
    /// never (timeout exponent 0, IBA's infinite timeout).
    pub ack_timeout: Option<Duration>,
    /// RDMA READs and atomics this requester keeps outstanding.
    pub max_rd_atomic: u8,
    /// Responder resources: RDMA READs and atomics this responder holds
    /// unanswered (one more is NAKed invalid request; at most 16, the key
    /// memory's READ slots); also the atomic results kept to replay
    /// duplicates.
    pub max_dest_rd_atomic: u8,
    /// Most unacknowledged PSNs the requester keeps in flight (seed 002's
    /// sliding window of N packets); 1 is the seed's stop-and-wait: one
    /// packet, then its ACK or the response timeout (`ack_timeout`).
    pub send_window: u32,
    /// When ACKs are asked for and sent.
    pub ack_policy: AckPolicy,
}

/// Bytes a device QP's requester keeps in flight (see
/// [`RcConfig::send_window_for_mtu`]).
pub const SEND_WINDOW_BYTES: u32 = 4 << 20;

impl RcConfig {
    /// Defaults for a QP `qpn` talking to `dest_qpn`: MTU 1024, PSNs 0,
    /// MSN 0, 7 retries, infinite RNR retries, RNR timer code 1
    /// (10 µs), 10 ms ACK timeout, 3 outstanding reads each way, window 128,
    /// one ACK per message.
    pub fn new(qpn: u32, dest_qpn: u32) -> Self {
        Self {
            qpn,
            dest_qpn,
            slid: 0,
            dlid: 0,
            sl: 0,
            pkey: Bth::DEFAULT_PKEY,
            path_mtu: 1024,
            sq_psn: 0,
            rq_psn: 0,
            initial_msn: 0,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            ack_timeout: Some(Duration::from_millis(10)),
            max_rd_atomic: 3,
            max_dest_rd_atomic: 3,
            send_window: 128,
            ack_policy: AckPolicy::PerMessage,
        }
    }

    /// The send window the device gives a QP with `path_mtu`: about
    /// [`SEND_WINDOW_BYTES`] in flight, 128..=1024 packets. Between two
    /// device instances the round trip of a data packet and its ACK costs
    /// a few hundred µs of thread hand-offs, so a window of 128 packets (512
    /// KiB at MTU 4096) capped a bulk transfer near 1 GiB/s, and one of 2
    /// MiB still left the sending engine waiting for ACKs ~3 k times a
    /// second at ~3.5 GiB/s (`ibtca-bench verbs`, 2 CPUs); 1024 packets
    /// of the smallest MTUs stay well inside the link's 4096-packet send
    /// queue.
    pub fn send_window_for_mtu(path_mtu: u32) -> u32 {
        (SEND_WINDOW_BYTES / path_mtu.max(1)).clamp(128, 1024)
    }

    /// Checks the ranges the transport relies on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(256..=4096).contains(&self.path_mtu) || !self.path_mtu.is_power_of_two() {
            return Err(ConfigError::PathMtu(self.path_mtu));
        }
        for (name, v) in [
            ("qpn", self.qpn),
            ("dest_qpn", self.dest_qpn),
            ("sq_psn", self.sq_psn),
            ("rq_psn", self.rq_psn),
            ("initial_msn", self.initial_msn),
        ] {
            if v > psn::MASK {
                return Err(ConfigError::TooWide(name, v));
            }
        }
        if self.retry_cnt > 7 || self.rnr_retry > 7 || self.min_rnr_timer > 31 {
            return Err(ConfigError::RetryField);
        }
        if self.send_window == 0 || self.send_window >= psn::HALF / 2 || self.max_rd_atomic == 0 {
            return Err(ConfigError::Window);
        }
        if self.ack_policy == AckPolicy::Coalesced(0) {
            return Err(ConfigError::AckEvery);
        }
        Ok(())
    }
}

/// Path MTU in bytes for an IBTCA_MTU_* code (1 = 256 … 5 = 4096).
pub fn mtu_from_code(code: u8) -> Option<u32> {
    (1..=5).contains(&code).then(|| 128u32 << code)
}

/// Local ACK timeout for the 5-bit exponent of MODIFY_QP: 4.096 µs ×
/// 2^`exponent` (IBA §11.2.4.2; 0 means "infinite", given as `None`).
pub fn ack_timeout_from_exponent(exponent: u8) -> Option<Duration> {
    match exponent & 31 {
        0 => None,
        e => Some(Duration::from_nanos(4096u64 << e)),
    }
}

/// The local ACK timeout floor, in ms, of `ibtca-device` and of the devices
/// `ibtca-fabric` starts: beside TCG guests on a loaded host a QP's 67 ms
/// × 8 tries (ibv_rc_pingpong's) is too short to outlast a starved thread.
pub const DEFAULT_MIN_ACK_TIMEOUT_MS: u64 = 250;

/// The largest floor a device accepts, in ms.
pub const MAX_MIN_ACK_TIMEOUT_MS: u64 = 60_000;

/// The local ACK timeout a QP runs with: the one its `exponent` asks for
/// ([`ack_timeout_from_exponent`]), raised to the device's `floor`
/// (`ibtca-device --min-ack-timeout-ms`), as real HCAs enforce a minimum.
/// Infinite (exponent 0) stays infinite; a zero floor changes nothing.
pub fn local_ack_timeout(exponent: u8, floor: Duration) -> Option<Duration> {
    ack_timeout_from_exponent(exponent).map(|t| t.max(floor))
}

/// RNR NAK timer code to a delay (IBA vol 1 Table 45; code 0 is the
/// longest, 655.36 ms).
pub fn rnr_delay(code: u8) -> Duration {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    Duration::from_micros(u64::from(US[usize::from(code & 31)]))
}

/// A configuration the transport cannot run with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a power of two in 256..=4096.
    #[error("path MTU {0} is not 256, 512, 1024, 2048 or 4096")]
    PathMtu(u32),
    /// A 24-bit field has more bits.
    #[error("{0} = {1:#x} does not fit 24 bits")]
    TooWide(&'static str, u32),
    /// retry_cnt, rnr_retry or min_rnr_timer out of range.
    #[error("retry_cnt and rnr_retry must be 0-7, min_rnr_timer 0-31")]
    RetryField,
    /// Send window empty or too wide for 24-bit PSN comparison, or no
    /// outstanding reads allowed.
    #[error("send window must be 1..2^22 and max_rd_atomic at least 1")]
    Window,
    /// A coalesced ACK policy of 0 packets.
    #[error("a coalesced ACK policy needs an ACK every 1 or more packets")]
    AckEvery,
}

/// NAKs by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NakCounts {
    /// PSN sequence error (0x60).
    pub psn_seq: u64,
    /// Receiver not ready.
    pub rnr: u64,
    /// Invalid request (0x61).
    pub invalid_request: u64,
    /// Remote access error (0x62).
    pub remote_access: u64,
    /// Remote operational error (0x63) and anything else.
    pub remote_op: u64,
}

/// What an RC QP has done; errors are counted here, not propagated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RcCounters {
    /// Packets handed to the link (first transmissions and retransmissions).
    pub packets_sent: u64,
    /// Packets accepted by [`super::RcQp::on_packet`] for processing.
    pub packets_received: u64,
    /// Packets dropped before processing: wrong QP/LID/P_Key, not RC, QP
    /// in error.
    pub packets_dropped: u64,
    /// Request packets sent again (go-back-N, timeout or RNR).
    pub retransmits: u64,
    /// ACK timeouts that led to a retransmission.
    pub timeouts: u64,
    /// ACKs sent (ATOMIC ACKNOWLEDGE included, NAKs not).
    pub acks_sent: u64,
    /// NAKs the responder sent.
    pub naks_sent: NakCounts,
    /// NAKs the completer received.
    pub naks_received: NakCounts,
    /// Duplicate requests (PSN before the expected one) seen by the
    /// responder.
    pub duplicate_requests: u64,
    /// Out-of-sequence requests (PSN after the expected one) dropped.
    pub out_of_sequence: u64,
    /// Duplicate, stale or unexpected responses the completer ignored.
    pub duplicate_responses: u64,
    /// Packets that could not be encoded.
    pub build_errors: u64,
    /// Send WQEs failed with WC_RETRY_EXC_ERR: the peer stopped answering
    /// (ACK timeouts or PSN sequence NAKs past retry_cnt).
    pub retry_exceeded: u64,
    /// Send completions with WC_WR_FLUSH_ERR.
    pub flushed_sends: u64,
    /// Receive completions with WC_WR_FLUSH_ERR.
    pub flushed_recvs: u64,
    /// READ responses not sent because the quasi-WQE read from guest
    /// memory differed from the responder's record (or was gone): each
    /// ends the QP with NAK remote operational error.
    pub quasi_mismatches: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_codes_and_rnr_timer() {
        assert_eq!(mtu_from_code(1), Some(256));
        assert_eq!(mtu_from_code(3), Some(1024));
        assert_eq!(mtu_from_code(5), Some(4096));
        assert_eq!(mtu_from_code(0), None);
        assert_eq!(mtu_from_code(6), None);
        assert_eq!(rnr_delay(0), Duration::from_micros(655_360));
        assert_eq!(rnr_delay(1), Duration::from_micros(10));
        assert_eq!(rnr_delay(14), Duration::from_micros(1_280));
        assert_eq!(rnr_delay(31), Duration::from_micros(491_520));
        assert_eq!(ack_timeout_from_exponent(0), None);
        assert_eq!(
            ack_timeout_from_exponent(1),
            Some(Duration::from_nanos(8192))
        );
        assert_eq!(
            ack_timeout_from_exponent(14),
            Some(Duration::from_nanos(67_108_864))
        );
    }

    #[test]
    fn the_ack_timeout_floor_raises_short_timeouts_only() {
        let floor = Duration::from_millis(250);
        // 8.192 µs asked: the floor.
        assert_eq!(local_ack_timeout(1, floor), Some(floor));
        // 67 ms (exponent 14, ibv_rc_pingpong's) asked: the floor.
        assert_eq!(local_ack_timeout(14, floor), Some(floor));
        // 268 ms (exponent 16) is above the floor: as asked.
        assert_eq!(
            local_ack_timeout(16, floor),
            Some(Duration::from_nanos(4096 << 16))
        );
        // Infinite stays infinite.
        assert_eq!(local_ack_timeout(0, floor), None);
        // No floor: as asked.
        assert_eq!(
            local_ack_timeout(1, Duration::ZERO),
            Some(Duration::from_nanos(8192))
        );
        assert_eq!(local_ack_timeout(0, Duration::ZERO), None);
    }

    #[test]
    fn validation() {
        let ok = RcConfig::new(1, 2);
        assert_eq!(ok.validate(), Ok(()));
        let bad = |f: fn(&mut RcConfig)| {
            let mut c = ok.clone();
            f(&mut c);
            c.validate()
        };
        assert_eq!(bad(|c| c.path_mtu = 1500), Err(ConfigError::PathMtu(1500)));
        assert_eq!(bad(|c| c.path_mtu = 8192), Err(ConfigError::PathMtu(8192)));
        assert!(matches!(
            bad(|c| c.sq_psn = 1 << 24),
            Err(ConfigError::TooWide(..))
        ));
        assert_eq!(bad(|c| c.rnr_retry = 8), Err(ConfigError::RetryField));
        assert_eq!(bad(|c| c.send_window = 0), Err(ConfigError::Window));
        assert_eq!(
            bad(|c| c.ack_policy = AckPolicy::Coalesced(0)),
            Err(ConfigError::AckEvery)
        );
        assert_eq!(bad(|c| c.send_window = 1), Ok(()), "stop-and-wait");
        assert_eq!(AckPolicy::PerMessage.ack_req_every(1024), 256);
        assert_eq!(AckPolicy::PerPacket.ack_req_every(1024), 1);
        assert_eq!(AckPolicy::Coalesced(8).ack_req_every(1024), 8);
        assert_eq!(AckPolicy::Coalesced(1000).ack_req_every(128), 32);
        assert_eq!(AckPolicy::PerMessage.ack_req_every(1), 1);
        assert_eq!(AckPolicy::from_abi(ACK_PER_PACKET, 9), AckPolicy::PerPacket);
        assert_eq!(
            AckPolicy::from_abi(ACK_COALESCED, 9),
            AckPolicy::Coalesced(9)
        );
        assert_eq!(AckPolicy::from_abi(0, 9), AckPolicy::PerMessage);
        for (mtu, window) in [(4096, 1024), (2048, 1024), (256, 1024)] {
            assert_eq!(RcConfig::send_window_for_mtu(mtu), window, "MTU {mtu}");
            let mut c = RcConfig::new(1, 2);
            (c.path_mtu, c.send_window) = (mtu, window);
            assert_eq!(c.validate(), Ok(()));
        }
    }
}
