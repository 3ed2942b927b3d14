//! Every way a topology file can be wrong is reported before anything
//! starts; routes over two and three switches.

use std::path::Path;

use super::plan::{parse, plan, TopologyError};
use super::topology::Topology;

pub(super) fn topo(json: &str) -> Topology {
    parse(json).expect("valid JSON")
}

/// The one problem of `json` (a file with more fails the test).
pub(super) fn err(json: &str) -> TopologyError {
    let mut all = errs(json);
    assert_eq!(all.len(), 1, "one problem: {all:?}");
    all.remove(0)
}

/// Every problem of `json`.
pub(super) fn errs(json: &str) -> Vec<TopologyError> {
    plan(&topo(json), Path::new("/tmp/r"))
        .expect_err("an error")
        .0
}

pub(super) const NODES: &str = r#""nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2}],
    "switches": [{"name": "sw", "ports": 2}]"#;

fn with_links(links: &str) -> String {
    format!(r#"{{ {NODES}, "links": [{links}] }}"#)
}

#[test]
fn unknown_node() {
    let e = err(&with_links(
        r#"{"a": "a", "b": "sw:1"}, {"a": "c", "b": "sw:2"}"#,
    ));
    assert_eq!(
        e,
        TopologyError::UnknownNode {
            link: 1,
            end: "c".into()
        }
    );
    assert!(e.to_string().contains("`c` names no node"), "{e}");
}

#[test]
fn duplicate_lid() {
    let e = err(r#"{"nodes": [{"name": "a", "lid": 7}, {"name": "b", "lid": 7}]}"#);
    assert_eq!(
        e,
        TopologyError::DuplicateLid {
            lid: 7,
            first: "a".into(),
            second: "b".into()
        }
    );
}

#[test]
fn duplicate_guid() {
    let e = err(r#"{"nodes": [{"name": "a", "lid": 1, "node_guid": "0x10"},
                               {"name": "b", "lid": 2, "guid": "16"}]}"#);
    assert!(
        matches!(e, TopologyError::DuplicateGuid { guid: 0x10, .. }),
        "{e}"
    );
    // A port GUID is unique too, across nodes' node and port GUIDs.
    let e = err(r#"{"nodes": [{"name": "a", "lid": 1, "node_guid": "0x10"},
                               {"name": "b", "lid": 2, "node_guid": "0x20", "port_guid": "0x10"}]}"#);
    assert!(
        matches!(&e, TopologyError::DuplicateGuid { guid: 0x10, first, second }
                 if first == "a" && second == "b"),
        "{e}"
    );
    // A switch's default GUID is no node's.
    let e = err(
        r#"{"nodes": [{"name": "a", "lid": 1, "node_guid": "0x1200000000ff0001"}],
                    "switches": [{"name": "sw", "ports": 2}]}"#,
    );
    assert!(matches!(e, TopologyError::DuplicateGuid { .. }), "{e}");
}

#[test]
fn guids_default_to_locally_administered_ones_not_derived_from_lids() {
    let p = plan(
        &topo(
            r#"{"nodes": [{"name": "a", "lid": 7}, {"name": "b", "lid": 9, "node_guid": "0x1200aa0000000001",
                           "port_guid": "1200:aa00:0000:0002"}],
               "switches": [{"name": "sw", "ports": 2}],
               "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}]}"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    let (a, b) = (&p.nodes[0], &p.nodes[1]);
    assert_eq!(
        (a.node_guid, a.port_guid),
        (0x1200_0000_0001_0001, 0x1200_0000_0001_0001)
    );
    assert_eq!(
        (b.node_guid, b.port_guid),
        (0x1200_aa00_0000_0001, 0x1200_aa00_0000_0002)
    );
    assert_eq!(p.switches[0].guid, 0x1200_0000_00ff_0001);
    for g in [a.node_guid, p.switches[0].guid] {
        assert!(ibtca_agents::guid::is_local(g), "{g:#x}");
    }
    let args = super::launch::device_args(b);
    let at = args.iter().position(|a| a == "--node-guid").unwrap();
    assert_eq!(args[at + 1], "0x1200aa0000000001");
    assert_eq!(args[at + 3], "0x1200aa0000000002");
    assert_eq!(args[at + 4..at + 6], ["--node-description", "b ibtca0"]);
}

