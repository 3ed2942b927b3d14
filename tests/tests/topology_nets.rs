//! `scripts/torus-net.sh` and `scripts/dragonfly-net.sh` write net files
//! (docs/topologies.md) that `ibtca-fabric import` reads as exactly the
//! shape asked for: the expected switches (each with its port count), CAs
//! and links, every node reachable from every other; `up --net` runs each
//! in one hive with every linked port up and every hosted port in
//! `stats`; and the host's OpenSM (`opensm -o` through libumad2sim on a
//! hosted host port) sweeps a dragonfly to SUBNET UP, `ibnetdiscover`
//! then listing exactly its switches, CAs and links.
//!
//! `ibtca-fabric export --net` writes the running fabric as a net file
//! that imports as the same topology (GUIDs, descriptions, LIDs, links)
//! and that `up --net` runs as a fabric exporting the same file again;
//! the LIDs it writes are the SM's; a link taken down at run time is left
//! out, and said so.
//!
//! The OpenSM part needs `opensm`, `infiniband-diags` and `libumad2sim0`
//! on the host (scripts/host-tools.sh installs them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ibtca_tests::host_sm::{fabric_of, ibnetdiscover, need, opensm_once, UMAD2SIM};
use ibtca_tests::launcher::{fabric, text, up_net, Down};
use ibtca_tests::TempDir;
use serde_json::Value;

/// The net file `script ARGS` writes, saved in `dir` as `name`.
fn generate(dir: &Path, script: &str, args: &[&str], name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../scripts/{script}"));
    let out = Command::new("bash").arg(path).args(args).output().unwrap();
    assert!(out.status.success(), "{script} {args:?}: {}", text(&out));
    let file = dir.join(name);
    std::fs::write(&file, out.stdout).unwrap();
    file
}

/// What a generated net should be.
struct Shape {
    switches: usize,
    ports: u64,
    cas: usize,
    links: usize,
}

/// `import`s `file` and checks it against `want`, and that its links join
/// every node to every other; returns the topology.
fn check_import(file: &Path, want: &Shape) -> Value {
    let out = fabric(&["import", &file.display().to_string()]);
    assert!(out.status.success(), "import: {}", text(&out));
    let topo: Value = serde_json::from_slice(&out.stdout).unwrap();
    let switches = topo["switches"].as_array().unwrap();
    let nodes = topo["nodes"].as_array().unwrap();
    let links = topo["links"].as_array().unwrap();
    assert_eq!(
        (switches.len(), nodes.len(), links.len()),
        (want.switches, want.cas, want.links),
        "{}",
        file.display()
    );
    assert!(switches.iter().all(|s| s["ports"] == want.ports), "{topo}");

    // Connected: a walk over the links from one node reaches them all.
    let node = |end: &Value| end.as_str().unwrap().split(':').next().unwrap().to_owned();
    let mut next: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in links {
        let (a, b) = (node(&l["a"]), node(&l["b"]));
        next.entry(a.clone()).or_default().push(b.clone());
        next.entry(b).or_default().push(a);
    }
    let all: BTreeSet<String> = switches
        .iter()
        .chain(nodes)
        .map(|n| n["name"].as_str().unwrap().to_owned())
        .collect();
    let first = all.iter().next().unwrap().clone();
    let mut seen = BTreeSet::from([first.clone()]);
    let mut todo = vec![first];
    while let Some(n) = todo.pop() {
        for m in next.get(&n).into_iter().flatten() {
            if seen.insert(m.clone()) {
                todo.push(m.clone());
            }
        }
    }
    assert_eq!(seen, all, "every node reachable in {}", file.display());
    topo
}

