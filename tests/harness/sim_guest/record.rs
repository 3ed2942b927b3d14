//! Posting through a QP's doorbell record (`struct ibtca_db_record`,
//! command QP_DB_RECORD) as the provider's `post_send` and `post_recv` do:
//! the WQEs, then the queue's producer index into the record, a full
//! fence, then a look at the queue's awake word; the trapped doorbell only
//! when the device says there that it sleeps on the queue.

use std::sync::atomic::{fence, Ordering};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use vm_memory::ByteValued;

use super::{Qp, SimGuest};

const SQ_PI: u64 = std::mem::offset_of!(DbRecord, sq_pi) as u64;
const SQ_AWAKE: u64 = std::mem::offset_of!(DbRecord, sq_awake) as u64;
const RQ_PI: u64 = std::mem::offset_of!(DbRecord, rq_pi) as u64;
const RQ_AWAKE: u64 = std::mem::offset_of!(DbRecord, rq_awake) as u64;

impl SimGuest {
    /// Binds a doorbell record (QP_DB_RECORD) to `qp` and returns its
    /// address, holding `qp`'s producer indexes so far: from then on
    /// [`SimGuest::post_send_recorded`] and [`SimGuest::post_recv_recorded`]
    /// post through it.
    pub fn bind_qp_record(&mut self, qp: &Qp) -> u64 {
        let record = self.alloc(4096, 4096);
        self.map.store(record + SQ_PI, &qp.sq_pi);
        self.map.store(record + RQ_PI, &qp.rq_pi);
        let p = CmdDbRecord {
            handle: qp.qpn.into(),
            addr: record.into(),
            ..Default::default()
        };
        self.cmd(CMD_QP_DB_RECORD, p.as_slice())
            .expect("QP_DB_RECORD");
        record
    }

    /// Writes `wqes` into `qp`'s SQ and the new producer index into its
    /// doorbell record at `record` ([`SimGuest::bind_qp_record`]), and
    /// rings the SQ doorbell only if the record's `sq_awake` reads 0 (the
    /// device reads the index by itself while it has send work in
    /// flight). Returns whether it rang. The caller keeps the SQ from
    /// overflowing.
    pub fn post_send_recorded(&mut self, qp: &mut Qp, wqes: &[SendWqe], record: u64) -> bool {
        if wqes.is_empty() {
            return false;
        }
        for w in wqes {
            let slot = qp.sq + qp.sq_stride() * u64::from(qp.sq_pi & ((1 << qp.log) - 1));
            self.map.store(slot, w);
            qp.sq_pi = qp.sq_pi.wrapping_add(1);
        }
        let asleep = self.publish_index(record, SQ_PI, SQ_AWAKE, qp.sq_pi);
        if asleep {
            let db = u64::from(qp.qpn) | (u64::from(qp.sq_pi) << 32);
            self.ring(qp.db, regs::DB_SQ, db);
        }
        asleep
    }

    /// [`SimGuest::post_send_recorded`] for receives: `wqes` into `qp`'s
    /// RQ, `rq_pi` into the record, the RQ doorbell only if `rq_awake`
    /// reads 0 (the device reads the index by itself while the QP can
    /// receive). Returns whether it rang.
    pub fn post_recv_recorded(&mut self, qp: &mut Qp, wqes: &[RecvWqe], record: u64) -> bool {
        if wqes.is_empty() {
            return false;
        }
        for w in wqes {
            let slot = qp.rq + qp.rq_stride() * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
            self.map.store(slot, w);
            qp.rq_pi = qp.rq_pi.wrapping_add(1);
        }
        let asleep = self.publish_index(record, RQ_PI, RQ_AWAKE, qp.rq_pi);
        if asleep {
            let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
            self.ring(qp.db, regs::DB_RQ, db);
        }
        asleep
    }

    /// The driver's half of the record's hand-over: stores `pi` at
    /// `record + pi_at` after the WQEs, fences, and says whether the awake
    /// word at `record + awake_at` reads 0 (then only a doorbell makes the
    /// device look). The device stores 0 there, fences and reads the index
    /// again before it stops reading: whichever goes second sees the
    /// other's store.
    fn publish_index(&self, record: u64, pi_at: u64, awake_at: u64, pi: u32) -> bool {
        fence(Ordering::Release);
        self.map.store(record + pi_at, &pi);
        fence(Ordering::SeqCst);
        self.map.load::<u32>(record + awake_at) == 0
    }
}
