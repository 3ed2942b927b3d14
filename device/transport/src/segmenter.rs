//! The shared send engine (seed 004): one segmentation and gather path for
//! everything that carries data out of this QP. The requester feeds it send
//! WQEs (data gathered from local SGEs), the responder feeds it quasi-WQEs
//! (RDMA READ response data gathered through the requester's R_Key); both
//! get the same MTU segmentation, the same FIRST/MIDDLE/LAST/ONLY choice and
//! the same packet builder.

use ibtca_protocol::headers::ExtHeaders;
use ibtca_protocol::opcode::Position;
use ibtca_protocol::{FillError, Opcode, Packet};

use super::config::{RcConfig, RcCounters};
use super::psn;
use super::{AccessError, QpEnv};
use ibtca_abi::verbs::Sge;

/// Where a message's bytes come from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    /// Local SGEs of a send WQE (L_Keys, LOCAL read).
    Local(&'a [Sge]),
    /// The payload a send WQE carries itself (IBTCA_WQE_F_INLINE).
    Inline(&'a [u8]),
    /// Responder memory through the requester's R_Key (REMOTE READ).
    Remote {
        /// R_Key from the READ request.
        rkey: u32,
        /// First byte of the message.
        va: u64,
    },
    /// Responder memory through a key slot the READ holds: the range its
    /// R_Key was checked for when it started (seed 001).
    Slot(usize),
}

impl Source<'_> {
    /// Copies `out.len()` bytes from `offset` bytes into the message into
    /// `out`.
    pub(crate) fn fill<E: QpEnv + ?Sized>(
        &self,
        env: &mut E,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), AccessError> {
        if out.is_empty() {
            return Ok(());
        }
        match *self {
            Source::Local(sges) => env.gather(sges, offset, out),
            Source::Inline(data) => {
                out.copy_from_slice(inline_part(data, offset, out.len())?);
                Ok(())
            }
            Source::Remote { rkey, va } => {
                let va = va.checked_add(offset).ok_or(AccessError::OutOfBounds)?;
                env.remote_read(rkey, va, out)
            }
            Source::Slot(slot) => env.slot_read(slot, offset, out),
        }
    }

    /// Appends `len` bytes from `offset` bytes into the message to `out`
    /// (nothing on an error).
    pub(crate) fn append<E: QpEnv + ?Sized>(
        &self,
        env: &mut E,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), AccessError> {
        if len == 0 {
            return Ok(());
        }
        match *self {
            Source::Local(sges) => env.gather_append(sges, offset, len, out),
            Source::Inline(data) => {
                out.extend_from_slice(inline_part(data, offset, len)?);
                Ok(())
            }
            Source::Remote { rkey, va } => {
                let va = va.checked_add(offset).ok_or(AccessError::OutOfBounds)?;
                env.remote_read_append(rkey, va, len, out)
            }
            Source::Slot(slot) => env.slot_read_append(slot, offset, len, out),
        }
    }
}

/// Bytes `[offset, offset + len)` of an inline payload.
fn inline_part(data: &[u8], offset: u64, len: usize) -> Result<&[u8], AccessError> {
    usize::try_from(offset)
        .ok()
        .and_then(|at| data.get(at..at.checked_add(len)?))
        .ok_or(AccessError::OutOfBounds)
}

/// Packets a message of `len` bytes takes at `mtu` (a zero-length message
/// still takes one).
pub fn packet_count(len: u64, mtu: u32) -> u32 {
    let mtu = u64::from(mtu.max(1));
    u32::try_from(len.div_ceil(mtu).max(1)).unwrap_or(u32::MAX)
}

/// One packet's share of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Byte offset of the payload in the message.
    pub offset: u64,
    /// Payload bytes.
    pub len: usize,
    /// Place in the message.
    pub position: Position,
}

/// Packet `index` of a `len`-byte message at `mtu` (indexes past the end
/// give an empty LAST segment).
pub fn segment(len: u64, mtu: u32, index: u32) -> Segment {
    let count = packet_count(len, mtu);
    let offset = u64::from(index).saturating_mul(u64::from(mtu)).min(len);
    let position = match (index == 0, index.saturating_add(1) >= count) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    };
    let bytes = (len - offset).min(u64::from(mtu));
    Segment {
        offset,
        len: usize::try_from(bytes).unwrap_or(0),
        position,
    }
}

/// Message kinds that carry data in segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataKind {
    Send,
    Write,
    ReadResponse,
}

/// The opcode for a data packet at `position`, with immediate data on the
/// last packet when `imm`.
pub(crate) fn data_opcode(kind: DataKind, position: Position, imm: bool) -> Opcode {
    use Opcode::*;
    use Position::*;
    match (kind, position, imm) {
        (DataKind::Send, First, _) => RcSendFirst,
        (DataKind::Send, Middle, _) => RcSendMiddle,
        (DataKind::Send, Last, false) => RcSendLast,
        (DataKind::Send, Last, true) => RcSendLastImm,
        (DataKind::Send, Only, false) => RcSendOnly,
        (DataKind::Send, Only, true) => RcSendOnlyImm,
        (DataKind::Write, First, _) => RcRdmaWriteFirst,
        (DataKind::Write, Middle, _) => RcRdmaWriteMiddle,
        (DataKind::Write, Last, false) => RcRdmaWriteLast,
        (DataKind::Write, Last, true) => RcRdmaWriteLastImm,
        (DataKind::Write, Only, false) => RcRdmaWriteOnly,
        (DataKind::Write, Only, true) => RcRdmaWriteOnlyImm,
        (DataKind::ReadResponse, First, _) => RcRdmaReadResponseFirst,
        (DataKind::ReadResponse, Middle, _) => RcRdmaReadResponseMiddle,
        (DataKind::ReadResponse, Last, _) => RcRdmaReadResponseLast,
        (DataKind::ReadResponse, Only, _) => RcRdmaReadResponseOnly,
    }
}

