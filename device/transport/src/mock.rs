//! An in-memory [`QpEnv`] for tests: a byte vector as guest memory, a key
//! table (one key serves as L_Key and R_Key), a receive queue, two CQs, a
//! quasi-WQE ring (with a log of everything pushed) and a packet outbox.

use std::collections::{HashMap, VecDeque};

use super::{AccessError, AtomicOp, CqKind, KeyUse, QpEnv};
use crate::keys::KeyMemory;
use crate::remote_target::RemoteTarget;
use ibtca_abi::recv::RecvWr;
use ibtca_abi::verbs::SendWqe;
use ibtca_abi::verbs::*;

/// A registered region.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MockMr {
    /// First address in the region's address space.
    pub(crate) va: u64,
    pub(crate) len: u64,
    /// Where the region starts in `MockEnv::mem`.
    pub(crate) at: usize,
    pub(crate) access: u32,
    pub(crate) pd: u32,
}

#[derive(Debug, Default)]
pub(crate) struct MockEnv {
    pub(crate) mem: Vec<u8>,
    pub(crate) mrs: HashMap<u32, MockMr>,
    /// The QP's protection domain.
    pub(crate) pd: u32,
    pub(crate) rq: VecDeque<RecvWr>,
    pub(crate) send_cq: Vec<Cqe>,
    pub(crate) recv_cq: Vec<Cqe>,
    pub(crate) quasi: VecDeque<QuasiWqe>,
    pub(crate) quasi_log: Vec<QuasiWqe>,
    /// Entries the quasi-WQE ring holds (`None`: no limit).
    pub(crate) quasi_cap: Option<usize>,
    pub(crate) outbox: Vec<Vec<u8>>,
    /// Seed-001 key memory (this QP is [`MOCK_QPN`] in it).
    pub(crate) keys: KeyMemory,
    /// Each retired send work request: (wr_id, send completions written
    /// before it was retired).
    pub(crate) retired: Vec<(u64, usize)>,
}

/// The QP number of a mock QP in its key memory.
pub(crate) const MOCK_QPN: u32 = 1;

pub(crate) const ALL_ACCESS: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

impl MockEnv {
    pub(crate) fn new() -> Self {
        Self {
            pd: 1,
            ..Self::default()
        }
    }

    /// Registers `len` fresh zeroed bytes at `va` under `key` in `pd`.
    pub(crate) fn reg_in(&mut self, key: u32, va: u64, len: usize, access: u32, pd: u32) {
        let at = self.mem.len();
        self.mem.resize(at + len, 0);
        self.mrs.insert(
            key,
            MockMr {
                va,
                len: len as u64,
                at,
                access,
                pd,
            },
        );
    }

    /// Registers in the QP's PD.
    pub(crate) fn reg(&mut self, key: u32, va: u64, len: usize, access: u32) {
        self.reg_in(key, va, len, access, self.pd);
    }

    /// Invalidates region `key` as the device's verbs layer does: the
    /// region goes and the key memory's walk (seed 001) clears the slots
    /// holding it. Returns the region, `None` if there was none.
    pub(crate) fn invalidate(&mut self, key: u32) -> Option<MockMr> {
        let mr = self.mrs.remove(&key)?;
        self.keys.invalidate_walk(self.pd, key);
        Some(mr)
    }

    /// Invalidates region `key` ([`Self::invalidate`]) and registers it
    /// again at once, under the same key, over the same memory: every check
    /// of the key passes as before, so only the walk can stop an operation
    /// that was using it.
    pub(crate) fn invalidate_and_register_again(&mut self, key: u32) {
        let mr = self.invalidate(key).expect("a region to invalidate");
        self.mrs.insert(key, mr);
    }

    pub(crate) fn bytes(&self, key: u32) -> &[u8] {
        let mr = self.mrs[&key];
        &self.mem[mr.at..mr.at + mr.len as usize]
    }

