//! `ibtca-fabric switch SWITCH down|up`: a running switch powered off or
//! on. A switch hosted in the hive is powered by the hive's control
//! socket (`switch NODE down|up`, docs/hive.md); a switch process is
//! killed and started again on its sockets
//! (`ibtca_fabric::switch_restart`).

use std::path::Path;
use std::time::Duration;

use ibtca_fabric::{self as fabric, switch_restart};
use ibtca_switch::control;

use crate::loading::running_plan;

pub(crate) fn switch_command(
    run_dir: &Path,
    name: &str,
    on: bool,
    timeout: Duration,
) -> Result<(), String> {
    let plan = running_plan(run_dir)?;
    if !plan.switches.iter().any(|s| s.name == name) {
        return Err(format!("`{name}` is no switch of the fabric"));
    }
    let action = if on { "up" } else { "down" };
    if fabric::hive_plan::hosted_in(run_dir).has(name) {
        let socket = fabric::hive_plan::hive_control_file(run_dir);
        let line = format!("switch {name} {action}");
        let reply = control::request(&socket, &line).map_err(|e| format!("hive: {e}"))?;
        if !reply.starts_with("ok") {
            return Err(format!("the hive refused `{line}`: {reply}"));
        }
        out!("{name}: powered {}", if on { "on" } else { "off" });
        return Ok(());
    }
    if !on {
        let was_on = switch_restart::power_off(run_dir, name).map_err(|e| e.to_string())?;
        out!(
            "{name}: powered off{}",
            if was_on { "" } else { " (it was)" }
        );
        return Ok(());
    }
    if switch_restart::is_running(run_dir, name).map_err(|e| e.to_string())? {
        out!("{name}: powered on (it was)");
        return Ok(());
    }
    let p = switch_restart::restart(&plan, run_dir, &crate::bin_dir()?, name, true, timeout)
        .map_err(|e| e.to_string())?;
    out!("{name}: powered on (pid {})", p.pid);
    Ok(())
}
