//! One Address Range Register (seed 000, Figure 6) and its state machine.
//!
//! | field | who sets it | meaning |
//! |---|---|---|
//! | Total Transfer Length | driver (submit) | bytes the transfer moves, 1..=4096 |
//! | Write Byte Count | bus side (stores) | distinct bytes stored into the range so far |
//! | Read Response Payload Length | bus router | bytes of the response in the PMB |
//! | PMB Number | device (submit) | the packet memory block behind the range |
//! | PCI Valid | both | the bus side may access the range |
//! | BR Valid | both | the bus router owns the PMB |
//! | Type | driver (submit) | WRITE (PCI → IB) or READ (IB → PCI) |
//!
//! WRITE: submit → `Type=WRITE, PCI V`; stores count bytes, each byte once
//! however often it is stored ([`StoredBytes`]); when the count reaches the
//! length → `BR V` (the send engine may build packets from the PMB); the
//! work request retires → free. A DRDMA_COMMIT counts bytes the device did
//! not see stored (the mapped window); on a trapped range it may declare
//! none ([`Arr::commit_store`]).
//!
//! READ: submit → `Type=READ, BR V`; each read response (in order) lands in
//! the PMB at its offset in the message → `RRPL, PCI V`; loads of exactly
//! that response drain it; when drained, the next response (held back until
//! then) takes its place, or `BR V` again while more are due; after the last
//! byte of the message is loaded → free, and the work request's completion,
//! which waited for that ([`Arr::waiter`]), may be written (seed Fig 22a).
//!
//! Offsets in a range are offsets in the message: response `k` of a read at
//! path MTU `m` is served at `[k·m, k·m + RRPL)`, so a guest can drain the
//! range with one linear `memcpy_fromio`.
//!
//! Only the state lives here; the bytes live in the PMB pool and the window
//! moves them as this state machine allows.

use std::collections::VecDeque;

use super::decode::RANGE_SIZE;
use super::stored::StoredBytes;
use crate::regs;

/// Direction of a DRDMA transfer (the ARR's Type bit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// IB → PCI: read responses are loaded by the guest.
    Read,
    /// PCI → IB: guest stores become an RDMA WRITE.
    Write,
}

/// Why an ARR refused an access, submit or commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ArrError {
    /// The range is free, or beyond the window's ranges.
    #[error("range not allocated")]
    Unallocated,
    /// The valid bits or the type do not allow this access.
    #[error("valid bits or type forbid the access")]
    State,
    /// Past the Total Transfer Length, or outside the response in the PMB.
    #[error("access past the transfer length")]
    PastLength,
    /// A load waited too long for read-response data.
    #[error("load timed out waiting for data")]
    LoadTimeout,
    /// Submit on an ARR that is still busy.
    #[error("ARR busy")]
    Busy,
    /// No dedicated PMB can back the range.
    #[error("no PMB available")]
    NoPmb,
    /// Malformed submit or commit.
    #[error("bad request")]
    BadRequest,
    /// A commit declared bytes this transfer did not store.
    #[error("commit of bytes not stored")]
    Unstored,
}

impl ArrError {
    /// The IBTCA_DRDMA_ERR_* code for DRDMA_LAST_ERROR.
    pub fn code(self) -> u32 {
        match self {
            ArrError::Unallocated => regs::DRDMA_ERR_UNALLOCATED,
            ArrError::State => regs::DRDMA_ERR_STATE,
            ArrError::PastLength => regs::DRDMA_ERR_PAST_LENGTH,
            ArrError::LoadTimeout => regs::DRDMA_ERR_LOAD_TIMEOUT,
            ArrError::Busy => regs::DRDMA_ERR_BUSY,
            ArrError::NoPmb => regs::DRDMA_ERR_NO_PMB,
            ArrError::BadRequest => regs::DRDMA_ERR_BAD_REQUEST,
            ArrError::Unstored => regs::DRDMA_ERR_UNSTORED,
        }
    }
}

/// Whether a load can be served now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadReady {
    /// This many of the bytes (at least one) are in the PMB; a load that
    /// runs past the response in the PMB is served piece by piece.
    Ready(u32),
    /// The bytes are due but not here yet (the PCI retry of the seed).
    Wait,
}

