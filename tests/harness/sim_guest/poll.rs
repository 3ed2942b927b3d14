//! Completions for a simulated guest: polling a CQ's ring as the driver
//! does (waiting, spinning, one look, batches), returning slots with CQ
//! doorbells, arming a CQ and waiting for its interrupt.

use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use vm_memory::ByteValued;

use super::{Cq, SimGuest};

/// How [`SimGuest::poll_cq`] waits between two looks at an empty CQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollWait {
    /// Sleep this long (the default: 200 µs, kind to a loaded test machine).
    Sleep(Duration),
    /// Look again at once, yielding the CPU in between (`sched_yield`), as a
    /// busy-polling driver or benchmark does.
    Spin,
}

impl Default for PollWait {
    fn default() -> Self {
        PollWait::Sleep(Duration::from_micros(200))
    }
}

/// Offset of the owner byte in a [`Cqe`].
const CQE_OWNER_OFFSET: u64 = std::mem::offset_of!(Cqe, owner) as u64;

impl SimGuest {
    /// Waits up to `timeout` for the next CQE (polling guest memory as the
    /// driver does), then returns the slot to the device.
    pub fn poll_cq(&mut self, cq: &mut Cq, timeout: Duration) -> Option<Cqe> {
        let slot = cq.gpa + 32 * u64::from(cq.ci & ((1 << cq.log) - 1));
        let want = (((cq.ci >> cq.log) & 1) ^ 1) as u8;
        let deadline = Instant::now() + timeout;
        loop {
            let cqe: Cqe = self.read_obj(slot);
            if cqe.owner & 1 == want {
                cq.ci = cq.ci.wrapping_add(1);
                let db = u64::from(cq.cqn) | (u64::from(cq.ci) << 32);
                self.ring(cq.db, regs::DB_CQ, db);
                return Some(cqe);
            }
            if Instant::now() >= deadline {
                return None;
            }
            match self.poll_wait {
                PollWait::Sleep(d) => std::thread::sleep(d),
                PollWait::Spin => std::thread::yield_now(),
            }
        }
    }

    /// How [`SimGuest::poll_cq`] waits between looks (default: sleep 200 µs).
    pub fn set_poll_wait(&mut self, wait: PollWait) {
        self.poll_wait = wait;
    }

