//! What `ibtca-fabric inspect`, `stats` and `graph` read of a running
//! fabric: every process the run directory's state file records (devices,
//! switches, gateways, the management hub, guests) with its PID and
//! whether it still runs, and for each device, switch and gateway what its
//! own agent says on its control socket (`inspect`: port states, LIDs as
//! the SM set them, counters under their IBA names). Nothing here comes
//! from the topology file but the process names.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ibtca_agents::control_socket::request_within;
use serde_json::{json, Value};

use super::gateway_launch::GATEWAY_EXE;
use super::hive_plan::{self, HIVE_EXE};
use super::launch::{control_path, is_ours, DEVICE_EXE, SWITCH_EXE};
use super::mgmt_net::HUB_EXE;
use super::state::{Started, State};
use super::{guest_run, guests};

/// How long a control socket may take to answer.
pub const AGENT_WAIT: Duration = Duration::from_secs(5);

/// What kind of process a state file entry is.
pub fn kind(p: &Started) -> &'static str {
    match p.exe.as_str() {
        _ if p.guest => "guest",
        SWITCH_EXE => "switch",
        DEVICE_EXE => "device",
        GATEWAY_EXE => "gateway",
        HUB_EXE => "hub",
        HIVE_EXE => "hive",
        _ => "other",
    }
}

/// One process of the fabric and what its agent said.
#[derive(Debug, Clone)]
pub struct ProcessView {
    /// The state file's entry.
    pub started: Started,
    /// `switch`, `device`, `gateway`, `hub`, `hive`, `guest` or `other`.
    pub kind: &'static str,
    /// True while it runs the binary it was started as.
    pub alive: bool,
    /// Its control socket (switches, devices, gateways, the hive).
    pub control: Option<PathBuf>,
    /// Its control socket's `inspect` reply, or why there is none.
    pub agent: Option<Result<Value, String>>,
    /// A guest's QEMU processes (descendants of its run-vm.sh).
    pub qemu_pids: Vec<u32>,
}

/// Asks the control socket at `path` for `inspect`.
fn ask(path: &Path) -> Result<Value, String> {
    let reply = request_within(path, "inspect", AGENT_WAIT).map_err(|e| e.to_string())?;
    let json = reply
        .strip_prefix("ok ")
        .ok_or_else(|| format!("the agent answered `{reply}`"))?;
    serde_json::from_str(json).map_err(|e| format!("bad reply: {e}"))
}

/// QEMU processes under process `pid`.
fn qemu_under(pid: u32) -> Vec<u32> {
    guests::descendants(pid)
        .into_iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with("qemu"))
        })
        .collect()
}

/// The state file of the fabric running in `run_dir` and its processes'
/// views ([`gather`]).
pub fn running(run_dir: &Path) -> Result<(State, Vec<ProcessView>), String> {
    let state = State::load(run_dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no fabric is up in {}", run_dir.display()))?;
    let views = gather(run_dir, &state);
    Ok((state, views))
}

/// Every process `state` records, with its agent's answer.
pub fn gather(run_dir: &Path, state: &State) -> Vec<ProcessView> {
    state
        .processes
        .iter()
        .map(|p| {
            let kind = kind(p);
            let alive = is_ours(p);
            let control = matches!(kind, "switch" | "device" | "gateway" | "hive")
                .then(|| control_path(run_dir, &p.name));
            let agent = control.as_ref().map(|c| {
                if alive {
                    ask(c)
                } else {
                    Err("not running".to_owned())
                }
            });
            let qemu_pids = if p.guest && alive {
                qemu_under(p.pid)
            } else {
                Vec::new()
            };
            ProcessView {
                started: p.clone(),
                kind,
                alive,
                control,
                agent,
                qemu_pids,
            }
        })
        .collect()
}

/// The node a guest entry belongs to (`NODE (guest)`).
fn guest_node(name: &str) -> &str {
    name.strip_suffix(" (guest)").unwrap_or(name)
}

/// A guest's state: `running` or `exited`, and the status its commands
/// left (`N STATUS`: the last command and its exit status), if any.
fn guest_json(run_dir: &Path, v: &ProcessView) -> Value {
    let status_file = guest_run::cfg_dir(run_dir, guest_node(&v.started.name)).join("status");
    let status = std::fs::read_to_string(status_file)
        .ok()
        .map(|s| s.chars().take(64).collect::<String>().trim().to_owned());
    json!({
        "state": if v.alive { "running" } else { "exited" },
        "qemu_pids": v.qemu_pids,
        "console": v.started.console,
        "commands_status": status,
    })
}

/// One process as JSON (docs/inspect.md).
pub fn process_json(run_dir: &Path, v: &ProcessView) -> Value {
    let mut o = json!({
        "name": v.started.name,
        "kind": v.kind,
        "exe": v.started.exe,
        "pid": v.started.pid,
        "alive": v.alive,
        "log": v.started.log,
    });
    if let Some(c) = &v.control {
        o["control"] = json!(c);
    }
    match &v.agent {
        Some(Ok(a)) => o["agent"] = a.clone(),
        Some(Err(e)) => o["agent_error"] = json!(e),
        None => {}
    }
    if v.started.guest {
        o["guest"] = guest_json(run_dir, v);
    }
    if v.kind == "hive" {
        o["hosted"] = json!(hive_plan::read_status(run_dir));
    }
    o
}

/// The whole fabric as JSON (`ibtca-fabric inspect --json`).
pub fn fabric_json(run_dir: &Path, state: &State, views: &[ProcessView]) -> Value {
    json!({
        "run_dir": run_dir,
        "topology": state.topology,
        "processes": views.iter().map(|v| process_json(run_dir, v)).collect::<Vec<_>>(),
    })
}

/// One port of a device, switch or gateway as its agent reported it.
#[derive(Debug, Clone)]
pub struct PortView {
    /// The process (node or switch) name.
    pub name: String,
    /// `switch`, `device` or `gateway`.
    pub kind: &'static str,
    /// The port number (1 for a channel adapter).
    pub port: u8,
    /// IBA port state (Down, Init, Armed, Active), if the agent says.
    pub state: Option<String>,
    /// True while the port's link is up.
    pub up: bool,
    /// The port's LID (a channel adapter's; a switch's port 0 LID).
    pub lid: Option<u64>,
    /// Counters under their IBA names.
    pub counters: Value,
}

impl PortView {
    /// The counter `name` (0 if absent).
    pub fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).and_then(Value::as_u64).unwrap_or(0)
    }
}

