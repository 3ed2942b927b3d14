//! Gateway nodes: a topology node with a `gateway` entry runs
//! `ibtca-gateway` (issue 24) instead of `ibtca-device`. It has the node's
//! LID, GUID, link and VL settings, plus an ATM port and a VC map, inline
//! or in a file:
//!
//! ```json
//! { "name": "gw1", "lid": 10,
//!   "gateway": { "atm": "listen:gw1.atm", "service_sl": "cbr=1",
//!                "map": { "vcs": [ { "vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
//!                                    "ib": { "qp": "rc", "local_qpn": 16, "remote_lid": 20, "remote_qpn": 16 } } ] } } }
//! ```
//!
//! The map is the gateway's to check: `up` writes it to `NAME.map.json`
//! in the run directory and runs `ibtca-gateway --check` on every gateway
//! before anything starts (`gateway_launch.rs`). Its control socket is
//! `NAME.control` (`remote-qpn VPI/VCI QPN`, `stats`).

use std::path::{Path, PathBuf};

use ibtca_link::LinkEndpoint;

use super::topology::NodeSpec;

/// How to run a gateway node's ATM side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayPlan {
    /// The ATM port.
    pub atm: LinkEndpoint,
    /// The map file the gateway reads.
    pub map: PathBuf,
    /// The map's text when it is inline (written to `map` before the
    /// gateway starts).
    pub inline_map: Option<String>,
    /// `--service-sl`.
    pub service_sl: Option<String>,
    /// `--capture`.
    pub capture: Option<PathBuf>,
    /// The control socket.
    pub control: PathBuf,
}

/// The gateway plan of node `n`, if it is a gateway (a gateway has no
/// guest and no device placement); what is wrong otherwise.
pub fn plan(n: &NodeSpec, run_dir: &Path) -> Result<Option<GatewayPlan>, String> {
    let Some(g) = &n.gateway else {
        return Ok(None);
    };
    let err = |error: String| error;
    if n.guest.is_some()
        || n.cpus.is_some()
        || n.realtime.is_some()
        || n.sched_batch
        || n.socket.is_some()
    {
        return Err(err(
            "guest, cpus, realtime, sched_batch and socket are for devices, not gateways".into(),
        ));
    }
    let atm: LinkEndpoint = g.atm.parse().map_err(|e| err(format!("atm: {e}")))?;
    let atm = match atm {
        LinkEndpoint::Listen(p) => LinkEndpoint::Listen(run_dir.join(p)),
        LinkEndpoint::Connect(p) => LinkEndpoint::Connect(run_dir.join(p)),
        LinkEndpoint::ListenTcp(_) | LinkEndpoint::ConnectTcp(_) => {
            return Err(err("atm: an ATM port is a Unix socket, not TCP".into()))
        }
    };
    let (map, inline_map) = match &g.map {
        serde_json::Value::String(file) => (run_dir.join(file), None),
        v @ serde_json::Value::Object(_) => (
            run_dir.join(format!("{}.map.json", n.name)),
            Some(v.to_string()),
        ),
        _ => {
            return Err(err(
                "map: an object ({\"vcs\": [...]}) or a file name".into()
            ))
        }
    };
    Ok(Some(GatewayPlan {
        atm,
        map,
        inline_map,
        service_sl: g.service_sl.clone(),
        capture: g.capture.as_ref().map(|c| run_dir.join(c)),
        control: run_dir.join(format!("{}.control", n.name)),
    }))
}
