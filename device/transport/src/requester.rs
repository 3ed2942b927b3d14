//! The requester: turns send WQEs into request packets. It owns the send
//! queue state the completer works on: WQEs not started yet (`pending`),
//! WQEs with PSNs (`inflight`, oldest first, kept whole so any packet can be
//! rebuilt for go-back-N), and the PSN cursors:
//!
//! ```text
//!   una ≤ tx_psn ≤ tx_high ≤ next_psn
//!   una      oldest PSN not yet acknowledged
//!   tx_psn   next PSN to (re)transmit
//!   tx_high  one past the highest PSN ever transmitted
//!   next_psn first PSN of the next WQE to start
//! ```
//!
//! `una ≤ executed ≤ tx_high`: `executed` is one past the newest PSN a
//! response said was executed; `una` stays behind it only at a READ or
//! atomic whose responses are missing (`ack_through`).
//!
//! A send or write takes one PSN per packet; a READ takes one PSN per
//! response packet but is a single request packet; an atomic takes one.

use std::collections::VecDeque;

use ibtca_protocol::headers::{AtomicEth, ExtHeaders, Ieth, ImmDt, Reth};
use ibtca_protocol::opcode::Position;
use ibtca_protocol::Opcode;

use super::config::{AckPolicy, RcConfig, RcCounters};
use super::psn;
use super::segmenter::{self, DataKind, Source};
use super::{CqKind, QpEnv};
use crate::SendWr;
use ibtca_abi::verbs::*;

/// Largest message (IBA: 2^31 bytes).
pub const MAX_MESSAGE: u64 = 1 << 31;

/// What a send WQE asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WrKind {
    Send {
        imm: bool,
    },
    Write {
        imm: bool,
    },
    Read,
    CompareSwap,
    FetchAdd,
    /// BIND_MW: executed locally in send-queue order, no packets.
    BindMw,
    /// LOCAL_INV: executed locally in send-queue order, no packets.
    LocalInv,
    /// REG_MR (fast registration): executed locally in send-queue order.
    RegMr,
}

impl WrKind {
    fn from_opcode(op: u8) -> Option<Self> {
        Some(match op {
            WR_SEND | WR_SEND_INV => WrKind::Send { imm: false },
            WR_SEND_IMM => WrKind::Send { imm: true },
            WR_RDMA_WRITE | WR_DRDMA_WRITE => WrKind::Write { imm: false },
            WR_RDMA_WRITE_IMM => WrKind::Write { imm: true },
            WR_RDMA_READ | WR_DRDMA_READ => WrKind::Read,
            WR_ATOMIC_CMP_SWP => WrKind::CompareSwap,
            WR_ATOMIC_FETCH_ADD => WrKind::FetchAdd,
            WR_BIND_MW => WrKind::BindMw,
            WR_LOCAL_INV => WrKind::LocalInv,
            WR_REG_MR => WrKind::RegMr,
            _ => return None,
        })
    }

    /// READs and atomics: completed by responses, limited by max_rd_atomic.
    pub(crate) fn needs_response(self) -> bool {
        matches!(self, WrKind::Read | WrKind::CompareSwap | WrKind::FetchAdd)
    }

    fn wc_opcode(self) -> u8 {
        match self {
            WrKind::Send { .. } => WC_SEND,
            WrKind::Write { .. } => WC_RDMA_WRITE,
            WrKind::Read => WC_RDMA_READ,
            WrKind::CompareSwap => WC_COMP_SWAP,
            WrKind::FetchAdd => WC_FETCH_ADD,
            WrKind::BindMw => WC_BIND_MW,
            WrKind::LocalInv => WC_LOCAL_INV,
            WrKind::RegMr => WC_REG_MR,
        }
    }

    /// Executed by the device itself, without packets.
    fn is_local(self) -> bool {
        matches!(self, WrKind::BindMw | WrKind::LocalInv | WrKind::RegMr)
    }
}

