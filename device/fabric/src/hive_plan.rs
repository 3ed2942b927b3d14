//! Which of a fabric's nodes one `ibtca-hive` process hosts, and its hive
//! file (docs/hive.md).
//!
//! `up` hosts every switch the hive can run (no per-port faults,
//! captures, delays or VL settings: the hive's switches have none of
//! those) and every guestless CA: those of a net file (`up --net`, whose
//! CAs no guest is attached to). A topology's own nodes keep their
//! `ibtca-device` (a guest may be attached to its vfio-user socket), and
//! so does every gateway. `--process-per-node` hosts nothing.
//!
//! Wires between two hosted nodes are carried in memory (`hive:NODE:PORT`);
//! a wire to a node outside keeps the socket the plan gave it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use ibtca_agents::vl_config::VlConfig;
use ibtca_link::LinkEndpoint;
use serde_json::{json, Value};

use super::plan::{End, Plan, SwitchPlan};

/// The hive's name in the state file and its log (`hive.log`).
pub const HIVE_NAME: &str = "hive";
/// The hive's binary.
pub const HIVE_EXE: &str = "ibtca-hive";

/// The names of the nodes and switches the hive hosts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosted(pub BTreeSet<String>);

impl Hosted {
    /// Nothing hosted: one process per node.
    pub fn none() -> Hosted {
        Hosted::default()
    }

    /// What `up` hosts in `plan`: every switch the hive can run, and with
    /// `guestless_cas` (a net file) every CA that is no gateway (a host
    /// port too: the hive serves its sockets itself).
    pub fn choose(plan: &Plan, guestless_cas: bool) -> Hosted {
        let mut names: BTreeSet<String> = plan
            .switches
            .iter()
            .filter(|s| own_process_reason(s).is_none())
            .map(|s| s.name.clone())
            .collect();
        if guestless_cas {
            names.extend(
                plan.nodes
                    .iter()
                    .filter(|n| n.gateway.is_none())
                    .filter(|n| !n.link.as_ref().is_some_and(is_tcp))
                    .map(|n| n.name.clone()),
            );
        }
        Hosted(names)
    }

    /// True if the hive hosts `name`.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains(name)
    }

    /// True if the hive hosts nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// True for a link to another host: the hive's outside wires are Unix
/// sockets.
fn is_tcp(e: &LinkEndpoint) -> bool {
    matches!(e, LinkEndpoint::ListenTcp(_) | LinkEndpoint::ConnectTcp(_))
}

/// Why switch `sw` needs its own `ibtca-switch`, if it does.
pub fn own_process_reason(sw: &SwitchPlan) -> Option<&'static str> {
    let ports = || sw.ports.iter().flatten();
    if ports().any(|p| is_tcp(&p.endpoint)) {
        Some("a link to another host (TCP)")
    } else if ports().any(|p| p.faults.is_some()) {
        Some("fault injection")
    } else if ports().any(|p| p.capture.is_some()) {
        Some("a capture file")
    } else if ports().any(|p| p.delay_us > 0) {
        Some("a delay line")
    } else if ports().any(|p| p.vl != VlConfig::default()) {
        Some("VL settings")
    } else {
        None
    }
}

/// The nodes the running fabric's hive hosts: the names in its hive file
/// (none without one).
pub fn hosted_in(run_dir: &Path) -> Hosted {
    let text = std::fs::read_to_string(hive_file(run_dir)).unwrap_or_default();
    let file: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let names = ["switches", "cas"]
        .iter()
        .filter_map(|k| file.get(k)?.as_array())
        .flatten()
        .filter_map(|n| Some(n.get("name")?.as_str()?.to_owned()));
    Hosted(names.collect())
}

/// The hive file in the run directory.
pub fn hive_file(run_dir: &Path) -> PathBuf {
    run_dir.join("hive.json")
}

/// The status file the hive keeps in the run directory.
pub fn hive_status_file(run_dir: &Path) -> PathBuf {
    run_dir.join("hive.status.json")
}

