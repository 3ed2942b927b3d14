//! Device instances joined through in-process switches, each driven by a
//! simulated guest with one buffer, one CQ and an RC QP to every other node:
//! the set-up of the switch tests and the switch benchmark.
//!
//! Node `i` has LID `i + 1`. Sockets live in one temporary directory.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ibtca_device::drdma::DrdmaConfig;
use ibtca_device::guid;
use ibtca_device::instance::InstanceConfig;
use ibtca_device::link::{LinkConfig, LinkEndpoint};
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_switch::{PortConfig, Switch, SwitchConfig};

use crate::pair::ALL_ACCESS;
use crate::qp_retry::Retry;
use crate::sim_guest::{Cq, PollWait, Qp, SimGuest};
use crate::{TempDir, TestServer};

/// One device with its guest and objects.
pub struct Node {
    /// The port's LID.
    pub lid: u16,
    /// The guest.
    pub g: SimGuest,
    /// Protection domain.
    pub pd: u32,
    /// Registered buffer (iova = gpa).
    pub buf: u64,
    /// Its L_Key.
    pub lkey: u32,
    /// Its R_Key.
    pub rkey: u32,
    /// The node's one CQ (send and receive, every QP).
    pub cq: Cq,
    /// RC QP to each other node, by that node's LID.
    pub qps: BTreeMap<u16, Qp>,
    /// The device; take it to make the node vanish.
    pub server: Option<TestServer>,
    qp_log: u8,
}

/// How to build a fabric.
#[derive(Debug, Clone, Copy)]
pub struct FabricOptions {
    /// Simulated RAM per guest.
    pub ram: u64,
    /// Registered buffer per guest.
    pub buf: u64,
    /// log2 CQ entries.
    pub cq_log: u8,
    /// log2 SQ/RQ entries.
    pub qp_log: u8,
    /// Busy-poll CQs (benchmarks).
    pub spin: bool,
    /// Path MTU code of every QP.
    pub mtu: u8,
    /// Create and connect a QP between every two nodes.
    pub all_to_all: bool,
    /// Every switch port records a capture, `swS-pP.pcap` in the fabric's
    /// directory ([`Fabric::capture`]).
    pub captures: bool,
    /// Every guest's ACK timeout and retries ([`Retry::PROMPT`] for
    /// tests of retransmission).
    pub retry: Retry,
    /// Every device's DRDMA window.
    pub drdma: DrdmaConfig,
}

impl Default for FabricOptions {
    fn default() -> Self {
        FabricOptions {
            ram: 8 << 20,
            buf: 1 << 20,
            cq_log: 10,
            qp_log: 6,
            spin: false,
            mtu: MTU_4096,
            all_to_all: true,
            captures: false,
            retry: Retry::default(),
            drdma: DrdmaConfig::default(),
        }
    }
}

/// Nodes and switches, all running.
pub struct Fabric {
    /// The nodes; `nodes[i].lid == i + 1`.
    pub nodes: Vec<Node>,
    /// The switches.
    pub switches: Vec<Switch>,
    /// Holds every socket.
    pub dir: TempDir,
}

/// Where a switch port goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    /// Node with this index (it connects to the port).
    Node(usize),
    /// Port `port` of switch `switch`; the lower-numbered switch listens.
    Switch {
        /// The other switch.
        switch: usize,
        /// Its port (1-based).
        port: u8,
    },
}

fn port_path(dir: &TempDir, switch: usize, port: u8) -> std::path::PathBuf {
    dir.join(&format!("sw{switch}-p{port}.link"))
}

fn capture_path(dir: &TempDir, switch: usize, port: u8) -> std::path::PathBuf {
    dir.join(&format!("sw{switch}-p{port}.pcap"))
}

impl Fabric {
    /// The capture of port `port` of switch `switch` (with
    /// [`FabricOptions::captures`]).
    pub fn capture(&self, switch: usize, port: u8) -> std::path::PathBuf {
        capture_path(&self.dir, switch, port)
    }

    /// `n` nodes on one switch (node `i` on port `i + 1`).
    pub fn star(n: usize, o: FabricOptions) -> Fabric {
        Fabric::build(n, &[(0..n).map(Attach::Node).collect()], &[Vec::new()], o)
    }

    /// Two switches in a line: nodes `0..a` on switch 0, nodes `a..a+b` on
    /// switch 1, the switches joined by their last ports.
    pub fn line(a: usize, b: usize, o: FabricOptions) -> Fabric {
        let last0 = (a + 1) as u8;
        let last1 = (b + 1) as u8;
        let mut s0: Vec<Attach> = (0..a).map(Attach::Node).collect();
        s0.push(Attach::Switch {
            switch: 1,
            port: last1,
        });
        let mut s1: Vec<Attach> = (a..a + b).map(Attach::Node).collect();
        s1.push(Attach::Switch {
            switch: 0,
            port: last0,
        });
        let lids0: Vec<(u16, u8)> = (a..a + b).map(|i| (i as u16 + 1, last0)).collect();
        let lids1: Vec<(u16, u8)> = (0..a).map(|i| (i as u16 + 1, last1)).collect();
        Fabric::build(a + b, &[s0, s1], &[lids0, lids1], o)
    }

