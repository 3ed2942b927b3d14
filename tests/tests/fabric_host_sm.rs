//! Host programs on a fabric without guests (docs/host-sm.md): `up
//! --sim-port host=NAME` makes node `host` an `ibtca-simport`, and the
//! host's unmodified OpenSM and infiniband-diags attach to it through
//! Debian's `libumad2sim.so` (LD_PRELOAD). Before the SM every other port
//! is Init; one OpenSM sweep (`opensm -o`) makes every port of the two
//! switches and four CAs Active; `ibnetdiscover` lists exactly the file's
//! switches and CAs; `smpquery nodeinfo` and `perfquery` answer by LID.
//! Hostile datagrams on the port's sockets (short, wrong magic, unknown
//! types and clients, a CONNECT for a process without sockets, a short
//! MAD envelope) are dropped with a log line, and the port keeps serving.
//!
//! Needs `opensm`, `infiniband-diags` and `libumad2sim0` on the host
//! (scripts/host-tools.sh installs them).

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use ibtca_tests::host_sm::{opensm_once, UMAD2SIM};
use ibtca_tests::launcher::{alive, fabric, text, Down};
use ibtca_tests::TempDir;

const TOPOLOGY: &str = r#"{
  "nodes": [{"name": "host", "lid": 1}, {"name": "a", "lid": 2},
            {"name": "b", "lid": 3}, {"name": "c", "lid": 4}],
  "switches": [{"name": "sw0", "ports": 4}, {"name": "sw1", "ports": 4}],
  "links": [{"a": "host", "b": "sw0:1"}, {"a": "a", "b": "sw0:2"},
            {"a": "sw0:3", "b": "sw1:3"}, {"a": "b", "b": "sw1:1"},
            {"a": "c", "b": "sw1:2"}]
}"#;

fn need_host_tools() {
    for tool in ["opensm", "ibnetdiscover", "smpquery", "perfquery"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
            .unwrap_or(false)
            || Path::new("/usr/sbin").join(tool).exists();
        assert!(
            found,
            "{tool} missing: install opensm and infiniband-diags (scripts/host-tools.sh)"
        );
    }
    assert!(
        Path::new(UMAD2SIM).exists(),
        "{UMAD2SIM} missing: install libumad2sim0 (scripts/host-tools.sh)"
    );
}

