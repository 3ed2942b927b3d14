//! What the engine needs from the verbs objects on the data path, named by
//! QP: local and remote access checks (in the QP's PD, with the QP's own
//! remote access flags), memory-window binds and local invalidates (which
//! run the key walk), completions into CQs, the SQ/RQ/CQ doorbells, and
//! the CQs' arm requests left untaken in their doorbell records.

use super::abi::{Cqe, RegMrWqe};
use super::cq::CqError;
use super::mr::{GpaRanges, RemoteRight, RemoteTarget};
use super::mw::BindRequest;
use super::{Verbs, VerbsError};
use crate::regs::{
    DB_CQ, DB_PAGES, DB_PAGE_CQ, DB_PAGE_RQ, DB_PAGE_SIZE, DB_PAGE_SQ, DB_PAGE_SRQ, DB_RQ, DB_SQ,
    DB_SRQ,
};
use crate::transport::AccessError;

/// A decoded doorbell register write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Doorbell {
    /// New SQ producer index.
    Sq {
        /// QP number.
        qpn: u32,
        /// Producer index.
        pi: u32,
    },
    /// New RQ producer index.
    Rq {
        /// QP number.
        qpn: u32,
        /// Producer index.
        pi: u32,
    },
    /// New SRQ producer index.
    Srq {
        /// SRQ number.
        srqn: u32,
        /// Producer index.
        pi: u32,
    },
    /// New CQ consumer index and IBTCA_CQ_ARM_* request.
    Cq {
        /// CQ number.
        cqn: u32,
        /// IBTCA_CQ_ARM_* (0: none).
        arm: u8,
        /// Consumer index.
        ci: u32,
    },
}

impl Doorbell {
    /// Decodes a write of `data` at `offset` in the doorbell BAR: the page
    /// it was rung on and the doorbell (page offsets IBTCA_DB_PAGE_SQ/RQ/CQ
    /// take the values BAR0's DB_SQ/DB_RQ/DB_CQ take). `None` for anything
    /// but one 8-byte write at one of those offsets of a page in the BAR.
    pub fn decode_page(offset: u64, data: &[u8]) -> Option<(u32, Doorbell)> {
        let page = u32::try_from(offset / DB_PAGE_SIZE).ok()?;
        if page >= DB_PAGES {
            return None;
        }
        let reg = match offset % DB_PAGE_SIZE {
            DB_PAGE_SQ => DB_SQ,
            DB_PAGE_RQ => DB_RQ,
            DB_PAGE_CQ => DB_CQ,
            DB_PAGE_SRQ => DB_SRQ,
            _ => return None,
        };
        let value = u64::from_le_bytes(data.try_into().ok()?);
        Some((page, Doorbell::decode(reg, value)?))
    }

    /// Decodes an 8-byte write of `value` at BAR0 `offset` (see `regs.rs`).
    pub fn decode(offset: u64, value: u64) -> Option<Doorbell> {
        let (low, high) = (value as u32, (value >> 32) as u32);
        let handle = low & 0xff_ffff;
        Some(match offset {
            DB_SQ => Doorbell::Sq {
                qpn: handle,
                pi: high,
            },
            DB_RQ => Doorbell::Rq {
                qpn: handle,
                pi: high,
            },
            DB_CQ => Doorbell::Cq {
                cqn: handle,
                arm: (low >> 24) as u8,
                ci: high,
            },
            DB_SRQ => Doorbell::Srq {
                srqn: handle,
                pi: high,
            },
            _ => return None,
        })
    }
}

impl Verbs {
    /// The PD of QP `qpn`.
    pub fn qp_pd(&self, qpn: u32) -> Option<u32> {
        self.qps.get(qpn).map(|qp| qp.pdn)
    }

