//! The command lines of the fabric's device and switch processes, built
//! from their plans, and the run-directory paths they name.

use std::path::{Path, PathBuf};

use ibtca_agents::vl_config::{format_list, VlConfig};
use ibtca_switch::spec::format_faults;

use super::plan::{NodePlan, SwitchPlan};

/// The status file a switch keeps in the run directory.
pub fn switch_status_path(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.status.json"))
}

/// The control socket a switch serves in the run directory.
pub fn switch_control_path(run_dir: &Path, name: &str) -> PathBuf {
    control_path(run_dir, name)
}

/// The control socket of the switch, device or gateway `name` in the run
/// directory.
pub fn control_path(run_dir: &Path, name: &str) -> PathBuf {
    run_dir.join(format!("{name}.control"))
}

/// The `ibtca-switch` arguments for `sw`.
pub fn switch_args(sw: &SwitchPlan, run_dir: &Path) -> Vec<String> {
    let mut args = vec![
        // The switch reports its --name as NodeDescription.
        "--name".to_owned(),
        sw.description.clone(),
        "--guid".to_owned(),
        format!("{:#x}", sw.guid),
        "--status-file".to_owned(),
        switch_status_path(run_dir, &sw.name).display().to_string(),
        "--control".to_owned(),
        switch_control_path(run_dir, &sw.name).display().to_string(),
    ];
    if let Some(kib) = sw.link_ring_kib {
        args.push(format!("--link-ring-kib={kib}"));
    }
    for (i, port) in sw.ports.iter().enumerate() {
        let p = i + 1;
        match port {
            Some(pp) => {
                args.push(format!("--port={}", pp.endpoint));
                if let Some(r) = &pp.faults {
                    args.push(format!("--faults={p}={}", format_faults(r)));
                }
                if let Some(c) = &pp.capture {
                    args.push(format!("--capture={p}={}", c.display()));
                }
                if pp.delay_us > 0 {
                    args.push(format!("--delay={p}={}", pp.delay_us));
                }
                if pp.vl != VlConfig::default() {
                    args.push(format!("--sl2vl={p}={}", format_list(&pp.vl.sl2vl)));
                    args.push(format!("--vl-weights={p}={}", format_list(&pp.vl.weights)));
                }
            }
            // An unlinked port still exists: it listens on a socket nobody
            // connects to, so port numbers stay as in the file.
            None => args.push(format!(
                "--port=listen:{}",
                run_dir
                    .join("links")
                    .join(format!("{}-p{p}.unused", sw.name))
                    .display()
            )),
        }
    }
    for (lid, port) in &sw.routes {
        args.push(format!("--route={lid}={port}"));
    }
    if sw.sm_managed {
        args.push("--sm-managed".to_owned());
    }
    if sw.no_seccomp {
        args.push("--no-seccomp".to_owned());
    }
    args
}

/// The `ibtca-device` arguments of node `n`.
pub fn device_args(n: &NodePlan) -> Vec<String> {
    let mut args = vec![
        "--socket".to_owned(),
        n.socket.display().to_string(),
        "--lid".to_owned(),
        n.lid.to_string(),
        "--node-guid".to_owned(),
        format!("{:#x}", n.node_guid),
        "--port-guid".to_owned(),
        format!("{:#x}", n.port_guid),
        "--node-description".to_owned(),
        n.description.clone(),
    ];
    if let Some(ep) = &n.link {
        args.push(format!("--link={ep}"));
    }
    if n.vl != VlConfig::default() {
        args.push(format!("--sl2vl={}", format_list(&n.vl.sl2vl)));
        args.push(format!("--vl-weights={}", format_list(&n.vl.weights)));
    }
    if let Some(cpus) = &n.cpus {
        args.push(format!("--cpus={cpus}"));
    }
    if let Some(prio) = n.realtime {
        args.push(format!("--realtime={prio}"));
    }
    if n.sched_batch {
        args.push("--sched-batch".to_owned());
    }
    if let Some(kib) = n.link_ring_kib {
        args.push(format!("--link-ring-kib={kib}"));
    }
    if n.drdma_mapped {
        args.push("--drdma-window=mapped".to_owned());
    }
    if n.sm_managed {
        args.push("--sm-managed".to_owned());
    }
    if n.no_seccomp {
        args.push("--no-seccomp".to_owned());
    }
    args.push(format!("--min-ack-timeout-ms={}", n.min_ack_timeout_ms));
    // Beside a niced guest the vfio-user thread must not spin: spinning,
    // it yields its CPU to the busy vCPU, and a doorbell that comes then
    // waits for the vCPU's time slice to end (up to a scheduler tick);
    // asleep, it is woken and preempts the niced vCPU at once
    // (docs/placement.md, "Recorded: `ib_write_lat` beside niced guests":
    // from runnable to running the vfio-user thread waited 21 µs on
    // average asleep, against 0.17 and 0.94 ms with a 50 µs spin).
    if n.guest_nice.is_some_and(|nice| nice > 0) && n.realtime.is_none() {
        args.push("--spin-us=0".to_owned());
    }
    args
}
