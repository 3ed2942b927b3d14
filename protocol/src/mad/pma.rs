//! Performance management (IBA vol 1 §16.1): the PM class's MADs (class
//! 0x04, a GMP to QP1 on a data VL) and the attributes a port's
//! performance management agent serves: ClassPortInfo, PortCounters and
//! PortCountersExtended.
//!
//! ```text
//!   0  common MAD header (24)
//!  24  reserved (40)
//!  64  PM data: the attribute (192)
//! ```
//!
//! PortCounters (attribute 0x0012), the first 44 bytes of the data:
//! reserved (1) PortSelect (1) CounterSelect (2) SymbolErrorCounter (2)
//! LinkErrorRecoveryCounter (1) LinkDownedCounter (1) PortRcvErrors (2)
//! PortRcvRemotePhysicalErrors (2) PortRcvSwitchRelayErrors (2)
//! PortXmitDiscards (2) PortXmitConstraintErrors (1)
//! PortRcvConstraintErrors (1) reserved (1) LocalLinkIntegrityErrors (4
//! bits) ExcessiveBufferOverrunErrors (4 bits) reserved (2) VL15Dropped
//! (2) PortXmitData (4) PortRcvData (4) PortXmitPkts (4) PortRcvPkts (4)
//! PortXmitWait (4). Data counts 32-bit words. Every counter stops at its
//! largest value (IBA: counters saturate, they do not wrap).
//!
//! PortCountersExtended (attribute 0x001d): reserved (1) PortSelect (1)
//! CounterSelect (2) reserved (4), then eight 64-bit counters: XmitData,
//! RcvData, XmitPkts, RcvPkts, unicast Xmit/RcvPkts, multicast
//! Xmit/RcvPkts.

use super::header::{
    be16, be32, be64, class, put, put16, put32, put64, MadHeader, MadStatus, MAD_LEN,
};
use super::MadError;
use crate::headers::Deth;
use crate::opcode::Opcode;
use crate::packet::{Packet, PacketView};

/// The general services QP (GMPs: PM, SA, ...).
pub const QP1: u32 = 1;
/// QP1's well-known Q_Key.
pub const QP1_QKEY: u32 = 0x8001_0000;
/// Bytes of a PM MAD's attribute data.
pub const PMA_DATA_LEN: usize = 192;
/// Where the PM data starts in the MAD.
const PMA_DATA_AT: usize = 64;
/// The PM class version.
pub const PMA_CLASS_VERSION: u8 = 1;

/// PM attribute IDs (IBA vol 1 Table 215).
pub mod pma_id {
    /// ClassPortInfo.
    pub const CLASS_PORT_INFO: u16 = 0x0001;
    /// PortCounters.
    pub const PORT_COUNTERS: u16 = 0x0012;
    /// PortCountersExtended.
    pub const PORT_COUNTERS_EXT: u16 = 0x001d;
}

/// ClassPortInfo CapabilityMask bits of a PMA (IBA vol 1 Table 216).
pub mod pma_cap {
    /// PortSelect 0xFF (every port) is supported.
    pub const ALL_PORT_SELECT: u16 = 1 << 8;
    /// PortCountersExtended is supported, with all its counters.
    pub const EXT_WIDTH: u16 = 1 << 9;
}

/// PortSelect meaning every port of a switch.
pub const ALL_PORTS: u8 = 0xff;

/// One PM MAD: its header and its 192 bytes of data.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PmaMad {
    /// The common header (class 0x04).
    pub header: MadHeader,
    /// The attribute.
    pub data: [u8; PMA_DATA_LEN],
}

impl PmaMad {
    /// A request with zero data.
    pub fn new(method: u8, attr_id: u16, attr_mod: u32) -> Self {
        PmaMad {
            header: MadHeader {
                base_version: super::BASE_VERSION,
                mgmt_class: class::PERF,
                class_version: PMA_CLASS_VERSION,
                method,
                status: 0,
                class_specific: 0,
                tid: 0,
                attr_id,
                attr_mod,
            },
            data: [0; PMA_DATA_LEN],
        }
    }