    /// Checks a local access by QP `qpn` (see [`super::mr::MrTable::check_local`]).
    pub fn check_local(
        &self,
        qpn: u32,
        lkey: u32,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<GpaRanges, AccessError> {
        let pdn = self.qp_pd(qpn).ok_or(AccessError::Invalid)?;
        self.mrs.check_local(pdn, lkey, va, len, write)
    }

    /// Resolves bytes `[offset, offset + len)` of an SGE list of QP `qpn`
    /// (see [`super::mr::MrTable::resolve_sges`]).
    pub fn resolve_sges(
        &self,
        qpn: u32,
        sges: &[super::abi::Sge],
        offset: u64,
        len: u64,
        write: bool,
    ) -> Result<super::sgl::GpaRanges, AccessError> {
        let pdn = self.qp_pd(qpn).ok_or(AccessError::Invalid)?;
        self.mrs.resolve_sges(pdn, sges, offset, len, write)
    }

    /// Checks a remote access arriving on QP `qpn`: the QP must enable the
    /// right (MODIFY_QP access flags) and the key must grant it.
    pub fn remote_target(
        &self,
        qpn: u32,
        rkey: u32,
        va: u64,
        len: u64,
        right: RemoteRight,
    ) -> Result<RemoteTarget, AccessError> {
        let qp = self.qps.get(qpn).ok_or(AccessError::Invalid)?;
        if qp.attrs().access & right.access_bit() == 0 {
            return Err(AccessError::NoRight);
        }
        self.mrs.remote_target(qp.pdn, rkey, va, len, right)
    }

    /// [`Self::remote_target`], then where the bytes are.
    pub fn check_remote(
        &self,
        qpn: u32,
        rkey: u32,
        va: u64,
        len: u64,
        right: RemoteRight,
    ) -> Result<GpaRanges, AccessError> {
        let t = self.remote_target(qpn, rkey, va, len, right)?;
        self.mrs.translate(t)
    }

    /// Executes an IBTCA_WR_REG_MR work request of QP `qpn`; returns the
    /// region's key.
    pub fn fast_register(
        &mut self,
        qpn: u32,
        mem: &crate::dma::GuestMemory,
        wqe: &RegMrWqe,
    ) -> Result<u32, AccessError> {
        let pdn = self.qp_pd(qpn).ok_or(AccessError::Invalid)?;
        self.mrs.fast_register(pdn, mem, wqe)
    }

    /// Executes a BIND_MW work request of QP `qpn`; returns the new key.
    pub fn bind_mw(&mut self, qpn: u32, req: BindRequest) -> Result<u32, AccessError> {
        let pdn = self.qp_pd(qpn).ok_or(AccessError::Invalid)?;
        self.mrs.bind_mw(pdn, req, &mut self.keys)
    }

    /// Executes a LOCAL_INV work request of QP `qpn` on `rkey`: a window's
    /// key or a fast-registration region's.
    pub fn local_invalidate(&mut self, qpn: u32, rkey: u32) -> Result<(), AccessError> {
        let pdn = self.qp_pd(qpn).ok_or(AccessError::Invalid)?;
        self.mrs.invalidate(pdn, rkey, &mut self.keys)
    }

    /// Writes a completion to CQ `cqn` at `now`; returns the MSI-X vector
    /// to raise, if any (a moderated CQ may hold it back until
    /// [`Verbs::expire_cqs`]).
    pub fn complete(
        &mut self,
        mem: &crate::dma::GuestMemory,
        cqn: u32,
        cqe: &Cqe,
        solicited: bool,
        now: std::time::Instant,
    ) -> Result<Option<u16>, CqError> {
        let cq = self.cqs.get_mut(cqn).ok_or(CqError::NoCq)?;
        let fire = cq.push(mem, cqe, solicited, now)?;
        let vector = cq.vector();
        if !fire {
            self.note_held(cqn);
        }
        Ok(fire.then_some(vector))
    }

    /// Applies a doorbell; returns the MSI-X vector to raise now, if any (a
    /// CQ armed behind its producer, see [`Cq::doorbell`]). `NotFound` for
    /// an unknown QP or CQ, `Invalid` for an index out of range (a QP then
    /// enters the error state).
    ///
    /// [`Cq::doorbell`]: super::cq::Cq::doorbell
    pub fn doorbell(&mut self, db: Doorbell) -> Result<Option<u16>, VerbsError> {
        self.doorbell_on(0, db)
    }

    /// The doorbell page a QP's or CQ's doorbells must come from.
    fn bound_page(&self, db: Doorbell) -> Option<u32> {
        match db {
            Doorbell::Sq { qpn, .. } | Doorbell::Rq { qpn, .. } => {
                self.qps.get(qpn).map(|q| q.db_page)
            }
            Doorbell::Cq { cqn, .. } => self.cqs.get(cqn).map(|c| c.db_page),
            Doorbell::Srq { srqn, .. } => self.srqs.get(srqn).map(|s| s.db_page),
        }
    }

    /// Applies a doorbell rung on doorbell page `page` (BAR0's doorbells
    /// are page 0's), as [`Self::doorbell`]. One for a QP or CQ bound to
    /// another page is dropped (`Ok(None)`), counted in
    /// [`Verbs::foreign_doorbells`] and logged (rate-limited): one user
    /// context cannot ring another's queues.
    pub fn doorbell_on(&mut self, page: u32, db: Doorbell) -> Result<Option<u16>, VerbsError> {
        if let Some(bound) = self.bound_page(db).filter(|&b| b != page) {
            self.foreign_doorbells += 1;
            crate::guest_warn!(
                ?db,
                page,
                bound,
                dropped = self.foreign_doorbells,
                "doorbell rung on another context's page: dropped"
            );
            return Ok(None);
        }
        let res = match db {
            Doorbell::Sq { qpn, pi } => {
                let qp = self.qps.get_mut(qpn).ok_or(VerbsError::NotFound)?;
                qp.sq_doorbell(pi)
                    .map(|()| None)
                    .map_err(|_| VerbsError::Invalid)
            }
            Doorbell::Rq { qpn, pi } => {
                let qp = self.qps.get_mut(qpn).ok_or(VerbsError::NotFound)?;
                qp.rq_doorbell(pi)
                    .map(|()| None)
                    .map_err(|_| VerbsError::Invalid)
            }
            Doorbell::Srq { srqn, pi } => {
                let srq = self.srqs.get_mut(srqn).ok_or(VerbsError::NotFound)?;
                srq.doorbell(pi)
                    .map(|()| None)
                    .map_err(|_| VerbsError::Invalid)
            }
            Doorbell::Cq { cqn, arm, ci } => {
                let cq = self.cqs.get_mut(cqn).ok_or(VerbsError::NotFound)?;
                cq.doorbell(ci, arm).map(|fire| fire.then_some(cq.vector()))
            }
        };
        if let Err(e) = res {
            crate::guest_warn!(?db, error = %e, "doorbell refused");
        }
        res
    }

    /// Takes every CQ's arm request that waits in its doorbell record
    /// untaken ([`super::cq::Cq::sweep_recorded_arm`]); returns the MSI-X
    /// vectors of those it fires.
    pub fn sweep_cq_arms(&mut self, mem: &crate::dma::GuestMemory) -> Vec<u16> {
        self.cqs
            .iter_mut()
            .filter_map(|(_, cq)| cq.sweep_recorded_arm(mem).then(|| cq.vector()))
            .collect()
    }
}
