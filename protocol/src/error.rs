//! Errors from parsing IB headers and packets, and from building packets.

use crate::opcode::{ExtHeader, Opcode};

/// Why bytes are not a valid IB header or packet. Every malformed input maps
/// to one of these; nothing in this crate panics on input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The input ends before a header (or the packet's fixed parts) does.
    #[error("truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes needed to go on.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// LRH LVer is not 0, the only link version defined.
    #[error("unsupported link version {0} (LRH LVer must be 0)")]
    LinkVersion(u8),
    /// LRH LNH names a raw or IP (non-IBA transport) packet, which ibtca does
    /// not carry.
    #[error("unsupported link next header {0} (only 2 IBA local and 3 IBA global)")]
    LinkNextHeader(u8),
    /// LRH PktLen does not match the number of bytes in the packet.
    #[error("LRH PktLen of {words} words does not describe a {len}-byte packet")]
    PacketLength {
        /// PktLen from the LRH (4-byte words, LRH through ICRC).
        words: u16,
        /// Length of the buffer, VCRC included.
        len: usize,
    },
    /// GRH IPVer is not 6.
    #[error("GRH IP version {0}, expected 6")]
    GrhVersion(u8),
    /// GRH NxtHdr is not 0x1B (IBA transport).
    #[error("GRH next header {0:#04x}, expected 0x1b (IBA transport)")]
    GrhNextHeader(u8),
    /// GRH PayLen does not match the bytes between the GRH and the VCRC.
    #[error("GRH PayLen {found}, expected {expected}")]
    GrhPayloadLength {
        /// PayLen the packet's size implies.
        expected: u16,
        /// PayLen in the GRH.
        found: u16,
    },
    /// BTH TVer is not 0, the only transport version defined.
    #[error("unsupported transport version {0} (BTH TVer must be 0)")]
    TransportVersion(u8),
    /// The BTH opcode is not one ibtca knows (see [`Opcode`]).
    #[error("unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// BTH PadCnt is larger than the bytes between the headers and the ICRC.
    #[error("PadCnt {pad} exceeds the {available} bytes after the headers")]
    Pad {
        /// PadCnt from the BTH.
        pad: u8,
        /// Bytes between the last header and the ICRC.
        available: usize,
    },
    /// An opcode that carries no payload has payload (or pad) bytes.
    #[error("{opcode:?} carries no payload, found {len} bytes")]
    UnexpectedPayload {
        /// The packet's opcode.
        opcode: Opcode,
        /// Bytes between the last header and the ICRC.
        len: usize,
    },
    /// The invariant CRC does not match the packet.
    #[error("ICRC mismatch: packet has {found:#010x}, computed {computed:#010x}")]
    Icrc {
        /// ICRC carried by the packet.
        found: u32,
        /// ICRC computed over the packet.
        computed: u32,
    },
    /// The variant CRC does not match the packet.
    #[error("VCRC mismatch: packet has {found:#06x}, computed {computed:#06x}")]
    Vcrc {
        /// VCRC carried by the packet.
        found: u16,
        /// VCRC computed over the packet.
        computed: u16,
    },
}

/// Why a [`Packet`](crate::packet::Packet) cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// The opcode requires an extended header the packet does not have.
    #[error("{opcode:?} requires {header:?}")]
    MissingHeader {
        /// The packet's opcode.
        opcode: Opcode,
        /// The header it lacks.
        header: ExtHeader,
    },
    /// The packet has an extended header its opcode does not carry.
    #[error("{opcode:?} does not carry {header:?}")]
    UnexpectedHeader {
        /// The packet's opcode.
        opcode: Opcode,
        /// The header it should not have.
        header: ExtHeader,
    },
    /// The packet has payload but its opcode carries none.
    #[error("{opcode:?} carries no payload, got {len} bytes")]
    UnexpectedPayload {
        /// The packet's opcode.
        opcode: Opcode,
        /// Payload length.
        len: usize,
    },
    /// The packet does not fit the 11-bit LRH PktLen (or a 16-bit GRH PayLen).
    #[error("packet of {bytes} bytes (LRH..ICRC) exceeds the maximum {max}")]
    TooLong {
        /// Bytes from the LRH through the ICRC.
        bytes: usize,
        /// The largest such length the LRH can describe.
        max: usize,
    },
    /// A `Packet::build_appending` fill appended the wrong number of
    /// payload bytes.
    #[error("payload fill appended {got} bytes, not {expected}")]
    FillLength {
        /// Bytes the packet was to carry.
        expected: usize,
        /// Bytes the fill appended.
        got: usize,
    },
    /// The buffer given to `Packet::build_in_place` is not the packet's
    /// length.
    #[error("packet of {expected} bytes built into a buffer of {got}")]
    BufferLength {
        /// Bytes the packet takes ([`Packet::wire_len_with`]).
        ///
        /// [`Packet::wire_len_with`]: crate::packet::Packet::wire_len_with
        expected: usize,
        /// Bytes of the buffer.
        got: usize,
    },
}
