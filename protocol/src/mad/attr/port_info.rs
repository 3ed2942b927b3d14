//! PortInfo (IBA vol 1 §14.2.5.6), the attribute through which the SM
//! gives a port its LID and brings it up.
//!
//! ```text
//!  0 M_Key (8)  8 GidPrefix (8)  16 LID (2)  18 MasterSMLID (2)
//! 20 CapabilityMask (4)  24 DiagCode (2)  26 M_KeyLeasePeriod (2)
//! 28 LocalPortNum  29 LinkWidthEnabled  30 LinkWidthSupported
//! 31 LinkWidthActive  32 LinkSpeedSupported:4 PortState:4
//! 33 PortPhysicalState:4 LinkDownDefaultState:4  34 M_KeyProtectBits:2 -:3 LMC:3
//! 35 LinkSpeedActive:4 LinkSpeedEnabled:4  36 NeighborMTU:4 MasterSMSL:4
//! 37 VLCap:4 InitType:4  38 VLHighLimit  39 VLArbitrationHighCap
//! 40 VLArbitrationLowCap  41 InitTypeReply:4 MTUCap:4
//! 42 VLStallCount:3 HOQLife:5  43 OperationalVLs:4 PartitionEnforcement
//!    Inbound, Outbound, FilterRawInbound, Outbound (1 bit each)
//! 44 M_KeyViolations (2)  46 P_KeyViolations (2)  48 Q_KeyViolations (2)
//! 50 GUIDCap  51 ClientReregister:1 -:2 SubnetTimeOut:5  52 -:3 RespTimeValue:5
//! 53 LocalPhyErrors:4 OverrunErrors:4  54 MaxCreditHint (2)
//! 56 reserved  57 LinkRoundTripLatency (3)  60 CapabilityMask2 (2)
//! 62 LinkSpeedExtActive:4 Supported:4  63 -:3 LinkSpeedExtEnabled:5
//! ```

use super::Block;
use crate::mad::header::{be16, be32, be64, put16, put32, put64};

/// PortState.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PortState {
    /// No state change (in a Set).
    NoChange = 0,
    /// Down.
    Down = 1,
    /// Initialize: the link is up, the SM has not yet configured the port.
    Init = 2,
    /// Armed.
    Armed = 3,
    /// Active.
    Active = 4,
}

impl PortState {
    /// From the 4-bit wire value; `None` for the reserved values.
    pub fn from_bits(v: u8) -> Option<Self> {
        Some(match v {
            0 => PortState::NoChange,
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            _ => return None,
        })
    }
}

/// PortPhysicalState.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PhysState {
    /// No change (in a Set).
    NoChange = 0,
    /// Sleep.
    Sleep = 1,
    /// Polling: looking for a peer.
    Polling = 2,
    /// Disabled.
    Disabled = 3,
    /// PortConfigurationTraining.
    Training = 4,
    /// LinkUp.
    LinkUp = 5,
    /// LinkErrorRecovery.
    LinkErrorRecovery = 6,
    /// Phy test.
    PhyTest = 7,
}

/// LinkWidth bits (supported, enabled, active; 0xff in LinkWidthEnabled:
/// set to what is supported).
pub mod width {
    /// 1x.
    pub const X1: u8 = 1;
    /// 4x.
    pub const X4: u8 = 2;
    /// 8x.
    pub const X8: u8 = 4;
    /// 12x.
    pub const X12: u8 = 8;
}

/// LinkSpeed bits (supported, enabled, active; 15 in LinkSpeedEnabled:
/// set to what is supported).
pub mod speed {
    /// 2.5 Gb/s (SDR).
    pub const SDR: u8 = 1;
    /// 5 Gb/s (DDR).
    pub const DDR: u8 = 2;
    /// 10 Gb/s (QDR).
    pub const QDR: u8 = 4;
}

/// CapabilityMask bits.
pub mod cap {
    /// The port's node runs an SM.
    pub const IS_SM: u32 = 1 << 1;
    /// Notices supported.
    pub const IS_NOTICE_SUPPORTED: u32 = 1 << 2;
    /// Traps supported.
    pub const IS_TRAP_SUPPORTED: u32 = 1 << 3;
    /// SL → VL mapping supported.
    pub const IS_SL_MAPPING_SUPPORTED: u32 = 1 << 6;
    /// System image GUID supported.
    pub const IS_SYSTEM_IMAGE_GUID_SUPPORTED: u32 = 1 << 11;
    /// Communication management supported.
    pub const IS_CM_SUPPORTED: u32 = 1 << 16;
    /// The port's node answers Device Management class MADs (an I/O
    /// unit: an SRP target's ib_srpt, found by srp_daemon this way).
    pub const IS_DEVICE_MANAGEMENT_SUPPORTED: u32 = 1 << 19;
    /// Client reregistration supported.
    pub const IS_CLIENT_REREGISTRATION_SUPPORTED: u32 = 1 << 25;
}

