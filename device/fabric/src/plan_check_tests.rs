//! A file's problems are reported together, and LIDs are read in hex or
//! decimal.

use std::path::Path;

use super::plan::{parse, plan};
use super::plan_tests::{err, errs, topo};

#[test]
fn every_problem_is_reported_at_once() {
    let all = errs(
        r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 1},
                       {"name": "c", "lid": 49152, "node_guid": "xyz"}],
             "switches": [{"name": "sw", "ports": 2}],
             "links": [{"a": "a", "b": "sw:3"}, {"a": "b", "b": "nowhere"},
                       {"a": "c", "b": "c"}, {"a": "a", "b": "sw:1", "faults": {"drop": 2000}}] }"#,
    );
    let text: Vec<String> = all.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "LID 1 is given to both `a` and `b`",
            "node `c`: LID 49152 is not a unicast LID (1..=0xbfff)",
            "`c`: bad GUID `xyz`",
            "link 0: switch `sw` has ports 1..=2, not 3",
            "link 1: `nowhere` names no node or switch",
            "link 2 connects c port 1 to itself",
            "link 3: fault rates are per mille, 0..=1000",
        ]
    );
    let e = plan(&topo("{}"), Path::new("/tmp/r")).unwrap_err();
    assert_eq!(
        e.to_string(),
        r#"the topology has no nodes: a fabric needs at least one ("nodes": [...])"#
    );
    let two = plan(
        &topo(r#"{"switches": [{"name": "s", "ports": 0}]}"#),
        Path::new("/r"),
    );
    assert!(two
        .unwrap_err()
        .to_string()
        .starts_with("2 problems:\n  the topology has no nodes"));
}

#[test]
fn lids_in_hex_or_decimal() {
    let t = topo(
        r#"{"nodes": [{"name": "a", "lid": "0x10"}, {"name": "b", "lid": "17"}, {"name": "c", "lid": 18}]}"#,
    );
    let lids: Vec<u16> = t.nodes.iter().map(|n| n.lid).collect();
    assert_eq!(lids, [16, 17, 18]);
    let e = parse(r#"{"nodes": [{"name": "a", "lid": "0x1c000"}]}"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("LID 0x1c000 is out of range 1–0xbfff"),
        "{e}"
    );
    let e = parse(r#"{"nodes": [{"name": "a", "lid": "x"}]}"#).unwrap_err();
    assert!(e.to_string().contains("LID 'x' is not a number"), "{e}");
    assert_eq!(
        err(r#"{"nodes": [{"name": "a", "lid": "0xc000"}]}"#).to_string(),
        "node `a`: LID 49152 is not a unicast LID (1..=0xbfff)"
    );
}
