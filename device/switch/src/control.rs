//! The control socket of a running switch process: one command per line,
//! one reply line each (`ok ...` or `error ...`), so that faults, delays
//! and link state can be changed at run time and counters read:
//!
//! ```text
//! stats                      ok [{"port":1,"up":true,...},...]
//! traps                      ok {"sent":N,"repressed":N,...} (port 0's traps)
//! inspect                    ok {"lid":N,"sm_lid":N,"ports":[{"port":1,"state":"Active",
//!                            "counters":{"PortXmitData":N,...}},...]} (IBA names)
//! down PORT | up PORT        take a port's link down / start it again
//! faults PORT SPEC|none      drop:N,dup:N,reorder:N,corrupt:N,seed:N (per mille)
//! delay PORT MICROSECONDS    hold what the port sends
//! ```
//!
//! `ibtca-fabric link` and `ibtca-fabric stats` speak it.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use ibtca_agents::control_socket::request;
use ibtca_agents::control_socket::LineServer;

use ibtca_link::FaultPlan;

use super::{spec, Switch};

/// Counters of every port as JSON.
pub fn stats_json(switch: &Switch) -> serde_json::Value {
    let ports: Vec<_> = (1..=switch.ports())
        .filter_map(|p| u8::try_from(p).ok())
        .map(|p| {
            let s = switch.port_stats(p).unwrap_or_default();
            // Up first: a port shows up only once its peer is stored.
            let up = switch.is_port_up(p);
            let peer = switch.peer(p);
            serde_json::json!({
                "port": p,
                "up": up,
                "peer_lid": peer.map(|x| x.lid),
                "peer_guid": peer.map(|x| format!("{:#018x}", x.node_guid)),
                "rx_packets": s.rx_packets,
                "rx_bytes": s.rx_bytes,
                "tx_packets": s.tx_packets,
                "tx_bytes": s.tx_bytes,
                "rx_multicast": s.rx_multicast,
                "tx_multicast": s.tx_multicast,
                "drop_unknown_lid": s.drop_unknown_lid,
                "drop_crc_error": s.drop_crc_error,
                "drop_malformed": s.drop_malformed,
                "drop_queue_full": s.drop_queue_full,
                "drop_link_down": s.drop_link_down,
                "drop_port_inactive": s.drop_port_inactive,
                "drop_pkey_inbound": s.drop_pkey_inbound,
                "drop_pkey_outbound": s.drop_pkey_outbound,
                "credit_stalls": switch.link_stats(p).map_or(0, |l| l.credit_stalls),
            })
        })
        .collect();
    serde_json::Value::Array(ports)
}

/// The switch's LIDs and every port's state and counters under their IBA
/// names (`pma::iba_json`) as JSON.
pub fn inspect_json(switch: &Switch) -> serde_json::Value {
    let ports: Vec<_> = (1..=switch.ports())
        .filter_map(|p| u8::try_from(p).ok())
        .map(|p| {
            // Up first: a port shows up only once its peer and its state
            // are stored.
            let up = switch.is_port_up(p);
            let peer = switch.peer(p);
            serde_json::json!({
                "port": p,
                "up": up,
                "state": format!("{:?}", switch.port_state(p)),
                "peer_lid": peer.map(|x| x.lid),
                "peer_guid": peer.map(|x| format!("{:#018x}", x.node_guid)),
                "counters": ibtca_agents::pma::iba_json(&switch.port_totals(p)),
            })
        })
        .collect();
    serde_json::json!({
        "name": switch.name(),
        "guid": format!("{:#018x}", switch.guid()),
        "lid": switch.lid(),
        "sm_lid": switch.sm_lid(),
        "ports": ports,
    })
}

/// Port 0's trap counters as JSON (`trap.rs`).
pub fn traps_json(switch: &Switch) -> serde_json::Value {
    switch.trap_counts().json()
}

fn port_arg(arg: Option<&str>) -> Result<u8, String> {
    arg.and_then(|a| a.parse().ok())
        .ok_or_else(|| "needs a port number".to_owned())
}

/// Runs one command line against `switch`; returns the reply line.
pub fn execute(switch: &Switch, line: &str) -> String {
    let mut words = line.split_whitespace();
    let cmd = words.next().unwrap_or_default();
    let arg1 = words.next();
    let arg2 = words.next();
    let result: Result<String, String> = (|| {
        match cmd {
        "stats" => Ok(stats_json(switch).to_string()),
        "traps" => Ok(traps_json(switch).to_string()),
        "inspect" => Ok(inspect_json(switch).to_string()),
        "down" => {
            let p = port_arg(arg1)?;
            switch.port_down(p).map_err(|e| e.to_string())?;
            Ok(format!("port {p} down"))
        }
        "up" => {
            let p = port_arg(arg1)?;
            switch.port_up(p).map_err(|e| e.to_string())?;
            Ok(format!("port {p} up"))
        }
        "faults" => {
            let p = port_arg(arg1)?;
            let plan = match arg2 {
                Some("none") => FaultPlan::default(),
                Some(s) => {
                    let (_, rates) =
                        spec::parse_faults(&format!("{p}={s}")).map_err(|e| e.to_string())?;
                    FaultPlan::default().with_rates(rates)
                }
                None => return Err("faults PORT SPEC|none".into()),
            };
            switch.set_faults(p, plan).map_err(|e| e.to_string())?;
            Ok(format!("port {p} faults set"))
        }
        "delay" => {
            let p = port_arg(arg1)?;
            let us: u64 = arg2
                .and_then(|a| a.parse().ok())
                .ok_or("delay PORT MICROSECONDS")?;
            switch
                .set_delay(p, Duration::from_micros(us))
                .map_err(|e| e.to_string())?;
            Ok(format!("port {p} delay {us} us"))
        }
        _ => Err(format!(
            "unknown command `{cmd}` (stats, traps, inspect, down P, up P, faults P SPEC|none, delay P US)"
        )),
    }
    })();
    match result {
        Ok(s) => format!("ok {s}"),
        Err(e) => format!("error {e}"),
    }
}

/// Serves `switch`'s commands on the control socket at `path`.
pub fn serve(switch: Arc<Switch>, path: &Path) -> io::Result<LineServer> {
    LineServer::start_as(
        path,
        "ibtca-sw-control",
        ibtca_sandbox::Role::SwitchControl,
        move |line| execute(&switch, line),
    )
}