    /// Decodes a MAD of exactly [`MAD_LEN`] bytes whose class is PM.
    pub fn parse(mad: &[u8]) -> Result<Self, MadError> {
        let mad: &[u8; MAD_LEN] = mad.try_into().map_err(|_| MadError::Length(mad.len()))?;
        let header = MadHeader::read(mad);
        if header.mgmt_class != class::PERF {
            return Err(MadError::NotPma(header.mgmt_class));
        }
        let mut data = [0u8; PMA_DATA_LEN];
        put(&mut data, 0, mad.get(PMA_DATA_AT..).unwrap_or_default());
        Ok(PmaMad { header, data })
    }

    /// Encodes the MAD (reserved bytes zero).
    pub fn to_bytes(&self) -> [u8; MAD_LEN] {
        let mut mad = [0u8; MAD_LEN];
        self.header.write(&mut mad);
        put(&mut mad, PMA_DATA_AT, &self.data);
        mad
    }

    /// Turns a request into its response (method GetResp, `status`).
    pub fn make_response(&mut self, status: MadStatus) {
        self.header.method = super::method::GET_RESP;
        self.header.status = status.0;
    }
}

/// The PM MAD a parsed packet carries, if it is one: a UD SEND ONLY to
/// QP1 whose payload is a 256-byte class-0x04 MAD.
pub fn pma_of_packet(view: &PacketView<'_>) -> Result<PmaMad, MadError> {
    if view.opcode() != Opcode::UdSendOnly || view.bth.dest_qp != QP1 {
        return Err(MadError::NotQp1);
    }
    PmaMad::parse(view.payload)
}

/// Where a GMP goes: the LIDs, the SL (and VL: the sender maps it), the
/// P_Key and the destination QP (the request's source QP for a reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GmpAddress {
    /// Source LID.
    pub slid: u16,
    /// Destination LID.
    pub dlid: u16,
    /// Service level (data VL `sl` unless the sender maps it).
    pub sl: u8,
    /// BTH P_Key.
    pub pkey: u16,
    /// Destination QP.
    pub dest_qp: u32,
}

/// The packet carrying `mad` from QP1 (Q_Key 0x80010000) to `to`.
pub fn gmp_packet(mad: &PmaMad, to: &GmpAddress) -> Packet {
    let deth = Deth {
        qkey: QP1_QKEY,
        src_qp: QP1,
    };
    let payload = mad.to_bytes().to_vec();
    let mut p = Packet::datagram(to.slid, to.dlid, to.dest_qp, deth, payload);
    (p.lrh.sl, p.lrh.vl) = (to.sl, to.sl);
    p.bth.pkey = to.pkey;
    p
}

/// Where the answer to the GMP in `view` goes (back to its source QP, on
/// its SL and P_Key), from `own_lid`.
pub fn reply_address(view: &PacketView<'_>, own_lid: u16) -> GmpAddress {
    GmpAddress {
        slid: own_lid,
        dlid: view.lrh.slid,
        sl: view.lrh.sl,
        pkey: view.bth.pkey,
        dest_qp: view.ext.deth.map_or(QP1, |d| d.src_qp),
    }
}

/// The PM data block.
pub type PmaBlock = [u8; PMA_DATA_LEN];

/// ClassPortInfo as a PMA reports it (no redirection, no traps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ClassPortInfo {
    /// Base version (1).
    pub base_version: u8,
    /// Class version (1).
    pub class_version: u8,
    /// `pma_cap` bits.
    pub capability_mask: u16,
    /// CapabilityMask2 (27 bits).
    pub capability_mask2: u32,
    /// RespTimeValue (5 bits): 4.096 µs × 2^value.
    pub resp_time_value: u8,
}

impl ClassPortInfo {
    /// Decodes the block (the redirect and trap fields are not kept).
    pub fn decode(b: &PmaBlock) -> Self {
        let word = be32(b, 4);
        ClassPortInfo {
            base_version: b[0],
            class_version: b[1],
            capability_mask: be16(b, 2),
            capability_mask2: word >> 5,
            resp_time_value: (word & 0x1f) as u8,
        }
    }

    /// Encodes the block.
    pub fn encode(&self) -> PmaBlock {
        let mut b = [0u8; PMA_DATA_LEN];
        b[0] = self.base_version;
        b[1] = self.class_version;
        put16(&mut b, 2, self.capability_mask);
        put32(
            &mut b,
            4,
            (self.capability_mask2 << 5) | u32::from(self.resp_time_value & 0x1f),
        );
        b
    }
}

