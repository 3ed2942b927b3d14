//! The subnet management agent of a device (a channel adapter with one
//! port): NodeInfo, NodeDescription, PortInfo, P_KeyTable, GUIDInfo and
//! VLArbitrationTable (the port's egress arbitration), and its SMPs on the wire (LID-routed, or directed with the device at
//! the end of the path or of its LID-routed last part).
//!
//! A capability mask change the host makes (SET_PORT_CAPS: IsSM,
//! IsDeviceManagementSupported) raises trap 144 to the SM once it is known
//! (`trap.rs`), a packet dropped for its P_Key trap 257; each is repeated
//! on the engine's timers until the SM's TrapRepress.
//!
//! SMInfo, responses and traps belong to the SM: they are counted and
//! dropped here until QP0 reaches the guest (the guest's SM then gets
//! them through the driver's QP0, `process_mad` for its own port).

use std::time::Instant;

use ibtca_protocol::mad::attr::{
    id, producer, Block, GuidInfo, KeyViolation, NodeDescription, NodeInfo, NodeType, Notice,
    PortInfo, PortState, VlArbBlock,
};
use ibtca_protocol::mad::directed::{self, DrBytes, DrStep};
use ibtca_protocol::mad::{class, method, MadHeader, MadStatus, Smp, MAD_LEN, PERMISSIVE_LID, QP0};
use ibtca_protocol::{encoded, Opcode, PacketView};

use super::{
    answer, pkey_block, set_pkey_block, unsupported, Access, Answer, Attributes, MKey, MKeyCheck,
    PortAgent, TrapCounts, TrapRepeats, VlArbTables, DEFAULT_PKEY, GUID_CAP, PKEY_CAP,
};
use ibtca_link::HighPriority;

/// The PCI device ID, also NodeInfo's DeviceID.
const DEVICE_ID: u16 = 0x7ca0;
/// High bits of a device's trap TIDs (the low bits count).
const TRAP_TID_BASE: u64 = 0x7ca0_9000_0000_0000;

/// What the agent counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmaStats {
    /// SMPs received.
    pub smps: u64,
    /// Responses sent.
    pub replies: u64,
    /// SMPs for the SM (SMInfo, responses, traps): dropped for now.
    pub for_sm: u64,
    /// SMPs dropped: not an SMP, a directed route that does not end here,
    /// a failed M_Key check.
    pub dropped: u64,
}

/// What one SMP led to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmpOutcome {
    /// The response packet to send, if any.
    pub reply: Option<Vec<u8>>,
    /// The port's LID or state changed (a PortInfo Set).
    pub port_changed: bool,
    /// The port's VL arbitration changed (a VLArbitrationTable Set, or
    /// VLHighLimit in a PortInfo Set): see [`DeviceSma::low_priority`] and
    /// [`DeviceSma::high_priority`].
    pub arbitration_changed: bool,
}

/// A device's agent.
#[derive(Debug, Clone)]
pub struct DeviceSma {
    node_guid: u64,
    port_guid: u64,
    description: String,
    port: PortAgent,
    m_key: MKey,
    pkeys: [u16; PKEY_CAP],
    /// A P_KeyTable Set changed the table since [`DeviceSma::take_pkey_change`].
    pkeys_changed: bool,
    guids: [u64; GUID_CAP],
    vl_arb: VlArbTables,
    /// A Set in the SMP being served changed the port's VL arbitration
    /// (its tables or VLHighLimit): [`SmpOutcome::arbitration_changed`].
    arbitration_changed: bool,
    managed: bool,
    stats: SmaStats,
    traps: TrapRepeats,
    /// The SMPs it sends carry their CRCs (the default); false once
    /// [`DeviceSma::leave_crcs_unstamped`].
    stamp: bool,
}

impl DeviceSma {
    /// The agent of a device with these GUIDs and NodeDescription, its
    /// port at `lid` with `data_vls` data VLs. `managed`: an SM brings the
    /// port up (link up is Init, the SM makes it Active); otherwise link
    /// up is Active at once, with the given LID, as without an SM.
    pub fn new(
        node_guid: u64,
        port_guid: u64,
        description: &str,
        lid: u16,
        data_vls: u8,
        managed: bool,
    ) -> Self {
        let mut pkeys = [0; PKEY_CAP];
        pkeys[0] = DEFAULT_PKEY;
        let mut guids = [0; GUID_CAP];
        guids[0] = port_guid;
        DeviceSma {
            node_guid,
            port_guid,
            description: description.to_owned(),
            port: PortAgent::new(1, lid, data_vls, PortAgent::CA_CAPS),
            m_key: MKey::default(),
            pkeys,
            pkeys_changed: false,
            guids,
            vl_arb: VlArbTables::from_weights(&vec![1; usize::from(data_vls)]),
            arbitration_changed: false,
            managed,
            stats: SmaStats::default(),
            traps: TrapRepeats::new(TRAP_TID_BASE),
            stamp: true,
        }
    }

