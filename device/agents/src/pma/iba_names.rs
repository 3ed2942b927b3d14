//! A port's totals under the names of the IBA counters they feed
//! (PortCounters and PortCountersExtended, IBA vol 1 §16.1.3.5 and
//! §16.1.4.11): what the control sockets of devices, switches and
//! gateways report, and `ibtca-fabric stats` prints. The values are the
//! totals since the node started, not the PMA's since its last Set.
//! PortXmitData and PortRcvData are in 4-byte words, as the PMA's;
//! counters the emulation has no source for (symbol errors, link error
//! recovery, remote physical and local link integrity errors) are 0.

use super::PortTotals;

/// Every counter's IBA name, in the order of PortCounters then the
/// extended counters, with its value in `t`.
pub fn iba_counters(t: &PortTotals) -> [(&'static str, u64); 21] {
    [
        ("SymbolErrorCounter", 0),
        ("LinkErrorRecoveryCounter", 0),
        ("LinkDownedCounter", t.link_downed),
        ("PortRcvErrors", t.rcv_errors),
        ("PortRcvRemotePhysicalErrors", 0),
        ("PortRcvSwitchRelayErrors", t.rcv_switch_relay_errors),
        ("PortXmitDiscards", t.xmit_discards),
        ("PortXmitConstraintErrors", t.xmit_constraint_errors),
        ("PortRcvConstraintErrors", t.rcv_constraint_errors),
        ("LocalLinkIntegrityErrors", 0),
        ("ExcessiveBufferOverrunErrors", t.buffer_overruns),
        ("VL15Dropped", t.vl15_dropped),
        ("PortXmitData", t.xmit_bytes / 4),
        ("PortRcvData", t.rcv_bytes / 4),
        ("PortXmitPkts", t.xmit_pkts),
        ("PortRcvPkts", t.rcv_pkts),
        ("PortXmitWait", t.xmit_wait),
        (
            "PortUnicastXmitPkts",
            t.xmit_pkts.saturating_sub(t.multicast_xmit_pkts),
        ),
        (
            "PortUnicastRcvPkts",
            t.rcv_pkts.saturating_sub(t.multicast_rcv_pkts),
        ),
        ("PortMulticastXmitPkts", t.multicast_xmit_pkts),
        ("PortMulticastRcvPkts", t.multicast_rcv_pkts),
    ]
}

/// [`iba_counters`] as a JSON object (`{"PortXmitData": N, ...}`).
pub fn iba_json(t: &PortTotals) -> serde_json::Value {
    serde_json::Value::Object(
        iba_counters(t)
            .into_iter()
            .map(|(name, v)| (name.to_owned(), v.into()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_in_words_and_unicast_is_the_rest() {
        let t = PortTotals {
            xmit_bytes: 4096,
            rcv_bytes: 40,
            xmit_pkts: 10,
            multicast_xmit_pkts: 3,
            vl15_dropped: 2,
            ..PortTotals::default()
        };
        let j = iba_json(&t);
        assert_eq!(j["PortXmitData"], 1024);
        assert_eq!(j["PortRcvData"], 10);
        assert_eq!(j["PortUnicastXmitPkts"], 7);
        assert_eq!(j["PortMulticastXmitPkts"], 3);
        assert_eq!(j["VL15Dropped"], 2);
        assert_eq!(j["SymbolErrorCounter"], 0);
    }
}
