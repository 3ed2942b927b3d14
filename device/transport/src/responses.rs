//! The responses a responder owes, in PSN order: its responder resources
//! (IBA 9.7.5.2, max_dest_rd_atomic) and the acknowledgements queued
//! behind them.
//!
//! An inbound RDMA READ only queues here (seed 004): its quasi-WQE goes to
//! the QP's ring in guest memory and an entry here holds its PSN range, its
//! MSN and the key slot it holds (seed 001). The shared send engine serves
//! the queue with a budget per turn ([`ResponseQueue::serve`]), between the
//! QP's own requester packets, reading the quasi-WQE from guest memory for
//! every response it builds and gathering as it says once it matches the
//! entry here (a mismatch: NAK remote operational error, QP in error). Responses leave in PSN order, so an ACK or an
//! atomic's acknowledgement for a later request waits behind the READs
//! before it (ACKs coalesce: the latest covers the earlier ones).
//!
//! The READ's R_Key was checked fully when it was queued, and the slot it
//! holds keeps what that check found; each response reads through the slot,
//! checking only its Valid bit. A slot the invalidation walk cleared stops
//! the READ there, with NAK remote access error for the PSN of the first
//! response not sent (what an HCA sends for an R_Key that is no longer
//! valid), and the QP goes to error.

use std::collections::VecDeque;

use ibtca_protocol::headers::{Aeth, AtomicAckEth, ExtHeaders, NakCode, CREDITS_INVALID};
use ibtca_protocol::opcode::Position;
use ibtca_protocol::Opcode;

use super::config::{RcConfig, RcCounters};
use super::psn;
use super::segmenter::{self, DataKind, Source};
use super::QpEnv;
use ibtca_abi::verbs::QuasiWqe;

/// One response owed.
#[derive(Debug, Clone)]
enum Owed {
    /// An RDMA READ: responses `next..packets` still to send.
    Read {
        psn: u32,
        va: u64,
        len: u32,
        rkey: u32,
        packets: u32,
        /// The MSN its responses carry (this READ counted).
        msn: u32,
        /// Key-memory slot holding `rkey` until the last response.
        slot: Option<usize>,
        next: u32,
        /// Served again for a duplicate request.
        dup: bool,
    },
    /// An atomic's acknowledgement (the atomic was executed), or its
    /// replay for a duplicate (`dup`).
    AtomicAck {
        psn: u32,
        orig: u64,
        msn: u32,
        dup: bool,
    },
    /// The latest ACK or non-fatal NAK.
    Ack { psn: u32, aeth: Aeth },
}

/// Why serving stopped the QP: the NAK code and the PSN it was sent for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped {
    pub(crate) code: NakCode,
    pub(crate) psn: u32,
    /// The MSN the NAK carries: the messages before the stopped READ (a
    /// SEND or WRITE after it may have executed already; seed 002's
    /// requester refuses an MSN past the NAK's PSN).
    pub(crate) msn: u32,
}

/// An inbound READ to queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadRequest {
    pub(crate) psn: u32,
    pub(crate) va: u64,
    pub(crate) len: u32,
    pub(crate) rkey: u32,
    pub(crate) msn: u32,
    pub(crate) slot: Option<usize>,
    /// A duplicate, answered again.
    pub(crate) dup: bool,
}

/// The responder's owed responses.
#[derive(Debug, Default)]
pub(crate) struct ResponseQueue {
    q: VecDeque<Owed>,
}

impl ResponseQueue {
    /// Nothing owed: acknowledgements may go out at once.
    pub(crate) fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    /// Responder resources in use: READs and atomics not yet answered
    /// (duplicates not counted: a stale copy the network delivered late
    /// must not make a new request fail).
    pub(crate) fn resources(&self) -> usize {
        self.q.iter().filter(|o| o.is_new_request()).count()
    }

    /// Duplicates queued to be answered again.
    pub(crate) fn duplicates(&self) -> usize {
        self.q
            .iter()
            .filter(|o| !o.is_new_request() && !matches!(o, Owed::Ack { .. }))
            .count()
    }