    pub(crate) fn bytes_mut(&mut self, key: u32) -> &mut [u8] {
        let mr = self.mrs[&key];
        &mut self.mem[mr.at..mr.at + mr.len as usize]
    }

    pub(crate) fn post_recv(&mut self, wr_id: u64, sges: &[Sge]) {
        self.rq.push_back(RecvWr::new(wr_id, sges));
    }

    pub(crate) fn take_outbox(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.outbox)
    }

    /// Memory offset of `[va, va + len)` through `key`, after the checks.
    fn resolve(&self, key: u32, va: u64, len: u64, right: u32) -> Result<usize, AccessError> {
        let mr = self.mrs.get(&key).ok_or(AccessError::BadKey)?;
        if mr.pd != self.pd {
            return Err(AccessError::WrongPd);
        }
        if mr.access & right != right {
            return Err(AccessError::NoRight);
        }
        let end = va.checked_add(len).ok_or(AccessError::OutOfBounds)?;
        if va < mr.va || end > mr.va + mr.len {
            return Err(AccessError::OutOfBounds);
        }
        Ok(mr.at + (va - mr.va) as usize)
    }

    /// Takes a key slot for `rkey`, keeping `target`; every slot busy: an
    /// invalid request.
    fn acquire_key(
        &mut self,
        rkey: u32,
        use_: KeyUse,
        target: Option<RemoteTarget>,
    ) -> Result<Option<usize>, AccessError> {
        self.keys
            .acquire_checked(MOCK_QPN, self.pd, rkey, use_, target)
            .map(Some)
            .ok_or(AccessError::Invalid)
    }

    /// Where bytes `[off, off + len)` of a held slot's checked range are
    /// in `mem`: the slot's Valid bit and bounds only.
    fn slot_at(&self, slot: usize, off: u64, len: usize) -> Result<usize, AccessError> {
        let t = self
            .keys
            .target(MOCK_QPN, slot)
            .ok_or(AccessError::BadKey)?;
        let t = t.part(off, len as u64).ok_or(AccessError::OutOfBounds)?;
        Ok(t.mock_offset() as usize)
    }

    /// Memory ranges for `len` bytes from `offset` into the SGE list.
    fn plan(
        &self,
        sges: &[Sge],
        offset: u64,
        len: usize,
        right: u32,
    ) -> Result<Vec<(usize, usize)>, AccessError> {
        let mut skip = offset;
        let mut left = len;
        let mut out = Vec::new();
        for s in sges {
            if left == 0 {
                break;
            }
            let slen = u64::from(s.length.to_native());
            if skip >= slen {
                skip -= slen;
                continue;
            }
            let n = ((slen - skip) as usize).min(left);
            let at = self.resolve(
                s.lkey.to_native(),
                s.addr.to_native() + skip,
                n as u64,
                right,
            )?;
            out.push((at, n));
            left -= n;
            skip = 0;
        }
        if left > 0 {
            return Err(AccessError::OutOfBounds);
        }
        Ok(out)
    }
}

/// The access right a remote READ (`write` false) or WRITE needs.
fn remote_right(write: bool) -> u32 {
    match write {
        true => ACCESS_REMOTE_WRITE,
        false => ACCESS_REMOTE_READ,
    }
}

impl QpEnv for MockEnv {
    fn hold_key(&mut self, rkey: u32, use_: KeyUse) -> Result<Option<usize>, AccessError> {
        self.acquire_key(rkey, use_, None)
    }

