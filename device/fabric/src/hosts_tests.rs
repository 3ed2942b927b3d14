//! A topology spread over hosts: each host keeps its own nodes and
//! switches, links between hosts become TCP links to the listen side's
//! host, and every wrong `hosts`/`host`/`--host` is reported.

use std::path::Path;

use ibtca_link::{LinkEndpoint, TcpAddress};

use super::hosts::{apply, CrossLink};
use super::plan::{plan, End, Plan, TopologyError};
use super::plan_tests::topo;

/// n1 and sw0 on host a, n2 on host b: n1—sw0—n2.
const SPREAD: &str = r#"{
    "hosts": {"a": {"address": "10.1.0.1"}, "b": {"address": "10.1.0.2", "port_base": 9000}},
    "nodes": [{"name": "n1", "lid": 1, "host": "a"}, {"name": "n2", "lid": 2, "host": "b"}],
    "switches": [{"name": "sw0", "ports": 2, "host": "a"}],
    "links": [{"a": "n1", "b": "sw0:1"}, {"a": "sw0:2", "b": "n2"}]
}"#;

fn applied(json: &str, host: Option<&str>) -> Result<(Plan, Vec<CrossLink>), Vec<TopologyError>> {
    let t = topo(json);
    let mut p = plan(&t, Path::new("/tmp/r")).expect("a good plan");
    let cross = apply(&t, &mut p, host).map_err(|e| e.0)?;
    Ok((p, cross))
}

fn tcp(host: &str, port: u16) -> TcpAddress {
    TcpAddress::new(host, port)
}

#[test]
fn each_host_keeps_its_own_and_cross_links_go_over_tcp() {
    // Host a: the switch listens for n2 on a's address, port base + link 1.
    let (a, cross) = applied(SPREAD, Some("a")).unwrap();
    let names: Vec<_> = a.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["n1"]);
    assert_eq!(a.switches.len(), 1);
    let sw = &a.switches[0];
    let ports: Vec<_> = sw
        .ports
        .iter()
        .map(|p| p.as_ref().unwrap().endpoint.clone())
        .collect();
    assert!(matches!(&ports[0], LinkEndpoint::Listen(p) if p.ends_with("links/l0.link")));
    assert_eq!(ports[1], LinkEndpoint::ListenTcp(tcp("10.1.0.1", 18601)));
    assert!(matches!(a.nodes[0].link, Some(LinkEndpoint::Connect(_))));
    // Only the link inside host a stays in the plan's links.
    assert_eq!(a.links, vec![(End::Node(0), End::Switch(0, 1))]);
    assert_eq!(
        cross,
        vec![CrossLink {
            listen: ("sw0:2".into(), "a".into()),
            connect: ("n2".into(), "b".into()),
            address: tcp("10.1.0.1", 18601),
        }]
    );
    // Host b: n2 alone, connecting there.
    let (b, _) = applied(SPREAD, Some("b")).unwrap();
    assert!(b.switches.is_empty());
    assert_eq!(b.nodes.len(), 1);
    assert_eq!(b.nodes[0].name, "n2");
    assert_eq!(
        b.nodes[0].link,
        Some(LinkEndpoint::ConnectTcp(tcp("10.1.0.1", 18601)))
    );
    assert!(b.links.is_empty());
    // No --host: everything, with the same endpoints.
    let (all, _) = applied(SPREAD, None).unwrap();
    assert_eq!(
        (all.nodes.len(), all.switches.len(), all.links.len()),
        (2, 1, 2)
    );
    assert_eq!(all.nodes[1].link, b.nodes[0].link);
}

#[test]
fn two_nodes_on_two_hosts_listen_at_end_a() {
    let json = r#"{
        "hosts": {"x": {"address": "fd00::1", "port_base": 7000}, "y": {"address": "fd00::2"}},
        "nodes": [{"name": "p", "lid": 1, "host": "y"}, {"name": "q", "lid": 2, "host": "x"}],
        "links": [{"a": "p", "b": "q"}]
    }"#;
    let (y, _) = applied(json, Some("y")).unwrap();
    assert_eq!(
        y.nodes[0].link,
        Some(LinkEndpoint::ListenTcp(tcp("fd00::2", 18600)))
    );
    let (x, _) = applied(json, Some("x")).unwrap();
    assert_eq!(
        x.nodes[0].link,
        Some(LinkEndpoint::ConnectTcp(tcp("fd00::2", 18600)))
    );
}