    /// Whether a READ starting at `p` is still owed (a duplicate of it
    /// needs no second copy).
    pub(crate) fn has_read(&self, p: u32) -> bool {
        self.q
            .iter()
            .any(|o| matches!(o, Owed::Read { psn, .. } if *psn == p))
    }

    /// Queues a READ: its quasi-WQE goes to the ring, its entry here;
    /// false (nothing queued) when the ring is full.
    pub(crate) fn push_read<E: QpEnv + ?Sized>(
        &mut self,
        r: ReadRequest,
        cfg: &RcConfig,
        env: &mut E,
    ) -> bool {
        let pushed = env.push_quasi(QuasiWqe {
            va: r.va.into(),
            length: r.len.into(),
            rkey: r.rkey.into(),
            psn: r.psn.into(),
            dest_qpn: cfg.dest_qpn.into(),
            ..QuasiWqe::default()
        });
        if !pushed {
            return false;
        }
        self.q.push_back(Owed::Read {
            psn: r.psn,
            va: r.va,
            len: r.len,
            rkey: r.rkey,
            packets: segmenter::packet_count(u64::from(r.len), cfg.path_mtu),
            msn: r.msn,
            slot: r.slot,
            next: 0,
            dup: r.dup,
        });
        true
    }

    /// Queues an atomic's acknowledgement (`dup`: a replay) behind what
    /// is owed.
    pub(crate) fn push_atomic_ack(&mut self, psn: u32, orig: u64, msn: u32, dup: bool) {
        self.q.push_back(Owed::AtomicAck {
            psn,
            orig,
            msn,
            dup,
        });
    }

    /// Queues an acknowledgement behind what is owed; it replaces one
    /// queued right before it (both are cumulative).
    pub(crate) fn push_ack(&mut self, psn: u32, aeth: Aeth) {
        if let Some(Owed::Ack { .. }) = self.q.back() {
            self.q.pop_back();
        }
        self.q.push_back(Owed::Ack { psn, aeth });
    }

    /// Drops everything owed (the QP failed), releasing the key slots.
    pub(crate) fn clear<E: QpEnv + ?Sized>(&mut self, env: &mut E) {
        for o in self.q.drain(..) {
            if let Owed::Read { slot: Some(s), .. } = o {
                env.release_key(s);
            }
        }
    }

