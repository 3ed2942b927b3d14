//! Queue pairs: the QP context (type, PD, CQs, state, the attributes the
//! transport needs) and its rings in guest memory — the send queue and
//! receive queue the driver produces, and (RC only) the quasi-WQE ring
//! (seed 004) the device produces and consumes itself. A QP is RC, UD, or
//! the port's QP0 (SMI) or QP1 (GSI), which are datagram QPs too.
//!
//! Doorbells carry the driver's producer index; one that runs more than a
//! ring's worth ahead of the device's consumer index (or behind it) puts the
//! QP in the error state. A QP with a doorbell record (`db_record.rs`) also
//! takes its indexes from there, so its doorbells may arrive after the
//! record told the device more: one not ahead of what the device has is
//! ignored. Every WQE read from guest memory is untrusted: the
//! transport validates its contents. A ring the device cannot read or write
//! also puts the QP in error.

use std::sync::atomic::{fence, Ordering};

use vm_memory::ByteValued;

use super::abi::{
    CmdCreateQp, CmdModifyQp, QuasiWqe, ACK_COALESCED, ACK_PER_MESSAGE, ACK_PER_PACKET, GSI_QKEY,
    MTU_256, MTU_4096, PKEY_TABLE_LEN, QP_ATTR_ACCESS, QP_ATTR_ACK_POLICY, QP_ATTR_DEST_QPN,
    QP_ATTR_DEST_RD_ATOMIC, QP_ATTR_MSN, QP_ATTR_PATH, QP_ATTR_PKEY_INDEX, QP_ATTR_QKEY,
    QP_ATTR_RETRY, QP_ATTR_RQ_PSN, QP_ATTR_SQ_PSN,
};
use super::db_record::{DoorbellRecord, RecordQueue};
use super::mr::ACCESS_REMOTE;
pub use super::qp_state::QpType;
use super::qp_state::{check_modify, QpState};
use super::ring::{Ring, MAX_RING_LOG};
use super::table::HandleTable;
use super::wqe_ring::{read_recv, read_send, wqe_stride};
use super::VerbsError;
use crate::dma::GuestMemory;
use ibtca_abi::recv::RecvWr;
use ibtca_abi::send::SendWr;

/// Largest log2 size of an SQ, RQ or quasi-WQE ring.
pub const MAX_WQ_LOG: u8 = MAX_RING_LOG;

/// Largest service level of an RC QP (SL15 is for management, VL15).
pub const MAX_SL: u8 = 14;
/// Largest `max_dest_rd_atomic` (QUERY_DEVICE's max_qp_rd_atom): the key
/// memory's READ slots (seed 001).
pub const MAX_RD_ATOMIC: u8 = crate::verbs::keys::READ_SLOTS as u8;
/// Largest `max_rd_atomic`, the READs and atomics a QP has outstanding as
/// requester (QUERY_DEVICE's max_qp_init_rd_atom). The requester holds no
/// per-request resource, so this is not the responder's bound: the IB CM
/// gives a passive QP the initiator depth of the REQ's responder resources
/// before its REP lowers it (IPoIB's REQ says 4).
pub const MAX_INIT_RD_ATOMIC: u8 = 16;
/// Largest send window MODIFY_QP may set, in packets (the most the device
/// gives a QP by itself: see `RcConfig::send_window_for_mtu`).
pub const MAX_WINDOW: u16 = 1024;

const PSN_MASK: u32 = 0xff_ffff;
const QUASI_OWNER_OFFSET: usize = std::mem::offset_of!(QuasiWqe, owner);

/// Why a data-path operation on a QP failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QpError {
    /// A doorbell index out of range: the QP is now in error.
    #[error("doorbell index out of range")]
    Overrun,
    /// A ring is not in mapped guest memory: the QP is now in error.
    #[error("ring not in guest memory")]
    Dma,
    /// The quasi-WQE ring is full.
    #[error("quasi-WQE ring full")]
    Full,
    /// A quasi-WQE's owner bit is wrong (the guest wrote into the ring):
    /// the QP is now in error.
    #[error("quasi-WQE ring corrupted")]
    Corrupt,
    /// The QP is in RESET: doorbells are ignored.
    #[error("QP in reset")]
    Reset,
}

