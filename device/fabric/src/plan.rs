//! From a [`Topology`] to a [`Plan`]: every check a topology file must pass
//! (all reported before anything starts), socket paths for every link, and
//! each switch's forwarding table, computed by breadth-first search over
//! the switch graph.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use ibtca_link::{FaultRates, LinkEndpoint};
use ibtca_sched::CpuList;
use ibtca_switch::MAX_UNICAST_LID;

use ibtca_agents::vl_config::{VlConfig, MAX_DATA_VLS, SLS};

use super::gateway_node::{self, GatewayPlan};
pub use super::plan_error::{TopologyError, TopologyErrors};
use super::plan_error::{MAX_SOCKET_PATH, NODE_DESCRIPTION_BYTES};
use super::sm_plan::{self, SmPlan};
use super::topology::{DrdmaWindow, FaultSpec, Topology, VlSpec};

/// One end of a link, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum End {
    /// Node by index.
    Node(usize),
    /// Switch by index, port from 1.
    Switch(usize, u8),
}

/// How to run one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePlan {
    /// Name.
    pub name: String,
    /// LID.
    pub lid: u16,
    /// Node GUID.
    pub node_guid: u64,
    /// Port GUID.
    pub port_guid: u64,
    /// NodeDescription (`--node-description`).
    pub description: String,
    /// vfio-user socket.
    pub socket: PathBuf,
    /// Its link, if it has one.
    pub link: Option<LinkEndpoint>,
    /// SL → VL table and VL weights of its port.
    pub vl: VlConfig,
    /// CPUs of the device's threads (`--cpus`).
    pub cpus: Option<CpuList>,
    /// `SCHED_FIFO` priority of the device's threads (`--realtime`).
    pub realtime: Option<u8>,
    /// The device's threads under `SCHED_BATCH` (`--sched-batch`).
    pub sched_batch: bool,
    /// CPUs of the node's guest (QEMU), from its `guest.cpus`.
    pub guest_cpus: Option<CpuList>,
    /// Niceness of the node's guest (QEMU), from its `guest.nice`.
    pub guest_nice: Option<i8>,
    /// Its link's shared ring in KiB (`--link-ring-kib`), if the file sets
    /// one.
    pub link_ring_kib: Option<u64>,
    /// Its DRDMA window mapped into the guest (`--drdma-window mapped`).
    pub drdma_mapped: bool,
    /// Its local ACK timeout floor in ms (`--min-ack-timeout-ms`).
    pub min_ack_timeout_ms: u64,
    /// Set when the node is an `ibtca-gateway`, not a device.
    pub gateway: Option<GatewayPlan>,
    /// Set when the node is an `ibtca-simport` (host programs own its
    /// port): its socket name.
    pub sim_port: Option<String>,
    /// A subnet manager brings the port up (`--sm-managed`).
    pub sm_managed: bool,
    /// Started without its seccomp filter (`--no-seccomp`).
    pub no_seccomp: bool,
}

/// The niceness values a guest's QEMU may be given (`guest.nice`).
pub const NICENESS: std::ops::RangeInclusive<i8> = -20..=19;

/// Parses the `cpus` of `name` (a node or a node's guest).
pub fn parse_cpus(name: &str, text: Option<&str>) -> Result<Option<CpuList>, TopologyError> {
    text.map(|t| {
        t.parse().map_err(|reason| TopologyError::BadCpus {
            name: name.to_owned(),
            reason,
        })
    })
    .transpose()
}

/// How to run one switch port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPlan {
    /// The port's link.
    pub endpoint: LinkEndpoint,
    /// Faults on what it sends.
    pub faults: Option<FaultRates>,
    /// Capture file.
    pub capture: Option<PathBuf>,
    /// Delay of what it sends, µs.
    pub delay_us: u64,
    /// SL → VL table and VL weights.
    pub vl: VlConfig,
}

