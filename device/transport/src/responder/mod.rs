//! The responder: executes inbound requests in PSN order and answers them.
//! A request passes named checks first (`stages.rs`: PSN, opcode sequence,
//! opcode, length, R_Key, resources), then executes here.
//!
//! - Expected PSN: executed. Earlier PSN: a duplicate, answered without
//!   executing again (SEND/WRITE: re-ACK; READ: the responses are served
//!   again from memory; atomic: the saved result is replayed). Later PSN:
//!   dropped, with one PSN sequence error NAK until the expected PSN arrives.
//! - The MSN advances when the last packet of a message is accepted (a READ
//!   or atomic: when its request is); every ACK carries it (seed 002). A
//!   duplicate READ or atomic is answered with the MSN its original was,
//!   so a response never claims messages past its own PSN (the requester
//!   checks that: [`super::msn`]).
//! - ACK coalescing (the QP's [`super::AckPolicy`]): an ACK for every packet
//!   with AckReq, and for the last packet of a message unless ACKs are
//!   coalesced every N packets.
//! - RDMA READ requests become quasi-WQEs (seed 004) that the shared send
//!   engine turns into responses later, a budget per turn
//!   ([`Responder::serve`], `responses.rs`); what is acknowledged after a
//!   READ waits behind its responses. READs and atomics not yet answered
//!   are the responder resources: one past max_dest_rd_atomic is NAKed
//!   invalid request (IBA 9.7.5.2). Each holds a key slot (seed 001).
//! - Errors: remote access → NAK 0x62 (nothing written: the whole range is
//!   checked before the first byte moves), malformed → NAK 0x61, a fault
//!   after checks → NAK 0x63. After any of these the QP goes to error
//!   (what IBA prescribes for these responder errors); the caller does that
//!   when a handler returns [`Fatal`].

use std::collections::VecDeque;

use ibtca_protocol::headers::{Aeth, NakCode, CREDITS_INVALID};
use ibtca_protocol::opcode::OpClass;
use ibtca_protocol::{Opcode, PacketView};

use super::config::{RcConfig, RcCounters};
use super::psn;
use super::responses::{send_ack, send_atomic_ack, ReadRequest, ResponseQueue, Stopped};
use super::segmenter;
use super::{AccessError, AtomicOp, CqKind, KeyUse, QpEnv};
use crate::keys::READ_SLOTS;
use ibtca_abi::recv::RecvWr;
use ibtca_abi::verbs::*;
use stages::Checked;

mod stages;

/// The responder hit an error that puts the QP in error (the NAK is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fatal;

/// A multi-packet message being received.
#[derive(Debug, Clone)]
enum InMsg {
    Send {
        /// Boxed (only while a message spans packets): a WQE's SGE list
        /// is up to MAX_RECV_SGE long.
        recv: Box<RecvWr>,
        offset: u64,
    },
    Write {
        rkey: u32,
        va: u64,
        len: u64,
        offset: u64,
        /// Key-memory slot holding `rkey` and what its check at the first
        /// packet found, for a multi-packet message (seed 001): the
        /// invalidation walk clears it and fails the rest.
        slot: Option<usize>,
    },
}

/// A READ or atomic the responder executed, kept to answer a duplicate of
/// it the way the original was answered (the responder resources of IBA
/// 9.7.5.1): the same MSN, and an atomic's original value.
#[derive(Debug, Clone, Copy)]
struct Executed {
    /// Request PSN.
    psn: u32,
    /// PSNs it took (a READ: one per response packet).
    npsn: u32,
    /// The MSN after it.
    msn: u32,
    /// An atomic's original value.
    orig: Option<u64>,
}

/// Responder state.
#[derive(Debug)]
pub(crate) struct Responder {
    /// Expected PSN.
    pub(crate) epsn: u32,
    /// Messages completed, mod 2^24.
    pub(crate) msn: u32,
    /// A PSN sequence or RNR NAK was sent for `epsn`: drop later packets
    /// silently until it arrives.
    nak_sent: bool,
    msg: Option<InMsg>,
    /// Recent READs and atomics, newest last, for answering duplicates.
    executed: VecDeque<Executed>,
    /// Responses owed, in PSN order.
    owed: ResponseQueue,
}

