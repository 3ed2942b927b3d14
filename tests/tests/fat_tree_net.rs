//! `scripts/fat-tree-net.sh RADIX PODS` writes a three-level fat tree
//! that ibsim and ibtca both load as the same fabric: with the radix-4,
//! 3-pod tree (12 CAs; 6 leaves, 6 aggregation switches and 4 cores),
//! `ibtca-fabric import` has exactly its switches, CAs and links; ibsim
//! serves it and `ibnetdiscover` (through Debian's libumad2sim) lists
//! exactly those nodes and links; `ibtca-fabric up --net` of the same file
//! (every node, the host port too, hosted in one `ibtca-hive`), swept by
//! the host's `opensm -o`, gives an `ibnetdiscover` listing the same links
//! between the same GUIDs as ibsim's.
//!
//! A link failed at run time: on the radix-4, 2-pod tree in one hive, the
//! host's OpenSM (kept running) routes CA 1-1-1 to CA 2-2-2 through five
//! switches; `ibtca-fabric link leaf1-1:P down` on the route's first
//! uplink (the hive's control socket) takes it down at both ends, the
//! switches' trap 128 makes OpenSM route around it (`ibtracert`: another
//! five-switch route), and `link ... up` brings it back Active (OpenSM
//! sweeps again). Faults are refused on a hosted switch.
//!
//! A switch failed at run time: on the same tree, `ibtca-fabric switch
//! AGG down` powers off the aggregation switch on that route (the hive's
//! control socket): every port of it and each neighbour's port facing it
//! goes down, the neighbours' trap 128 makes OpenSM route around the
//! whole switch (another five-switch route, not through it), `link` on it
//! is refused while it is off, and `switch AGG up` brings it back: its
//! ports Active again after OpenSM's next sweep.
//!
//! Needs `opensm`, `infiniband-diags`, `libumad2sim0` and `ibsim-utils` on
//! the host (scripts/host-tools.sh installs them).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ibtca_tests::host_sm::{
    fabric_of, ibnetdiscover, need, opensm_once, route, route_until, HostSm, UMAD2SIM,
};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::TempDir;
use serde_json::Value;

const RADIX: usize = 4;
const PODS: usize = 3;
/// RADIX/2 leaves of RADIX/2 CAs per pod.
const CAS: usize = PODS * (RADIX / 2) * (RADIX / 2);
/// Leaves and aggs per pod; each agg's 2 uplinks go to 2 cores of its
/// group (one link each: 2 links per pod would need 6 core ports).
const SWITCHES: usize = PODS * RADIX + (RADIX / 2) * (RADIX / 2);
/// A CA's, a leaf's RADIX/2 uplinks, an agg's RADIX/2 uplinks.
const LINKS: usize = 3 * CAS;

fn net_file(dir: &Path) -> PathBuf {
    net_file_of(dir, PODS)
}

fn net_file_of(dir: &Path, pods: usize) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fat-tree-net.sh");
    let out = Command::new("bash")
        .arg(script)
        .args([RADIX.to_string(), pods.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "fat-tree-net.sh: {}", text(&out));
    let file = dir.join("ft3.net");
    std::fs::write(&file, out.stdout).unwrap();
    file
}

