//! `ibtca-hive` (no VM): two switches and two guestless CAs in one hive
//! process, the wires between them in memory; a test SM and two outside
//! nodes on Unix-socket links. The SM sweeps the hosted fabric by
//! directed routes (NodeInfo of every node, LIDs, LFTs, every port to
//! Active), then reaches a hosted CA LID-routed through both hosted
//! switches and reads its PMA; data between the two outside nodes
//! crosses both hosted switches and lands byte for byte, and so does an
//! RDMA WRITE between two ibtca devices driven by simulated guests. The
//! hive's control socket reports each hosted port's IBA counters as that
//! traffic moved them; a hosted CA sent a packet with a P_Key its table
//! lacks reports trap 257 to the SM, and a hosted switch whose port goes
//! down reports trap 128, each LID-routed through the hosted switches.
//!
//! ```text
//!  SM (LID 1) ─ 1 sw0 (2) 2 ─ h1 (4)      sw1 (3) 2 ─ h2 (5)
//!                    3 ───────────────── 1
//!  A  (LID 6) ─ 4                         3 ─ B (LID 7)
//! ```

use std::process::{Child, Command};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use ibtca_device::link::{Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_device::verbs::abi::{WC_SUCCESS, WR_RDMA_WRITE};
use ibtca_protocol::link::{Frame, Hello, LINK_PROTOCOL_VERSION};
use ibtca_protocol::mad::attr::{
    id, producer, trap, LftBlock, NodeDescription, NodeInfo, NodeType, Notice, PortInfo, PortState,
};
use ibtca_protocol::mad::{method, MadStatus, Smp, SmpRoute};
use ibtca_switch::control::request;
use ibtca_tests::fabric::{Fabric, FabricOptions};
use ibtca_tests::links::start_link;
use ibtca_tests::sim_guest::{remote, send_wqe};
use ibtca_tests::sm_client::{data_packet, data_packet_with_pkey, SmClient};
use ibtca_tests::{workspace_bin, TempDir};

const WAIT: Duration = Duration::from_secs(20);
const SW0: u64 = 0x1200_0000_00ff_0001;
const SW1: u64 = 0x1200_0000_00ff_0002;
const H1: u64 = 0x1200_0000_0000_0101;
const H2: u64 = 0x1200_0000_0000_0102;

/// The hive process, killed when dropped.
struct HiveProcess(Child);

impl Drop for HiveProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_hive(dir: &TempDir, file: serde_json::Value) -> HiveProcess {
    let path = dir.join("fabric.hive.json");
    std::fs::write(&path, file.to_string()).unwrap();
    let child = Command::new(workspace_bin("ibtca-hive"))
        .arg("--config")
        .arg(&path)
        .arg("--control")
        .arg(dir.join("hive.control"))
        .spawn()
        .expect("start ibtca-hive");
    HiveProcess(child)
}

fn start_hive(dir: &TempDir) -> HiveProcess {
    let p = |name: &str| dir.join(name).display().to_string();
    let file = serde_json::json!({
        "sm_managed": true,
        "switches": [
            { "name": "sw0", "guid": SW0, "ports": [
                format!("listen:{}", p("sm.link")), "hive:h1:1", "hive:sw1:1",
                format!("listen:{}", p("a.link")) ] },
            { "name": "sw1", "guid": SW1, "ports": [
                "hive:sw0:3", "hive:h2:1", format!("listen:{}", p("b.link")) ] }
        ],
        "cas": [
            { "name": "h1", "guid": H1, "port_guid": H1 + 0x100, "port": "hive:sw0:2" },
            { "name": "h2", "guid": H2, "port": "hive:sw1:2" }
        ]
    });
    spawn_hive(dir, file)
}

/// An outside node's bare link to a hive port, once up.
fn outside(dir: &TempDir, name: &str, lid: u16) -> (Link, Receiver<LinkEvent>) {
    let local = LocalPort {
        node_guid: 0x1200_0000_0000_0a00 + u64::from(lid),
        port: 1,
        lid,
    };
    let (link, rx) = start_link(
        LinkEndpoint::Connect(dir.join(name)),
        local,
        LinkConfig::default(),
    );
    match rx.recv_timeout(WAIT) {
        Ok(LinkEvent::Up { peer }) => assert_eq!(peer.port, if lid == 6 { 4 } else { 3 }),
        other => panic!("{name} did not come up: {other:?}"),
    }
    (link, rx)
}

fn dr(m: u8, attr: u16, modifier: u32, path: &[u8]) -> Smp {
    Smp::directed(m, attr, modifier, path).unwrap()
}

fn get(sm: &mut SmClient, attr: u16, modifier: u32, path: &[u8]) -> Smp {
    let r = sm.ask(dr(method::GET, attr, modifier, path), 0);
    assert_eq!(
        r.status,
        MadStatus::OK,
        "Get {attr:#x}.{modifier} at {path:?}"
    );
    r
}

fn set(sm: &mut SmClient, attr: u16, modifier: u32, path: &[u8], data: [u8; 64]) -> Smp {
    let mut smp = dr(method::SET, attr, modifier, path);
    smp.data = data;
    let r = sm.ask(smp, 0);
    assert_eq!(
        r.status,
        MadStatus::OK,
        "Set {attr:#x}.{modifier} at {path:?}"
    );
    r
}

/// Sets `port` of the node at `path` to LID `lid` (port 0 of a switch or
/// a CA's port) and tells it the SM's LID.
fn set_lid(sm: &mut SmClient, path: &[u8], port: u32, lid: u16) {
    let mut p = PortInfo::decode(&get(sm, id::PORT_INFO, port, path).data);
    p.lid = lid;
    p.master_sm_lid = 1;
    let r = set(sm, id::PORT_INFO, port, path, p.encode());
    assert_eq!(PortInfo::decode(&r.data).lid, lid, "LID at {path:?}");
}

fn set_state(sm: &mut SmClient, path: &[u8], port: u32, state: PortState) {
    let mut p = PortInfo::decode(&get(sm, id::PORT_INFO, port, path).data);
    p.port_state = state as u8;
    set(sm, id::PORT_INFO, port, path, p.encode());
}

fn lft(routes: &[(usize, u8)]) -> [u8; 64] {
    let mut b = [LftBlock::NO_ROUTE; 64];
    for (lid, port) in routes {
        b[*lid] = *port;
    }
    b
}

fn next_data(rx: &Receiver<LinkEvent>) -> Vec<u8> {
    loop {
        match rx.recv_timeout(WAIT) {
            Ok(LinkEvent::Packet(p)) => return p,
            Ok(_) => continue,
            Err(e) => panic!("no data packet: {e}"),
        }
    }
}

#[test]
fn an_sm_sweeps_a_hive_and_data_crosses_its_switches() {
    let dir = TempDir::new("hive");
    let _hive = start_hive(&dir);
    let mut sm = SmClient::start(LinkEndpoint::Connect(dir.join("sm.link")), 1);
    let (a, a_rx) = outside(&dir, "a.link", 6);
    let (b, b_rx) = outside(&dir, "b.link", 7);

    // Discovery: every hosted node answers NodeInfo on its directed route.
    let (sw0, h1, sw1, h2): (&[u8], &[u8], &[u8], &[u8]) = (&[1], &[1, 2], &[1, 3], &[1, 3, 2]);
    for (path, guid, ty, ports) in [
        (sw0, SW0, NodeType::Switch, 4),
        (sw1, SW1, NodeType::Switch, 3),
        (h1, H1, NodeType::Ca, 1),
        (h2, H2, NodeType::Ca, 1),
    ] {
        let n = NodeInfo::decode(&get(&mut sm, id::NODE_INFO, 0, path).data);
        assert_eq!(
            (n.node_guid, n.node_type, n.num_ports),
            (guid, ty, ports),
            "{path:?}"
        );
    }
    let n = NodeInfo::decode(&get(&mut sm, id::NODE_INFO, 0, h1).data);
    assert_eq!(n.port_guid, H1 + 0x100, "h1's own port GUID");
    let d = NodeDescription::decode(&get(&mut sm, id::NODE_DESCRIPTION, 0, h2).data);
    assert_eq!(d.0, "h2");
    // Hosted ports start Init: the SM brings them up.
    let p = PortInfo::decode(&get(&mut sm, id::PORT_INFO, 1, h1).data);
    assert_eq!(p.port_state, PortState::Init as u8);

    set_lid(&mut sm, sw0, 0, 2);
    set_lid(&mut sm, sw1, 0, 3);
    set_lid(&mut sm, h1, 1, 4);
    set_lid(&mut sm, h2, 1, 5);
    let r0 = [(1, 1), (3, 3), (4, 2), (5, 3), (6, 4), (7, 3)];
    let r1 = [(1, 1), (2, 1), (4, 1), (5, 2), (6, 1), (7, 3)];
    set(&mut sm, id::LINEAR_FORWARDING_TABLE, 0, sw0, lft(&r0));
    set(&mut sm, id::LINEAR_FORWARDING_TABLE, 0, sw1, lft(&r1));
    for state in [PortState::Armed, PortState::Active] {
        for port in 1..=4 {
            set_state(&mut sm, sw0, port, state);
        }
        for port in 1..=3 {
            set_state(&mut sm, sw1, port, state);
        }
        set_state(&mut sm, h1, 1, state);
        set_state(&mut sm, h2, 1, state);
    }
    for (path, ports) in [(sw0, 1..=4), (sw1, 1..=3), (h1, 1..=1), (h2, 1..=1)] {
        for port in ports {
            let p = PortInfo::decode(&get(&mut sm, id::PORT_INFO, port, path).data);
            assert_eq!(
                p.port_state,
                PortState::Active as u8,
                "{path:?} port {port}"
            );
        }
    }

    // LID-routed through both hosted switches to a hosted CA, and back.
    let r = sm.ask(Smp::new(SmpRoute::Lid, method::GET, id::PORT_INFO, 1), 5);
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(PortInfo::decode(&r.data).lid, 5);
    let counters = sm.port_counters(5, 1, 0xffff);
    assert!(counters.rcv_pkts > 0, "h2's PMA counts what reached it");

    // Data between the outside nodes crosses sw0 and sw1 both ways.
    let mut bytes = 0;
    for tag in 1..=3u8 {
        let sent = data_packet(6, 7, 0, tag);
        a.send(sent.clone()).unwrap();
        assert_eq!(next_data(&b_rx), sent, "A → B, packet {tag}");
        let back = data_packet(7, 6, 2, tag);
        b.send(back.clone()).unwrap();
        assert_eq!(next_data(&a_rx), back, "B → A, packet {tag}");
        bytes += sent.len();
        assert_eq!(back.len(), sent.len());
    }

    // The control socket: each hosted port's counters under their IBA
    // names. Only that data crossed A's and B's ports: 3 packets each way.
    let hive = inspect(&dir);
    for (node, port) in [("sw0", 4), ("sw1", 3)] {
        let p = &hosted(&hive, node)["ports"][port - 1];
        assert_eq!(p["state"], "Active", "{node} port {port}: {p}");
        assert_eq!(p["up"], true, "{node} port {port}: {p}");
        let c = &p["counters"];
        for name in ["PortXmitPkts", "PortRcvPkts"] {
            assert_eq!(c[name], 3, "{node} port {port} {name}: {p}");
        }
        for name in ["PortXmitData", "PortRcvData"] {
            assert_eq!(c[name], bytes / 4, "{node} port {port} {name}: {p}");
        }
    }
    let h2 = hosted(&hive, "h2");
    assert_eq!((&h2["kind"], &h2["lid"]), (&"device".into(), &5.into()));
    assert!(
        h2["ports"][0]["counters"]["PortRcvPkts"].as_u64() > Some(0),
        "{h2}"
    );

    // A packet for h1 with a P_Key h1's table lacks: h1 (LID 4) sends
    // trap 257 to the SM through sw0.
    a.send(data_packet_with_pkey(6, 4, 0, 9, 0x8001)).unwrap();
    let (notice, slid) = next_trap(&sm, trap::BAD_P_KEY);
    assert_eq!(
        (notice.producer, notice.issuer_lid, slid),
        (producer::CA, 4, 4),
        "{notice:?}"
    );
    // B's link goes away: sw1 (LID 3) sends trap 128 through sw0.
    b.stop();
    let (notice, slid) = next_trap(&sm, trap::LINK_STATE_CHANGE);
    assert_eq!(
        (notice.producer, notice.issuer_lid, slid),
        (producer::SWITCH, 3, 3),
        "{notice:?}"
    );
    let hive = inspect(&dir);
    let sw1 = hosted(&hive, "sw1");
    assert!(sw1["traps"]["sent"].as_u64() >= Some(1), "{sw1}");
    assert_eq!(sw1["ports"][2]["up"], false, "{sw1}");
    assert_eq!(sw1["ports"][2]["state"], "Down", "{sw1}");
    let h1 = hosted(&hive, "h1");
    assert_eq!(
        h1["ports"][0]["counters"]["PortRcvConstraintErrors"], 1,
        "{h1}"
    );
}

/// The hive's answer to `inspect` on its control socket.
fn inspect(dir: &TempDir) -> serde_json::Value {
    let reply = request(&dir.join("hive.control"), "inspect").expect("the control socket");
    let json = reply
        .strip_prefix("ok ")
        .unwrap_or_else(|| panic!("{reply}"));
    serde_json::from_str(json).unwrap()
}

/// Node `name` of an `inspect` answer.
fn hosted<'a>(hive: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    hive["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {hive}"))
}