impl Responder {
    pub(crate) fn new(cfg: &RcConfig) -> Self {
        Self {
            epsn: cfg.rq_psn & psn::MASK,
            msn: cfg.initial_msn & psn::MASK,
            nak_sent: false,
            msg: None,
            executed: VecDeque::new(),
            owed: ResponseQueue::default(),
        }
    }

    /// Whether responses are owed (the engine serves them).
    pub(crate) fn owes(&self) -> bool {
        !self.owed.is_empty()
    }

    /// Sends up to `budget` owed packets; returns how many went. An error
    /// (the NAK sent) puts the QP in error.
    pub(crate) fn serve<E: QpEnv + ?Sized>(
        &mut self,
        budget: usize,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<usize, Fatal> {
        match self.owed.serve(budget, cfg, counters, env) {
            Ok(n) => Ok(n),
            Err(Stopped { code, psn, msn }) => self.fatal_nak(code, psn, msn, cfg, counters, env),
        }
    }

    /// Records a READ or atomic just executed (the MSN already counts it).
    fn remember(&mut self, cfg: &RcConfig, psn: u32, npsn: u32, orig: Option<u64>) {
        if self.executed.len() >= usize::from(cfg.max_dest_rd_atomic.max(1)) {
            self.executed.pop_front();
        }
        let msn = self.msn;
        self.executed.push_back(Executed {
            psn,
            npsn,
            msn,
            orig,
        });
    }

    /// The remembered READ or atomic that took PSN `p`.
    fn executed(&self, p: u32) -> Option<&Executed> {
        self.executed
            .iter()
            .rev()
            .find(|e| psn::in_window(p, e.psn, psn::add(e.psn, e.npsn.max(1))))
    }

    /// Responder resources this QP was given (max_dest_rd_atomic, at least
    /// 1 as rxe has it, at most the key memory's READ slots).
    fn resource_limit(cfg: &RcConfig) -> usize {
        usize::from(cfg.max_dest_rd_atomic).clamp(1, READ_SLOTS)
    }

    /// The `Execute` stage: the request passed every check (`stages.rs`).
    fn execute<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        checked: Checked,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        match (v.info().class, checked.recv) {
            (OpClass::Send, Some((recv, offset))) => self.send(v, recv, offset, cfg, counters, env),
            (OpClass::Send, None) => self.rnr(v.bth.psn, cfg, counters, env),
            (OpClass::Write, _) => self.write(v, cfg, counters, env),
            (OpClass::Read, _) => self.read(v, checked.slot, cfg, counters, env),
            (OpClass::Atomic, _) => self.atomic(v, cfg, counters, env),
            (OpClass::Ack, _) => self.fail(NakCode::InvalidRequest, v.bth.psn, cfg, counters, env),
        }
    }