    /// General form: `ports[s]` lists what each port of switch `s` joins,
    /// `routes[s]` the explicit routes of switch `s` (attached nodes are
    /// learned).
    pub fn build(
        n: usize,
        ports: &[Vec<Attach>],
        routes: &[Vec<(u16, u8)>],
        o: FabricOptions,
    ) -> Fabric {
        let dir = TempDir::new("fabric");
        let mut node_ep = vec![None; n];
        let mut switches = Vec::new();
        for (s, attach) in ports.iter().enumerate() {
            let mut pcs = Vec::new();
            for (i, a) in attach.iter().enumerate() {
                let port = (i + 1) as u8;
                let ep = match *a {
                    Attach::Node(k) => {
                        let path = port_path(&dir, s, port);
                        node_ep[k] = Some(LinkEndpoint::Connect(path.clone()));
                        LinkEndpoint::Listen(path)
                    }
                    Attach::Switch { switch, .. } if switch > s => {
                        LinkEndpoint::Listen(port_path(&dir, s, port))
                    }
                    Attach::Switch {
                        switch,
                        port: other,
                    } => LinkEndpoint::Connect(port_path(&dir, switch, other)),
                };
                pcs.push(PortConfig {
                    capture: o.captures.then(|| capture_path(&dir, s, port)),
                    ..PortConfig::new(ep)
                });
            }
            let cfg = SwitchConfig {
                name: format!("sw{s}"),
                guid: guid::FABRIC_SWITCH_BASE + s as u64 + 1,
                lid: 0,
                ports: pcs,
                routes: routes.get(s).cloned().unwrap_or_default(),
                link: LinkConfig::default(),
                sm_managed: false,
            };
            switches.push(Switch::start(cfg).expect("switch starts"));
        }
        Fabric::finish(dir, node_ep, switches, o)
    }

    /// Nodes whose links connect to `endpoints` (node `i` to
    /// `endpoints[i]`, LID `i + 1`), served by switches that run elsewhere
    /// (an `ibtca-hive`); `dir` holds the nodes' sockets.
    pub fn attached(dir: TempDir, endpoints: Vec<LinkEndpoint>, o: FabricOptions) -> Fabric {
        let node_ep = endpoints.into_iter().map(Some).collect();
        Fabric::finish(dir, node_ep, Vec::new(), o)
    }

    /// Starts the nodes, waits until every port is Active, connects QPs.
    fn finish(
        dir: TempDir,
        node_ep: Vec<Option<LinkEndpoint>>,
        switches: Vec<Switch>,
        o: FabricOptions,
    ) -> Fabric {
        let mut nodes = Vec::new();
        for (k, ep) in node_ep.into_iter().enumerate() {
            let lid = k as u16 + 1;
            let cfg = InstanceConfig {
                lid,
                node_guid: guid::FABRIC_NODE_BASE + u64::from(lid),
                port_guid: guid::FABRIC_NODE_BASE + u64::from(lid),
                link: Some(ep.expect("every node is attached to a switch port")),
                drdma: o.drdma,
                vl: Default::default(),
                ..InstanceConfig::default()
            };
            let server = TestServer::start_instance(TempDir::new_in(Some(&dir.0), "node"), cfg);
            nodes.push(node(lid, server, &o));
        }
        for nd in &mut nodes {
            let deadline = Instant::now() + Duration::from_secs(20);
            while nd.g.client.read32(0, regs::PORT_STATE) != regs::PORT_ACTIVE {
                assert!(Instant::now() < deadline, "LID {} never came up", nd.lid);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        // A node is Active once the switch's Hello reached it, maybe before
        // the switch has read the node's: wait for every switch port up on
        // the switch's side too (then it knows the route to its peer).
        for sw in &switches {
            let deadline = Instant::now() + Duration::from_secs(20);
            while let Some(p) = (1..=sw.ports())
                .filter_map(|p| u8::try_from(p).ok())
                .find(|&p| !sw.is_port_up(p))
            {
                assert!(
                    Instant::now() < deadline,
                    "{} port {p} never came up",
                    sw.name()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let mut f = Fabric {
            nodes,
            switches,
            dir,
        };
        if o.all_to_all {
            f.connect_all(o.mtu);
        }
        f
    }

    /// Creates and connects a QP between every two nodes.
    pub fn connect_all(&mut self, mtu: u8) {
        let n = self.nodes.len();
        for i in 0..n {
            for j in i + 1..n {
                self.connect(i, j, mtu);
            }
        }
    }

    /// Creates and connects a QP between nodes `i` and `j`.
    pub fn connect(&mut self, i: usize, j: usize, mtu: u8) {
        let (a, b) = self.two(i, j);
        let qa = a.new_qp(b.lid);
        let qb = b.new_qp(a.lid);
        a.g.connect(&qa, b.lid, qb.qpn, mtu, ALL_ACCESS);
        b.g.connect(&qb, a.lid, qa.qpn, mtu, ALL_ACCESS);
    }

    /// Two nodes at once, mutably.
    pub fn two(&mut self, a: usize, b: usize) -> (&mut Node, &mut Node) {
        assert_ne!(a, b);
        if a < b {
            let (x, y) = self.nodes.split_at_mut(b);
            (&mut x[a], &mut y[0])
        } else {
            let (x, y) = self.nodes.split_at_mut(a);
            (&mut y[0], &mut x[b])
        }
    }
}

impl Node {
    fn new_qp(&mut self, peer: u16) -> Qp {
        let log = self.qp_log;
        let qp = self.g.create_qp(self.pd, &self.cq, &self.cq, log);
        self.qps.insert(peer, qp);
        qp
    }
}

fn node(lid: u16, server: TestServer, o: &FabricOptions) -> Node {
    let mut g = SimGuest::new(&server.socket, o.ram);
    g.retry = o.retry;
    if o.spin {
        g.set_poll_wait(PollWait::Spin);
    }
    let pd = g.create_pd();
    let buf = g.alloc(o.buf, 4096);
    let (lkey, rkey) = g.reg_mr(pd, buf, o.buf, ALL_ACCESS);
    let cq = g.create_cq(o.cq_log);
    Node {
        lid,
        g,
        pd,
        buf,
        lkey,
        rkey,
        cq,
        qps: BTreeMap::new(),
        server: Some(server),
        qp_log: o.qp_log,
    }
}