    /// Sends up to `budget` owed packets, in order; returns how many went.
    /// A READ that cannot go on (key invalidated, quasi-WQE missing or
    /// altered, memory refused) stops the queue: the caller sends the NAK
    /// and fails the QP.
    pub(crate) fn serve<E: QpEnv + ?Sized>(
        &mut self,
        budget: usize,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<usize, Stopped> {
        let mut sent = 0;
        while sent < budget {
            let Some(front) = self.q.front_mut() else {
                break;
            };
            match front {
                Owed::Ack { psn, aeth } => send_ack(*psn, *aeth, cfg, counters, env),
                Owed::AtomicAck { psn, orig, msn, .. } => {
                    send_atomic_ack(*psn, *orig, *msn, cfg, counters, env)
                }
                Owed::Read { .. } => {
                    let done = serve_read(front, cfg, counters, env).inspect_err(|_| {
                        self.clear(env);
                    })?;
                    sent += 1;
                    if !done {
                        continue;
                    }
                    if let Some(Owed::Read { slot: Some(s), .. }) = self.q.pop_front() {
                        env.release_key(s);
                    }
                    continue;
                }
            }
            sent += 1;
            self.q.pop_front();
        }
        Ok(sent)
    }
}

impl Owed {
    /// A READ or atomic seen for the first time.
    fn is_new_request(&self) -> bool {
        match self {
            Owed::Read { dup, .. } | Owed::AtomicAck { dup, .. } => !dup,
            Owed::Ack { .. } => false,
        }
    }
}

/// Sends the next response of the READ `o`; true when it was the last.
fn serve_read<E: QpEnv + ?Sized>(
    o: &mut Owed,
    cfg: &RcConfig,
    counters: &mut RcCounters,
    env: &mut E,
) -> Result<bool, Stopped> {
    let Owed::Read {
        psn: first,
        va,
        len,
        rkey,
        packets,
        msn,
        slot,
        next,
        ..
    } = o
    else {
        return Ok(true);
    };
    let p = psn::add(*first, *next);
    let before = psn::sub(*msn, 1);
    let stop = |code| {
        Err(Stopped {
            code,
            psn: p,
            msn: before,
        })
    };
    // The send engine reads the quasi-WQE from guest memory for every
    // response it builds, as it fetches a WQE (seed 004); guest memory is
    // untrusted, so it must say what the device queued.
    let Some(q) = env
        .peek_quasi()
        .filter(|q| quasi_matches(q, *first, *va, *len, *rkey, cfg.dest_qpn))
    else {
        counters.quasi_mismatches += 1;
        return stop(NakCode::RemoteOperationalError);
    };
    if slot.is_some_and(|s| !env.key_valid(s)) {
        // The invalidation walk cleared the key: the rest is not sent.
        return stop(NakCode::RemoteAccessError);
    }
    let seg = segmenter::segment(u64::from(*len), cfg.path_mtu, *next);
    let opcode = segmenter::data_opcode(DataKind::ReadResponse, seg.position, false);
    let mut ext = ExtHeaders::default();
    if seg.position != Position::Middle {
        ext.aeth = Some(Aeth::ack(CREDITS_INVALID, *msn));
    }
    let header = segmenter::data_packet(cfg, opcode, p, false, ext);
    // The gather follows the quasi-WQE (checked above to equal the
    // record): a READ holding a slot reads through it (its key was checked
    // when it was queued, over the quasi-WQE's range); a duplicate,
    // holding none, through the quasi-WQE's key.
    let src = match *slot {
        Some(s) => Source::Slot(s),
        None => Source::Remote {
            rkey: q.rkey.to_native(),
            va: q.va.to_native(),
        },
    };
    if let Err(e) = segmenter::emit_data(env, counters, &header, src, seg) {
        return stop(e.nak());
    }
    *next += 1;
    let done = *next >= *packets;
    if done {
        env.pop_quasi();
    }
    Ok(done)
}

/// Whether the quasi-WQE read from guest memory describes the READ the
/// device queued: its PSN, range, R_Key and requester QP.
fn quasi_matches(q: &QuasiWqe, psn: u32, va: u64, len: u32, rkey: u32, dest_qpn: u32) -> bool {
    (q.psn.to_native(), q.va.to_native(), q.length.to_native()) == (psn, va, len)
        && (q.rkey.to_native(), q.dest_qpn.to_native()) == (rkey, dest_qpn)
}

/// Sends an ACK or NAK for `p` now.
pub(crate) fn send_ack<E: QpEnv + ?Sized>(
    p: u32,
    aeth: Aeth,
    cfg: &RcConfig,
    counters: &mut RcCounters,
    env: &mut E,
) {
    if aeth.syndrome >> 5 == 0 {
        counters.acks_sent += 1;
    }
    let mut pkt = segmenter::packet(cfg, Opcode::RcAcknowledge, p, false);
    pkt.ext.aeth = Some(aeth);
    segmenter::emit(env, counters, &pkt);
}

/// Sends an atomic's acknowledgement for `p` now.
pub(crate) fn send_atomic_ack<E: QpEnv + ?Sized>(
    p: u32,
    orig: u64,
    msn: u32,
    cfg: &RcConfig,
    counters: &mut RcCounters,
    env: &mut E,
) {
    counters.acks_sent += 1;
    let mut pkt = segmenter::packet(cfg, Opcode::RcAtomicAcknowledge, p, false);
    pkt.ext.aeth = Some(Aeth::ack(CREDITS_INVALID, msn));
    pkt.ext.atomic_ack_eth = Some(AtomicAckEth { orig });
    segmenter::emit(env, counters, &pkt);
}
