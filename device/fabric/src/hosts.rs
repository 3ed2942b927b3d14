//! A fabric spread over hosts: the file's `hosts` (each an address and a
//! TCP port base) and each node's and switch's `host`. [`apply`] checks
//! them, turns every link between two hosts into a TCP link (its listen
//! side, as the plan chose it, on its host's address at `port_base + i`,
//! `i` the link's number in the plan; the other side connects there) and,
//! for `up --host NAME`, keeps only what that host runs.
//!
//! A relay switch (the launcher's, for a link between two nodes with
//! faults, delay or a capture) runs on the host of the link's end `a`.
//! The plan's `links` keep only the links between ends on the host
//! selected; the links to other hosts are in [`CrossLink`]s.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ibtca_link::{LinkEndpoint, TcpAddress};

use super::plan::{End, Plan, TopologyError, TopologyErrors};
use super::topology::{HostSpec, Topology};

/// A link between two hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrossLink {
    /// The listening end, as `name` or `switch:port`, and its host.
    pub listen: (String, String),
    /// The connecting end and its host.
    pub connect: (String, String),
    /// Where the listen end listens.
    pub address: TcpAddress,
}

/// The host of each of the plan's switches and nodes.
struct Hosts {
    switches: Vec<String>,
    nodes: Vec<String>,
}

impl Hosts {
    fn of(&self, end: End) -> &str {
        match end {
            End::Node(n) => self.nodes.get(n),
            End::Switch(s, _) => self.switches.get(s),
        }
        .map_or("", String::as_str)
    }
}

fn err(text: String) -> TopologyError {
    TopologyError::Hosts(text)
}

/// Checks the hosts of `topo` against `plan` (made from it), makes the
/// links between hosts TCP links and, with `host`, keeps only what that
/// host runs. Returns the links between hosts. A file without `hosts`
/// is left as it is (and `host` is then an error).
pub fn apply(
    topo: &Topology,
    plan: &mut Plan,
    host: Option<&str>,
) -> Result<Vec<CrossLink>, TopologyErrors> {
    let hosts = place(topo, plan)?;
    let Some(hosts) = hosts else {
        return match host {
            Some(h) => Err(TopologyErrors(vec![err(format!(
                "--host {h}: the file names no hosts"
            ))])),
            None => Ok(Vec::new()),
        };
    };
    if let Some(h) = host.filter(|h| !topo.hosts.contains_key(*h)) {
        let known: Vec<&str> = topo.hosts.keys().map(String::as_str).collect();
        return Err(TopologyErrors(vec![err(format!(
            "--host {h}: the file's hosts are {}",
            known.join(", ")
        ))]));
    }
    let cross = make_tcp(topo, plan, &hosts, host)?;
    if let Some(h) = host {
        keep_host(plan, &hosts, h);
    }
    Ok(cross)
}