fn wait_for_line(child: &mut Child, want: &str) {
    let out = child.stdout.take().unwrap();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if line.contains(want) {
            return;
        }
    }
    panic!("ibsim ended without {want:?}: {:?}", child.wait());
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_three_level_fat_tree_loads_in_ibsim_and_ibtca_as_the_same_fabric() {
    for tool in ["opensm", "ibnetdiscover", "ibsim"] {
        need(tool);
    }
    assert!(Path::new(UMAD2SIM).exists(), "{UMAD2SIM} missing");
    let dir = TempDir::new("fat-tree-net");
    let file = net_file(&dir.0);
    let f = file.display().to_string();

    // ibtca's import: the file's switches, CAs and links, every switch
    // with RADIX ports.
    let out = fabric(&["import", &f]);
    assert!(out.status.success(), "import: {}", text(&out));
    let topo: Value = serde_json::from_slice(&out.stdout).unwrap();
    let switches = topo["switches"].as_array().unwrap();
    assert_eq!(switches.len(), SWITCHES, "{topo}");
    assert!(switches.iter().all(|s| s["ports"] == RADIX), "{topo}");
    assert_eq!(topo["nodes"].as_array().unwrap().len(), CAS, "{topo}");
    assert_eq!(topo["links"].as_array().unwrap().len(), LINKS, "{topo}");

    // ibsim serves the same file.
    let sock = format!("ibtca-ft3-{}", std::process::id());
    let mut ibsim = Command::new("ibsim")
        .args(["-s", "-n", &f])
        .env("IBSIM_SOCKNAME", format!("{sock}-ibsim"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start ibsim");
    wait_for_line(&mut ibsim, "Network simulator ready");
    let ibsim = Kill(ibsim);
    let (sw, ca, ibsim_links) = fabric_of(&ibnetdiscover(&format!("{sock}-ibsim"), "ca1-1-1"));
    drop(ibsim);
    assert_eq!((sw, ca, ibsim_links.len()), (SWITCHES, CAS, LINKS));

    // ibtca runs it: one hive with the host port, swept by the host's SM.
    let run = dir.join("run");
    let _down = Down(run.clone());
    let out = fabric(&[
        "up",
        "--net",
        &f,
        "--run-dir",
        &run.display().to_string(),
        "--sim-port",
        &format!("ca1-1-1={sock}"),
    ]);
    assert!(out.status.success(), "up --net: {}", text(&out));
    opensm_once(&sock, &dir.join("opensm.log"), Duration::from_secs(300));
    let (sw, ca, ibtca_links) = fabric_of(&ibnetdiscover(&sock, ""));
    assert_eq!((sw, ca), (SWITCHES, CAS));
    // The host port is the hive's too: nothing else runs.
    assert_eq!(exes(&run), ["ibtca-hive"]);
    assert_eq!(ibtca_links, ibsim_links, "ibtca's links against ibsim's");
}

/// The binaries of the processes `up` started in `run`.
fn exes(run: &Path) -> Vec<String> {
    let state = ibtca_fabric::state::State::load(run).unwrap().unwrap();
    state.processes.into_iter().map(|p| p.exe).collect()
}

/// `node`'s `port` in `stats --json` of `run`.
fn port_stats(run: &str, node: &str, port: u64) -> Value {
    let out = fabric(&["stats", "--json", "--run-dir", run]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == node && p["port"] == port)
        .unwrap_or_else(|| panic!("no {node} port {port}: {v}"))
        .clone()
}

/// Whether `node`'s `port` is up and Active in `stats --json` of `run`.
fn active(run: &str, node: &str, port: u64) -> bool {
    let p = port_stats(run, node, port);
    p["up"] == true && p["state"] == "Active"
}

/// Polls [`active`] until it holds; panics after `guard` (a hang guard).
fn wait_active(run: &str, node: &str, port: u64, guard: Duration) {
    let deadline = std::time::Instant::now() + guard;
    while !active(run, node, port) {
        assert!(
            std::time::Instant::now() < deadline,
            "{node}:{port} not Active: {}",
            port_stats(run, node, port)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// CA 1-1-1 and CA 2-2-2 (port GUIDs, fat-tree-net.sh's numbering).
const ENDS: (&str, &str) = ("0x100020203", "0x100040405");
/// A hang guard for the SM's routes and port states, not a timing bound.
const GUARD: Duration = Duration::from_secs(120);

/// The radix-4, 2-pod tree `up --net` in one hive with its host port,
/// the host's OpenSM kept running on it, and its route from CA 1-1-1 to
/// CA 2-2-2 (five switches). Stops the SM, then the fabric, when dropped.
struct Routed {
    _sm: HostSm,
    _down: Down,
    /// The run directory.
    r: String,
    /// The host port's socket name.
    sock: String,
    before: Vec<(String, u64)>,
    dir: TempDir,
}

impl Routed {
    fn new(name: &str) -> Routed {
        for tool in ["opensm", "ibtracert"] {
            need(tool);
        }
        let dir = TempDir::new(name);
        let file = net_file_of(&dir.0, 2);
        let run = dir.join("run");
        let r = run.display().to_string();
        let sock = format!("ibtca-{name}-{}", std::process::id());
        let out = fabric(&[
            "up",
            "--net",
            &file.display().to_string(),
            "--run-dir",
            &r,
            "--sim-port",
            &format!("ca1-2-1={sock}"),
        ]);
        let _down = Down(run);
        assert!(out.status.success(), "up --net: {}", text(&out));
        let _sm = HostSm::start(&sock, &dir.join("opensm.log"), &dir.0);
        let before = route_until((&sock, &dir.0), ENDS, GUARD, |r| r.len() == 5);
        assert_eq!(before[0].0, "leaf1-1", "{before:?}");
        Routed {
            _sm,
            _down,
            r,
            sock,
            before,
            dir,
        }
    }

    /// Polls the route until `want` holds of it.
    fn route_until(&self, want: impl Fn(&[(String, u64)]) -> bool) -> Vec<(String, u64)> {
        route_until((&self.sock, &self.dir.0), ENDS, GUARD, want)
    }

    /// Whether there is a five-switch route.
    fn routed(&self) -> bool {
        route(&self.sock, &self.dir.0, ENDS.0, ENDS.1).is_some_and(|r| r.len() == 5)
    }
}

#[test]
fn a_link_failed_in_the_hive_is_routed_around_by_the_hosts_opensm() {
    let t = Routed::new("ft-reroute");
    let (r, before) = (&t.r, &t.before);
    let (leaf, uplink) = before[0].clone();

    let refused = fabric(&[
        "link",
        "--run-dir",
        r,
        &format!("{leaf}:{uplink}"),
        "faults",
        "drop:10",
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("hosted in the hive"),
        "{}",
        text(&refused)
    );

    let end = format!("{leaf}:{uplink}");
    let out = fabric(&["link", "--run-dir", r, &end, "down"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = t.route_until(|r| r.len() == 5 && r[0] != before[0]);
    assert_eq!(after[0].0, "leaf1-1", "{after:?}");
    assert!(!active(r, &leaf, uplink));
    // The peer's end went down with it (leaf I is on port I of each agg
    // of its pod).
    assert!(!active(r, &before[1].0, 1));

    let out = fabric(&["link", "--run-dir", r, &end, "up"]);
    assert!(out.status.success(), "{}", text(&out));
    wait_active(r, &leaf, uplink, GUARD);
    assert!(t.routed());
}

#[test]
fn a_switch_powered_off_in_the_hive_is_routed_around_by_the_hosts_opensm() {
    let t = Routed::new("ft-switch-off");
    let (r, before) = (&t.r, &t.before);
    let (leaf, uplink) = before[0].clone();
    let agg = before[1].0.clone();
    assert!(agg.starts_with("agg1-"), "{before:?}");

    let out = fabric(&["switch", "--run-dir", r, &agg, "down"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("powered off"), "{}", text(&out));
    // Every port of it is down, and so is its neighbours' end: the
    // leaf's uplink to it (RADIX ports an agg: leaves, then cores).
    for port in 1..=RADIX as u64 {
        let p = port_stats(r, &agg, port);
        assert_eq!(p["up"], false, "{agg}:{port} {p}");
    }
    let p = port_stats(r, &leaf, uplink);
    assert_eq!(p["up"], false, "{leaf}:{uplink} {p}");
    let refused = fabric(&["link", "--run-dir", r, &format!("{agg}:1"), "up"]);
    assert!(!refused.status.success());
    assert!(text(&refused).contains("powered off"), "{}", text(&refused));

    // OpenSM routes around the whole switch.
    let after = t.route_until(|r| r.len() == 5 && r.iter().all(|(s, _)| *s != agg));
    eprintln!("route before: {before:?}\nroute after: {after:?}");
    assert_eq!(after[0].0, "leaf1-1", "{after:?}");
    assert!(after[1].0.starts_with("agg1-"), "{after:?}");

    // Powered on, it is swept again: every port Active.
    let out = fabric(&["switch", "--run-dir", r, &agg, "up"]);
    assert!(out.status.success(), "{}", text(&out));
    for port in 1..=RADIX as u64 {
        wait_active(r, &agg, port, GUARD);
    }
    wait_active(r, &leaf, uplink, GUARD);
    assert!(t.routed());
}