/// The connection attributes set by MODIFY_QP, for the transport.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpAttrs {
    /// IBTCA_ACCESS_REMOTE_* rights granted to incoming requests.
    pub access: u32,
    /// IBTCA_MTU_* path MTU.
    pub path_mtu: u8,
    /// Destination LID.
    pub dlid: u16,
    /// Destination QP number.
    pub dest_qpn: u32,
    /// Next PSN to send.
    pub sq_psn: u32,
    /// Next PSN expected.
    pub rq_psn: u32,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retry count.
    pub retry_cnt: u8,
    /// RNR retry count (7 = forever).
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Outstanding RDMA READs / atomics this QP may issue.
    pub max_rd_atomic: u8,
    /// Responder resources, when MODIFY_QP gave them (else the device's).
    pub max_dest_rd_atomic: Option<u8>,
    /// Service level of the path (LRH SL).
    pub sl: u8,
    /// Index of the QP's P_Key in the port's table.
    pub pkey_index: u16,
    /// MSN before the first completed message (seed 002).
    pub initial_msn: u32,
    /// IBTCA_ACK_* policy.
    pub ack_mode: u8,
    /// Packets per ACK with IBTCA_ACK_COALESCED.
    pub ack_every: u16,
    /// Send window in packets (0: the device's default, 1: stop-and-wait).
    pub window: u16,
    /// Q_Key (UD and GSI QPs).
    pub qkey: u32,
}

impl QpAttrs {
    /// Checks and applies the attributes `mask` selects from `m`.
    fn apply(&mut self, mask: u32, m: &CmdModifyQp) -> Result<(), VerbsError> {
        let mut a = *self;
        let bad = |ok: bool| if ok { Ok(()) } else { Err(VerbsError::Invalid) };
        if mask & QP_ATTR_ACCESS != 0 {
            a.access = m.access.to_native();
            bad(a.access & !ACCESS_REMOTE == 0)?;
        }
        if mask & QP_ATTR_PATH != 0 {
            (a.path_mtu, a.dlid, a.sl) = (m.path_mtu, m.dlid.to_native(), m.sl);
            bad((MTU_256..=MTU_4096).contains(&a.path_mtu))?;
            // SL15 is the management SL (VL15): not for an RC QP.
            bad(a.sl <= MAX_SL)?;
            bad(a.dlid != 0 && a.dlid < 0xc000)?;
        }
        if mask & QP_ATTR_DEST_QPN != 0 {
            a.dest_qpn = m.dest_qpn.to_native();
            bad(a.dest_qpn <= PSN_MASK)?;
        }
        if mask & QP_ATTR_RQ_PSN != 0 {
            a.rq_psn = m.rq_psn.to_native();
            bad(a.rq_psn <= PSN_MASK)?;
        }
        if mask & QP_ATTR_SQ_PSN != 0 {
            a.sq_psn = m.sq_psn.to_native();
            bad(a.sq_psn <= PSN_MASK)?;
        }
        if mask & QP_ATTR_PKEY_INDEX != 0 {
            a.pkey_index = m.pkey_index.to_native();
            bad(u32::from(a.pkey_index) < PKEY_TABLE_LEN)?;
        }
        if mask & QP_ATTR_QKEY != 0 {
            a.qkey = m.access.to_native();
        }
        if mask & QP_ATTR_RETRY != 0 {
            a.timeout = m.timeout;
            a.retry_cnt = m.retry_cnt;
            a.rnr_retry = m.rnr_retry;
            a.min_rnr_timer = m.min_rnr_timer;
            a.max_rd_atomic = m.max_rd_atomic;
            bad(a.timeout <= 31 && a.retry_cnt <= 7 && a.rnr_retry <= 7)?;
            bad(a.min_rnr_timer <= 31 && a.max_rd_atomic <= MAX_INIT_RD_ATOMIC)?;
        }
        if mask & QP_ATTR_MSN != 0 {
            a.initial_msn = m.initial_msn.to_native();
            bad(a.initial_msn <= PSN_MASK)?;
        }
        if mask & QP_ATTR_ACK_POLICY != 0 {
            (a.ack_mode, a.ack_every) = (m.ack_mode, m.ack_every.to_native());
            a.window = m.window.to_native();
            bad(matches!(
                a.ack_mode,
                ACK_PER_MESSAGE | ACK_PER_PACKET | ACK_COALESCED
            ))?;
            bad(a.ack_mode != ACK_COALESCED || a.ack_every > 0)?;
            bad(a.window <= MAX_WINDOW)?;
        }
        if mask & QP_ATTR_DEST_RD_ATOMIC != 0 {
            a.max_dest_rd_atomic = Some(m.max_dest_rd_atomic);
            bad(m.max_dest_rd_atomic <= MAX_RD_ATOMIC)?;
        }
        *self = a;
        Ok(())
    }
}