#[test]
fn a_file_without_hosts_is_left_alone() {
    let json = r#"{"nodes": [{"name": "p", "lid": 1}, {"name": "q", "lid": 2}],
        "links": [{"a": "p", "b": "q"}]}"#;
    let t = topo(json);
    let before = plan(&t, Path::new("/tmp/r")).unwrap();
    let (after, cross) = applied(json, None).unwrap();
    assert_eq!((after, cross), (before, Vec::new()));
    let e = applied(json, Some("a")).unwrap_err();
    assert_eq!(
        e,
        [TopologyError::Hosts(
            "--host a: the file names no hosts".into()
        )]
    );
}

#[test]
fn every_wrong_host_is_reported() {
    let msgs = |json: &str, host: Option<&str>| -> Vec<String> {
        applied(json, host)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    let json = r#"{
        "hosts": {"a": {"address": "10.0.0.1"}, "b": {"address": " ", "port_base": 65535}},
        "nodes": [{"name": "n1", "lid": 1, "host": "c"}, {"name": "n2", "lid": 2}],
        "links": [{"a": "n1", "b": "n2"}]
    }"#;
    assert_eq!(
        msgs(json, None),
        [
            "`n1` names host `c`, which `hosts` lacks",
            "`n2` names no host (the file has `hosts`: every node and switch names one)",
            "host `b`: address ` ` is no address",
        ]
    );
    let json = r#"{
        "hosts": {"a": {"address": "10.0.0.1", "port_base": 65535}},
        "nodes": [{"name": "n1", "lid": 1, "host": "a"}, {"name": "n2", "lid": 2, "host": "a"},
                  {"name": "n3", "lid": 3, "host": "a"}, {"name": "n4", "lid": 4, "host": "a"}],
        "links": [{"a": "n1", "b": "n2"}, {"a": "n3", "b": "n4"}]
    }"#;
    assert_eq!(
        msgs(json, None),
        ["host `a`: port_base 65535 leaves no TCP port for each of the 2 links"]
    );
    let json = r#"{"nodes": [{"name": "n1", "lid": 1, "host": "a"}]}"#;
    assert_eq!(
        msgs(json, None),
        ["`n1` names host `a`, but the file has no `hosts`"]
    );
    assert_eq!(
        msgs(SPREAD, Some("c")),
        ["--host c: the file's hosts are a, b"]
    );
}

#[test]
fn a_relay_switch_runs_on_the_host_of_end_a() {
    let json = r#"{
        "hosts": {"a": {"address": "10.1.0.1"}, "b": {"address": "10.1.0.2"}},
        "nodes": [{"name": "n1", "lid": 1, "host": "b"}, {"name": "n2", "lid": 2, "host": "a"}],
        "links": [{"a": "n1", "b": "n2", "faults": {"drop": 10}}]
    }"#;
    let (b, cross) = applied(json, Some("b")).unwrap();
    assert_eq!(b.switches.len(), 1, "the relay");
    assert_eq!(b.switches[0].name, "relay-l0");
    // Relay port 2 listens for n2 (plan link 1) on host b's address.
    let port2 = b.switches[0].ports[1].as_ref().unwrap();
    assert_eq!(
        port2.endpoint,
        LinkEndpoint::ListenTcp(tcp("10.1.0.2", 18601))
    );
    assert_eq!(cross.len(), 1);
    let (a, _) = applied(json, Some("a")).unwrap();
    assert!(a.switches.is_empty());
    assert_eq!(
        a.nodes[0].link,
        Some(LinkEndpoint::ConnectTcp(tcp("10.1.0.2", 18601)))
    );
}
