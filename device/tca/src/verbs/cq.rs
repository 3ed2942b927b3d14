//! Completion queues: a ring of `struct ibtca_cqe` in guest memory that the
//! device produces and the driver consumes by polling owner bits (see
//! `ring.rs` for the convention: owner 1 on even passes, so a zeroed ring is
//! empty). The driver reports its consumer index, and arms the interrupt,
//! with the CQ doorbell; an arm that a completion already written past the
//! consumer index it carries satisfies fires at once (the arm is a posted
//! write that may arrive after the completion it waited for, so a driver
//! that arms and then sleeps never misses one); the device never writes
//! past that index: a push
//! into a full CQ puts the CQ in the error state (IB: CQ overrun), logged
//! and counted, and every later push is refused.
//!
//! A CQ with a doorbell record is also armed through it (CAP_CQ_RECORD_ARM):
//! after each completion it writes, the device fences and reads the
//! record's `arm` word; a value it has not seen arms the CQ as that
//! IBTCA_CQ_ARM_* asks, before the completion decides whether to fire. The
//! driver stores the word, fences and looks for a completion, so of a
//! completion and an arm that cross, one side sees the other: the device
//! fires, or the driver finds the completion (and polls, or rings the
//! doorbell, which fires at once). Re-arming thus costs the guest no
//! trapped store.
//!
//! An armed CQ may hold its interrupt back for more completions
//! (MODIFY_CQ: `cq_moderation.rs`); it fires at the count or at the
//! period's end, whichever comes first.

use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use vm_memory::ByteValued;

use super::abi::{CqDbRecord, Cqe, CQ_ARM_NEXT, CQ_ARM_SOLICITED, WC_SUCCESS};
use super::cq_moderation::Moderation;
use super::ring::{Ring, MAX_RING_LOG};
use super::table::HandleTable;
use super::VerbsError;
use crate::dma::GuestMemory;
use crate::regs::MSIX_VECTORS;

/// Largest log2 CQ size.
pub const MAX_CQ_LOG: u8 = MAX_RING_LOG;

/// Byte offset of `Cqe::owner`.
const OWNER_OFFSET: usize = std::mem::offset_of!(Cqe, owner);

/// When the CQ raises its vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arm {
    /// Not armed: no interrupt.
    None,
    /// Interrupt on the next completion.
    Next,
    /// Interrupt on the next solicited or unsuccessful completion.
    Solicited,
}

/// Why a completion was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CqError {
    /// The ring was full: the CQ is now in the error state.
    #[error("completion queue overrun")]
    Overrun,
    /// The ring is not in mapped guest memory: the CQ is now in error.
    #[error("completion queue ring not in guest memory")]
    Dma,
    /// The CQ is in the error state.
    #[error("completion queue in error")]
    InError,
    /// No CQ has that number.
    #[error("no such completion queue")]
    NoCq,
}

/// One completion queue.
#[derive(Debug)]
pub struct Cq {
    /// Doorbell page its doorbells must come from.
    pub db_page: u32,
    ring: Ring,
    vector: u16,
    /// Next index the device writes.
    pi: u32,
    /// Consumer index the driver last reported.
    ci: u32,
    arm: Arm,
    /// Index of the last solicited or unsuccessful completion written
    /// (what a Solicited arm waits for).
    last_notable: Option<u32>,
    error: bool,
    overruns: u64,
    /// Guest address of the CQ's doorbell record (`db_record.rs`).
    db_record: Option<u64>,
    /// The record's `arm` word as last taken (0: none yet; the driver's
    /// first request is nonzero).
    record_arm: u32,
    /// Interrupt moderation and the completions it holds back.
    moderation: Moderation,
    /// The record's arm word untaken at the last sweep, if any
    /// ([`Cq::sweep_recorded_arm`]).
    swept_arm: Option<u32>,
}

