//! Shared receive queues: one ring of receive WQEs the driver produces and
//! every QP created with the SRQ's number consumes, in ring order, as
//! SENDs (and RDMA WRITEs with immediate) arrive on any of them.
//!
//! The SRQ counts what is posted (its doorbell's producer index) against
//! `max_wr`; a doorbell that runs past it, or behind, is refused and
//! changes nothing (the SRQ keeps serving). An armed limit (`srq_limit` >
//! 0) fires once when a QP takes a WQE and fewer than `srq_limit` remain
//! posted: the limit goes back to 0 (disarmed, as IBA 10.2.9.2 has it),
//! `limit_events` counts one more, and [`Verbs::srq_events`] tells the
//! engine to raise the asynchronous event (EVENT_CAUSE's
//! IBTCA_EVENT_SRQ_LIMIT). The driver finds which SRQs fired by their
//! `limit_events` (QUERY_SRQ).
//!
//! A QP in the error state flushes only the receive it was filling: the
//! SRQ's other WQEs stay for the other QPs (IBA 10.3.1).
//!
//! RESIZE_SRQ gives the SRQ a ring at least as large as the one it has
//! (IB_DEVICE_SRQ_RESIZE): the device copies the receives posted and not
//! yet taken into it, each to its index's slot (index modulo the new
//! size), and reads only the new ring from then on; the indexes run on.
//! A driver posting while the command runs writes each receive into both
//! rings, and frees the old one when the command completes.

use super::abi::{
    CmdCreateSrq, CmdModifySrq, CmdResizeSrq, SrqAttr, MAX_RECV_SGE, SRQ_ATTR_LIMIT,
    SRQ_ATTR_MAX_WR,
};
use super::qp::QpError;
use super::ring::{Ring, MAX_RING_LOG};
use super::table::HandleTable;
use super::wqe_ring::{read_recv, wqe_stride};
use super::{Verbs, VerbsError};
use crate::dma::GuestMemory;
use ibtca_abi::recv::RecvWr;

/// Largest log2 size of an SRQ ring.
pub const MAX_SRQ_LOG: u8 = MAX_RING_LOG;
/// SGEs of one SRQ receive at the largest stride (as any receive).
pub const MAX_SRQ_SGE: usize = MAX_RECV_SGE as usize;

/// One shared receive queue.
#[derive(Debug)]
pub struct Srq {
    /// Protection domain (its QPs' too).
    pub pdn: u32,
    /// Doorbell page its doorbells must come from.
    pub db_page: u32,
    ring: Ring,
    pi: u32,
    ci: u32,
    max_wr: u32,
    limit: u32,
    limit_events: u32,
}

impl Srq {
    /// An empty SRQ from CREATE_SRQ's parameters (`Invalid` for a bad
    /// ring, a `max_wr` of 0 or past the ring, a limit not below `max_wr`,
    /// a doorbell page past the BAR or reserved bytes set). The caller
    /// checks the PD.
    pub fn new(p: &CmdCreateSrq) -> Result<Srq, VerbsError> {
        if p.rsvd0 != [0; 2] || p.rsvd != [0; 20] || p.db_page.to_native() >= crate::regs::DB_PAGES
        {
            return Err(VerbsError::Invalid);
        }
        let ring = Ring::new(
            p.ring.to_native(),
            p.log_entries,
            wqe_stride(p.log_stride)?,
            MAX_SRQ_LOG,
        )?;
        let mut srq = Srq {
            pdn: p.pdn.to_native(),
            db_page: p.db_page.to_native(),
            ring,
            pi: 0,
            ci: 0,
            max_wr: ring.entries(),
            limit: 0,
            limit_events: 0,
        };
        srq.set(
            SRQ_ATTR_MAX_WR | SRQ_ATTR_LIMIT,
            p.max_wr.to_native(),
            p.srq_limit.to_native(),
        )?;
        Ok(srq)
    }

