//! The RC transport (seeds 002 and 004), written sans-I/O: per-QP state
//! machines that turn work requests into packets and packets into memory
//! effects, completions and more packets. Everything outside the protocol —
//! guest memory behind key checks, the receive queue, completion queues, the
//! quasi-WQE ring, the link — is reached through [`QpEnv`], so the transport
//! is unit-tested with an in-memory environment and two QPs wired back to
//! back, and the device supplies the real one.
//!
//! Data path, in one direction: SQ doorbell → requester (segmentation, PSNs)
//! → packet → link → peer responder (checks, DMA, ACK/NAK, read responses
//! from quasi-WQEs) → link → completer (MSN, go-back-N, retries) →
//! completion.
#![deny(missing_docs)]

use ibtca_protocol::headers::NakCode;

use ibtca_abi::recv::RecvWr;
pub use ibtca_abi::send::SendWr;
use ibtca_abi::verbs::{Cqe, QuasiWqe, SendWqe, Sge};
pub use keys::KeyUse;

/// Why a local or remote memory access was refused. The device maps these
/// to completion statuses (local) or NAK codes (remote).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AccessError {
    /// Unknown or invalidated key.
    #[error("invalid key")]
    BadKey,
    /// The key's protection domain differs from the QP's.
    #[error("protection domain mismatch")]
    WrongPd,
    /// The region does not grant the access.
    #[error("access right missing")]
    NoRight,
    /// The range is outside the region.
    #[error("out of the region's bounds")]
    OutOfBounds,
    /// Misaligned atomic or similar malformed request.
    #[error("invalid request")]
    Invalid,
    /// The region is mapped but guest memory refused the DMA.
    #[error("DMA fault")]
    Dma,
}

impl AccessError {
    /// The NAK a responder sends for this error.
    pub fn nak(self) -> NakCode {
        match self {
            AccessError::Invalid => NakCode::InvalidRequest,
            AccessError::Dma => NakCode::RemoteOperationalError,
            _ => NakCode::RemoteAccessError,
        }
    }
}

/// An atomic operation on 8 naturally aligned bytes of a remote region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicOp {
    /// Write `swap` if the current value equals `compare`.
    CompareSwap {
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// Add `add` (wrapping).
    FetchAdd {
        /// Addend.
        add: u64,
    },
}

/// Which completion queue of a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqKind {
    /// The send CQ.
    Send,
    /// The receive CQ.
    Recv,
}

/// Appends `len` zero bytes to `out` and lets `fill` overwrite them; on an
/// error `out` is truncated back.
pub fn append_with(
    out: &mut Vec<u8>,
    len: usize,
    fill: impl FnOnce(&mut [u8]) -> Result<(), AccessError>,
) -> Result<(), AccessError> {
    let at = out.len();
    out.resize(at + len, 0);
    let r = fill(out.get_mut(at..).unwrap_or_default());
    if r.is_err() {
        out.truncate(at);
    }
    r
}

/// Everything a QP's transport needs from the device. One instance per call
/// into the transport, bound to one QP (its PD, rings and CQs).
pub trait QpEnv {
    /// Copies `out.len()` bytes starting `offset` bytes into the buffer
    /// described by `sges` (local keys, checked for LOCAL read).
    fn gather(&mut self, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), AccessError>;

    /// Appends `len` bytes starting `offset` bytes into the buffer that
    /// `sges` describes to `out`, as [`QpEnv::gather`] copies them; `out`
    /// is left as it was on an error. The default zero-fills and gathers;
    /// the device appends straight from guest memory (one pass over the
    /// packet buffer instead of two).
    fn gather_append(
        &mut self,
        sges: &[Sge],
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        append_with(out, len, |buf| self.gather(sges, offset, buf))
    }

    /// Writes `data` starting `offset` bytes into the buffer described by
    /// `sges` (local keys, checked for LOCAL WRITE). Nothing is written
    /// unless all of it fits.
    fn scatter(&mut self, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), AccessError>;

    /// Checks that `rkey` grants `write` (else read) on `[va, va + len)` in
    /// this QP's PD, before any byte of a message moves.
    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<(), AccessError>;

    /// Writes `data` at `va` through `rkey` (REMOTE WRITE checked again:
    /// a window may have been invalidated mid-message).
    fn remote_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError>;

    /// Reads `out.len()` bytes at `va` through `rkey` (REMOTE READ).
    fn remote_read(&mut self, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), AccessError>;

    /// Appends `len` bytes at `va` through `rkey` (REMOTE READ) to `out`,
    /// as [`QpEnv::remote_read`] reads them; `out` is left as it was on an
    /// error (default: zero-fill, then read).
    fn remote_read_append(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        append_with(out, len, |buf| self.remote_read(rkey, va, buf))
    }

    /// Performs an atomic at `va` through `rkey` (REMOTE ATOMIC) and returns
    /// the original value.
    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError>;

    /// Executes a BIND_MW work request (seed 001) in send-queue order;
    /// returns the window's new R_Key.
    fn bind_mw(&mut self, wqe: &SendWqe) -> Result<u32, AccessError>;

    /// Executes a LOCAL_INV work request: invalidates window key `rkey`.
    fn local_invalidate(&mut self, rkey: u32) -> Result<(), AccessError>;

    /// Executes an IBTCA_WR_REG_MR work request (the WQE's bytes as a
    /// struct ibtca_reg_mr_wqe) in send-queue order.
    fn fast_register(&mut self, wqe: &SendWqe) -> Result<(), AccessError>;