/// Which host runs each switch and node of `plan`; `None` if the file
/// names no hosts. Every node and switch must name one of the file's.
fn place(topo: &Topology, plan: &Plan) -> Result<Option<Hosts>, TopologyErrors> {
    let named = topo
        .nodes
        .iter()
        .map(|n| (&n.name, &n.host))
        .chain(topo.switches.iter().map(|s| (&s.name, &s.host)));
    let mut problems = Vec::new();
    if topo.hosts.is_empty() {
        problems.extend(named.filter_map(|(name, host)| {
            host.as_ref().map(|h| {
                err(format!(
                    "`{name}` names host `{h}`, but the file has no `hosts`"
                ))
            })
        }));
        return if problems.is_empty() {
            Ok(None)
        } else {
            Err(TopologyErrors(problems))
        };
    }
    for (name, host) in named {
        match host {
            None => problems.push(err(format!(
                "`{name}` names no host (the file has `hosts`: every node and switch names one)"
            ))),
            Some(h) if !topo.hosts.contains_key(h) => problems.push(err(format!(
                "`{name}` names host `{h}`, which `hosts` lacks"
            ))),
            Some(_) => {}
        }
    }
    let last_link = u32::try_from(plan.links.len().saturating_sub(1)).unwrap_or(u32::MAX);
    for (name, h) in &topo.hosts {
        if h.address.trim().is_empty() || h.address.contains(char::is_whitespace) {
            problems.push(err(format!(
                "host `{name}`: address `{}` is no address",
                h.address
            )));
        }
        if u32::from(h.port_base) + last_link > u32::from(u16::MAX) || h.port_base == 0 {
            problems.push(err(format!(
                "host `{name}`: port_base {} leaves no TCP port for each of the {} links",
                h.port_base,
                plan.links.len()
            )));
        }
    }
    if !problems.is_empty() {
        return Err(TopologyErrors(problems));
    }
    let host_of = |h: &Option<String>| h.clone().unwrap_or_default();
    let nodes = topo.nodes.iter().map(|n| host_of(&n.host)).collect();
    let mut switches: Vec<String> = topo.switches.iter().map(|s| host_of(&s.host)).collect();
    // Relay switches, after the file's: on the host of what their port 1
    // links to (the file's end `a`).
    for s in switches.len()..plan.switches.len() {
        let a = plan.links.iter().find_map(|&(x, y)| match (x, y) {
            (End::Switch(r, 1), other) | (other, End::Switch(r, 1)) if r == s => Some(other),
            _ => None,
        });
        let host = match a {
            Some(End::Node(n)) => topo.nodes.get(n).map(|n| host_of(&n.host)),
            Some(End::Switch(t, _)) => switches.get(t).cloned(),
            None => None,
        };
        switches.push(host.unwrap_or_default());
    }
    Ok(Some(Hosts { switches, nodes }))
}

/// The endpoint of `end` in `plan`.
fn endpoint_mut(plan: &mut Plan, end: End) -> Option<&mut LinkEndpoint> {
    match end {
        End::Node(n) => plan.nodes.get_mut(n)?.link.as_mut(),
        End::Switch(s, p) => {
            let port = plan
                .switches
                .get_mut(s)?
                .ports
                .get_mut(usize::from(p).checked_sub(1)?)?;
            port.as_mut().map(|p| &mut p.endpoint)
        }
    }
}

/// How an end reads in a message: `n1`, `sw0:3`.
fn end_name(plan: &Plan, end: End) -> String {
    match end {
        End::Node(n) => plan.nodes.get(n).map_or("?".into(), |n| n.name.clone()),
        End::Switch(s, p) => format!(
            "{}:{p}",
            plan.switches.get(s).map_or("?", |s| s.name.as_str())
        ),
    }
}

/// The IP address of `spec` (a name resolved; a device's or switch's
/// sandboxed link threads are given addresses, never names to look up).
fn ip_of(name: &str, spec: &HostSpec) -> Result<String, TopologyError> {
    if spec.address.parse::<IpAddr>().is_ok() {
        return Ok(spec.address.clone());
    }
    TcpAddress::new(spec.address.as_str(), spec.port_base)
        .resolve()
        .ok()
        .and_then(|addrs| addrs.first().map(|a| a.ip().to_string()))
        .ok_or_else(|| {
            err(format!(
                "host `{name}`: cannot resolve `{}` to an IP address",
                spec.address
            ))
        })
}