    /// Receives posted and not yet taken.
    pub fn posted(&self) -> u32 {
        self.pi.wrapping_sub(self.ci)
    }

    /// The armed limit (0: none).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Limit events so far.
    pub fn limit_events(&self) -> u32 {
        self.limit_events
    }

    /// Applies the attributes `mask` selects; nothing changes on an error.
    fn set(&mut self, mask: u32, max_wr: u32, limit: u32) -> Result<(), VerbsError> {
        if mask & !(SRQ_ATTR_MAX_WR | SRQ_ATTR_LIMIT) != 0 {
            return Err(VerbsError::Invalid);
        }
        let max_wr = if mask & SRQ_ATTR_MAX_WR != 0 {
            max_wr
        } else {
            self.max_wr
        };
        let limit = if mask & SRQ_ATTR_LIMIT != 0 {
            limit
        } else {
            self.limit
        };
        if max_wr == 0 || max_wr > self.ring.entries() || max_wr < self.posted() {
            return Err(VerbsError::Invalid);
        }
        if limit >= max_wr {
            return Err(VerbsError::Invalid);
        }
        (self.max_wr, self.limit) = (max_wr, limit);
        Ok(())
    }

    /// MODIFY_SRQ.
    pub fn modify(&mut self, m: &CmdModifySrq) -> Result<(), VerbsError> {
        if m.rsvd != [0; 32] {
            return Err(VerbsError::Invalid);
        }
        self.set(
            m.attr_mask.to_native(),
            m.max_wr.to_native(),
            m.srq_limit.to_native(),
        )
    }

    /// RESIZE_SRQ: the new ring, into which the device copies the
    /// receives posted and not yet taken, each to its index's slot there
    /// (`Invalid`, nothing changed, for a bad or smaller ring, reserved
    /// bytes set, or a `max_wr` that [`Srq::set`] refuses against it;
    /// `Fault` for a ring outside guest memory).
    pub fn resize(&mut self, r: &CmdResizeSrq, mem: &GuestMemory) -> Result<(), VerbsError> {
        // The new ring keeps the SRQ's stride.
        if r.rsvd0 != [0; 3] || r.rsvd != [0; 28] || r.log_entries < self.ring.log() {
            return Err(VerbsError::Invalid);
        }
        let ring = Ring::new(
            r.ring.to_native(),
            r.log_entries,
            self.ring.stride(),
            MAX_SRQ_LOG,
        )?;
        let (old, old_max_wr) = (self.ring, self.max_wr);
        self.ring = ring;
        let moved = self
            .set(SRQ_ATTR_MAX_WR, r.max_wr.to_native(), 0)
            .and_then(|()| self.copy_posted(&old, mem));
        if moved.is_err() {
            (self.ring, self.max_wr) = (old, old_max_wr);
        }
        moved
    }

    /// Copies the receives posted and not yet taken from `old` into the
    /// SRQ's ring.
    fn copy_posted(&self, old: &Ring, mem: &GuestMemory) -> Result<(), VerbsError> {
        // One WQE at a time, whole: at most the largest stride.
        let mut buf = vec![0u8; old.stride() as usize];
        let mut i = self.ci;
        while i != self.pi {
            mem.read(old.slot_addr(i), &mut buf)
                .and_then(|()| mem.write(self.ring.slot_addr(i), &buf))
                .map_err(|_| VerbsError::Fault)?;
            i = i.wrapping_add(1);
        }
        Ok(())
    }