/// PortCounters CounterSelect bits (which counters a Set resets).
pub mod counter_select {
    /// SymbolErrorCounter.
    pub const SYMBOL_ERRORS: u16 = 1 << 0;
    /// LinkErrorRecoveryCounter.
    pub const LINK_ERROR_RECOVERY: u16 = 1 << 1;
    /// LinkDownedCounter.
    pub const LINK_DOWNED: u16 = 1 << 2;
    /// PortRcvErrors.
    pub const RCV_ERRORS: u16 = 1 << 3;
    /// PortRcvRemotePhysicalErrors.
    pub const RCV_REMOTE_PHYS_ERRORS: u16 = 1 << 4;
    /// PortRcvSwitchRelayErrors.
    pub const RCV_SWITCH_RELAY_ERRORS: u16 = 1 << 5;
    /// PortXmitDiscards.
    pub const XMIT_DISCARDS: u16 = 1 << 6;
    /// PortXmitConstraintErrors.
    pub const XMIT_CONSTRAINT_ERRORS: u16 = 1 << 7;
    /// PortRcvConstraintErrors.
    pub const RCV_CONSTRAINT_ERRORS: u16 = 1 << 8;
    /// LocalLinkIntegrityErrors.
    pub const LOCAL_LINK_INTEGRITY: u16 = 1 << 9;
    /// ExcessiveBufferOverrunErrors.
    pub const BUFFER_OVERRUN: u16 = 1 << 10;
    /// VL15Dropped.
    pub const VL15_DROPPED: u16 = 1 << 11;
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 12;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 13;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 14;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 15;
}

/// PortCountersExtended CounterSelect bits.
pub mod counter_select_ext {
    /// PortXmitData.
    pub const XMIT_DATA: u16 = 1 << 0;
    /// PortRcvData.
    pub const RCV_DATA: u16 = 1 << 1;
    /// PortXmitPkts.
    pub const XMIT_PKTS: u16 = 1 << 2;
    /// PortRcvPkts.
    pub const RCV_PKTS: u16 = 1 << 3;
    /// PortUnicastXmitPkts.
    pub const UNICAST_XMIT_PKTS: u16 = 1 << 4;
    /// PortUnicastRcvPkts.
    pub const UNICAST_RCV_PKTS: u16 = 1 << 5;
    /// PortMulticastXmitPkts.
    pub const MULTICAST_XMIT_PKTS: u16 = 1 << 6;
    /// PortMulticastRcvPkts.
    pub const MULTICAST_RCV_PKTS: u16 = 1 << 7;
}

/// PortCounters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PortCounters {
    /// The port (0xFF: every port, where supported).
    pub port_select: u8,
    /// `counter_select` bits (a Set resets those counters).
    pub counter_select: u16,
    /// SymbolErrorCounter.
    pub symbol_errors: u16,
    /// LinkErrorRecoveryCounter.
    pub link_error_recovery: u8,
    /// LinkDownedCounter.
    pub link_downed: u8,
    /// PortRcvErrors.
    pub rcv_errors: u16,
    /// PortRcvRemotePhysicalErrors.
    pub rcv_remote_phys_errors: u16,
    /// PortRcvSwitchRelayErrors.
    pub rcv_switch_relay_errors: u16,
    /// PortXmitDiscards.
    pub xmit_discards: u16,
    /// PortXmitConstraintErrors.
    pub xmit_constraint_errors: u8,
    /// PortRcvConstraintErrors.
    pub rcv_constraint_errors: u8,
    /// LocalLinkIntegrityErrors (4 bits).
    pub local_link_integrity_errors: u8,
    /// ExcessiveBufferOverrunErrors (4 bits).
    pub buffer_overrun_errors: u8,
    /// VL15Dropped.
    pub vl15_dropped: u16,
    /// PortXmitData, in 32-bit words.
    pub xmit_data: u32,
    /// PortRcvData, in 32-bit words.
    pub rcv_data: u32,
    /// PortXmitPkts.
    pub xmit_pkts: u32,
    /// PortRcvPkts.
    pub rcv_pkts: u32,
    /// PortXmitWait.
    pub xmit_wait: u32,
}

