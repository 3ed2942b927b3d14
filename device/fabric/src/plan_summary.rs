//! A plan in words, as `ibtca-fabric check` and `up` print it.

use std::fmt::Write as _;

use ibtca_agents::vl_config::{format_list, VlConfig};
use ibtca_sched::CpuList;

use super::plan::{End, Plan};

fn end_name(plan: &Plan, end: End) -> String {
    match end {
        End::Node(n) => plan
            .nodes
            .get(n)
            .map(|x| x.name.clone())
            .unwrap_or_default(),
        End::Switch(s, p) => format!(
            "{}:{p}",
            plan.switches
                .get(s)
                .map(|x| x.name.as_str())
                .unwrap_or_default()
        ),
    }
}

/// The VL settings of a port, when they are not the defaults.
fn vl_line(out: &mut String, vl: &VlConfig, port: &str) {
    if *vl != VlConfig::default() {
        let _ = writeln!(
            out,
            "    {port}SL→VL {}  VL weights {}",
            format_list(&vl.sl2vl),
            format_list(&vl.weights)
        );
    }
}

/// What `check` and `up` print about a plan: its nodes with LIDs, GUIDs and
/// sockets, switches with their forwarding tables, links and the SM.
pub fn summary(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} node(s), {} switch(es), {} link(s)",
        plan.nodes.len(),
        plan.switches.len(),
        plan.links.len()
    );
    for n in &plan.nodes {
        let _ = writeln!(
            out,
            "  node {:<10} LID {:<5} GUID {:#018x}{}  {}",
            n.name,
            n.lid,
            n.node_guid,
            if n.port_guid == n.node_guid {
                String::new()
            } else {
                format!(" port GUID {:#018x}", n.port_guid)
            },
            match (&n.gateway, &n.sim_port) {
                (_, Some(name)) => format!("host port: IBSIM_SOCKNAME={name}"),
                (Some(g), None) => {
                    format!("gateway: ATM {}, control {}", g.atm, g.control.display())
                }
                (None, None) => n.socket.display().to_string(),
            }
        );
        vl_line(&mut out, &n.vl, "");
        if n.cpus.is_some()
            || n.realtime.is_some()
            || n.sched_batch
            || n.guest_cpus.is_some()
            || n.guest_nice.is_some()
        {
            let show =
                |c: &Option<CpuList>| c.as_ref().map_or("any".to_owned(), ToString::to_string);
            let _ = writeln!(
                out,
                "    device CPUs {}, {}; guest CPUs {}{}",
                show(&n.cpus),
                match (n.realtime, n.sched_batch) {
                    (Some(p), _) => format!("SCHED_FIFO {p}"),
                    (None, true) => "SCHED_BATCH".to_owned(),
                    (None, false) => "normal priority".to_owned(),
                },
                show(&n.guest_cpus),
                n.guest_nice
                    .map(|v| format!(", guest nice {v}"))
                    .unwrap_or_default()
            );
        }
    }
    for sw in &plan.switches {
        let routes: Vec<String> = sw.routes.iter().map(|(l, p)| format!("{l}→{p}")).collect();
        let _ = writeln!(
            out,
            "  switch {:<8} {} ports, LFT {}",
            sw.name,
            sw.ports.len(),
            if sw.sm_managed {
                "set by the SM".to_owned()
            } else {
                routes.join(" ")
            }
        );
        for (i, vl) in sw.vls.iter().enumerate() {
            vl_line(&mut out, vl, &format!("port {}: ", i + 1));
        }
    }
    for &(a, b) in &plan.links {
        let _ = writeln!(
            out,
            "  link {} <-> {}",
            end_name(plan, a),
            end_name(plan, b)
        );
    }
    if let Some(sm) = &plan.sm {
        let _ = writeln!(
            out,
            "  sm: OpenSM in {}'s guest (up --guests), every device and switch --sm-managed",
            sm.node
        );
        let _ = writeln!(out, "    {}", sm.opensm_command());
        for record in sm.guid2lid_records() {
            let _ = writeln!(out, "    guid2lid {record}");
        }
    }
    out.pop();
    out
}
