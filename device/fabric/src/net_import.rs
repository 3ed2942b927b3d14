//! A parsed net file ([`crate::net_file`]) as a JSON topology
//! ([`crate::topology`]), with a warning for everything the topology does
//! not keep (docs/net-files.md).
//!
//! Each switch becomes a switch with the record's GUID, port count and
//! description. A device has one port, so each linked port of a CA becomes
//! one device: named by the CA's id when the CA has one linked port, else
//! `ID-pN` per port; it keeps the port's GUID and LID and the CA's
//! description, and the first one the CA's node GUID (the others take
//! their port GUID as node GUID). Devices without a LID in the file get
//! the lowest LIDs no other device has.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{json, Value};

use super::net_file::{NetError, NetErrors, NetFile, NetNode, NetNodeKind};

/// A net file as a topology.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The topology (what `ibtca-fabric import` prints).
    pub topology: Value,
    /// What the topology does not keep, one line each.
    pub warnings: Vec<String>,
}

/// A node id as a topology name: `[A-Za-z0-9._-]`, others as `_`.
fn name_of(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Names unique among all: a repeat gets `-2`, `-3`, ...
struct Names(HashSet<String>);

impl Names {
    fn claim(&mut self, want: String) -> String {
        let mut name = want.clone();
        let mut n = 2;
        while !self.0.insert(name.clone()) {
            name = format!("{want}-{n}");
            n += 1;
        }
        name
    }
}

/// The device for one linked port of a CA.
struct Device {
    name: String,
    node_guid: u64,
    port_guid: u64,
    lid: Option<u16>,
}

/// Converts `net` into a topology; routers are an error (ibtca has none).
pub fn import(net: &NetFile) -> Result<Imported, NetErrors> {
    let routers: Vec<NetError> = net
        .nodes
        .iter()
        .filter(|n| n.kind == NetNodeKind::Router)
        .map(|n| NetError {
            line: n.line,
            message: format!("\"{}\" is a router; ibtca has no routers", n.id),
        })
        .collect();
    if !routers.is_empty() {
        return Err(NetErrors(routers));
    }
    let mut warnings = Vec::new();
    let mut names = Names(HashSet::new());
    // Every (node id, port) some line links.
    let mut linked: HashMap<&str, BTreeSet<u8>> = HashMap::new();
    for n in &net.nodes {
        for l in &n.links {
            linked.entry(&n.id).or_default().insert(l.port);
            linked.entry(&l.remote).or_default().insert(l.remote_port);
        }
    }
    let mut switches = Vec::new();
    let mut switch_name: HashMap<&str, String> = HashMap::new();
    for s in net.nodes.iter().filter(|n| n.kind == NetNodeKind::Switch) {
        let name = names.claim(name_of(&s.id));
        switches.push(json!({
            "name": name,
            "ports": s.ports,
            "guid": format!("{:#x}", s.node_guid),
            "description": s.description,
        }));
        switch_name.insert(&s.id, name);
    }
    let mut devices: HashMap<(&str, u8), Device> = HashMap::new();
    let mut order = Vec::new();
    let mut renumbered = 0;
    for ca in net.nodes.iter().filter(|n| n.kind == NetNodeKind::Ca) {
        let ports: Vec<u8> = linked
            .get(ca.id.as_str())
            .map(|p| p.iter().copied().collect())
            .unwrap_or_else(|| vec![1]);
        let split = ports.len() > 1;
        let mut made = Vec::new();
        for (i, &port) in ports.iter().enumerate() {
            let own = ca.links.iter().find(|l| l.port == port);
            let port_guid = own
                .and_then(|l| l.port_guid)
                .unwrap_or(ca.node_guid.wrapping_add(u64::from(port)));
            let want = if split {
                format!("{}-p{port}", name_of(&ca.id))
            } else {
                name_of(&ca.id)
            };
            let name = names.claim(want);
            if port != 1 {
                renumbered += 1;
            }
            made.push(name.clone());
            order.push((ca.id.as_str(), port));
            devices.insert(
                (&ca.id, port),
                Device {
                    name,
                    node_guid: if i == 0 { ca.node_guid } else { port_guid },
                    port_guid,
                    lid: own.and_then(|l| l.lid),
                },
            );
        }
        if split {
            warnings.push(format!(
                "CA \"{}\" (line {}) has {} linked ports: devices have one, so it becomes {}",
                ca.id,
                ca.line,
                ports.len(),
                made.join(", ")
            ));
        }
    }
    if renumbered > 0 {
        warnings.push(format!(
            "{renumbered} CA port(s) other than port 1 become port 1 of their one-port device"
        ));
    }
    let mut used: HashSet<u32> = devices
        .values()
        .filter_map(|d| d.lid)
        .map(u32::from)
        .collect();
    let mut next = 1u32;
    let mut nodes = Vec::new();
    for key in &order {
        let d = &devices[key];
        // Past 0xffff devices the LIDs run out: the plan refuses them.
        let lid = d.lid.map_or_else(
            || {
                while used.contains(&next) {
                    next += 1;
                }
                used.insert(next);
                next
            },
            u32::from,
        );
        let description = net
            .nodes
            .iter()
            .find(|n| n.id == key.0)
            .map_or("", |n| n.description.as_str());
        nodes.push(json!({
            "name": d.name,
            "lid": lid,
            "node_guid": format!("{:#x}", d.node_guid),
            "port_guid": format!("{:#x}", d.port_guid),
            "description": description,
        }));
    }
    let end = |id: &str, port: u8| -> String {
        match switch_name.get(id) {
            Some(s) => format!("{s}:{port}"),
            None => devices
                .get(&(id, port))
                .map(|d| d.name.clone())
                .unwrap_or_default(),
        }
    };
    let mut seen = HashSet::new();
    let mut links = Vec::new();
    let mut rates = 0;
    for n in &net.nodes {
        for l in &n.links {
            let (a, b) = ((n.id.as_str(), l.port), (l.remote.as_str(), l.remote_port));
            if seen.insert((a, b)) && seen.insert((b, a)) {
                links.push(json!({ "a": end(a.0, a.1), "b": end(b.0, b.1) }));
            }
            if l.width.is_some() || l.speed.is_some() {
                rates += 1;
            }
        }
    }
    warn_dropped(net, rates, &mut warnings);
    Ok(Imported {
        topology: json!({ "switches": switches, "nodes": nodes, "links": links }),
        warnings,
    })
}

/// One warning per kind of what the topology drops.
fn warn_dropped(net: &NetFile, rates: usize, warnings: &mut Vec<String>) {
    let count = |f: &dyn Fn(&NetNode) -> bool| net.nodes.iter().filter(|n| f(n)).count();
    if rates > 0 {
        warnings.push(format!(
            "link widths and speeds are not kept ({rates} port lines give one): every link runs 4x QDR"
        ));
    }
    let systems = count(&|n| n.system_guid.is_some());
    if systems > 0 {
        warnings.push(format!(
            "system image GUIDs are not kept ({systems} nodes give one): each node reports its node GUID"
        ));
    }
    let ids = count(&|n| n.vendor_id.is_some() || n.device_id.is_some());
    if ids > 0 {
        warnings.push(format!(
            "vendor and device ids are not kept ({ids} nodes give one)"
        ));
    }
    let lids = count(&|n| n.kind == NetNodeKind::Switch && n.lid.is_some());
    if lids > 0 {
        warnings.push(format!(
            "switch LIDs are not kept ({lids} switches give one): an SM assigns them"
        ));
    }
}
