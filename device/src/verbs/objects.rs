//! Creating and destroying verbs objects: the rules that span tables. An
//! object may only name live PDs and CQs, holds a use of each while it
//! lives, and releases them when destroyed; a PD or CQ with users cannot be
//! destroyed (`EBUSY`). Handles are checked before parameters, so an unknown
//! handle is `ENOENT` even when other parameters are bad too.

use super::abi::{CmdCreateQp, CmdModifyQp};
use super::cq::Cq;
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

    /// Deregisters the region with `lkey` (not while windows are bound).
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        let mr = self.mrs.deregister(lkey)?;
        self.pds.release(mr.pdn);
        Ok(())
    }

    /// Allocates a memory window in `pdn`; returns its key.
    pub fn alloc_mw(&mut self, pdn: u32) -> Result<u32, VerbsError> {
        if !self.pds.contains(pdn) {
            return Err(VerbsError::NotFound);
        }
        let rkey = self.mrs.alloc_mw(pdn)?;
        self.pds.hold(pdn)?;
        Ok(rkey)
    }

    /// Frees the window whose current key is `rkey`, unbinding it first.
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

    /// The device QP number of the port's QP0 (`QpType::Smi`) or QP1
    /// (`QpType::Gsi`), if the driver created it.
    pub fn special_qp(&self, t: QpType) -> Option<u32> {
        self.qps
            .iter()
            .find(|(_, qp)| qp.qp_type == t)
            .map(|(qpn, _)| qpn)
    }

    /// Destroys a QP (in any state) and releases its PD and CQs.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        let qp = self.qps.remove(qpn)?;
        self.keys.remove_qp(qpn);
        self.pds.release(qp.pdn);
        self.cqs.release(qp.send_cqn);
        self.cqs.release(qp.recv_cqn);
        Ok(())
    }
}
