//! Direct RDMA (seed 000): a BAR decoded into address ranges through which
//! guest stores become RDMA WRITEs and RDMA READ responses become guest
//! loads, with no bounce buffer in guest memory.
//!
//! - [`decode`]: window address → (range, offset); PMB layout.
//! - [`arr`]: one Address Range Register and its state machine (PCI Valid,
//!   BR Valid, Type, Total Transfer Length, Write Byte Count, Read Response
//!   Payload Length, PMB number).
//! - [`pmb`]: the packet memory block pool, its DRDMA-dedicated share and
//!   free list; payloads in one shared-memory file, zeroed between uses.
//! - [`stored`]: which bytes of a WRITE range the guest stored (the Write
//!   Byte Count counts each byte once).
//! - [`window`]: the shared window ([`Drdma`]) that the vfio-user thread
//!   (window accesses, registers) and the engine (sending from PMBs, read
//!   responses into PMBs) both use.
//!
//! # Driver protocol
//!
//! DRDMA WRITE of `len` bytes through range `n`:
//! 1. write DRDMA_SUBMIT = `n | IBTCA_DRDMA_SUBMIT_WRITE | len << 32`
//!    (ARR: Type WRITE, PCI Valid; a dedicated PMB is attached);
//! 2. post a WR_DRDMA_WRITE work request whose `sge[0]` is
//!    `{addr 0, length len, lkey IBTCA_SGE_DIRECT | n}` with the remote
//!    address and R_Key, and ring the SQ doorbell;
//! 3. store `len` bytes into range `n` of the window, any sizes, any order
//!    (mapped window: then write DRDMA_COMMIT = `n | len << 16`). The
//!    submit zeroes the PMB, so the stores must follow it: the driver reads
//!    ARR_CTRL back, which flushes a posted submit.
//!
//! When the Write Byte Count reaches the length the ARR flips to BR Valid
//! and the engine, which held the work request at the head of the send
//! queue until then (the seed's bus router polling BR Valid), segments the
//! PMB at the path MTU into RDMA WRITE FIRST/MIDDLE/LAST (RETH in the
//! first) or ONLY. The completion follows the remote ACK; then the range is
//! free.
//!
//! DRDMA READ of `len` bytes into range `n`: submit without the WRITE flag
//! (ARR: Type READ, BR Valid), post WR_DRDMA_READ with the same kind of
//! SGE, ring, then load `len` bytes from range `n` in order. Each response
//! lands in the PMB at its offset in the message (`k · MTU`) and sets RRPL
//! and PCI Valid; later responses are held back until the guest has loaded
//! every byte of the one in the PMB. A load that comes before its data waits
//! for it up to DRDMA_LOAD_TIMEOUT_US (a vfio-user region read cannot be
//! retried the way a PCI read can), then reads all-ones and records
//! IBTCA_DRDMA_ERR_LOAD_TIMEOUT. The completion is written after the guest
//! has drained the last byte (seed Fig 22a), not when the last response
//! arrives: the range frees at that byte, then the engine retires the work
//! request (trapped window: the device sees the last load; mapped window:
//! the DRDMA_COMMIT that counts it). Until then the READ and every work
//! request behind it on the send queue stay uncompleted, in order. (A READ
//! whose work request moves fewer bytes than the range's TTL can never be
//! drained to the end: its completion does not wait, and the range stays
//! busy until a flush, a release or a reset; only that driver's own range
//! suffers.)
//!
//! Release: DRDMA_RELEASE = `n` frees busy range `n` and its PMB as a
//! failed transfer (a work request held for it completes in error). The
//! guest kernel writes it when the last mapping of a user context's range
//! goes, so a range submitted and never filled (a context that named
//! another context's range in its work request, or died mid-transfer)
//! returns to the free list instead of staying busy until a reset.
//!
//! No free PMB: a submit that finds every dedicated PMB taken leaves the
//! range free and records IBTCA_DRDMA_ERR_NO_PMB for it. The driver then
//! falls back as the seed's CPU does (Fig 17, Fig 18a step 1804): a
//! double-buffered transfer through a buffer in guest memory with an
//! ordinary WR_RDMA_WRITE (after the bytes are stored there) or
//! WR_RDMA_READ (the bytes are read there after its completion). The device
//! has no memory of its own to double-buffer into, so the fallback is the
//! driver's; `tests/harness/drdma.rs` (`submit_or_bounce`) is the reference.
//!
//! Refused accesses (free range, wrong type or valid bit, past the length,
//! outside the window) write nothing, read all-ones, count in DRDMA_ERRORS
//! and record DRDMA_LAST_ERROR; other ranges are never touched.
//!
//! Isolation (docs/drdma-isolation.md): a range's PMB is zeroed when the
//! range takes it, every PMB on a device reset, and a new client gets a
//! new PMB file; a trapped WRITE goes out only once every byte of its
//! length was stored by this transfer (a commit that declares more is
//! refused with IBTCA_DRDMA_ERR_UNSTORED). No byte of one transfer or
//! client can leave in another.

pub mod arr;
pub mod decode;
pub mod pmb;
pub mod stored;
pub mod window;

pub use arr::{ArrError, Direction, WriteReady};
pub use window::{Drdma, DrdmaConfig, DrdmaStats, Wake};

use crate::verbs::abi::{Sge, SGE_DIRECT};

/// In [`crate::engine::EngineEvent::DrdmaReady`]: several ranges became
/// ready at once; look at every held work request.
pub const ALL_RANGES: u32 = u32::MAX;

/// The ARR number of a direct SGE, or `None` for an ordinary one.
pub fn direct_arr(sge: &Sge) -> Option<u32> {
    let lkey = sge.lkey.to_native();
    (lkey & SGE_DIRECT != 0).then_some(lkey & 0xffff)
}