/// What draining a read response did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drained {
    /// More bytes of the current response remain.
    Partial,
    /// The next held-back response must be copied into the PMB at `offset`.
    Refill {
        /// Offset in the range (message).
        offset: u32,
        /// The response payload.
        data: Vec<u8>,
    },
    /// The response is drained; more are due from the link.
    Awaiting,
    /// The whole message is drained: the range is free again.
    Done,
}

/// What a read response does when it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// Copy it into the PMB at its offset now.
    IntoPmb,
    /// The PMB still holds an undrained response: it was queued.
    Queued,
    /// Already delivered (a retransmitted response): ignore it.
    Duplicate,
}

/// Readiness of a WRITE range for the send engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteReady {
    /// `BR V`: every byte is stored.
    Ready,
    /// `PCI V`: still being filled.
    Filling,
    /// Not submitted as a WRITE.
    NotSubmitted,
}

/// One Address Range Register.
#[derive(Debug, Clone, Default)]
pub struct Arr {
    /// Total Transfer Length.
    pub ttl: u32,
    /// Write Byte Count.
    pub wbc: u32,
    /// Read Response Payload Length of the response in the PMB.
    pub rrpl: u32,
    /// PMB number (meaningful while busy).
    pub pmb: u32,
    /// PCI Valid.
    pub pci_valid: bool,
    /// BR Valid.
    pub br_valid: bool,
    /// Type; `None` while the range is free.
    pub dir: Option<Direction>,
    /// The last transfer failed.
    pub failed: bool,
    /// Offset in the range of the response in the PMB.
    pub resp_offset: u32,
    /// Bytes of that response loaded so far.
    pub drained: u32,
    /// The QP whose DRDMA READ completion waits for the last byte to be
    /// loaded (set by the engine once every response has landed).
    pub waiter: Option<u32>,
    /// The doorbell page whose QPs may name this range in a direct SGE
    /// (set by DRDMA_SUBMIT; 0, the kernel's, by default).
    pub owner: u32,
    /// Bytes of the read message that reached the device.
    delivered: u32,
    /// WRITE: which bytes the guest stored through the trapped window.
    stored: StoredBytes,
    /// Responses that arrived while the PMB was still full.
    backlog: VecDeque<(u32, Vec<u8>)>,
}

impl Arr {
    /// Allocated (submitted and not finished).
    pub fn busy(&self) -> bool {
        self.dir.is_some()
    }

    /// Refuses an operation for a transfer of direction `dir` on a free
    /// range (Unallocated) or one of the other type (State).
    fn expect(&self, dir: Direction) -> Result<(), ArrError> {
        match self.dir {
            Some(d) if d == dir => Ok(()),
            Some(_) => Err(ArrError::State),
            None => Err(ArrError::Unallocated),
        }
    }

    /// The ARR_CTRL register.
    pub fn ctrl(&self) -> u32 {
        let mut v = self.pmb << regs::ARR_PMB_SHIFT;
        if self.pci_valid {
            v |= regs::ARR_PCI_VALID;
        }
        if self.br_valid {
            v |= regs::ARR_BR_VALID;
        }
        if self.dir == Some(Direction::Write) {
            v |= regs::ARR_TYPE_WRITE;
        }
        if self.busy() {
            v |= regs::ARR_BUSY;
        }
        if self.failed {
            v |= regs::ARR_FAILED;
        }
        v
    }

    /// Starts a transfer of `ttl` bytes through PMB `pmb`.
    pub fn submit(&mut self, dir: Direction, ttl: u32, pmb: u32) -> Result<(), ArrError> {
        if self.busy() {
            return Err(ArrError::Busy);
        }
        if ttl == 0 || ttl > RANGE_SIZE {
            return Err(ArrError::BadRequest);
        }
        *self = Arr {
            ttl,
            pmb,
            dir: Some(dir),
            pci_valid: dir == Direction::Write,
            br_valid: dir == Direction::Read,
            ..Arr::default()
        };
        Ok(())
    }

    /// A trapped store of `len` bytes at `offset`; true when it completed
    /// the transfer length (`PCI V` → `BR V`). Bytes already stored count
    /// once: the Write Byte Count is the number of distinct bytes stored.
    pub fn store(&mut self, offset: u32, len: u32) -> Result<bool, ArrError> {
        self.filling()?;
        let end = u64::from(offset) + u64::from(len);
        if end > u64::from(self.ttl) {
            return Err(ArrError::PastLength);
        }
        self.stored.mark(offset, len);
        self.wbc = self.stored.count();
        Ok(self.filled())
    }

