//! One port as its subnet management agent sees it: the PortInfo fields
//! the SM reads and sets, the port state machine (Down → Init → Armed →
//! Active, IBA vol 1 §7.2), and what a Set is allowed to change.
//!
//! The link is virtual: it runs 4x QDR with an MTU of 4096, the widths,
//! speeds and MTU the SM enables are recorded and reported, never
//! renegotiated.

use ibtca_protocol::mad::attr::{cap, speed, width, PhysState, PortInfo, PortState};
use ibtca_protocol::mad::MadStatus;

/// Highest unicast LID.
pub const MAX_UNICAST_LID: u16 = 0xbfff;
/// IBA MTU code of 4096 bytes.
pub const MTU_4096: u8 = 5;
/// SubnetTimeOut/RespTimeValue-style default: 4.096 µs × 2^18 ≈ 1 s.
const LIFE_TIME: u8 = 18;

/// What a port's link and its SMA know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortAgent {
    /// The PortInfo the SM set or the port reports (M_Key fields live in
    /// [`super::MKey`]).
    info: PortInfo,
    /// The link is up (physical state LinkUp).
    link_up: bool,
}

impl PortAgent {
    /// Port `num` with `data_vls` data VLs, the port GUID's subnet prefix
    /// default (0xfe80::), LID `lid` and capability mask `caps`.
    pub fn new(num: u8, lid: u16, data_vls: u8, caps: u32) -> Self {
        let vl_cap = match data_vls {
            0 | 1 => 1,
            2 => 2,
            3 | 4 => 3,
            5..=8 => 4,
            _ => 5,
        };
        PortAgent {
            info: PortInfo {
                gid_prefix: 0xfe80_0000_0000_0000,
                lid,
                capability_mask: caps,
                local_port_num: num,
                link_width_enabled: width::X4,
                link_width_supported: width::X1 | width::X4,
                link_width_active: width::X4,
                link_speed_supported: speed::SDR | speed::DDR | speed::QDR,
                link_speed_enabled: speed::SDR | speed::DDR | speed::QDR,
                link_speed_active: speed::QDR,
                port_state: PortState::Down as u8,
                phys_state: PhysState::Polling as u8,
                link_down_default_state: PhysState::Polling as u8,
                neighbor_mtu: MTU_4096,
                mtu_cap: MTU_4096,
                vl_cap,
                operational_vls: vl_cap,
                vl_high_limit: 0,
                // Every entry of both VLArbitrationTables is kept and served.
                vl_arb_high_cap: super::VL_ARB_ENTRIES,
                vl_arb_low_cap: super::VL_ARB_ENTRIES,
                guid_cap: super::GUID_CAP as u8,
                subnet_timeout: LIFE_TIME,
                resp_time_value: LIFE_TIME,
                hoq_life: LIFE_TIME,
                vl_stall_count: 7,
                ..PortInfo::default()
            },
            link_up: false,
        }
    }

    /// The default capability mask of a channel adapter's port
    /// (no IsSLMappingSupported: a device's SL → VL table is its
    /// topology entry's, not the SM's).
    pub const CA_CAPS: u32 = cap::IS_TRAP_SUPPORTED
        | cap::IS_SYSTEM_IMAGE_GUID_SUPPORTED
        | cap::IS_CM_SUPPORTED
        | cap::IS_CLIENT_REREGISTRATION_SUPPORTED;

    /// Capability bits the port's own host sets (the guest driver's
    /// `modify_port`): IsSM, for an SM running there, and
    /// IsDeviceManagementSupported, for a Device Management agent there
    /// (ib_srpt's I/O unit, which srp_daemon finds by this bit in the SA's
    /// PortInfoRecords).
    pub const HOST_CAPS: u32 = cap::IS_SM | cap::IS_DEVICE_MANAGEMENT_SUPPORTED;

    /// Sets, then clears, the [`Self::HOST_CAPS`] bits of `set` and
    /// `clear` (others are ignored); returns the capability mask.
    pub fn set_host_caps(&mut self, set: u32, clear: u32) -> u32 {
        let m = &mut self.info.capability_mask;
        *m = (*m | (set & Self::HOST_CAPS)) & !(clear & Self::HOST_CAPS);
        *m
    }

    /// The PortInfo as a Get reports it (M_Key fields zero). The
    /// capability mask is the port's own (a Set does not change it).
    pub fn info(&self) -> PortInfo {
        self.info
    }

    /// The port's LID.
    pub fn lid(&self) -> u16 {
        self.info.lid
    }

