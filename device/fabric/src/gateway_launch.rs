//! Starting gateway nodes (`gateway_node.rs`): their `ibtca-gateway`
//! command line, and the check of every gateway's options and map before
//! anything starts.

use std::path::Path;
use std::process::Command;

use ibtca_agents::vl_config::{format_list, VlConfig};

use super::gateway_node::GatewayPlan;
use super::plan::NodePlan;

/// The gateway binary, next to the launcher.
pub const GATEWAY_EXE: &str = "ibtca-gateway";

/// The `ibtca-gateway` arguments of gateway node `n`.
pub fn args(n: &NodePlan, g: &GatewayPlan) -> Vec<String> {
    let mut args = vec![
        format!("--lid={}", n.lid),
        format!("--node-guid={:#x}", n.node_guid),
        format!("--atm={}", g.atm),
        format!("--map={}", g.map.display()),
        format!("--control={}", g.control.display()),
    ];
    if let Some(ep) = &n.link {
        args.push(format!("--link={ep}"));
    }
    // Without a `vl` entry the gateway keeps its own SL → VL table and
    // weights (one VL per service class).
    if n.vl != VlConfig::default() {
        args.push(format!("--sl2vl={}", format_list(&n.vl.sl2vl)));
        args.push(format!("--vl-weights={}", format_list(&n.vl.weights)));
    }
    if let Some(s) = &g.service_sl {
        args.push(format!("--service-sl={s}"));
    }
    if let Some(c) = &g.capture {
        args.push(format!("--capture={}", c.display()));
    }
    if let Some(kib) = n.link_ring_kib {
        args.push(format!("--link-ring-kib={kib}"));
    }
    args.push(format!("--description=ibtca gateway {}", n.name));
    if n.sm_managed {
        args.push("--sm-managed".to_owned());
    }
    if n.no_seccomp {
        args.push("--no-seccomp".to_owned());
    }
    args
}

/// Writes every inline map into the run directory (at `up`, once the
/// directory exists).
pub fn write_maps(nodes: &[NodePlan]) -> Result<(), String> {
    for g in nodes.iter().filter_map(|n| n.gateway.as_ref()) {
        if let Some(text) = &g.inline_map {
            std::fs::write(&g.map, text).map_err(|e| format!("{}: {e}", g.map.display()))?;
        }
    }
    Ok(())
}

/// Has `ibtca-gateway --check` look at every gateway node's options and
/// map (an inline map through a temporary file), before anything is
/// created or started; the first refusal, in the gateway's words.
pub fn check_all(nodes: &[NodePlan], bin_dir: &Path) -> Result<(), String> {
    for n in nodes {
        let Some(g) = &n.gateway else { continue };
        let mut g = g.clone();
        let temp = g.inline_map.as_ref().map(|text| {
            let p = std::env::temp_dir().join(format!(
                "ibtca-fabric-check-{}-{}.json",
                std::process::id(),
                n.name
            ));
            (p, text)
        });
        if let Some((p, text)) = &temp {
            // A file of that name is never overwritten (nor, below, removed).
            let write = || -> std::io::Result<()> {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(p)?;
                std::io::Write::write_all(&mut f, text.as_bytes())
            };
            write().map_err(|e| format!("{}: {e}", p.display()))?;
            g.map = p.clone();
        }
        let bin = bin_dir.join(GATEWAY_EXE);
        let mut a = args(n, &g);
        // A link is needed on the command line; --check opens nothing.
        if n.link.is_none() {
            a.push("--link=listen:unused".into());
        }
        let out = Command::new(&bin)
            .arg("--check")
            .args(&a)
            .env("NO_COLOR", "1")
            .output();
        if let Some((p, _)) = &temp {
            let _ = std::fs::remove_file(p);
        }
        let out =
            out.map_err(|e| format!("{}: {e} (build the workspace's binaries)", bin.display()))?;
        if !out.status.success() {
            return Err(format!(
                "gateway `{}` refused its options or map:\n{}",
                n.name,
                String::from_utf8_lossy(&out.stderr).trim_end()
            ));
        }
    }
    Ok(())
}