/// Every GUID of `p`: nodes' and ports', switches' and relays'.
fn all_guids(p: &super::plan::Plan) -> Vec<u64> {
    let nodes = p.nodes.iter().flat_map(|n| [n.node_guid, n.port_guid]);
    nodes.chain(p.switches.iter().map(|s| s.guid)).collect()
}

#[test]
fn every_default_guid_is_a_service_id_the_ib_cm_listens_on() {
    // ib_srpt listens on its node GUID: with the defaults any node can be
    // an SRP target. Nodes, switches and a link's relay switch, in a file
    // naming no GUID, and every shipped example (they name none either).
    let nodes: Vec<String> = (1..=300)
        .map(|l| format!(r#"{{"name": "n{l}", "lid": {l}}}"#))
        .collect();
    let switches: Vec<String> = (0..40)
        .map(|s| format!(r#"{{"name": "s{s}", "ports": 2}}"#))
        .collect();
    let json = format!(
        r#"{{"nodes": [{}], "switches": [{}],
            "links": [{{"a": "n1", "b": "n2", "delay_us": 5}}]}}"#,
        nodes.join(","),
        switches.join(",")
    );
    let p = plan(&topo(&json), Path::new("/tmp/r")).unwrap();
    let mut guids = all_guids(&p);
    assert_eq!(
        guids.len(),
        2 * 300 + 40 + 1,
        "nodes, ports, switches, relay"
    );
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qemu-configs");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let f = entry.unwrap().path();
        if f.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&f).unwrap();
            guids.extend(all_guids(
                &plan(&parse(&text).unwrap(), Path::new("/tmp/r")).unwrap(),
            ));
        }
    }
    for g in guids {
        assert!(
            ibtca_agents::guid::cm_listens_on(g),
            "the IB CM refuses {g:#018x}"
        );
        assert!(ibtca_agents::guid::is_local(g), "{g:#018x}");
    }
}

