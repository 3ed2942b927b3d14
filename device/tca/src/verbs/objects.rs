//! Creating and destroying verbs objects: the rules that span tables. An
//! object may only name live PDs and CQs, holds a use of each while it
//! lives, and releases them when destroyed; a PD or CQ with users cannot be
//! destroyed (`EBUSY`). Handles are checked before parameters, so an unknown
//! handle is `ENOENT` even when other parameters are bad too.

use super::abi::{CmdCreateQp, CmdModifyQp};
use super::cq::Cq;
use super::db_record::{check_record, DoorbellRecord, RecordQueue};
use super::mr::MrTable;
use super::qp::{Qp, QpType};
use super::qp_state::QpState;
use super::translate::{PageList, PageListError, MAX_MR_PAGES};
use super::{Verbs, VerbsError};
use crate::dma::GuestMemory;

impl Verbs {
    /// Allocates a protection domain.
    pub fn create_pd(&mut self) -> Result<u32, VerbsError> {
        self.pds.alloc()
    }

    /// Frees a protection domain that no MR, window or QP uses.
    pub fn destroy_pd(&mut self, pdn: u32) -> Result<(), VerbsError> {
        self.pds.destroy(pdn)
    }

    /// Registers a memory region; returns `(lkey, rkey)`.
    pub fn reg_mr(
        &mut self,
        pdn: u32,
        access: u32,
        iova: u64,
        length: u64,
        gpa: u64,
    ) -> Result<(u32, u32), VerbsError> {
        if !self.pds.contains(pdn) {
            return Err(VerbsError::NotFound);
        }
        let keys = self.mrs.register(pdn, access, iova, length, gpa)?;
        self.pds.hold(pdn)?;
        Ok(keys)
    }

    /// Registers a page-list region (REG_MR with `npages` > 0): copies the
    /// table at `table` from guest memory; returns `(lkey, rkey)`.
    /// `Invalid` for a bad list (see [`PageList::load`]), `Fault` for a
    /// table outside guest memory, `NoMemory` past the device's page budget.
    #[allow(clippy::too_many_arguments)]
    pub fn reg_mr_pages(
        &mut self,
        mem: &GuestMemory,
        pdn: u32,
        access: u32,
        iova: u64,
        length: u64,
        table: u64,
        npages: u32,
        first_offset: u32,
    ) -> Result<(u32, u32), VerbsError> {
        if !self.pds.contains(pdn) {
            return Err(VerbsError::NotFound);
        }
        MrTable::check_registration(access, iova, length)?;
        if npages > MAX_MR_PAGES {
            return Err(VerbsError::Invalid);
        }
        if !self.mrs.can_hold_pages(u64::from(npages)) {
            return Err(VerbsError::NoMemory);
        }
        let mut list = PageList::with_capacity(npages);
        list.load(
            mem,
            table,
            npages,
            u64::from(first_offset),
            length,
            MAX_MR_PAGES,
        )
        .map_err(|e| match e {
            PageListError::Invalid => VerbsError::Invalid,
            PageListError::Fault => VerbsError::Fault,
        })?;
        let keys = self.mrs.register_pages(pdn, access, iova, length, list)?;
        self.pds.hold(pdn)?;
        Ok(keys)
    }

    /// Allocates a fast-registration region (ALLOC_MR); returns its key.
    pub fn alloc_mr(&mut self, pdn: u32, max_pages: u32) -> Result<u32, VerbsError> {
        if !self.pds.contains(pdn) {
            return Err(VerbsError::NotFound);
        }
        let key = self.mrs.alloc_fast(pdn, max_pages)?;
        self.pds.hold(pdn)?;
        Ok(key)
    }