/// Makes every link between two hosts a TCP link. Addresses are resolved
/// only where `host` (if given) needs them: its own, and those its links
/// connect to.
fn make_tcp(
    topo: &Topology,
    plan: &mut Plan,
    hosts: &Hosts,
    host: Option<&str>,
) -> Result<Vec<CrossLink>, TopologyErrors> {
    let mut cross = Vec::new();
    let mut problems = Vec::new();
    let mut ips: BTreeMap<&str, String> = BTreeMap::new();
    for (i, &(x, y)) in plan.links.clone().iter().enumerate() {
        let (hx, hy) = (hosts.of(x), hosts.of(y));
        if hx == hy {
            continue;
        }
        let x_listens = endpoint_mut(plan, x).is_some_and(|e| e.listens());
        let (listen, connect) = if x_listens { (x, y) } else { (y, x) };
        let (lh, ch) = (hosts.of(listen), hosts.of(connect));
        let Some((lh_name, spec)) = topo.hosts.get_key_value(lh) else {
            continue;
        };
        let involved = host.is_none_or(|h| h == lh || h == ch);
        let ip = match ips.get(lh) {
            Some(ip) => ip.clone(),
            None if !involved => spec.address.clone(),
            None => match ip_of(lh_name, spec) {
                Ok(ip) => {
                    ips.insert(lh_name, ip.clone());
                    ip
                }
                Err(e) => {
                    problems.push(e);
                    continue;
                }
            },
        };
        let port = u16::try_from(usize::from(spec.port_base) + i).unwrap_or(u16::MAX);
        let address = TcpAddress::new(ip, port);
        if let Some(e) = endpoint_mut(plan, listen) {
            *e = LinkEndpoint::ListenTcp(address.clone());
        }
        if let Some(e) = endpoint_mut(plan, connect) {
            *e = LinkEndpoint::ConnectTcp(address.clone());
        }
        cross.push(CrossLink {
            listen: (end_name(plan, listen), lh.to_owned()),
            connect: (end_name(plan, connect), ch.to_owned()),
            address,
        });
    }
    if problems.is_empty() {
        Ok(cross)
    } else {
        Err(TopologyErrors(problems))
    }
}

/// Keeps the switches and nodes of `host` only, and the links between
/// them (their ends renumbered).
fn keep_host(plan: &mut Plan, hosts: &Hosts, host: &str) {
    let renumber = |on: &[String]| -> Vec<Option<usize>> {
        let mut next = 0;
        on.iter()
            .map(|h| {
                (h == host).then(|| {
                    next += 1;
                    next - 1
                })
            })
            .collect()
    };
    let (switches, nodes) = (renumber(&hosts.switches), renumber(&hosts.nodes));
    let moved = |end: End| match end {
        End::Node(n) => nodes.get(n).copied().flatten().map(End::Node),
        End::Switch(s, p) => switches
            .get(s)
            .copied()
            .flatten()
            .map(|s| End::Switch(s, p)),
    };
    plan.links = plan
        .links
        .iter()
        .filter_map(|&(a, b)| Some((moved(a)?, moved(b)?)))
        .collect();
    let mut i = 0;
    plan.switches.retain(|_| {
        i += 1;
        hosts.switches.get(i - 1).is_some_and(|h| h == host)
    });
    let mut i = 0;
    plan.nodes.retain(|_| {
        i += 1;
        hosts.nodes.get(i - 1).is_some_and(|h| h == host)
    });
}

/// The file in a run directory that names the host `up --host` started.
pub const HOST_FILE: &str = "fabric-host";

/// Records in `run_dir` which host `up` started (no file: all of them).
pub fn save(run_dir: &std::path::Path, host: Option<&str>) -> std::io::Result<()> {
    let file = run_dir.join(HOST_FILE);
    match host {
        Some(h) => std::fs::write(file, h),
        None => match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    }
}

/// The host `up --host` started in `run_dir`, if it was given one.
pub fn saved(run_dir: &std::path::Path) -> Option<String> {
    std::fs::read_to_string(run_dir.join(HOST_FILE))
        .ok()
        .map(|h| h.trim().to_owned())
}

/// One line per link between hosts, for `check` and `up`.
pub fn summary(cross: &[CrossLink]) -> Vec<String> {
    cross
        .iter()
        .map(|c| {
            format!(
                "  tcp link: {} (host {}) listens on {}, {} (host {}) connects",
                c.listen.0, c.listen.1, c.address, c.connect.0, c.connect.1
            )
        })
        .collect()
}
