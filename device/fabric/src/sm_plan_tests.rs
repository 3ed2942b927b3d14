//! The topology's `"sm"` option: everything managed, OpenSM planned in
//! the SM node's guest, the file's LIDs as its guid2lid, gateways managed
//! too, and which guests `up --guests` boots.

use std::path::Path;

use super::plan::plan;
use super::plan_tests::{err, topo, NODES};

#[test]
fn the_sm_option_manages_everything_and_plans_opensm() {
    let json = r#"{ "sm": "a", "sm_options": ["--sweep", "10", "it's"],
        "nodes": [{"name": "a", "lid": 1, "node_guid": "0x1200000000000101",
                   "port_guid": "0x1200000000000102"}, {"name": "b", "lid": 7}],
        "switches": [{"name": "sw", "ports": 2}],
        "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}] }"#;
    let p = plan(&topo(json), Path::new("/tmp/r")).unwrap();
    let sm = p.sm.as_ref().expect("an SM");
    assert!(p.nodes.iter().all(|n| n.sm_managed));
    assert!(p.switches[0].sm_managed && p.switches[0].routes.is_empty());
    let a = super::launch::device_args(&p.nodes[0]);
    assert!(a.contains(&"--sm-managed".to_owned()), "{a:?}");
    let sw = super::launch::switch_args(&p.switches[0], Path::new("/tmp/r"));
    assert!(sw.contains(&"--sm-managed".to_owned()), "{sw:?}");
    assert!(!sw.iter().any(|x| x.starts_with("--route")), "{sw:?}");
    // LIDs by port GUID, OpenSM's guid2lid records.
    let b_guid = p.nodes[1].port_guid;
    assert_eq!(
        sm.guid2lid_file(),
        format!("0x1200000000000102 0x0001 0x0001\n\n{b_guid:#018x} 0x0007 0x0007\n\n")
    );
    assert_eq!(
        sm.opensm_command(),
        r"opensm --honor_guid2lid --log_file /ibtca/opensm.log --debug 2 '--sweep' '10' 'it'\''s'"
    );
    // The SM node's commands come first; without its own, one more waits.
    let runs = sm.with_runs(&["b=true".to_owned()]);
    assert_eq!(runs.len(), 3);
    assert!(runs[0].starts_with("a=set -e\n") && runs[2] == "b=true");
    assert!(runs[0].contains(&sm.guid2lid_file()));
    assert!(runs[0].contains("ibtca-load-modules umad\n"));
    assert!(runs[0].contains(&format!("{} </dev/null", sm.opensm_command())));
    assert!(runs[0].contains("echo 'IBTCA-SM SUBNET UP') &"));
    assert!(runs[1].starts_with("a=while kill -0"));
    assert_eq!(sm.with_runs(&["a=ibstat".to_owned()]).len(), 2);
    // Without "sm" nothing is managed and the routes are computed.
    let plain = plan(
        &topo(&json.replace(r#""sm": "a", "sm_options": ["--sweep", "10", "it's"],"#, "")),
        Path::new("/tmp/r"),
    )
    .unwrap();
    assert!(plain.sm.is_none() && !plain.nodes[0].sm_managed);
    assert_eq!(plain.switches[0].routes, [(1, 1), (7, 2)]);
}

#[test]
fn a_bad_sm_option_is_refused() {
    let e = err(&format!(r#"{{ "sm": "zz", {NODES} }}"#));
    assert!(
        e.to_string().contains("`sm` names `zz`, which is no node"),
        "{e}"
    );
    let e = err(&format!(r#"{{ "sm_options": ["-s", "0"], {NODES} }}"#));
    assert!(e.to_string().contains("without `sm`"), "{e}");
    let gw = r#"{"sm": "gw", "nodes": [{"name": "gw", "lid": 10, "gateway": {"atm": "listen:gw.atm",
          "map": {"vcs": []}}}]}"#;
    let e = err(gw);
    assert!(e.to_string().contains("a gateway"), "{e}");
}

#[test]
fn gateways_under_an_sm_are_managed_and_in_guid2lid() {
    let json = r#"{"sm": "a", "nodes": [{"name": "a", "lid": 1},
        {"name": "gw", "lid": 10, "node_guid": "0x1200000000fd000a", "port_guid": "0x1200000000fd00aa",
         "gateway": {"atm": "listen:gw.atm", "map": {"vcs": []}}}],
      "switches": [{"name": "sw", "ports": 2}],
      "links": [{"a": "a", "b": "sw:1"}, {"a": "gw", "b": "sw:2"}]}"#;
    let p = plan(&topo(json), Path::new("/tmp/r")).unwrap();
    let gw = &p.nodes[1];
    let args = crate::gateway_launch::args(gw, gw.gateway.as_ref().unwrap());
    assert!(args.contains(&"--sm-managed".to_owned()), "{args:?}");
    // The gateway's one port answers with its node GUID: OpenSM's key.
    let records = p.sm.as_ref().unwrap().guid2lid_records();
    assert_eq!(
        records[1], "0x1200000000fd000a 0x000a 0x000a",
        "{records:?}"
    );
}