/// PortInfo, every field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub struct PortInfo {
    pub m_key: u64,
    pub gid_prefix: u64,
    pub lid: u16,
    pub master_sm_lid: u16,
    pub capability_mask: u32,
    pub diag_code: u16,
    pub m_key_lease_period: u16,
    pub local_port_num: u8,
    pub link_width_enabled: u8,
    pub link_width_supported: u8,
    pub link_width_active: u8,
    pub link_speed_supported: u8,
    /// PortState (4 bits; [`PortState`]).
    pub port_state: u8,
    /// PortPhysicalState (4 bits; [`PhysState`]).
    pub phys_state: u8,
    pub link_down_default_state: u8,
    pub m_key_protect: u8,
    pub lmc: u8,
    pub link_speed_active: u8,
    pub link_speed_enabled: u8,
    pub neighbor_mtu: u8,
    pub master_sm_sl: u8,
    pub vl_cap: u8,
    pub init_type: u8,
    pub vl_high_limit: u8,
    pub vl_arb_high_cap: u8,
    pub vl_arb_low_cap: u8,
    pub init_type_reply: u8,
    pub mtu_cap: u8,
    pub vl_stall_count: u8,
    pub hoq_life: u8,
    pub operational_vls: u8,
    /// PartitionEnforcementInbound, Outbound, FilterRawInbound, Outbound
    /// (bits 3..0).
    pub enforcement: u8,
    pub m_key_violations: u16,
    pub p_key_violations: u16,
    pub q_key_violations: u16,
    pub guid_cap: u8,
    pub client_reregister: bool,
    pub subnet_timeout: u8,
    pub resp_time_value: u8,
    pub local_phy_errors: u8,
    pub overrun_errors: u8,
    pub max_credit_hint: u16,
    pub link_round_trip_latency: u32,
    pub capability_mask2: u16,
    pub link_speed_ext_active: u8,
    pub link_speed_ext_supported: u8,
    pub link_speed_ext_enabled: u8,
}

impl PortInfo {
    /// Decodes the block.
    pub fn decode(b: &Block) -> Self {
        PortInfo {
            m_key: be64(b, 0),
            gid_prefix: be64(b, 8),
            lid: be16(b, 16),
            master_sm_lid: be16(b, 18),
            capability_mask: be32(b, 20),
            diag_code: be16(b, 24),
            m_key_lease_period: be16(b, 26),
            local_port_num: b[28],
            link_width_enabled: b[29],
            link_width_supported: b[30],
            link_width_active: b[31],
            link_speed_supported: b[32] >> 4,
            port_state: b[32] & 0xf,
            phys_state: b[33] >> 4,
            link_down_default_state: b[33] & 0xf,
            m_key_protect: b[34] >> 6,
            lmc: b[34] & 7,
            link_speed_active: b[35] >> 4,
            link_speed_enabled: b[35] & 0xf,
            neighbor_mtu: b[36] >> 4,
            master_sm_sl: b[36] & 0xf,
            vl_cap: b[37] >> 4,
            init_type: b[37] & 0xf,
            vl_high_limit: b[38],
            vl_arb_high_cap: b[39],
            vl_arb_low_cap: b[40],
            init_type_reply: b[41] >> 4,
            mtu_cap: b[41] & 0xf,
            vl_stall_count: b[42] >> 5,
            hoq_life: b[42] & 0x1f,
            operational_vls: b[43] >> 4,
            enforcement: b[43] & 0xf,
            m_key_violations: be16(b, 44),
            p_key_violations: be16(b, 46),
            q_key_violations: be16(b, 48),
            guid_cap: b[50],
            client_reregister: b[51] & 0x80 != 0,
            subnet_timeout: b[51] & 0x1f,
            resp_time_value: b[52] & 0x1f,
            local_phy_errors: b[53] >> 4,
            overrun_errors: b[53] & 0xf,
            max_credit_hint: be16(b, 54),
            link_round_trip_latency: be32(b, 56) & 0x00ff_ffff,
            capability_mask2: be16(b, 60),
            link_speed_ext_active: b[62] >> 4,
            link_speed_ext_supported: b[62] & 0xf,
            link_speed_ext_enabled: b[63] & 0x1f,
        }
    }

    /// Encodes the block (fields wider than their bits are cut).
    pub fn encode(&self) -> Block {
        let mut b = [0; 64];
        let nib = |hi: u8, lo: u8| (hi << 4) | (lo & 0xf);
        put64(&mut b, 0, self.m_key);
        put64(&mut b, 8, self.gid_prefix);
        put16(&mut b, 16, self.lid);
        put16(&mut b, 18, self.master_sm_lid);
        put32(&mut b, 20, self.capability_mask);
        put16(&mut b, 24, self.diag_code);
        put16(&mut b, 26, self.m_key_lease_period);
        b[28] = self.local_port_num;
        b[29] = self.link_width_enabled;
        b[30] = self.link_width_supported;
        b[31] = self.link_width_active;
        b[32] = nib(self.link_speed_supported, self.port_state);
        b[33] = nib(self.phys_state, self.link_down_default_state);
        b[34] = (self.m_key_protect << 6) | (self.lmc & 7);
        b[35] = nib(self.link_speed_active, self.link_speed_enabled);
        b[36] = nib(self.neighbor_mtu, self.master_sm_sl);
        b[37] = nib(self.vl_cap, self.init_type);
        b[38] = self.vl_high_limit;
        b[39] = self.vl_arb_high_cap;
        b[40] = self.vl_arb_low_cap;
        b[41] = nib(self.init_type_reply, self.mtu_cap);
        b[42] = (self.vl_stall_count << 5) | (self.hoq_life & 0x1f);
        b[43] = nib(self.operational_vls, self.enforcement);
        put16(&mut b, 44, self.m_key_violations);
        put16(&mut b, 46, self.p_key_violations);
        put16(&mut b, 48, self.q_key_violations);
        b[50] = self.guid_cap;
        b[51] = (u8::from(self.client_reregister) << 7) | (self.subnet_timeout & 0x1f);
        b[52] = self.resp_time_value & 0x1f;
        b[53] = nib(self.local_phy_errors, self.overrun_errors);
        put16(&mut b, 54, self.max_credit_hint);
        put32(&mut b, 56, self.link_round_trip_latency & 0x00ff_ffff);
        put16(&mut b, 60, self.capability_mask2);
        b[62] = nib(self.link_speed_ext_active, self.link_speed_ext_supported);
        b[63] = self.link_speed_ext_enabled & 0x1f;
        b
    }
}