    /// Where the port's traps go: the SM's LID (MasterSMLID), once the SM
    /// set it and the port's LID (`trap.rs`).
    pub fn trap_target(&self) -> Option<super::TrapTarget> {
        let i = &self.info;
        let known = |lid: u16| lid != 0 && lid <= MAX_UNICAST_LID;
        (known(i.lid) && known(i.master_sm_lid)).then_some(super::TrapTarget {
            own_lid: i.lid,
            sm_lid: i.master_sm_lid,
            subnet_timeout: i.subnet_timeout,
        })
    }

    /// The port's state.
    pub fn state(&self) -> PortState {
        PortState::from_bits(self.info.port_state).unwrap_or(PortState::Down)
    }

    /// The link came up or went down. Up: Init, or Active at once when no
    /// SM manages the port (`managed` false: the topology file's LIDs, as
    /// before there were SMAs). Returns true if the state changed.
    pub fn link_changed(&mut self, up: bool, managed: bool) -> bool {
        let before = self.info.port_state;
        self.link_up = up;
        (self.info.port_state, self.info.phys_state) = if !up {
            (PortState::Down as u8, PhysState::Polling as u8)
        } else if managed {
            (PortState::Init as u8, PhysState::LinkUp as u8)
        } else {
            (PortState::Active as u8, PhysState::LinkUp as u8)
        };
        self.info.port_state != before
    }

    /// Applies a PortInfo Set (the whole Set or nothing): LID, LMC,
    /// MasterSMLID/SL, the enabled widths and speeds,
    /// NeighborMTU, OperationalVLs, VLHighLimit, timeouts, the port state
    /// (Armed from Init, Active from Armed, Down from any: the link then
    /// trains again, to Init) and the physical state (only Polling, which
    /// the link already is or has passed, or the current one). `lid_settable`: false on a
    /// switch's external ports, whose LID is port 0's.
    pub fn set(&mut self, new: &PortInfo, lid_settable: bool) -> Result<(), MadStatus> {
        let bad = Err(MadStatus::INVALID_ATTR_VALUE);
        let state = match PortState::from_bits(new.port_state) {
            None => return bad,
            Some(PortState::NoChange) => self.state(),
            Some(s) => s,
        };
        let current = self.state();
        let allowed = match state {
            PortState::NoChange => true,
            PortState::Down => true,
            PortState::Init => current == PortState::Init,
            PortState::Armed => matches!(current, PortState::Init | PortState::Armed),
            PortState::Active => matches!(current, PortState::Armed | PortState::Active),
        };
        if !allowed {
            return bad;
        }
        // No change, Polling (the link is polling or past it), or what it
        // already is (a Set built from a Get); Disabled and the rest are
        // not supported.
        if !matches!(new.phys_state, 0 | 2) && new.phys_state != self.info.phys_state {
            return bad;
        }
        if lid_settable && new.lid > MAX_UNICAST_LID {
            return bad;
        }
        let width = match new.link_width_enabled {
            0 => self.info.link_width_enabled,
            0xff => self.info.link_width_supported,
            w if w & !self.info.link_width_supported == 0 => w,
            _ => return bad,
        };
        let speed = match new.link_speed_enabled {
            0 => self.info.link_speed_enabled,
            0xf => self.info.link_speed_supported,
            s if s & !self.info.link_speed_supported == 0 => s,
            _ => return bad,
        };
        let mtu = match new.neighbor_mtu {
            0 => self.info.neighbor_mtu,
            m if (1..=self.info.mtu_cap).contains(&m) => m,
            _ => return bad,
        };
        let vls = match new.operational_vls {
            0 => self.info.operational_vls,
            v if v <= self.info.vl_cap => v,
            _ => return bad,
        };
        let i = &mut self.info;
        if lid_settable {
            i.lid = new.lid;
            i.lmc = new.lmc;
            i.master_sm_lid = new.master_sm_lid;
            i.master_sm_sl = new.master_sm_sl;
            i.subnet_timeout = new.subnet_timeout;
            i.client_reregister = false;
        }
        i.link_width_enabled = width;
        i.link_speed_enabled = speed;
        i.neighbor_mtu = mtu;
        i.operational_vls = vls;
        i.vl_high_limit = new.vl_high_limit;
        i.hoq_life = new.hoq_life;
        i.vl_stall_count = new.vl_stall_count;
        i.port_state = match state {
            // Down takes the link down; it trains again at once.
            PortState::Down if self.link_up => PortState::Init as u8,
            s => s as u8,
        };
        Ok(())
    }

    /// Counts a P_Key violation seen on this port (PortInfo
    /// P_KeyViolations).
    pub fn count_p_key_violation(&mut self) {
        self.info.p_key_violations = self.info.p_key_violations.saturating_add(1);
    }

    /// Counts an M_Key violation seen on this port.
    pub fn count_m_key_violation(&mut self) {
        self.info.m_key_violations = self.info.m_key_violations.saturating_add(1);
    }
}
