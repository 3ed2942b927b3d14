//! The hive's loop on a thread as `ibtca-hive` runs it. With a host port:
//! a request the fabric drops comes back with status 110 in the same
//! turn, one that went to a node outside keeps waiting. With a node
//! outside: a hosted switch checks the CRCs of what a socket wire brings.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ibtca_link::{Link, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::encoded;
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, smp_of_packet, smp_packet, Smp, SmpRoute, PERMISSIVE_LID};
use ibtca_protocol::PacketView;
use ibtca_simport::client::SimClient;
use ibtca_simport::port::PortCounts;
use ibtca_simport::wire::STATUS_TIMED_OUT;

use super::{Hive, Node, READ_AHEAD_TURNS};
use crate::HiveConfig;

/// How long a test waits for what must come; only a broken hive makes
/// it wait that long.
const WAIT: Duration = Duration::from_secs(120);

/// A client of the host port of base name `base`, as umad2sim makes one.
struct Client {
    sim: SimClient,
}

impl Client {
    fn connect(base: &str) -> Client {
        Client {
            sim: SimClient::connect(base, WAIT).unwrap(),
        }
    }

    /// A directed-route NodeInfo Get along `path` (the ports out of the
    /// host port, then out of each switch).
    fn get_node_info(&self, tid: u64, path: &[u8]) {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, path).unwrap();
        smp.tid = tid;
        self.sim.send_smp(PERMISSIVE_LID, &smp).unwrap();
    }

    /// The next MAD: (TID, status, the SMP).
    fn recv(&self) -> (u64, u32, Smp) {
        let r = self.sim.recv().expect("an answer");
        let smp = Smp::parse(&r.mad).unwrap();
        (smp.tid, r.envelope.status, smp)
    }
}

/// sw0: port 1 the host port, 2 CA h1, 3 a node outside (`listen`), 4 CA h2.
fn config(base: &str, outside: &Path) -> HiveConfig {
    let text = format!(
        r#"{{ "switches": [ {{ "name": "sw0", "guid": 256, "lid": 1, "ports":
              ["hive:host:1", "hive:h1:1", "listen:{}", "hive:h2:1"] }} ],
            "cas": [ {{ "name": "host", "guid": 119, "lid": 5, "port": "hive:sw0:1", "sim": "{base}" }},
                     {{ "name": "h1", "guid": 17, "lid": 6, "port": "hive:sw0:2" }},
                     {{ "name": "h2", "guid": 18, "lid": 7, "port": "hive:sw0:4" }} ],
            "sm_managed": false }}"#,
        outside.display()
    );
    HiveConfig::parse(&text).unwrap()
}

/// An empty directory of this test process for test `what`, and its
/// name (the host port's base name where a test has one).
fn fresh_dir(what: &str) -> (String, PathBuf) {
    let base = format!("ibtca-hive-{what}-{}", std::process::id());
    let dir = std::env::temp_dir().join(&base);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    (base, dir)
}

fn host_port_counts(hive: &Hive) -> PortCounts {
    let Node::Sim(sim) = &hive.nodes[hive.sims[0]] else {
        unreachable!()
    };
    sim.counters().port
}

/// The port of the test's node outside the hive.
const OUTSIDE_PORT: LocalPort = LocalPort {
    node_guid: 0x99,
    port: 1,
    lid: 0,
};

/// Runs `hive` on its own thread until a byte arrives on the returned
/// stream; the thread gives the hive back.
fn run_in_thread(mut hive: Hive) -> (std::thread::JoinHandle<Hive>, UnixStream) {
    let (stop_rx, stop_tx) = UnixStream::pair().unwrap();
    let running = std::thread::spawn(move || {
        hive.run(stop_rx.as_raw_fd()).unwrap();
        hive
    });
    (running, stop_tx)
}

/// Stops the loop [`run_in_thread`] started and takes the hive back.
fn stop(running: std::thread::JoinHandle<Hive>, mut stop_tx: UnixStream) -> Hive {
    use std::io::Write;
    stop_tx.write_all(&[1]).unwrap();
    running.join().unwrap()
}

/// Waits until the status file says sw0's port `port` (a wire outside) is
/// up.
fn wait_outside_up(status: &Path, port: usize) {
    wait_up(status, "sw0", port);
}

