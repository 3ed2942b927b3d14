//! A QP's doorbell record (`struct ibtca_db_record` in guest memory,
//! command QP_DB_RECORD): the driver stores its SQ and RQ producer indexes
//! there after its WQEs, so that the device sees new WQEs without a
//! doorbell, which under QEMU is a trapped store costing the guest tens of
//! microseconds. For each queue the device keeps an awake word nonzero
//! exactly while it will read that index again by itself (the SQ: send
//! work in flight; the RQ: RTR or RTS, where each inbound SEND looks for a
//! receive); the driver rings only when it reads 0 there.
//!
//! The hand-over is a store-fence-load on each side: the driver stores the
//! index, fences, loads the awake word; the device, before it stops
//! reading, stores 0 in the awake word, fences, loads the index. Whichever
//! goes second sees the other's store, so a WQE is never left without a
//! doorbell or a read. Everything the guest writes here is untrusted: an
//! index goes through the same range check as a doorbell's.
//!
//! A CQ's record (`struct ibtca_cq_db_record`, command CQ_DB_RECORD, kept
//! by `cq.rs`) holds the driver's consumer index, which the device reads
//! before it calls the CQ full: WQEs taken from a QP's record may overtake
//! the CQ doorbell that reported the entries consumed before them.

use std::mem::offset_of;
use std::sync::atomic::{fence, Ordering};

use super::abi::{DbRecord, DB_RECORD_BYTES};
use super::VerbsError;
use crate::dma::GuestMemory;

/// Alignment of a doorbell record (one cache line).
pub const DB_RECORD_ALIGN: u64 = 64;

/// Checks a record's guest address (QP or CQ record, 64 bytes): `Invalid`
/// unless 64-byte aligned, `Fault` unless in guest memory now (it is
/// checked again on every access).
pub fn check_record(addr: u64, mem: &GuestMemory) -> Result<(), VerbsError> {
    if !addr.is_multiple_of(DB_RECORD_ALIGN) {
        return Err(VerbsError::Invalid);
    }
    let len = u64::from(DB_RECORD_BYTES).min(size_of::<DbRecord>() as u64);
    if addr.checked_add(len).is_none() || !mem.is_mapped(addr, len) {
        return Err(VerbsError::Fault);
    }
    Ok(())
}

/// One of the two queues a record covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordQueue {
    /// The send queue.
    Sq,
    /// The receive queue.
    Rq,
}

impl RecordQueue {
    /// Offsets of the queue's index and awake word in the record.
    fn offsets(self) -> (u64, u64) {
        let (pi, awake) = match self {
            RecordQueue::Sq => (offset_of!(DbRecord, sq_pi), offset_of!(DbRecord, sq_awake)),
            RecordQueue::Rq => (offset_of!(DbRecord, rq_pi), offset_of!(DbRecord, rq_awake)),
        };
        (pi as u64, awake as u64)
    }
}

/// A record's four words as guest memory holds them now (what the driver
/// and the device last stored; read for `inspect`, trusted for nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordWords {
    /// The driver's SQ producer index.
    pub sq_pi: u32,
    /// The device's SQ awake word.
    pub sq_awake: u32,
    /// The driver's RQ producer index.
    pub rq_pi: u32,
    /// The device's RQ awake word.
    pub rq_awake: u32,
}

/// Where a QP's record is and what the device last stored in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DoorbellRecord {
    addr: u64,
    /// The awake words the device last stored, SQ then RQ (`None`: not
    /// known, so the next [`DoorbellRecord::set_awake`] stores whatever it
    /// is given).
    awake: [Option<bool>; 2],
}

impl DoorbellRecord {
    /// A record at guest address `addr` ([`check_record`]).
    pub fn new(addr: u64, mem: &GuestMemory) -> Result<Self, VerbsError> {
        check_record(addr, mem)?;
        Ok(DoorbellRecord {
            addr,
            awake: [None; 2],
        })
    }

    /// Guest address of the record.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// The producer index of `q` the driver stored; `None` if the record
    /// left guest memory.
    pub fn pi(&self, mem: &GuestMemory, q: RecordQueue) -> Option<u32> {
        mem.load_u32(self.addr + q.offsets().0).ok()
    }

    /// The record's words now; `None` if it left guest memory.
    pub fn words(&self, mem: &GuestMemory) -> Option<RecordWords> {
        let load = |off: usize| mem.load_u32(self.addr + off as u64).ok();
        Some(RecordWords {
            sq_pi: load(offset_of!(DbRecord, sq_pi))?,
            sq_awake: load(offset_of!(DbRecord, sq_awake))?,
            rq_pi: load(offset_of!(DbRecord, rq_pi))?,
            rq_awake: load(offset_of!(DbRecord, rq_awake))?,
        })
    }

    /// Whether the device last said it was awake on `q`.
    pub fn awake(&self, q: RecordQueue) -> bool {
        self.awake[q as usize] == Some(true)
    }

    /// Stores the awake word of `q` if it changes. Going to sleep is
    /// followed by a full fence, so the caller's next
    /// [`DoorbellRecord::pi`] sees any index the driver stored before it
    /// looked at the awake word.
    pub fn set_awake(&mut self, mem: &GuestMemory, q: RecordQueue, awake: bool) {
        let known = &mut self.awake[q as usize];
        if *known == Some(awake) {
            return;
        }
        // A record outside guest memory now: the driver's doorbells still
        // work, and a later access tries again.
        *known = mem
            .store_u32(self.addr + q.offsets().1, u32::from(awake))
            .is_ok()
            .then_some(awake);
        if !awake {
            fence(Ordering::SeqCst);
        }
    }

    /// Forgets what the device stored: the next `set_awake` stores again
    /// (after a reset of the QP, whose driver may have cleared the page).
    pub fn forget(&mut self) {
        self.awake = [None; 2];
    }
}