    /// Accepts the packet at `epsn`: advances the PSN (and the MSN at the
    /// end of a message) and ACKs when asked to or at the end of a message.
    fn accept<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        ends: bool,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) {
        self.nak_sent = false;
        self.epsn = psn::add(self.epsn, 1);
        if ends {
            self.msn = psn::add(self.msn, 1);
        }
        if (ends && cfg.ack_policy.acks_message_ends()) || v.bth.ack_req {
            let aeth = Aeth::ack(CREDITS_INVALID, self.msn);
            self.acknowledge(v.bth.psn, aeth, cfg, counters, env);
        }
    }

    /// A SEND packet into `recv`, `offset` bytes in (what the message's
    /// earlier packets filled).
    fn send<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        recv: RecvWr,
        offset: u64,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        let p = v.bth.psn;
        let position = v.info().position;
        let Some(sges) = recv.sges() else {
            // More SGEs than the WQE's stride holds (or the device's
            // max_recv_sge): refused, not truncated; the responder's fault,
            // not the requester's.
            env.complete(
                CqKind::Recv,
                recv_cqe(&recv, cfg, WC_RECV, WC_LOC_LEN_ERR, offset),
            );
            return self.fail(NakCode::RemoteOperationalError, p, cfg, counters, env);
        };
        if !v.payload.is_empty() {
            if let Err(e) = env.scatter(sges, offset, v.payload) {
                // Receive buffer too small: local length error here, invalid
                // request for the requester; a bad L_Key: protection error,
                // remote operational error.
                let (status, nak) = match e {
                    AccessError::OutOfBounds => (WC_LOC_LEN_ERR, NakCode::InvalidRequest),
                    _ => (WC_LOC_PROT_ERR, NakCode::RemoteOperationalError),
                };
                env.complete(CqKind::Recv, recv_cqe(&recv, cfg, WC_RECV, status, 0));
                return self.fail(nak, p, cfg, counters, env);
            }
        }
        let offset = offset + v.payload.len() as u64;
        let ends = position.ends();
        if ends {
            let mut cqe = recv_cqe(&recv, cfg, WC_RECV, WC_SUCCESS, offset);
            if let Some(imm) = v.ext.immdt {
                cqe.imm_data = imm.data.into();
                cqe.flags |= CQE_F_IMM;
            }
            if v.bth.se {
                cqe.flags |= CQE_F_SOLICITED;
            }
            if let Some(ieth) = v.ext.ieth {
                // SEND with Invalidate: the key goes before the completion
                // says so; a key that cannot be invalidated here fails
                // both sides.
                if env.remote_invalidate(ieth.rkey).is_err() {
                    let cqe = recv_cqe(&recv, cfg, WC_RECV, WC_LOC_PROT_ERR, offset);
                    env.complete(CqKind::Recv, cqe);
                    return self.fail(NakCode::InvalidRequest, p, cfg, counters, env);
                }
                cqe.imm_data = ieth.rkey.into();
                cqe.flags |= CQE_F_INV;
            }
            env.complete(CqKind::Recv, cqe);
        } else {
            self.msg = Some(InMsg::Send {
                recv: Box::new(recv),
                offset,
            });
        }
        self.accept(v, ends, cfg, counters, env);
        Ok(())
    }

    fn write<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        let p = v.bth.psn;
        let position = v.info().position;
        // `CheckRkey` checked the key and, for a message of several
        // packets, keeps its slot in the message in progress.
        let (rkey, va, len, offset, slot) = match (&self.msg, v.ext.reth) {
            (
                Some(InMsg::Write {
                    rkey,
                    va,
                    len,
                    offset,
                    slot,
                }),
                _,
            ) => (*rkey, *va, *len, *offset, *slot),
            (None, Some(reth)) => (reth.rkey, reth.va, u64::from(reth.dma_len), 0, None),
            _ => return self.fail(NakCode::InvalidRequest, p, cfg, counters, env),
        };
        let end = offset + v.payload.len() as u64;
        let ends = position.ends();
        if end > len || (ends && end != len) {
            return self.fail(NakCode::InvalidRequest, p, cfg, counters, env);
        }
        // WRITE with immediate consumes a receive WQE; without one the
        // packet is refused (RNR) before anything is written.
        let recv = match v.ext.immdt {
            Some(_) => match env.next_recv() {
                Some(r) => Some(r),
                // Nothing changed yet: the retry finds the same state.
                None => return self.rnr(p, cfg, counters, env),
            },
            None => None,
        };
        if !v.payload.is_empty() {
            let written = match slot {
                Some(s) => env.slot_write(s, offset, v.payload),
                None => env.remote_write(rkey, va.wrapping_add(offset), v.payload),
            };
            if let Err(e) = written {
                if let Some(r) = recv {
                    env.complete(
                        CqKind::Recv,
                        recv_cqe(&r, cfg, WC_RECV_RDMA_WITH_IMM, WC_WR_FLUSH_ERR, 0),
                    );
                }
                return self.fail(e.nak(), p, cfg, counters, env);
            }
        }
        if ends {
            self.msg = None;
            if let Some(s) = slot {
                env.release_key(s);
            }
            if let (Some(r), Some(imm)) = (recv, v.ext.immdt) {
                let mut cqe = recv_cqe(&r, cfg, WC_RECV_RDMA_WITH_IMM, WC_SUCCESS, len);
                cqe.imm_data = imm.data.into();
                cqe.flags |= CQE_F_IMM;
                if v.bth.se {
                    cqe.flags |= CQE_F_SOLICITED;
                }
                env.complete(CqKind::Recv, cqe);
            }
        } else {
            self.msg = Some(InMsg::Write {
                rkey,
                va,
                len,
                offset: end,
                slot,
            });
        }
        self.accept(v, ends, cfg, counters, env);
        Ok(())
    }

    /// A READ request whose key `CheckRkey` holds in `slot` (none for a
    /// READ of 0 bytes).
    fn read<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        slot: Option<usize>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        let p = v.bth.psn;
        let Some(reth) = v.ext.reth else {
            return self.fail(NakCode::InvalidRequest, p, cfg, counters, env);
        };
        let len = u64::from(reth.dma_len);
        let read = ReadRequest {
            psn: p,
            va: reth.va,
            len: reth.dma_len,
            rkey: reth.rkey,
            msn: psn::add(self.msn, 1),
            slot,
            dup: false,
        };
        if !self.owed.push_read(read, cfg, env) {
            // The quasi-WQE ring is full: dropped, as if lost (the
            // requester sends it again).
            if let Some(s) = slot {
                env.release_key(s);
            }
            return Ok(());
        }
        self.nak_sent = false;
        let npsn = segmenter::packet_count(len, cfg.path_mtu);
        self.epsn = psn::add(p, npsn);
        self.msn = psn::add(self.msn, 1);
        self.remember(cfg, p, npsn, None);
        Ok(())
    }

    fn atomic<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        let p = v.bth.psn;
        let Some(eth) = v.ext.atomic_eth else {
            return self.fail(NakCode::InvalidRequest, p, cfg, counters, env);
        };
        let op = if v.opcode() == Opcode::RcCompareSwap {
            AtomicOp::CompareSwap {
                compare: eth.compare,
                swap: eth.swap_add,
            }
        } else {
            AtomicOp::FetchAdd { add: eth.swap_add }
        };
        // The atomic holds a READ slot while it executes (seed 001).
        let slot = match env.hold_key(eth.rkey, KeyUse::Read) {
            Ok(s) => s,
            Err(e) => return self.fail(e.nak(), p, cfg, counters, env),
        };
        let done = env.remote_atomic(eth.rkey, eth.va, op);
        if let Some(s) = slot {
            env.release_key(s);
        }
        let orig = match done {
            Ok(orig) => orig,
            Err(e) => return self.fail(e.nak(), p, cfg, counters, env),
        };
        self.nak_sent = false;
        self.epsn = psn::add(p, 1);
        self.msn = psn::add(self.msn, 1);
        self.remember(cfg, p, 1, Some(orig));
        self.atomic_ack(p, orig, None, cfg, counters, env);
        Ok(())
    }

    /// A request with a PSN before the expected one.
    fn duplicate<E: QpEnv + ?Sized>(
        &mut self,
        v: &PacketView<'_>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) {
        match v.info().class {
            OpClass::Send | OpClass::Write => {
                let aeth = Aeth::ack(CREDITS_INVALID, self.msn);
                self.acknowledge(psn::sub(self.epsn, 1), aeth, cfg, counters, env);
            }
            OpClass::Read => {
                // Reading again is harmless; serve exactly what the request
                // asks (it may resume a partly answered READ), if the key
                // still allows it.
                let Some(reth) = v.ext.reth else { return };
                let len = u64::from(reth.dma_len);
                let fits = psn::diff(
                    psn::add(v.bth.psn, segmenter::packet_count(len, cfg.path_mtu)),
                    self.epsn,
                ) <= 0;
                if !fits || (len > 0 && env.check_remote(reth.rkey, reth.va, len, false).is_err()) {
                    return;
                }
                // Still owed: its responses are coming. Otherwise queued
                // again, a bounded number of duplicates (else the
                // requester's next retry finds room). A duplicate holds no
                // key slot (those are the new requests'); the key check
                // before every response still stops it.
                let p = v.bth.psn;
                if self.owed.has_read(p) || self.owed.duplicates() >= Self::resource_limit(cfg) {
                    return;
                }
                // Only a READ still remembered is served again, with the
                // MSN its original had. An older one is dropped (the
                // requester never has more READs outstanding than the
                // responder remembers).
                let Some(msn) = self.executed(p).filter(|e| e.orig.is_none()).map(|e| e.msn) else {
                    return;
                };
                let read = ReadRequest {
                    psn: p,
                    va: reth.va,
                    len: reth.dma_len,
                    rkey: reth.rkey,
                    msn,
                    slot: None,
                    dup: true,
                };
                // A full ring drops it (the requester retries).
                self.owed.push_read(read, cfg, env);
            }
            OpClass::Atomic => {
                // Never execute an atomic twice: replay the saved result, or
                // drop the request if it is too old to remember.
                let p = v.bth.psn;
                let room = self.owed.duplicates() < Self::resource_limit(cfg);
                let replay = self.executed(p).filter(|e| e.psn == p);
                if let Some(&Executed {
                    msn,
                    orig: Some(orig),
                    ..
                }) = replay
                {
                    if !room {
                        return; // behind a full queue: the next retry
                    }
                    self.atomic_ack(p, orig, Some(msn), cfg, counters, env);
                }
            }
            OpClass::Ack => {}
        }
    }

    fn rnr<E: QpEnv + ?Sized>(
        &mut self,
        p: u32,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        self.nak_sent = true;
        counters.naks_sent.rnr += 1;
        let aeth = Aeth::rnr_nak(cfg.min_rnr_timer, self.msn);
        self.acknowledge(p, aeth, cfg, counters, env);
        Ok(())
    }

    /// Sends a NAK for `p` and reports the error that puts the QP in error.
    fn fail<E: QpEnv + ?Sized>(
        &mut self,
        code: NakCode,
        p: u32,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<(), Fatal> {
        // The responses owed for earlier requests go first (PSN order).
        if let Err(Stopped { code, psn, msn }) = self.owed.serve(usize::MAX, cfg, counters, env) {
            return self.fatal_nak(code, psn, msn, cfg, counters, env);
        }
        self.fatal_nak(code, p, self.msn, cfg, counters, env)
    }

    /// Sends NAK `code` for `p` now and reports the error that puts the QP
    /// in error.
    fn fatal_nak<T, E: QpEnv + ?Sized>(
        &mut self,
        code: NakCode,
        p: u32,
        msn: u32,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) -> Result<T, Fatal> {
        let n = &mut counters.naks_sent;
        match code {
            NakCode::PsnSequenceError => n.psn_seq += 1,
            NakCode::InvalidRequest | NakCode::InvalidRdRequest => n.invalid_request += 1,
            NakCode::RemoteAccessError => n.remote_access += 1,
            _ => n.remote_op += 1,
        }
        self.abandon(cfg, env);
        send_ack(p, Aeth::nak(code, msn), cfg, counters, env);
        Err(Fatal)
    }

    /// Completes a receive in progress with a flush error (QP to error).
    pub(crate) fn flush<E: QpEnv + ?Sized>(&mut self, cfg: &RcConfig, env: &mut E) -> bool {
        self.abandon(cfg, env)
    }

    /// Drops the message in progress and the responses owed: a receive it
    /// took completes with a flush error (true), keys held are released.
    fn abandon<E: QpEnv + ?Sized>(&mut self, cfg: &RcConfig, env: &mut E) -> bool {
        self.owed.clear(env);
        match self.msg.take() {
            Some(InMsg::Send { recv, .. }) => {
                env.complete(
                    CqKind::Recv,
                    recv_cqe(&recv, cfg, WC_RECV, WC_WR_FLUSH_ERR, 0),
                );
                return true;
            }
            Some(InMsg::Write { slot: Some(s), .. }) => env.release_key(s),
            _ => {}
        }
        false
    }

    /// Sends an ACK or non-fatal NAK, or queues it behind owed responses.
    fn acknowledge<E: QpEnv + ?Sized>(
        &mut self,
        p: u32,
        aeth: Aeth,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) {
        if self.owed.is_empty() {
            send_ack(p, aeth, cfg, counters, env);
        } else {
            self.owed.push_ack(p, aeth);
        }
    }

    /// Sends an atomic's acknowledgement, or queues it behind owed
    /// responses: a new one with the current MSN, a replay for a duplicate
    /// (`replay`) with the MSN its original had.
    fn atomic_ack<E: QpEnv + ?Sized>(
        &mut self,
        p: u32,
        orig: u64,
        replay: Option<u32>,
        cfg: &RcConfig,
        counters: &mut RcCounters,
        env: &mut E,
    ) {
        let msn = replay.unwrap_or(self.msn);
        if self.owed.is_empty() {
            send_atomic_ack(p, orig, msn, cfg, counters, env);
        } else {
            self.owed.push_atomic_ack(p, orig, msn, replay.is_some());
        }
    }
}

fn recv_cqe(recv: &RecvWr, cfg: &RcConfig, opcode: u8, status: u8, len: u64) -> Cqe {
    Cqe {
        wr_id: recv.wr_id.into(),
        byte_len: u32::try_from(len).unwrap_or(u32::MAX).into(),
        qpn: cfg.qpn.into(),
        src_qp: cfg.dest_qpn.into(),
        opcode,
        status,
        ..Cqe::default()
    }
}