/// How to run one switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchPlan {
    /// Name.
    pub name: String,
    /// Node GUID.
    pub guid: u64,
    /// NodeDescription (the switch's `--name`).
    pub description: String,
    /// Port 1 first; `None` for a port with no link.
    pub ports: Vec<Option<PortPlan>>,
    /// Forwarding table: (LID, port), sorted.
    pub routes: Vec<(u16, u8)>,
    /// VL settings of each port (port 1 first), linked or not.
    pub vls: Vec<VlConfig>,
    /// Its ports' shared rings in KiB (`--link-ring-kib`), if the file
    /// sets one.
    pub link_ring_kib: Option<u64>,
    /// A subnet manager routes it and brings its ports up
    /// (`--sm-managed`; `routes` is then empty).
    pub sm_managed: bool,
    /// Started without its seccomp filter (`--no-seccomp`).
    pub no_seccomp: bool,
}

/// Everything to start, in order: switches, then nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The switches.
    pub switches: Vec<SwitchPlan>,
    /// The devices.
    pub nodes: Vec<NodePlan>,
    /// The links' ends, as in the file.
    pub links: Vec<(End, End)>,
    /// The subnet manager, if the file names one.
    pub sm: Option<SmPlan>,
}

/// Parses a topology file's text.
pub fn parse(text: &str) -> Result<Topology, TopologyError> {
    serde_json::from_str(text).map_err(|e| TopologyError::Syntax(e.to_string()))
}

fn parse_guid(name: &str, text: &str) -> Result<u64, TopologyError> {
    ibtca_agents::guid::parse(text).map_err(|_| TopologyError::BadGuid {
        name: name.to_owned(),
        text: text.to_owned(),
    })
}

