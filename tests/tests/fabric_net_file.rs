//! Net files (ibsim's, ibnetdiscover's output) as topologies, no VMs:
//! `ibtca-fabric import` of ibsim's shipped examples gives the plan of
//! their switches, CAs, GUIDs (as ibsim numbers them) and links;
//! `up --net --process-per-node` of an ibnetdiscover-style file starts
//! devices and switches whose control sockets report the file's GUIDs, LIDs and descriptions,
//! each switch port linked to the node the file names.

use std::collections::BTreeSet;
use std::path::Path;

use ibtca_fabric::{End, Plan};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::TempDir;
use serde_json::Value;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/net")
        .join(name)
        .display()
        .to_string()
}

/// `ibtca-fabric import FILE`, checked as `up` checks it.
fn imported(file: &str) -> (Plan, String) {
    let out = fabric(&["import", file]);
    assert!(out.status.success(), "import {file}: {}", text(&out));
    let json = String::from_utf8(out.stdout).unwrap();
    let topo = ibtca_fabric::parse(&json).unwrap_or_else(|e| panic!("{e}: {json}"));
    let plan = ibtca_fabric::plan(&topo, Path::new("/tmp/r")).unwrap();
    (plan, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn end(plan: &Plan, e: End) -> String {
    match e {
        End::Node(i) => plan.nodes[i].name.clone(),
        End::Switch(s, p) => format!("{}:{p}", plan.switches[s].name),
    }
}

/// The plan's links, each as a sorted pair of end names.
fn links(plan: &Plan) -> BTreeSet<(String, String)> {
    plan.links
        .iter()
        .map(|&(a, b)| {
            let (a, b) = (end(plan, a), end(plan, b));
            if a < b {
                (a, b)
            } else {
                (b, a)
            }
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

type Expect<'a> = (
    &'a str,
    &'a [(&'a str, u64, u16)],
    &'a [(&'a str, u64, u64)],
    &'a [(&'a str, &'a str)],
);

#[test]
fn ibsims_example_nets_import_with_ibsims_guids_and_their_links() {
    // ibsim numbers switches from 0x200000 one each, CAs from 0x100000
    // taking one GUID plus one per port (its ports: node GUID + port).
    let two_hcas = [
        ("Hca1", 0x10_0000, 0x10_0001),
        ("Hca2", 0x10_0003, 0x10_0004),
    ];
    let cases: &[Expect] = &[
        (
            "net.1",
            &[("Switch1", 0x20_0000, 8)],
            &two_hcas,
            &[("Hca1", "Switch1:1"), ("Hca2", "Switch1:4")],
        ),
        (
            "net",
            &[("Switch1", 0x20_0000, 8), ("Switch2", 0x20_0001, 8)],
            // Hca2's linked port is its port 2: GUID + 2.
            &[
                ("Hca1", 0x10_0000, 0x10_0001),
                ("Hca2", 0x10_0003, 0x10_0005),
            ],
            &[
                ("Hca1", "Switch1:1"),
                ("Hca2", "Switch1:2"),
                ("Switch1:3", "Switch2:3"),
                ("Switch1:4", "Switch2:4"),
            ],
        ),
        (
            "net.2sw2path",
            &[("Switch1", 0x20_0000, 8), ("Switch2", 0x20_0001, 8)],
            &two_hcas,
            &[
                ("Hca1", "Switch1:1"),
                ("Hca2", "Switch2:1"),
                ("Switch1:3", "Switch2:3"),
                ("Switch1:5", "Switch2:5"),
            ],
        ),
        (
            "net.2sw2path4hca",
            &[("Switch1", 0x20_0000, 8), ("Switch2", 0x20_0001, 8)],
            &[
                ("Hca1", 0x10_0000, 0x10_0001),
                ("Hca2", 0x10_0003, 0x10_0004),
                ("Hca3", 0x10_0006, 0x10_0007),
                ("Hca4", 0x10_0009, 0x10_000a),
            ],
            &[
                ("Hca1", "Switch1:1"),
                ("Hca3", "Switch1:2"),
                ("Hca2", "Switch2:1"),
                ("Hca4", "Switch2:2"),
                ("Switch1:3", "Switch2:3"),
                ("Switch1:5", "Switch2:5"),
            ],
        ),
        (
            // Both ports of each HCA linked: one device per port.
            "net.2sw2path4hca2port",
            &[("Switch1", 0x20_0000, 8), ("Switch2", 0x20_0001, 8)],
            &[
                ("Hca1-p1", 0x10_0000, 0x10_0001),
                ("Hca1-p2", 0x10_0002, 0x10_0002),
                ("Hca2-p1", 0x10_0003, 0x10_0004),
                ("Hca2-p2", 0x10_0005, 0x10_0005),
            ],
            &[
                ("Hca1-p1", "Switch1:1"),
                ("Hca1-p2", "Switch1:2"),
                ("Hca2-p1", "Switch2:1"),
                ("Hca2-p2", "Switch2:2"),
                ("Switch1:3", "Switch2:3"),
                ("Switch1:5", "Switch2:5"),
            ],
        ),
    ];
    for &(file, switches, nodes, want_links) in cases {
        let (plan, warnings) = imported(&fixture(&format!("ibsim/{file}")));
        let got: Vec<(&str, u64, u16)> = plan
            .switches
            .iter()
            .map(|s| (s.name.as_str(), s.guid, s.ports.len() as u16))
            .collect();
        assert_eq!(got, switches, "{file}: switches");
        for s in &plan.switches {
            assert_eq!(
                s.description, s.name,
                "{file}: ibsim's description is the id"
            );
        }
        let got: Vec<(&str, u64, u64)> = plan
            .nodes
            .iter()
            .map(|n| (n.name.as_str(), n.node_guid, n.port_guid))
            .collect();
        assert_eq!(got, nodes, "{file}: CAs");
        assert_eq!(links(&plan), pairs(want_links), "{file}: links");
        if file.ends_with("2port") {
            assert!(warnings.contains("becomes Hca1-p1, Hca1-p2"), "{warnings}");
        }
    }
}