/// Waits until the status file says `node`'s port `port` is up.
fn wait_up(status: &Path, node: &str, port: usize) {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let up = std::fs::read_to_string(status)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["nodes"][node]["ports"][port - 1]["up"] == true);
        if up {
            return;
        }
        assert!(
            std::time::Instant::now() < until,
            "the outside wire never came up"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_dropped_request_comes_back_timed_out_at_once_and_one_outside_waits() {
    let (base, dir) = fresh_dir("stranded");
    let outside: PathBuf = dir.join("outside.link");
    let status = dir.join("status.json");
    let mut hive = Hive::new(&config(&base, &outside)).unwrap();
    hive.set_status_file(status.clone());
    hive.set_link("sw0", "4", false).unwrap();
    // Only the hive's own answer can bring a request back in this test.
    for &node in &hive.sims {
        if let Node::Sim(sim) = &mut hive.nodes[node] {
            sim.set_request_timeout(Duration::from_secs(24 * 3600));
        }
    }
    let (running, stop_tx) = run_in_thread(hive);
    // A node outside that never answers.
    let local = OUTSIDE_PORT;
    let peer = Link::start(LinkEndpoint::Connect(outside), local, |_| {}).unwrap();
    wait_outside_up(&status, 3);

    let client = Client::connect(&base);
    client.get_node_info(1, &[1, 2]);
    let (tid, st, smp) = client.recv();
    assert_eq!((tid, st, smp.method), (1, 0, method::GET_RESP));
    assert_eq!(&smp.data[12..20], &17u64.to_be_bytes(), "h1's NodeGUID");

    // Out to the node outside, then into the downed link: the second
    // comes back first, with 110, and alone.
    client.get_node_info(2, &[1, 3]);
    client.get_node_info(3, &[1, 4]);
    let (tid, st, _) = client.recv();
    assert_eq!((tid, st), (3, STATUS_TIMED_OUT));
    client.sim.data().set_nonblocking(true).unwrap();
    let mut buf = [0u8; 1024];
    assert!(
        client.sim.data().recv(&mut buf).is_err(),
        "the request outside still waits"
    );

    let hive = stop(running, stop_tx);
    peer.stop();
    let c = host_port_counts(&hive);
    assert_eq!((c.undeliverable, c.timed_out), (1, 0), "{c:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupted_smp_from_a_socket_wire_is_dropped_as_crc_error_at_a_hosted_switch() {
    let (_, dir) = fresh_dir("crc");
    let outside: PathBuf = dir.join("outside.link");
    let status = dir.join("status.json");
    // sw0: port 1 a node outside (the requester), port 2 CA h1.
    let text = format!(
        r#"{{ "switches": [ {{ "name": "sw0", "guid": 256, "lid": 1, "ports":
              ["listen:{}", "hive:h1:1"] }} ],
            "cas": [ {{ "name": "h1", "guid": 17, "lid": 6, "port": "hive:sw0:2" }} ],
            "sm_managed": false }}"#,
        outside.display()
    );
    let mut hive = Hive::new(&HiveConfig::parse(&text).unwrap()).unwrap();
    hive.set_status_file(status.clone());
    let (running, stop_tx) = run_in_thread(hive);
    let local = OUTSIDE_PORT;
    let (answers, answered) = std::sync::mpsc::channel();
    let (ups, up) = std::sync::mpsc::channel();
    let peer = Link::start(LinkEndpoint::Connect(outside), local, move |ev| match ev {
        LinkEvent::Packet(p) => {
            let _ = answers.send(p);
        }
        LinkEvent::Up { .. } => {
            let _ = ups.send(());
        }
        LinkEvent::Down { .. } => {}
    })
    .unwrap();
    // Up at both ends: the hive's switch port, and the link that sends.
    wait_outside_up(&status, 1);
    up.recv_timeout(WAIT).expect("the outside link up");

    // DR NodeInfo Gets for h1 (out of the requester's port 1, then sw0's
    // port 2), as the requester sends them. The first has one MAD bit
    // flipped behind a fresh VCRC: only its ICRC tells, as a hostile peer
    // could send it. The second is intact; its answer comes after the
    // first was dealt with (one stream, in order).
    let packet = |tid: u64| {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1, 2]).unwrap();
        smp.tid = tid;
        smp.hop_ptr = 1;
        smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap()
    };
    let mut bad = packet(1);
    let at = bad.len() - 100;
    bad[at] ^= 0x10;
    encoded::restamp_vcrc(&mut bad);
    peer.send(bad).unwrap();
    peer.send(packet(2)).unwrap();
    let answer = answered.recv_timeout(WAIT).expect("an answer");
    let smp = smp_of_packet(&PacketView::parse(&answer).unwrap()).unwrap();
    assert_eq!((smp.tid, smp.method), (2, method::GET_RESP));
    assert_eq!(&smp.data[12..20], &17u64.to_be_bytes(), "h1's NodeGUID");

    let hive = stop(running, stop_tx);
    peer.stop();
    assert!(answered.try_recv().is_err(), "one answer only");
    let Node::Switch(sw, _) = &hive.nodes[0] else {
        unreachable!()
    };
    let stats = sw.port_stats(1).unwrap();
    assert_eq!(stats.drop_crc_error, 1, "{stats:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_hosted_switchs_ports_to_hosted_nodes_are_in_process_and_its_socket_port_is_not() {
    use ibtca_switch::Wires;
    let (base, dir) = fresh_dir("in-process");
    let mut hive = Hive::new(&config(&base, &dir.join("outside.link"))).unwrap();
    // Ports: the host port, h1, a node outside, h2 (`config`).
    let in_process = |hive: &Hive| {
        let Node::Switch(_, outbox) = &hive.nodes[0] else {
            unreachable!()
        };
        (1..=4).map(|p| outbox.in_process(p)).collect::<Vec<bool>>()
    };
    assert_eq!(in_process(&hive), [true, true, false, true]);
    // A switch powered off and on again is a new one, marked the same.
    hive.set_switch_power("sw0", false).unwrap();
    hive.set_switch_power("sw0", true).unwrap();
    assert_eq!(in_process(&hive), [true, true, false, true]);
    drop(hive);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node outside the hive on the link at `path`: its link, and the
/// packets it receives.
fn outside(path: &Path, lid: u16) -> (Link, std::sync::mpsc::Receiver<Vec<u8>>) {
    let (packets, received) = std::sync::mpsc::channel();
    let (ups, up) = std::sync::mpsc::channel();
    let local = LocalPort {
        lid,
        ..OUTSIDE_PORT
    };
    let link = Link::start(
        LinkEndpoint::Connect(path.to_owned()),
        local,
        move |ev| match ev {
            LinkEvent::Packet(p) => {
                let _ = packets.send(p);
            }
            LinkEvent::Up { .. } => {
                let _ = ups.send(());
            }
            LinkEvent::Down { .. } => {}
        },
    )
    .unwrap();
    up.recv_timeout(WAIT).expect("the outside link up");
    (link, received)
}

#[test]
fn an_smp_built_in_the_hive_leaves_on_a_wire_with_both_crcs_right() {
    let (_, dir) = fresh_dir("stamped");
    let (a_path, b_path) = (dir.join("a.link"), dir.join("b.link"));
    let status = dir.join("status.json");
    // Node A outside (LID 9) on sw0's port 1, CA h1 on its port 2; CA h2
    // cabled straight to node B outside.
    let text = format!(
        r#"{{ "switches": [ {{ "name": "sw0", "guid": 256, "lid": 1, "routes": [[9, 1]],
              "ports": ["listen:{}", "hive:h1:1"] }} ],
            "cas": [ {{ "name": "h1", "guid": 17, "lid": 6, "port": "hive:sw0:2" }},
                     {{ "name": "h2", "guid": 18, "lid": 7, "port": "listen:{}" }} ],
            "sm_managed": false }}"#,
        a_path.display(),
        b_path.display()
    );
    let mut hive = Hive::new(&HiveConfig::parse(&text).unwrap()).unwrap();
    hive.set_status_file(status.clone());
    let (running, stop_tx) = run_in_thread(hive);
    let (a, from_a) = outside(&a_path, 9);
    let (b, from_b) = outside(&b_path, 10);
    wait_up(&status, "sw0", 1);
    wait_up(&status, "h2", 1);

    // A asks h1 by LID: h1 builds its answer for sw0, in the hive, and
    // sw0 sends it on to A by its route. B asks h2 on their one hop:
    // h2's answer goes straight onto the wire.
    let mut get = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    get.tid = 1;
    a.send(smp_packet(&get, 9, 6).build().unwrap()).unwrap();
    let mut dr = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    dr.tid = 2;
    dr.hop_ptr = 1;
    b.send(
        smp_packet(&dr, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap(),
    )
    .unwrap();
    for (received, tid, guid) in [(&from_a, 1, 17u64), (&from_b, 2, 18)] {
        let answer = received.recv_timeout(WAIT).expect("an answer");
        // A full parse checks the VCRC and the ICRC.
        let view = PacketView::parse(&answer).expect("both CRCs right");
        let smp = smp_of_packet(&view).unwrap();
        assert_eq!((smp.tid, smp.method), (tid, method::GET_RESP));
        assert_eq!(&smp.data[12..20], &guid.to_be_bytes());
    }

    stop(running, stop_tx);
    a.stop();
    b.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The host port (base name `base`), then sw0, sw1, sw2 in a line (port
/// 1 toward the host port, port 2 away from it), then CA h1.
fn line_of_three(base: &str) -> HiveConfig {
    let text = format!(
        r#"{{ "switches": [
              {{ "name": "sw0", "guid": 256, "lid": 1, "ports": ["hive:host:1", "hive:sw1:1"] }},
              {{ "name": "sw1", "guid": 257, "lid": 2, "ports": ["hive:sw0:2", "hive:sw2:1"] }},
              {{ "name": "sw2", "guid": 258, "lid": 3, "ports": ["hive:sw1:2", "hive:h1:1"] }} ],
            "cas": [ {{ "name": "host", "guid": 119, "lid": 5, "port": "hive:sw0:1", "sim": "{base}" }},
                     {{ "name": "h1", "guid": 17, "lid": 6, "port": "hive:sw2:2" }} ],
            "sm_managed": false }}"#
    );
    HiveConfig::parse(&text).unwrap()
}