fn bad_unless(ok: bool) -> Result<(), VerbsError> {
    if ok {
        Ok(())
    } else {
        Err(VerbsError::Invalid)
    }
}

/// A ring with a producer and a consumer index.
#[derive(Debug)]
struct WorkQueue {
    ring: Ring,
    pi: u32,
    ci: u32,
}

/// A work queue's indexes as the device holds them: `pi` the producer
/// index the driver reported (doorbell or record), `ci` the next WQE the
/// device reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueIndexes {
    /// The driver's producer index, as the device last took it.
    pub pi: u32,
    /// The next WQE the device reads.
    pub ci: u32,
}

impl From<&WorkQueue> for QueueIndexes {
    fn from(q: &WorkQueue) -> Self {
        QueueIndexes { pi: q.pi, ci: q.ci }
    }
}

impl WorkQueue {
    fn new(gpa: u64, log: u8, stride: usize) -> Result<Self, VerbsError> {
        Ok(WorkQueue {
            ring: Ring::new(gpa, log, stride as u64, MAX_WQ_LOG)?,
            pi: 0,
            ci: 0,
        })
    }

    fn read<T: ByteValued + Default>(&self, mem: &GuestMemory, index: u32) -> Option<T> {
        let mut v = T::default();
        mem.read(self.ring.slot_addr(index), v.as_mut_slice())
            .ok()?;
        Some(v)
    }
}

/// One RC queue pair.
#[derive(Debug)]
pub struct Qp {
    /// Protection domain.
    pub pdn: u32,
    /// CQ for send completions.
    pub send_cqn: u32,
    /// CQ for receive completions.
    pub recv_cqn: u32,
    /// Doorbell page its SQ and RQ doorbells must come from.
    pub db_page: u32,
    /// The shared receive queue its receives come from (then it has no RQ).
    pub srqn: Option<u32>,
    /// RC, UD, SMI or GSI.
    pub qp_type: QpType,
    state: QpState,
    attrs: QpAttrs,
    sq: WorkQueue,
    rq: Option<WorkQueue>,
    /// RC only.
    quasi: Option<WorkQueue>,
    db_record: Option<DoorbellRecord>,
}

impl Qp {
    /// A QP in RESET with the rings of `p` (`Invalid` for a bad or
    /// overlapping ring, sizes above 2^[`MAX_WQ_LOG`], an RQ given with an
    /// SRQ). The caller checks the PD, CQs and SRQ.
    pub fn new(p: &CmdCreateQp) -> Result<Qp, VerbsError> {
        let qp_type = QpType::from_abi(p.log_sizes[3]).ok_or(VerbsError::Invalid)?;
        if u32::from(p.db_page.to_native()) >= crate::regs::DB_PAGES {
            return Err(VerbsError::Invalid);
        }
        let srqn = Some(p.srqn.to_native()).filter(|&n| n != 0);
        if srqn.is_some() && (p.rq.to_native() != 0 || p.log_sizes[1] != 0 || p.rq_log_stride != 0)
        {
            return Err(VerbsError::Invalid);
        }
        let sq = WorkQueue::new(
            p.sq.to_native(),
            p.log_sizes[0],
            wqe_stride(p.sq_log_stride)? as usize,
        )?;
        let rq = match srqn {
            Some(_) => None,
            None => Some(WorkQueue::new(
                p.rq.to_native(),
                p.log_sizes[1],
                wqe_stride(p.rq_log_stride)? as usize,
            )?),
        };
        let quasi = match qp_type {
            QpType::Rc => Some(WorkQueue::new(
                p.quasi.to_native(),
                p.log_sizes[2],
                size_of::<QuasiWqe>(),
            )?),
            _ => None,
        };
        let rings: Vec<&Ring> = [Some(&sq), rq.as_ref(), quasi.as_ref()]
            .into_iter()
            .flatten()
            .map(|q| &q.ring)
            .collect();
        let overlap = rings
            .iter()
            .enumerate()
            .any(|(i, a)| rings[i + 1..].iter().any(|b| a.overlaps(b)));
        if overlap {
            return Err(VerbsError::Invalid);
        }
        let mut attrs = QpAttrs::default();
        if qp_type == QpType::Gsi {
            attrs.qkey = GSI_QKEY;
        }
        Ok(Qp {
            qp_type,
            pdn: p.pdn.to_native(),
            send_cqn: p.send_cqn.to_native(),
            recv_cqn: p.recv_cqn.to_native(),
            db_page: p.db_page.to_native().into(),
            srqn,
            state: QpState::Reset,
            attrs,
            sq,
            rq,
            quasi,
            db_record: None,
        })
    }