/// A packet to the peer QP with this QP's LRH and BTH fields.
pub(crate) fn packet(cfg: &RcConfig, opcode: Opcode, psn: u32, ack_req: bool) -> Packet {
    let mut p = Packet::new(opcode);
    p.lrh.slid = cfg.slid;
    p.lrh.dlid = cfg.dlid;
    p.lrh.sl = cfg.sl & 0xf;
    p.bth.pkey = cfg.pkey;
    p.bth.dest_qp = cfg.dest_qpn & psn::MASK;
    p.bth.psn = psn & psn::MASK;
    p.bth.ack_req = ack_req;
    p
}

/// A data packet's headers from `cfg`, `ext` as given, and no payload: the
/// segment's payload is gathered by [`emit_data`].
pub(crate) fn data_packet(
    cfg: &RcConfig,
    opcode: Opcode,
    psn: u32,
    ack_req: bool,
    ext: ExtHeaders,
) -> Packet {
    let mut p = packet(cfg, opcode, psn, ack_req);
    p.ext = ext;
    p
}

/// Encodes `header` with the payload of `seg` gathered from `src` straight
/// into the packet's bytes and hands it to the link: built in the link's
/// outgoing stream itself when it can take it there now
/// ([`QpEnv::send_in_place`]), else in a packet buffer (no payload buffer
/// of its own either way). `Err` (nothing sent) when the source cannot be
/// read; a packet that cannot be encoded is counted and dropped as in
/// [`emit`].
pub(crate) fn emit_data<E: QpEnv + ?Sized>(
    env: &mut E,
    counters: &mut RcCounters,
    header: &Packet,
    src: Source<'_>,
    seg: Segment,
) -> Result<(), AccessError> {
    let len = header.wire_len_with(seg.len);
    let mut outcome = Ok(());
    let in_place = env.send_in_place(len, header.lrh.sl, header.lrh.dlid, &mut |env, out| {
        outcome = header.build_in_place(out, seg.len, |payload| src.fill(env, seg.offset, payload));
        outcome.is_ok()
    });
    if in_place.is_none() {
        let mut bytes = env.packet_buffer();
        outcome = header.build_appending(&mut bytes, seg.len, |out| {
            src.append(env, seg.offset, seg.len, out)
        });
        if outcome.is_ok() {
            env.send_packet(bytes);
        }
    }
    match outcome {
        Ok(()) => {
            counters.packets_sent += 1;
            Ok(())
        }
        Err(FillError::Fill(e)) => Err(e),
        Err(FillError::Build(e)) => {
            counters.build_errors += 1;
            tracing::warn!("rc: cannot encode {:?}: {e}", header.bth.opcode);
            Ok(())
        }
    }
}

/// Encodes `p` and hands it to the link. A packet that cannot be encoded
/// (never for the packets this transport makes) is counted and dropped.
pub(crate) fn emit<E: QpEnv + ?Sized>(env: &mut E, counters: &mut RcCounters, p: &Packet) {
    let mut bytes = env.packet_buffer();
    match p.build_into(&mut bytes, 0, |_| Ok::<(), std::convert::Infallible>(())) {
        Ok(()) => {
            counters.packets_sent += 1;
            env.send_packet(bytes);
        }
        Err(FillError::Fill(never)) => match never {},
        Err(FillError::Build(e)) => {
            counters.build_errors += 1;
            tracing::warn!("rc: cannot encode {:?}: {e}", p.bth.opcode);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segmentation() {
        assert_eq!(packet_count(0, 256), 1);
        assert_eq!(packet_count(1, 256), 1);
        assert_eq!(packet_count(256, 256), 1);
        assert_eq!(packet_count(257, 256), 2);
        assert_eq!(packet_count(4096, 256), 16);
        assert_eq!(packet_count(1 << 20, 4096), 256);
        let only = segment(0, 256, 0);
        assert_eq!(
            (only.offset, only.len, only.position),
            (0, 0, Position::Only)
        );
        let s = |i| segment(600, 256, i);
        assert_eq!(
            (s(0).offset, s(0).len, s(0).position),
            (0, 256, Position::First)
        );
        assert_eq!(
            (s(1).offset, s(1).len, s(1).position),
            (256, 256, Position::Middle)
        );
        assert_eq!(
            (s(2).offset, s(2).len, s(2).position),
            (512, 88, Position::Last)
        );
        let past = segment(600, 256, 9);
        assert_eq!((past.len, past.position), (0, Position::Last));
    }

    #[test]
    fn opcodes_follow_the_table() {
        for kind in [DataKind::Send, DataKind::Write, DataKind::ReadResponse] {
            for pos in [
                Position::First,
                Position::Middle,
                Position::Last,
                Position::Only,
            ] {
                for imm in [false, true] {
                    let info = data_opcode(kind, pos, imm).info();
                    assert_eq!(info.position, pos);
                    let carries_imm = info.has(ibtca_protocol::ExtHeader::ImmDt);
                    assert_eq!(
                        carries_imm,
                        imm && pos.ends() && kind != DataKind::ReadResponse
                    );
                }
            }
        }
    }
}
