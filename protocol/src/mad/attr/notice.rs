//! Notice (IBA vol 1 §13.4.8.2, §14.2.5.1): the attribute of a SubnTrap
//! (method Trap, 0x05) and of the SM's SubnTrapRepress (0x07), which
//! carries the trap's TID and its Notice back.
//!
//! ```text
//!  0 IsGeneric:1 Type:7  1 ProducerType (generic) / VendorID (3)
//!  4 TrapNumber (generic) / DeviceID (2)  6 IssuerLID (2)
//!  8 NoticeToggle:1 NoticeCount:15  10 DataDetails (54)
//! 64 IssuerGID (16: past an SMP's 64 data bytes, so not in a SubnTrap)
//! ```
//!
//! DataDetails of the traps ibtca sends: 128 (a switch's link state
//! changed) holds the switch's LID at 0; 144 (a port's local changes)
//! holds the LID at 2, a local-changes bit at 5, the new capability
//! mask at 6 and change flags at 10; 257 (a packet with a bad P_Key)
//! holds LID1 (the packet's SLID) at 2, LID2 (its DLID) at 4, the key at
//! 6, SL (bits 31:28) and QP1 (the source QP, 23:0) at 10, QP2 (the
//! destination QP) at 14, GID1 and GID2 at 18 and 34 (OpenSM's
//! `ib_types.h`, `ntc_128`, `ntc_144` and `ntc_257_258`).

use super::Block;
use crate::mad::header::{be16, be32, method, put, put16, put32, BASE_VERSION};
use crate::mad::{Smp, SmpRoute};

/// Notice types (IBA vol 1 Table 115).
pub mod notice_type {
    /// Fatal.
    pub const FATAL: u8 = 0;
    /// Urgent.
    pub const URGENT: u8 = 1;
    /// Security.
    pub const SECURITY: u8 = 2;
    /// Subnet management.
    pub const SUBNET_MANAGEMENT: u8 = 3;
    /// Informational.
    pub const INFO: u8 = 4;
}

/// Producer types of a generic notice (the node type, or class manager).
pub mod producer {
    /// A channel adapter.
    pub const CA: u32 = 1;
    /// A switch.
    pub const SWITCH: u32 = 2;
    /// A router.
    pub const ROUTER: u32 = 3;
    /// A class manager.
    pub const CLASS_MANAGER: u32 = 4;
}

/// Generic trap numbers (IBA vol 1 Table 118) ibtca sends.
pub mod trap {
    /// Link state of at least one port of a switch changed (the switch's
    /// SwitchInfo PortStateChange was set).
    pub const LINK_STATE_CHANGE: u16 = 128;
    /// A port's capability mask (or another local attribute) changed.
    pub const LOCAL_CHANGES: u16 = 144;
    /// A packet with a P_Key the receiving port does not hold.
    pub const BAD_P_KEY: u16 = 257;
}

/// The packet a P_Key (trap 257) or Q_Key (trap 258) violation names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct KeyViolation {
    /// LID1: the packet's source LID.
    pub slid: u16,
    /// LID2: the packet's destination LID.
    pub dlid: u16,
    /// The offending key (a P_Key in the low 16 bits).
    pub key: u32,
    /// The packet's SL (4 bits).
    pub sl: u8,
    /// QP1: the source QP (24 bits; 0 where the packet does not say).
    pub src_qp: u32,
    /// QP2: the destination QP (24 bits).
    pub dest_qp: u32,
    /// GID1 and GID2: the GRH's source and destination (zero without one).
    pub sgid: [u8; 16],
    /// See `sgid`.
    pub dgid: [u8; 16],
}

/// Bytes of DataDetails.
pub const DATA_DETAILS_LEN: usize = 54;

/// A Notice (the 64 bytes an SMP carries; IssuerGID is left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Notice {
    /// IsGeneric: a generic notice (trap number, producer type) rather
    /// than a vendor's (device ID, vendor ID).
    pub generic: bool,
    /// Type (7 bits, [`notice_type`]).
    pub notice_type: u8,
    /// ProducerType of a generic notice, VendorID of a vendor's (24 bits).
    pub producer: u32,
    /// TrapNumber of a generic notice, DeviceID of a vendor's.
    pub trap_number: u16,
    /// The LID of the port that issued it.
    pub issuer_lid: u16,
    /// NoticeToggle.
    pub toggle: bool,
    /// NoticeCount (15 bits).
    pub count: u16,
    /// DataDetails, per trap number.
    pub details: [u8; DATA_DETAILS_LEN],
}

impl Default for Notice {
    fn default() -> Self {
        Notice {
            generic: false,
            notice_type: 0,
            producer: 0,
            trap_number: 0,
            issuer_lid: 0,
            toggle: false,
            count: 0,
            details: [0; DATA_DETAILS_LEN],
        }
    }
}

