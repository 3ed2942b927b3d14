//! `ibtca-fabric inspect`, `stats` and `graph` on fabrics of real device
//! and switch processes (no VMs): the PIDs and liveness of what `up`
//! started, port states and LIDs from the agents, IBA counters that move
//! with RDMA traffic between simulated guests, JSON that parses, `--watch`
//! ending cleanly on SIGTERM, and Graphviz rendering the graph with a
//! downed link in red.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ibtca_device::verbs::abi::*;
use ibtca_fabric::state::State;
use ibtca_tests::launcher::{alive, config, fabric, text, up, Down, StandInStack};
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{remote, send_wqe};
use ibtca_tests::{workspace_bin, TempDir};
use serde_json::Value;

const T: Duration = Duration::from_secs(20);
/// A bound no loaded machine reaches for what is waited on with it (a
/// link noticing its dead peer, a process exiting on SIGTERM).
const LONG: Duration = Duration::from_secs(120);
/// Bytes each RDMA WRITE moves: 16 packets at a 4096-byte MTU.
const LEN: usize = 64 << 10;

/// `ibtca-fabric ARGS` that must succeed, its stdout parsed as JSON.
fn json(args: &[&str]) -> Value {
    let out = fabric(args);
    assert!(out.status.success(), "{args:?}: {}", text(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?} is not JSON ({e}): {}", text(&out)))
}

fn process<'a>(inspect: &'a Value, name: &str) -> &'a Value {
    inspect["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no process {name} in {inspect}"))
}

