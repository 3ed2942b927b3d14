//! The device's [`QpEnv`]: the transport's view of one QP, backed by the
//! verbs tables (key checks), guest memory (DMA), the QP's rings and CQs,
//! MSI-X and the link.

use crate::dma::GuestMemory;
use crate::drdma::{direct_arr, Direction, Drdma};
use crate::pci::msix::Msix;
use crate::transport::{append_with, AccessError, AtomicOp, CqKind, KeyUse, QpEnv};
use crate::verbs::abi::{
    Cqe, QuasiWqe, RegMrWqe, SendWqe, Sge, CQE_F_SOLICITED, WC_SUCCESS, WR_DRDMA_READ,
    WR_DRDMA_WRITE,
};
use crate::verbs::mr::{RemoteRight, RemoteTarget};
use crate::verbs::mw::BindRequest;
use crate::verbs::sgl::GpaRanges;
use crate::verbs::Verbs;
use ibtca_abi::recv::RecvWr;

/// Where finished packets go (the link, or a test's outbox).
pub trait PacketSink: Send {
    /// Queues one packet; may drop it (the transport retransmits).
    fn send(&mut self, packet: Vec<u8>);

    /// Queues a burst of packets, in order (by default one [`Self::send`]
    /// each); leaves `packets` empty.
    fn send_all(&mut self, packets: &mut Vec<Vec<u8>>) {
        for p in packets.drain(..) {
            self.send(p);
        }
    }

    /// The counters of the link behind the sink, if there is one (the
    /// performance management agent reports them).
    fn link_stats(&self) -> Option<crate::link::LinkStats> {
        None
    }

    /// Replaces the VL arbitration of what the sink sends (the port's
    /// VLArbitrationTable and VLHighLimit; by default nothing: no link).
    fn set_arbitration(&mut self, low: &[(u8, u8)], high: &crate::link::HighPriority) {
        let _ = (low, high);
    }

    /// An empty buffer for the next packet (a reused one if the sink has
    /// any; by default a new one).
    fn buffer(&mut self) -> Vec<u8> {
        Vec::new()
    }

    /// Moves buffers of packets the sink is done with into `spare`, up to
    /// `max` in all (by default none).
    fn reclaim(&mut self, spare: &mut Vec<Vec<u8>>, max: usize) {
        let _ = (spare, max);
    }

    /// Builds one packet of `len` bytes, to `dlid` at service level `sl`,
    /// straight into the link's outgoing stream when nothing waits ahead
    /// of it: `build` writes all of it in place, or returns false to give
    /// up (nothing is sent). `None` (by default always) when that cannot
    /// be done now, and `build` is not called: build a buffer and
    /// [`Self::send`] it.
    fn send_in_place(
        &mut self,
        len: usize,
        sl: u8,
        dlid: u16,
        build: &mut dyn FnMut(&mut [u8]) -> bool,
    ) -> Option<bool> {
        let _ = (len, sl, dlid, build);
        None
    }

    /// Lets the link's peer see the packets [`Self::send_in_place`] built
    /// (it may hold them back to hand many over at once); called at the end
    /// of every burst.
    fn publish(&mut self) {}
}

/// A sink for an environment that only gathers: drops what it is given.
struct NoSink;

impl PacketSink for NoSink {
    fn send(&mut self, _packet: Vec<u8>) {}
}

/// One QP's environment for one call into the transport.
pub struct DeviceQpEnv<'a> {
    /// QP number.
    pub qpn: u32,
    /// Verbs tables.
    pub verbs: &'a mut Verbs,
    /// Guest memory.
    pub mem: &'a GuestMemory,
    /// Interrupts.
    pub msix: &'a Msix,
    /// Outgoing packets.
    pub sink: &'a mut dyn PacketSink,
    /// The DRDMA window (direct SGEs).
    pub drdma: &'a Drdma,
}

fn dma<T>(r: Result<T, crate::dma::DmaError>) -> Result<T, AccessError> {
    r.map_err(|e| {
        crate::guest_warn!(error = %e, "DMA through a registered region failed");
        AccessError::Dma
    })
}

/// Writes `data` over `ranges` (as long together): nothing is written
/// unless every range is mapped (a page-list region's pages may lie
/// anywhere, or outside guest memory).
fn write_ranges(mem: &GuestMemory, ranges: &GpaRanges, data: &[u8]) -> Result<(), AccessError> {
    if ranges.len() > 1 && !ranges.all_mapped(mem) {
        crate::guest_warn!(
            ranges = ranges.len(),
            "DMA through a registered region failed: a page is not in guest memory"
        );
        return Err(AccessError::Dma);
    }
    let mut at = 0;
    for r in ranges.iter() {
        let n = r.len as usize;
        dma(mem.write(r.gpa, &data[at..at + n]))?;
        at += n;
    }
    Ok(())
}