/// A started WQE.
#[derive(Debug, Clone)]
pub(crate) struct Flight {
    pub(crate) wqe: SendWr,
    pub(crate) kind: WrKind,
    /// Message length in bytes (8 for atomics).
    pub(crate) len: u64,
    pub(crate) first_psn: u32,
    /// PSNs taken (0 for a WQE refused before it got any).
    pub(crate) npsn: u32,
    /// Response packets accepted (READ, atomic).
    pub(crate) received: u32,
    /// Completion status once the WQE has failed.
    pub(crate) error: Option<u8>,
    /// BIND_MW: the window's new key (reported in the CQE's imm_data).
    pub(crate) new_rkey: Option<u32>,
}

impl Flight {
    /// One past the last PSN.
    pub(crate) fn end_psn(&self) -> u32 {
        psn::add(self.first_psn, self.npsn)
    }

    pub(crate) fn contains(&self, p: u32) -> bool {
        self.npsn > 0 && psn::in_window(p, self.first_psn, self.end_psn())
    }

    /// A READ or atomic still waiting for responses.
    pub(crate) fn awaits_response(&self) -> bool {
        self.kind.needs_response() && self.received < self.npsn && self.error.is_none()
    }

    /// The WQE's SGEs (none for a count [`Requester::start`] refused).
    pub(crate) fn sges(&self) -> &[Sge] {
        self.wqe.sges().unwrap_or(&[])
    }

    /// Where the payload of a SEND or WRITE comes from: the WQE's inline
    /// bytes or its SGEs.
    fn source(&self) -> Source<'_> {
        match self.wqe.inline_data() {
            Some(data) => Source::Inline(data),
            None => Source::Local(self.sges()),
        }
    }

    pub(crate) fn signaled(&self) -> bool {
        self.wqe.flags & WQE_F_SIGNALED != 0
    }

    /// The completion for this WQE with `status`.
    pub(crate) fn cqe(&self, qpn: u32, status: u8) -> Cqe {
        let byte_len = match self.kind {
            WrKind::CompareSwap | WrKind::FetchAdd => 8,
            _ => u32::try_from(self.len).unwrap_or(u32::MAX),
        };
        let mut cqe = Cqe {
            wr_id: self.wqe.wr_id,
            byte_len: byte_len.into(),
            qpn: qpn.into(),
            opcode: match self.wqe.opcode {
                WR_DRDMA_WRITE => WC_DRDMA_WRITE,
                WR_DRDMA_READ => WC_DRDMA_READ,
                _ => self.kind.wc_opcode(),
            },
            status,
            ..Cqe::default()
        };
        if let (Some(k), WC_SUCCESS) = (self.new_rkey, status) {
            cqe.imm_data = k.into();
            cqe.flags |= CQE_F_IMM;
        }
        cqe
    }
}

/// What the requester knows of the responder's MSN (what completes WQEs:
/// [`super::msn`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MsnState {
    /// The last MSN the responder reported.
    pub(crate) acked: u32,
    /// Messages at the front of the in-flight queue that the MSN has
    /// confirmed and that have not been retired yet.
    pub(crate) confirmed: usize,
    /// Messages (WQEs that took PSNs) in the in-flight queue.
    pub(crate) messages: usize,
}

impl MsnState {
    pub(crate) fn new(initial_msn: u32) -> Self {
        Self {
            acked: initial_msn & psn::MASK,
            confirmed: 0,
            messages: 0,
        }
    }

    /// Messages sent whose MSN has not come yet.
    pub(crate) fn unconfirmed(&self) -> bool {
        self.messages > self.confirmed
    }
}

/// Requester state (see the module documentation).
#[derive(Debug)]
pub(crate) struct Requester {
    pending: VecDeque<SendWr>,
    pub(crate) inflight: VecDeque<Flight>,
    pub(crate) next_psn: u32,
    pub(crate) tx_psn: u32,
    pub(crate) tx_high: u32,
    pub(crate) una: u32,
    /// One past the newest PSN the responder said it executed. `una` moves
    /// up to it once the READs and atomics before it have their
    /// responses: their SENDs and WRITEs may have completed by MSN
    /// meanwhile, and their PSNs have nothing left to resend.
    pub(crate) executed: u32,
    /// The last PSN sent with AckReq.
    ack_req_psn: u32,
    /// After an ACK timeout, how many PSNs from `una` on may be in flight
    /// (retransmissions and new packets alike), doubled by every
    /// acknowledgement that moves `una` until it reaches the window
    /// (`None`: the window alone limits). See [`Requester::restart_slowly`].
    pub(crate) allowance: Option<u32>,
    /// The responder's MSN as the requester has seen it: what completes.
    pub(crate) msn: MsnState,
}

