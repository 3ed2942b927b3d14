//! BTH opcodes and what each one carries, as a table (after Linux
//! `rxe_opcode.c` and IBA vol 1 §9.2, Table 38).
//!
//! Behaviour lives in [`OpcodeInfo`] entries, one per opcode, not in `match`
//! arms scattered over the transport: which extended headers follow the BTH
//! (in wire order), whether payload follows, where the packet sits in its
//! message, and whether it is a request or a response.

/// An extended transport header that may follow the BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtHeader {
    /// Datagram ETH (UD): Q_Key and source QP.
    Deth,
    /// RDMA ETH: virtual address, R_Key, DMA length.
    Reth,
    /// Atomic ETH: virtual address, R_Key, swap/add and compare data.
    AtomicEth,
    /// ACK ETH: syndrome and MSN.
    Aeth,
    /// Atomic ACK ETH: original remote data.
    AtomicAckEth,
    /// Immediate data.
    ImmDt,
    /// Invalidate ETH: the R_Key to invalidate.
    Ieth,
}

impl ExtHeader {
    /// Encoded length in bytes.
    pub const fn wire_len(self) -> usize {
        match self {
            ExtHeader::Deth => crate::headers::Deth::LEN,
            ExtHeader::Reth => crate::headers::Reth::LEN,
            ExtHeader::AtomicEth => crate::headers::AtomicEth::LEN,
            ExtHeader::Aeth => crate::headers::Aeth::LEN,
            ExtHeader::AtomicAckEth => crate::headers::AtomicAckEth::LEN,
            ExtHeader::ImmDt => crate::headers::ImmDt::LEN,
            ExtHeader::Ieth => crate::headers::Ieth::LEN,
        }
    }
}

/// Transport service an opcode belongs to (BTH opcode bits 7:5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// Reliable connection (000).
    Rc,
    /// Unreliable datagram (011).
    Ud,
}

/// What kind of operation a packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// SEND (request side).
    Send,
    /// RDMA WRITE.
    Write,
    /// RDMA READ request and its responses.
    Read,
    /// Atomic request and its ATOMIC ACKNOWLEDGE.
    Atomic,
    /// Plain ACKNOWLEDGE (ACK or NAK).
    Ack,
}

/// Request (requester to responder) or response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sent by the requester.
    Request,
    /// Sent by the responder.
    Response,
}

/// Where a packet sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First of several packets.
    First,
    /// Neither first nor last.
    Middle,
    /// Last of several packets.
    Last,
    /// The whole message in one packet.
    Only,
}

impl Position {
    /// True for `First` and `Only`: the packet starts a message.
    pub const fn starts(self) -> bool {
        matches!(self, Position::First | Position::Only)
    }

    /// True for `Last` and `Only`: the packet ends a message.
    pub const fn ends(self) -> bool {
        matches!(self, Position::Last | Position::Only)
    }
}

/// A BTH opcode ibtca knows: every RC opcode of IBA 1.3 except the reserved
/// 0x15 (RESYNC is RD-only), plus UD SEND ONLY (with immediate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RC SEND FIRST.
    RcSendFirst = 0x00,
    /// RC SEND MIDDLE.
    RcSendMiddle = 0x01,
    /// RC SEND LAST.
    RcSendLast = 0x02,
    /// RC SEND LAST with Immediate.
    RcSendLastImm = 0x03,
    /// RC SEND ONLY.
    RcSendOnly = 0x04,
    /// RC SEND ONLY with Immediate.
    RcSendOnlyImm = 0x05,
    /// RC RDMA WRITE FIRST.
    RcRdmaWriteFirst = 0x06,
    /// RC RDMA WRITE MIDDLE.
    RcRdmaWriteMiddle = 0x07,
    /// RC RDMA WRITE LAST.
    RcRdmaWriteLast = 0x08,
    /// RC RDMA WRITE LAST with Immediate.
    RcRdmaWriteLastImm = 0x09,
    /// RC RDMA WRITE ONLY.
    RcRdmaWriteOnly = 0x0a,
    /// RC RDMA WRITE ONLY with Immediate.
    RcRdmaWriteOnlyImm = 0x0b,
    /// RC RDMA READ Request.
    RcRdmaReadRequest = 0x0c,
    /// RC RDMA READ response First.
    RcRdmaReadResponseFirst = 0x0d,
    /// RC RDMA READ response Middle.
    RcRdmaReadResponseMiddle = 0x0e,
    /// RC RDMA READ response Last.
    RcRdmaReadResponseLast = 0x0f,
    /// RC RDMA READ response Only.
    RcRdmaReadResponseOnly = 0x10,
    /// RC Acknowledge.
    RcAcknowledge = 0x11,
    /// RC ATOMIC Acknowledge.
    RcAtomicAcknowledge = 0x12,
    /// RC CmpSwap.
    RcCompareSwap = 0x13,
    /// RC FetchAdd.
    RcFetchAdd = 0x14,
    /// RC SEND LAST with Invalidate.
    RcSendLastInv = 0x16,
    /// RC SEND ONLY with Invalidate.
    RcSendOnlyInv = 0x17,
    /// UD SEND ONLY.
    UdSendOnly = 0x64,
    /// UD SEND ONLY with Immediate.
    UdSendOnlyImm = 0x65,
}