    /// Gives the QP the doorbell record `rec` (the latest one counts).
    pub fn set_db_record(&mut self, rec: DoorbellRecord) {
        self.db_record = Some(rec);
    }

    /// The QP's doorbell record, if it has one.
    pub fn db_record(&self) -> Option<&DoorbellRecord> {
        self.db_record.as_ref()
    }

    /// The SQ's indexes.
    pub fn sq_indexes(&self) -> QueueIndexes {
        QueueIndexes::from(&self.sq)
    }

    /// The RQ's indexes (none for a QP on an SRQ).
    pub fn rq_indexes(&self) -> Option<QueueIndexes> {
        self.rq.as_ref().map(QueueIndexes::from)
    }

    /// Takes `q`'s producer index from the doorbell record, as a doorbell
    /// would (an index out of range puts the QP in error), where the
    /// device reads the record by itself: the SQ in RTS, the RQ in RTR and
    /// RTS. Nothing happens otherwise, without a record, or when the
    /// record left guest memory.
    pub fn from_record(&mut self, mem: &GuestMemory, q: RecordQueue) -> Result<(), QpError> {
        if !self.reads_record(q) {
            return Ok(());
        }
        self.take_record_pi(mem, q)
    }

    /// Whether the device reads `q`'s index from the record by itself in
    /// this state.
    fn reads_record(&self, q: RecordQueue) -> bool {
        match q {
            RecordQueue::Sq => self.state == QpState::Rts,
            RecordQueue::Rq => self.state.receives(),
        }
    }

    fn take_record_pi(&mut self, mem: &GuestMemory, q: RecordQueue) -> Result<(), QpError> {
        match self.db_record.and_then(|r| r.pi(mem, q)) {
            Some(pi) => self.doorbell(q == RecordQueue::Sq, pi),
            None => Ok(()),
        }
    }

    /// The producer index `q`'s doorbell record holds, if it is other than
    /// the one the device took, where the device reads that record (the
    /// SQ in RTS, the RQ in RTR and RTS).
    pub fn record_ahead(&self, mem: &GuestMemory, q: RecordQueue) -> Option<u32> {
        if !self.reads_record(q) {
            return None;
        }
        let pi = self.db_record.and_then(|r| r.pi(mem, q))?;
        (Some(pi) != self.queue_pi(q)).then_some(pi)
    }

    /// Says in the doorbell record whether the device will read `q`'s
    /// index again by itself. Going to sleep reads the index once more
    /// (in any state but RESET: in ERR what it covers is flushed): true if
    /// that found WQEs posted meanwhile, which the caller must then take.
    pub fn set_awake(
        &mut self,
        mem: &GuestMemory,
        q: RecordQueue,
        awake: bool,
    ) -> Result<bool, QpError> {
        let Some(rec) = self.db_record.as_mut() else {
            return Ok(false);
        };
        let was = rec.awake(q);
        rec.set_awake(mem, q, awake);
        if awake || !was || self.state == QpState::Reset {
            return Ok(false);
        }
        // A QP on an SRQ has no RQ of its own to read.
        let Some(before) = self.queue_pi(q) else {
            return Ok(false);
        };
        self.take_record_pi(mem, q)?;
        Ok(self.queue_pi(q) != Some(before))
    }