/// The next SubnTrap of trap `number` the SM receives (other traps, and
/// repeats of traps already read, skipped): its Notice and the SLID.
fn next_trap(sm: &SmClient, number: u16) -> (Notice, u16) {
    loop {
        let (smp, vl, slid, dlid) = sm.next_smp();
        if smp.method != method::TRAP {
            continue;
        }
        assert_eq!((vl, dlid, smp.attr_id), (15, 1, id::NOTICE));
        let notice = Notice::decode(&smp.data);
        if notice.trap_number == number {
            return (notice, slid);
        }
    }
}

/// Reads from `s` until the hive closes it; false if it stays open.
fn closed_by_peer(mut s: std::os::unix::net::UnixStream) -> bool {
    use std::io::Read;
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn a_peer_that_breaks_the_link_protocol_is_dropped_and_the_hive_serves_the_next() {
    use std::io::Write;
    let dir = TempDir::new("hive-bad-peer");
    let _hive = start_hive(&dir);
    let path = dir.join("a.link");
    let connect = || loop {
        match std::os::unix::net::UnixStream::connect(&path) {
            Ok(s) => return s,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    // A first frame that is not a Hello (a Packet frame, type 2), then a
    // good Hello: too late, the peer is dropped.
    let hello = Frame::Hello(Hello {
        version: LINK_PROTOCOL_VERSION,
        node_guid: 0x1200_0000_0000_0bad,
        port: 1,
        lid: 9,
        features: 0,
    });
    let mut s = connect();
    let mut bytes = vec![0, 0, 0, 4, 2, 1, 2, 3, 4];
    bytes.extend(hello.to_bytes().unwrap());
    s.write_all(&bytes).unwrap();
    assert!(
        closed_by_peer(s),
        "a peer whose first frame is no Hello is dropped"
    );
    // A frame longer than any the protocol allows.
    let mut s = connect();
    s.write_all(&[0xff, 0xff, 0xff, 0xff, 2]).unwrap();
    assert!(closed_by_peer(s), "an oversized frame drops the peer");
    // The port serves a well-behaved peer next, and the SM still reaches
    // the hosted switch behind it.
    let (_a, _a_rx) = outside(&dir, "a.link", 6);
    let mut sm = SmClient::start(LinkEndpoint::Connect(dir.join("sm.link")), 1);
    let n = NodeInfo::decode(&get(&mut sm, id::NODE_INFO, 0, &[1]).data);
    assert_eq!(n.node_guid, SW0);
}

#[test]
fn an_rdma_write_between_two_devices_crosses_two_hosted_switches() {
    // No SM: the switches learn their devices' LIDs from the Hellos and
    // route to the other's across the in-memory wire.
    let dir = TempDir::new("hive-rdma");
    let p = |name: &str| dir.join(name).display().to_string();
    let file = serde_json::json!({
        "switches": [
            { "name": "sw0", "guid": SW0, "ports": [format!("listen:{}", p("n1.link")), "hive:sw1:1"],
              "routes": [[2, 2]] },
            { "name": "sw1", "guid": SW1, "ports": ["hive:sw0:2", format!("listen:{}", p("n2.link"))],
              "routes": [[1, 1]] }
        ]
    });
    let _hive = spawn_hive(&dir, file);
    let ends = vec![
        LinkEndpoint::Connect(dir.join("n1.link")),
        LinkEndpoint::Connect(dir.join("n2.link")),
    ];
    let mut f = Fabric::attached(dir, ends, FabricOptions::default());
    let (a, b) = f.two(0, 1);
    let data: Vec<u8> = (0..256 * 1024)
        .map(|i| (i as u8).wrapping_mul(29) ^ 0x5a)
        .collect();
    a.g.write(a.buf, &data);
    // 20 writes of 64 packets: more than the 1,024 credits the hive grants
    // a device per VL, so the transfer lives on the credits it returns.
    for round in 0..20u64 {
        let mut qp = a.qps[&b.lid];
        let w = remote(
            send_wqe(WR_RDMA_WRITE, round, a.buf, data.len() as u32, a.lkey),
            b.buf + 4096,
            b.rkey,
        );
        a.g.post_send(&mut qp, &w);
        a.qps.insert(b.lid, qp);
        let c =
            a.g.poll_cq(&mut a.cq, WAIT)
                .unwrap_or_else(|| panic!("write {round} never completed"));
        assert_eq!(
            (c.wr_id.to_native(), c.status),
            (round, WC_SUCCESS),
            "{c:?}"
        );
    }
    assert!(
        b.g.read(b.buf + 4096, data.len()) == data,
        "the written bytes landed"
    );
}
