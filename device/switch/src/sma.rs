//! The switch's subnet management agent (port 0; its traps are
//! `trap.rs`): NodeInfo,
//! NodeDescription, SwitchInfo (with PortStateChange), PortInfo of port 0
//! and of every external port, P_KeyTable, the linear and multicast
//! forwarding tables, SLtoVLMappingTable and VLArbitrationTable.
//!
//! - An LFT block Set replaces the routes of its 64 LIDs, learned, given or
//!   set before (255: none).
//! - An MFT block Set replaces the port masks of its 32 multicast LIDs
//!   (`mft.rs`), by which the switch forwards multicast packets.
//! - An SL → VL Set replaces the output port's table (one table per output
//!   port, whatever the input port in the modifier; the switch never had
//!   per-input tables). A VLArbitrationTable Set replaces a block of the
//!   port's tables (`sma/vl_arb.rs`); the low- and high-priority tables
//!   and the port's PortInfo VLHighLimit are its link's arbitration (IBA
//!   §7.6.9, `ibtca_link`'s `vl.rs`).

use ibtca_protocol::mad::attr::{
    cap, id, Block, LftBlock, MftBlock, NodeDescription, NodeInfo, NodeType, PortInfo, PortState,
    Sl2VlTable, SwitchInfo, VlArbBlock,
};
use ibtca_protocol::mad::{MadStatus, Smp};

use super::lft::{Lft, LINEAR_FDB_CAP, MAX_UNICAST_LID};
use super::mft::Mft;
use super::port::{PortSlot, ENFORCE_INBOUND, ENFORCE_OUTBOUND};
use super::wires::Wires;
use ibtca_agents::sma::{
    pkey_block, set_pkey_block, unsupported, Access, Attributes, MKey, MKeyCheck, PortAgent,
    TrapTarget, VlArbTables, DEFAULT_PKEY, PKEY_CAP,
};

/// Multicast LIDs the switch keeps port masks for.
pub const MFT_CAP: u16 = 1024;
/// LifeTimeValue: 4.096 µs × 2^18, about a second.
const LIFE_TIME: u8 = 18;

/// What the switch's agent keeps (behind the switch's lock).
#[derive(Debug)]
pub(super) struct SwitchSma {
    node_guid: u64,
    description: String,
    managed: bool,
    port0: PortAgent,
    ports: Vec<PortAgent>,
    m_key: MKey,
    /// P_Key tables of port 0 and every external port.
    pkeys: Vec<[u16; PKEY_CAP]>,
    /// PortInfo partition enforcement bits of every port (index = port).
    enforcement: Vec<u8>,
    info: SwitchInfo,
    vl_arb: Vec<VlArbTables>,
    /// Per output port (0-based), the VLHighLimit with which its slot and
    /// link hold its tables: those it last gave them, or, as the switch
    /// starts, those they were made with if they are the tables' (the
    /// port's configured weights); `None` when they may differ (after a
    /// VLArbitrationTable Set).
    arbitration_given: Vec<Option<u8>>,
    /// SMPs refused for a bad M_Key.
    pub m_key_violations: u64,
}

impl SwitchSma {
    /// Whether `smp`, which the agent does not answer (a TrapRepress),
    /// passes the switch's M_Key check as a Set would (IBA §14.2.4); a
    /// failure is counted as an M_Key violation.
    pub(super) fn passes_m_key(&mut self, smp: &Smp) -> bool {
        let pass = self.m_key.check(smp.method, smp.m_key) == MKeyCheck::Pass;
        if !pass {
            self.m_key_violations += 1;
        }
        pass
    }

