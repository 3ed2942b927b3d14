//! The hive's loop with a host port, on a thread as `ibtca-hive` runs it:
//! a request the fabric drops comes back with status 110 in the same
//! turn, one that went to a node outside keeps waiting.

use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ibtca_link::{Link, LinkEndpoint, LocalPort};
use ibtca_protocol::mad::attr::id;
use ibtca_protocol::mad::{method, Smp, PERMISSIVE_LID};
use ibtca_simport::port::PortCounts;
use ibtca_simport::wire::{ClientInfo, Ctl, CtlType, SimRequest, REQUEST_LEN, STATUS_TIMED_OUT};

use super::{Hive, Node};
use crate::HiveConfig;

/// How long a test waits for what must come; only a broken hive makes
/// it wait that long.
const WAIT: Duration = Duration::from_secs(120);

fn addr(name: &str) -> SocketAddr {
    let mut b = name.as_bytes().to_vec();
    b.push(0);
    SocketAddr::from_abstract_name(&b).unwrap()
}

/// A client of the host port of base name `base`, as umad2sim makes one.
struct Client {
    data: UnixDatagram,
}

impl Client {
    fn connect(base: &str) -> Client {
        let pid = std::process::id();
        let data = UnixDatagram::bind_addr(&addr(&format!("{base}:in{pid}"))).unwrap();
        let ctl = UnixDatagram::bind_addr(&addr(&format!("{base}:ctl{pid}"))).unwrap();
        ctl.set_read_timeout(Some(WAIT)).unwrap();
        let connect = Ctl::connect(&ClientInfo {
            id: pid,
            qp: 0,
            issm: false,
            node_id: String::new(),
        });
        ctl.send_to_addr(&connect.to_bytes(), &addr(&format!("{base}:ctl")))
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = ctl.recv(&mut buf).unwrap();
        let answer = Ctl::parse(&buf[..n]).unwrap();
        assert_eq!(answer.kind, CtlType::Connect.to_wire());
        data.connect_addr(&addr(&format!("{base}:out{}", answer.client_id)))
            .unwrap();
        data.set_read_timeout(Some(WAIT)).unwrap();
        Client { data }
    }

    /// A directed-route NodeInfo Get along `path` (the ports out of the
    /// host port, then out of each switch).
    fn get_node_info(&self, tid: u64, path: &[u8]) {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, path).unwrap();
        smp.tid = tid;
        let req = SimRequest::smp(PERMISSIVE_LID, smp.to_bytes());
        self.data.send(&req.to_bytes()).unwrap();
    }

    /// The next MAD: (TID, status, the SMP).
    fn recv(&self) -> (u64, u32, Smp) {
        let mut buf = [0u8; 1024];
        let n = self.data.recv(&mut buf).expect("an answer");
        assert_eq!(n, REQUEST_LEN);
        let r = SimRequest::parse(&buf[..n]).unwrap();
        let smp = Smp::parse(&r.mad).unwrap();
        (smp.tid, r.status, smp)
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

fn host_port_counts(hive: &Hive) -> PortCounts {
    let Node::Sim(sim) = &hive.nodes[hive.sims[0]] else {
        unreachable!()
    };
    sim.counters().port
}

/// Waits until the status file says sw0's port 3 (the wire outside) is up.
fn wait_outside_up(status: &Path) {
    let until = std::time::Instant::now() + WAIT;
    loop {
        let up = std::fs::read_to_string(status)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|v| v["nodes"]["sw0"]["ports"][2]["up"] == true);
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
    let pid = std::process::id();
    let base = format!("ibtca-hive-stranded-{pid}");
    let dir = std::env::temp_dir().join(&base);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
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
    let (stop_rx, mut stop_tx) = UnixStream::pair().unwrap();
    let running = std::thread::spawn(move || {
        hive.run(stop_rx.as_raw_fd()).unwrap();
        hive
    });
    // A node outside that never answers.
    let local = LocalPort {
        node_guid: 0x99,
        port: 1,
        lid: 0,
    };
    let peer = Link::start(LinkEndpoint::Connect(outside), local, |_| {}).unwrap();
    wait_outside_up(&status);

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
    client.data.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 1024];
    assert!(
        client.data.recv(&mut buf).is_err(),
        "the request outside still waits"
    );

    use std::io::Write;
    stop_tx.write_all(&[1]).unwrap();
    let hive = running.join().unwrap();
    peer.stop();
    let c = host_port_counts(&hive);
    assert_eq!((c.undeliverable, c.timed_out), (1, 0), "{c:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
