//! Full stack, the data path across a three-level fat tree (issue 35):
//! `scripts/fat-tree-net.sh 4 2` (two pods; 10 switches, 8 CAs) from
//! `up --net`, every switch and guestless CA hosted in one `ibtca-hive`,
//! two guests at opposite edges (`ca1-1-1` under leaf 1-1, `ca2-2-2` under
//! leaf 2-2: leaf, agg, core, agg, leaf between them), and the host's
//! OpenSM on a host port (`--sim-port`, libumad2sim) routing it.
//!
//! - Unmodified `ib_write_bw` and `ib_write_lat` run from `ca1-1-1` to
//!   `ca2-2-2` on the SM's routes; `ibtracert` (host, through the SM's
//!   port) shows the writer's route crossing five switches, and each of
//!   those switches' egress port on it counted at least the bytes
//!   `ib_write_bw` reports it wrote (PortXmitData, `stats --json`).
//! - The route's first uplink (leaf 1-1 to its agg) is taken down at run
//!   time (`ibtca-fabric link ... down`, served by the hive): the hosted
//!   switches' trap 128 makes OpenSM sweep and route around it
//!   (`ibtracert` shows another five-switch route), and a new
//!   `ib_write_bw` between the same guests completes over the new route's
//!   ports while the downed port carries nothing.
//! - Then, the link back up and Active again, the core switch of the
//!   route in use loses power at run time (`ibtca-fabric switch CORE
//!   down`, served by the hive): every link of it goes down at both ends
//!   (the agg's port facing it is down), its neighbours' trap 128 makes
//!   OpenSM route around the whole switch (`ibtracert`: a five-switch
//!   route without it), and a third `ib_write_bw` between the same guests
//!   completes, its bytes counted on that route's ports. (Each agg of
//!   this tree has both uplinks to one core: with the link still down,
//!   the route's core would have no way around it.)
//!
//! Two guests, one boot. Needs the VM stack, root, and `opensm`,
//! `infiniband-diags` and `libumad2sim0` on the host
//! (`scripts/host-tools.sh`); `scripts/test.sh` runs it.

use std::process::Command;
use std::time::{Duration, Instant};

use ibtca_tests::console::{client, perftest_server, tagged_lines, wait_for};
use ibtca_tests::guest_fabric::GuestFabric;
use ibtca_tests::host_sm::{route, route_until, HostSm};
use ibtca_tests::launcher::{fabric, fabric_ok, text};
use ibtca_tests::vm::VmStack;
use serde_json::Value;

/// The writer (perftest's client) and its target (the server), at
/// opposite edges; and the host port OpenSM attaches to.
const WRITER: &str = "ca1-1-1";
const TARGET: &str = "ca2-2-2";
const HOST_PORT: &str = "ca1-2-1";
/// Their port GUIDs (`fat-tree-net.sh`: CA P-I-C's node GUID is
/// 0x100000000 + ((P*256+I)*256+C)*2, its port's one more).
const WRITER_GUID: &str = "0x100020203";
const TARGET_GUID: &str = "0x100040405";

const BW: &str = "ib_write_bw -d ibtca0 -s 65536 -D 3";
const LAT: &str = "ib_write_lat -d ibtca0 -s 8 -n 300";
/// Waits until the guest's port is Active (the host's OpenSM sweeps after
/// the guests boot).
const ACTIVE: &str = "until grep -q ACTIVE /sys/class/infiniband/ibtca0/ports/1/state; \
                      do sleep 1; done";

