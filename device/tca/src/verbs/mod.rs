//! Verbs objects and their guest-memory ABI: protection domains, memory
//! regions and windows, completion queues, RC queue pairs, and the command
//! queue through which the driver creates and destroys them.
//!
//! [`Verbs`] bundles the object tables of one device and enforces the rules
//! that span them (an object names a live PD and CQs; a PD or CQ cannot be
//! destroyed while something names it). The command queue (`cmdq.rs`,
//! `commands.rs`) is the slow path; the transport reaches the data-path
//! checks (`datapath.rs`) through the device's `QpEnv`. The guest-memory
//! layouts are `ibtca-abi`'s (re-exported as [`abi`]); seed 001's key
//! memory, with the checked accesses it keeps and its registers, is
//! `ibtca-transport`'s ([`keys`], [`remote_target`], [`rkm_regs`]).
//!
//! | file | concept |
//! |---|---|
//! | `error.rs` | command errors and their errnos |
//! | `table.rs` | handle tables with generations and user counts |
//! | `ring.rs` | ring geometry, owner-bit convention |
//! | `pd.rs` | protection domains |
//! | `mr.rs`, `mw.rs` | regions, windows, key format, access checks |
//! | `translate.rs` | where a region's bytes are: contiguous or a copied page list |
//! | `fastreg.rs` | fast-registration regions: ALLOC_MR, IBTCA_WR_REG_MR, invalidation |
//! | `sgl.rs` | SGE lists to checked guest-physical ranges |
//! | `cq.rs` | completion queues |
//! | `cq_moderation.rs` | CQ interrupt moderation: count, period, the CQs holding |
//! | `qp_state.rs`, `qp.rs` | QP state machine; QP context and rings |
//! | `qp_query.rs` | QUERY_QP: the device's state and attributes of a QP |
//! | `srq.rs` | shared receive queues: ring, limit event, commands |
//! | `wqe_ring.rs` | send and receive WQEs read at their ring's stride |
//! | `multicast.rs` | multicast groups: UD QPs attached to an MGID, bounded |
//! | `objects.rs` | object creation and destruction across tables |
//! | `datapath.rs` | checks, binds, completions, doorbells for the engine |
//! | `commands.rs`, `cmdq.rs` | command table; command queue in guest memory |

pub mod cmdq;
pub mod commands;
pub mod cq;
pub mod cq_moderation;
pub mod datapath;
pub mod db_record;
pub mod error;
pub mod fastreg;
pub mod mr;
pub mod multicast;
pub mod mw;
pub mod objects;
pub mod pd;
pub mod qp;
pub mod qp_query;
pub mod qp_state;
pub mod ring;
pub mod sgl;
pub mod srq;
pub mod table;
#[cfg(test)]
pub(crate) mod testmem;
pub mod translate;
pub mod wqe_ring;

pub use error::VerbsError;
/// The verbs structures in guest memory (the `ibtca-abi` crate's).
pub use ibtca_abi::verbs as abi;
/// The key memory of seed 001, the checked remote access it keeps and its
/// BAR0 counters (the `ibtca-transport` crate's).
pub use ibtca_transport::{keys, remote_target, rkm_regs};

use crate::regs::{PORT_ACTIVE, PORT_DOWN};
use abi::{
    DeviceAttr, DeviceAttrExt, PortAttr, DEV_CAP_ATOMIC, DEV_CAP_MW, MTU_4096, PORT_PHYS_LINK_UP,
    PORT_PHYS_POLLING, PORT_SPEED_QDR, PORT_WIDTH_4X,
};
use cq::{cq_table, CqTable};
use keys::KeyMemory;
use mr::MrTable;
use multicast::McastTable;
use pd::PdTable;
use qp::{qp_table, QpTable};
use srq::{srq_table, SrqTable};

/// The default full-member P_Key: entry 0 of the port's P_Key table
/// until the subnet manager sets another.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// Table sizes of one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Protection domains.
    pub pds: usize,
    /// Memory regions and windows together.
    pub keys: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Queue pairs.
    pub qps: usize,
    /// Shared receive queues.
    pub srqs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pds: 1024,
            keys: 4096,
            cqs: 1024,
            qps: 1024,
            srqs: 1024,
        }
    }
}

/// The device's identity and the attributes of its one IB port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttrs {
    /// Local identifier.
    pub lid: u16,
    /// Port GUID.
    pub guid: u64,
    /// Node GUID.
    pub node_guid: u64,
    /// IBTCA_PORT_* state (the engine keeps it current).
    pub state: u32,
    /// IBTCA_MTU_* active MTU.
    pub active_mtu: u8,
    /// Data VLs the port runs.
    pub data_vls: u8,
    /// The subnet manager's LID (0: none), as the SM set it in PortInfo.
    pub sm_lid: u16,
    /// LID mask control, as the SM set it.
    pub lmc: u8,
    /// PortInfo CapabilityMask, as the port's agent reports it.
    pub cap_mask: u32,
    /// Entry 0 of the port's P_Key table (the engine keeps it current).
    pub pkey: u16,
}

impl Default for PortAttrs {
    fn default() -> Self {
        PortAttrs {
            lid: 1,
            guid: 0,
            node_guid: 0,
            state: PORT_ACTIVE,
            active_mtu: MTU_4096,
            data_vls: 15,
            sm_lid: 0,
            lmc: 0,
            cap_mask: 0,
            pkey: DEFAULT_PKEY,
        }
    }
}