    /// A DRDMA_COMMIT declaring `len` more bytes stored. `mapped`: the
    /// guest stores into the PMB directly and the device sees none of it,
    /// so the count is the driver's word; each byte it lets go is one this
    /// transfer stored or a zero (the PMB was zeroed when the range took
    /// it). Trapped: every store has counted itself, so a commit may
    /// declare only bytes stored and not counted yet, which is none; more
    /// is refused ([`ArrError::Unstored`]) and changes nothing.
    pub fn commit_store(&mut self, len: u32, mapped: bool) -> Result<bool, ArrError> {
        self.filling()?;
        let wbc = u64::from(self.wbc) + u64::from(len);
        if wbc > u64::from(self.ttl) {
            return Err(ArrError::PastLength);
        }
        if !mapped && wbc > u64::from(self.stored.count()) {
            return Err(ArrError::Unstored);
        }
        self.wbc += len;
        Ok(self.filled())
    }

    /// A WRITE range that takes stores (`PCI V`).
    fn filling(&self) -> Result<(), ArrError> {
        self.expect(Direction::Write)?;
        match self.pci_valid {
            true => Ok(()),
            false => Err(ArrError::State),
        }
    }

    /// `PCI V` → `BR V` once the count reaches the length.
    fn filled(&mut self) -> bool {
        if self.wbc < self.ttl {
            return false;
        }
        self.pci_valid = false;
        self.br_valid = true;
        true
    }

    /// Whether the send engine may take this range's bytes.
    pub fn write_ready(&self) -> WriteReady {
        match (self.dir, self.pci_valid, self.br_valid) {
            (Some(Direction::Write), _, true) => WriteReady::Ready,
            (Some(Direction::Write), true, _) => WriteReady::Filling,
            _ => WriteReady::NotSubmitted,
        }
    }

    /// Whether the send engine may read `len` bytes at `offset` now.
    pub fn check_send(&self, offset: u64, len: usize) -> bool {
        self.write_ready() == WriteReady::Ready
            && offset.saturating_add(len as u64) <= u64::from(self.ttl)
    }

    /// Frees the range (`failed` marks a transfer that did not succeed).
    pub fn finish(&mut self, failed: bool) {
        *self = Arr {
            pmb: self.pmb,
            failed,
            ..Arr::default()
        };
    }

    /// A read response of `data.len()` bytes at message offset `offset`.
    pub fn deliver(&mut self, offset: u32, data: &[u8]) -> Result<Delivered, ArrError> {
        self.expect(Direction::Read)?;
        let len = u32::try_from(data.len()).map_err(|_| ArrError::PastLength)?;
        let end = u64::from(offset) + u64::from(len);
        if end <= u64::from(self.delivered) && len > 0 {
            return Ok(Delivered::Duplicate);
        }
        if offset != self.delivered {
            return Err(ArrError::BadRequest);
        }
        if end > u64::from(self.ttl) {
            return Err(ArrError::PastLength);
        }
        self.delivered += len;
        if self.pci_valid || !self.backlog.is_empty() {
            self.backlog.push_back((offset, data.to_vec()));
            return Ok(Delivered::Queued);
        }
        self.show(offset, len);
        Ok(Delivered::IntoPmb)
    }

    fn show(&mut self, offset: u32, len: u32) {
        self.resp_offset = offset;
        self.rrpl = len;
        self.drained = 0;
        self.pci_valid = true;
        self.br_valid = false;
    }

    /// Every byte of a READ reached the PMB or its backlog, and the guest
    /// has not loaded them all yet (the range is still busy).
    pub fn awaiting_drain(&self) -> bool {
        self.dir == Some(Direction::Read) && self.delivered >= self.ttl
    }