    fn hold_checked(
        &mut self,
        rkey: u32,
        use_: KeyUse,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<Option<usize>, AccessError> {
        let at = self.resolve(rkey, va, len, remote_right(write))?;
        self.acquire_key(rkey, use_, Some(RemoteTarget::mock(at as u64, len)))
    }

    fn slot_write(&mut self, slot: usize, off: u64, data: &[u8]) -> Result<(), AccessError> {
        let at = self.slot_at(slot, off, data.len())?;
        self.mem[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn slot_read(&mut self, slot: usize, off: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let at = self.slot_at(slot, off, out.len())?;
        out.copy_from_slice(&self.mem[at..at + out.len()]);
        Ok(())
    }

    fn key_valid(&mut self, slot: usize) -> bool {
        self.keys.still_valid(MOCK_QPN, slot)
    }

    fn release_key(&mut self, slot: usize) {
        self.keys.release(MOCK_QPN, slot);
    }

    fn bind_mw(&mut self, wqe: &SendWqe) -> Result<u32, AccessError> {
        // Windows live in the verbs layer; the mock only checks ordering.
        let k = wqe.rkey.to_native();
        Ok((k & !0xff) | (k.wrapping_add(1) & 0xff))
    }

    fn local_invalidate(&mut self, _rkey: u32) -> Result<(), AccessError> {
        Ok(())
    }

    fn fast_register(&mut self, _wqe: &SendWqe) -> Result<(), AccessError> {
        // Regions live in the verbs layer; the mock only checks ordering.
        Ok(())
    }

    fn remote_invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        self.invalidate(rkey).map(drop).ok_or(AccessError::BadKey)
    }

    fn gather(&mut self, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let plan = self.plan(sges, offset, out.len(), 0)?;
        let mut o = 0;
        for (at, n) in plan {
            out[o..o + n].copy_from_slice(&self.mem[at..at + n]);
            o += n;
        }
        Ok(())
    }

    fn scatter(&mut self, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), AccessError> {
        let plan = self.plan(sges, offset, data.len(), ACCESS_LOCAL_WRITE)?;
        let mut o = 0;
        for (at, n) in plan {
            self.mem[at..at + n].copy_from_slice(&data[o..o + n]);
            o += n;
        }
        Ok(())
    }

    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<(), AccessError> {
        self.resolve(rkey, va, len, remote_right(write)).map(|_| ())
    }

    fn remote_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        let at = self.resolve(rkey, va, data.len() as u64, ACCESS_REMOTE_WRITE)?;
        self.mem[at..at + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn remote_read(&mut self, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let at = self.resolve(rkey, va, out.len() as u64, ACCESS_REMOTE_READ)?;
        out.copy_from_slice(&self.mem[at..at + out.len()]);
        Ok(())
    }

    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        if va & 7 != 0 {
            return Err(AccessError::Invalid);
        }
        let at = self.resolve(rkey, va, 8, ACCESS_REMOTE_ATOMIC)?;
        let cell: &mut [u8; 8] = (&mut self.mem[at..at + 8]).try_into().expect("8 bytes");
        let old = u64::from_le_bytes(*cell);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } if old == compare => swap,
            AtomicOp::CompareSwap { .. } => old,
            AtomicOp::FetchAdd { add } => old.wrapping_add(add),
        };
        *cell = new.to_le_bytes();
        Ok(old)
    }

    fn next_recv(&mut self) -> Option<RecvWr> {
        self.rq.pop_front()
    }

    fn retired(&mut self, wqe: &SendWqe, _status: u8) {
        self.retired
            .push((wqe.wr_id.to_native(), self.send_cq.len()));
    }

    fn complete(&mut self, cq: CqKind, cqe: Cqe) {
        match cq {
            CqKind::Send => self.send_cq.push(cqe),
            CqKind::Recv => self.recv_cq.push(cqe),
        }
    }

    fn push_quasi(&mut self, q: QuasiWqe) -> bool {
        if self.quasi_cap.is_some_and(|cap| self.quasi.len() >= cap) {
            return false;
        }
        self.quasi_log.push(q);
        self.quasi.push_back(q);
        true
    }

    fn peek_quasi(&mut self) -> Option<QuasiWqe> {
        self.quasi.front().copied()
    }

    fn pop_quasi(&mut self) -> Option<QuasiWqe> {
        self.quasi.pop_front()
    }

    fn send_packet(&mut self, packet: Vec<u8>) {
        self.outbox.push(packet);
    }
}