impl Cq {
    /// A CQ of `2^log` entries at `gpa` raising MSI-X `vector`. `Invalid`
    /// for a bad ring (see [`Ring::new`]) or vector.
    pub fn new(gpa: u64, log: u8, vector: u8) -> Result<Cq, VerbsError> {
        if u16::from(vector) >= MSIX_VECTORS {
            return Err(VerbsError::Invalid);
        }
        Ok(Cq {
            db_page: 0,
            ring: Ring::new(gpa, log, std::mem::size_of::<Cqe>() as u64, MAX_CQ_LOG)?,
            vector: u16::from(vector),
            pi: 0,
            ci: 0,
            arm: Arm::None,
            last_notable: None,
            error: false,
            overruns: 0,
            db_record: None,
            record_arm: 0,
            moderation: Moderation::default(),
            swept_arm: None,
        })
    }

    /// The MSI-X vector.
    pub fn vector(&self) -> u16 {
        self.vector
    }

    /// Number of entries.
    pub fn entries(&self) -> u32 {
        self.ring.entries()
    }

    /// The next index the device writes.
    pub fn producer_index(&self) -> u32 {
        self.pi
    }

    /// The consumer index the driver last reported (by doorbell, or in the
    /// record when the device last looked).
    pub fn consumer_index(&self) -> u32 {
        self.ci
    }

    /// The consumer index the CQ's doorbell record holds now, unchecked
    /// (for `inspect`); `None` without a record or outside guest memory.
    pub fn record_ci(&self, mem: &GuestMemory) -> Option<u32> {
        let addr = self.db_record? + std::mem::offset_of!(CqDbRecord, ci) as u64;
        mem.load_u32(addr).ok()
    }

    /// Whether the CQ is armed for its next (or next solicited)
    /// completion.
    pub fn armed(&self) -> bool {
        self.arm != Arm::None
    }

    /// True once the CQ overran or lost its ring.
    pub fn in_error(&self) -> bool {
        self.error
    }

    /// Number of refused pushes because the ring was full.
    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    /// Reads the consumer index from the record at `addr` (struct
    /// ibtca_cq_db_record) before calling the ring full.
    pub fn set_db_record(&mut self, addr: u64) {
        self.db_record = Some(addr);
        self.record_arm = 0;
        self.swept_arm = None;
    }

    /// Takes an arm request from the record, after the completion just
    /// written: a word not seen before arms the CQ as its bits 1:0 ask
    /// (anything but IBTCA_CQ_ARM_* arms nothing). A hostile word costs at
    /// most one interrupt per completion.
    fn take_recorded_arm(&mut self, mem: &GuestMemory) {
        let Some(rec) = self.db_record else { return };
        // The completion before the look (the driver fences the other way).
        fence(Ordering::SeqCst);
        let Ok(word) = mem.load_u32(rec + std::mem::offset_of!(CqDbRecord, arm) as u64) else {
            return;
        };
        if word == self.record_arm {
            return;
        }
        self.record_arm = word;
        match (word & 3) as u8 {
            CQ_ARM_NEXT => self.arm(Arm::Next),
            CQ_ARM_SOLICITED => self.arm(Arm::Solicited),
            _ => {}
        }
    }

    /// The consumer index the doorbell record holds, if it is one the
    /// driver may report (between the last one and the producer index).
    fn recorded_ci(&self, mem: &GuestMemory) -> Option<u32> {
        let addr = self.db_record? + std::mem::offset_of!(CqDbRecord, ci) as u64;
        let ci = mem.load_u32(addr).ok()?;
        (self.ring.in_window(self.pi, ci) && self.ring.in_window(ci, self.ci)).then_some(ci)
    }

    /// Sets the interrupt moderation (see `cq_moderation.rs`).
    pub fn set_moderation(&mut self, count: u16, period: Duration) {
        self.moderation.set(count, period);
    }

    /// When the completions held back fire, if any are held.
    pub fn moderation_due(&self) -> Option<Instant> {
        self.moderation.due()
    }

    /// Fires an armed CQ whose held completions are due at `now`; returns
    /// whether to raise [`Cq::vector`].
    pub fn expire(&mut self, now: Instant) -> bool {
        if !self.moderation.expired(now) {
            return false;
        }
        self.moderation.fired();
        if self.arm == Arm::None || self.error {
            return false;
        }
        self.arm = Arm::None;
        true
    }