    pub fn new(
        node_guid: u64,
        description: &str,
        lid: u16,
        slots: &[PortSlot],
        managed: bool,
    ) -> Self {
        // Port 0 sends trap 128 (`trap.rs`): IsTrapSupported.
        let mut port0 = PortAgent::new(0, lid, 1, cap::IS_TRAP_SUPPORTED);
        // Port 0 is inside the switch: its "link" is always up.
        port0.link_changed(true, managed);
        let ports: Vec<PortAgent> = slots
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let num = u8::try_from(i + 1).unwrap_or(u8::MAX);
                PortAgent::new(num, 0, s.config.vl.weights.len() as u8, 0)
            })
            .collect();
        let vl_arb: Vec<VlArbTables> = slots
            .iter()
            .map(|s| VlArbTables::from_weights(&s.config.vl.weights))
            .collect();
        let arbitration_given = slots
            .iter()
            .zip(&ports)
            .zip(&vl_arb)
            .map(|((slot, agent), tables)| {
                let limit = agent.info().vl_high_limit;
                let held = slot.low_priority() == tables.low_priority()
                    && slot.high_priority() == tables.high_priority(limit);
                held.then_some(limit)
            })
            .collect();
        let mut table = [0; PKEY_CAP];
        table[0] = DEFAULT_PKEY;
        let pkeys = vec![table; slots.len() + 1];
        SwitchSma {
            enforcement: vec![0; slots.len() + 1],
            node_guid,
            description: description.to_owned(),
            managed,
            port0,
            ports,
            m_key: MKey::default(),
            pkeys,
            info: SwitchInfo {
                linear_fdb_cap: LINEAR_FDB_CAP,
                multicast_fdb_cap: MFT_CAP,
                partition_enforcement_cap: PKEY_CAP as u16,
                life_time_value: LIFE_TIME,
                ..SwitchInfo::default()
            },
            arbitration_given,
            vl_arb,
            m_key_violations: 0,
        }
    }

    /// The switch's LID (port 0's).
    pub fn lid(&self) -> u16 {
        self.port0.lid()
    }

    /// Port 0's MasterSMLID (0 until an SM set it).
    pub fn sm_lid(&self) -> u16 {
        self.port0.info().master_sm_lid
    }

    /// External port `port`'s state (Down for no such port).
    pub fn port_state(&self, port: u8) -> PortState {
        self.ports
            .get(usize::from(port).wrapping_sub(1))
            .map_or(PortState::Down, PortAgent::state)
    }

    /// True if an SM manages the switch (no routes learned from `Hello`,
    /// ports Init until the SM makes them Active).
    pub fn managed(&self) -> bool {
        self.managed
    }

    /// External port `port`'s link came up or went down: its state, and
    /// PortStateChange if that changed it. Returns true if it did.
    pub fn link_changed(&mut self, port: u8, up: bool) -> bool {
        let managed = self.managed;
        let Some(agent) = self.ports.get_mut(usize::from(port).wrapping_sub(1)) else {
            return false;
        };
        let changed = agent.link_changed(up, managed);
        if changed {
            self.info.port_state_change = true;
        }
        changed
    }

    /// Where a trap goes: port 0's MasterSMLID, if the SM set it and the
    /// switch's LID (`trap.rs`).
    pub fn trap_target(&self) -> Option<TrapTarget> {
        self.port0.trap_target()
    }

    /// Tells each port whether it may carry data: without an SM always,
    /// with one while its state is Active.
    pub fn gate_ports(&self, slots: &[PortSlot]) {
        for (slot, agent) in slots.iter().zip(&self.ports) {
            slot.set_active(!self.managed || agent.state() == PortState::Active);
        }
    }

    /// Tells external port `port` alone whether it may carry data, as
    /// [`Self::gate_ports`] does. A port's gate follows its own state
    /// only, and only its link ([`Self::link_changed`]) and a PortInfo Set
    /// naming it change that state: what changed one port re-gates that
    /// port, not all of them.
    pub fn gate_port(&self, port: u8, slots: &[PortSlot]) {
        let i = usize::from(port).wrapping_sub(1);
        if let (Some(slot), Some(agent)) = (slots.get(i), self.ports.get(i)) {
            slot.set_active(!self.managed || agent.state() == PortState::Active);
        }
    }

    /// The attributes, with the forwarding table and ports they cover.
    pub fn agent<'a>(
        &'a mut self,
        (lft, mft): (&'a Lft, &'a Mft),
        slots: &'a [PortSlot],
        wires: &'a dyn Wires,
    ) -> Agent<'a> {
        Agent {
            sma: self,
            lft,
            mft,
            slots,
            wires,
        }
    }
}

/// The switch's attributes for one SMP.
pub(super) struct Agent<'a> {
    sma: &'a mut SwitchSma,
    lft: &'a Lft,
    mft: &'a Mft,
    slots: &'a [PortSlot],
    wires: &'a dyn Wires,
}