/// The counters of `name`'s port `port` in `stats --json`.
fn counters(stats: &Value, name: &str, port: u64) -> Value {
    stats["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name && p["port"] == port)
        .unwrap_or_else(|| panic!("no port {name}:{port} in {stats}"))["counters"]
        .clone()
}

fn n(v: &Value, counter: &str) -> u64 {
    v[counter]
        .as_u64()
        .unwrap_or_else(|| panic!("no {counter} in {v}"))
}

/// An RC QP pair between the guests on `a_sock` (LID `a_lid`) and
/// `b_sock` (LID `b_lid`); `a` RDMA WRITEs [`LEN`] bytes to `b`, which
/// land. Returns both sides (kept open).
fn write_across(a_sock: &Path, a_lid: u16, b_sock: &Path, b_lid: u16) -> (Side, Side) {
    let o = PairOptions::default();
    let mut a = Side::new(a_sock, &o, ALL_ACCESS);
    let mut b = Side::new(b_sock, &o, ALL_ACCESS);
    a.g.connect(&a.qp, b_lid, b.qp.qpn, MTU_4096, ALL_ACCESS);
    b.g.connect(&b.qp, a_lid, a.qp.qpn, MTU_4096, ALL_ACCESS);
    let data: Vec<u8> = (0..LEN).map(|i| (i * 13) as u8).collect();
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, a.buf, LEN as u32, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    a.expect_completion(1, WC_SUCCESS, T);
    assert_eq!(b.g.read(b.buf, LEN), data);
    (a, b)
}

/// The `<title>` and, for an edge, the stroke colour of every node and
/// edge group of a Graphviz SVG.
fn svg_groups(svg: &str, class: &str) -> Vec<(String, String)> {
    let marker = format!("class=\"{class}\">");
    svg.split("<g id=")
        .filter(|g| g.contains(&marker))
        .map(|g| {
            let title = g
                .split_once("<title>")
                .and_then(|(_, r)| r.split_once("</title>"))
                .map(|(t, _)| t.replace("&#45;", "-"))
                .unwrap_or_default();
            let stroke = g
                .split_once("<path")
                .and_then(|(_, r)| r.split_once("stroke=\""))
                .and_then(|(_, r)| r.split_once('"'))
                .map(|(s, _)| s.to_owned())
                .unwrap_or_default();
            (title, stroke)
        })
        .collect()
}

/// `graph --svg` of the fabric in `run`, rendered by Graphviz.
fn svg_of(run: &str, dir: &TempDir) -> String {
    let file = dir.join("fabric.svg");
    let out = fabric(&[
        "graph",
        "--run-dir",
        run,
        "--svg",
        "-o",
        &file.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "graph --svg (Graphviz installed? scripts/host-tools.sh): {}",
        text(&out)
    );
    std::fs::read_to_string(file).unwrap()
}

#[test]
fn two_devices_inspect_stats_and_a_dead_device() {
    let dir = TempDir::new("fab-inspect");
    let fab = up(&config("two-nodes.json"), &dir);
    let run = fab.run.display().to_string();
    let state = State::load(&fab.run).unwrap().unwrap();
    let pid = |name: &str| state.processes.iter().find(|p| p.name == name).unwrap().pid;

    // Every process with its PID, running; LIDs and states from the agents.
    let inspect = json(&["inspect", "--run-dir", &run, "--json"]);
    for (name, lid) in [("a", 1), ("b", 2)] {
        let p = process(&inspect, name);
        assert_eq!(p["kind"], "device", "{p}");
        assert_eq!(p["pid"], pid(name), "{p}");
        assert_eq!(p["alive"], true, "{p}");
        assert_eq!(p["agent"]["port"]["state"], "Active", "{p}");
        assert_eq!(p["agent"]["port"]["lid"], lid, "{p}");
        assert_eq!(p["agent"]["qps"]["count"], 0, "{p}");
    }

    // Counters move with the bytes of an RDMA WRITE from a to b.
    let before = json(&["stats", "--run-dir", &run, "--json"]);
    let (a, b) = write_across(&fab.run.join("a.sock"), 1, &fab.run.join("b.sock"), 2);
    let (aqpn, bqpn) = (a.qp.qpn, b.qp.qpn);
    let after = json(&["stats", "--run-dir", &run, "--json"]);
    let moved = |name: &str, counter: &str| {
        n(&counters(&after, name, 1), counter) - n(&counters(&before, name, 1), counter)
    };
    // PortXmitData and PortRcvData count 4-byte words, headers included.
    assert!(moved("a", "PortXmitData") * 4 >= LEN as u64, "{after}");
    assert!(moved("b", "PortRcvData") * 4 >= LEN as u64, "{after}");
    assert!(moved("a", "PortXmitPkts") >= 16, "{after}");
    assert!(moved("b", "PortRcvPkts") >= 16, "{after}");
    assert!(moved("b", "PortXmitPkts") >= 1, "b's ACKs: {after}");
    assert_eq!(n(&counters(&after, "a", 1), "PortRcvErrors"), 0);
    assert_eq!(n(&counters(&after, "a", 1), "SymbolErrorCounter"), 0);
    let stats_text = fabric(&["stats", "--run-dir", &run]);
    let stats_text = String::from_utf8_lossy(&stats_text.stdout).into_owned();
    assert!(stats_text.contains("device a\n"), "{stats_text}");
    assert!(
        stats_text.contains("  port  1 up   Active PortXmitData "),
        "{stats_text}"
    );

    // The QPs with their PSNs: 16 packets sent from PSN 100.
    let inspect = json(&["inspect", "--run-dir", &run, "--json"]);
    let qp = |name: &str, qpn: u32| {
        process(&inspect, name)["agent"]["qps"]["qps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["qpn"] == qpn)
            .unwrap_or_else(|| panic!("QP {qpn} of {name} in {inspect}"))
            .clone()
    };
    let qa = qp("a", aqpn);
    assert_eq!(
        (&qa["type"], &qa["state"], &qa["dest_qpn"], &qa["dlid"]),
        (&"RC".into(), &"RTS".into(), &bqpn.into(), &2.into()),
        "{qa}"
    );
    assert_eq!(qa["sq_psn"], 116, "{qa}");
    assert_eq!(qp("b", bqpn)["rq_psn"], 116, "{}", qp("b", bqpn));

    // A hostile client of a's control socket: an unknown command, a line
    // too long, a connection dropped mid-line. a keeps serving.
    let control = fab.run.join("a.control");
    let mut s = UnixStream::connect(&control).unwrap();
    s.write_all(b"format c:\n").unwrap();
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).unwrap();
    assert!(line.starts_with("error unknown command"), "{line}");
    let mut s = UnixStream::connect(&control).unwrap();
    s.write_all(&[[b'x'; 4096].as_slice(), b"\n"].concat())
        .unwrap();
    let mut reply = String::new();
    let _ = s.read_to_string(&mut reply);
    assert_eq!(reply, "error line too long\n");
    let mut dropped = UnixStream::connect(&control).unwrap();
    dropped.write_all(b"insp").unwrap();
    drop(dropped);
    assert_eq!(
        process(&json(&["inspect", "--run-dir", &run, "--json"]), "a")["alive"],
        true
    );

    // b dies: inspect says so, and a's port goes down.
    drop(b);
    let b_pid = pid("b");
    Command::new("kill")
        .args(["-9", &b_pid.to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + LONG;
    while alive(b_pid) {
        assert!(Instant::now() < deadline, "b did not die");
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + LONG;
    let inspect = loop {
        let inspect = json(&["inspect", "--run-dir", &run, "--json"]);
        if process(&inspect, "a")["agent"]["port"]["state"] == "Down" {
            break inspect;
        }
        assert!(
            Instant::now() < deadline,
            "a's port never went down: {inspect}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let pb = process(&inspect, "b");
    assert_eq!(pb["alive"], false, "{pb}");
    assert_eq!(pb["pid"], b_pid, "{pb}");
    assert_eq!(pb["agent_error"], "not running", "{pb}");
    let stats = json(&["stats", "--run-dir", &run, "--json"]);
    assert_eq!(
        stats["unreachable"],
        serde_json::json!([{"name": "b", "kind": "device", "error": "not running"}]),
        "{stats}"
    );
    assert!(
        counters(&stats, "a", 1).is_object(),
        "a still counts: {stats}"
    );
    let text_out = fabric(&["inspect", "--run-dir", &run]);
    let text_out = String::from_utf8_lossy(&text_out.stdout).into_owned();
    assert!(
        text_out.contains(&format!("device   b              pid {b_pid:<7} DEAD")),
        "{text_out}"
    );
    drop(a);
}

#[test]
fn switch_ports_count_traffic_graph_shows_a_downed_link_and_watch_stops() {
    let dir = TempDir::new("fab-graph");
    let fab = up(&config("four-nodes-one-switch.json"), &dir);
    let run = fab.run.display().to_string();

    let inspect = json(&["inspect", "--run-dir", &run, "--json"]);
    let sw = process(&inspect, "sw0");
    assert_eq!(
        (&sw["kind"], &sw["alive"]),
        (&"switch".into(), &true.into())
    );
    let ports = sw["agent"]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 4, "{sw}");
    assert!(ports
        .iter()
        .all(|p| p["state"] == "Active" && p["up"] == true));

    // n1 (port 1) writes to n3 (port 3) across sw0.
    let before = json(&["stats", "--run-dir", &run, "--json"]);
    let (_a, _b) = write_across(&fab.run.join("n1.sock"), 1, &fab.run.join("n3.sock"), 3);
    // A switch port counts a packet after handing it to its link, so n3
    // may have acknowledged the last one, and n1 seen the completion,
    // before port 3 counted it: wait for port 3's count.
    let deadline = Instant::now() + T;
    let after = loop {
        let after = json(&["stats", "--run-dir", &run, "--json"]);
        let words = n(&counters(&after, "sw0", 3), "PortXmitData")
            - n(&counters(&before, "sw0", 3), "PortXmitData");
        if words * 4 >= LEN as u64 {
            break after;
        }
        assert!(Instant::now() < deadline, "{after}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let moved = |name: &str, port: u64, counter: &str| {
        n(&counters(&after, name, port), counter) - n(&counters(&before, name, port), counter)
    };
    assert!(moved("sw0", 1, "PortRcvData") * 4 >= LEN as u64, "{after}");
    assert!(moved("sw0", 3, "PortXmitData") * 4 >= LEN as u64, "{after}");
    assert!(moved("sw0", 1, "PortRcvPkts") >= 16, "{after}");
    assert_eq!(
        moved("sw0", 2, "PortXmitPkts"),
        0,
        "nothing for n2: {after}"
    );
    assert!(moved("n3", 1, "PortRcvData") * 4 >= LEN as u64, "{after}");

    // n3's link down: its edge alone is red; every node and link is drawn.
    let out = fabric(&["link", "--run-dir", &run, "n3", "down"]);
    assert!(out.status.success(), "{}", text(&out));
    let svg = svg_of(&run, &dir);
    let mut nodes: Vec<String> = svg_groups(&svg, "node").into_iter().map(|g| g.0).collect();
    nodes.sort();
    assert_eq!(nodes, ["n1", "n2", "n3", "n4", "sw0"], "{svg}");
    let mut edges = svg_groups(&svg, "edge");
    edges.sort();
    assert_eq!(
        edges,
        [
            ("n1--sw0".to_owned(), "black".to_owned()),
            ("n2--sw0".to_owned(), "black".to_owned()),
            ("n3--sw0".to_owned(), "red".to_owned()),
            ("n4--sw0".to_owned(), "black".to_owned()),
        ],
        "{svg}"
    );
    let dot = fabric(&["graph", "--run-dir", &run]);
    let dot = String::from_utf8_lossy(&dot.stdout).into_owned();
    assert!(dot.starts_with("graph fabric {"), "{dot}");

    // --watch prints until SIGTERM, then exits 0.
    let mut watch = Command::new(workspace_bin("ibtca-fabric"))
        .args(["stats", "--run-dir", &run, "--json", "--watch", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        let line = lines.next().expect("a line").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["ports"].as_array().unwrap().len(), 8, "{line}");
    }
    Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + LONG;
    let status = loop {
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "--watch ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

/// With guests (a stand-in run-vm.sh whose "QEMU" is a copy of `sleep`
/// named qemu-system-x86_64): inspect shows each guest's script and QEMU
/// PIDs, its console and the management hub; a guest whose QEMU died
/// shows as exited.
#[test]
fn guests_their_qemu_consoles_and_the_hub() {
    let dir = TempDir::new("fab-inspect-guests");
    let stack = StandInStack::new(&dir);
    let qemu = dir.join("qemu-system-x86_64");
    std::fs::copy("/bin/sleep", &qemu).unwrap();
    std::fs::write(
        &stack.run_vm,
        format!(
            "while [ $# -gt 0 ]; do [ \"$1\" = --serial-log ] && log=$2; shift; done\n\
             echo \"booted $$\" > \"$log\"\n{} 600 &\nwait\n",
            qemu.display()
        ),
    )
    .unwrap();
    let run = stack.chroot.join("tmp/run");
    let run_s = run.display().to_string();
    let _down = Down(run.clone());
    stack.up_guests(&config("two-nodes.json"), &run);
    let state = State::load(&run).unwrap().unwrap();
    let inspect_json = || {
        let out = stack.fabric(&["inspect", "--run-dir", &run_s, "--json"]);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    // The stand-in QEMU starts after its script: wait for it.
    let deadline = Instant::now() + LONG;
    let inspect = loop {
        let inspect = inspect_json();
        let started = ["a (guest)", "b (guest)"].iter().all(|g| {
            process(&inspect, g)["guest"]["qemu_pids"]
                .as_array()
                .unwrap()
                .len()
                == 1
        });
        if started {
            break inspect;
        }
        assert!(
            Instant::now() < deadline,
            "no QEMU under the guests: {inspect}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let hub = inspect["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "hub")
        .unwrap_or_else(|| panic!("no hub in {inspect}"));
    assert_eq!(hub["alive"], true, "{hub}");
    for node in ["a", "b"] {
        let name = format!("{node} (guest)");
        let g = process(&inspect, &name);
        let pid = state.processes.iter().find(|p| p.name == name).unwrap().pid;
        assert_eq!(
            (&g["kind"], &g["pid"], &g["alive"]),
            (&"guest".into(), &pid.into(), &true.into())
        );
        assert_eq!(g["guest"]["state"], "running", "{g}");
        assert_eq!(
            g["guest"]["console"],
            run.join(format!("{node}.console")).display().to_string(),
            "{g}"
        );
    }
    // b's QEMU dies: its script ends, and inspect says the guest exited.
    let qemu_b = process(&inspect, "b (guest)")["guest"]["qemu_pids"][0]
        .as_u64()
        .unwrap();
    Command::new("kill")
        .args(["-9", &qemu_b.to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + LONG;
    loop {
        let inspect = inspect_json();
        let g = process(&inspect, "b (guest)");
        if g["alive"] == false {
            assert_eq!(g["guest"]["state"], "exited", "{g}");
            assert_eq!(process(&inspect, "a (guest)")["alive"], true);
            break;
        }
        assert!(Instant::now() < deadline, "b's guest still runs: {inspect}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