impl Requester {
    pub(crate) fn new(sq_psn: u32, initial_msn: u32) -> Self {
        let p = sq_psn & psn::MASK;
        Self {
            pending: VecDeque::new(),
            inflight: VecDeque::new(),
            next_psn: p,
            tx_psn: p,
            tx_high: p,
            una: p,
            executed: p,
            ack_req_psn: p,
            allowance: None,
            msn: MsnState::new(initial_msn),
        }
    }

    pub(crate) fn post(&mut self, wqe: SendWr) {
        self.pending.push_back(wqe);
    }

    /// Packets sent and not yet acknowledged, or messages whose MSN has
    /// not come: what the ACK timer waits for.
    pub(crate) fn outstanding(&self) -> bool {
        psn::before(self.una, self.tx_high) || self.msn.unconfirmed()
    }

    /// WQEs posted and not completed.
    pub(crate) fn queued(&self) -> usize {
        self.pending.len() + self.inflight.len()
    }

    /// Go back N: resend from the oldest unacknowledged PSN.
    pub(crate) fn rewind(&mut self) {
        self.tx_psn = self.una;
    }

    /// Go back N after an ACK timeout, one packet at first (with AckReq),
    /// twice as many after each acknowledgement that moves `una`
    /// ([`Requester::widen`]), as TCP restarts after a retransmission
    /// timeout; an acknowledgement past what was resent ends that (the
    /// first transmission was only late: `ack_through`). A timeout need
    /// not mean that packets were lost: between devices the packets of a
    /// whole window (4 MiB) may still be queued on a slow link or a busy
    /// peer, and resending the window behind them doubled that queue at
    /// every timeout until the retries ran out on a peer that was alive.
    /// A lost window comes back in a few round trips; a dead peer gets one
    /// packet per retry.
    pub(crate) fn restart_slowly(&mut self) {
        self.tx_psn = self.una;
        self.allowance = Some(1);
        if self.una == self.next_psn && self.msn.unconfirmed() {
            // Every packet was acknowledged but the MSN of the last
            // messages never came: resend the last packet, whose duplicate
            // the responder answers with an ACK carrying its MSN.
            self.tx_psn = psn::sub(self.tx_high, 1);
        }
    }

    /// `una` moved: a restart after a timeout sends twice as much.
    pub(crate) fn widen(&mut self, window: u32) {
        if let Some(a) = self.allowance {
            let a = a.saturating_mul(2);
            self.allowance = (a < window).then_some(a);
        }
    }

    /// The started WQE that took PSN `p`. The newest is tried first: new
    /// packets come from it, so sending stays O(1) with a deep queue; a
    /// retransmission after a rewind finds its WQE near the front.
    pub(crate) fn find(&self, p: u32) -> Option<usize> {
        let last = self.inflight.len().checked_sub(1)?;
        if self.inflight.get(last).is_some_and(|f| f.contains(p)) {
            return Some(last);
        }
        self.inflight.iter().position(|f| f.contains(p))
    }

    /// The oldest READ or atomic still waiting for responses.
    pub(crate) fn first_awaiting(&self) -> Option<usize> {
        self.inflight.iter().position(Flight::awaits_response)
    }

    fn outstanding_rd_atomic(&self) -> usize {
        self.inflight.iter().filter(|f| f.awaits_response()).count()
    }

