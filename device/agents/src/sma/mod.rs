//! Subnet management agents (IBA vol 1 §14.2): what a node answers to the
//! SMPs addressed to its QP0, in the device itself (like an HCA's
//! firmware), not in the guest. The device's agent is [`DeviceSma`]; the
//! switch's (port 0) is `switch/sma.rs`, on the same pieces:
//!
//! - [`answer`] (here): versions, methods, the M_Key check, the attribute
//!   Get or Set, the response status, written over the request where its
//!   MAD lies; what belongs to the SM (SMInfo, responses, traps) is left
//!   untouched.
//! - `mkey.rs`: the M_Key and its protection levels.
//! - `port.rs`: a port's PortInfo and its state machine.
//! - `device.rs`: a channel adapter's attributes and its SMPs on the wire.
//! - `trap.rs`: a node's trap to the SM, its repeats and TrapRepress.
//! - `vl_arb.rs`: a port's VLArbitrationTable blocks.
//!
//! The codec (SMP layout, attributes, directed-route steps) is
//! `ibtca_protocol::mad`.

mod device;
mod mkey;
mod port;
#[cfg(test)]
mod tests;
mod trap;
mod vl_arb;

pub use device::{DeviceSma, SmaStats, SmpOutcome};
pub use mkey::{MKey, MKeyCheck};
pub use port::{PortAgent, MAX_UNICAST_LID, MTU_4096};
pub use trap::{TrapCounts, TrapRepeats, TrapTarget, MAX_SENDS as MAX_TRAP_SENDS};
pub use vl_arb::{VlArbTables, VL_ARB_BLOCKS, VL_ARB_ENTRIES};

use ibtca_protocol::headers::Bth;
use ibtca_protocol::mad::attr::{id, Block};
use ibtca_protocol::mad::{
    class, method, respond_in_place, MadHeader, MadStatus, BASE_VERSION, MAD_LEN, SMP_DATA_LEN,
};

/// P_Key table entries per port (two blocks).
pub const PKEY_CAP: usize = 64;
/// GUIDs per port (one GUIDInfo block; index 0 the port GUID).
pub const GUID_CAP: usize = 8;
/// The default partition, full membership: every port's entry 0.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// How an SMP reached the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// The port it came in by.
    pub in_port: u8,
    /// Show the M_Key in a PortInfo answer (false: a Get that passed
    /// under protection level 1 with a wrong key).
    pub show_key: bool,
}

/// A node's attributes, as its agent serves them.
pub trait Attributes {
    /// The attribute `id` selected by `modifier`.
    fn get(&mut self, id: u16, modifier: u32, access: Access) -> Result<Block, MadStatus>;
    /// Sets it from `data`; returns the attribute as it now is.
    fn set(
        &mut self,
        id: u16,
        modifier: u32,
        data: &Block,
        access: Access,
    ) -> Result<Block, MadStatus>;
    /// The node's M_Key.
    fn m_key(&self) -> MKey;
    /// An SMP failed the M_Key check on `in_port`.
    fn m_key_violation(&mut self, in_port: u8);
}

/// What the agent did with an SMP addressed to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The response lies where the request lay: send it back.
    Reply,
    /// It is for the subnet manager (SMInfo, a response, a trap): not the
    /// agent's; its MAD is untouched.
    ForSm,
    /// Nothing goes back: a failed M_Key check, a TrapRepress (the
    /// device's and the switch's agents take theirs before they get here,
    /// `trap.rs`), or no SMP.
    Nothing,
}

/// Serves one SMP that reached its end (a LID-routed SMP for this node, or
/// a directed one delivered here), read where its MAD lies in `mad` and
/// answered there: the response is written over the request
/// ([`respond_in_place`]: the bytes the decoded request's response
/// encodes to), not decoded and encoded again.
pub fn answer(agent: &mut impl Attributes, mad: &mut [u8; MAD_LEN], in_port: u8) -> Answer {
    if !matches!(mad[1], class::SUBN_LID_ROUTED | class::SUBN_DIRECTED_ROUTE) {
        return Answer::Nothing;
    }
    let h = MadHeader::read(mad);
    if h.is_response()
        || matches!(h.method, method::TRAP | method::REPORT)
        || h.attr_id == id::SM_INFO
    {
        return Answer::ForSm;
    }
    if h.method == method::TRAP_REPRESS {
        return Answer::Nothing;
    }
    if h.base_version != BASE_VERSION || h.class_version != 1 {
        return reply(mad, MadStatus::BAD_VERSION, None);
    }
    if !matches!(h.method, method::GET | method::SET) {
        return reply(mad, MadStatus::UNSUPPORTED_METHOD, None);
    }
    let m_key = u64::from_be_bytes(*mad[24..].first_chunk().unwrap_or(&[0; 8]));
    let show_key = match agent.m_key().check(h.method, m_key) {
        MKeyCheck::Pass => true,
        MKeyCheck::PassGet { show_key } => show_key,
        MKeyCheck::Fail => {
            agent.m_key_violation(in_port);
            return Answer::Nothing;
        }
    };
    let access = Access { in_port, show_key };
    let result = if h.method == method::GET {
        agent.get(h.attr_id, h.attr_mod, access)
    } else {
        let data: Block = *mad[64..].first_chunk().unwrap_or(&[0; SMP_DATA_LEN]);
        agent.set(h.attr_id, h.attr_mod, &data, access)
    };
    match result {
        Ok(block) => reply(mad, MadStatus::OK, Some(&block)),
        Err(status) => reply(mad, status, None),
    }
}

/// The response of `status` (and `data`) written over the request in `mad`.
fn reply(mad: &mut [u8; MAD_LEN], status: MadStatus, data: Option<&Block>) -> Answer {
    respond_in_place(mad, status, data);
    Answer::Reply
}

/// The status for an attribute a node does not serve with `method`.
pub fn unsupported() -> MadStatus {
    MadStatus::UNSUPPORTED_METHOD_ATTR
}

/// True if `table` holds an entry that lets a packet with BTH P_Key
/// `pkey` in ([`Bth::pkey_admits`], IBA vol 1 §10.9.3).
pub fn pkey_held(table: &[u16], pkey: u16) -> bool {
    table.iter().any(|&k| Bth::pkey_admits(k, pkey))
}

/// Reads P_Key table block `block` of `table`.
pub fn pkey_block(table: &[u16; PKEY_CAP], block: u32) -> Result<Block, MadStatus> {
    use ibtca_protocol::mad::attr::PKeyTable;
    let start = usize::try_from(block)
        .unwrap_or(usize::MAX)
        .saturating_mul(32);
    let keys = table
        .get(start..start.saturating_add(32))
        .ok_or(MadStatus::INVALID_ATTR_VALUE)?;
    let mut out = [0u16; 32];
    out.copy_from_slice(keys);
    Ok(PKeyTable(out).encode())
}

/// Writes P_Key table block `block` of `table` from `data`.
pub fn set_pkey_block(
    table: &mut [u16; PKEY_CAP],
    block: u32,
    data: &Block,
) -> Result<Block, MadStatus> {
    use ibtca_protocol::mad::attr::PKeyTable;
    let start = usize::try_from(block)
        .unwrap_or(usize::MAX)
        .saturating_mul(32);
    let keys = table
        .get_mut(start..start.saturating_add(32))
        .ok_or(MadStatus::INVALID_ATTR_VALUE)?;
    keys.copy_from_slice(&PKeyTable::decode(data).0);
    pkey_block(table, block)
}
