//! Gateway nodes in a topology file: their plan, their command line, and
//! the mistakes the check refuses.

use std::path::Path;

use super::plan::{parse, plan};
use super::plan_tests::{err, topo};

#[test]
fn gateway_nodes() {
    let json = r#"{"nodes": [{"name": "a", "lid": 1},
        {"name": "gw", "lid": 10, "gateway": {"atm": "listen:gw.atm", "service_sl": "cbr=4",
          "capture": "gw-atm.pcap",
          "map": {"vcs": [{"vpi": 0, "vci": 32, "aal": 5, "service": "ubr",
                  "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 1}}]}}},
        {"name": "gw2", "lid": 20, "vl": {"data_vls": 2}, "gateway": {"atm": "connect:/x/atm", "map": "vcs.json"}}],
      "switches": [{"name": "sw", "ports": 3}],
      "links": [{"a": "a", "b": "sw:1"}, {"a": "gw", "b": "sw:2"}, {"a": "gw2", "b": "sw:3"}]}"#;
    let p = plan(&topo(json), Path::new("/tmp/r")).unwrap();
    assert!(p.nodes[0].gateway.is_none());
    let g = p.nodes[1].gateway.as_ref().unwrap();
    assert_eq!(g.map, Path::new("/tmp/r/gw.map.json"));
    let inline: serde_json::Value = serde_json::from_str(g.inline_map.as_deref().unwrap()).unwrap();
    assert_eq!(inline["vcs"][0]["vci"], 32);
    assert_eq!(
        crate::gateway_launch::args(&p.nodes[1], g),
        [
            "--lid=10",
            "--node-guid=0x1200000000010002",
            "--atm=listen:/tmp/r/gw.atm",
            "--map=/tmp/r/gw.map.json",
            "--control=/tmp/r/gw.control",
            "--link=connect:/tmp/r/links/l1.link",
            "--service-sl=cbr=4",
            "--capture=/tmp/r/gw-atm.pcap",
            "--description=ibtca gateway gw",
        ]
    );
    let g2 = p.nodes[2].gateway.as_ref().unwrap();
    assert_eq!(
        (g2.map.as_path(), g2.inline_map.as_ref()),
        (Path::new("/tmp/r/vcs.json"), None)
    );
    let a2 = crate::gateway_launch::args(&p.nodes[2], g2);
    assert!(a2.contains(&"--atm=connect:/x/atm".to_string()), "{a2:?}");
    assert!(
        a2.iter().any(|a| a.starts_with("--vl-weights=")),
        "its own VLs: {a2:?}"
    );
    // The gateway has LID 10 in the switch's routes like any node.
    assert!(
        p.switches[0].routes.contains(&(10, 2)),
        "{:?}",
        p.switches[0].routes
    );
}

#[test]
fn bad_gateway_nodes() {
    let one = |gw: &str| {
        err(&format!(
            r#"{{"nodes": [{{"name": "gw", "lid": 10, {gw}}}]}}"#
        ))
        .to_string()
    };
    let map = r#""map": {"vcs": []}"#;
    assert_eq!(
        one(&format!(r#""guest": {{}}, "gateway": {{"atm": "listen:a", {map}}}"#)),
        "node `gw`: gateway: guest, cpus, realtime, sched_batch and socket are for devices, not gateways"
    );
    assert!(one(&format!(r#""gateway": {{"atm": "a", {map}}}"#))
        .starts_with("node `gw`: gateway: atm: link endpoint `a` must be"));
    assert_eq!(
        one(r#""gateway": {"atm": "listen:a", "map": 3}"#),
        "node `gw`: gateway: map: an object ({\"vcs\": [...]}) or a file name"
    );
    let typo =
        r#"{"nodes": [{"name": "gw", "lid": 10, "gateway": {"atm": "listen:a", "mapp": 1}}]}"#;
    assert!(parse(typo)
        .unwrap_err()
        .to_string()
        .contains("unknown field `mapp`"));
}