    /// Assigns PSNs to `wqe`, or a local error status if it cannot be sent.
    fn start(&self, wr: SendWr, cfg: &RcConfig) -> Flight {
        let wqe = *wr.wqe();
        let sges_fit = wr.sges().is_some();
        let mut f = Flight {
            wqe: wr,
            kind: WrKind::Send { imm: false },
            len: 0,
            first_psn: self.next_psn,
            npsn: 0,
            received: 0,
            error: None,
            new_rkey: None,
        };
        let Some(kind) = WrKind::from_opcode(wqe.opcode) else {
            f.error = Some(WC_LOC_QP_OP_ERR);
            return f;
        };
        f.kind = kind;
        if kind.is_local() {
            return f; // no PSNs; executed by `pump` in order
        }
        // More SGEs than its stride held (or the device's most).
        if !sges_fit && wqe.flags & WQE_F_INLINE == 0 {
            f.error = Some(WC_LOC_LEN_ERR);
            return f;
        }
        if wqe.flags & WQE_F_INLINE != 0 {
            // Inline data is a SEND's or WRITE's payload, at most the SGE area.
            if !matches!(kind, WrKind::Send { .. } | WrKind::Write { .. })
                || matches!(wqe.opcode, WR_DRDMA_WRITE)
            {
                f.error = Some(WC_LOC_QP_OP_ERR);
                return f;
            }
            if usize::from(wqe.inline_len) > MAX_INLINE {
                f.error = Some(WC_LOC_LEN_ERR);
                return f;
            }
        }
        if wqe.flags & WQE_F_INLINE == 0 && wqe.inline_len != 0 {
            f.error = Some(WC_LOC_QP_OP_ERR);
            return f;
        }
        let sge_len: u64 = match wqe.inline_data() {
            Some(data) => data.len() as u64,
            None => f
                .sges()
                .iter()
                .map(|s| u64::from(s.length.to_native()))
                .sum(),
        };
        f.len = match kind {
            WrKind::CompareSwap | WrKind::FetchAdd => {
                if wqe.num_sge == 0 || wqe.sge[0].length.to_native() < 8 {
                    f.error = Some(WC_LOC_LEN_ERR);
                    return f;
                }
                8
            }
            _ => sge_len,
        };
        if f.len > MAX_MESSAGE {
            f.error = Some(WC_LOC_LEN_ERR);
            return f;
        }
        f.npsn = match kind {
            WrKind::CompareSwap | WrKind::FetchAdd => 1,
            _ => segmenter::packet_count(f.len, cfg.path_mtu),
        };
        f
    }