    /// Arms the interrupt (a Next arm is not weakened to Solicited).
    pub fn arm(&mut self, kind: Arm) {
        self.arm = match (self.arm, kind) {
            (Arm::Next, Arm::Solicited) => Arm::Next,
            (_, k) => k,
        };
    }

    /// The CQ doorbell: the driver consumed up to `ci` and asks for
    /// IBTCA_CQ_ARM_* `arm` (0: none). Returns whether to raise
    /// [`Cq::vector`] now: an arm that a completion already written past
    /// `ci` satisfies (any for Next; a solicited or unsuccessful one for
    /// Solicited) fires and disarms at once. `Invalid`, changing nothing,
    /// when `ci` is ahead of the producer or `arm` is unknown.
    pub fn doorbell(&mut self, ci: u32, arm: u8) -> Result<bool, VerbsError> {
        let kind = match arm {
            0 => None,
            CQ_ARM_NEXT => Some(Arm::Next),
            CQ_ARM_SOLICITED => Some(Arm::Solicited),
            _ => return Err(VerbsError::Invalid),
        };
        if !self.ring.in_window(self.pi, ci) || !self.ring.in_window(ci, self.ci) {
            crate::guest_warn!(
                ci,
                pi = self.pi,
                old = self.ci,
                "CQ doorbell out of range, ignored"
            );
            return Err(VerbsError::Invalid);
        }
        self.ci = ci;
        if let Some(k) = kind {
            self.arm(k);
        }
        Ok(self.fire_if_satisfied())
    }

    /// Fires and disarms an arm that a completion written past the
    /// consumer index already satisfies (any for Next; a solicited or
    /// unsuccessful one for Solicited); returns whether it fired.
    fn fire_if_satisfied(&mut self) -> bool {
        // Written and not yet consumed: indexes ci..pi.
        let unconsumed = |i: u32| i.wrapping_sub(self.ci) < self.pi.wrapping_sub(self.ci);
        let satisfied = match self.arm {
            Arm::None => false,
            Arm::Next => self.pi != self.ci,
            Arm::Solicited => self.last_notable.is_some_and(unconsumed),
        };
        if satisfied && !self.error {
            self.arm = Arm::None;
            self.moderation.fired();
            return true;
        }
        false
    }

    /// Takes an arm request the record has held untaken since the last
    /// sweep (`engine/record_sweep.rs`): returns whether to raise
    /// [`Cq::vector`] now, for completions written and not consumed that
    /// the arm covers. The driver stores the word, fences, and looks for a
    /// completion; the device writes one, fences, and looks at the word; a
    /// driver whose fence did not hold can miss the completion while the
    /// device misses the arm, and this look then raises the interrupt. A
    /// word first seen at this look is left for the next one: the driver
    /// may be between its store and its own look.
    pub fn sweep_recorded_arm(&mut self, mem: &GuestMemory) -> bool {
        let Some(rec) = self.db_record else {
            return false;
        };
        let Ok(word) = mem.load_u32(rec + std::mem::offset_of!(CqDbRecord, arm) as u64) else {
            return false;
        };
        let seen = self.swept_arm.replace(word);
        if word == self.record_arm || self.error || seen != Some(word) {
            return false;
        }
        if let Some(ci) = self.recorded_ci(mem) {
            self.ci = ci;
        }
        self.take_recorded_arm(mem);
        self.fire_if_satisfied()
    }