/// `up --net file` (extra arguments `extra`): one hive, every linked port
/// up, every port in `stats --json`.
fn check_up(file: &Path, run: &Path, want: &Shape, extra: &[&str]) {
    let out = up_net(file, run, extra);
    assert!(out.contains("fabric up: 1 processes"), "{out}");
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("hive.status.json")).unwrap())
            .unwrap();
    let nodes = status["nodes"].as_object().unwrap();
    assert_eq!(nodes.len(), want.switches + want.cas, "{status}");
    let up: usize = nodes
        .values()
        .flat_map(|n| n["ports"].as_array().unwrap())
        .filter(|p| p["up"] == true)
        .count();
    assert_eq!(up, 2 * want.links, "both ends of every link up: {status}");
    let stats = stats_json(run);
    let ports = stats["ports"].as_array().unwrap();
    assert_eq!(
        ports.len(),
        want.switches * want.ports as usize + want.cas,
        "{stats}"
    );
}

/// `stats --json` of the fabric in `run`.
fn stats_json(run: &Path) -> Value {
    let stats = fabric(&["stats", "--json", "--run-dir", &run.display().to_string()]);
    assert!(stats.status.success(), "{}", text(&stats));
    serde_json::from_slice(&stats.stdout).unwrap()
}

#[test]
fn tori_have_their_switches_cas_and_links_and_come_up() {
    let dir = TempDir::new("torus-nets");
    // 2D, 3x4 switches of 2 CAs + 4 torus ports.
    let t2 = generate(&dir.0, "torus-net.sh", &["3x4", "2"], "t2.net");
    let s2 = Shape {
        switches: 12,
        ports: 6,
        cas: 24,
        links: 24 + 12 * 2,
    };
    check_import(&t2, &s2);
    // 3D with a dimension of 2 (two parallel links per pair) and one of 1
    // (no links along it).
    let t3 = generate(&dir.0, "torus-net.sh", &["2x3x1"], "t3.net");
    let s3 = Shape {
        switches: 6,
        ports: 7,
        cas: 6,
        links: 6 + 6 * 2,
    };
    let topo = check_import(&t3, &s3);
    let between = |a: &str, b: &str| {
        topo["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| {
                let ends = [l["a"].as_str().unwrap(), l["b"].as_str().unwrap()];
                ends.iter().any(|e| e.starts_with(&format!("{a}:")))
                    && ends.iter().any(|e| e.starts_with(&format!("{b}:")))
            })
            .count()
    };
    assert_eq!(between("sw-0-0-0", "sw-1-0-0"), 2, "{topo}");
    assert_eq!(between("sw-0-0-0", "sw-0-1-0"), 1, "{topo}");
    for (file, shape, run) in [(&t2, &s2, "run2"), (&t3, &s3, "run3")] {
        let run = dir.join(run);
        let _down = Down(run.clone());
        check_up(file, &run, shape, &[]);
    }
}

#[test]
fn a_dragonfly_has_its_groups_and_opensm_brings_it_up() {
    let dir = TempDir::new("dragonfly-nets");
    // The balanced a = 2p = 2h dragonfly, all 9 groups: every pair of
    // groups joined by one global link.
    let big = generate(&dir.0, "dragonfly-net.sh", &["4", "2", "2"], "df9.net");
    check_import(
        &big,
        &Shape {
            switches: 36,
            ports: 7,
            cas: 72,
            links: 72 + 9 * 6 + 9 * 8 / 2,
        },
    );
    // 2 switches of 1 CA and 2 global links per group, 4 of the 5 groups
    // possible: one global port of each group unlinked.
    let file = generate(&dir.0, "dragonfly-net.sh", &["2", "1", "2", "4"], "df.net");
    let shape = Shape {
        switches: 8,
        ports: 4,
        cas: 8,
        links: 8 + 4 + 6,
    };
    check_import(&file, &shape);

    for tool in ["opensm", "ibnetdiscover"] {
        need(tool);
    }
    assert!(Path::new(UMAD2SIM).exists(), "{UMAD2SIM} missing");
    let sock = format!("ibtca-df-{}", std::process::id());
    let run = dir.join("run");
    let _down = Down(run.clone());
    let port = format!("g1-s1-c1={sock}");
    check_up(&file, &run, &shape, &["--sim-port", &port]);
    opensm_once(&sock, &dir.join("opensm.log"), Duration::from_secs(300));
    let (switches, cas, links) = fabric_of(&ibnetdiscover(&sock, ""));
    assert_eq!(
        (switches, cas, links.len()),
        (shape.switches, shape.cas, shape.links)
    );

    // The export carries the LIDs the SM gave: each CA's as its port
    // reports it, each switch's port 0 LID.
    let (exported, _) = export(&run, None);
    let stats = stats_json(&run);
    for p in stats["ports"].as_array().unwrap() {
        let (name, lid) = (p["name"].as_str().unwrap(), p["lid"].as_u64().unwrap());
        assert_ne!(lid, 0, "{p}");
        let want = if p["kind"] == "switch" {
            format!("Switch\t4 \"{name}\"\t# \"{name}\" base port 0 lid {lid} lmc 0\n")
        } else {
            format!("\t# lid {lid} lmc 0 ")
        };
        assert!(exported.contains(&want), "{want:?} in {exported}");
    }
}