    /// Sends what the window, max_rd_atomic and fences allow: first any
    /// packets being resent after a rewind, then new WQEs.
    pub(crate) fn pump<E: QpEnv + ?Sized>(
        &mut self,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) {
        // Whether a started WQE failed, and how many READs/atomics await
        // responses: scanned once per call, when first needed, then kept up
        // to date here (nothing else changes them while pump runs).
        let mut scanned: Option<(bool, usize)> = None;
        let limit = self
            .allowance
            .map_or(cfg.send_window, |a| a.min(cfg.send_window)) as i32;
        loop {
            if psn::diff(self.tx_psn, self.una) >= limit {
                return;
            }
            if !psn::before(self.tx_psn, self.next_psn) {
                if self.pending.is_empty() {
                    return;
                }
                let (failed, reads) = *scanned.get_or_insert_with(|| {
                    (
                        self.inflight.iter().any(|f| f.error.is_some()),
                        self.outstanding_rd_atomic(),
                    )
                });
                if failed {
                    return;
                }
                let Some(wqe) = self.pending.front() else {
                    return;
                };
                let kind = WrKind::from_opcode(wqe.opcode);
                if kind.is_some_and(WrKind::needs_response)
                    && reads >= usize::from(cfg.max_rd_atomic)
                {
                    return;
                }
                if wqe.flags & WQE_F_FENCE != 0 && reads > 0 {
                    return;
                }
                let Some(wqe) = self.pending.pop_front() else {
                    return;
                };
                let mut f = self.start(wqe, cfg);
                if f.error.is_none() {
                    match f.kind {
                        WrKind::BindMw => match env.bind_mw(&f.wqe) {
                            Ok(k) => f.new_rkey = Some(k),
                            Err(_) => f.error = Some(WC_MW_BIND_ERR),
                        },
                        WrKind::LocalInv
                            if env.local_invalidate(f.wqe.imm_data.to_native()).is_err() =>
                        {
                            f.error = Some(WC_LOC_PROT_ERR);
                        }
                        WrKind::RegMr if env.fast_register(&f.wqe).is_err() => {
                            f.error = Some(WC_LOC_PROT_ERR);
                        }
                        _ => {}
                    }
                }
                self.next_psn = f.end_psn();
                self.msn.messages += usize::from(f.npsn > 0);
                scanned = Some((
                    failed || f.error.is_some(),
                    reads + usize::from(f.awaits_response()),
                ));
                self.inflight.push_back(f);
                continue;
            }
            let Some(i) = self.find(self.tx_psn) else {
                // Cannot happen (every PSN from `una` to next_psn belongs
                // to a WQE not retired: `ack_through` moves `una` past
                // those the MSN completed); resume at the first unstarted
                // PSN.
                self.tx_psn = self.next_psn;
                continue;
            };
            let f = &self.inflight[i];
            if f.error.is_some() {
                return;
            }
            let p = self.tx_psn;
            // Ask for an ACK at least every quarter window, so a message
            // longer than the window keeps flowing (per-message ACKs alone
            // would stall it until the ACK timeout) and the window reopens
            // in steps small enough to keep both ends busy; more often if
            // the policy says so (`AckPolicy::ack_req_every`).
            let every = cfg.ack_policy.ack_req_every(cfg.send_window);
            // So does the last packet a restart after a timeout may send,
            // and the last packet there is to send (coalesced ACKs would
            // leave it unacknowledged until the timeout otherwise).
            let ack_req = psn::diff(p, self.ack_req_psn) >= every
                || (self.allowance.is_some() && psn::diff(p, self.una) + 1 >= limit)
                || (psn::add(p, 1) == self.next_psn && self.pending.is_empty());
            match transmit(f, p, ack_req, cfg, counters, env) {
                Ok((next, ack_req)) => {
                    if ack_req {
                        self.ack_req_psn = p;
                    }
                    if psn::before(p, self.tx_high) {
                        counters.retransmits += 1;
                    }
                    self.tx_psn = next;
                    self.tx_high = psn::max(self.tx_high, next);
                }
                Err(status) => {
                    if let Some(f) = self.inflight.get_mut(i) {
                        f.error = Some(status);
                    }
                    // `scanned` is stale now; it goes out of scope.
                    return;
                }
            }
        }
    }

    /// Completes every started and pending WQE: a failed one with its own
    /// status, the rest with WC_WR_FLUSH_ERR. Errors always complete,
    /// signaled or not. Returns the status of the first failed WQE, if
    /// any, and how many were flushed.
    pub(crate) fn flush<E: QpEnv + ?Sized>(&mut self, qpn: u32, env: &mut E) -> (Option<u8>, u64) {
        let mut failed = None;
        let flushed = self.queued() as u64;
        for f in self.inflight.drain(..) {
            let status = f.error.unwrap_or(WC_WR_FLUSH_ERR);
            failed = failed.or(f.error);
            env.retired(&f.wqe, status);
            env.complete(CqKind::Send, f.cqe(qpn, status));
        }
        for wqe in self.pending.drain(..) {
            flush_unstarted(qpn, wqe, env);
        }
        self.tx_psn = self.next_psn;
        self.una = self.next_psn;
        self.executed = self.next_psn;
        self.tx_high = self.next_psn;
        (self.msn.messages, self.msn.confirmed) = (0, 0);
        (failed, flushed - u64::from(failed.is_some()))
    }
}

/// Completes `wqe`, which never started, with WC_WR_FLUSH_ERR.
pub(crate) fn flush_unstarted<E: QpEnv + ?Sized>(qpn: u32, wqe: SendWr, env: &mut E) {
    let kind = WrKind::from_opcode(wqe.opcode).unwrap_or(WrKind::Send { imm: false });
    let f = Flight {
        wqe,
        kind,
        len: 0,
        first_psn: 0,
        npsn: 0,
        received: 0,
        error: None,
        new_rkey: None,
    };
    env.retired(&f.wqe, WC_WR_FLUSH_ERR);
    env.complete(CqKind::Send, f.cqe(qpn, WC_WR_FLUSH_ERR));
}

