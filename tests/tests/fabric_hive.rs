//! `ibtca-fabric up --net` hosts a net file's guestless nodes in one
//! `ibtca-hive` (docs/hive.md), no VMs: the fat tree of
//! `scripts/fat-tree-net.sh` comes up as one single-threaded process whose
//! switches and CAs carry the file's GUIDs and descriptions and link as
//! the file links them; `inspect` and `stats` show every hosted port's
//! IBA state and counters (the hive's control socket); `--device NODE`
//! keeps a CA as an `ibtca-device` whose (simulated) guest's RDMA WRITE
//! crosses the hosted switches to another's, and `stats` counts it on
//! the hosted switches' ports; `switch leaf4 down` (the hive powers the
//! hosted switch off) takes ca4-2's link down, and `switch leaf4 up`
//! brings it back with the file's routes: a second WRITE lands;
//! `--process-per-node` starts a process per node instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ibtca_device::verbs::abi::{MTU_4096, WC_SUCCESS, WR_RDMA_WRITE};
use ibtca_fabric::state::State;
use ibtca_tests::launcher::{fabric, text, up_net, Down};
use ibtca_tests::pair::{connected_pair, PairOptions, Side};
use ibtca_tests::sim_guest::{remote, send_wqe};
use ibtca_tests::TempDir;
use serde_json::Value;

/// `scripts/fat-tree-net.sh 4` (4 leaves, 2 spines, 8 CAs) in `dir`.
fn fat_tree(dir: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/fat-tree-net.sh");
    let out = Command::new("bash").arg(script).arg("4").output().unwrap();
    assert!(out.status.success(), "fat-tree-net.sh: {}", text(&out));
    let file = dir.join("ft.net");
    std::fs::write(&file, out.stdout).unwrap();
    file
}

#[test]
fn up_net_hosts_every_guestless_node_in_one_hive() {
    let dir = TempDir::new("fabric-hive");
    let file = fat_tree(&dir.0);
    let run = dir.join("run");
    let _down = Down(run.clone());
    let out = up_net(&file, &run, &[]);
    assert!(out.contains("hosted in one ibtca-hive: 14 nodes"), "{out}");
    assert!(out.contains("fabric up: 1 processes"), "{out}");

    let state = State::load(&run).unwrap().expect("a state file");
    assert_eq!(state.processes.len(), 1, "{:?}", state.processes);
    let hive = &state.processes[0];
    assert_eq!(hive.exe, "ibtca-hive");
    let tasks = std::fs::read_dir(format!("/proc/{}/task", hive.pid))
        .unwrap()
        .count();
    assert_eq!(tasks, 1, "the hive runs on one thread");

    // `up` returned once the hive said every linked port is up: all of
    // them here (every port of the tree is linked).
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("hive.status.json")).unwrap())
            .unwrap();
    let nodes = status["nodes"].as_object().unwrap();
    assert_eq!(nodes.len(), 14, "{status}");
    for (name, node) in nodes {
        let ports = node["ports"].as_array().unwrap();
        let want = if name.starts_with("ca") { 1 } else { 4 };
        assert_eq!(ports.len(), want, "{name}");
        assert!(ports.iter().all(|p| p["up"] == true), "{name}: {node}");
    }
    // The hosted switches are the file's: its descriptions, and each port's
    // peer (from its Hello) the GUID the file links it to.
    let log = std::fs::read_to_string(run.join("hive.log")).unwrap();
    // Every wire joins two hosted nodes: all carried in memory.
    assert!(log.contains("hive started nodes=14 sockets=0"), "{log}");
    for (switch, port, peer) in [
        ("leaf 1", 1, 0x100202u64),
        ("leaf 1", 3, 0x30001),
        ("leaf 4", 2, 0x100804),
        ("spine 2", 4, 0x20004),
    ] {
        let line = format!("port up switch={switch} port={port} peer_guid={peer:#018x}");
        assert!(log.contains(&line), "{line}: {log}");
    }

    let r = run.display().to_string();
    let inspect = fabric(&["inspect", "--run-dir", &r]);
    let t = String::from_utf8_lossy(&inspect.stdout);
    assert!(inspect.status.success(), "{}", text(&inspect));
    assert!(t.contains("hosts 14 nodes"), "{t}");
    let spine2 = t
        .lines()
        .find(|l| l.contains(" spine2 "))
        .unwrap_or_default();
    assert_eq!(spine2.matches(":Active").count(), 4, "{t}");

    // `stats --json`: every hosted port, up and Active, with its counters
    // under the IBA names; CAs as devices, switches as switches.
    let ports = stats_json(&run);
    assert_eq!(ports.len(), 6 * 4 + 8, "{ports:?}");
    for p in &ports {
        let name = p["name"].as_str().unwrap();
        let kind = if name.starts_with("ca") {
            "device"
        } else {
            "switch"
        };
        assert_eq!(
            (p["kind"].as_str(), p["up"].as_bool()),
            (Some(kind), Some(true)),
            "{p}"
        );
        assert_eq!(p["state"], "Active", "{p}");
        assert!(p["counters"]["PortXmitData"].is_u64(), "{p}");
    }
    let stats = fabric(&["stats", "--run-dir", &r]);
    let t = String::from_utf8_lossy(&stats.stdout);
    assert!(
        t.contains("switch leaf1\n  traps to the SM: {"),
        "{}",
        text(&stats)
    );
    assert!(t.contains("device ca4-2\n  port  1 up"), "{}", text(&stats));
}

