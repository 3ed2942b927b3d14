//! Reading a topology for a command: a JSON file or a net file, checked,
//! planned and placed, one host's part of it, and the running fabric's
//! copy in its run directory.

use std::path::Path;

use ibtca_fabric::state::State;
use ibtca_fabric::{self as fabric, auto_placement, Plan};

use crate::NAME;

/// The JSON topology of net file `file`, its warnings on stderr.
pub(crate) fn import(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let imported = fabric::net_file::parse(&text)
        .and_then(|net| fabric::net_import::import(&net))
        .map_err(|e| format!("{}:\n{e}", file.display()))?;
    for w in &imported.warnings {
        eprintln!("{NAME}: warning: {}: {w}", file.display());
    }
    serde_json::to_string_pretty(&imported.topology).map_err(|e| e.to_string())
}

/// Reads and checks a topology file (a net file with `net`): its JSON
/// text, topology and plan, with the placement chosen for this machine
/// where the file sets none, and what the placement chose.
fn load_as(file: &Path, net: bool, run_dir: &Path) -> Result<Loaded, String> {
    load_host(file, net, run_dir, None, &[]).map(|(loaded, ..)| loaded)
}

/// [`load_as`] for host `host` of the file's `hosts` (all hosts if
/// `None`), with the nodes `up --sim-port` names made host ports, the
/// links between hosts and the warnings about the whole fabric.
pub(crate) fn load_host(
    file: &Path,
    net: bool,
    run_dir: &Path,
    host: Option<&str>,
    sim_ports: &[String],
) -> Result<(Loaded, Vec<fabric::hosts::CrossLink>, Vec<String>), String> {
    let text = if net {
        import(file)?
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?
    };
    let text = fabric::sim_port_node::apply(&text, sim_ports)?;
    let topo = fabric::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut plan = fabric::plan(&topo, run_dir).map_err(|e| format!("{}: {e}", file.display()))?;
    let warnings = fabric::plan_warnings::warnings(&plan);
    let cross = fabric::hosts::apply(&topo, &mut plan, host)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let placed = auto_placement::apply(&mut plan, &auto_placement::machine_cpus());
    Ok(((text, topo, plan, placed), cross, warnings))
}

/// Reads and checks a JSON topology file, placed as [`load_as`] does.
pub(crate) fn load(
    file: &Path,
    run_dir: &Path,
) -> Result<(String, fabric::Topology, Plan), String> {
    let (text, topo, plan, _) = load_as(file, false, run_dir)?;
    Ok((text, topo, plan))
}

/// A topology file's text, topology, placed plan and the placement chosen.
pub(crate) type Loaded = (String, fabric::Topology, Plan, auto_placement::Applied);

/// Prints the warnings about a plan (`NAME: warning: FILE: ...`).
pub(crate) fn warn(file: &Path, warnings: &[String]) {
    for w in warnings {
        eprintln!("{NAME}: warning: {}: {w}", file.display());
    }
}

/// The plan of the fabric running in `run_dir`, from `up`'s copy of its
/// topology there.
pub(crate) fn running_plan(run_dir: &Path) -> Result<Plan, String> {
    State::load(run_dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no fabric is up in {}", run_dir.display()))?;
    let file = run_dir.join(fabric::state::TOPOLOGY_FILE);
    let host = fabric::hosts::saved(run_dir);
    Ok(load_host(&file, false, run_dir, host.as_deref(), &[])?.0 .2)
}