    /// Leaves the ICRC and VCRC of the SMPs it sends (answers, traps) zero
    /// from now on ([`encoded::smp_packet`]): for a port whose peer is a
    /// node of the same process, which reads neither, and whose owner
    /// stamps what leaves that process on a wire
    /// ([`encoded::stamp_unstamped`]).
    pub fn leave_crcs_unstamped(&mut self) {
        self.stamp = false;
    }

    /// Takes the port's configured data-VL weights (VL0 first) as its
    /// low-priority VL arbitration table, until an SM sets one.
    pub fn set_vl_weights(&mut self, weights: &[u8]) {
        self.vl_arb = VlArbTables::from_weights(weights);
    }

    /// The port's low-priority VL arbitration table: (VL, weight in
    /// 64-byte units) entries in order.
    pub fn low_priority(&self) -> Vec<(u8, u8)> {
        self.vl_arb.low_priority()
    }

    /// The port's high-priority table and VLHighLimit.
    pub fn high_priority(&self) -> HighPriority {
        self.vl_arb.high_priority(self.port.info().vl_high_limit)
    }

    /// The port's LID.
    pub fn lid(&self) -> u16 {
        self.port.lid()
    }

    /// The subnet manager's LID and LID mask control, as the SM set them
    /// in PortInfo (0, 0 before it did).
    pub fn sm_lid_and_lmc(&self) -> (u16, u8) {
        let i = self.port.info();
        (i.master_sm_lid, i.lmc)
    }

    /// The port's PortInfo CapabilityMask (what a PortInfo Get answers).
    pub fn capability_mask(&self) -> u32 {
        self.port.info().capability_mask
    }

    /// The port's state.
    pub fn state(&self) -> PortState {
        self.port.state()
    }

    /// The NodeDescription it answers.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// True if an SM brings the port up.
    pub fn managed(&self) -> bool {
        self.managed
    }

    /// The port's P_Key table.
    pub fn pkeys(&self) -> &[u16; PKEY_CAP] {
        &self.pkeys
    }

    /// True (once) if an SM's Set changed the P_Key table since the last
    /// call: the guest's driver is told (IB_EVENT_PKEY_CHANGE).
    pub fn take_pkey_change(&mut self) -> bool {
        std::mem::take(&mut self.pkeys_changed)
    }

    /// True if the port's P_Key table lets the packet `view` in; one it
    /// does not is a P_Key violation ([`DeviceSma::p_key_violation`]).
    pub fn admit_pkey(&mut self, view: &PacketView<'_>) -> bool {
        let held = super::pkey_held(&self.pkeys, view.bth.pkey);
        if !held {
            self.p_key_violation(view);
        }
        held
    }

    /// The port dropped the packet `view` for its P_Key (the port's table,
    /// or the destination QP's entry): counted in PortInfo P_KeyViolations
    /// and reported to the SM as trap 257 once the SM is known (a trap
    /// outstanding already takes it along: one at a time).
    pub fn p_key_violation(&mut self, view: &PacketView<'_>) {
        self.port.count_p_key_violation();
        let grh = view.grh.as_ref();
        let v = KeyViolation {
            slid: view.lrh.slid,
            dlid: view.lrh.dlid,
            key: u32::from(view.bth.pkey),
            sl: view.lrh.sl,
            src_qp: view.ext.deth.map_or(0, |d| d.src_qp),
            dest_qp: view.bth.dest_qp,
            sgid: grh.map_or([0; 16], |g| g.sgid),
            dgid: grh.map_or([0; 16], |g| g.dgid),
        };
        let target = self.port.trap_target();
        let notice = |t: &super::TrapTarget| Notice::bad_p_key(t.own_lid, producer::CA, &v);
        self.traps.raise(target, notice, Instant::now());
    }

    /// Counters.
    pub fn stats(&self) -> SmaStats {
        self.stats
    }