impl PortCounters {
    /// Decodes the block.
    pub fn decode(b: &PmaBlock) -> Self {
        PortCounters {
            port_select: b[1],
            counter_select: be16(b, 2),
            symbol_errors: be16(b, 4),
            link_error_recovery: b[6],
            link_downed: b[7],
            rcv_errors: be16(b, 8),
            rcv_remote_phys_errors: be16(b, 10),
            rcv_switch_relay_errors: be16(b, 12),
            xmit_discards: be16(b, 14),
            xmit_constraint_errors: b[16],
            rcv_constraint_errors: b[17],
            local_link_integrity_errors: b[19] >> 4,
            buffer_overrun_errors: b[19] & 0xf,
            vl15_dropped: be16(b, 22),
            xmit_data: be32(b, 24),
            rcv_data: be32(b, 28),
            xmit_pkts: be32(b, 32),
            rcv_pkts: be32(b, 36),
            xmit_wait: be32(b, 40),
        }
    }

    /// Encodes the block.
    pub fn encode(&self) -> PmaBlock {
        let mut b = [0u8; PMA_DATA_LEN];
        b[1] = self.port_select;
        put16(&mut b, 2, self.counter_select);
        put16(&mut b, 4, self.symbol_errors);
        b[6] = self.link_error_recovery;
        b[7] = self.link_downed;
        put16(&mut b, 8, self.rcv_errors);
        put16(&mut b, 10, self.rcv_remote_phys_errors);
        put16(&mut b, 12, self.rcv_switch_relay_errors);
        put16(&mut b, 14, self.xmit_discards);
        b[16] = self.xmit_constraint_errors;
        b[17] = self.rcv_constraint_errors;
        b[19] =
            (self.local_link_integrity_errors.min(0xf) << 4) | self.buffer_overrun_errors.min(0xf);
        put16(&mut b, 22, self.vl15_dropped);
        put32(&mut b, 24, self.xmit_data);
        put32(&mut b, 28, self.rcv_data);
        put32(&mut b, 32, self.xmit_pkts);
        put32(&mut b, 36, self.rcv_pkts);
        put32(&mut b, 40, self.xmit_wait);
        b
    }
}

/// PortCountersExtended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PortCountersExt {
    /// The port (0xFF: every port, where supported).
    pub port_select: u8,
    /// `counter_select_ext` bits (a Set resets those counters).
    pub counter_select: u16,
    /// PortXmitData, in 32-bit words.
    pub xmit_data: u64,
    /// PortRcvData, in 32-bit words.
    pub rcv_data: u64,
    /// PortXmitPkts.
    pub xmit_pkts: u64,
    /// PortRcvPkts.
    pub rcv_pkts: u64,
    /// PortUnicastXmitPkts.
    pub unicast_xmit_pkts: u64,
    /// PortUnicastRcvPkts.
    pub unicast_rcv_pkts: u64,
    /// PortMulticastXmitPkts.
    pub multicast_xmit_pkts: u64,
    /// PortMulticastRcvPkts.
    pub multicast_rcv_pkts: u64,
}

impl PortCountersExt {
    /// Decodes the block.
    pub fn decode(b: &PmaBlock) -> Self {
        PortCountersExt {
            port_select: b[1],
            counter_select: be16(b, 2),
            xmit_data: be64(b, 8),
            rcv_data: be64(b, 16),
            xmit_pkts: be64(b, 24),
            rcv_pkts: be64(b, 32),
            unicast_xmit_pkts: be64(b, 40),
            unicast_rcv_pkts: be64(b, 48),
            multicast_xmit_pkts: be64(b, 56),
            multicast_rcv_pkts: be64(b, 64),
        }
    }

    /// Encodes the block.
    pub fn encode(&self) -> PmaBlock {
        let mut b = [0u8; PMA_DATA_LEN];
        b[1] = self.port_select;
        put16(&mut b, 2, self.counter_select);
        put64(&mut b, 8, self.xmit_data);
        put64(&mut b, 16, self.rcv_data);
        put64(&mut b, 24, self.xmit_pkts);
        put64(&mut b, 32, self.rcv_pkts);
        put64(&mut b, 40, self.unicast_xmit_pkts);
        put64(&mut b, 48, self.unicast_rcv_pkts);
        put64(&mut b, 56, self.multicast_xmit_pkts);
        put64(&mut b, 64, self.multicast_rcv_pkts);
        b
    }
}
