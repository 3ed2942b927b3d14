//! The gateway's [`QpEnv`]: the device's RC transport ([`RcQp`]) run over
//! the gateway's own memory instead of a guest's. A message to send is a
//! buffer named by its work request (`wr_id`, and the SGE's address);
//! receive work requests are made on demand, each with a buffer filled as
//! the message's packets arrive. The gateway exposes no memory to the
//! peer: RDMA WRITE, READ and atomics are refused with a remote access
//! error, as a device refuses a key it does not know.
//!
//! The receive queue is finite, as a device's: [`RQ_DEPTH`] work requests
//! posted, one more each time a message completes well. (A QP that goes
//! to error flushes every posted receive: an endless queue would never
//! end that flush.)
//!
//! [`RcQp`]: ibtca_transport::RcQp

use std::collections::HashMap;

use ibtca_abi::recv::RecvWr;
use ibtca_abi::verbs::{Cqe, QuasiWqe, SendWqe, Sge, WC_SUCCESS, WQE_F_SIGNALED, WR_SEND};
use ibtca_transport::{AccessError, AtomicOp, CqKind, QpEnv};

/// L_Key of the buffers of messages being sent.
const SEND_KEY: u32 = 1;
/// L_Key of the buffers of messages being received.
const RECV_KEY: u32 = 2;

/// Receive work requests posted on a fresh QP.
pub const RQ_DEPTH: usize = 64;

/// One QP's memory, receive queue and completions.
#[derive(Debug, Default)]
pub struct HostEnv {
    /// Messages being sent, by work request, until their WQE retires.
    sends: HashMap<u64, Vec<u8>>,
    /// Messages being received, by work request.
    recvs: HashMap<u64, Vec<u8>>,
    next_wr: u64,
    /// Receive work requests posted and not taken yet.
    posted_recvs: usize,
    /// Whether a message may start arriving (else the responder answers
    /// RNR: the ATM side is backed up).
    pub recv_open: bool,
    /// Largest message taken.
    pub max_recv: u32,
    /// Messages received whole, oldest first.
    pub received: Vec<Vec<u8>>,
    /// Sends acknowledged by the peer.
    pub sent: u64,
    /// Completion statuses of failed sends and receives.
    pub failed: Vec<u8>,
    /// Packets to put on the link.
    pub outbox: Vec<Vec<u8>>,
}

/// The address of a buffer: its work request in the upper half.
fn buffer_addr(wr: u64) -> u64 {
    wr << 32
}

impl HostEnv {
    /// An environment taking messages of up to `max_recv` bytes.
    pub fn new(max_recv: u32) -> Self {
        Self {
            recv_open: true,
            posted_recvs: RQ_DEPTH,
            max_recv,
            ..Self::default()
        }
    }

    /// The work request that sends `message` (held here until it
    /// retires).
    pub fn send_wqe(&mut self, message: Vec<u8>) -> SendWqe {
        let wr = self.take_wr();
        let mut wqe = SendWqe {
            wr_id: wr.into(),
            opcode: WR_SEND,
            flags: WQE_F_SIGNALED,
            num_sge: 1,
            ..SendWqe::default()
        };
        wqe.sge[0] = Sge {
            addr: buffer_addr(wr).into(),
            length: (message.len() as u32).into(),
            lkey: SEND_KEY.into(),
        };
        self.sends.insert(wr, message);
        wqe
    }

    /// Buffers held for sends and partial receives.
    pub fn held(&self) -> usize {
        self.sends.len() + self.recvs.len()
    }

    fn take_wr(&mut self) -> u64 {
        // 32 bits of work request: the address's upper half.
        self.next_wr = (self.next_wr + 1) & 0xffff_ffff;
        self.next_wr
    }

    /// Walks `len` bytes from `offset` into the SGE list: calls `each`
    /// with the work request, offset in its buffer and length of each piece.
    fn walk(
        sges: &[Sge],
        key: u32,
        mut offset: u64,
        len: usize,
        mut each: impl FnMut(u64, usize, usize) -> Result<(), AccessError>,
    ) -> Result<(), AccessError> {
        let mut left = len as u64;
        for sge in sges {
            if left == 0 {
                break;
            }
            let (addr, length) = (sge.addr.to_native(), u64::from(sge.length.to_native()));
            if sge.lkey.to_native() != key {
                return Err(AccessError::BadKey);
            }
            if offset >= length {
                offset -= length;
                continue;
            }
            let n = left.min(length - offset);
            let at = (addr & 0xffff_ffff) + offset;
            each(addr >> 32, at as usize, n as usize)?;
            left -= n;
            offset = 0;
        }
        if left == 0 {
            Ok(())
        } else {
            Err(AccessError::OutOfBounds)
        }
    }
}