impl Agent<'_> {
    fn num_ports(&self) -> u8 {
        u8::try_from(self.slots.len()).unwrap_or(u8::MAX)
    }

    fn node_info(&self, in_port: u8) -> NodeInfo {
        NodeInfo {
            base_version: 1,
            class_version: 1,
            node_type: NodeType::Switch,
            num_ports: self.num_ports(),
            system_image_guid: self.sma.node_guid,
            node_guid: self.sma.node_guid,
            port_guid: self.sma.node_guid,
            partition_cap: PKEY_CAP as u16,
            device_id: 0x7ca0,
            revision: 1,
            local_port_num: in_port,
            vendor_id: 0,
        }
    }

    fn switch_info(&self) -> SwitchInfo {
        let mut info = self.sma.info;
        info.linear_fdb_top = self.lft.top();
        info
    }

    /// PortInfo of `port` as an SMP that came in by `access.in_port` sees
    /// it: LocalPortNum is that port (IBA 14.2.5.6), which OpenSM compares
    /// with the port it asked about so as not to probe back the way it came.
    fn port_info(&self, port: u8, access: Access) -> Result<Block, MadStatus> {
        let mut info = if port == 0 {
            self.sma.port0.info()
        } else {
            let agent = self.sma.ports.get(usize::from(port) - 1);
            agent.ok_or(MadStatus::INVALID_ATTR_VALUE)?.info()
        };
        info.enforcement = self
            .sma
            .enforcement
            .get(usize::from(port))
            .copied()
            .unwrap_or(0);
        info.local_port_num = access.in_port;
        self.sma.m_key.report(&mut info, access.show_key);
        Ok(info.encode())
    }

    /// The port a P_KeyTable modifier names (bits 31:16; 0..=N).
    fn pkey_port(&self, modifier: u32) -> Result<u8, MadStatus> {
        let port = modifier >> 16;
        if port as usize > self.slots.len() {
            return Err(MadStatus::INVALID_ATTR_VALUE);
        }
        Ok(port as u8)
    }

    fn pkey_table(&self, modifier: u32) -> Result<&[u16; PKEY_CAP], MadStatus> {
        Ok(&self.sma.pkeys[usize::from(self.pkey_port(modifier)?)])
    }

    /// Hands external port `port` its table and enforcement bits.
    fn push_partition(&self, port: usize) {
        if let Some(slot) = port.checked_sub(1).and_then(|i| self.slots.get(i)) {
            slot.set_partition(self.sma.enforcement[port], &self.sma.pkeys[port]);
        }
    }

    fn lft_block(&self, block: u32) -> Result<Block, MadStatus> {
        let first = lft_first_lid(block)?;
        let own = self.sma.lid();
        let routes = self.lft.block(first);
        Ok(LftBlock(std::array::from_fn(|i| {
            let lid = first + i as u16;
            match routes[i] {
                Some(port) => port,
                None if lid == own && own != 0 => 0,
                None => LftBlock::NO_ROUTE,
            }
        }))
        .encode())
    }

    fn set_lft_block(&self, block: u32, data: &Block) -> Result<Block, MadStatus> {
        let first = lft_first_lid(block)?;
        let ports = LftBlock::decode(data).0;
        if ports
            .iter()
            .any(|p| *p != LftBlock::NO_ROUTE && *p > self.num_ports())
        {
            return Err(MadStatus::INVALID_ATTR_VALUE);
        }
        self.lft.set_sm_block(first, &ports, LftBlock::NO_ROUTE);
        self.lft_block(block)
    }

    fn mft_select(&self, modifier: u32) -> Result<(usize, u16), MadStatus> {
        let (position, block) = MftBlock::select(modifier);
        let positions = usize::from(self.num_ports()) / 16 + 1;
        if usize::from(position) >= positions || block >= MFT_CAP / MftBlock::LIDS {
            return Err(MadStatus::INVALID_ATTR_VALUE);
        }
        Ok((
            usize::from(position),
            MftBlock::BASE_LID + block * MftBlock::LIDS,
        ))
    }

    fn mft_block(&self, modifier: u32) -> Result<Block, MadStatus> {
        let (position, first) = self.mft_select(modifier)?;
        Ok(MftBlock(std::array::from_fn(|i| {
            self.mft.mask(first + i as u16, position)
        }))
        .encode())
    }

    fn set_mft_block(&mut self, modifier: u32, data: &Block) -> Result<Block, MadStatus> {
        let (position, first) = self.mft_select(modifier)?;
        for (i, mask) in MftBlock::decode(data).0.iter().enumerate() {
            self.mft.set_mask(first + i as u16, position, *mask);
        }
        self.sma.info.multicast_fdb_top = self.mft.top();
        self.mft_block(modifier)
    }

    /// The output port a modifier's low byte names (1..=N).
    fn out_slot(&self, modifier: u32) -> Result<(usize, &PortSlot), MadStatus> {
        let i = usize::from(modifier as u8).wrapping_sub(1);
        let slot = self.slots.get(i).ok_or(MadStatus::INVALID_ATTR_VALUE)?;
        Ok((i, slot))
    }

    /// The output port (0-based) and block (1..=4) a VLArbitrationTable
    /// modifier selects.
    fn vl_arb_select(&self, modifier: u32) -> Result<(usize, u16), MadStatus> {
        let (block, port) = VlArbBlock::select(modifier);
        let port = usize::from(port).wrapping_sub(1);
        if port >= self.slots.len() {
            return Err(MadStatus::INVALID_ATTR_VALUE);
        }
        Ok((port, block))
    }

    fn vl_arb_block(&self, modifier: u32) -> Result<Block, MadStatus> {
        let (port, block) = self.vl_arb_select(modifier)?;
        let tables = self.sma.vl_arb.get(port);
        tables.ok_or(MadStatus::INVALID_ATTR_VALUE)?.block(block)
    }

    fn set_vl_arb_block(&mut self, modifier: u32, data: &Block) -> Result<Block, MadStatus> {
        let (port, block) = self.vl_arb_select(modifier)?;
        let tables = self.sma.vl_arb.get_mut(port);
        let answer = tables
            .ok_or(MadStatus::INVALID_ATTR_VALUE)?
            .set_block(block, data)?;
        if let Some(given) = self.sma.arbitration_given.get_mut(port) {
            *given = None;
        }
        self.push_arbitration(port);
        Ok(answer)
    }

    /// Gives output port `port` (0-based) and its link the port's tables
    /// and VLHighLimit, if they changed: not looked at again while the
    /// tables and VLHighLimit are those it last gave (only this gives the
    /// slot its tables).
    fn push_arbitration(&mut self, port: usize) {
        let (Some(tables), Some(agent), Some(slot), Some(given)) = (
            self.sma.vl_arb.get(port),
            self.sma.ports.get(port),
            self.slots.get(port),
            self.sma.arbitration_given.get_mut(port),
        ) else {
            return;
        };
        let limit = agent.info().vl_high_limit;
        let number = u8::try_from(port + 1).unwrap_or(u8::MAX);
        match given.replace(limit) {
            Some(held) if held == limit => return,
            Some(_) => {
                // The tables are those the slot holds: only the limit
                // moves (an SM's first PortInfo Set of the port, mostly).
                self.wires
                    .set_high_priority(number, &slot.set_high_limit(limit));
                return;
            }
            None => {}
        }
        let low = tables.low_priority();
        if slot.low_priority() != low {
            self.wires.set_low_priority(number, &low);
            slot.set_low_priority(low);
        }
        let high = tables.high_priority(limit);
        if slot.high_priority() != high {
            self.wires.set_high_priority(number, &high);
            slot.set_high_priority(high);
        }
    }
}