    /// QUERY_SRQ's reply.
    pub fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.max_wr.into(),
            srq_limit: self.limit.into(),
            limit_events: self.limit_events.into(),
            posted: self.posted().into(),
            pdn: self.pdn.into(),
            log_entries: self.ring.log(),
            ..Default::default()
        }
    }

    /// The doorbell with the driver's producer index: `Overrun` (nothing
    /// changes) for one more than `max_wr` ahead of what the QPs took, or
    /// behind the previous one.
    pub fn doorbell(&mut self, pi: u32) -> Result<(), QpError> {
        let outstanding = pi.wrapping_sub(self.ci);
        if outstanding > self.max_wr || pi.wrapping_sub(self.pi) > outstanding {
            return Err(QpError::Overrun);
        }
        self.pi = pi;
        Ok(())
    }

    /// Takes the next receive WQE and whether that fired the limit.
    /// `Dma` (nothing taken) when the ring is not in guest memory.
    pub fn take(&mut self, mem: &GuestMemory) -> Result<Option<(RecvWr, bool)>, QpError> {
        if self.ci == self.pi {
            return Ok(None);
        }
        let w = read_recv(mem, &self.ring, self.ci).ok_or(QpError::Dma)?;
        self.ci = self.ci.wrapping_add(1);
        let fired = self.limit > 0 && self.posted() < self.limit;
        if fired {
            self.limit = 0;
            self.limit_events = self.limit_events.wrapping_add(1);
        }
        Ok(Some((w, fired)))
    }
}

/// The SRQs of one device.
pub type SrqTable = HandleTable<Srq>;

/// An SRQ table of at most `capacity` SRQs (24-bit numbers, as the
/// doorbell carries).
pub fn srq_table(capacity: usize) -> SrqTable {
    HandleTable::new(capacity, 10, 24)
}

impl Verbs {
    /// CREATE_SRQ: returns its number.
    pub fn create_srq(&mut self, p: &CmdCreateSrq) -> Result<u32, VerbsError> {
        let pdn = p.pdn.to_native();
        if !self.pds.contains(pdn) {
            return Err(VerbsError::NotFound);
        }
        let srqn = self.srqs.insert(Srq::new(p)?)?;
        self.pds.hold(pdn)?;
        Ok(srqn)
    }

    /// MODIFY_SRQ.
    pub fn modify_srq(&mut self, m: &CmdModifySrq) -> Result<(), VerbsError> {
        let srq = self
            .srqs
            .get_mut(m.srqn.to_native())
            .ok_or(VerbsError::NotFound)?;
        srq.modify(m)
    }

    /// RESIZE_SRQ.
    pub fn resize_srq(&mut self, r: &CmdResizeSrq, mem: &GuestMemory) -> Result<(), VerbsError> {
        let srq = self
            .srqs
            .get_mut(r.srqn.to_native())
            .ok_or(VerbsError::NotFound)?;
        srq.resize(r, mem)
    }

    /// QUERY_SRQ: `(srq_limit, limit_events)` and the reply.
    pub fn query_srq(&self, srqn: u32) -> Result<((u32, u32), SrqAttr), VerbsError> {
        let srq = self.srqs.get(srqn).ok_or(VerbsError::NotFound)?;
        Ok(((srq.limit(), srq.limit_events()), srq.attr()))
    }

    /// DESTROY_SRQ: `Busy` while a QP takes its receives from it.
    pub fn destroy_srq(&mut self, srqn: u32) -> Result<(), VerbsError> {
        let srq = self.srqs.remove(srqn)?;
        self.pds.release(srq.pdn);
        Ok(())
    }

    /// Takes the next receive of SRQ `srqn` for a QP; a limit that fires
    /// sets [`Verbs::srq_events`].
    pub fn take_srq_recv(
        &mut self,
        srqn: u32,
        mem: &GuestMemory,
    ) -> Result<Option<RecvWr>, QpError> {
        let Some(srq) = self.srqs.get_mut(srqn) else {
            return Ok(None);
        };
        Ok(srq.take(mem)?.map(|(w, fired)| {
            self.srq_events |= fired;
            w
        }))
    }

    /// Whether an SRQ limit fired since the last call (the engine raises
    /// the asynchronous event once for all of them).
    pub fn take_srq_events(&mut self) -> bool {
        std::mem::take(&mut self.srq_events)
    }
}

#[cfg(test)]
#[path = "srq_tests.rs"]
mod tests;