impl QpEnv for HostEnv {
    fn gather(&mut self, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), AccessError> {
        let mut filled = 0;
        let sends = &self.sends;
        Self::walk(sges, SEND_KEY, offset, out.len(), |wr, at, n| {
            let src = sends
                .get(&wr)
                .and_then(|b| b.get(at..at + n))
                .ok_or(AccessError::OutOfBounds)?;
            out[filled..filled + n].copy_from_slice(src);
            filled += n;
            Ok(())
        })
    }

    fn scatter(&mut self, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), AccessError> {
        // Check it all fits before writing anything.
        Self::walk(sges, RECV_KEY, offset, data.len(), |_, _, _| Ok(()))?;
        let mut taken = 0;
        let recvs = &mut self.recvs;
        Self::walk(sges, RECV_KEY, offset, data.len(), |wr, at, n| {
            let buf = recvs.entry(wr).or_default();
            if buf.len() < at + n {
                buf.resize(at + n, 0);
            }
            buf[at..at + n].copy_from_slice(&data[taken..taken + n]);
            taken += n;
            Ok(())
        })
    }

    fn check_remote(&mut self, _: u32, _: u64, _: u64, _: bool) -> Result<(), AccessError> {
        Err(AccessError::BadKey)
    }

    fn remote_write(&mut self, _: u32, _: u64, _: &[u8]) -> Result<(), AccessError> {
        Err(AccessError::BadKey)
    }

    fn remote_read(&mut self, _: u32, _: u64, _: &mut [u8]) -> Result<(), AccessError> {
        Err(AccessError::BadKey)
    }

