//! The control messages of ibsim's protocol at the port: CONNECT takes a
//! slot (refused for another node's id, a second SM, or no free slot),
//! DISCONNECT frees it, and the queries answer from the port's agent, as
//! an SMP of the port's own would (NodeInfo, PortInfo and the P_Key table
//! in their SMP layout, which umad2sim turns into its sysfs files).

use ibtca_protocol::mad::attr::{cap, id, PortInfo};
use ibtca_protocol::mad::{method, Smp, SmpRoute};

use crate::clients::{Client, MAX_CLIENTS};
use crate::port::SimPort;
use crate::wire::{ClientInfo, Ctl, CtlType, CTL_DATA_LEN};

/// What a control message led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtlOutcome {
    /// The answer to send back to where the message came from.
    pub reply: Ctl,
    /// A CONNECT took this slot for the client of this pid: its data
    /// socket must now be connected to the client's.
    pub attached: Option<(usize, u32)>,
}

/// NodeInfo's VendorID, DeviceID and Revision (IBA 14.2.5.3: DeviceID at
/// byte 30, Revision at 32, VendorID the low 24 bits of the word at 36).
fn vendor_fields(node_info: &[u8; 64]) -> (u32, u32, u32) {
    let word = |at: usize| u32::from_be_bytes(node_info[at..at + 4].try_into().unwrap_or([0; 4]));
    let device_id = u32::from(u16::from_be_bytes([node_info[30], node_info[31]]));
    (word(36) & 0x00ff_ffff, device_id, word(32))
}

impl SimPort {
    /// A control datagram; `None` (nothing sent back, a line logged) if it
    /// is not one. `gone(pid)` says whether a client's process has ended.
    pub fn on_ctl(&mut self, bytes: &[u8], gone: impl Fn(u32) -> bool) -> Option<CtlOutcome> {
        let Some(mut ctl) = Ctl::parse(bytes) else {
            ibtca_log::guest_warn!(
                len = bytes.len(),
                "malformed control message (not 80 bytes with ibsim's magic): dropped"
            );
            return None;
        };
        let kind = CtlType::from_wire(ctl.kind);
        let slot = ctl.client_id as usize;
        let attached_client = slot < MAX_CLIENTS && self.clients.get(slot).is_some();
        let mut attached = None;
        let ok = match kind {
            Some(CtlType::Connect) => {
                attached = self.connect(&mut ctl.data, gone);
                attached.is_some()
            }
            Some(CtlType::Disconnect) => {
                if let Some(c) = self.detach(slot) {
                    tracing::info!(slot, pid = c.pid, "client detached");
                }
                true
            }
            Some(k) if attached_client => self.query(k, slot, &mut ctl.data, &gone),
            other => {
                ibtca_log::guest_warn!(
                    kind = ctl.kind,
                    client = ctl.client_id,
                    known = other.is_some(),
                    "control message of an unknown type or client: refused"
                );
                false
            }
        };
        if !ok {
            ctl.kind = CtlType::Error.to_wire();
        }
        Some(CtlOutcome {
            reply: ctl,
            attached,
        })
    }

    /// Whether a client other than `slot` is the port's SM; one whose
    /// process has ended (an SM killed before DISCONNECT) is detached
    /// first, so that a restarted SM takes its place.
    fn other_sm(&mut self, slot: Option<usize>, gone: &impl Fn(u32) -> bool) -> bool {
        let Some(sm) = self.clients.sm().filter(|&s| Some(s) != slot) else {
            return false;
        };
        if self.clients.get(sm).is_some_and(|c| gone(c.pid)) {
            tracing::info!(slot = sm, "SM client's process gone: detached");
            self.detach(sm);
            return false;
        }
        true
    }

    /// Frees `slot`; an SM client takes IsSM with it.
    pub fn detach(&mut self, slot: usize) -> Option<Client> {
        let c = self.clients.detach(slot)?;
        if c.issm {
            self.sma.set_host_caps(0, cap::IS_SM);
        }
        Some(c)
    }

