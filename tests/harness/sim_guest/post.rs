//! Posting work requests from a simulated guest: WQEs into a QP's rings
//! (one at a time through the memfd, or in batches through the mapped
//! RAM) and the doorbells that announce them, in BAR0 or a doorbell page.

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;

use super::{DbRoute, Qp, SimGuest};

impl SimGuest {
    /// Writes a send WQE and rings the SQ doorbell (one posted 8-byte write).
    pub fn post_send(&mut self, qp: &mut Qp, wqe: &SendWqe) {
        let slot = qp.sq + qp.sq_stride() * u64::from(qp.sq_pi & ((1 << qp.log) - 1));
        self.write_obj(slot, wqe);
        qp.sq_pi = qp.sq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.sq_pi) << 32);
        self.ring(qp.db, regs::DB_SQ, db);
    }

    /// Writes a receive WQE and rings the RQ doorbell.
    pub fn post_recv(&mut self, qp: &mut Qp, wqe: &RecvWqe) {
        let slot = qp.rq + 128 * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
        self.write_obj(slot, wqe);
        qp.rq_pi = qp.rq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
        self.ring(qp.db, regs::DB_RQ, db);
    }
    /// Writes `wqe` (a send WQE's bytes, at most the SQ's stride) into the
    /// next SQ slot and rings the SQ doorbell.
    pub fn post_send_bytes(&mut self, qp: &mut Qp, wqe: &[u8]) {
        assert!(wqe.len() as u64 <= qp.sq_stride(), "WQE larger than a slot");
        let slot = qp.sq + qp.sq_stride() * u64::from(qp.sq_pi & ((1 << qp.log) - 1));
        self.write(slot, wqe);
        qp.sq_pi = qp.sq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.sq_pi) << 32);
        self.ring(qp.db, regs::DB_SQ, db);
    }

    /// Writes `wqe` (a receive WQE's bytes, at most the RQ's stride) into
    /// the next RQ slot and rings the RQ doorbell.
    pub fn post_recv_bytes(&mut self, qp: &mut Qp, wqe: &[u8]) {
        assert!(wqe.len() as u64 <= qp.rq_stride(), "WQE larger than a slot");
        let slot = qp.rq + qp.rq_stride() * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
        self.write(slot, wqe);
        qp.rq_pi = qp.rq_pi.wrapping_add(1);
        let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
        self.ring(qp.db, regs::DB_RQ, db);
    }

    /// Writes doorbell `value` of BAR0 register `reg` (DB_SQ, DB_RQ,
    /// DB_CQ or DB_SRQ) there or at the same doorbell of a doorbell page.
    pub fn ring(&mut self, route: DbRoute, reg: u64, value: u64) {
        let bytes = value.to_le_bytes();
        match route {
            DbRoute::Bar0 => self.client.post_write(0, reg, &bytes),
            DbRoute::Page(k) => {
                let within = match reg {
                    regs::DB_SQ => regs::DB_PAGE_SQ,
                    regs::DB_RQ => regs::DB_PAGE_RQ,
                    regs::DB_SRQ => regs::DB_PAGE_SRQ,
                    _ => regs::DB_PAGE_CQ,
                };
                let at = u64::from(k) * regs::DB_PAGE_SIZE + within;
                self.client.post_write(regs::DB_BAR, at, &bytes);
            }
        }
    }

    /// Writes `wqes` into the SQ through the mapped RAM and rings the SQ
    /// doorbell once for all of them (a driver's `post_send` with a chain of
    /// work requests). The caller keeps the SQ from overflowing.
    pub fn post_send_batch(&mut self, qp: &mut Qp, wqes: &[SendWqe]) {
        if wqes.is_empty() {
            return;
        }
        for w in wqes {
            let slot = qp.sq + 128 * u64::from(qp.sq_pi & ((1 << qp.log) - 1));
            self.map.store(slot, w);
            qp.sq_pi = qp.sq_pi.wrapping_add(1);
        }
        // The doorbell is a socket write (a syscall): the WQE stores are
        // visible to the device before it sees the doorbell.
        let db = u64::from(qp.qpn) | (u64::from(qp.sq_pi) << 32);
        self.ring(qp.db, regs::DB_SQ, db);
    }

    /// Writes `wqes` into the RQ through the mapped RAM and rings the RQ
    /// doorbell once. The caller keeps the RQ from overflowing.
    pub fn post_recv_batch(&mut self, qp: &mut Qp, wqes: &[RecvWqe]) {
        if wqes.is_empty() {
            return;
        }
        for w in wqes {
            let slot = qp.rq + 128 * u64::from(qp.rq_pi & ((1 << qp.log) - 1));
            self.map.store(slot, w);
            qp.rq_pi = qp.rq_pi.wrapping_add(1);
        }
        let db = u64::from(qp.qpn) | (u64::from(qp.rq_pi) << 32);
        self.ring(qp.db, regs::DB_RQ, db);
    }
}