    /// The device's producer index of `q` (none: the RQ of a QP on an SRQ).
    fn queue_pi(&self, q: RecordQueue) -> Option<u32> {
        match q {
            RecordQueue::Sq => Some(self.sq.pi),
            RecordQueue::Rq => self.rq.as_ref().map(|rq| rq.pi),
        }
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Connection attributes.
    pub fn attrs(&self) -> &QpAttrs {
        &self.attrs
    }

    /// Applies MODIFY_QP (`Invalid` for an illegal transition, missing or
    /// disallowed attributes, or out-of-range values; nothing changes then).
    /// Entering RESET empties the rings (indexes back to 0) and clears the
    /// attributes.
    pub fn modify(&mut self, m: &CmdModifyQp) -> Result<(), VerbsError> {
        let mask = m.attr_mask.to_native();
        let to = check_modify(self.qp_type, self.state, mask, m.state)?;
        let mut attrs = self.attrs;
        attrs.apply(mask, m)?;
        if self.qp_type == QpType::Gsi {
            // IBA 13.5.3.2: QP1's Q_Key is fixed.
            bad_unless(attrs.qkey == GSI_QKEY)?;
        }
        self.attrs = attrs;
        if to == QpState::Reset {
            self.attrs = QpAttrs {
                qkey: if self.qp_type == QpType::Gsi {
                    GSI_QKEY
                } else {
                    0
                },
                ..QpAttrs::default()
            };
            for q in [Some(&mut self.sq), self.rq.as_mut(), self.quasi.as_mut()]
                .into_iter()
                .flatten()
            {
                (q.pi, q.ci) = (0, 0);
            }
            if let Some(r) = self.db_record.as_mut() {
                r.forget();
            }
        }
        self.state = to;
        Ok(())
    }

    /// The PSN of a datagram QP's next packet (from the SQ PSN MODIFY_QP
    /// set, counting on).
    pub fn next_datagram_psn(&mut self) -> u32 {
        let psn = self.attrs.sq_psn;
        self.attrs.sq_psn = (psn + 1) & PSN_MASK;
        psn
    }

    /// Moves a QP in RTS to the send queue error state (a UD QP's send
    /// work request failed, IBA 10.3.1): the engine flushes its later
    /// send WQEs until MODIFY_QP brings it back to RTS.
    pub fn set_send_queue_error(&mut self) {
        if self.state == QpState::Rts {
            crate::guest_warn!(pdn = self.pdn, "QP enters the send queue error state");
            self.state = QpState::Sqe;
        }
    }

    /// Moves the QP to the error state (the engine flushes its WQEs).
    pub fn set_error(&mut self) {
        if self.state != QpState::Err {
            crate::guest_warn!(pdn = self.pdn, "QP enters the error state");
        }
        self.state = QpState::Err;
    }

    fn doorbell(&mut self, send: bool, pi: u32) -> Result<(), QpError> {
        if self.state == QpState::Reset {
            return Err(QpError::Reset);
        }
        let has_record = self.db_record.is_some();
        // A QP on an SRQ has no RQ: its RQ doorbells are refused.
        let Some(q) = (if send {
            Some(&mut self.sq)
        } else {
            self.rq.as_mut()
        }) else {
            return Err(QpError::Overrun);
        };
        // The record may have told more than a doorbell rung before it,
        // which may arrive any time later (the vfio-user thread forwards
        // it while the engine reads the record): an index not ahead of the
        // device's (by serial-number arithmetic) is old news.
        if has_record && (q.pi.wrapping_sub(pi) as i32) >= 0 {
            return Ok(());
        }
        // Not ahead of the consumer by more than the ring, not behind the
        // previous producer index.
        let outstanding = pi.wrapping_sub(q.ci);
        if outstanding > q.ring.entries() || pi.wrapping_sub(q.pi) > outstanding {
            self.set_error();
            return Err(QpError::Overrun);
        }
        q.pi = pi;
        Ok(())
    }

    /// SQ doorbell with the driver's producer index.
    pub fn sq_doorbell(&mut self, pi: u32) -> Result<(), QpError> {
        self.doorbell(true, pi)
    }

    /// RQ doorbell with the driver's producer index.
    pub fn rq_doorbell(&mut self, pi: u32) -> Result<(), QpError> {
        self.doorbell(false, pi)
    }

    /// Send WQEs posted and not yet taken.
    pub fn sq_pending(&self) -> u32 {
        self.sq.pi.wrapping_sub(self.sq.ci)
    }

    /// Whether the send queue holds WQEs the device has not read yet.
    pub fn send_pending(&self) -> bool {
        self.sq.ci != self.sq.pi
    }

    /// Takes the next send WQE with its SGE list (in RTS, or in SQE or ERR
    /// for flushing).
    pub fn next_send_wqe(&mut self, mem: &GuestMemory) -> Result<Option<SendWr>, QpError> {
        if !self.state.takes_sends() || self.sq.ci == self.sq.pi {
            return Ok(None);
        }
        let Some(w) = read_send(mem, &self.sq.ring, self.sq.ci) else {
            return Err(self.dma_fault());
        };
        self.sq.ci = self.sq.ci.wrapping_add(1);
        Ok(Some(w))
    }

    /// Takes the next receive WQE of its own RQ (in RTR, RTS or SQE, or in
    /// ERR for flushing; none for a QP on an SRQ).
    pub fn next_recv_wqe(&mut self, mem: &GuestMemory) -> Result<Option<RecvWr>, QpError> {
        let ready = self.state.receives() || self.state == QpState::Err;
        if ready && self.rq.as_ref().is_some_and(|rq| rq.ci == rq.pi) {
            self.from_record(mem, RecordQueue::Rq)?;
        }
        let Some(rq) = self.rq.as_ref().filter(|rq| ready && rq.ci != rq.pi) else {
            return Ok(None);
        };
        let Some(w) = read_recv(mem, &rq.ring, rq.ci) else {
            return Err(self.dma_fault());
        };
        if let Some(rq) = self.rq.as_mut() {
            rq.ci = rq.ci.wrapping_add(1);
        }
        Ok(Some(w))
    }

    fn dma_fault(&mut self) -> QpError {
        self.set_error();
        QpError::Dma
    }

    /// Appends a quasi-WQE (owner bit set here, written last). A datagram
    /// QP has no ring: always `Full`.
    pub fn push_quasi(&mut self, mem: &GuestMemory, q: &QuasiWqe) -> Result<(), QpError> {
        let Some(r) = &self.quasi else {
            return Err(QpError::Full);
        };
        if r.pi.wrapping_sub(r.ci) >= r.ring.entries() {
            return Err(QpError::Full);
        }
        let mut e = *q;
        e.owner = r.ring.owner(r.pi);
        let (bytes, addr) = (e.as_slice(), r.ring.slot_addr(r.pi));
        let res = mem
            .write(addr, &bytes[..QUASI_OWNER_OFFSET])
            .and_then(|()| {
                mem.write(
                    addr + QUASI_OWNER_OFFSET as u64 + 1,
                    &bytes[QUASI_OWNER_OFFSET + 1..],
                )
            });
        fence(Ordering::Release);
        if res
            .and_then(|()| mem.write(addr + QUASI_OWNER_OFFSET as u64, &[e.owner]))
            .is_err()
        {
            return Err(self.dma_fault());
        }
        if let Some(r) = &mut self.quasi {
            r.pi = r.pi.wrapping_add(1);
        }
        Ok(())
    }

    /// Reads the oldest quasi-WQE from guest memory without taking it. Its
    /// contents are untrusted: the send engine checks them against its own
    /// record of the READ each time it reads them.
    pub fn peek_quasi(&mut self, mem: &GuestMemory) -> Result<Option<QuasiWqe>, QpError> {
        let Some(r) = &self.quasi else {
            return Ok(None);
        };
        if r.ci == r.pi {
            return Ok(None);
        }
        let expected = r.ring.owner(r.ci);
        let q: QuasiWqe = r.read(mem, r.ci).ok_or_else(|| self.dma_fault())?;
        if q.owner & 1 != expected {
            self.set_error();
            return Err(QpError::Corrupt);
        }
        Ok(Some(q))
    }

    /// Takes the oldest quasi-WQE (read as [`Qp::peek_quasi`] reads it).
    pub fn pop_quasi(&mut self, mem: &GuestMemory) -> Result<Option<QuasiWqe>, QpError> {
        let q = self.peek_quasi(mem)?;
        if let (Some(_), Some(r)) = (q, &mut self.quasi) {
            r.ci = r.ci.wrapping_add(1);
        }
        Ok(q)
    }
}

/// The QPs of one device. QP numbers are 24-bit, at least 0x400 (never the
/// special QPs 0 and 1) and not reused immediately.
pub type QpTable = HandleTable<Qp>;

/// A QP table of at most `capacity` QPs.
pub fn qp_table(capacity: usize) -> QpTable {
    HandleTable::new(capacity, 10, 24)
}

#[cfg(test)]
#[path = "qp_tests.rs"]
mod tests;