    /// A SEND with Invalidate arrived whole: invalidates window key `rkey`
    /// of this QP's PD (the same walk as LOCAL_INV).
    fn remote_invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        self.local_invalidate(rkey)
    }

    /// Takes the next posted receive WQE, if any (RNR otherwise), with
    /// the SGEs its ring's stride holds.
    fn next_recv(&mut self) -> Option<RecvWr>;

    /// Writes a completion to the QP's send or receive CQ (and raises its
    /// interrupt if armed).
    fn complete(&mut self, cq: CqKind, cqe: Cqe);

    /// Appends a quasi-WQE (seed 004) for an inbound RDMA READ to the QP's
    /// ring in guest memory, where the send engine drains it; false when
    /// the ring is full (or gone): the READ is not taken.
    fn push_quasi(&mut self, q: QuasiWqe) -> bool;

    /// Reads the oldest unserved quasi-WQE from guest memory, if any,
    /// without taking it (the send engine reads it for every response it
    /// builds, as it fetches a WQE).
    fn peek_quasi(&mut self) -> Option<QuasiWqe>;

    /// Takes the oldest unserved quasi-WQE, if any (its READ is answered).
    fn pop_quasi(&mut self) -> Option<QuasiWqe>;

    /// Hands a finished packet (from the LRH, with ICRC and VCRC) to the link.
    fn send_packet(&mut self, packet: Vec<u8>);

    /// An empty buffer to build the next packet in: one the link is done
    /// with, when there is one (no allocation per packet).
    fn packet_buffer(&mut self) -> Vec<u8> {
        Vec::new()
    }

    /// Builds one packet of `len` bytes, to `dlid` at service level `sl`,
    /// straight into the link's outgoing stream (no packet buffer, no copy
    /// of it) when nothing waits ahead of it: `build` gets an environment
    /// to gather the payload with and the packet's bytes, and returns false
    /// to give up (nothing is sent). `None` (by default always) when that
    /// cannot be done now, and `build` is not called: build a buffer and
    /// [`Self::send_packet`] it.
    fn send_in_place(
        &mut self,
        len: usize,
        sl: u8,
        dlid: u16,
        build: &mut dyn FnMut(&mut dyn QpEnv, &mut [u8]) -> bool,
    ) -> Option<bool> {
        let _ = (len, sl, dlid, build);
        None
    }

    /// Whether the completion of `wqe`, a READ whose responses have all
    /// landed, must wait for something outside the transport: a DRDMA
    /// READ's range the guest has not loaded to its last byte (seed 000,
    /// Fig 22a). The WQE and those behind it stay queued until
    /// [`RcQp::completion_ready`] runs and this says no.
    fn completion_waits(&mut self, _wqe: &SendWqe) -> bool {
        false
    }

    /// `wqe` left the send queue with completion `status`, signaled or not
    /// (DRDMA frees its window range here).
    fn retired(&mut self, _wqe: &SendWqe, _status: u8) {}

    /// Records `rkey` in this QP's key memory (seed 001) for an RDMA READ
    /// or atomic (`KeyUse::Read`) or a WRITE of several packets
    /// (`KeyUse::Write`); `None` when there is no key memory. An error
    /// (every slot of that use busy) refuses the request.
    fn hold_key(&mut self, _rkey: u32, _use: KeyUse) -> Result<Option<usize>, AccessError> {
        Ok(None)
    }

    /// Checks `rkey` fully for an operation of `len` bytes at `va` (its
    /// first packet) and holds it as [`QpEnv::hold_key`] does, keeping
    /// what the check found in the slot: the operation's later packets go
    /// through [`QpEnv::slot_write`] and [`QpEnv::slot_read`], which look no
    /// key up (seed 001). Default: [`QpEnv::check_remote`], then
    /// [`QpEnv::hold_key`].
    fn hold_checked(
        &mut self,
        rkey: u32,
        use_: KeyUse,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<Option<usize>, AccessError> {
        self.check_remote(rkey, va, len, write)?;
        self.hold_key(rkey, use_)
    }

    /// Writes `data` at `off` bytes into the range checked when the
    /// operation holding `slot` started: only the slot's Valid bit and the
    /// range's bounds are checked (`BadKey` once the walk cleared it).
    fn slot_write(&mut self, _slot: usize, _off: u64, _data: &[u8]) -> Result<(), AccessError> {
        Err(AccessError::BadKey)
    }

    /// Reads `out.len()` bytes at `off` bytes into the range checked when
    /// the operation holding `slot` started, as [`QpEnv::slot_write`]
    /// checks.
    fn slot_read(&mut self, _slot: usize, _off: u64, _out: &mut [u8]) -> Result<(), AccessError> {
        Err(AccessError::BadKey)
    }

    /// Appends what [`QpEnv::slot_read`] reads to `out` (left as it was on
    /// an error).
    fn slot_read_append(
        &mut self,
        slot: usize,
        off: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        append_with(out, len, |buf| self.slot_read(slot, off, buf))
    }

    /// Whether a held key is still valid (not cleared by an invalidation
    /// walk).
    fn key_valid(&mut self, _slot: usize) -> bool {
        true
    }

    /// Releases a held key.
    fn release_key(&mut self, _slot: usize) {}
}

mod completer;
pub mod config;
pub mod keys;
mod msn;
pub mod psn;
pub mod rc;
pub mod remote_target;
mod requester;
mod responder;
mod responses;
pub mod rkm_regs;
pub mod segmenter;
pub mod ud;

/// Bodies of the transport's fuzz targets (compiled for tests and with the
/// `fuzzing` feature only).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz_targets;
// The fuzz targets (`crate::fuzz_targets`) drive the transport through it too.
#[cfg(any(test, feature = "fuzzing"))]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod mock;
#[cfg(test)]
mod tests;

pub use config::{AckPolicy, ConfigError, NakCounts, RcConfig, RcCounters};
pub use rc::{QpFailure, RcQp};
pub use requester::MAX_MESSAGE;