/// The hive of [`line_of_three`] for test `what`, its loop on a thread
/// ([`run_in_thread`]) and a client attached to its host port: (the
/// test's directory, the thread, its stop stream, the client).
fn line_of_three_running(
    what: &str,
) -> (PathBuf, std::thread::JoinHandle<Hive>, UnixStream, Client) {
    let (base, dir) = fresh_dir(what);
    let hive = Hive::new(&line_of_three(&base)).unwrap();
    let (running, stop_tx) = run_in_thread(hive);
    (dir, running, stop_tx, Client::connect(&base))
}

#[test]
fn a_clients_waiting_mads_are_read_after_each_answer_without_a_poll_up_to_the_bound() {
    let (dir, running, stop_tx, client) = line_of_three_running("ahead");
    let hive = stop(running, stop_tx);
    // Twenty requests wait in the client's socket before the loop runs
    // again: it polls for the first, then reads the next after each
    // answer, READ_AHEAD_TURNS in a row, then polls again.
    let n = 20u64;
    let turns = READ_AHEAD_TURNS as u64;
    assert!(n > turns + 1, "the bound is reached");
    for tid in 1..=n {
        client.get_node_info(tid, &[1, 2, 2, 2]);
    }
    let (running, stop_tx) = run_in_thread(hive);
    for tid in 1..=n {
        let (got, status, smp) = client.recv();
        assert_eq!((got, status, smp.method), (tid, 0, method::GET_RESP));
        assert_eq!(&smp.data[12..20], &17u64.to_be_bytes(), "h1's NodeGUID");
    }
    let hive = stop(running, stop_tx);
    let Node::Sim(sim) = &hive.nodes[hive.sims[0]] else {
        unreachable!()
    };
    let reads = sim.counters().reads;
    assert_eq!(reads.mads, n);
    let polled = n.div_ceil(turns + 1);
    assert_eq!(reads.ahead, n - polled, "all but those a poll found");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_directed_smp_goes_through_the_hosted_switches_of_its_path_in_one_call() {
    let (dir, running, stop_tx, client) = line_of_three_running("at-once");
    // To h1 through all three switches, then to sw2 through two.
    for (tid, path, guid) in [(1, &[1, 2, 2, 2][..], 17u64), (2, &[1, 2, 2], 258)] {
        client.get_node_info(tid, path);
        let (got, status, smp) = client.recv();
        assert_eq!((got, status, smp.method), (tid, 0, method::GET_RESP));
        assert_eq!(&smp.data[12..20], &guid.to_be_bytes(), "the NodeGUID");
    }
    let hive = stop(running, stop_tx);
    // Passed at once: sw0, sw1, sw2 out and back; sw0, sw1 out and back
    // (sw2 answered the second itself).
    assert_eq!(hive.passed_at_once(), 10);
    // Packets in and out by ports 1 and 2, and SMPs served (passed on or
    // answered): the counters the switches keep when they send.
    for (node, by_port, served) in [(0, [2, 2], 4), (1, [2, 2], 4), (2, [2, 1], 3)] {
        let Node::Switch(sw, _) = &hive.nodes[node] else {
            unreachable!()
        };
        for (port, n) in (1..=2).zip(by_port) {
            let s = sw.port_stats(port).unwrap();
            assert_eq!((s.rx_packets, s.tx_packets), (n, n), "sw{node} port {port}");
        }
        assert_eq!(sw.sma_counts().0, served, "sw{node}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