/// `export --net` of the fabric in `run` (to `file` if given): its text,
/// and what it said on stderr.
fn export(run: &Path, file: Option<&Path>) -> (String, String) {
    let r = run.display().to_string();
    let mut args = vec!["export", "--net", "--run-dir", &r];
    let f = file.map(|f| f.display().to_string());
    if let Some(f) = &f {
        args.extend(["-o", f]);
    }
    let out = fabric(&args);
    assert!(out.status.success(), "export: {}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    match file {
        Some(f) => (std::fs::read_to_string(f).unwrap(), err),
        None => (String::from_utf8_lossy(&out.stdout).into_owned(), err),
    }
}

/// `import` of `file`, its links in a canonical order.
fn imported(file: &Path) -> Value {
    let out = fabric(&["import", &file.display().to_string()]);
    assert!(out.status.success(), "import: {}", text(&out));
    let mut topo: Value = serde_json::from_slice(&out.stdout).unwrap();
    let links = topo["links"].as_array_mut().unwrap();
    for l in links.iter_mut() {
        let (a, b) = (l["a"].clone(), l["b"].clone());
        if a.as_str() > b.as_str() {
            *l = serde_json::json!({ "a": b, "b": a });
        }
    }
    links.sort_by_key(|l| l.to_string());
    topo
}

#[test]
fn an_exported_fabric_comes_up_again_as_the_same_fabric() {
    let dir = TempDir::new("export-nets");
    let file = generate(&dir.0, "dragonfly-net.sh", &["2", "2", "2", "5"], "df.net");
    let run = dir.join("run");
    let _down = Down(run.clone());
    up_net(&file, &run, &[]);
    let exported = dir.join("exported.net");
    let (first, _) = export(&run, Some(&exported));
    assert_eq!(imported(&exported), imported(&file), "{first}");

    // The export runs, and its fabric exports the same file.
    let again = dir.join("again");
    let _down_again = Down(again.clone());
    up_net(&exported, &again, &[]);
    assert_eq!(export(&again, None).0.trim_end(), first.trim_end());
}

#[test]
fn a_link_down_at_run_time_is_left_out_of_the_export() {
    let dir = TempDir::new("export-down");
    let file = generate(&dir.0, "torus-net.sh", &["3x3"], "t.net");
    let run = dir.join("run");
    let _down = Down(run.clone());
    let r = run.display().to_string();
    up_net(&file, &run, &["--process-per-node"]);
    // sw-0-0's port 2 goes to sw-1-0's port 3.
    let out = fabric(&["link", "--run-dir", &r, "sw-0-0:2", "down"]);
    assert!(out.status.success(), "link down: {}", text(&out));
    let exported = dir.join("exported.net");
    let (_, err) = export(&run, Some(&exported));
    assert!(
        err.contains("link sw-0-0:2 - sw-1-0:3 left out: sw-0-0 port 2 is down"),
        "{err}"
    );
    let mut want = imported(&file);
    want["links"]
        .as_array_mut()
        .unwrap()
        .retain(|l| l["a"] != "sw-0-0:2");
    assert_eq!(want["links"].as_array().unwrap().len(), 9 + 18 - 1);
    assert_eq!(imported(&exported), want);
}