    /// Writes `cqe` (owner bit set here, written last) and advances the
    /// producer index; returns whether to raise [`Cq::vector`]. An armed CQ
    /// fires once and disarms; a solicited-only arm fires for `solicited`
    /// or unsuccessful completions. A moderated CQ may hold the interrupt
    /// back (written at `now`).
    pub fn push(
        &mut self,
        mem: &GuestMemory,
        cqe: &Cqe,
        solicited: bool,
        now: Instant,
    ) -> Result<bool, CqError> {
        if self.error {
            return Err(CqError::InError);
        }
        if self.pi.wrapping_sub(self.ci) >= self.ring.entries() {
            if let Some(ci) = self.recorded_ci(mem) {
                self.ci = ci;
            }
        }
        if self.pi.wrapping_sub(self.ci) >= self.ring.entries() {
            self.error = true;
            self.overruns += 1;
            tracing::error!(pi = self.pi, ci = self.ci, "CQ overrun: CQ in error");
            return Err(CqError::Overrun);
        }
        let mut e = *cqe;
        e.owner = self.ring.owner(self.pi);
        let bytes = e.as_slice();
        let addr = self.ring.slot_addr(self.pi);
        let body = mem
            .write(addr, &bytes[..OWNER_OFFSET])
            .and_then(|()| mem.write(addr + OWNER_OFFSET as u64 + 1, &bytes[OWNER_OFFSET + 1..]));
        // The driver must not see the owner bit before the rest.
        fence(Ordering::Release);
        if let Err(err) = body.and_then(|()| mem.write(addr + OWNER_OFFSET as u64, &[e.owner])) {
            self.error = true;
            tracing::error!(error = %err, "CQ ring not in guest memory: CQ in error");
            return Err(CqError::Dma);
        }
        if solicited || cqe.status != WC_SUCCESS {
            self.last_notable = Some(self.pi);
        }
        self.pi = self.pi.wrapping_add(1);
        self.take_recorded_arm(mem);
        let fire = match self.arm {
            Arm::None => false,
            Arm::Next => true,
            Arm::Solicited => solicited || cqe.status != WC_SUCCESS,
        };
        if !fire || self.moderation.hold(now) {
            return Ok(false);
        }
        self.arm = Arm::None;
        self.moderation.fired();
        Ok(true)
    }
}

/// The CQs of one device, with the number of QPs using each. CQ numbers are
/// 24-bit, never 0, not reused immediately.
pub type CqTable = HandleTable<Cq>;

/// A CQ table of at most `capacity` CQs.
pub fn cq_table(capacity: usize) -> CqTable {
    HandleTable::new(capacity, 10, 24)
}

#[cfg(test)]
mod tests {
    use super::super::testmem::TestMem;
    use super::*;
    use vm_memory::Le64;

    fn cqe(wr_id: u64, status: u8) -> Cqe {
        Cqe {
            wr_id: Le64::from(wr_id),
            status,
            ..Default::default()
        }
    }

    /// The tests' time: nothing here is moderated, so any will do.
    fn now() -> Instant {
        Instant::now()
    }

    fn read_cqe(m: &TestMem, gpa: u64) -> Cqe {
        m.read_obj(gpa)
    }

