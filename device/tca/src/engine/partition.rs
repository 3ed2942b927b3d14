//! Partition enforcement at the device's port (IBA vol 1 §10.9.3): the
//! P_Key table is the port agent's (the SM sets it, `sma::device`); a
//! data packet is let in only if
//!
//! - the port's table holds its BTH P_Key (any packet but an SMP to QP0),
//! - and, for a UD or RC QP, the entry at the QP's own P_Key index does
//!   (QP1 takes any P_Key of the table, IBA §10.9.3's GSI rule),
//!
//! where "holds" is [`Bth::pkey_admits`]: the same 15-bit base and at
//! least one full member. A packet refused is dropped and counted: the
//! engine's `rx_bad_pkey` (PortRcvConstraintErrors), PortInfo
//! P_KeyViolations, and trap 257 to the SM. A Set that changes the table
//! is EVENT_PKEY_CHANGE to the guest. A QP sends with the P_Key at
//! its index (`datagram.rs`, `rc_config`), read afresh for each datagram
//! and when an RC QP starts.

use ibtca_protocol::headers::Bth;
use ibtca_protocol::PacketView;

use super::Engine;
use crate::regs;
use crate::sma::PKEY_CAP;
use crate::verbs::abi::PKEY_TABLE_LEN;
use crate::verbs::qp::QpType;

const _: () = assert!(PKEY_CAP as u32 == PKEY_TABLE_LEN, "one P_Key table size");

impl Engine {
    /// False if the port's P_Key table, or the entry of the UD or RC QP it
    /// is for, does not let the data packet `view` in (SMPs to QP0 are not
    /// checked; a multicast packet's QPs are checked one by one as it is
    /// delivered). The agent records a refusal; the caller counts it
    /// ([`Engine::count_bad_pkey`]).
    pub(super) fn admits_pkey(&mut self, view: &PacketView<'_>) -> bool {
        self.agents.sma.admit_pkey(view) && self.qp_admits_pkey(view.bth.dest_qp, view)
    }

    /// False (and counted) if `view` is for a UD or RC QP of this device
    /// (`qpn`) whose own P_Key table entry does not let it in; true for
    /// any other QP (QP1 takes any P_Key of the port's table) or none.
    pub(super) fn admit_qp_pkey(&mut self, qpn: u32, view: &PacketView<'_>) -> bool {
        let admitted = self.qp_admits_pkey(qpn, view);
        if !admitted {
            self.count_bad_pkey(view);
        }
        admitted
    }

    /// [`Engine::admit_qp_pkey`] without the count (the agent records a
    /// refusal).
    fn qp_admits_pkey(&mut self, qpn: u32, view: &PacketView<'_>) -> bool {
        // QP0 and QP1 on the wire are the port's, never a QP's handle.
        let Some(qp) = self.verbs.qps.get(qpn).filter(|_| qpn > 1) else {
            return true;
        };
        if !matches!(qp.qp_type, QpType::Ud | QpType::Rc) {
            return true;
        }
        if Bth::pkey_admits(self.agents.pkey_at(qp.attrs().pkey_index), view.bth.pkey) {
            return true;
        }
        self.agents.sma.p_key_violation(view);
        false
    }

    /// Counts a data packet dropped for its P_Key.
    pub(super) fn count_bad_pkey(&mut self, view: &PacketView<'_>) {
        self.stats.rx_bad_pkey += 1;
        crate::guest_warn!(
            pkey = format_args!("{:#06x}", view.bth.pkey),
            qpn = view.bth.dest_qp,
            slid = view.lrh.slid,
            "packet with a P_Key the port or QP does not hold: dropped"
        );
    }

    /// Tells the guest (EVENT_PKEY_CHANGE on the event vector) that an
    /// SM's Set changed the port's P_Key table, if one did.
    pub(super) fn announce_pkey_change(&mut self) {
        // QUERY_PORT's P_Key is the table's entry 0.
        self.verbs.port.pkey = self.agents.pkey_at(0);
        if self.agents.sma.take_pkey_change() {
            let keys: Vec<u16> = self
                .agents
                .sma
                .pkeys()
                .iter()
                .copied()
                .filter(|k| k & 0x7fff != 0)
                .collect();
            tracing::info!(pkeys = ?keys, "P_Key table set by the subnet manager");
            self.agents
                .port_state
                .signal(regs::EVENT_PKEY_CHANGE, &self.msix);
        }
    }
}
