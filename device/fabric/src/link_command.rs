//! `ibtca-fabric link`: a running link taken down or up, or given
//! faults or a delay, by the switch end(s) that serve it: a switch's own
//! control socket, or the hive's for a hosted switch (down and up only).

use std::path::Path;

use ibtca_fabric::{self as fabric, launch, End, Plan};
use ibtca_switch::control;

use crate::loading::running_plan;

fn resolve(plan: &Plan, text: &str) -> Option<End> {
    match text.split_once(':') {
        Some((name, port)) => {
            let s = plan.switches.iter().position(|s| s.name == name)?;
            Some(End::Switch(s, port.parse().ok()?))
        }
        None => plan
            .nodes
            .iter()
            .position(|n| n.name == text)
            .map(End::Node),
    }
}

pub(crate) fn link_command(
    run_dir: &Path,
    end: &str,
    action: &str,
    arg: Option<&str>,
) -> Result<(), String> {
    let plan = running_plan(run_dir)?;
    let want =
        resolve(&plan, end).ok_or_else(|| format!("`{end}` names no node or switch port"))?;
    let &(a, b) = plan
        .links
        .iter()
        .find(|(a, b)| *a == want || *b == want)
        .ok_or_else(|| format!("no link has the end `{end}`"))?;
    let ends: Vec<(usize, u8)> = [a, b]
        .into_iter()
        .filter_map(|e| match e {
            End::Switch(s, p) => Some((s, p)),
            End::Node(_) => None,
        })
        .collect();
    let (targets, what): (&[(usize, u8)], String) = match (action, arg) {
        ("down" | "up", None) => (ends.get(..1).unwrap_or_default(), action.to_owned()),
        ("faults", Some(spec)) => (&ends, format!("faults {{port}} {spec}")),
        ("delay", Some(us)) => (&ends, format!("delay {{port}} {us}")),
        _ => return Err("action: down | up | faults SPEC|none | delay US".into()),
    };
    if targets.is_empty() {
        return Err(format!("the link of `{end}` has no switch end to act on"));
    }
    for &(s, p) in targets {
        let name = plan
            .switches
            .get(s)
            .map(|x| x.name.as_str())
            .unwrap_or_default();
        let hosted = fabric::hive_plan::hosted_in(run_dir).has(name);
        let (socket, line) = match (hosted, what == "down" || what == "up") {
            // A hosted switch's wires are the hive's (docs/hive.md).
            (true, true) => (
                fabric::hive_plan::hive_control_file(run_dir),
                format!("link {name} {p} {what}"),
            ),
            (true, false) => {
                return Err(format!(
                    "{name} is hosted in the hive, which has no faults or delays (up --process-per-node)"
                ))
            }
            (false, true) => (launch::switch_control_path(run_dir, name), format!("{what} {p}")),
            (false, false) => (
                launch::switch_control_path(run_dir, name),
                what.replace("{port}", &p.to_string()),
            ),
        };
        let reply = control::request(&socket, &line).map_err(|e| format!("{name}: {e}"))?;
        out!("{name}: {reply}");
        if !reply.starts_with("ok") {
            return Err(format!("{name} refused `{line}`"));
        }
    }
    Ok(())
}