    /// Like [`SimGuest::poll_cq`] but spinning (reading the mapped RAM,
    /// yielding between looks) whatever [`SimGuest::set_poll_wait`] says.
    pub fn poll_cq_spin(&mut self, cq: &mut Cq, timeout: Duration) -> Option<Cqe> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(c) = self.try_poll_cq(cq) {
                return Some(c);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// The next CQE if there is one (one look at the mapped RAM, no
    /// waiting); returns its slot to the device with a CQ doorbell.
    pub fn try_poll_cq(&mut self, cq: &mut Cq) -> Option<Cqe> {
        let c = self.take_cqe(cq)?;
        self.ring_cq(cq);
        Some(c)
    }

    /// Binds a doorbell record (CQ_DB_RECORD) to `cq` and returns its
    /// address: [`SimGuest::try_poll_cq_recorded`] then hands slots back
    /// through it, without a doorbell, as the provider does.
    pub fn bind_cq_record(&mut self, cq: &Cq) -> u64 {
        let record = self.alloc(64, 64);
        let p = CmdDbRecord {
            handle: cq.cqn.into(),
            addr: record.into(),
            ..Default::default()
        };
        self.cmd(CMD_CQ_DB_RECORD, p.as_slice())
            .expect("CQ_DB_RECORD");
        record
    }

    /// The next CQE if there is one (one look, no waiting); its slot goes
    /// back to the device as the consumer index in `cq`'s doorbell record
    /// at `record` ([`SimGuest::bind_cq_record`]), no system call and no
    /// doorbell: the device reads the record when the CQ looks full.
    pub fn try_poll_cq_recorded(&mut self, cq: &mut Cq, record: u64) -> Option<Cqe> {
        let c = self.take_cqe(cq)?;
        fence(Ordering::Release);
        self.map.store(record, &cq.ci);
        Some(c)
    }

    /// Moves up to `max` ready CQEs into `out` (one look, no waiting) and
    /// returns their slots through `cq`'s doorbell record at `record`
    /// ([`SimGuest::bind_cq_record`]), without a doorbell, as the
    /// provider's `poll_cq` with a batch does; returns how many it moved.
    pub fn poll_cq_batch_recorded(
        &mut self,
        cq: &mut Cq,
        max: usize,
        out: &mut Vec<Cqe>,
        record: u64,
    ) -> usize {
        let n = self.take_cqes(cq, max, out);
        if n > 0 {
            fence(Ordering::Release);
            self.map.store(record, &cq.ci);
        }
        n
    }

    /// Moves up to `max` ready CQEs into `out` (one look, no waiting);
    /// returns how many it moved. Their slots are not handed back.
    fn take_cqes(&mut self, cq: &mut Cq, max: usize, out: &mut Vec<Cqe>) -> usize {
        let mut n = 0;
        while n < max {
            let Some(c) = self.take_cqe(cq) else { break };
            out.push(c);
            n += 1;
        }
        n
    }

    /// Moves up to `max` ready CQEs into `out` (one look, no waiting) and
    /// returns their slots with one CQ doorbell, as a driver's `poll_cq`
    /// with a batch does; returns how many it moved.
    pub fn poll_cq_batch(&mut self, cq: &mut Cq, max: usize, out: &mut Vec<Cqe>) -> usize {
        let n = self.take_cqes(cq, max, out);
        if n > 0 {
            self.ring_cq(cq);
        }
        n
    }

    /// Whether the device has written the CQE at `cq`'s consumer index (a
    /// look, consuming nothing).
    pub fn cqe_ready(&self, cq: &Cq) -> bool {
        let slot = cq.gpa + 32 * u64::from(cq.ci & ((1 << cq.log) - 1));
        let want = (((cq.ci >> cq.log) & 1) ^ 1) as u8;
        self.map.load_u8(slot + CQE_OWNER_OFFSET) & 1 == want
    }

    /// Consumes the CQE at the consumer index if the device has written it.
    fn take_cqe(&mut self, cq: &mut Cq) -> Option<Cqe> {
        let slot = cq.gpa + 32 * u64::from(cq.ci & ((1 << cq.log) - 1));
        let want = (((cq.ci >> cq.log) & 1) ^ 1) as u8;
        // The device writes the owner byte last (after a release fence).
        if self.map.load_u8(slot + CQE_OWNER_OFFSET) & 1 != want {
            return None;
        }
        fence(Ordering::Acquire);
        let cqe: Cqe = self.map.load(slot);
        cq.ci = cq.ci.wrapping_add(1);
        Some(cqe)
    }

    /// Arms `cq` for its next completion (the CQ doorbell with
    /// IBTCA_CQ_ARM_NEXT and the consumer index), as `ibv_req_notify_cq`
    /// does. The device fires at once if completions past the consumer index
    /// are already written, so arming and then waiting never misses one.
    pub fn arm_cq(&mut self, cq: &Cq) {
        let db = u64::from(cq.cqn) | (u64::from(CQ_ARM_NEXT) << 24) | (u64::from(cq.ci) << 32);
        self.ring(cq.db, regs::DB_CQ, db);
    }

    /// Blocks until the CQ interrupt (MSI-X vector 1) fires or `timeout`
    /// passes, and consumes it; returns whether it fired.
    pub fn wait_cq_irq(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.cq_irq.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        n > 0 && self.cq_irq.read().is_ok()
    }

    fn ring_cq(&mut self, cq: &Cq) {
        let db = u64::from(cq.cqn) | (u64::from(cq.ci) << 32);
        self.ring(cq.db, regs::DB_CQ, db);
    }
}