/// Records `guid` as `owner`'s; a GUID already given to another is an
/// error.
fn claim_guid<'a>(
    guids: &mut HashMap<u64, &'a str>,
    guid: u64,
    owner: &'a str,
) -> Result<(), TopologyError> {
    match guids.insert(guid, owner) {
        Some(first) if first != owner => Err(TopologyError::DuplicateGuid {
            guid,
            first: first.to_owned(),
            second: owner.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// A NodeDescription fits its 64 bytes.
fn check_description(name: &str, text: &str) -> Result<(), TopologyError> {
    if text.len() > NODE_DESCRIPTION_BYTES {
        return Err(TopologyError::LongDescription {
            name: name.to_owned(),
            bytes: text.len(),
        });
    }
    Ok(())
}

fn rates(link: usize, f: &FaultSpec) -> Result<FaultRates, TopologyError> {
    if [f.drop, f.duplicate, f.reorder, f.corrupt]
        .iter()
        .any(|r| *r > 1000)
    {
        return Err(TopologyError::BadRate { link });
    }
    Ok(FaultRates {
        drop: f.drop,
        duplicate: f.duplicate,
        reorder: f.reorder,
        corrupt: f.corrupt,
        seed: f.seed,
    })
}

/// The VL settings of `port` from `spec` (defaults for what it omits),
/// checked.
pub fn vl_config(port: &str, spec: Option<&VlSpec>) -> Result<VlConfig, TopologyError> {
    let err = |error: String| TopologyError::Vl {
        port: port.to_owned(),
        error,
    };
    let Some(spec) = spec else {
        return Ok(VlConfig::default());
    };
    let n = match (spec.data_vls, &spec.weights) {
        (Some(n), Some(w)) if usize::from(n) != w.len() => {
            return Err(err(format!(
                "data_vls is {n} but {} weights are given (one per data VL)",
                w.len()
            )))
        }
        (Some(n), _) => usize::from(n),
        (None, Some(w)) => w.len(),
        (None, None) => MAX_DATA_VLS,
    };
    if n == 0 || n > MAX_DATA_VLS {
        return Err(err(format!("{n} data VLs; a port runs 1..=15")));
    }
    let weights = spec.weights.clone().unwrap_or_else(|| vec![1; n]);
    let sl2vl = match &spec.sl2vl {
        Some(t) => <[u8; SLS]>::try_from(t.as_slice())
            .map_err(|_| err(format!("sl2vl has {} entries, not 16 (SL0..SL15)", t.len())))?,
        None => {
            let mut t = [0u8; SLS];
            for (sl, vl) in t.iter_mut().enumerate() {
                *vl = if sl == SLS - 1 { 15 } else { (sl % n) as u8 };
            }
            t
        }
    };
    let cfg = VlConfig { sl2vl, weights };
    cfg.validate().map_err(|e| err(e.to_string()))?;
    Ok(cfg)
}

fn socket_path(path: PathBuf) -> Result<PathBuf, TopologyError> {
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(TopologyError::PathTooLong(path.display().to_string()));
    }
    Ok(path)
}

/// Keeps `r`'s value, or records its error and goes on with `fallback`.
fn keep<T>(problems: &mut Vec<TopologyError>, r: Result<T, TopologyError>, fallback: T) -> T {
    r.unwrap_or_else(|e| {
        problems.push(e);
        fallback
    })
}

/// How a link end reads in a message: `n1 port 1`, `sw0 port 3`.
fn end_text(topo: &Topology, end: End) -> String {
    match end {
        End::Node(n) => format!("{} port 1", topo.nodes.get(n).map_or("?", |x| &x.name)),
        End::Switch(s, p) => format!("{} port {p}", topo.switches.get(s).map_or("?", |x| &x.name)),
    }
}

/// Checks `topo` and works out everything to run, with sockets and
/// captures under `run_dir`; every problem is reported, not only the first.
pub fn plan(topo: &Topology, run_dir: &Path) -> Result<Plan, TopologyErrors> {
    let mut problems = Vec::new();
    if topo.nodes.is_empty() {
        problems.push(TopologyError::NoNodes);
    }
    let mut names: HashMap<&str, End> = HashMap::new();
    let mut guids: HashMap<u64, &str> = HashMap::new();
    let mut lids: HashMap<u16, &str> = HashMap::new();
    let mut nodes = Vec::new();
    for (i, n) in topo.nodes.iter().enumerate() {
        if names.insert(&n.name, End::Node(i)).is_some() {
            problems.push(TopologyError::DuplicateName(n.name.clone()));
        }
        if n.lid == 0 || n.lid > MAX_UNICAST_LID {
            problems.push(TopologyError::BadLid {
                node: n.name.clone(),
                lid: n.lid,
            });
        } else if let Some(first) = lids.insert(n.lid, &n.name) {
            problems.push(TopologyError::DuplicateLid {
                lid: n.lid,
                first: first.to_owned(),
                second: n.name.clone(),
            });
        }
        let default_guid = ibtca_agents::guid::FABRIC_NODE_BASE + i as u64 + 1;
        let node_guid = match &n.node_guid {
            Some(text) => keep(&mut problems, parse_guid(&n.name, text), default_guid),
            None => default_guid,
        };
        let port_guid = match &n.port_guid {
            Some(text) => keep(&mut problems, parse_guid(&n.name, text), node_guid),
            None => node_guid,
        };
        let claimed = claim_guid(&mut guids, node_guid, &n.name)
            .and_then(|()| claim_guid(&mut guids, port_guid, &n.name));
        keep(&mut problems, claimed, ());
        let socket = run_dir.join(n.socket.clone().unwrap_or(format!("{}.sock", n.name)));
        if n.realtime.is_some() && n.sched_batch {
            problems.push(TopologyError::RealtimeAndBatch {
                node: n.name.clone(),
            });
        }
        let realtime = match n.realtime {
            Some(p) if !ibtca_sched::REALTIME_PRIORITIES.contains(&p) => {
                problems.push(TopologyError::BadRealtime {
                    node: n.name.clone(),
                    priority: p,
                });
                None
            }
            other => other,
        };
        let guest_nice = match n.guest.as_ref().and_then(|g| g.nice).or(topo.guest.nice) {
            Some(nice) if !NICENESS.contains(&nice) => {
                problems.push(TopologyError::BadNice {
                    node: n.name.clone(),
                    nice,
                });
                None
            }
            other => other,
        };
        let min_ack_timeout_ms = topo.min_ack_timeout_ms(n).map_err(|ms| {
            let node = n.name.clone();
            TopologyError::BadMinAckTimeout { node, ms }
        });
        let gateway = gateway_node::plan(n, run_dir).map_err(|error| TopologyError::Gateway {
            node: n.name.clone(),
            error,
        });
        let guest_cpus = parse_cpus(
            &format!("{} guest", n.name),
            n.guest.as_ref().and_then(|g| g.cpus.as_deref()),
        );
        // What an SM and ibnetdiscover show for the node by default: its
        // name and the guest's RDMA device, as a real HCA says "host mlx5_0".
        let description = n.description.clone();
        let description = description.unwrap_or_else(|| format!("{} ibtca0", n.name));
        keep(&mut problems, check_description(&n.name, &description), ());
        nodes.push(NodePlan {
            name: n.name.clone(),
            lid: n.lid,
            node_guid,
            port_guid,
            description,
            socket: keep(&mut problems, socket_path(socket.clone()), socket),
            link: None,
            vl: keep(
                &mut problems,
                vl_config(&n.name, n.vl.as_ref()),
                VlConfig::default(),
            ),
            cpus: keep(&mut problems, parse_cpus(&n.name, n.cpus.as_deref()), None),
            realtime,
            sched_batch: n.sched_batch,
            guest_cpus: keep(&mut problems, guest_cpus, None),
            guest_nice,
            link_ring_kib: n.link_ring_kib,
            drdma_mapped: n.drdma_window == DrdmaWindow::Mapped,
            min_ack_timeout_ms: keep(&mut problems, min_ack_timeout_ms, 0),
            gateway: keep(&mut problems, gateway, None),
            sim_port: n.sim_port.clone(),
            sm_managed: topo.sm.is_some() || topo.has_sim_port(),
            no_seccomp: topo.seccomp == Some(false),
        });
    }
    let mut switches = Vec::new();
    for (i, s) in topo.switches.iter().enumerate() {
        if names.insert(&s.name, End::Switch(i, 0)).is_some() {
            problems.push(TopologyError::DuplicateName(s.name.clone()));
        }
        if s.ports == 0 || s.ports > 254 {
            problems.push(TopologyError::SwitchPorts {
                switch: s.name.clone(),
                ports: s.ports,
            });
        }
        let default_guid = ibtca_agents::guid::FABRIC_SWITCH_BASE + i as u64 + 1;
        let guid = match &s.guid {
            Some(text) => keep(&mut problems, parse_guid(&s.name, text), default_guid),
            None => default_guid,
        };
        let claimed = claim_guid(&mut guids, guid, &s.name);
        keep(&mut problems, claimed, ());
        let mut vls = Vec::new();
        for p in 1..=s.ports.min(254) {
            let spec = s.ports_vl.get(&p).or(s.vl.as_ref());
            let vl = vl_config(&format!("{}:{p}", s.name), spec);
            vls.push(keep(&mut problems, vl, VlConfig::default()));
        }
        for &p in s.ports_vl.keys().filter(|p| **p == 0 || **p > s.ports) {
            problems.push(TopologyError::Vl {
                port: format!("{}:{p}", s.name),
                error: format!("ports_vl names port {p}; the switch has 1..={}", s.ports),
            });
        }
        let description = s.description.clone().unwrap_or_else(|| s.name.clone());
        keep(&mut problems, check_description(&s.name, &description), ());
        switches.push(SwitchPlan {
            name: s.name.clone(),
            guid,
            description,
            ports: vec![None; vls.len()],
            routes: Vec::new(),
            vls,
            link_ring_kib: s.link_ring_kib,
            sm_managed: topo.sm.is_some() || topo.has_sim_port(),
            no_seccomp: topo.seccomp == Some(false),
        });
    }

    let mut used: HashMap<End, usize> = HashMap::new();
    let mut links = Vec::new();
    for (li, l) in topo.links.iter().enumerate() {
        let resolve = |end: &str| -> Result<End, TopologyError> {
            let nowhere = || TopologyError::LinkToNowhere {
                link: li,
                end: end.to_owned(),
            };
            let (name, port) = match end.split_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (end, None),
            };
            if name.is_empty() {
                return Err(nowhere());
            }
            match (names.get(name), port) {
                (None, _) => Err(TopologyError::UnknownNode {
                    link: li,
                    end: end.to_owned(),
                }),
                (Some(End::Node(n)), None) => Ok(End::Node(*n)),
                (Some(End::Switch(s, _)), Some(p)) => {
                    let p: u16 = p.parse().map_err(|_| nowhere())?;
                    let ports = topo.switches.get(*s).map_or(0, |x| x.ports);
                    if p == 0 || p > ports {
                        return Err(TopologyError::PortOutOfRange {
                            link: li,
                            switch: name.to_owned(),
                            port: p,
                            ports,
                        });
                    }
                    Ok(End::Switch(*s, u8::try_from(p).map_err(|_| nowhere())?))
                }
                _ => Err(nowhere()),
            }
        };
        let (a, b) = match (resolve(&l.a), resolve(&l.b)) {
            (Ok(a), Ok(b)) => (a, b),
            (ra, rb) => {
                problems.extend(ra.err());
                problems.extend(rb.err());
                continue;
            }
        };
        if a == b {
            problems.push(TopologyError::LinkToItself {
                link: li,
                port: end_text(topo, a),
            });
            continue;
        }
        let mut twice = false;
        for (end, text) in [(a, &l.a), (b, &l.b)] {
            if let Some(first) = used.insert(end, li) {
                problems.push(TopologyError::PortUsedTwice {
                    port: text.clone(),
                    first,
                    second: li,
                });
                twice = true;
            }
        }
        let faults = l.faults.as_ref().map(|f| rates(li, f)).transpose();
        let faults = keep(&mut problems, faults, None);
        if twice {
            continue;
        }
        let has_options = l.faults.is_some() || l.capture.is_some() || l.delay_us > 0;
        let options = LinkOptions {
            faults,
            capture: l.capture.as_ref().map(|c| run_dir.join(c)),
            delay_us: l.delay_us,
        };
        let link_path = |suffix: &str| {
            let p = run_dir.join("links").join(format!("l{li}{suffix}.link"));
            socket_path(p.clone()).map_err(|e| (e, p))
        };
        let mut link_path = |suffix: &str| match link_path(suffix) {
            Ok(p) => p,
            Err((e, p)) => {
                problems.push(e);
                p
            }
        };
        if matches!((a, b), (End::Node(_), End::Node(_))) && has_options {
            // Faults, delay and capture are a switch port's work: put a
            // two-port relay switch in the middle of the link.
            let name = format!("relay-l{li}");
            let guid = ibtca_agents::guid::FABRIC_RELAY_BASE + li as u64;
            let (path_a, path_b) = (link_path("a"), link_path("b"));
            if names.contains_key(name.as_str()) || guids.contains_key(&guid) {
                problems.push(TopologyError::DuplicateName(name));
                continue;
            }
            let s = switches.len();
            switches.push(SwitchPlan {
                description: name.clone(),
                name,
                guid,
                ports: vec![None, None],
                routes: Vec::new(),
                vls: vec![VlConfig::default(); 2],
                link_ring_kib: None,
                sm_managed: topo.sm.is_some() || topo.has_sim_port(),
                no_seccomp: topo.seccomp == Some(false),
            });
            let (ra, rb) = (End::Switch(s, 1), End::Switch(s, 2));
            attach(&mut nodes, &mut switches, ra, a, &path_a, &options);
            let no_capture = LinkOptions {
                capture: None,
                ..options
            };
            attach(&mut nodes, &mut switches, rb, b, &path_b, &no_capture);
            links.push((a, ra));
            links.push((rb, b));
            continue;
        }
        // Switches listen (they start first); between two switches or two
        // nodes, end `a` listens.
        let (listen, connect) = match (a, b) {
            (End::Node(_), End::Switch(..)) => (b, a),
            _ => (a, b),
        };
        let path = link_path("");
        attach(&mut nodes, &mut switches, listen, connect, &path, &options);
        links.push((a, b));
    }
    let sm_nodes: Vec<sm_plan::SmNode<'_>> = nodes
        .iter()
        .map(|n| sm_plan::SmNode {
            name: &n.name,
            // A gateway's one port answers with its node GUID.
            port_guid: if n.gateway.is_some() {
                n.node_guid
            } else {
                n.port_guid
            },
            lid: n.lid,
            gateway: n.gateway.is_some(),
        })
        .collect();
    let sm = sm_plan::plan(
        topo.sm.as_deref(),
        &topo.sm_options,
        topo.sm_partitions.as_deref(),
        &sm_nodes,
    )
    .map_err(TopologyError::Sm);
    let sm = keep(&mut problems, sm, None);
    if !problems.is_empty() {
        return Err(TopologyErrors(problems));
    }
    if sm.is_none() {
        compute_routes(&mut switches, &nodes, &links);
    }
    Ok(Plan {
        switches,
        nodes,
        links,
        sm,
    })
}

/// What a link's switch ends do besides forwarding.
#[derive(Debug, Clone)]
struct LinkOptions {
    faults: Option<FaultRates>,
    capture: Option<PathBuf>,
    delay_us: u64,
}

/// Joins `listen` and `connect` by a link at `path`. Faults and delay apply
/// at every switch end (both directions between two switches), the capture
/// at the first.
fn attach(
    nodes: &mut [NodePlan],
    switches: &mut [SwitchPlan],
    listen: End,
    connect: End,
    path: &Path,
    options: &LinkOptions,
) {
    let mut capture = options.capture.clone();
    for (end, ep) in [
        (listen, LinkEndpoint::Listen(path.to_path_buf())),
        (connect, LinkEndpoint::Connect(path.to_path_buf())),
    ] {
        match end {
            End::Node(n) => {
                if let Some(node) = nodes.get_mut(n) {
                    node.link = Some(ep);
                }
            }
            End::Switch(s, p) => {
                let Some(sw) = switches.get_mut(s) else {
                    continue;
                };
                let i = usize::from(p).wrapping_sub(1);
                let vl = sw.vls.get(i).cloned().unwrap_or_default();
                if let Some(slot) = sw.ports.get_mut(i) {
                    *slot = Some(PortPlan {
                        endpoint: ep,
                        faults: options.faults,
                        capture: capture.take(),
                        delay_us: options.delay_us,
                        vl,
                    });
                }
            }
        }
    }
}

/// Fills each switch's routes: a node on the switch itself goes out of its
/// port; a node on another switch goes out of the first hop of a shortest
/// path (BFS over switch-to-switch links, the file's order breaking ties).
fn compute_routes(switches: &mut [SwitchPlan], nodes: &[NodePlan], links: &[(End, End)]) {
    let n = switches.len();
    let mut adj: Vec<Vec<(usize, u8)>> = vec![Vec::new(); n];
    let mut attached: Vec<(usize, usize, u8)> = Vec::new(); // (node, switch, port)
    for &(a, b) in links {
        match (a, b) {
            (End::Switch(s1, p1), End::Switch(s2, p2)) => {
                if let Some(v) = adj.get_mut(s1) {
                    v.push((s2, p1));
                }
                if let Some(v) = adj.get_mut(s2) {
                    v.push((s1, p2));
                }
            }
            (End::Node(x), End::Switch(s, p)) | (End::Switch(s, p), End::Node(x)) => {
                attached.push((x, s, p));
            }
            _ => {}
        }
    }
    for (s, sw) in switches.iter_mut().enumerate() {
        // first_hop[t]: the port of `s` that starts a shortest path to `t`.
        let mut first_hop: Vec<Option<u8>> = vec![None; n];
        let mut seen = vec![false; n];
        let mut queue = VecDeque::new();
        if let Some(x) = seen.get_mut(s) {
            *x = true;
        }
        for &(t, port) in adj.get(s).map(Vec::as_slice).unwrap_or_default() {
            if !seen.get(t).copied().unwrap_or(true) {
                seen[t] = true;
                first_hop[t] = Some(port);
                queue.push_back(t);
            }
        }
        while let Some(u) = queue.pop_front() {
            for &(t, _) in adj.get(u).map(Vec::as_slice).unwrap_or_default() {
                if !seen.get(t).copied().unwrap_or(true) {
                    seen[t] = true;
                    first_hop[t] = first_hop[u];
                    queue.push_back(t);
                }
            }
        }
        let mut routes = Vec::new();
        for &(x, t, p) in &attached {
            let port = if t == s {
                Some(p)
            } else {
                first_hop.get(t).copied().flatten()
            };
            if let (Some(port), Some(node)) = (port, nodes.get(x)) {
                routes.push((node.lid, port));
            }
        }
        routes.sort_unstable();
        sw.routes = routes;
    }
}