/// What one opcode carries and means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// The opcode this entry describes.
    pub opcode: Opcode,
    /// The IBA name.
    pub name: &'static str,
    /// Transport service.
    pub service: Service,
    /// Operation class.
    pub class: OpClass,
    /// Request or response.
    pub direction: Direction,
    /// Place in the message.
    pub position: Position,
    /// Extended headers after the BTH, in wire order.
    pub headers: &'static [ExtHeader],
    /// Whether payload may follow the headers.
    pub payload: bool,
}

impl OpcodeInfo {
    /// Whether this opcode carries `header`.
    pub fn has(&self, header: ExtHeader) -> bool {
        self.headers.contains(&header)
    }

    /// Total length of the extended headers, in bytes.
    pub fn ext_len(&self) -> usize {
        self.headers.iter().map(|h| h.wire_len()).sum()
    }
}

use Direction::{Request as Req, Response as Resp};
use ExtHeader::*;
use OpClass::*;
use Position::*;

const fn entry(
    opcode: Opcode,
    name: &'static str,
    class: OpClass,
    direction: Direction,
    position: Position,
    headers: &'static [ExtHeader],
    payload: bool,
) -> OpcodeInfo {
    let service = if (opcode as u8) >> 5 == 0b011 {
        Service::Ud
    } else {
        Service::Rc
    };
    OpcodeInfo {
        opcode,
        name,
        service,
        class,
        direction,
        position,
        headers,
        payload,
    }
}

/// The table: one entry per known opcode, ordered by opcode value.
pub static OPCODES: [OpcodeInfo; 25] = TABLE;

/// Position in [`OPCODES`] of each opcode value, [`NONE`] for unknown
/// values: every packet looks its opcode up, so not by a linear search.
static INDEX: [u8; 256] = index(&TABLE);

/// An unknown opcode value in [`INDEX`].
const NONE: u8 = u8::MAX;

const fn index(table: &[OpcodeInfo; 25]) -> [u8; 256] {
    let mut index = [NONE; 256];
    let mut i = 0;
    while i < table.len() {
        index[table[i].opcode as usize] = i as u8;
        i += 1;
    }
    index
}

#[rustfmt::skip]
const TABLE: [OpcodeInfo; 25] = [
    entry(Opcode::RcSendFirst, "RC SEND FIRST", Send, Req, First, &[], true),
    entry(Opcode::RcSendMiddle, "RC SEND MIDDLE", Send, Req, Middle, &[], true),
    entry(Opcode::RcSendLast, "RC SEND LAST", Send, Req, Last, &[], true),
    entry(Opcode::RcSendLastImm, "RC SEND LAST with Immediate", Send, Req, Last, &[ImmDt], true),
    entry(Opcode::RcSendOnly, "RC SEND ONLY", Send, Req, Only, &[], true),
    entry(Opcode::RcSendOnlyImm, "RC SEND ONLY with Immediate", Send, Req, Only, &[ImmDt], true),
    entry(Opcode::RcRdmaWriteFirst, "RC RDMA WRITE FIRST", Write, Req, First, &[Reth], true),
    entry(Opcode::RcRdmaWriteMiddle, "RC RDMA WRITE MIDDLE", Write, Req, Middle, &[], true),
    entry(Opcode::RcRdmaWriteLast, "RC RDMA WRITE LAST", Write, Req, Last, &[], true),
    entry(Opcode::RcRdmaWriteLastImm, "RC RDMA WRITE LAST with Immediate", Write, Req, Last, &[ImmDt], true),
    entry(Opcode::RcRdmaWriteOnly, "RC RDMA WRITE ONLY", Write, Req, Only, &[Reth], true),
    entry(Opcode::RcRdmaWriteOnlyImm, "RC RDMA WRITE ONLY with Immediate", Write, Req, Only, &[Reth, ImmDt], true),
    entry(Opcode::RcRdmaReadRequest, "RC RDMA READ Request", Read, Req, Only, &[Reth], false),
    entry(Opcode::RcRdmaReadResponseFirst, "RC RDMA READ response First", Read, Resp, First, &[Aeth], true),
    entry(Opcode::RcRdmaReadResponseMiddle, "RC RDMA READ response Middle", Read, Resp, Middle, &[], true),
    entry(Opcode::RcRdmaReadResponseLast, "RC RDMA READ response Last", Read, Resp, Last, &[Aeth], true),
    entry(Opcode::RcRdmaReadResponseOnly, "RC RDMA READ response Only", Read, Resp, Only, &[Aeth], true),
    entry(Opcode::RcAcknowledge, "RC Acknowledge", Ack, Resp, Only, &[Aeth], false),
    entry(Opcode::RcAtomicAcknowledge, "RC ATOMIC Acknowledge", Atomic, Resp, Only, &[Aeth, AtomicAckEth], false),
    entry(Opcode::RcCompareSwap, "RC CmpSwap", Atomic, Req, Only, &[AtomicEth], false),
    entry(Opcode::RcFetchAdd, "RC FetchAdd", Atomic, Req, Only, &[AtomicEth], false),
    entry(Opcode::RcSendLastInv, "RC SEND LAST with Invalidate", Send, Req, Last, &[Ieth], true),
    entry(Opcode::RcSendOnlyInv, "RC SEND ONLY with Invalidate", Send, Req, Only, &[Ieth], true),
    entry(Opcode::UdSendOnly, "UD SEND ONLY", Send, Req, Only, &[Deth], true),
    entry(Opcode::UdSendOnlyImm, "UD SEND ONLY with Immediate", Send, Req, Only, &[Deth, ImmDt], true),
];