    fn connect(
        &mut self,
        data: &mut [u8; CTL_DATA_LEN],
        gone: impl Fn(u32) -> bool,
    ) -> Option<(usize, u32)> {
        let mut info = ClientInfo::parse(data);
        let s = &self.settings;
        if !info.node_id.is_empty() && info.node_id != s.node_id && info.node_id != s.description {
            tracing::warn!(node = %info.node_id, ours = %s.node_id, "client asked for another node: refused");
            return None;
        }
        if info.issm && self.other_sm(None, &gone) {
            tracing::warn!(pid = info.id, "a second SM client: refused");
            return None;
        }
        let client = Client {
            pid: info.id,
            issm: info.issm,
        };
        let Some(slot) = self.clients.attach(client, gone) else {
            tracing::warn!(pid = info.id, "no free client slot: refused");
            return None;
        };
        tracing::info!(slot, pid = info.id, issm = info.issm, "client attached");
        let pid = info.id;
        info.id = slot as u32;
        info.node_id = self.settings.node_id.clone();
        info.write(data);
        Some((slot, pid))
    }

    /// Gets attribute `attr` of the port by its agent.
    fn attribute(&mut self, attr: u16, modifier: u32) -> Option<[u8; 64]> {
        let smp = Smp::new(SmpRoute::Directed, method::GET, attr, modifier);
        Some(self.local_smp(smp)?.data)
    }

    fn query(
        &mut self,
        kind: CtlType,
        slot: usize,
        data: &mut [u8; CTL_DATA_LEN],
        gone: &impl Fn(u32) -> bool,
    ) -> bool {
        let answer = match kind {
            CtlType::GetNodeInfo => self.attribute(id::NODE_INFO, 0),
            CtlType::GetPortInfo => self.attribute(id::PORT_INFO, 0),
            CtlType::GetPKeys => self.attribute(id::P_KEY_TABLE, 0),
            CtlType::GetPort => {
                let (lid, state) = self.lid_and_state();
                let mut d = [0u8; 64];
                d[0..2].copy_from_slice(&lid.to_ne_bytes());
                d[2] = state as u8;
                Some(d)
            }
            CtlType::GetVendor => self.attribute(id::NODE_INFO, 0).map(|ni| {
                let (vendor, part, hw) = vendor_fields(&ni);
                let mut d = [0u8; 64];
                d[0..4].copy_from_slice(&vendor.to_ne_bytes());
                d[4..8].copy_from_slice(&part.to_ne_bytes());
                d[8..12].copy_from_slice(&hw.to_ne_bytes());
                d[16..24].copy_from_slice(&1u64.to_ne_bytes());
                d
            }),
            CtlType::GetGid => self.attribute(id::PORT_INFO, 0).map(|pi| {
                let mut d = [0u8; 64];
                d[0..8].copy_from_slice(&PortInfo::decode(&pi).gid_prefix.to_be_bytes());
                d[8..16].copy_from_slice(&self.settings.port_guid.to_be_bytes());
                d
            }),
            CtlType::GetGuid => {
                let mut d = [0u8; 64];
                d[0..8].copy_from_slice(&self.settings.node_guid.to_be_bytes());
                Some(d)
            }
            CtlType::SetIsSm => {
                let issm = i32::from_ne_bytes(data[0..4].try_into().unwrap_or([0; 4])) != 0;
                if issm && self.other_sm(Some(slot), gone) {
                    tracing::warn!(slot, "IsSM from a second SM client: refused");
                    return false;
                }
                self.clients.set_issm(slot, issm);
                let caps = if issm {
                    self.sma.set_host_caps(cap::IS_SM, 0)
                } else {
                    self.sma.set_host_caps(0, cap::IS_SM)
                };
                tracing::info!(slot, issm, caps = format_args!("{caps:#x}"), "IsSM");
                return true;
            }
            CtlType::Connect | CtlType::Disconnect | CtlType::Error => None,
        };
        match answer {
            Some(d) => {
                *data = d;
                true
            }
            None => false,
        }
    }
}