impl Notice {
    /// Trap 128 from the switch at `switch_lid`: generic, urgent, producer
    /// switch, the switch's LID as issuer and in DataDetails.
    pub fn link_state_change(switch_lid: u16) -> Self {
        let mut n = Notice {
            generic: true,
            notice_type: notice_type::URGENT,
            producer: producer::SWITCH,
            trap_number: trap::LINK_STATE_CHANGE,
            issuer_lid: switch_lid,
            ..Notice::default()
        };
        put16(&mut n.details, 0, switch_lid);
        n
    }

    /// Trap 144 from the port at `lid` of a node of `producer` type: its
    /// capability mask is now `capability_mask` (informational).
    pub fn capability_mask_change(lid: u16, producer: u32, capability_mask: u32) -> Self {
        let mut n = Notice {
            generic: true,
            notice_type: notice_type::INFO,
            producer,
            trap_number: trap::LOCAL_CHANGES,
            issuer_lid: lid,
            ..Notice::default()
        };
        put16(&mut n.details, 2, lid);
        put32(&mut n.details, 6, capability_mask);
        n
    }

    /// Trap 257 from the port at `lid` of a node of `producer` type: it
    /// dropped the packet `v` describes, whose P_Key it does not hold
    /// (security).
    pub fn bad_p_key(lid: u16, producer: u32, v: &KeyViolation) -> Self {
        let mut n = Notice {
            generic: true,
            notice_type: notice_type::SECURITY,
            producer,
            trap_number: trap::BAD_P_KEY,
            issuer_lid: lid,
            ..Notice::default()
        };
        put16(&mut n.details, 2, v.slid);
        put16(&mut n.details, 4, v.dlid);
        put32(&mut n.details, 6, v.key);
        put32(
            &mut n.details,
            10,
            u32::from(v.sl & 0xf) << 28 | v.src_qp & 0xff_ffff,
        );
        put32(&mut n.details, 14, v.dest_qp & 0xff_ffff);
        put(&mut n.details, 18, &v.sgid);
        put(&mut n.details, 34, &v.dgid);
        n
    }

    /// The packet trap 257's or 258's DataDetails describe.
    pub fn key_violation(&self) -> KeyViolation {
        let d = &self.details;
        let qp1 = be32(d, 10);
        let mut v = KeyViolation {
            slid: be16(d, 2),
            dlid: be16(d, 4),
            key: be32(d, 6),
            sl: (qp1 >> 28) as u8,
            src_qp: qp1 & 0xff_ffff,
            dest_qp: be32(d, 14) & 0xff_ffff,
            ..KeyViolation::default()
        };
        v.sgid.copy_from_slice(&d[18..34]);
        v.dgid.copy_from_slice(&d[34..50]);
        v
    }

    /// The LID trap 128's DataDetails name.
    pub fn switch_lid(&self) -> u16 {
        be16(&self.details, 0)
    }

    /// The capability mask trap 144's DataDetails carry.
    pub fn new_capability_mask(&self) -> u32 {
        be32(&self.details, 6)
    }

    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        let mut details = [0; DATA_DETAILS_LEN];
        put(&mut details, 0, b.get(10..64).unwrap_or_default());
        Notice {
            generic: b[0] & 0x80 != 0,
            notice_type: b[0] & 0x7f,
            producer: be32(b, 0) & 0x00ff_ffff,
            trap_number: be16(b, 4),
            issuer_lid: be16(b, 6),
            toggle: b[8] & 0x80 != 0,
            count: be16(b, 8) & 0x7fff,
            details,
        }
    }

    /// Encodes the block (fields wider than theirs are cut to their bits).
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        put32(&mut b, 0, self.producer & 0x00ff_ffff);
        b[0] = (u8::from(self.generic) << 7) | (self.notice_type & 0x7f);
        put16(&mut b, 4, self.trap_number);
        put16(&mut b, 6, self.issuer_lid);
        put16(
            &mut b,
            8,
            (u16::from(self.toggle) << 15) | (self.count & 0x7fff),
        );
        put(&mut b, 10, &self.details);
        b
    }

    /// The LID-routed SubnTrap (method Trap, attribute Notice, modifier 0)
    /// carrying this notice with transaction ID `tid`.
    pub fn trap_smp(&self, tid: u64) -> Smp {
        let mut smp = Smp::new(SmpRoute::Lid, method::TRAP, super::id::NOTICE, 0);
        smp.tid = tid;
        smp.data = self.encode();
        smp
    }

    /// The transaction ID a SubnTrapRepress answers: `smp` must be one
    /// (method TrapRepress, attribute Notice, base and class version 1).
    /// Which trap it names, if any, is the sender's to match.
    pub fn repressed_tid(smp: &Smp) -> Option<u64> {
        (smp.method == method::TRAP_REPRESS
            && smp.attr_id == super::id::NOTICE
            && smp.base_version == BASE_VERSION
            && smp.class_version == 1)
            .then_some(smp.tid)
    }
}