/// Reads `ranges` (as long together as `out`) into `out`.
fn read_ranges(mem: &GuestMemory, ranges: &GpaRanges, out: &mut [u8]) -> Result<(), AccessError> {
    let mut at = 0;
    for r in ranges.iter() {
        let n = r.len as usize;
        dma(mem.read(r.gpa, &mut out[at..at + n]))?;
        at += n;
    }
    Ok(())
}

/// Appends `ranges` to `out`; `out` is left as it was on an error.
fn append_ranges(
    mem: &GuestMemory,
    ranges: &GpaRanges,
    out: &mut Vec<u8>,
) -> Result<(), AccessError> {
    let start = out.len();
    for r in ranges.iter() {
        if let Err(e) = dma(mem.read_append(r.gpa, r.len as usize, out)) {
            out.truncate(start);
            return Err(e);
        }
    }
    Ok(())
}

/// The right a remote READ (`write` false) or WRITE needs.
fn remote_right(write: bool) -> RemoteRight {
    match write {
        true => RemoteRight::Write,
        false => RemoteRight::Read,
    }
}

impl DeviceQpEnv<'_> {
    /// Takes a key slot of this QP for `rkey` (keeping `target`, what its
    /// check found). Every slot busy: the seed's responder cannot start the
    /// operation (more than the responder resources: an invalid request).
    fn acquire_key(
        &mut self,
        rkey: u32,
        use_: KeyUse,
        target: Option<RemoteTarget>,
    ) -> Result<Option<usize>, AccessError> {
        let pd = self.verbs.qp_pd(self.qpn).ok_or(AccessError::Invalid)?;
        self.verbs
            .keys
            .acquire_checked(self.qpn, pd, rkey, use_, target)
            .map(Some)
            .ok_or(AccessError::Invalid)
    }

    /// Where bytes `[off, off + len)` of the range a held key slot was
    /// checked for are: the slot's Valid bit and bounds, then the region's
    /// translation (no key lookup, seed 001).
    fn slot_ranges(&self, slot: usize, off: u64, len: usize) -> Result<GpaRanges, AccessError> {
        let t = self.verbs.keys.target(self.qpn, slot);
        let t = t.ok_or(AccessError::BadKey)?;
        let t = t.part(off, len as u64).ok_or(AccessError::OutOfBounds)?;
        self.verbs.mrs.translate(t)
    }

    fn ranges(
        &self,
        sges: &[Sge],
        offset: u64,
        len: usize,
        write: bool,
    ) -> Result<GpaRanges, AccessError> {
        self.verbs
            .resolve_sges(self.qpn, sges, offset, len as u64, write)
    }

    fn cq_of(&self, kind: CqKind) -> Option<u32> {
        let qp = self.verbs.qps.get(self.qpn)?;
        Some(match kind {
            CqKind::Send => qp.send_cqn,
            CqKind::Recv => qp.recv_cqn,
        })
    }
}

/// The window range of a one-SGE direct list; `Err` for a direct SGE mixed
/// with others (refused like a bad key), `Ok(None)` for ordinary lists.
fn direct(sges: &[Sge]) -> Result<Option<u32>, AccessError> {
    match sges {
        [one] => Ok(direct_arr(one)),
        many if many.iter().any(|s| direct_arr(s).is_some()) => Err(AccessError::BadKey),
        _ => Ok(None),
    }
}

impl DeviceQpEnv<'_> {
    /// Whether this QP may name window range `arr`: the range was submitted
    /// for the QP's doorbell page (one user context, or the kernel's 0).
    fn owns(&self, arr: u32) -> bool {
        let page = self.verbs.qps.get(self.qpn).map_or(0, |qp| qp.db_page);
        self.drdma.owned_by(arr, page)
    }

    /// [`direct`], with a range of another doorbell page refused like a
    /// bad key: its bytes never reach this QP's packets, nor this QP's
    /// responses its PMB.
    fn direct_owned(&self, sges: &[Sge]) -> Result<Option<u32>, AccessError> {
        match direct(sges)? {
            Some(arr) if !self.owns(arr) => Err(AccessError::BadKey),
            other => Ok(other),
        }
    }
}