    /// Whether a load of `len` bytes at `offset` can be served: how much
    /// of it now, or wait for the next response. A load of bytes already
    /// drained, or of a later response while this one is still in the PMB
    /// (only this bus could drain it), is refused.
    pub fn load_ready(&self, offset: u32, len: u32) -> Result<LoadReady, ArrError> {
        match self.dir {
            None => return Err(ArrError::Unallocated),
            Some(Direction::Write) => return Err(ArrError::State),
            Some(Direction::Read) => {}
        }
        let end = u64::from(offset) + u64::from(len);
        if end > u64::from(self.ttl) {
            return Err(ArrError::PastLength);
        }
        let resp_end = self.resp_offset + self.rrpl;
        if offset < self.resp_offset || (!self.pci_valid && offset < resp_end) {
            return Err(ArrError::PastLength); // already drained
        }
        if self.pci_valid {
            return match offset < resp_end {
                true => Ok(LoadReady::Ready(len.min(resp_end - offset).max(1))),
                false => Err(ArrError::PastLength),
            };
        }
        Ok(LoadReady::Wait)
    }

    /// Counts `len` bytes loaded from the current response.
    pub fn drain(&mut self, len: u32) -> Result<Drained, ArrError> {
        self.expect(Direction::Read)?;
        if !self.pci_valid {
            return Err(ArrError::State);
        }
        if self.drained + len > self.rrpl {
            return Err(ArrError::PastLength);
        }
        self.drained += len;
        if self.drained < self.rrpl {
            return Ok(Drained::Partial);
        }
        if let Some((offset, data)) = self.backlog.pop_front() {
            self.show(offset, data.len() as u32);
            return Ok(Drained::Refill { offset, data });
        }
        self.pci_valid = false;
        if self.delivered >= self.ttl {
            self.finish(false);
            return Ok(Drained::Done);
        }
        self.br_valid = true;
        Ok(Drained::Awaiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u32 = regs::ARR_TYPE_WRITE;
    const P: u32 = regs::ARR_PCI_VALID;
    const B: u32 = regs::ARR_BR_VALID;
    const BUSY: u32 = regs::ARR_BUSY;

    fn bits(a: &Arr) -> u32 {
        a.ctrl() & 0xff
    }

    #[test]
    fn write_bits_follow_the_seed() {
        let mut a = Arr::default();
        assert_eq!(bits(&a), 0, "a free range has no bits");
        a.submit(Direction::Write, 4096, 7).unwrap();
        assert_eq!(bits(&a), W | P | BUSY, "submit: Type=WRITE, PCI V");
        assert_eq!(a.ctrl() >> regs::ARR_PMB_SHIFT, 7);
        assert_eq!(a.write_ready(), WriteReady::Filling);
        // Mixed sizes, out of order.
        assert_eq!(a.store(4088, 8), Ok(false));
        assert_eq!(a.store(0, 1), Ok(false));
        assert_eq!(a.store(1, 2), Ok(false));
        assert_eq!(a.store(3, 4081), Ok(false));
        assert_eq!(a.wbc, 4092);
        assert_eq!(a.store(4084, 4), Ok(true), "WBC == TTL");
        assert_eq!(bits(&a), W | B | BUSY, "PCI V clears, BR V sets");
        assert_eq!(a.write_ready(), WriteReady::Ready);
        assert!(a.check_send(2048, 2048));
        assert!(!a.check_send(2048, 2049));
        assert_eq!(a.store(0, 1), Err(ArrError::State), "no stores once BR V");
        a.finish(false);
        assert_eq!(bits(&a), 0, "retired: free");
    }

    #[test]
    fn write_refusals() {
        let mut a = Arr::default();
        assert_eq!(a.store(0, 4), Err(ArrError::Unallocated));
        assert_eq!(a.submit(Direction::Write, 0, 0), Err(ArrError::BadRequest));
        assert_eq!(
            a.submit(Direction::Write, 4097, 0),
            Err(ArrError::BadRequest)
        );
        a.submit(Direction::Write, 100, 0).unwrap();
        assert_eq!(a.submit(Direction::Read, 100, 0), Err(ArrError::Busy));
        assert_eq!(a.store(96, 8), Err(ArrError::PastLength), "past TTL");
        assert_eq!(a.wbc, 0, "a refused store counts nothing");
        assert_eq!(a.load_ready(0, 4), Err(ArrError::State), "load on WRITE");
        assert_eq!(a.deliver(0, &[1]), Err(ArrError::State));
        // Overlapping stores count each byte once.
        a.store(0, 60).unwrap();
        assert_eq!(a.store(0, 60), Ok(false));
        assert_eq!(a.store(50, 40), Ok(false));
        assert_eq!(a.wbc, 90);
        assert_eq!(a.store(0, 100), Ok(true), "the last 10 bytes are new");
    }

    #[test]
    fn a_trapped_commit_declares_no_byte_it_did_not_store() {
        let mut a = Arr::default();
        a.submit(Direction::Write, 4096, 7).unwrap();
        for _ in 0..512 {
            assert_eq!(a.store(0, 8), Ok(false));
        }
        assert_eq!(a.wbc, 8, "8 bytes stored 512 times are 8 bytes");
        assert_eq!(a.commit_store(4088, false), Err(ArrError::Unstored));
        assert_eq!(a.commit_store(1, false), Err(ArrError::Unstored));
        assert_eq!((a.wbc, bits(&a)), (8, W | P | BUSY), "unchanged");
        assert_eq!(a.commit_store(0, false), Ok(false));
        assert_eq!(a.commit_store(4089, false), Err(ArrError::PastLength));
        // The mapped window takes the driver's count.
        assert_eq!(a.commit_store(4088, true), Ok(true));
        assert_eq!(bits(&a), W | B | BUSY);
    }

    #[test]
    fn read_of_16_responses_refills_one_by_one() {
        let mut a = Arr::default();
        a.submit(Direction::Read, 4096, 3).unwrap();
        assert_eq!(bits(&a), B | BUSY, "submit: Type=READ, BR V");
        assert_eq!(a.load_ready(0, 8), Ok(LoadReady::Wait), "early load waits");
        // All 16 responses arrive before the guest loads anything.
        assert_eq!(a.deliver(0, &[0; 256]), Ok(Delivered::IntoPmb));
        for k in 1..16u32 {
            assert_eq!(a.deliver(k * 256, &[k as u8; 256]), Ok(Delivered::Queued));
        }
        assert_eq!(bits(&a), P | BUSY, "BR V clears, PCI V sets");
        assert_eq!((a.rrpl, a.resp_offset), (256, 0));
        assert_eq!(
            a.load_ready(256, 8),
            Err(ArrError::PastLength),
            "not the response in the PMB"
        );
        assert_eq!(a.load_ready(200, 100), Ok(LoadReady::Ready(56)), "piece");
        for k in 0..16u32 {
            assert_eq!(a.load_ready(k * 256, 256), Ok(LoadReady::Ready(256)));
            assert_eq!(a.drain(200), Ok(Drained::Partial));
            let d = a.drain(56).unwrap();
            match k {
                15 => assert_eq!(d, Drained::Done),
                _ => assert_eq!(
                    d,
                    Drained::Refill {
                        offset: (k + 1) * 256,
                        data: vec![(k + 1) as u8; 256]
                    }
                ),
            }
            if k < 15 {
                assert_eq!(a.load_ready(k * 256, 1), Err(ArrError::PastLength));
            }
        }
        assert_eq!(bits(&a), 0, "drained: free");
    }

    #[test]
    fn read_awaits_between_responses_and_ignores_duplicates() {
        let mut a = Arr::default();
        a.submit(Direction::Read, 600, 0).unwrap();
        assert_eq!(a.deliver(0, &[1; 256]), Ok(Delivered::IntoPmb));
        assert_eq!(a.deliver(0, &[1; 256]), Ok(Delivered::Duplicate));
        assert_eq!(a.drain(256), Ok(Drained::Awaiting));
        assert_eq!(bits(&a), B | BUSY, "drained, waiting for the next");
        assert_eq!(a.load_ready(256, 8), Ok(LoadReady::Wait));
        assert_eq!(a.load_ready(0, 8), Err(ArrError::PastLength), "drained");
        assert_eq!(a.deliver(512, &[3; 88]), Err(ArrError::BadRequest), "gap");
        assert_eq!(a.deliver(256, &[2; 256]), Ok(Delivered::IntoPmb));
        assert_eq!(a.drain(257), Err(ArrError::PastLength));
        assert_eq!(a.drain(256), Ok(Drained::Awaiting));
        assert_eq!(a.deliver(512, &[3; 89]), Err(ArrError::PastLength));
        assert_eq!(a.deliver(512, &[3; 88]), Ok(Delivered::IntoPmb));
        assert_eq!(a.load_ready(512, 89), Err(ArrError::PastLength));
        assert_eq!(a.drain(88), Ok(Drained::Done));
        assert_eq!(a.store(0, 1), Err(ArrError::Unallocated));
    }
}