/// Every port the agents of `views` reported, in process order (the
/// hive's nodes, each as a switch or device of its own name, in the
/// hive's order).
pub fn ports(views: &[ProcessView]) -> Vec<PortView> {
    let mut out = Vec::new();
    for v in views {
        let Some(Ok(a)) = &v.agent else {
            continue;
        };
        if v.kind == "hive" {
            for n in a["nodes"].as_array().map(Vec::as_slice).unwrap_or_default() {
                let kind = if n["kind"] == "switch" {
                    "switch"
                } else {
                    "device"
                };
                node_ports(&mut out, n["name"].as_str().unwrap_or("?"), kind, n);
            }
            continue;
        }
        let name = v.started.name.clone();
        if v.kind == "device" {
            let state = a["port"]["state"].as_str().map(str::to_owned);
            out.push(PortView {
                name,
                kind: v.kind,
                port: 1,
                up: state.as_deref().is_some_and(|s| s != "Down"),
                state,
                lid: a["port"]["lid"].as_u64(),
                counters: a["counters"].clone(),
            });
            continue;
        }
        node_ports(&mut out, &name, v.kind, a);
    }
    out
}

/// The ports of node `name`, whose agent's answer `a` lists them under
/// `ports` (its LID under `lid`).
fn node_ports(out: &mut Vec<PortView>, name: &str, kind: &'static str, a: &Value) {
    for p in a["ports"].as_array().map(Vec::as_slice).unwrap_or_default() {
        out.push(PortView {
            name: name.to_owned(),
            kind,
            port: p["port"]
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .unwrap_or(0),
            state: p["state"].as_str().map(str::to_owned),
            up: p["up"].as_bool().unwrap_or(false),
            lid: a["lid"].as_u64(),
            counters: p["counters"].clone(),
        });
    }
}

/// The devices, switches and gateways whose agent did not answer: name,
/// kind and why (`not running`, a socket error).
pub fn unreachable(views: &[ProcessView]) -> Vec<(String, &'static str, String)> {
    views
        .iter()
        .filter_map(|v| match &v.agent {
            Some(Err(e)) => Some((v.started.name.clone(), v.kind, e.clone())),
            _ => None,
        })
        .collect()
}

