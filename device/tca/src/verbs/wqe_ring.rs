//! Work-queue rings of any stride (an SQ, an RQ, an SRQ): CREATE_QP's
//! `sq_log_stride` and `rq_log_stride` and CREATE_SRQ's `log_stride` pick
//! it, and a WQE is read whole with the SGEs the stride holds, never past
//! its slot. Send and receive WQEs share the layout past their 64-byte
//! header: 16-byte SGEs, the first 4 within the 128-byte struct.

use std::mem::{offset_of, size_of};

use vm_memory::ByteValued;

use super::abi::{RecvWqe, SendWqe, Sge, MAX_SGE, RECV_LOG_STRIDE, WQE_F_INLINE};
use super::ring::Ring;
use super::VerbsError;
use crate::dma::GuestMemory;
use ibtca_abi::recv::{stride_sges, RecvWr, RECV_SGE_CAP};
use ibtca_abi::send::{SendWr, SEND_SGE_CAP};

/// Most SGEs of any WQE (send or receive).
const SGE_CAP: usize = if RECV_SGE_CAP > SEND_SGE_CAP {
    RECV_SGE_CAP
} else {
    SEND_SGE_CAP
};

/// Where a WQE's SGE list starts, and the bytes of its struct (the first
/// [`MAX_SGE`] SGEs): the same for send and receive WQEs.
const SGE_AT: usize = offset_of!(SendWqe, sge);
const WQE_BYTES: usize = size_of::<SendWqe>();
const _: () = assert!(SGE_AT == offset_of!(RecvWqe, sge) && WQE_BYTES == size_of::<RecvWqe>());

/// The stride in bytes a create command's log2 field names (0: the
/// default 128 bytes); `Invalid` outside IBTCA_RECV_LOG_STRIDE to
/// IBTCA_MAX_RECV_LOG_STRIDE.
pub fn wqe_stride(log_stride: u8) -> Result<u64, VerbsError> {
    let log = if log_stride == 0 {
        RECV_LOG_STRIDE
    } else {
        log_stride
    };
    stride_sges(log).ok_or(VerbsError::Invalid)?;
    Ok(1 << log)
}

/// The SGEs past the first 4 that a WQE naming `num_sge` has in a slot of
/// `ring` at `addr`, read from after its 128 bytes: `Some(None)` when the
/// WQE names no more than 4 or more than the stride (or `cap`) holds
/// (nothing read), `None` when the slot is not in guest memory.
fn read_tail(
    mem: &GuestMemory,
    ring: &Ring,
    addr: u64,
    num_sge: u8,
    cap: usize,
) -> Option<Option<([Sge; SGE_CAP], usize)>> {
    const HEAD: usize = MAX_SGE;
    let holds = (ring.stride() as usize - SGE_AT) / size_of::<Sge>();
    let n = usize::from(num_sge);
    if n <= HEAD || n > holds.min(cap) {
        return Some(None);
    }
    let mut raw = [0u8; SGE_CAP * size_of::<Sge>()];
    let raw = &mut raw[..(n - HEAD) * size_of::<Sge>()];
    mem.read(addr + WQE_BYTES as u64, raw).ok()?;
    let mut tail = [Sge::default(); SGE_CAP];
    for (s, b) in tail.iter_mut().zip(raw.chunks_exact(size_of::<Sge>())) {
        s.as_mut_slice().copy_from_slice(b);
    }
    Some(Some((tail, n - HEAD)))
}

/// The receive WQE at `index` of `ring` (a receive ring whose stride
/// [`wqe_stride`] gave), with as many SGEs as it names when its stride
/// holds them; a WQE naming more reads as [`RecvWr::OVERSIZED`] and
/// nothing past its first 128 bytes is read. `None` when the slot is not
/// in guest memory.
pub fn read_recv(mem: &GuestMemory, ring: &Ring, index: u32) -> Option<RecvWr> {
    let addr = ring.slot_addr(index);
    let mut w = RecvWqe::default();
    mem.read(addr, w.as_mut_slice()).ok()?;
    Some(match read_tail(mem, ring, addr, w.num_sge, RECV_SGE_CAP)? {
        Some((tail, n)) => RecvWr::with_tail(&w, &tail[..n]),
        None => RecvWr::from_wqe(&w),
    })
}

/// The send WQE at `index` of `ring` (an SQ whose stride [`wqe_stride`]
/// gave), as [`read_recv`] reads a receive WQE: a WQE naming more SGEs
/// than its stride holds reads as [`SendWr::OVERSIZED`] and nothing past
/// its first 128 bytes is read. An inline WQE's SGE area is its payload:
/// nothing past its 128 bytes is read either.
pub fn read_send(mem: &GuestMemory, ring: &Ring, index: u32) -> Option<SendWr> {
    let addr = ring.slot_addr(index);
    let mut w = SendWqe::default();
    mem.read(addr, w.as_mut_slice()).ok()?;
    if w.flags & WQE_F_INLINE != 0 {
        return Some(SendWr::from_wqe(w));
    }
    Some(match read_tail(mem, ring, addr, w.num_sge, SEND_SGE_CAP)? {
        Some((tail, n)) => SendWr::with_tail(w, &tail[..n]),
        None => SendWr::from_wqe(w),
    })
}
