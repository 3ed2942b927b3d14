//! Host ports: a topology node with `"sim_port": "NAME"` runs
//! `ibtca-simport` instead of `ibtca-device`, a channel adapter whose QP0
//! and QP1 belong to programs on the host that attach through Debian's
//! libumad2sim with `IBSIM_SOCKNAME=NAME` (docs/host-sm.md). It keeps the
//! node's LID (before an SM sets one), GUIDs, description and link. Such
//! a fabric is SM-managed: every device and switch starts `--sm-managed`
//! and the host's SM (OpenSM through the port) brings it up.
//!
//! `up --sim-port NODE[=NAME]` sets it on the file's node (NAME defaults
//! to `sim`, umad2sim's own default), also for `--net` files, whose node
//! names are the net file's ids.

use super::plan::NodePlan;

/// The host port binary, next to the launcher.
pub const SIMPORT_EXE: &str = "ibtca-simport";
/// The socket name umad2sim uses without `IBSIM_SOCKNAME`.
pub const DEFAULT_SOCKNAME: &str = "sim";

/// The `ibtca-simport` arguments of node `n`, a host port named `name`.
pub fn args(n: &NodePlan, name: &str) -> Vec<String> {
    let mut args = vec![
        format!("--sockname={name}"),
        format!("--lid={}", n.lid),
        format!("--node-guid={:#x}", n.node_guid),
        format!("--port-guid={:#x}", n.port_guid),
        format!("--description={}", n.description),
        format!("--node-id={}", n.name),
    ];
    if let Some(ep) = &n.link {
        args.push(format!("--link={ep}"));
    }
    if let Some(kib) = n.link_ring_kib {
        args.push(format!("--link-ring-kib={kib}"));
    }
    if n.sm_managed {
        args.push("--sm-managed".to_owned());
    }
    if n.no_seccomp {
        args.push("--no-seccomp".to_owned());
    }
    args
}

/// The topology text `text` (JSON) with each `NODE[=NAME]` of `specs` made
/// a host port; an error names a node the file does not have.
pub fn apply(text: &str, specs: &[String]) -> Result<String, String> {
    if specs.is_empty() {
        return Ok(text.to_owned());
    }
    let mut topo: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("topology: {e}"))?;
    for spec in specs {
        let (node, name) = spec.split_once('=').unwrap_or((spec, DEFAULT_SOCKNAME));
        if name.is_empty() || name.contains(['/', '\0']) {
            return Err(format!("--sim-port {spec}: a socket name without `/`"));
        }
        let found = topo
            .get_mut("nodes")
            .and_then(|n| n.as_array_mut())
            .and_then(|nodes| {
                nodes
                    .iter_mut()
                    .find(|n| n.get("name").and_then(|v| v.as_str()) == Some(node))
            })
            .and_then(|n| n.as_object_mut())
            .ok_or_else(|| format!("--sim-port {spec}: no node `{node}` in the topology"))?;
        found.insert("sim_port".into(), serde_json::Value::String(name.into()));
    }
    serde_json::to_string_pretty(&topo).map_err(|e| format!("topology: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPO: &str = r#"{"nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2}],
        "switches": [{"name": "sw", "ports": 2}],
        "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}]}"#;

    #[test]
    fn a_named_node_becomes_a_host_port_and_the_fabric_managed() {
        let text = apply(TOPO, &["b".into()]).unwrap();
        let topo = crate::parse(&text).unwrap();
        assert_eq!(topo.nodes[0].sim_port, None);
        assert_eq!(topo.nodes[1].sim_port.as_deref(), Some("sim"));
        let plan = crate::plan(&topo, std::path::Path::new("/tmp/x")).unwrap();
        assert!(plan.nodes.iter().all(|n| n.sm_managed));
        assert!(plan.switches.iter().all(|s| s.sm_managed));
        let b = &plan.nodes[1];
        let args = args(b, "sim");
        assert!(args.contains(&"--sockname=sim".to_owned()), "{args:?}");
        assert!(args.contains(&"--sm-managed".to_owned()), "{args:?}");
        assert!(args.iter().any(|a| a.starts_with("--link=")), "{args:?}");
        let other = apply(TOPO, &["a=host1".into()]).unwrap();
        assert_eq!(
            crate::parse(&other).unwrap().nodes[0].sim_port.as_deref(),
            Some("host1")
        );
    }

    #[test]
    fn unknown_nodes_and_bad_names_are_refused() {
        assert!(apply(TOPO, &["c".into()])
            .unwrap_err()
            .contains("no node `c`"));
        assert!(apply(TOPO, &["a=x/y".into()]).is_err());
        assert!(apply(TOPO, &["a=".into()]).is_err());
        let plain = crate::plan(&crate::parse(TOPO).unwrap(), std::path::Path::new("/tmp/x"));
        assert!(plain.unwrap().nodes.iter().all(|n| !n.sm_managed));
    }
}