/// Everything that identifies a plan's fabric: each device's (GUIDs,
/// LID, description), each switch's (GUID, ports, description) and each
/// link as the GUIDs and ports of its ends.
type Identity = (
    BTreeSet<(u64, u64, u16, String)>,
    BTreeSet<(u64, usize, String)>,
    BTreeSet<((u64, u8), (u64, u8))>,
);

fn identity(plan: &Plan) -> Identity {
    let nodes = plan
        .nodes
        .iter()
        .map(|n| (n.node_guid, n.port_guid, n.lid, n.description.clone()))
        .collect();
    let switches = plan
        .switches
        .iter()
        .map(|s| (s.guid, s.ports.len(), s.description.clone()))
        .collect();
    let at = |e: End| match e {
        End::Node(i) => (plan.nodes[i].node_guid, 1),
        End::Switch(s, p) => (plan.switches[s].guid, p),
    };
    let links = plan
        .links
        .iter()
        .map(|&(a, b)| (at(a).min(at(b)), at(a).max(at(b))))
        .collect();
    (nodes, switches, links)
}

#[test]
fn ibnetdiscover_of_a_fabric_imports_as_that_fabric() {
    let json = std::fs::read_to_string(ibtca_tests::launcher::config(
        "sm-four-nodes-two-switches.json",
    ))
    .unwrap();
    let original =
        ibtca_fabric::plan(&ibtca_fabric::parse(&json).unwrap(), Path::new("/tmp/r")).unwrap();
    let want = identity(&original);
    assert_eq!((want.0.len(), want.1.len(), want.2.len()), (4, 2, 5));
    for file in [
        "sm-four-nodes-two-switches.txt",
        "sm-four-nodes-two-switches-g.txt",
    ] {
        let (plan, warnings) = imported(&fixture(&format!("ibnetdiscover/{file}")));
        assert_eq!(identity(&plan), want, "{file}");
        assert!(
            warnings.contains("switch LIDs are not kept (2 switches"),
            "{warnings}"
        );
    }
}

/// An ibnetdiscover-style net: two switches, three CAs.
const NET: &str = r#"# three hosts on two switches
switchguid=0x0002c90200aa0000
Switch	8 "S-0002c90200aa0000"		# "spine 1 leaf A" base port 0 lid 10 lmc 0
[1]	"H-0002c90300000100"[1](2c90300000101) 		# "alpha mlx5_0" lid 21 4xEDR
[2]	"H-0002c90300000200"[1](2c90300000201) 		# "beta mlx5_0" lid 22 4xEDR
[7]	"S-0002c90200bb0000"[8]		# "leaf B" lid 11 4xEDR

