//! What the hive's control socket answers to `inspect`
//! ([`crate::control`]): each hosted node's LID, the SM's LID, its traps
//! and every port's state and counters, under the IBA names a switch's or
//! a device's own control socket uses (`ibtca_agents::pma::iba_json`), so
//! `ibtca-fabric stats` shows hosted and process nodes alike.

use ibtca_agents::pma::{iba_json, PortTotals};
use ibtca_agents::sma::TrapCounts;
use ibtca_protocol::mad::attr::PortState;
use ibtca_switch::HostedSwitch;
use serde_json::{json, Value};

fn port_json(port: u8, up: bool, state: PortState, totals: &PortTotals) -> Value {
    json!({
        "port": port,
        "up": up,
        "state": format!("{state:?}"),
        "counters": iba_json(totals),
    })
}

/// A hosted switch: `kind` "switch", port 0's LID, every port.
pub fn switch_json(name: &str, sw: &HostedSwitch) -> Value {
    let ports: Vec<Value> = (1..=sw.ports())
        .filter_map(|p| u8::try_from(p).ok())
        .map(|p| port_json(p, sw.is_port_up(p), sw.port_state(p), &sw.port_totals(p)))
        .collect();
    json!({
        "name": name,
        "kind": "switch",
        "guid": format!("{:#018x}", sw.guid()),
        "lid": sw.lid(),
        "sm_lid": sw.sm_lid(),
        "traps": sw.trap_counts().json(),
        "ports": ports,
    })
}

/// A hosted CA or host port: `kind` "device", its one port (`up`: its
/// link).
pub fn ca_json(
    name: &str,
    guid: u64,
    (lid, state): (u16, PortState),
    up: bool,
    totals: &PortTotals,
    traps: Option<&TrapCounts>,
) -> Value {
    json!({
        "name": name,
        "kind": "device",
        "guid": format!("{guid:#018x}"),
        "lid": lid,
        "traps": traps.map(TrapCounts::json),
        "ports": [port_json(1, up, state, totals)],
    })
}