/// Runs a host program attached to the port `sock` through libumad2sim.
fn sim(sock: &str, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .env("LD_PRELOAD", UMAD2SIM)
        .env("IBSIM_SOCKNAME", sock)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

fn sim_ok(sock: &str, program: &str, args: &[&str]) -> String {
    let out = sim(sock, program, args);
    assert!(out.status.success(), "{program} {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The LinkState `smpquery portinfo` shows of the port at directed route
/// `path` (port `port` of a switch there).
fn link_state(sock: &str, path: &str, port: Option<&str>) -> String {
    let mut args = vec!["-D", "portinfo", path];
    args.extend(port);
    let out = sim_ok(sock, "smpquery", &args);
    out.lines()
        .find_map(|l| l.strip_prefix("LinkState:"))
        .map(|s| s.trim_start_matches('.').to_owned())
        .unwrap_or_else(|| panic!("no LinkState in {out}"))
}

/// Every port of the topology by directed route from `host`: the four
/// CAs, and the linked ports of both switches.
const PORTS: &[(&str, Option<&str>)] = &[
    ("0", None),
    ("0,1,2", None),
    ("0,1,3,1", None),
    ("0,1,3,2", None),
    ("0,1", Some("1")),
    ("0,1", Some("2")),
    ("0,1", Some("3")),
    ("0,1,3", Some("1")),
    ("0,1,3", Some("2")),
    ("0,1,3", Some("3")),
];

fn abstract_name(name: &str) -> SocketAddr {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b).unwrap()
}

/// A control message as umad2sim builds it.
fn ctl(kind: u32, client: u32, data: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [0xdead_beefu32, client, kind, data.len() as u32] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    let mut d = [0u8; 64];
    d[..data.len()].copy_from_slice(data);
    b.extend_from_slice(&d);
    b
}

/// Sends hostile datagrams to the port's sockets; returns the answers to
/// the well-framed ones, in order.
fn hostile(sock: &str) -> Vec<u32> {
    let me = UnixDatagram::unbound().unwrap();
    me.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let own = format!("{sock}:ctl-test{}", std::process::id());
    let me_bound = UnixDatagram::bind_addr(&abstract_name(&own)).unwrap();
    me_bound
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let server = abstract_name(&format!("{sock}:ctl"));
    // Dropped without an answer: short, long, wrong magic.
    for bad in [vec![], vec![1, 2, 3], vec![0u8; 81], {
        let mut b = ctl(3, 0, &[]);
        b[0] ^= 0xff;
        b
    }] {
        me.send_to_addr(&bad, &server).unwrap();
    }
    // Refused with SIM_CTL_ERROR: an unknown type, a query for a client
    // id out of range and for a free slot, a CONNECT for a pid without
    // sockets.
    let mut info = Vec::new();
    info.extend_from_slice(&0x7fff_fff0u32.to_ne_bytes());
    info.extend_from_slice(&[0u8; 40]);
    let mut answers = Vec::new();
    for msg in [
        ctl(99, 0, &[]),
        ctl(7, 4000, &[]),
        ctl(7, 9, &[]),
        ctl(1, 0, &info),
    ] {
        me_bound.send_to_addr(&msg, &server).unwrap();
        let mut buf = [0u8; 128];
        let n = me_bound
            .recv(&mut buf)
            .expect("an answer to a framed message");
        assert_eq!(n, 80);
        answers.push(u32::from_ne_bytes(buf[8..12].try_into().unwrap()));
    }
    // Garbage on a free slot's data socket.
    for bad in [vec![0u8; 7], vec![0xffu8; 300]] {
        me.send_to_addr(&bad, &abstract_name(&format!("{sock}:out5")))
            .unwrap();
    }
    answers
}

#[test]
fn host_opensm_and_diags_run_a_guestless_fabric_through_a_sim_port() {
    need_host_tools();
    let dir = TempDir::new("fab-host-sm");
    let file = dir.join("topology.json");
    std::fs::write(&file, TOPOLOGY).unwrap();
    let run = dir.join("run");
    let _down = Down(run.clone());
    let sock = format!("ibtca-test-{}", std::process::id());
    let out = fabric(&[
        "up",
        &file.display().to_string(),
        "--run-dir",
        &run.display().to_string(),
        "--sim-port",
        &format!("host={sock}"),
    ]);
    assert!(out.status.success(), "up: {}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("host port: IBSIM_SOCKNAME={sock}")),
        "{said}"
    );
    assert!(
        said.contains("LFT set by the SM"),
        "managed switches: {said}"
    );
    let state = ibtca_fabric::state::State::load(&run).unwrap().unwrap();
    let simport = state
        .processes
        .iter()
        .find(|p| p.exe == "ibtca-simport")
        .expect("node host runs ibtca-simport");

    // Managed: before the SM, the CAs' ports wait in Init.
    assert_eq!(link_state(&sock, "0,1,2", None), "Initialize");
    assert_eq!(link_state(&sock, "0", None), "Initialize");

    let log = dir.join("opensm.log");
    opensm_once(&sock, &log, Duration::from_secs(120));

    for (path, port) in PORTS {
        assert_eq!(
            link_state(&sock, path, *port),
            "Active",
            "port at {path} {port:?}"
        );
    }

    let topo = sim_ok(&sock, "ibnetdiscover", &[]);
    let switches: Vec<&str> = topo.lines().filter(|l| l.starts_with("Switch")).collect();
    let cas: Vec<&str> = topo.lines().filter(|l| l.starts_with("Ca")).collect();
    assert_eq!(switches.len(), 2, "{topo}");
    assert_eq!(cas.len(), 4, "{topo}");
    for sw in ["\"sw0\"", "\"sw1\""] {
        assert!(switches.iter().any(|l| l.contains(sw)), "{sw} in {topo}");
    }
    for ca in ["host", "a", "b", "c"] {
        let desc = format!("\"{ca} ibtca0\"");
        assert!(cas.iter().any(|l| l.contains(&desc)), "{desc} in {topo}");
    }
    // Node b's LID, as the SM gave it: "[1](GUID) ... # lid L lmc 0 ...".
    let b_lid = topo
        .split("\n\n")
        .find(|rec| rec.contains("Ca\t1") && rec.contains("\"b ibtca0\""))
        .and_then(|rec| rec.split("# lid ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("b's LID in {topo}"))
        .to_owned();

    let ni = sim_ok(&sock, "smpquery", &["nodeinfo", &b_lid]);
    assert!(ni.contains("Channel Adapter"), "{ni}");
    assert!(ni.contains("0x1200000000010003"), "b's node GUID: {ni}");
    let pc = sim_ok(&sock, "perfquery", &[&b_lid, "1"]);
    assert!(
        pc.contains(&format!("Port counters: Lid {b_lid} port 1")),
        "{pc}"
    );

    // Hostile clients: dropped or refused, logged, and the port serves on.
    let answers = hostile(&sock);
    assert_eq!(answers, vec![0; 4], "every framed bad message refused");
    let ni = sim_ok(&sock, "smpquery", &["nodeinfo", &b_lid]);
    assert!(ni.contains("0x1200000000010003"), "{ni}");
    assert!(alive(simport.pid), "ibtca-simport survived");
    let port_log = std::fs::read_to_string(run.join("host.log")).unwrap();
    for line in [
        "malformed control message",
        "control message of an unknown type or client",
        "cannot reach the client's data socket",
        "MAD from a slot no client holds",
    ] {
        assert!(port_log.contains(line), "`{line}` in\n{port_log}");
    }
}