/// Every port's counters, `stats --json`.
fn stats(run: &str) -> Vec<Value> {
    let out = fabric(&["stats", "--json", "--run-dir", run]);
    assert!(out.status.success(), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["ports"].as_array().unwrap().clone()
}

/// PortXmitData (4-byte words) of `node`'s `port` in `ports`.
fn xmit_words(ports: &[Value], node: &str, port: u64) -> u64 {
    ports
        .iter()
        .find(|p| p["name"] == node && p["port"] == port)
        .unwrap_or_else(|| panic!("no {node} port {port}"))["counters"]["PortXmitData"]
        .as_u64()
        .unwrap()
}

/// The bytes an `ib_write_bw` run moved (message size × iterations of its
/// result line), from its tagged output; asserts it succeeded.
fn bw_bytes(console: &str, tag: &str) -> u64 {
    let lines = tagged_lines(console, tag);
    assert!(lines.contains(&"exit=0"), "{tag}: {lines:?}");
    let i = lines
        .iter()
        .position(|l| l.trim_start().starts_with("#bytes"))
        .unwrap_or_else(|| panic!("{tag}: no result header: {lines:?}"));
    let r: Vec<u64> = lines[i + 1]
        .split_whitespace()
        .take(2)
        .map(|w| w.parse().unwrap())
        .collect();
    eprintln!("{tag}: {}", lines[i + 1]);
    r[0] * r[1]
}

/// Lets the writer go on (`/ibtca/GO` in its guest), waits for its
/// `ib_write_bw` `tag`, and asserts that each switch on `route` sent at
/// least the bytes it wrote since `ports` (counters before); returns the
/// counters after.
fn resume_on(
    fab: &GuestFabric,
    route: &[(String, u64)],
    ports: &[Value],
    go: &str,
    tag: &str,
) -> Vec<Value> {
    let was: Vec<u64> = route
        .iter()
        .map(|(s, p)| xmit_words(ports, s, *p))
        .collect();
    std::fs::write(fab.run.join(format!("{WRITER}.guest/{go}")), "").unwrap();
    let console = wait_for(
        &fab.console(WRITER),
        &format!("{tag} exit="),
        1,
        Duration::from_secs(600),
    );
    let bytes = bw_bytes(&console, tag);
    let ports = stats(&fab.run_dir());
    for ((sw, port), was) in route.iter().zip(&was) {
        let words = xmit_words(&ports, sw, *port) - was;
        assert!(
            words * 4 >= bytes,
            "{sw}:{port} sent {words} words, the writer {bytes} bytes"
        );
    }
    ports
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn guests_at_opposite_edges_of_a_fat_tree_write_through_five_switches_and_survive_a_failed_link_and_switch(
) {
    let stack = VmStack::get();
    // From the VM lock taken.
    let started = Instant::now();
    let net = Command::new("bash")
        .arg(stack.repo().join("scripts/fat-tree-net.sh"))
        .args(["4", "2"])
        .output()
        .unwrap();
    assert!(net.status.success());
    let sock = format!("vm-edges-{}", std::process::id());
    let mut extra: Vec<String> = [
        "--sim-port",
        &format!("{HOST_PORT}={sock}"),
        "--guest-timeout",
        "1500",
    ]
    .map(String::from)
    .to_vec();
    let server = |tag: &str, cmd: &str| format!("{TARGET}={}", perftest_server(tag, cmd, 3));
    let writer =
        |tag: &str, cmd: &str| format!("{WRITER}={}", client(tag, &format!("{cmd} {TARGET}"), 120));
    for run in [
        format!("{TARGET}={ACTIVE}"),
        server("SBW1", BW),
        server("SLAT", LAT),
        server("SBW2", BW),
        server("SBW3", BW),
        format!("{WRITER}={ACTIVE}"),
        writer("BW1", BW),
        writer("LAT", LAT),
        // The host's go-ahead, once it has failed the link and seen the
        // new route.
        format!("{WRITER}=until [ -e /ibtca/go ]; do sleep 1; done"),
        writer("BW2", BW),
        // The go-ahead once the host has powered off a switch and seen
        // the route around it.
        format!("{WRITER}=until [ -e /ibtca/go2 ]; do sleep 1; done"),
        writer("BW3", BW),
    ] {
        extra.push("--run".into());
        extra.push(run);
    }
    let fab = GuestFabric::up_net(
        &stack,
        "fat-tree-edges",
        &String::from_utf8_lossy(&net.stdout),
        &extra,
    );
    let run = fab.run_dir();
    let _sm = HostSm::start(&sock, &fab.dir.join("opensm.log"), &fab.dir.0);

    // Five switches between the edges, on the SM's routes, carried the
    // bytes the writer wrote.
    let console = wait_for(
        &fab.console(WRITER),
        "LAT exit=",
        1,
        Duration::from_secs(1200),
    );
    let bytes = bw_bytes(&console, "BW1");
    let lat = tagged_lines(&console, "LAT");
    assert!(lat.contains(&"exit=0"), "{lat:?}");
    eprintln!(
        "LAT: {:?}",
        lat.iter().find(|l| l.trim_start().starts_with("8 "))
    );
    let before = route(&sock, &fab.dir.0, WRITER_GUID, TARGET_GUID).expect("ibtracert");
    let kinds: Vec<String> = before
        .iter()
        .map(|(n, _)| {
            n.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-')
                .to_owned()
        })
        .collect();
    assert_eq!(kinds, ["leaf", "agg", "core", "agg", "leaf"], "{before:?}");
    assert_eq!(before[0].0, "leaf1-1", "{before:?}");
    assert_eq!(before[4].0, "leaf2-2", "{before:?}");
    let ports = stats(&run);
    for (sw, port) in &before {
        let words = xmit_words(&ports, sw, *port);
        assert!(
            words * 4 >= bytes,
            "{sw}:{port} sent {words} words, the writer {bytes} bytes"
        );
    }

    // Fail the route's first uplink; OpenSM routes around it.
    let (leaf, uplink) = before[0].clone();
    fabric_ok(&[
        "link",
        "--run-dir",
        &run,
        &format!("{leaf}:{uplink}"),
        "down",
    ]);
    let after = route_until(
        (&sock, &fab.dir.0),
        (WRITER_GUID, TARGET_GUID),
        Duration::from_secs(300),
        |r| r.len() == 5 && r[0] != before[0],
    );
    eprintln!("route before: {before:?}\nroute after: {after:?}");
    assert_eq!(after[0].0, "leaf1-1", "{after:?}");
    let ports = stats(&run);
    let downed = xmit_words(&ports, &leaf, uplink);

    // Traffic resumes on the new route.
    let ports = resume_on(&fab, &after, &ports, "go", "BW2");
    assert_eq!(
        xmit_words(&ports, &leaf, uplink),
        downed,
        "the downed port sent"
    );
    eprintln!(
        "vm_fat_tree_edges: the failed link's checks done at {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // The link back (each agg of this tree has both uplinks to one core,
    // so with it down the route's core has no way around it): once
    // Active again, power off the core switch of the route in use.
    fabric_ok(&["link", "--run-dir", &run, &format!("{leaf}:{uplink}"), "up"]);
    let deadline = Instant::now() + Duration::from_secs(300);
    while !stats(&run)
        .iter()
        .any(|p| p["name"] == leaf.as_str() && p["port"] == uplink && p["state"] == "Active")
    {
        assert!(
            Instant::now() < deadline,
            "{leaf}:{uplink} not Active again"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let in_use = route_until(
        (&sock, &fab.dir.0),
        (WRITER_GUID, TARGET_GUID),
        Duration::from_secs(300),
        |r| r.len() == 5,
    );
    let core = in_use[2].0.clone();
    assert!(core.starts_with("core"), "{in_use:?}");
    let out = fabric(&["switch", "--run-dir", &run, &core, "down"]);
    assert!(out.status.success(), "{}", text(&out));
    // Its neighbour's end went down with it: the agg's port to it.
    let (agg, to_core) = in_use[1].clone();
    let ports = stats(&run);
    let facing = ports
        .iter()
        .find(|p| p["name"] == agg.as_str() && p["port"] == to_core)
        .unwrap();
    assert_eq!(facing["up"], false, "{agg}:{to_core} {facing}");
    let rerouted = route_until(
        (&sock, &fab.dir.0),
        (WRITER_GUID, TARGET_GUID),
        Duration::from_secs(300),
        |r| r.len() == 5 && r.iter().all(|(s, _)| *s != core),
    );
    eprintln!("route in use: {in_use:?}\nroute without {core}: {rerouted:?}");
    let ports = stats(&run);
    for p in ports.iter().filter(|p| p["name"] == core.as_str()) {
        assert_eq!(p["up"], false, "{core} powered off: {p}");
    }

    // Traffic resumes around the switch.
    resume_on(&fab, &rerouted, &ports, "go2", "BW3");
    let server = wait_for(
        &fab.console(TARGET),
        "SBW3 exit=",
        1,
        Duration::from_secs(120),
    );
    for tag in ["SBW2", "SBW3"] {
        assert!(tagged_lines(&server, tag).contains(&"exit=0"), "{tag}");
    }
    eprintln!(
        "vm_fat_tree_edges: {:.0} s",
        started.elapsed().as_secs_f64()
    );
}