    /// Deregisters the region with `lkey` (not while windows are bound);
    /// the key walk (seed 001) stops the remote operations in flight
    /// through its rkey.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        let rkey = self.mrs.current_rkey(lkey);
        let mr = self.mrs.deregister(lkey)?;
        if let Some(rkey) = rkey {
            self.keys.invalidate_walk(mr.pdn, rkey);
        }
        self.pds.release(mr.pdn);
        Ok(())
    }

    /// Allocates a memory window (type 1 if `type1`, else type 2) in
    /// `pdn`; returns its key.
    pub fn alloc_mw(&mut self, pdn: u32, type1: bool) -> Result<u32, VerbsError> {
        if !self.pds.contains(pdn) {
            return Err(VerbsError::NotFound);
        }
        let rkey = self.mrs.alloc_mw(pdn, type1)?;
        self.pds.hold(pdn)?;
        Ok(rkey)
    }

    /// Frees the window whose key is `rkey` (any low byte), unbinding it
    /// first.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), VerbsError> {
        let pdn = self.mrs.dealloc_mw(rkey, &mut self.keys)?;
        self.pds.release(pdn);
        Ok(())
    }

    /// Creates a CQ whose doorbells come from doorbell page `db_page`;
    /// returns its number.
    pub fn create_cq(
        &mut self,
        ring: u64,
        log: u8,
        vector: u8,
        db_page: u32,
    ) -> Result<u32, VerbsError> {
        if db_page >= crate::regs::DB_PAGES {
            return Err(VerbsError::Invalid);
        }
        let mut cq = Cq::new(ring, log, vector)?;
        cq.db_page = db_page;
        self.cqs.insert(cq)
    }

    /// Destroys a CQ that no QP uses.
    pub fn destroy_cq(&mut self, cqn: u32) -> Result<(), VerbsError> {
        self.cqs.remove(cqn).map(drop)
    }

    /// Creates an RC QP in RESET; returns its number.
    pub fn create_qp(&mut self, p: &CmdCreateQp) -> Result<u32, VerbsError> {
        let (pdn, scq, rcq) = (
            p.pdn.to_native(),
            p.send_cqn.to_native(),
            p.recv_cqn.to_native(),
        );
        if !self.pds.contains(pdn) || !self.cqs.contains(scq) || !self.cqs.contains(rcq) {
            return Err(VerbsError::NotFound);
        }
        let srqn = p.srqn.to_native();
        if srqn != 0 {
            // The SRQ's WQEs name regions of its PD, checked in the QP's.
            let srq = self.srqs.get(srqn).ok_or(VerbsError::NotFound)?;
            if srq.pdn != pdn {
                return Err(VerbsError::Invalid);
            }
        }
        let qp = Qp::new(p)?;
        // The port has one QP0 and one QP1.
        if matches!(qp.qp_type, QpType::Smi | QpType::Gsi) && self.special_qp(qp.qp_type).is_some()
        {
            return Err(VerbsError::Busy);
        }
        let qpn = self.qps.insert(qp)?;
        self.pds.hold(pdn)?;
        self.cqs.hold(scq)?;
        self.cqs.hold(rcq)?;
        if srqn != 0 {
            self.srqs.hold(srqn)?;
        }
        Ok(qpn)
    }

    /// Applies MODIFY_QP.
    pub fn modify_qp(&mut self, m: &CmdModifyQp) -> Result<(), VerbsError> {
        let qpn = m.qpn.to_native();
        let qp = self.qps.get_mut(qpn).ok_or(VerbsError::NotFound)?;
        qp.modify(m)?;
        if qp.state() == QpState::Reset {
            self.keys.remove_qp(qpn);
        }
        Ok(())
    }

    /// Gives QP `qpn` (in any state) the doorbell record at `addr`.
    pub fn bind_db_record(
        &mut self,
        qpn: u32,
        addr: u64,
        mem: &GuestMemory,
    ) -> Result<(), VerbsError> {
        let qp = self.qps.get_mut(qpn).ok_or(VerbsError::NotFound)?;
        qp.set_db_record(DoorbellRecord::new(addr, mem)?);
        Ok(())
    }

    /// Gives CQ `cqn` the doorbell record at `addr`.
    pub fn bind_cq_db_record(
        &mut self,
        cqn: u32,
        addr: u64,
        mem: &GuestMemory,
    ) -> Result<(), VerbsError> {
        let cq = self.cqs.get_mut(cqn).ok_or(VerbsError::NotFound)?;
        check_record(addr, mem)?;
        cq.set_db_record(addr);
        Ok(())
    }

    /// Brings the doorbell records' awake words in line with their QPs'
    /// states: the SQ's cleared outside RTS, SQE and ERR (the engine keeps
    /// it in those), the RQ's set in RTR, RTS and SQE and cleared otherwise. Returns
    /// the QPs whose RQ went to sleep with receives posted meanwhile (for
    /// the caller to flush).
    pub fn sync_db_records(&mut self, mem: &GuestMemory) -> Vec<u32> {
        let mut more = Vec::new();
        for (qpn, qp) in self.qps.iter_mut() {
            if qp.db_record().is_none() {
                continue;
            }
            let state = qp.state();
            if !state.takes_sends() {
                // Nothing to take: the index is read again from RTS on.
                let _ = qp.set_awake(mem, RecordQueue::Sq, false);
            }
            let rq = state.receives();
            if qp.set_awake(mem, RecordQueue::Rq, rq) == Ok(true) {
                more.push(qpn);
            }
        }
        more
    }

    /// The device QP number of the port's QP0 (`QpType::Smi`) or QP1
    /// (`QpType::Gsi`), if the driver created it.
    pub fn special_qp(&self, t: QpType) -> Option<u32> {
        self.qps
            .iter()
            .find(|(_, qp)| qp.qp_type == t)
            .map(|(qpn, _)| qpn)
    }

    /// Destroys a QP (in any state), detaches it from its multicast
    /// groups and releases its PD and CQs.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        let qp = self.qps.remove(qpn)?;
        self.keys.remove_qp(qpn);
        self.mcast.detach_qp(qpn);
        self.pds.release(qp.pdn);
        self.cqs.release(qp.send_cqn);
        self.cqs.release(qp.recv_cqn);
        if let Some(srqn) = qp.srqn {
            self.srqs.release(srqn);
        }
        Ok(())
    }
}