    fn remote_atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
        Err(AccessError::BadKey)
    }

    fn bind_mw(&mut self, _: &SendWqe) -> Result<u32, AccessError> {
        Err(AccessError::Invalid)
    }

    fn local_invalidate(&mut self, _: u32) -> Result<(), AccessError> {
        Err(AccessError::Invalid)
    }

    fn fast_register(&mut self, _: &SendWqe) -> Result<(), AccessError> {
        Err(AccessError::Invalid)
    }

    fn next_recv(&mut self) -> Option<RecvWr> {
        if !self.recv_open || self.posted_recvs == 0 {
            return None;
        }
        self.posted_recvs -= 1;
        let wr = self.take_wr();
        let buffer = Sge {
            addr: buffer_addr(wr).into(),
            length: self.max_recv.into(),
            lkey: RECV_KEY.into(),
        };
        Some(RecvWr::new(wr, &[buffer]))
    }

    fn complete(&mut self, cq: CqKind, cqe: Cqe) {
        let wr = cqe.wr_id.to_native();
        if cqe.status != WC_SUCCESS {
            self.failed.push(cqe.status);
        }
        match cq {
            CqKind::Recv => {
                let buf = self.recvs.remove(&wr);
                if cqe.status == WC_SUCCESS {
                    // Posted again in its place.
                    self.posted_recvs += 1;
                    let mut buf = buf.unwrap_or_default();
                    buf.resize(cqe.byte_len.to_native() as usize, 0);
                    self.received.push(buf);
                }
            }
            CqKind::Send if cqe.status == WC_SUCCESS => self.sent += 1,
            CqKind::Send => {}
        }
    }

    fn push_quasi(&mut self, _: QuasiWqe) -> bool {
        // Unreachable: every READ fails its key check first.
        false
    }

    fn peek_quasi(&mut self) -> Option<QuasiWqe> {
        None
    }

    fn pop_quasi(&mut self) -> Option<QuasiWqe> {
        None
    }

    fn send_packet(&mut self, packet: Vec<u8>) {
        self.outbox.push(packet);
    }

    fn retired(&mut self, wqe: &SendWqe, _status: u8) {
        self.sends.remove(&wqe.wr_id.to_native());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(wr: u64, at: u64, length: u32, key: u32) -> Sge {
        Sge {
            addr: (buffer_addr(wr) + at).into(),
            length: length.into(),
            lkey: key.into(),
        }
    }

    #[test]
    fn sends_gather_from_their_buffer_until_they_retire() {
        let mut env = HostEnv::new(100);
        let wqe = env.send_wqe((0..50).collect());
        let sges = &wqe.sge[..1];
        let mut out = [0u8; 10];
        env.gather(sges, 40, &mut out).unwrap();
        assert_eq!(out, [40, 41, 42, 43, 44, 45, 46, 47, 48, 49]);
        assert_eq!(
            env.gather(sges, 45, &mut out),
            Err(AccessError::OutOfBounds)
        );
        let wr = wqe.wr_id.to_native();
        assert_eq!(
            env.gather(&[sge(wr, 0, 50, RECV_KEY)], 0, &mut out),
            Err(AccessError::BadKey)
        );
        env.retired(&wqe, WC_SUCCESS);
        assert_eq!(env.held(), 0);
        assert_eq!(env.gather(sges, 0, &mut out), Err(AccessError::OutOfBounds));
    }

    #[test]
    fn receives_fill_within_their_wqe_and_complete_with_their_length() {
        let mut env = HostEnv::new(64);
        let r = env.next_recv().unwrap();
        let sges = &r.sge[..1];
        env.scatter(sges, 0, &[1; 40]).unwrap();
        // Past the WQE's 64 bytes: refused, nothing written.
        assert_eq!(
            env.scatter(sges, 40, &[2; 30]),
            Err(AccessError::OutOfBounds)
        );
        env.scatter(sges, 40, &[3; 24]).unwrap();
        let mut cqe = Cqe {
            wr_id: r.wr_id.into(),
            byte_len: 64.into(),
            ..Cqe::default()
        };
        env.complete(CqKind::Recv, cqe);
        let mut want = vec![1; 40];
        want.extend([3; 24]);
        assert_eq!(env.received, [want]);
        // A failed receive frees its buffer and delivers nothing.
        let r = env.next_recv().unwrap();
        env.scatter(&r.sge[..1], 0, &[9; 8]).unwrap();
        cqe.wr_id = r.wr_id.into();
        cqe.status = ibtca_abi::verbs::WC_WR_FLUSH_ERR;
        env.complete(CqKind::Recv, cqe);
        assert_eq!(env.received.len(), 1);
        assert_eq!(env.held(), 0);
        assert_eq!(env.failed, [ibtca_abi::verbs::WC_WR_FLUSH_ERR]);
        // Backed up: no receive WQE, so the responder answers RNR.
        env.recv_open = false;
        assert!(env.next_recv().is_none());
    }

    #[test]
    fn the_receive_queue_is_finite_and_refilled_by_good_receives() {
        let mut env = HostEnv::new(64);
        let taken: Vec<RecvWr> = std::iter::from_fn(|| env.next_recv()).collect();
        assert_eq!(taken.len(), RQ_DEPTH);
        let ok = Cqe {
            wr_id: taken[0].wr_id.into(),
            byte_len: 0.into(),
            ..Cqe::default()
        };
        env.complete(CqKind::Recv, ok);
        assert!(env.next_recv().is_some(), "a good receive posts one again");
        assert!(env.next_recv().is_none());
        // A flushed one does not: a QP in error drains the queue and stops.
        let flushed = Cqe {
            wr_id: taken[1].wr_id.into(),
            status: ibtca_abi::verbs::WC_WR_FLUSH_ERR,
            ..Cqe::default()
        };
        env.complete(CqKind::Recv, flushed);
        assert!(env.next_recv().is_none());
    }

    #[test]
    fn the_peer_reaches_no_memory() {
        let mut env = HostEnv::new(64);
        let _ = env.send_wqe(vec![7; 64]);
        assert_eq!(
            env.check_remote(1, buffer_addr(1), 8, false),
            Err(AccessError::BadKey)
        );
        assert_eq!(env.remote_write(2, 0, &[0; 8]), Err(AccessError::BadKey));
        assert_eq!(
            env.remote_read(1, buffer_addr(1), &mut [0; 8]),
            Err(AccessError::BadKey)
        );
        assert_eq!(
            env.remote_atomic(1, 0, AtomicOp::FetchAdd { add: 1 }),
            Err(AccessError::BadKey)
        );
    }
}