/// Sends the request packet with PSN `p` of `f` (with AckReq if `ack_req`
/// or the policy asks); returns the PSN after it and whether AckReq was
/// set, or a completion status when the local buffer cannot be read.
fn transmit<E: QpEnv + ?Sized>(
    f: &Flight,
    p: u32,
    ack_req: bool,
    cfg: &RcConfig,
    counters: &mut RcCounters,
    env: &mut E,
) -> Result<(u32, bool), u8> {
    let index = psn::diff(p, f.first_psn).max(0) as u32;
    let wqe = &f.wqe;
    let per_packet = ack_req || cfg.ack_policy == AckPolicy::PerPacket;
    let per_message = cfg.ack_policy == AckPolicy::PerMessage;
    let packet = match f.kind {
        WrKind::Send { imm } | WrKind::Write { imm } => {
            let seg = segmenter::segment(f.len, cfg.path_mtu, index);
            let write = matches!(f.kind, WrKind::Write { .. });
            let kind = if write {
                DataKind::Write
            } else {
                DataKind::Send
            };
            let mut opcode = segmenter::data_opcode(kind, seg.position, imm);
            let mut ext = ExtHeaders::default();
            if wqe.opcode == WR_SEND_INV && seg.position.ends() {
                opcode = match seg.position {
                    Position::Only => Opcode::RcSendOnlyInv,
                    _ => Opcode::RcSendLastInv,
                };
                ext.ieth = Some(Ieth {
                    rkey: wqe.imm_data.to_native(),
                });
            }
            if write && seg.position.starts() {
                ext.reth = Some(Reth {
                    va: wqe.remote_addr.to_native(),
                    rkey: wqe.rkey.to_native(),
                    dma_len: u32::try_from(f.len).unwrap_or(u32::MAX),
                });
            }
            if imm && seg.position.ends() {
                ext.immdt = Some(ImmDt {
                    data: wqe.imm_data.to_native(),
                });
            }
            let ack_req = (seg.position.ends() && per_message) || per_packet;
            let mut pkt = segmenter::data_packet(cfg, opcode, p, ack_req, ext);
            pkt.bth.se = !write && seg.position.ends() && wqe.flags & WQE_F_SOLICITED != 0;
            segmenter::emit_data(env, counters, &pkt, f.source(), seg)
                .map_err(|_| WC_LOC_PROT_ERR)?;
            return Ok((psn::add(p, 1), ack_req));
        }
        WrKind::Read => {
            // A resent READ resumes where the responses stopped (IBA 9.4.4).
            let offset = u64::from(index)
                .saturating_mul(u64::from(cfg.path_mtu))
                .min(f.len);
            let mut pkt = segmenter::packet(cfg, Opcode::RcRdmaReadRequest, p, true);
            pkt.ext.reth = Some(Reth {
                va: wqe.remote_addr.to_native().wrapping_add(offset),
                rkey: wqe.rkey.to_native(),
                dma_len: u32::try_from(f.len - offset).unwrap_or(u32::MAX),
            });
            segmenter::emit(env, counters, &pkt);
            return Ok((f.end_psn(), true));
        }
        // Local operations take no PSN, so no PSN ever maps to them.
        WrKind::BindMw | WrKind::LocalInv | WrKind::RegMr => return Ok((f.end_psn(), false)),
        WrKind::CompareSwap | WrKind::FetchAdd => {
            let cmp = f.kind == WrKind::CompareSwap;
            let opcode = if cmp {
                Opcode::RcCompareSwap
            } else {
                Opcode::RcFetchAdd
            };
            let mut pkt = segmenter::packet(cfg, opcode, p, true);
            pkt.ext.atomic_eth = Some(AtomicEth {
                va: wqe.remote_addr.to_native(),
                rkey: wqe.rkey.to_native(),
                swap_add: if cmp {
                    wqe.swap.to_native()
                } else {
                    wqe.compare_add.to_native()
                },
                compare: if cmp { wqe.compare_add.to_native() } else { 0 },
            });
            pkt
        }
    };
    let ack_req = packet.bth.ack_req;
    segmenter::emit(env, counters, &packet);
    Ok((psn::add(p, 1), ack_req))
}