    #[test]
    fn owner_bit_across_wrap() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 2, 1).unwrap();
        for i in 0..4u64 {
            cq.push(&m.mem, &cqe(i, 0), false, now()).unwrap();
            assert_eq!(read_cqe(&m, 0x1000 + 32 * i).owner, 1, "pass 0 writes 1");
        }
        cq.doorbell(4, 0).unwrap();
        for i in 4..8u64 {
            cq.push(&m.mem, &cqe(i, 0), false, now()).unwrap();
            let e = read_cqe(&m, 0x1000 + 32 * (i - 4));
            assert_eq!((e.owner, e.wr_id.to_native()), (0, i), "pass 1 writes 0");
        }
        cq.doorbell(8, 0).unwrap();
        cq.push(&m.mem, &cqe(8, 0), false, now()).unwrap();
        assert_eq!(read_cqe(&m, 0x1000).owner, 1);
        assert_eq!(cq.producer_index(), 9);
        assert_eq!(read_cqe(&m, 0x1020).owner, 0, "slot 1 still holds pass 1");
    }

    #[test]
    fn overrun_puts_the_cq_in_error() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 1, 1).unwrap();
        cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap();
        cq.push(&m.mem, &cqe(1, 0), false, now()).unwrap();
        assert_eq!(
            cq.push(&m.mem, &cqe(2, 0), false, now()),
            Err(CqError::Overrun)
        );
        assert_eq!(
            read_cqe(&m, 0x1000).wr_id.to_native(),
            0,
            "nothing overwritten"
        );
        assert!(cq.in_error());
        assert_eq!(cq.overruns(), 1);
        cq.doorbell(2, 0).unwrap();
        assert_eq!(
            cq.push(&m.mem, &cqe(3, 0), false, now()),
            Err(CqError::InError)
        );
    }

    #[test]
    fn doorbell_rejects_consumer_beyond_producer() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 2, 1).unwrap();
        cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap();
        assert_eq!(cq.doorbell(2, 0), Err(VerbsError::Invalid));
        assert_eq!(cq.doorbell(u32::MAX, 0), Err(VerbsError::Invalid));
        assert_eq!(cq.doorbell(1, 7), Err(VerbsError::Invalid));
        cq.doorbell(1, 0).unwrap();
        assert_eq!(
            cq.doorbell(0, 0),
            Err(VerbsError::Invalid),
            "consumer went back"
        );
    }

    #[test]
    fn arming_fires_once() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 3).unwrap();
        assert!(
            !cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap(),
            "not armed"
        );
        cq.doorbell(1, CQ_ARM_NEXT).unwrap();
        assert!(cq.push(&m.mem, &cqe(1, 0), false, now()).unwrap());
        assert!(
            !cq.push(&m.mem, &cqe(2, 0), false, now()).unwrap(),
            "disarmed"
        );
        cq.doorbell(3, CQ_ARM_SOLICITED).unwrap();
        assert!(
            !cq.push(&m.mem, &cqe(3, 0), false, now()).unwrap(),
            "unsolicited"
        );
        assert!(
            cq.push(&m.mem, &cqe(4, 0), true, now()).unwrap(),
            "solicited"
        );
        cq.arm(Arm::Solicited);
        assert!(
            cq.push(&m.mem, &cqe(5, 5), false, now()).unwrap(),
            "errors fire too"
        );
        cq.arm(Arm::Next);
        cq.arm(Arm::Solicited);
        assert!(
            cq.push(&m.mem, &cqe(6, 0), false, now()).unwrap(),
            "Next is kept"
        );
        assert_eq!(cq.vector(), 3);
    }

    #[test]
    fn arming_behind_the_producer_fires_at_once() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 1).unwrap();
        cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap();
        cq.push(&m.mem, &cqe(1, 0), false, now()).unwrap();
        // The driver took one, arms: one completion is waiting.
        assert_eq!(cq.doorbell(1, CQ_ARM_NEXT), Ok(true), "fires now");
        assert!(
            !cq.push(&m.mem, &cqe(2, 0), false, now()).unwrap(),
            "the arm was used up"
        );
        // Caught up: the arm waits for the next completion.
        assert_eq!(cq.doorbell(3, CQ_ARM_NEXT), Ok(false));
        assert!(cq.push(&m.mem, &cqe(3, 0), false, now()).unwrap());
        // A Solicited arm fires at once only for a solicited or failed
        // completion not yet consumed; a plain doorbell never does.
        cq.push(&m.mem, &cqe(4, 0), false, now()).unwrap();
        assert_eq!(cq.doorbell(4, CQ_ARM_SOLICITED), Ok(false), "plain one");
        assert_eq!(cq.doorbell(4, 0), Ok(false));
        assert!(
            cq.push(&m.mem, &cqe(5, 0), true, now()).unwrap(),
            "solicited"
        );
        cq.push(&m.mem, &cqe(6, 0), false, now()).unwrap();
        assert_eq!(cq.doorbell(5, CQ_ARM_SOLICITED), Ok(true), "5 waits");
        assert_eq!(cq.doorbell(6, CQ_ARM_SOLICITED), Ok(false), "5 taken");
        cq.arm(Arm::None);
        cq.push(&m.mem, &cqe(7, 5), false, now()).unwrap();
        assert_eq!(cq.doorbell(7, CQ_ARM_SOLICITED), Ok(true), "a failure");
    }

    /// The record's address in the tests' memory, and its arm word.
    const REC: u64 = 0x8000;
    const REC_ARM: u64 = REC + std::mem::offset_of!(CqDbRecord, arm) as u64;
    const REC_CI: u64 = REC + std::mem::offset_of!(CqDbRecord, ci) as u64;

    #[test]
    fn the_record_arms_without_a_doorbell() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 2).unwrap();
        cq.set_db_record(REC);
        assert!(
            !cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap(),
            "not armed"
        );
        m.mem
            .store_u32(REC_ARM, 4 | u32::from(CQ_ARM_NEXT))
            .unwrap();
        assert!(
            cq.push(&m.mem, &cqe(1, 0), false, now()).unwrap(),
            "armed by the record"
        );
        assert!(
            !cq.push(&m.mem, &cqe(2, 0), false, now()).unwrap(),
            "the request is used up: the same word does not arm again"
        );
        m.mem
            .store_u32(REC_ARM, 8 | u32::from(CQ_ARM_SOLICITED))
            .unwrap();
        assert!(
            !cq.push(&m.mem, &cqe(3, 0), false, now()).unwrap(),
            "unsolicited"
        );
        assert!(
            cq.push(&m.mem, &cqe(4, 0), true, now()).unwrap(),
            "solicited"
        );
        // Bits 1:0 that are no arm arm nothing, but the word is taken.
        m.mem.store_u32(REC_ARM, 12 | 3).unwrap();
        assert!(!cq.push(&m.mem, &cqe(5, 0), false, now()).unwrap());
        // A doorbell arm still works beside the record.
        cq.doorbell(6, CQ_ARM_NEXT).unwrap();
        assert!(cq.push(&m.mem, &cqe(6, 0), false, now()).unwrap());
        assert!(!cq.push(&m.mem, &cqe(7, 0), false, now()).unwrap());
    }

    #[test]
    fn a_swept_record_arm_fires_for_an_unconsumed_completion_and_else_waits() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 2).unwrap();
        cq.set_db_record(REC);
        assert!(!cq.sweep_recorded_arm(&m.mem), "no request");
        // Consumed: the request is taken at the second look, and the next
        // completion fires.
        cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap();
        m.mem.store_u32(REC_CI, 1).unwrap();
        m.mem
            .store_u32(REC_ARM, 4 | u32::from(CQ_ARM_NEXT))
            .unwrap();
        assert!(!cq.sweep_recorded_arm(&m.mem), "first seen");
        assert!(!cq.armed(), "left for the next look");
        assert!(!cq.sweep_recorded_arm(&m.mem), "nothing unconsumed");
        assert!(cq.armed());
        assert!(cq.push(&m.mem, &cqe(1, 0), false, now()).unwrap());
        // Written, not consumed, and the arm landed after the device looked:
        // the second look fires.
        m.mem
            .store_u32(REC_ARM, 8 | u32::from(CQ_ARM_NEXT))
            .unwrap();
        assert!(!cq.sweep_recorded_arm(&m.mem), "first seen");
        assert!(cq.sweep_recorded_arm(&m.mem), "completion 1 is unconsumed");
        assert!(!cq.armed());
        assert!(!cq.sweep_recorded_arm(&m.mem), "the same word again");
    }

    #[test]
    fn a_record_arm_is_ignored_without_a_record_and_after_rebinding() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 2).unwrap();
        m.mem
            .store_u32(REC_ARM, 4 | u32::from(CQ_ARM_NEXT))
            .unwrap();
        assert!(
            !cq.push(&m.mem, &cqe(0, 0), false, now()).unwrap(),
            "no record bound"
        );
        cq.set_db_record(REC);
        assert!(
            cq.push(&m.mem, &cqe(1, 0), false, now()).unwrap(),
            "bound: taken"
        );
        // A record that left guest memory arms nothing and fails nothing.
        cq.set_db_record(0x20_0000);
        assert!(!cq.push(&m.mem, &cqe(2, 0), false, now()).unwrap());
        assert_eq!(cq.producer_index(), 3);
    }

    /// MODIFY_CQ's count: an armed CQ fires at the `count`th completion
    /// that satisfies its arm, not before; the period's end fires it with
    /// fewer (the tests' own clock).
    #[test]
    fn a_moderated_cq_fires_at_its_count_or_at_the_period() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 2).unwrap();
        let period = Duration::from_millis(50);
        cq.set_moderation(3, period);
        let t0 = now();
        cq.arm(Arm::Next);
        assert!(!cq.push(&m.mem, &cqe(0, 0), false, t0).unwrap(), "1 of 3");
        assert_eq!(cq.moderation_due(), Some(t0 + period));
        assert!(!cq.push(&m.mem, &cqe(1, 0), false, t0).unwrap(), "2 of 3");
        assert!(!cq.expire(t0 + period / 2), "not due yet");
        assert!(cq.push(&m.mem, &cqe(2, 0), false, t0).unwrap(), "3 of 3");
        assert_eq!(cq.moderation_due(), None);
        assert!(!cq.expire(t0 + period), "fired: nothing held");
        assert!(
            !cq.push(&m.mem, &cqe(3, 0), false, t0).unwrap(),
            "disarmed: counted for nothing"
        );
        assert_eq!(
            cq.moderation_due(),
            None,
            "unarmed completions hold nothing"
        );
        // Fewer than the count: the period fires them, once.
        cq.arm(Arm::Next);
        let t1 = t0 + period;
        assert!(!cq.push(&m.mem, &cqe(4, 0), false, t1).unwrap());
        assert!(!cq.expire(t1 + period / 2));
        assert!(cq.expire(t1 + period), "the period's end fires");
        assert!(!cq.expire(t1 + 2 * period), "once");
        assert!(!cq.push(&m.mem, &cqe(5, 0), false, t1).unwrap(), "disarmed");
        // A Solicited arm counts only what satisfies it.
        cq.arm(Arm::Solicited);
        cq.set_moderation(2, period);
        assert!(!cq.push(&m.mem, &cqe(6, 0), false, t1).unwrap());
        assert_eq!(cq.moderation_due(), None, "unsolicited: not held");
        assert!(!cq.push(&m.mem, &cqe(7, 0), true, t1).unwrap(), "1 of 2");
        assert!(
            cq.push(&m.mem, &cqe(8, 5), false, t1).unwrap(),
            "an error: 2"
        );
    }

    /// An arm by doorbell that a written completion satisfies fires at
    /// once, moderated or not, and lets go of what was held.
    #[test]
    fn a_doorbell_arm_behind_the_producer_fires_moderated_or_not() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x1000, 4, 2).unwrap();
        cq.set_moderation(4, Duration::from_millis(50));
        let t0 = now();
        cq.arm(Arm::Next);
        assert!(!cq.push(&m.mem, &cqe(0, 0), false, t0).unwrap(), "held");
        assert_eq!(cq.doorbell(0, CQ_ARM_NEXT), Ok(true), "fires now");
        assert_eq!(cq.moderation_due(), None, "nothing held any more");
        assert!(!cq.expire(t0 + Duration::from_secs(1)));
        // Without moderation (count 1) nothing is held.
        cq.set_moderation(1, Duration::from_millis(50));
        cq.arm(Arm::Next);
        assert!(cq.push(&m.mem, &cqe(1, 0), false, t0).unwrap());
    }

    #[test]
    fn unmapped_ring_and_bad_geometry() {
        let m = TestMem::new(0x10000);
        let mut cq = Cq::new(0x10_0000, 2, 0).unwrap();
        assert_eq!(cq.push(&m.mem, &cqe(0, 0), false, now()), Err(CqError::Dma));
        assert!(cq.in_error());
        assert_eq!(cq.producer_index(), 0);
        assert_eq!(Cq::new(0x1000, 2, 32).err(), Some(VerbsError::Invalid));
        assert_eq!(Cq::new(0x1001, 2, 0).err(), Some(VerbsError::Invalid));
        assert_eq!(Cq::new(0x1000, 255, 0).err(), Some(VerbsError::Invalid));
        assert_eq!(
            Cq::new(u64::MAX - 31, 1, 0).err(),
            Some(VerbsError::Invalid)
        );
        // A ring in the last bytes of the address space is valid but
        // unmapped: pushing fails cleanly.
        let mut top = Cq::new(u64::MAX - 63, 1, 0).unwrap();
        assert_eq!(
            top.push(&m.mem, &cqe(0, 0), false, now()),
            Err(CqError::Dma)
        );
    }
}