    /// The link came up or went down; true if the port state changed.
    pub fn link_changed(&mut self, up: bool) -> bool {
        self.port.link_changed(up, self.managed)
    }

    /// The host sets or clears its capability bits (IsSM,
    /// IsDeviceManagementSupported); returns the port's capability mask.
    /// A change raises trap 144 (informational, producer CA, the new
    /// mask) if the SM is known.
    pub fn set_host_caps(&mut self, set: u32, clear: u32) -> u32 {
        let before = self.port.info().capability_mask;
        let caps = self.port.set_host_caps(set, clear);
        if caps != before {
            let target = self.port.trap_target();
            let notice = |t: &super::TrapTarget| {
                Notice::capability_mask_change(t.own_lid, producer::CA, caps)
            };
            self.traps.raise(target, notice, Instant::now());
        }
        caps
    }

    /// The trap due at `now` as a packet to the SM (counted as sent), if
    /// one is.
    pub fn due_trap(&mut self, now: Instant) -> Option<Vec<u8>> {
        let (smp, target) = self.traps.due(now)?;
        let packet = encoded::smp_packet(&smp, target.own_lid, target.sm_lid, self.stamp);
        tracing::info!(
            tid = format_args!("{:#x}", smp.tid),
            trap = Notice::decode(&smp.data).trap_number,
            sm_lid = target.sm_lid,
            counts = ?self.traps.counts(),
            "trap to the SM"
        );
        Some(packet)
    }

    /// When the outstanding trap is next due.
    pub fn next_trap_deadline(&self) -> Option<Instant> {
        self.traps.next_deadline()
    }

    /// The trap counters.
    pub fn trap_counts(&self) -> TrapCounts {
        self.traps.counts()
    }

    /// Handles a packet to QP0.
    pub fn on_packet(&mut self, view: &PacketView<'_>) -> SmpOutcome {
        self.stats.smps += 1;
        let before = (self.port.lid(), self.port.state());
        self.arbitration_changed = false;
        let for_sm = self.stats.for_sm;
        let reply = self.serve(view);
        if reply.is_some() {
            self.stats.replies += 1;
        } else if self.stats.for_sm == for_sm {
            self.stats.dropped += 1;
        }
        SmpOutcome {
            reply,
            port_changed: before != (self.port.lid(), self.port.state()),
            arbitration_changed: self.arbitration_changed,
        }
    }

    /// The answer to the SMP in `view`, built in a packet of its own from
    /// the request's MAD and answered there ([`answer`]: not decoded).
    fn serve(&mut self, view: &PacketView<'_>) -> Option<Vec<u8>> {
        if view.opcode() != Opcode::UdSendOnly || view.bth.dest_qp != QP0 {
            return None;
        }
        let request: &[u8; MAD_LEN] = view.payload.try_into().ok()?;
        if !matches!(
            request[1],
            class::SUBN_LID_ROUTED | class::SUBN_DIRECTED_ROUTE
        ) {
            return None;
        }
        let mut packet = encoded::mad_packet(request, 0, 0, false);
        let at = encoded::smp_mad_at(&packet)?;
        let mad = packet.get_mut(at..)?.first_chunk_mut::<MAD_LEN>()?;
        let directed = mad[1] == class::SUBN_DIRECTED_ROUTE;
        if directed && directed::on_receive(&mut DrBytes(mad), false, 1, 1) != DrStep::Deliver {
            return None;
        }
        if mad[3] == method::TRAP_REPRESS {
            // Only the holder of the M_Key may silence a trap (checked as a
            // Set is, IBA §14.2.4).
            let smp = Smp::parse(mad).ok()?;
            if self.m_key.check(smp.method, smp.m_key) != MKeyCheck::Pass {
                self.port.count_m_key_violation();
                return None;
            }
            let tid = self.traps.repress(&smp);
            tracing::info!(tid = ?tid, counts = ?self.traps.counts(), "TrapRepress from the SM");
            return None;
        }
        match answer(self, mad, 1) {
            Answer::Reply => {}
            Answer::ForSm => {
                // The SM's, once QP0 reaches the guest.
                self.stats.for_sm += 1;
                let h = MadHeader::read(mad);
                tracing::debug!(
                    attr = format_args!("{:#06x}", h.attr_id),
                    method = format_args!("{:#04x}", h.method),
                    "SMP for the subnet manager: no SM on this port yet, dropped"
                );
                return None;
            }
            Answer::Nothing => return None,
        }
        let (slid, dlid) = if directed {
            match directed::respond(&mut DrBytes(mad), 1) {
                DrStep::Forward(1) => (PERMISSIVE_LID, PERMISSIVE_LID),
                // It came by a LID-routed last part: back to its switch.
                DrStep::BackToSource => (self.port.lid(), view.lrh.slid),
                _ => return None,
            }
        } else {
            (self.port.lid(), view.lrh.slid)
        };
        encoded::set_lids(&mut packet, dlid, slid);
        if self.stamp {
            encoded::restamp_crcs(&mut packet);
        }
        Some(packet)
    }

