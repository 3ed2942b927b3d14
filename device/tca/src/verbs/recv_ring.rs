//! Receive rings of any stride (an RQ, an SRQ): CREATE_QP's
//! `rq_log_stride` and CREATE_SRQ's `log_stride` pick it, and a WQE is
//! read whole with the SGEs the stride holds, never past its slot.

use vm_memory::ByteValued;

use super::abi::{RecvWqe, Sge, RECV_LOG_STRIDE};
use super::ring::Ring;
use super::VerbsError;
use crate::dma::GuestMemory;
use ibtca_abi::recv::{stride_sges, RecvWr, RECV_SGE_CAP};

/// The stride in bytes a create command's log2 field names (0: the
/// default 128 bytes); `Invalid` outside IBTCA_RECV_LOG_STRIDE to
/// IBTCA_MAX_RECV_LOG_STRIDE.
pub fn recv_stride(log_stride: u8) -> Result<u64, VerbsError> {
    let log = if log_stride == 0 {
        RECV_LOG_STRIDE
    } else {
        log_stride
    };
    stride_sges(log).ok_or(VerbsError::Invalid)?;
    Ok(1 << log)
}

/// The receive WQE at `index` of `ring` (a receive ring whose stride
/// [`recv_stride`] gave), with as many SGEs as it names when its stride
/// holds them; a WQE naming more reads as [`RecvWr::OVERSIZED`] and
/// nothing past its first 128 bytes is read. `None` when the slot is not
/// in guest memory.
pub fn read_recv(mem: &GuestMemory, ring: &Ring, index: u32) -> Option<RecvWr> {
    let addr = ring.slot_addr(index);
    let mut w = RecvWqe::default();
    mem.read(addr, w.as_mut_slice()).ok()?;
    let holds = ring.stride() as usize;
    let holds = (holds - std::mem::offset_of!(RecvWqe, sge)) / size_of::<Sge>();
    let n = usize::from(w.num_sge);
    let head = w.sge.len();
    if n <= head || n > holds.min(RECV_SGE_CAP) {
        return Some(RecvWr::from_wqe(&w));
    }
    let mut raw = [0u8; RECV_SGE_CAP * size_of::<Sge>()];
    let raw = &mut raw[..(n - head) * size_of::<Sge>()];
    mem.read(addr + size_of::<RecvWqe>() as u64, raw).ok()?;
    let mut tail = [Sge::default(); RECV_SGE_CAP];
    for (s, b) in tail.iter_mut().zip(raw.chunks_exact(size_of::<Sge>())) {
        s.as_mut_slice().copy_from_slice(b);
    }
    Some(RecvWr::with_tail(&w, &tail[..n - head]))
}