/// `ibtca-fabric inspect` as text.
pub fn render_text(run_dir: &Path, views: &[ProcessView]) -> String {
    let mut s = String::new();
    let mut line = |t: String| {
        s.push_str(&t);
        s.push('\n');
    };
    for v in views {
        let p = &v.started;
        line(format!(
            "{:<8} {:<14} pid {:<7} {}",
            v.kind,
            p.name,
            p.pid,
            if v.alive { "running" } else { "DEAD" }
        ));
        match &v.agent {
            Some(Ok(a)) if v.kind == "device" => {
                let port = &a["port"];
                line(format!(
                    "    port 1 {}  LID {}  SM LID {}  port GUID {}  QPs {}",
                    port["state"].as_str().unwrap_or("?"),
                    port["lid"],
                    port["sm_lid"],
                    port["port_guid"].as_str().unwrap_or("?"),
                    a["qps"]["count"],
                ));
                for q in a["qps"]["qps"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    line(format!(
                        "    QP {:<6} {:<3} {:<5} dest LID {} QP {}  SQ PSN {}  RQ PSN {}",
                        q["qpn"],
                        q["type"].as_str().unwrap_or("?"),
                        q["state"].as_str().unwrap_or("?"),
                        q["dlid"],
                        q["dest_qpn"],
                        q["sq_psn"],
                        q["rq_psn"],
                    ));
                    if let Some(l) = queue_line(q) {
                        line(l);
                    }
                }
                for c in a["cqs"]["cqs"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    line(cq_line(c));
                }
            }
            Some(Ok(a)) if v.kind == "hive" => {
                for l in hive_plan::agent_lines(a) {
                    line(l);
                }
            }
            Some(Ok(a)) => {
                if v.kind == "switch" {
                    line(format!("    LID {}  SM LID {}", a["lid"], a["sm_lid"]));
                }
                for p in a["ports"].as_array().map(Vec::as_slice).unwrap_or_default() {
                    line(format!(
                        "    port {:<3} {:<6} {}{}",
                        p["port"],
                        p["state"].as_str().unwrap_or(""),
                        if p["up"].as_bool() == Some(true) {
                            "link up"
                        } else {
                            "link down"
                        },
                        p["peer_lid"]
                            .as_u64()
                            .map(|l| format!("  peer LID {l}"))
                            .unwrap_or_default(),
                    ));
                }
            }
            Some(Err(e)) => {
                line(format!("    control socket: {e}"));
                if v.kind == "hive" {
                    for l in hive_plan::inspect_lines(run_dir) {
                        line(l);
                    }
                }
            }
            None => {}
        }
        if p.guest {
            let g = guest_json(run_dir, v);
            line(format!(
                "    QEMU {}  console {}{}",
                g["qemu_pids"],
                p.console
                    .as_ref()
                    .map(|c| c.display().to_string())
                    .unwrap_or_default(),
                g["commands_status"]
                    .as_str()
                    .map(|s| format!("  commands status {s}"))
                    .unwrap_or_default(),
            ));
        }
    }
    s
}

/// The traps of hosted switch `name`, as the hive's `inspect` reply says.
pub fn hosted_traps<'a>(views: &'a [ProcessView], name: &str) -> Option<&'a Value> {
    views
        .iter()
        .filter(|v| v.kind == "hive")
        .filter_map(|v| v.agent.as_ref()?.as_ref().ok())
        .flat_map(|a| a["nodes"].as_array().map(Vec::as_slice).unwrap_or_default())
        .find(|n| n["name"] == name && n["kind"] == "switch")
        .map(|n| &n["traps"])
}

/// A QP's queues in one line (RC and UD QPs with a send queue the driver
/// posts to): the device's SQ indexes, the send WQEs the transport holds,
/// and the doorbell record's words. A WQE the device never read shows as
/// `pi` ahead of `ci` with nothing in flight; a record index ahead of the
/// SQ's `pi` with `awake 1` is one the device was meant to read itself.
fn queue_line(q: &Value) -> Option<String> {
    let sq = q.get("sq")?;
    let rq = match &q["rq"] {
        Value::Null => "SRQ".to_owned(),
        r => format!("{}/{}", r["pi"], r["ci"]),
    };
    let record = match &q["db_record"] {
        Value::Null => "none".to_owned(),
        r => format!(
            "sq_pi {} awake {}  rq_pi {} awake {}",
            r["sq_pi"], r["sq_awake"], r["rq_pi"], r["rq_awake"]
        ),
    };
    Some(format!(
        "      SQ pi/ci {}/{}  in flight {}  RQ pi/ci {rq}  CQs {}/{}  record: {record}",
        sq["pi"], sq["ci"], q["send_wqes_in_flight"], q["send_cqn"], q["recv_cqn"],
    ))
}

/// A CQ in one line: the device's producer index against the consumer
/// index the driver reported and the one in its record.
fn cq_line(c: &Value) -> String {
    format!(
        "    CQ {:<5} entries {}  pi {}  ci {}  record ci {}{}{}",
        c["cqn"].to_string(),
        c["entries"],
        c["pi"],
        c["ci"],
        c["record_ci"],
        if c["armed"] == true { "  armed" } else { "" },
        if c["error"] == true { "  ERROR" } else { "" },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qps_queues_and_a_cq_read_as_one_line_each() {
        let q = json!({
            "sq": {"pi": 12, "ci": 11}, "rq": null, "send_wqes_in_flight": 1,
            "send_cqn": 3, "recv_cqn": 4,
            "db_record": {"sq_pi": 13, "sq_awake": 1, "rq_pi": 0, "rq_awake": 0},
        });
        assert_eq!(
            queue_line(&q).unwrap(),
            "      SQ pi/ci 12/11  in flight 1  RQ pi/ci SRQ  CQs 3/4  \
             record: sq_pi 13 awake 1  rq_pi 0 awake 0"
        );
        // A device too old to report queues adds no line.
        assert_eq!(queue_line(&json!({"qpn": 1})), None);
        let c = json!({"cqn": 3, "entries": 128, "pi": 9, "ci": 7, "record_ci": 8,
                       "armed": false, "error": true});
        assert_eq!(
            cq_line(&c),
            "    CQ 3     entries 128  pi 9  ci 7  record ci 8  ERROR"
        );
    }
}