    fn node_info(&self) -> NodeInfo {
        NodeInfo {
            base_version: 1,
            class_version: 1,
            node_type: NodeType::Ca,
            num_ports: 1,
            system_image_guid: self.node_guid,
            node_guid: self.node_guid,
            port_guid: self.port_guid,
            partition_cap: PKEY_CAP as u16,
            device_id: DEVICE_ID,
            revision: 1,
            local_port_num: 1,
            vendor_id: 0,
        }
    }

    fn port_info(&self, show_key: bool) -> Block {
        let mut info = self.port.info();
        self.m_key.report(&mut info, show_key);
        info.encode()
    }
}

/// The block (1..=4) a CA's VLArbitrationTable modifier selects; its
/// port (bits 7:0) is 1, or 0 for the port the SMP came in by.
fn vl_arb_block(modifier: u32) -> Result<u16, MadStatus> {
    let (block, port) = VlArbBlock::select(modifier);
    check_port(u32::from(port))?;
    Ok(block)
}

/// A CA's PortInfo modifier names its port: 1, or 0 for the port the SMP
/// came in by.
fn check_port(modifier: u32) -> Result<(), MadStatus> {
    match modifier {
        0 | 1 => Ok(()),
        _ => Err(MadStatus::INVALID_ATTR_VALUE),
    }
}

impl Attributes for DeviceSma {
    fn get(&mut self, attr: u16, modifier: u32, access: Access) -> Result<Block, MadStatus> {
        match attr {
            id::NODE_INFO | id::NODE_DESCRIPTION if modifier != 0 => {
                Err(MadStatus::INVALID_ATTR_VALUE)
            }
            id::NODE_INFO => Ok(self.node_info().encode()),
            id::NODE_DESCRIPTION => Ok(NodeDescription(self.description.clone()).encode()),
            id::PORT_INFO => {
                check_port(modifier)?;
                Ok(self.port_info(access.show_key))
            }
            id::P_KEY_TABLE => pkey_block(&self.pkeys, modifier),
            id::GUID_INFO if modifier == 0 => Ok(GuidInfo(self.guids).encode()),
            id::GUID_INFO => Err(MadStatus::INVALID_ATTR_VALUE),
            id::VL_ARB_TABLE => self.vl_arb.block(vl_arb_block(modifier)?),
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
            id::PORT_INFO => {
                check_port(modifier)?;
                let new = PortInfo::decode(data);
                let limit = self.port.info().vl_high_limit;
                let set = self.port.set(&new, true);
                self.arbitration_changed |= self.port.info().vl_high_limit != limit;
                set?;
                self.m_key.set(&new);
                Ok(self.port_info(access.show_key))
            }
            id::P_KEY_TABLE => {
                let before = self.pkeys;
                let r = set_pkey_block(&mut self.pkeys, modifier, data);
                self.pkeys_changed |= self.pkeys != before;
                r
            }
            id::GUID_INFO if modifier == 0 => {
                // Index 0 is the port GUID itself: read-only.
                let given = GuidInfo::decode(data).0;
                for (have, new) in self.guids.iter_mut().zip(given).skip(1) {
                    *have = new;
                }
                Ok(GuidInfo(self.guids).encode())
            }
            id::GUID_INFO => Err(MadStatus::INVALID_ATTR_VALUE),
            id::VL_ARB_TABLE => {
                let before = self.vl_arb.clone();
                let r = self.vl_arb.set_block(vl_arb_block(modifier)?, data);
                self.arbitration_changed |= self.vl_arb != before;
                r
            }
            _ => Err(unsupported()),
        }
    }

    fn m_key(&self) -> MKey {
        self.m_key
    }

    fn m_key_violation(&mut self, _in_port: u8) {
        self.port.count_m_key_violation();
    }
}