/// The hive's control socket in the run directory (`inspect`: every
/// hosted node's ports, states and counters).
pub fn hive_control_file(run_dir: &Path) -> PathBuf {
    super::node_args::control_path(run_dir, HIVE_NAME)
}

/// The `ibtca-hive` arguments for the nodes of `plan` that `hosted`
/// names. Beside a niced guest the hive does not spin, as that guest's
/// device does not ([`crate::launch::device_args`]): spinning, it would
/// yield its CPU to the busy vCPU and an event would wait for the vCPU's
/// time slice.
pub fn hive_args(plan: &Plan, hosted: &Hosted, run_dir: &Path) -> Vec<String> {
    let mut args = vec![
        "--config".to_owned(),
        hive_file(run_dir).display().to_string(),
        "--status-file".to_owned(),
        hive_status_file(run_dir).display().to_string(),
        "--control".to_owned(),
        hive_control_file(run_dir).display().to_string(),
    ];
    let niced_guest = plan.nodes.iter().any(|n| {
        !hosted.has(&n.name)
            && n.gateway.is_none()
            && n.sim_port.is_none()
            && n.guest_nice.is_some_and(|nice| nice > 0)
    });
    if niced_guest {
        args.push("--spin-us=0".to_owned());
    }
    args
}

/// The hive file of the nodes of `plan` that `hosted` names.
pub fn hive_config(plan: &Plan, hosted: &Hosted) -> Value {
    // Each end's name and port, and its peer's.
    let name = |e: End| match e {
        End::Node(i) => (plan.nodes[i].name.as_str(), 1u8),
        End::Switch(i, p) => (plan.switches[i].name.as_str(), p),
    };
    let mut peer: HashMap<(&str, u8), (&str, u8)> = HashMap::new();
    for (a, b) in &plan.links {
        peer.insert(name(*a), name(*b));
        peer.insert(name(*b), name(*a));
    }
    // A hosted peer: in memory; one outside: the plan's socket.
    let wire = |here: (&str, u8), socket: String| match peer.get(&here) {
        Some((other, port)) if hosted.has(other) => json!(format!("hive:{other}:{port}")),
        _ => json!(socket),
    };
    let switches: Vec<Value> = plan
        .switches
        .iter()
        .filter(|s| hosted.has(&s.name))
        .map(|s| {
            let ports: Vec<Value> = s
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| match p {
                    None => Value::Null,
                    Some(p) => wire((&s.name, i as u8 + 1), p.endpoint.to_string()),
                })
                .collect();
            // An SM-managed switch has no routes until the SM's.
            let routes = if s.sm_managed { &[][..] } else { &s.routes[..] };
            json!({ "name": s.name, "description": s.description, "guid": s.guid,
                    "ports": ports, "routes": routes })
        })
        .collect();
    let cas: Vec<Value> = plan
        .nodes
        .iter()
        .filter(|n| hosted.has(&n.name))
        .map(|n| {
            let port = match &n.link {
                None => Value::Null,
                Some(ep) => wire((&n.name, 1), ep.to_string()),
            };
            let mut ca = json!({ "name": n.name, "description": n.description,
                                 "guid": n.node_guid, "port_guid": n.port_guid,
                                 "lid": n.lid, "port": port });
            if let Some(sock) = &n.sim_port {
                ca["sim"] = json!(sock);
            }
            ca
        })
        .collect();
    // A host port makes the fabric SM-managed as an "sm" does.
    let managed = plan.sm.is_some() || plan.nodes.iter().any(|n| n.sm_managed);
    json!({ "sm_managed": managed, "switches": switches, "cas": cas })
}

/// The hosted nodes' status: node name → its ports, each `{"up": bool}`
/// (empty while the hive has written none).
pub fn read_status(run_dir: &Path) -> HashMap<String, Value> {
    std::fs::read_to_string(hive_status_file(run_dir))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("nodes")?.as_object().cloned())
        .map(|m| m.into_iter().collect())
        .unwrap_or_default()
}