fn lft_first_lid(block: u32) -> Result<u16, MadStatus> {
    let first = block.checked_mul(u32::from(LftBlock::LIDS));
    match first.and_then(|f| u16::try_from(f).ok()) {
        Some(f) if f <= MAX_UNICAST_LID => Ok(f),
        _ => Err(MadStatus::INVALID_ATTR_VALUE),
    }
}

impl Attributes for Agent<'_> {
    fn get(&mut self, attr: u16, modifier: u32, access: Access) -> Result<Block, MadStatus> {
        match attr {
            id::NODE_INFO | id::NODE_DESCRIPTION | id::SWITCH_INFO if modifier != 0 => {
                Err(MadStatus::INVALID_ATTR_VALUE)
            }
            id::NODE_INFO => Ok(self.node_info(access.in_port).encode()),
            id::NODE_DESCRIPTION => Ok(NodeDescription(self.sma.description.clone()).encode()),
            id::SWITCH_INFO => Ok(self.switch_info().encode()),
            id::PORT_INFO => {
                let port = u8::try_from(modifier).map_err(|_| MadStatus::INVALID_ATTR_VALUE)?;
                self.port_info(port, access)
            }
            id::P_KEY_TABLE => pkey_block(self.pkey_table(modifier)?, modifier & 0xffff),
            id::LINEAR_FORWARDING_TABLE => self.lft_block(modifier),
            id::MULTICAST_FORWARDING_TABLE => self.mft_block(modifier),
            id::SL_TO_VL_TABLE => Ok(Sl2VlTable(self.out_slot(modifier)?.1.sl2vl()).encode()),
            id::VL_ARB_TABLE => self.vl_arb_block(modifier),
            _ => Err(unsupported()),
        }
    }

    fn set(
        &mut self,
        attr: u16,
        modifier: u32,
        data: &Block,
        access: Access,
    ) -> Result<Block, MadStatus> {
        match attr {
            id::SWITCH_INFO if modifier == 0 => {
                let new = SwitchInfo::decode(data);
                let info = &mut self.sma.info;
                // PortStateChange is cleared by writing 1.
                if new.port_state_change {
                    info.port_state_change = false;
                }
                info.life_time_value = new.life_time_value;
                info.default_port = new.default_port;
                info.default_mcast_primary_port = new.default_mcast_primary_port;
                info.default_mcast_not_primary_port = new.default_mcast_not_primary_port;
                self.lft.set_top(new.linear_fdb_top);
                Ok(self.switch_info().encode())
            }
            id::SWITCH_INFO => Err(MadStatus::INVALID_ATTR_VALUE),
            id::PORT_INFO => {
                let port = u8::try_from(modifier).map_err(|_| MadStatus::INVALID_ATTR_VALUE)?;
                let new = PortInfo::decode(data);
                if port == 0 {
                    self.sma.port0.set(&new, true)?;
                    self.sma.m_key.set(&new);
                } else {
                    let agent = self.sma.ports.get_mut(usize::from(port) - 1);
                    agent
                        .ok_or(MadStatus::INVALID_ATTR_VALUE)?
                        .set(&new, false)?;
                    self.sma.enforcement[usize::from(port)] =
                        new.enforcement & (ENFORCE_INBOUND | ENFORCE_OUTBOUND);
                    self.push_partition(usize::from(port));
                    self.push_arbitration(usize::from(port) - 1);
                    // The one port whose state the Set can change.
                    self.sma.gate_port(port, self.slots);
                }
                self.port_info(port, access)
            }
            id::P_KEY_TABLE => {
                let port = usize::from(self.pkey_port(modifier)?);
                let table = &mut self.sma.pkeys[port];
                let block = set_pkey_block(table, modifier & 0xffff, data)?;
                self.push_partition(port);
                Ok(block)
            }
            id::LINEAR_FORWARDING_TABLE => self.set_lft_block(modifier, data),
            id::MULTICAST_FORWARDING_TABLE => self.set_mft_block(modifier, data),
            id::SL_TO_VL_TABLE => {
                let (_, slot) = self.out_slot(modifier)?;
                let table = Sl2VlTable::decode(data).0;
                let vls = slot.config.vl.weights.len();
                // A data SL on VL15 would mean "drop" in IBA; this switch
                // does not drop by SL, so it refuses such a table.
                let data_sls = table.iter().take(table.len() - 1);
                if data_sls.into_iter().any(|vl| usize::from(*vl) >= vls) {
                    return Err(MadStatus::INVALID_ATTR_VALUE);
                }
                slot.set_sl2vl(table);
                Ok(Sl2VlTable(slot.sl2vl()).encode())
            }
            id::VL_ARB_TABLE => self.set_vl_arb_block(modifier, data),
            _ => Err(unsupported()),
        }
    }

    fn m_key(&self) -> MKey {
        self.sma.m_key
    }

    fn m_key_violation(&mut self, _in_port: u8) {
        self.sma.m_key_violations += 1;
        self.sma.port0.count_m_key_violation();
    }
}

#[cfg(test)]
mod tests;