switchguid=0x0002c90200bb0000
Switch	8 "S-0002c90200bb0000"		# "leaf B" base port 0 lid 11 lmc 0
[3]	"H-0002c90300000300"[1](2c90300000301) 		# "gamma mlx5_0" lid 23 4xEDR
[8]	"S-0002c90200aa0000"[7]		# "spine 1 leaf A" lid 10 4xEDR

caguid=0x0002c90300000100
Ca	1 "H-0002c90300000100"		# "alpha mlx5_0"
[1](2c90300000101) 	"S-0002c90200aa0000"[1]		# lid 21 lmc 0 "spine 1 leaf A" lid 10 4xEDR

caguid=0x0002c90300000200
Ca	1 "H-0002c90300000200"		# "beta mlx5_0"
[1](2c90300000201) 	"S-0002c90200aa0000"[2]		# lid 22 lmc 0 "spine 1 leaf A" lid 10 4xEDR

caguid=0x0002c90300000300
Ca	1 "H-0002c90300000300"		# "gamma mlx5_0"
[1](2c90300000301) 	"S-0002c90200bb0000"[3]		# lid 23 lmc 0 "leaf B" lid 11 4xEDR
"#;

fn control(run: &Path, name: &str, cmd: &str) -> Value {
    let reply = ibtca_switch::control::request(&run.join(format!("{name}.control")), cmd)
        .unwrap_or_else(|e| panic!("{name} {cmd}: {e}"));
    let json = reply
        .strip_prefix("ok ")
        .unwrap_or_else(|| panic!("{name} {cmd}: {reply}"));
    serde_json::from_str(json).unwrap()
}

#[test]
fn up_net_runs_the_files_guids_lids_descriptions_and_links() {
    let dir = TempDir::new("fabric-net-up");
    let file = dir.join("cluster.net");
    std::fs::write(&file, NET).unwrap();
    let run = dir.join("run");
    let _down = Down(run.clone());
    // A process per node: each answers on its own control socket.
    let out = fabric(&[
        "up",
        "--net",
        &file.display().to_string(),
        "--run-dir",
        &run.display().to_string(),
        "--process-per-node",
    ]);
    assert!(out.status.success(), "up --net: {}", text(&out));
    let warnings = String::from_utf8_lossy(&out.stderr);
    assert!(
        warnings.contains("widths and speeds are not kept"),
        "{warnings}"
    );

    let hosts = [
        ("H-0002c90300000100", 0x2c90300000100u64, 21, "alpha mlx5_0"),
        ("H-0002c90300000200", 0x2c90300000200, 22, "beta mlx5_0"),
        ("H-0002c90300000300", 0x2c90300000300, 23, "gamma mlx5_0"),
    ];
    for (name, guid, lid, description) in hosts {
        let port = control(&run, name, "port");
        assert_eq!(port["node_guid"], format!("{guid:#018x}"), "{name}: {port}");
        assert_eq!(port["port_guid"], format!("{:#018x}", guid + 1), "{name}");
        assert_eq!(port["lid"], lid, "{name}");
        assert_eq!(port["node_description"], description, "{name}");
        assert_eq!(port["state"], "Active", "{name}");
    }
    let (a, b) = (0x2c90200aa0000u64, 0x2c90200bb0000u64);
    // Each switch port's peer, as its Hello named it: the file's links.
    let switches = [
        (
            "S-0002c90200aa0000",
            a,
            "spine 1 leaf A",
            vec![(1, 0x2c90300000100), (2, 0x2c90300000200), (7, b)],
        ),
        (
            "S-0002c90200bb0000",
            b,
            "leaf B",
            vec![(3, 0x2c90300000300), (8, a)],
        ),
    ];
    for (name, guid, description, peers) in switches {
        let s = control(&run, name, "inspect");
        assert_eq!(s["guid"], format!("{guid:#018x}"), "{name}: {s}");
        assert_eq!(s["name"], description, "{name}: NodeDescription");
        let ports = s["ports"].as_array().unwrap();
        assert_eq!(ports.len(), 8, "{name}: the file's port count");
        for p in ports {
            let n = p["port"].as_u64().unwrap();
            match peers.iter().find(|(port, _)| *port == n) {
                Some((_, peer)) => {
                    assert_eq!(p["peer_guid"], format!("{peer:#018x}"), "{name}:{n}");
                    assert_eq!(p["up"], true, "{name}:{n}");
                }
                None => assert_eq!(p["peer_guid"], Value::Null, "{name}:{n} is not linked"),
            }
        }
    }
}