impl QpEnv for DeviceQpEnv<'_> {
    fn gather(&mut self, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), AccessError> {
        if let Some(arr) = self.direct_owned(sges)? {
            return match self.drdma.gather(arr, offset, out) {
                true => Ok(()),
                false => Err(AccessError::BadKey),
            };
        }
        let ranges = self.ranges(sges, offset, out.len(), false)?;
        read_ranges(self.mem, &ranges, out)
    }

    fn gather_append(
        &mut self,
        sges: &[Sge],
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        if self.direct_owned(sges)?.is_some() {
            return append_with(out, len, |buf| self.gather(sges, offset, buf));
        }
        let ranges = self.ranges(sges, offset, len, false)?;
        append_ranges(self.mem, &ranges, out)
    }

    fn scatter(&mut self, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), AccessError> {
        if let Some(arr) = self.direct_owned(sges)? {
            return match self.drdma.deliver(arr, offset, data) {
                true => Ok(()),
                false => Err(AccessError::BadKey),
            };
        }
        let ranges = self.ranges(sges, offset, data.len(), true)?;
        write_ranges(self.mem, &ranges, data)
    }

    fn check_remote(
        &mut self,
        rkey: u32,
        va: u64,
        len: u64,
        write: bool,
    ) -> Result<(), AccessError> {
        self.verbs
            .remote_target(self.qpn, rkey, va, len, remote_right(write))
            .map(|_| ())
    }

    fn remote_write(&mut self, rkey: u32, va: u64, data: &[u8]) -> Result<(), AccessError> {
        let ranges =
            self.verbs
                .check_remote(self.qpn, rkey, va, data.len() as u64, RemoteRight::Write)?;
        write_ranges(self.mem, &ranges, data)
    }

    fn remote_read(&mut self, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let ranges =
            self.verbs
                .check_remote(self.qpn, rkey, va, out.len() as u64, RemoteRight::Read)?;
        read_ranges(self.mem, &ranges, out)
    }

    fn remote_read_append(
        &mut self,
        rkey: u32,
        va: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        let ranges = self
            .verbs
            .check_remote(self.qpn, rkey, va, len as u64, RemoteRight::Read)?;
        append_ranges(self.mem, &ranges, out)
    }

    fn remote_atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        let ranges = self
            .verbs
            .check_remote(self.qpn, rkey, va, 8, RemoteRight::Atomic)?;
        // The engine thread is the only device thread touching guest memory
        // through registered regions, so read-modify-write is atomic with
        // respect to other remote operations (not to the guest's own CPU
        // stores, as on real hardware without PCIe atomics).
        // (A page-list region may split the 8 bytes over two pages.)
        let mut b = [0u8; 8];
        read_ranges(self.mem, &ranges, &mut b)?;
        let old = u64::from_le_bytes(b);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => (old == compare).then_some(swap),
            AtomicOp::FetchAdd { add } => Some(old.wrapping_add(add)),
        };
        if let Some(v) = new {
            write_ranges(self.mem, &ranges, &v.to_le_bytes())?;
        }
        Ok(old)
    }

    fn bind_mw(&mut self, wqe: &SendWqe) -> Result<u32, AccessError> {
        let req = BindRequest {
            mw_rkey: wqe.rkey.to_native(),
            lkey: wqe.sge[0].lkey.to_native(),
            va: wqe.compare_add.to_native(),
            length: wqe.swap.to_native(),
            access: wqe.imm_data.to_native(),
        };
        self.verbs.bind_mw(self.qpn, req)
    }

    fn local_invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        self.verbs.local_invalidate(self.qpn, rkey)
    }

    fn fast_register(&mut self, wqe: &SendWqe) -> Result<(), AccessError> {
        let w = RegMrWqe::from_send_wqe(wqe);
        self.verbs
            .fast_register(self.qpn, self.mem, &w)
            .map(drop)
            .inspect_err(|e| {
                crate::guest_warn!(qpn = self.qpn, key = w.key.to_native(), error = ?e, "fast registration refused");
            })
    }

    fn next_recv(&mut self) -> Option<RecvWr> {
        let qp = self.verbs.qps.get_mut(self.qpn)?;
        if let Some(srqn) = qp.srqn {
            // Only a QP that receives takes from its SRQ: one in error
            // flushes none of the SRQ's WQEs (the other QPs' too).
            if !qp.state().receives() {
                return None;
            }
            return self
                .verbs
                .take_srq_recv(srqn, self.mem)
                .unwrap_or_else(|e| {
                    crate::guest_warn!(qpn = self.qpn, srqn, error = %e, "shared receive queue");
                    None
                });
        }
        match qp.next_recv_wqe(self.mem) {
            Ok(w) => w,
            Err(e) => {
                crate::guest_warn!(qpn = self.qpn, error = %e, "receive queue");
                None
            }
        }
    }

    fn complete(&mut self, cq: CqKind, cqe: Cqe) {
        let Some(cqn) = self.cq_of(cq) else { return };
        let solicited = cqe.flags & CQE_F_SOLICITED != 0;
        let now = std::time::Instant::now();
        match self.verbs.complete(self.mem, cqn, &cqe, solicited, now) {
            Ok(Some(vector)) => {
                if let Err(e) = self.msix.trigger(u32::from(vector)) {
                    crate::guest_warn!(cqn, error = %e, "CQ interrupt");
                }
            }
            Ok(None) => {}
            Err(e) => crate::guest_warn!(qpn = self.qpn, cqn, error = %e, "completion lost"),
        }
    }

    fn push_quasi(&mut self, q: QuasiWqe) -> bool {
        let Some(qp) = self.verbs.qps.get_mut(self.qpn) else {
            return false;
        };
        match qp.push_quasi(self.mem, &q) {
            Ok(()) => true,
            Err(e) => {
                crate::guest_warn!(qpn = self.qpn, error = %e, "quasi-WQE ring: READ dropped");
                false
            }
        }
    }

    fn peek_quasi(&mut self) -> Option<QuasiWqe> {
        let qp = self.verbs.qps.get_mut(self.qpn)?;
        qp.peek_quasi(self.mem).unwrap_or_else(|e| {
            crate::guest_warn!(qpn = self.qpn, error = %e, "quasi-WQE ring");
            None
        })
    }

    fn pop_quasi(&mut self) -> Option<QuasiWqe> {
        let qp = self.verbs.qps.get_mut(self.qpn)?;
        qp.pop_quasi(self.mem).unwrap_or_else(|e| {
            crate::guest_warn!(qpn = self.qpn, error = %e, "quasi-WQE ring");
            None
        })
    }

    fn send_packet(&mut self, packet: Vec<u8>) {
        self.sink.send(packet);
    }

    fn packet_buffer(&mut self) -> Vec<u8> {
        self.sink.buffer()
    }

    fn send_in_place(
        &mut self,
        len: usize,
        sl: u8,
        dlid: u16,
        build: &mut dyn FnMut(&mut dyn QpEnv, &mut [u8]) -> bool,
    ) -> Option<bool> {
        // `build` gathers through this QP's keys and memory while the sink
        // holds the packet's place: it gets this environment without its
        // sink (a gather sends nothing).
        let DeviceQpEnv {
            qpn,
            verbs,
            mem,
            msix,
            sink,
            drdma,
        } = self;
        let mut no_sink = NoSink;
        let mut gather = DeviceQpEnv {
            qpn: *qpn,
            verbs,
            mem,
            msix,
            sink: &mut no_sink,
            drdma,
        };
        sink.send_in_place(len, sl, dlid, &mut |bytes| build(&mut gather, bytes))
    }

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
        let right = remote_right(write);
        let target = self.verbs.remote_target(self.qpn, rkey, va, len, right)?;
        self.acquire_key(rkey, use_, Some(target))
    }

    fn slot_write(&mut self, slot: usize, off: u64, data: &[u8]) -> Result<(), AccessError> {
        let ranges = self.slot_ranges(slot, off, data.len())?;
        write_ranges(self.mem, &ranges, data)
    }

    fn slot_read(&mut self, slot: usize, off: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let ranges = self.slot_ranges(slot, off, out.len())?;
        read_ranges(self.mem, &ranges, out)
    }

    fn slot_read_append(
        &mut self,
        slot: usize,
        off: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        let ranges = self.slot_ranges(slot, off, len)?;
        append_ranges(self.mem, &ranges, out)
    }

    fn key_valid(&mut self, slot: usize) -> bool {
        self.verbs.keys.still_valid(self.qpn, slot)
    }

    fn release_key(&mut self, slot: usize) {
        self.verbs.keys.release(self.qpn, slot);
    }

    fn completion_waits(&mut self, wqe: &SendWqe) -> bool {
        wqe.opcode == WR_DRDMA_READ
            && direct_arr(&wqe.sge[0])
                .is_some_and(|arr| self.owns(arr) && self.drdma.completion_waits(arr, self.qpn))
    }

    fn retired(&mut self, wqe: &SendWqe, status: u8) {
        let dir = match wqe.opcode {
            WR_DRDMA_WRITE => Direction::Write,
            WR_DRDMA_READ => Direction::Read,
            _ => return,
        };
        // Another page's range is not this work request's to free.
        if let Some(arr) = direct_arr(&wqe.sge[0]).filter(|&arr| self.owns(arr)) {
            self.drdma.retired(arr, dir, status == WC_SUCCESS);
        }
    }
}