#[test]
fn duplicate_name_and_bad_values() {
    assert_eq!(
        err(r#"{"nodes": [{"name": "a", "lid": 1}], "switches": [{"name": "a", "ports": 2}]}"#),
        TopologyError::DuplicateName("a".into())
    );
    assert!(matches!(
        err(r#"{"nodes": [{"name": "a", "lid": 0}]}"#),
        TopologyError::BadLid { lid: 0, .. }
    ));
    assert!(matches!(
        err(r#"{"nodes": [{"name": "a", "lid": 49152}]}"#),
        TopologyError::BadLid { .. }
    ));
    assert!(matches!(
        err(r#"{"nodes": [{"name": "a", "lid": 1, "guid": "xyz"}]}"#),
        TopologyError::BadGuid { .. }
    ));
    assert!(matches!(
        err(r#"{"nodes": [{"name": "a", "lid": 1, "port_guid": "0"}]}"#),
        TopologyError::BadGuid { .. }
    ));
    assert!(matches!(
        err(r#"{"nodes": [{"name": "a", "lid": 1}], "switches": [{"name": "s", "ports": 0}]}"#),
        TopologyError::SwitchPorts { ports: 0, .. }
    ));
    assert!(matches!(
        parse(r#"{"nodes": [{"name": "a", "lid": 1, "colour": 1}]}"#),
        Err(TopologyError::Syntax(_))
    ));
    assert!(matches!(parse("{"), Err(TopologyError::Syntax(_))));
}

#[test]
fn a_port_used_twice() {
    let e = err(&with_links(
        r#"{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:1"}"#,
    ));
    assert_eq!(
        e,
        TopologyError::PortUsedTwice {
            port: "sw:1".into(),
            first: 0,
            second: 1
        }
    );
    // A node has one port too.
    let e = err(&with_links(
        r#"{"a": "a", "b": "sw:1"}, {"a": "a", "b": "sw:2"}"#,
    ));
    assert!(matches!(e, TopologyError::PortUsedTwice { .. }), "{e}");
    // Both ends of one link: said as it is.
    let e = err(&with_links(
        r#"{"a": "a", "b": "sw:1"}, {"a": "sw:2", "b": "sw:2"}"#,
    ));
    assert_eq!(e.to_string(), "link 1 connects sw port 2 to itself");
    let e = err(&with_links(r#"{"a": "a", "b": "a"}"#));
    assert_eq!(e.to_string(), "link 0 connects a port 1 to itself");
}

#[test]
fn a_link_to_nowhere() {
    for end in ["", "sw", "sw:", "sw:x", ":1", "a:1"] {
        let e = err(&with_links(&format!(r#"{{"a": "a", "b": "{end}"}}"#)));
        assert!(
            matches!(e, TopologyError::LinkToNowhere { link: 0, .. }),
            "`{end}`: {e}"
        );
    }
}

#[test]
fn a_switch_port_out_of_range() {
    let e = err(&with_links(r#"{"a": "a", "b": "sw:3"}"#));
    assert_eq!(
        e,
        TopologyError::PortOutOfRange {
            link: 0,
            switch: "sw".into(),
            port: 3,
            ports: 2
        }
    );
    let e = err(&with_links(r#"{"a": "a", "b": "sw:0"}"#));
    assert!(matches!(e, TopologyError::PortOutOfRange { port: 0, .. }));
}

#[test]
fn options_on_a_device_to_device_link_get_a_relay_switch() {
    let t = topo(&with_links(
        r#"{"a": "a", "b": "b", "capture": "ab.pcap", "delay_us": 100, "faults": {"drop": 5}}"#,
    ));
    let p = plan(&t, Path::new("/tmp/r")).unwrap();
    let relay = p.switches.iter().find(|s| s.name == "relay-l0").unwrap();
    assert_eq!(relay.routes, vec![(1, 1), (2, 2)]);
    let p1 = relay.ports[0].as_ref().unwrap();
    let p2 = relay.ports[1].as_ref().unwrap();
    assert_eq!(p1.capture.as_deref(), Some(Path::new("/tmp/r/ab.pcap")));
    assert_eq!(p2.capture, None);
    assert_eq!((p1.delay_us, p2.delay_us), (100, 100));
    assert_eq!(p1.faults.map(|f| f.drop), Some(5));
    assert!(p.nodes[0]
        .link
        .as_ref()
        .unwrap()
        .to_string()
        .starts_with("connect:"));
    assert!(p.nodes[1]
        .link
        .as_ref()
        .unwrap()
        .to_string()
        .starts_with("connect:"));
    assert_eq!(p.links.len(), 2);
    // Without options two devices are joined directly.
    let t = topo(&with_links(r#"{"a": "a", "b": "b"}"#));
    let p = plan(&t, Path::new("/tmp/r")).unwrap();
    assert_eq!(p.switches.len(), 1, "only the file's switch");
}

#[test]
fn bad_rates() {
    let e = err(&with_links(
        r#"{"a": "a", "b": "sw:1", "faults": {"drop": 1001}}"#,
    ));
    assert_eq!(e, TopologyError::BadRate { link: 0 });
}

#[test]
fn socket_paths_must_fit() {
    let t = topo(r#"{"nodes": [{"name": "a", "lid": 1}]}"#);
    let long = "/tmp/".to_owned() + &"x".repeat(120);
    let e = plan(&t, Path::new(&long)).unwrap_err();
    assert!(
        matches!(e.0.as_slice(), [TopologyError::PathTooLong(_)]),
        "{e}"
    );
}

#[test]
fn routes_over_three_switches_in_a_line() {
    let t = topo(
        r#"{
        "nodes": [{"name": "a", "lid": 10}, {"name": "b", "lid": 20}, {"name": "c", "lid": 30}],
        "switches": [{"name": "s1", "ports": 2}, {"name": "s2", "ports": 3}, {"name": "s3", "ports": 2}],
        "links": [
            {"a": "a", "b": "s1:1"}, {"a": "s1:2", "b": "s2:1"},
            {"a": "b", "b": "s2:3"}, {"a": "s2:2", "b": "s3:2"}, {"a": "c", "b": "s3:1"}
        ]}"#,
    );
    let p = plan(&t, Path::new("/tmp/r")).unwrap();
    assert_eq!(p.switches[0].routes, vec![(10, 1), (20, 2), (30, 2)]);
    assert_eq!(p.switches[1].routes, vec![(10, 1), (20, 3), (30, 2)]);
    assert_eq!(p.switches[2].routes, vec![(10, 2), (20, 2), (30, 1)]);
    // Switches listen; devices connect to them.
    let a = p.nodes[0].link.as_ref().unwrap().to_string();
    assert!(a.starts_with("connect:/tmp/r/links/"), "{a}");
}

#[test]
fn the_shipped_examples_are_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../qemu-configs");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let f = entry.unwrap().path();
        if f.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let p = plan(&parse(&text).unwrap(), Path::new("/tmp/r"));
        assert!(p.is_ok(), "{}: {p:?}", f.display());
        seen += 1;
    }
    assert!(seen >= 5, "only {seen} topology files in {}", dir.display());
}

#[test]
fn vl_settings_are_checked_and_reach_the_launcher() {
    let two = r#"{"data_vls": 2, "sl2vl": [0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15], "weights": [4, 1]}"#;
    let json = format!(
        r#"{{ "nodes": [{{"name": "a", "lid": 1, "vl": {two}}}, {{"name": "b", "lid": 2}}],
             "switches": [{{"name": "sw", "ports": 2, "vl": {{"data_vls": 2}},
                            "ports_vl": {{"2": {two}}}}}],
             "links": [{{"a": "a", "b": "sw:1"}}, {{"a": "b", "b": "sw:2"}}] }}"#
    );
    let p = plan(&topo(&json), Path::new("/tmp/r")).unwrap();
    assert_eq!(p.nodes[0].vl.weights, vec![4, 1]);
    assert_eq!(p.nodes[1].vl, ibtca_agents::vl_config::VlConfig::default());
    let sw = &p.switches[0];
    let port1 = sw.ports[0].as_ref().unwrap();
    assert_eq!(
        port1.vl.weights,
        vec![1, 1],
        "data_vls alone: weight 1 each"
    );
    assert_eq!(port1.vl.sl2vl[..4], [0, 1, 0, 1], "SL n on VL n mod 2");
    assert_eq!(port1.vl.sl2vl[15], 15);
    assert_eq!(sw.ports[1].as_ref().unwrap().vl.weights, vec![4, 1]);
    let args = super::launch::switch_args(sw, Path::new("/tmp/r"));
    assert!(args.contains(&"--vl-weights=2=4,1".to_owned()), "{args:?}");
    assert!(
        args.contains(&"--sl2vl=1=0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15".to_owned()),
        "{args:?}"
    );

    let bad = |vl: &str| {
        err(&format!(
            r#"{{ "nodes": [{{"name": "a", "lid": 1, "vl": {vl}}}] }}"#
        ))
        .to_string()
    };
    let e = bad(r#"{"data_vls": 2, "sl2vl": [0,2,0,0,0,0,0,0,0,0,0,0,0,0,0,15]}"#);
    assert!(e.starts_with("a: SL1 → VL2") && e.contains("0..=1"), "{e}");
    let e = bad(r#"{"sl2vl": [0,1]}"#);
    assert!(e.contains("sl2vl has 2 entries"), "{e}");
    let e = bad(r#"{"data_vls": 3, "weights": [1, 1]}"#);
    assert!(e.contains("data_vls is 3 but 2 weights"), "{e}");
    let e = bad(r#"{"data_vls": 16}"#);
    assert!(e.contains("16 data VLs"), "{e}");
    let e = bad(r#"{"weights": [1, 0]}"#);
    assert!(e.contains("weight is 0"), "{e}");
    let e = bad(r#"{"sl2vl": [0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}"#);
    assert!(e.contains("SL15"), "{e}");
    let e = err(
        r#"{ "nodes": [{"name": "a", "lid": 1}], "switches": [{"name": "sw", "ports": 2, "ports_vl": {"3": {}}}] }"#,
    );
    assert!(e.to_string().contains("ports_vl names port 3"), "{e}");
}

#[test]
fn device_cpus_and_realtime_reach_the_device_and_bad_ones_are_refused() {
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1, "cpus": "0-1", "realtime": 10},
                          {"name": "b", "lid": 2, "guest": {"cpus": "1"}}],
                 "links": [{"a": "a", "b": "b"}] }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    let a = super::launch::device_args(&p.nodes[0]);
    assert!(a.contains(&"--cpus=0,1".to_owned()), "{a:?}");
    assert!(a.contains(&"--realtime=10".to_owned()), "{a:?}");
    let b = super::launch::device_args(&p.nodes[1]);
    assert!(
        !b.iter()
            .any(|x| x.starts_with("--cpus") || x.starts_with("--realtime")),
        "{b:?}"
    );
    let guest = super::topology::GuestSpec::default();
    let script = super::qemu::guest_script(&p.nodes[1], &guest);
    assert!(
        script.contains("exec taskset -c 1 qemu-system-x86_64"),
        "{script}"
    );
    let script = super::qemu::guest_script(&p.nodes[0], &guest);
    assert!(script.contains("exec qemu-system-x86_64"), "{script}");
    let e = err(r#"{ "nodes": [{"name": "a", "lid": 1, "cpus": "2-1"}] }"#).to_string();
    assert!(e.starts_with("`a`:") && e.contains("runs backwards"), "{e}");
    let e = err(r#"{ "nodes": [{"name": "a", "lid": 1, "guest": {"cpus": "x"}}] }"#).to_string();
    assert!(e.starts_with("`a guest`:"), "{e}");
    let e = err(r#"{ "nodes": [{"name": "a", "lid": 1, "realtime": 0}] }"#).to_string();
    assert!(e.contains("realtime priority 0 is outside 1-99"), "{e}");
}

#[test]
fn a_guest_niceness_reaches_its_qemu_and_bad_ones_are_refused() {
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1, "guest": {"nice": 19, "cpus": "0"}},
                          {"name": "b", "lid": 2}],
                 "links": [{"a": "a", "b": "b"}] }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    assert_eq!(
        (p.nodes[0].guest_nice, p.nodes[1].guest_nice),
        (Some(19), None)
    );
    // The script runs "QEMU" (a stand-in that prints its niceness) at 19.
    let dir = std::env::temp_dir().join(format!("ibtca-nice-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let stub = dir.join("qemu-system-x86_64");
    std::fs::write(&stub, "#!/bin/sh\nnice\n").unwrap();
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let guest = super::topology::GuestSpec::default();
    let niceness_of = |node| {
        let script = dir.join("node.qemu.sh");
        std::fs::write(&script, super::qemu::guest_script(node, &guest)).unwrap();
        let path = format!(
            "{}:{}",
            dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // taskset needs the CPU it pins to: only node a pins, to CPU 0.
        let out = std::process::Command::new("sh")
            .arg(&script)
            .env("PATH", path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(niceness_of(&p.nodes[0]), "19");
    let own =
        String::from_utf8(std::process::Command::new("nice").output().unwrap().stdout).unwrap();
    assert_eq!(niceness_of(&p.nodes[1]), own.trim());
    let _ = std::fs::remove_dir_all(&dir);
    let e = err(r#"{ "nodes": [{"name": "a", "lid": 1, "guest": {"nice": 20}}] }"#).to_string();
    assert!(e.contains("guest nice 20 is outside -20..19"), "{e}");
    // The file's `guest.nice` is every node's unless the node sets one.
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1, "guest": {"nice": 5}}, {"name": "b", "lid": 2}],
                 "guest": {"nice": 19} }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    assert_eq!(
        (p.nodes[0].guest_nice, p.nodes[1].guest_nice),
        (Some(5), Some(19))
    );
    let e = err(r#"{ "nodes": [{"name": "a", "lid": 1}], "guest": {"nice": -21} }"#).to_string();
    assert!(e.contains("guest nice -21 is outside -20..19"), "{e}");
}

#[test]
fn sched_batch_reaches_the_device_and_excludes_realtime() {
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1, "sched_batch": true},
                          {"name": "b", "lid": 2}],
                 "links": [{"a": "a", "b": "b"}] }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    let a = super::launch::device_args(&p.nodes[0]);
    assert!(a.contains(&"--sched-batch".to_owned()), "{a:?}");
    let b = super::launch::device_args(&p.nodes[1]);
    assert!(!b.contains(&"--sched-batch".to_owned()), "{b:?}");
    let e = err(r#"{ "nodes": [{"name": "a", "lid": 1, "realtime": 5, "sched_batch": true}] }"#)
        .to_string();
    assert!(e.contains("exclude each other"), "{e}");
}

#[test]
fn devices_of_niced_guests_do_not_spin() {
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1},
                          {"name": "b", "lid": 2, "guest": {"nice": 0}},
                          {"name": "c", "lid": 3, "guest": {"nice": -5}},
                          {"name": "d", "lid": 4, "realtime": 5}],
                 "guest": {"nice": 19} }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    let spin = |i: usize| {
        super::launch::device_args(&p.nodes[i])
            .into_iter()
            .filter(|x| x.starts_with("--spin-us"))
            .collect::<Vec<_>>()
    };
    // The file-wide nice 19 reaches a; b and c set their own; d is
    // real-time (which spins no more anyway).
    assert_eq!(spin(0), ["--spin-us=0"]);
    assert!(spin(1).is_empty() && spin(2).is_empty() && spin(3).is_empty());
}

#[test]
fn link_rings_set_in_the_file_reach_devices_and_switches() {
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1, "link_ring_kib": 0},
                          {"name": "b", "lid": 2}],
                 "switches": [{"name": "sw", "ports": 2, "link_ring_kib": 256}],
                 "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}] }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    let a = super::launch::device_args(&p.nodes[0]);
    assert!(a.contains(&"--link-ring-kib=0".to_owned()), "{a:?}");
    let b = super::launch::device_args(&p.nodes[1]);
    assert!(!b.iter().any(|x| x.starts_with("--link-ring-kib")), "{b:?}");
    let sw = super::launch::switch_args(&p.switches[0], Path::new("/tmp/r"));
    assert!(sw.contains(&"--link-ring-kib=256".to_owned()), "{sw:?}");
    // A negative size is no size.
    let e = parse(r#"{ "nodes": [{"name": "a", "lid": 1, "link_ring_kib": -1}] }"#)
        .expect_err("refused")
        .to_string();
    assert!(e.contains("invalid value"), "{e}");
}

#[test]
fn devices_get_an_ack_timeout_floor_the_file_and_nodes_can_change() {
    let floor = |json: &str, i: usize| {
        let p = plan(&topo(json), Path::new("/tmp/r")).unwrap();
        super::launch::device_args(&p.nodes[i])
            .into_iter()
            .filter(|x| x.starts_with("--min-ack-timeout-ms"))
            .collect::<Vec<_>>()
    };
    // Default: 250 ms for every device.
    let plain = r#"{ "nodes": [{"name": "a", "lid": 1}] }"#;
    assert_eq!(floor(plain, 0), ["--min-ack-timeout-ms=250"]);
    // File-wide, then a node's own (0 turns it off).
    let set = r#"{ "min_ack_timeout_ms": 500,
                   "nodes": [{"name": "a", "lid": 1},
                             {"name": "b", "lid": 2, "min_ack_timeout_ms": 0}] }"#;
    assert_eq!(floor(set, 0), ["--min-ack-timeout-ms=500"]);
    assert_eq!(floor(set, 1), ["--min-ack-timeout-ms=0"]);
    // Above the device's maximum: refused before anything starts.
    assert_eq!(
        err(r#"{ "nodes": [{"name": "a", "lid": 1, "min_ack_timeout_ms": 60001}] }"#),
        TopologyError::BadMinAckTimeout {
            node: "a".into(),
            ms: 60_001
        }
    );
    assert_eq!(
        err(r#"{ "nodes": [{"name": "a", "lid": 1}], "min_ack_timeout_ms": 70000 }"#).to_string(),
        "node `a`: min_ack_timeout_ms 70000 is above 60000"
    );
}

#[test]
fn seccomp_false_starts_devices_switches_and_gateways_without_the_filter() {
    let json = |seccomp: &str| {
        format!(
            r#"{{ {seccomp} "nodes": [{{"name": "a", "lid": 1}},
                {{"name": "gw", "lid": 10, "gateway": {{"atm": "listen:gw.atm", "map": "vcs.json"}}}}],
              "switches": [{{"name": "sw", "ports": 2}}],
              "links": [{{"a": "a", "b": "sw:1"}}, {{"a": "gw", "b": "sw:2"}}] }}"#
        )
    };
    let all_args = |seccomp: &str| {
        let p = plan(&topo(&json(seccomp)), Path::new("/tmp/r")).unwrap();
        let gw = &p.nodes[1];
        [
            super::launch::device_args(&p.nodes[0]),
            crate::gateway_launch::args(gw, gw.gateway.as_ref().unwrap()),
            super::launch::switch_args(&p.switches[0], Path::new("/tmp/r")),
        ]
    };
    let off = "--no-seccomp".to_owned();
    for args in all_args(r#""seccomp": false,"#) {
        assert!(args.contains(&off), "{args:?}");
    }
    for seccomp in ["", r#""seccomp": true,"#] {
        for args in all_args(seccomp) {
            assert!(!args.contains(&off), "{seccomp}: {args:?}");
        }
    }
}

#[test]
fn a_mapped_drdma_window_reaches_its_device_only_and_a_bad_one_is_refused() {
    let p = plan(
        &topo(
            r#"{ "nodes": [{"name": "a", "lid": 1, "drdma_window": "mapped"},
                          {"name": "b", "lid": 2, "drdma_window": "trapped"}],
                 "links": [{"a": "a", "b": "b"}] }"#,
        ),
        Path::new("/tmp/r"),
    )
    .unwrap();
    let a = super::launch::device_args(&p.nodes[0]);
    assert!(a.contains(&"--drdma-window=mapped".to_owned()), "{a:?}");
    let b = super::launch::device_args(&p.nodes[1]);
    assert!(!b.iter().any(|x| x.starts_with("--drdma-window")), "{b:?}");
    let e = parse(r#"{ "nodes": [{"name": "a", "lid": 1, "drdma_window": "open"}] }"#)
        .expect_err("not a window mode")
        .to_string();
    assert!(e.contains("unknown variant `open`"), "{e}");
}