/// `ibtca-fabric stats --json`'s ports.
fn stats_json(run: &Path) -> Vec<Value> {
    let out = fabric(&["stats", "--json", "--run-dir", &run.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["unreachable"], serde_json::json!([]), "{v}");
    v["ports"].as_array().unwrap().clone()
}

/// The counter `name` of port `port` of `node` in `ports`.
fn counter(ports: &[Value], node: &str, port: u64, name: &str) -> u64 {
    let p = ports
        .iter()
        .find(|p| p["name"] == node && p["port"] == port)
        .unwrap_or_else(|| panic!("no {node} port {port} in {ports:?}"));
    p["counters"][name].as_u64().unwrap()
}

#[test]
fn process_per_node_starts_a_process_per_switch_and_ca() {
    let dir = TempDir::new("fabric-hive-ppn");
    let file = fat_tree(&dir.0);
    let run = dir.join("run");
    let _down = Down(run.clone());
    let out = up_net(&file, &run, &["--process-per-node"]);
    assert!(out.contains("fabric up: 14 processes"), "{out}");
    assert!(!out.contains("ibtca-hive"), "{out}");
    let state = State::load(&run).unwrap().expect("a state file");
    let exes: Vec<&str> = state.processes.iter().map(|p| p.exe.as_str()).collect();
    assert_eq!(exes.iter().filter(|e| **e == "ibtca-switch").count(), 6);
    assert_eq!(exes.iter().filter(|e| **e == "ibtca-device").count(), 8);
}

#[test]
fn devices_beside_the_hive_write_across_its_switches() {
    let dir = TempDir::new("fabric-hive-dev");
    let file = fat_tree(&dir.0);
    let run = dir.join("run");
    let _down = Down(run.clone());
    // ca1-1 (LID 1) on leaf1, ca4-2 (LID 8) on leaf4: leaf1, a spine and
    // leaf4 between them, all hosted.
    let out = up_net(&file, &run, &["--device", "ca1-1", "--device", "ca4-2"]);
    assert!(out.contains("hosted in one ibtca-hive: 12 nodes"), "{out}");
    assert!(out.contains("fabric up: 3 processes"), "{out}");
    let log = std::fs::read_to_string(run.join("hive.log")).unwrap();
    assert!(log.contains("hive started nodes=12 sockets=2"), "{log}");

    let o = PairOptions::sized(1 << 20, 6, 4);
    let (mut a, b) = connected_pair(
        [&run.join("ca1-1.sock"), &run.join("ca4-2.sock")],
        [1, 8],
        MTU_4096,
        &o,
    );
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13) as u8 ^ 0xa5).collect();
    write_lands(&mut a, &b, 1, &data);

    // The write crossed leaf4 (hosted) out of its port 2 to ca4-2: its
    // counters there moved by at least the data (PortXmitData in 4-byte
    // words, at most 4096 bytes of payload a packet).
    let ports = stats_json(&run);
    let words = counter(&ports, "leaf4", 2, "PortXmitData");
    let packets = counter(&ports, "leaf4", 2, "PortXmitPkts");
    assert!(words >= data.len() as u64 / 4, "{words} words");
    assert!(packets >= data.len() as u64 / 4096, "{packets} packets");
    // Into leaf1 from ca1-1 likewise.
    assert!(counter(&ports, "leaf1", 1, "PortRcvData") >= data.len() as u64 / 4);

    // leaf4 loses power: ca4-2, on a socket wire, sees its link go down;
    // powered on, leaf4 has the file's routes again and carries a WRITE.
    let r = run.display().to_string();
    let log_says = |what: &str, n: usize| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let log = std::fs::read_to_string(run.join("ca4-2.log")).unwrap();
            if log.matches(what).count() >= n {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{what}: {log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let ups = std::fs::read_to_string(run.join("ca4-2.log"))
        .unwrap()
        .matches("link up")
        .count();
    let out = fabric(&["switch", "--run-dir", &r, "leaf4", "down"]);
    assert!(out.status.success(), "{}", text(&out));
    log_says("link down", 1);
    let out = fabric(&["switch", "--run-dir", &r, "leaf4", "up"]);
    assert!(out.status.success(), "{}", text(&out));
    log_says("link up", ups + 1);
    let again: Vec<u8> = data.iter().map(|b| !b).collect();
    write_lands(&mut a, &b, 2, &again);
}

/// A writes `data` into B's buffer (at 64) with an RDMA WRITE that
/// completes successfully, and the bytes are in B's memory.
fn write_lands(a: &mut Side, b: &Side, wr_id: u64, data: &[u8]) {
    a.g.write(a.buf, data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, wr_id, a.buf, data.len() as u32, a.lkey),
        b.buf + 64,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    let c =
        a.g.poll_cq(&mut a.cq, Duration::from_secs(20))
            .expect("write completion");
    assert_eq!((c.wr_id.to_native(), c.status), (wr_id, WC_SUCCESS));
    assert!(b.g.read(b.buf + 64, data.len()) == data, "the bytes landed");
}
