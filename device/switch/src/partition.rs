//! Partition enforcement at a switch port (IBA vol 1 §10.9.4): the SM
//! gives an external port a P_Key table and turns on
//! PartitionEnforcementInbound and/or Outbound in its PortInfo; a data
//! packet whose BTH P_Key that table does not hold (`sma::pkey_held`) is
//! dropped where it fails, counted as `drop_pkey_inbound` on the input
//! port (PortRcvConstraintErrors) or `drop_pkey_outbound` on the output
//! port (PortXmitConstraintErrors). SMPs (VL15) are never checked. A port
//! that does not enforce costs one atomic load per packet; one that does,
//! a look through its table under the port's lock.

use ibtca_protocol::encoded;

use super::port::{ENFORCE_INBOUND, ENFORCE_OUTBOUND};
use super::{Core, DropReason, PortSlot};

impl Core {
    /// Partition enforcement on the way through (IBA vol 1 §10.9.4): false
    /// (and counted where it failed) if the input port enforces inbound,
    /// or the output port outbound, and its P_Key table does not hold the
    /// packet's P_Key.
    pub(super) fn partitions_admit(
        &self,
        in_slot: &PortSlot,
        out_slot: &PortSlot,
        packet: &[u8],
    ) -> bool {
        let pkey = encoded::pkey(packet).unwrap_or(0);
        if !in_slot.admits(pkey, ENFORCE_INBOUND) {
            in_slot.counters.dropped(DropReason::PkeyInbound);
            return false;
        }
        if !out_slot.admits(pkey, ENFORCE_OUTBOUND) {
            out_slot.counters.dropped(DropReason::PkeyOutbound);
            return false;
        }
        true
    }
}