impl Opcode {
    /// The opcode with BTH value `code`, if ibtca knows it (`TryFrom<u8>`,
    /// which fails with [`ParseError::UnknownOpcode`], is the BTH parser's:
    /// `headers/bth.rs`).
    ///
    /// [`ParseError::UnknownOpcode`]: crate::ParseError::UnknownOpcode
    pub fn from_u8(code: u8) -> Option<Opcode> {
        let i = INDEX.get(usize::from(code))?;
        OPCODES.get(usize::from(*i)).map(|info| info.opcode)
    }

    /// The BTH value.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// This opcode's table entry.
    pub fn info(self) -> &'static OpcodeInfo {
        // Every variant has exactly one entry (checked by a unit test); the
        // fallback is never taken but keeps this free of panics.
        INDEX
            .get(self as usize)
            .and_then(|i| OPCODES.get(usize::from(*i)))
            .unwrap_or(&OPCODES[0])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_unique_and_complete() {
        for pair in OPCODES.windows(2) {
            assert!((pair[0].opcode as u8) < (pair[1].opcode as u8));
        }
        for info in &OPCODES {
            assert_eq!(info.opcode.info(), info);
            assert_eq!(Opcode::from_u8(info.opcode.code()), Some(info.opcode));
        }
        let known = (0..=255u8).filter(|c| Opcode::from_u8(*c).is_some());
        assert_eq!(known.count(), OPCODES.len());
    }

    #[test]
    fn values_match_ib_pack_h() {
        assert_eq!(Opcode::RcRdmaReadRequest.code(), 0x0c);
        assert_eq!(Opcode::RcAcknowledge.code(), 0x11);
        assert_eq!(Opcode::RcFetchAdd.code(), 0x14);
        assert_eq!(Opcode::RcSendOnlyInv.code(), 0x17);
        assert_eq!(Opcode::UdSendOnlyImm.code(), 0x65);
        assert_eq!(Opcode::from_u8(0x15), None);
        assert_eq!(Opcode::from_u8(0x20), None); // UC is not supported
    }

    #[test]
    fn table_facts() {
        let i = Opcode::RcRdmaWriteOnlyImm.info();
        assert_eq!(i.headers, &[Reth, ImmDt]);
        assert_eq!(i.ext_len(), 20);
        assert!(i.position.starts() && i.position.ends());
        let a = Opcode::RcAtomicAcknowledge.info();
        assert_eq!(a.headers, &[Aeth, AtomicAckEth]);
        assert_eq!((a.class, a.direction), (Atomic, Resp));
        assert!(!a.payload);
        assert_eq!(Opcode::UdSendOnly.info().service, Service::Ud);
        assert_eq!(Opcode::RcSendMiddle.info().service, Service::Rc);
        assert!(Opcode::UdSendOnlyImm.info().has(Deth));
        assert!(!Opcode::RcRdmaWriteMiddle.info().position.starts());
        for info in &OPCODES {
            // Read responses and ACKs carry an AETH except the middle ones.
            let aeth = info.direction == Resp && info.position != Middle;
            assert_eq!(info.has(Aeth), aeth, "{}", info.name);
        }
    }
}