/// `inspect`'s lines for the hive's nodes from its control socket's
/// `inspect` reply `agent`: each node's LID and its ports' IBA states.
pub fn agent_lines(agent: &Value) -> Vec<String> {
    let nodes = agent["nodes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut lines = vec![format!("    hosts {} nodes", nodes.len())];
    for n in nodes {
        let ports: Vec<String> = n["ports"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .map(|p| format!("{}:{}", p["port"], p["state"].as_str().unwrap_or("?")))
            .collect();
        lines.push(format!(
            "    {:<6} {:<14} LID {:<5} {}",
            n["kind"].as_str().unwrap_or("?"),
            n["name"].as_str().unwrap_or("?"),
            n["lid"],
            ports.join(" ")
        ));
    }
    lines
}

/// `inspect`'s lines for the hive's nodes when its control socket does
/// not answer: each node's ports' links as the hive's status file says.
pub fn inspect_lines(run_dir: &Path) -> Vec<String> {
    let mut status: Vec<(String, Value)> = read_status(run_dir).into_iter().collect();
    status.sort_by(|a, b| a.0.cmp(&b.0));
    let mut lines = vec![format!(
        "    hosts {} nodes (from its status file: link state only)",
        status.len()
    )];
    for (name, node) in status {
        let ports = node["ports"].as_array().cloned().unwrap_or_default();
        let up: Vec<String> = ports
            .iter()
            .enumerate()
            .filter(|(_, p)| p["up"] == true)
            .map(|(i, _)| (i + 1).to_string())
            .collect();
        lines.push(format!(
            "    {name:<14} {} ports, links up: {}",
            ports.len(),
            if up.is_empty() {
                "none".to_owned()
            } else {
                up.join(",")
            }
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPO: &str = r#"{"nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2}],
        "switches": [{"name": "sw", "ports": 2}],
        "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}]}"#;

    fn hive_of(text: &str) -> Value {
        let topo = crate::parse(text).unwrap();
        let plan = crate::plan(&topo, Path::new("/tmp/x")).unwrap();
        hive_config(&plan, &Hosted::choose(&plan, true))
    }

    #[test]
    fn the_hive_spins_unless_a_guest_beside_it_is_niced() {
        let spin = |text: &str, guestless_cas: bool| {
            let topo = crate::parse(text).unwrap();
            let mut plan = crate::plan(&topo, Path::new("/tmp/x")).unwrap();
            // Two CPUs: guests of device nodes are niced.
            crate::auto_placement::apply(&mut plan, &[0, 1]);
            let hosted = Hosted::choose(&plan, guestless_cas);
            hive_args(&plan, &hosted, Path::new("/tmp/x"))
                .into_iter()
                .filter(|a| a.starts_with("--spin-us"))
                .collect::<Vec<_>>()
        };
        // Two devices with guests beside a hosted switch.
        assert_eq!(spin(TOPO, false), ["--spin-us=0"]);
        // The same nodes as guestless CAs in the hive (a net file).
        assert!(spin(TOPO, true).is_empty());
        // Guests at the file's own niceness 0.
        let not_niced = TOPO.replacen('{', r#"{"guest": {"nice": 0}, "#, 1);
        assert!(spin(&not_niced, false).is_empty(), "{not_niced}");
    }

    #[test]
    fn a_host_port_is_hosted_and_the_sm_sets_every_route() {
        let unmanaged = hive_of(TOPO);
        assert_eq!(unmanaged["sm_managed"], false);
        assert_eq!(unmanaged["switches"][0]["routes"], json!([[1, 1], [2, 2]]));

        let text = crate::sim_port_node::apply(TOPO, &["b=s1".into()]).unwrap();
        let hive = hive_of(&text);
        assert_eq!(hive["sm_managed"], true);
        assert_eq!(hive["switches"][0]["routes"], json!([]), "{hive}");
        let cas = hive["cas"].as_array().unwrap();
        assert_eq!(cas.len(), 2, "{hive}");
        assert_eq!(cas[1]["name"], "b");
        assert_eq!(cas[1]["sim"], "s1");
        assert_eq!(cas[0].get("sim"), None);
    }
}