#[test]
fn with_an_sm_guests_boot_on_the_sm_node_and_where_commands_run() {
    let json = r#"{"sm": "a", "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2},
        {"name": "bb", "lid": 3}], "switches": [{"name": "sw", "ports": 3}],
      "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}, {"a": "bb", "b": "sw:3"}]}"#;
    let p = plan(&topo(json), Path::new("/tmp/r")).unwrap();
    let sm = p.sm.as_ref().unwrap();
    let boots = |runs: &[&str], all: bool| -> Vec<&str> {
        let runs: Vec<String> = runs.iter().map(|r| r.to_string()).collect();
        ["a", "b", "bb"]
            .into_iter()
            .filter(|n| sm.boots_guest(n, &runs, all))
            .collect()
    };
    assert_eq!(boots(&[], false), ["a"]);
    assert_eq!(
        boots(&["bb=ibstat"], false),
        ["a", "bb"],
        "not `b` for `bb=`"
    );
    assert_eq!(boots(&["a=sminfo"], false), ["a"]);
    assert_eq!(boots(&[], true), ["a", "b", "bb"]);
}

#[test]
fn sm_partitions_are_written_in_the_guest_and_given_to_opensm() {
    let json = r#"{"sm": "a", "sm_options": ["--sweep", "10"],
        "sm_partitions": ["Default=0x7fff, ipoib : ALL=full ;",
                          "P1=0x8001, ipoib : 0x1200000000000102=full ;"],
        "nodes": [{"name": "a", "lid": 1, "port_guid": "0x1200000000000102"}]}"#;
    let p = plan(&topo(json), Path::new("/tmp/r")).unwrap();
    let sm = p.sm.as_ref().unwrap();
    assert_eq!(
        sm.opensm_command(),
        "opensm --honor_guid2lid --log_file /ibtca/opensm.log --debug 2 \
         -P /etc/opensm/partitions.conf '--sweep' '10'"
    );
    let start = &sm.with_runs(&[])[0];
    let file = "mkdir -p /etc/opensm\ncat > /etc/opensm/partitions.conf <<'IBTCA_PARTITIONS'\n\
                Default=0x7fff, ipoib : ALL=full ;\n\
                P1=0x8001, ipoib : 0x1200000000000102=full ;\nIBTCA_PARTITIONS\n";
    let at = start.find(file).unwrap_or_else(|| panic!("{start}"));
    assert!(
        at < start.find("ibtca-load-modules umad").unwrap(),
        "written before OpenSM starts:\n{start}"
    );
    // Without sm_partitions: no file, no -P.
    let none = r#"{"sm": "a", "nodes": [{"name": "a", "lid": 1}]}"#;
    let p = plan(&topo(none), Path::new("/tmp/r")).unwrap();
    let sm = p.sm.as_ref().unwrap();
    assert!(!sm.opensm_command().contains("-P"));
    assert!(!sm.with_runs(&[])[0].contains("partitions.conf"));
}

#[test]
fn a_bad_sm_partitions_is_refused() {
    let with = |extra: &str| format!(r#"{{ {extra}, {NODES} }}"#);
    let cases = [
        (r#""sm_partitions": ["P=0x8001 : ALL ;"]"#, "without `sm`"),
        (r#""sm": "a", "sm_partitions": []"#, "is empty"),
        (r#""sm": "a", "sm_partitions": ["  "]"#, "is empty"),
        (
            r#""sm": "a", "sm_partitions": ["P=0x8001 : ALL ;\nIBTCA_PARTITIONS"]"#,
            "is not one line",
        ),
        (
            r#""sm": "a", "sm_partitions": ["IBTCA_PARTITIONS"]"#,
            "may not be `IBTCA_PARTITIONS`",
        ),
        (
            r#""sm": "a", "sm_options": ["-P", "/x"], "sm_partitions": ["P=0x8001 : ALL ;"]"#,
            "gives `-P`",
        ),
        (
            r#""sm": "a", "sm_options": ["--Pconfig=/x"], "sm_partitions": ["P=0x8001 : ALL ;"]"#,
            "gives `--Pconfig=/x`",
        ),
    ];
    for (extra, want) in cases {
        let e = err(&with(extra)).to_string();
        assert!(e.contains(want), "{extra}: {e}");
    }
}