/// Every verbs object of one device.
pub struct Verbs {
    /// Protection domains.
    pub pds: PdTable,
    /// Memory regions and windows (the TPT).
    pub mrs: MrTable,
    /// Outstanding remote keys per QP (seed 001).
    pub keys: KeyMemory,
    /// Completion queues.
    pub cqs: CqTable,
    /// Queue pairs.
    pub qps: QpTable,
    /// Shared receive queues.
    pub srqs: SrqTable,
    /// Multicast groups and their UD QPs.
    pub mcast: McastTable,
    /// An SRQ limit fired since the engine last looked
    /// ([`Verbs::take_srq_events`]).
    srq_events: bool,
    /// Port attributes.
    pub port: PortAttrs,
    /// Doorbells dropped because they were rung on a page other than the
    /// one their QP or CQ is bound to.
    pub foreign_doorbells: u64,
    /// CQs that may hold completions back (`cq_moderation.rs`), each once.
    held_cqs: Vec<u32>,
}

impl Verbs {
    /// Empty tables of the given sizes; `seed` seeds the key tags (use
    /// [`Verbs::random_seed`] outside tests).
    pub fn new(limits: Limits, port: PortAttrs, seed: u64) -> Self {
        Verbs {
            pds: PdTable::new(limits.pds),
            mrs: MrTable::new(limits.keys, seed),
            keys: KeyMemory::new(),
            cqs: cq_table(limits.cqs),
            qps: qp_table(limits.qps),
            srqs: srq_table(limits.srqs),
            mcast: McastTable::default(),
            srq_events: false,
            port,
            foreign_doorbells: 0,
            held_cqs: Vec::new(),
        }
    }

    /// A seed that differs between runs (time and process id).
    pub fn random_seed() -> u64 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        t ^ (u64::from(std::process::id()) << 32)
    }

    /// QUERY_PORT: `(LID | state << 16, active MTU code)`.
    pub fn query_port(&self) -> (u32, u32) {
        let p = &self.port;
        (u32::from(p.lid) | (p.state << 16), u32::from(p.active_mtu))
    }

    /// QUERY_PORT's reply.
    pub fn port_attr(&self) -> PortAttr {
        let p = &self.port;
        PortAttr {
            port_guid: p.guid.into(),
            max_msg_sz: (crate::transport::MAX_MESSAGE as u32).into(),
            lid: p.lid.into(),
            sm_lid: p.sm_lid.into(),
            pkey: p.pkey.into(),
            state: p.state as u8,
            phys_state: if p.state == PORT_DOWN {
                PORT_PHYS_POLLING
            } else {
                PORT_PHYS_LINK_UP
            },
            max_mtu: MTU_4096,
            active_mtu: p.active_mtu,
            active_width: PORT_WIDTH_4X,
            active_speed: PORT_SPEED_QDR,
            data_vls: p.data_vls,
            lmc: p.lmc,
            cap_mask: p.cap_mask.into(),
            ..Default::default()
        }
    }

    /// QUERY_DEVICE's reply: the node GUID and the limits the tables and
    /// rings enforce.
    pub fn device_attr(&self) -> DeviceAttr {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX).into();
        DeviceAttr {
            node_guid: self.port.node_guid.into(),
            max_mr_size: u64::MAX.into(),
            max_qp: n(self.qps.capacity()),
            max_cq: n(self.cqs.capacity()),
            max_mr: n(self.mrs.capacity()),
            max_pd: n(self.pds.capacity()),
            max_cqe: (1u32 << cq::MAX_CQ_LOG).into(),
            max_qp_wr: (1u32 << qp::MAX_WQ_LOG).into(),
            max_sge: abi::MAX_SEND_SGE,
            max_qp_rd_atom: qp::MAX_RD_ATOMIC,
            max_mtu: MTU_4096,
            phys_ports: 1,
            caps: (DEV_CAP_ATOMIC | DEV_CAP_MW).into(),
        }
    }

    /// QUERY_DEVICE's second reply (IBTCA_DEVICE_ATTR_EXT): page-list,
    /// SRQ and inline limits.
    pub fn device_attr_ext(&self) -> DeviceAttrExt {
        let n = |v: usize| u32::try_from(v).unwrap_or(u32::MAX).into();
        DeviceAttrExt {
            max_mr_pages: translate::MAX_MR_PAGES.into(),
            max_total_mr_pages: u32::try_from(translate::MAX_TOTAL_MR_PAGES)
                .unwrap_or(u32::MAX)
                .into(),
            page_size: (translate::PAGE_SIZE as u32).into(),
            db_pages: crate::regs::DB_PAGES.into(),
            db_bar: crate::regs::DB_BAR as u8,
            max_srq_sge: srq::MAX_SRQ_SGE as u8,
            max_qp_init_rd_atom: qp::MAX_INIT_RD_ATOMIC,
            max_recv_sge: abi::MAX_RECV_SGE,
            max_srq: n(self.srqs.capacity()),
            max_srq_wr: (1u32 << srq::MAX_SRQ_LOG).into(),
            max_inline_data: abi::MAX_INLINE_DATA.into(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_port_packs_lid_state_and_mtu() {
        let port = PortAttrs {
            lid: 0x12,
            guid: 7,
            state: PORT_ACTIVE,
            active_mtu: 3,
            ..PortAttrs::default()
        };
        let v = Verbs::new(Limits::default(), port, 1);
        assert_eq!(v.query_port(), (0x12 | PORT_ACTIVE << 16, 3));
        assert_ne!(Verbs::random_seed(), 0);
    }
}
