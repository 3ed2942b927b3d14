//! The hive: every hosted node, the wires between them, and the event
//! loop that carries them all on one thread.
//!
//! A packet a node sends on a port whose peer is hosted too goes into the
//! hive's work queue and reaches that peer's node on the next turn of the
//! loop (no socket, no copy); one whose peer is outside goes to that
//! port's [`SocketWire`]. A directed SMP goes through the hosted switches
//! that only pass it on in one call (`Hive::carry`). Hosted nodes build
//! SMPs for one another with their ICRC and VCRC zero (no node here reads
//! them); one that leaves on a socket wire is stamped there
//! (`encoded::stamp_unstamped`), whichever node sends it out. The loop
//! drains the work queue, writes what the socket wires have pending, then
//! waits in `poll(2)` until a socket is ready, a timer of a wire is due (a
//! connect retry, a `Hello` timeout) or the stop descriptor is readable:
//! first polling without sleeping for an adaptive idle budget, then asleep
//! ([`idle_wait`]). An idle hive whose wires are all up sleeps with no
//! timeout at all.
//!
//! The work queue is bounded ([`WORK_LIMIT`]): a forwarding loop among
//! hosted switches (an LFT that sends a packet round in circles) costs
//! CPU while it lasts, as it would on wires, but no unbounded memory;
//! packets beyond the limit are dropped and counted.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibtca_link::{LinkEvent, LocalPort};
use ibtca_protocol::encoded;
use ibtca_switch::{HostedSwitch, Origin, PortConfig, SwitchConfig, Wires};

use crate::ca::HostedCa;
use crate::config::{HiveConfig, SwitchSpec, WireSpec};
use crate::control::ControlSocket;
use crate::sim::HostedSim;
use crate::socket_wire::SocketWire;

pub mod idle_wait;
mod outages;
mod outbox;
mod peers;
mod stranded;

use idle_wait::{IdleWait, RealSys};
use outbox::{Outbox, Sent};
use peers::{Peer, Peers};

/// Events the work queue holds at most.
pub const WORK_LIMIT: usize = 1 << 16;

/// Turns in a row the event loop may read a host port client's next MAD
/// ahead, without a `poll(2)` (`HostedSim::read_ahead`); then it polls,
/// so its other sockets (wires, the control socket, the stop pipe, other
/// clients) wait at most this many MADs' work.
pub const READ_AHEAD_TURNS: usize = 16;

/// One port of one hosted node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRef {
    /// Index of the node (switches first, then CAs, in file order).
    pub node: usize,
    /// Port number (1-based).
    pub port: u8,
}

/// Packets the hive dropped between hosted nodes, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drops {
    /// Sent on a port wired to nothing.
    pub unwired: u64,
    /// Sent on a wire the control socket took down.
    pub cut: u64,
    /// Sent to a switch without power.
    pub unpowered: u64,
    /// Refused by a hosted switch on a port whose link is down.
    pub link_down: u64,
    /// Over the work queue's limit ([`WORK_LIMIT`]).
    pub queue_full: u64,
}

/// One hosted node.
enum Node {
    Switch(HostedSwitch, Arc<Outbox>),
    Ca(HostedCa),
    Sim(Box<HostedSim>),
}

/// Every hosted node and wire.
pub struct Hive {
    nodes: Vec<Node>,
    names: HashMap<String, usize>,
    /// Where each port's wire goes.
    peers: Peers,
    sockets: Vec<(PortRef, SocketWire)>,
    /// Events for hosted nodes, each with where it comes from: a packet
    /// read from a socket wire is [`Origin::Wire`] (a hosted switch checks
    /// its CRCs), one a hosted node sent is [`Origin::Process`].
    work: VecDeque<(PortRef, LinkEvent, Origin)>,
    /// The buffer a hosted switch's sent packets are taken into, turn by
    /// turn with the one its [`Outbox`] sends into ([`Sent`]).
    sent: Vec<(u8, Vec<u8>)>,
    /// What every hosted switch sends into ([`outbox`]).
    switch_sent: Arc<Sent>,
    /// Events dropped with the work queue full.
    pub work_dropped: u64,
    /// Hops packets took through hosted switches that passed them on at
    /// once ([`Hive::carry`]), with no turn of the work queue.
    passed_at_once: u64,
    /// Packets dropped on in-memory wires, by reason.
    drops: Drops,
    /// The host ports' nodes.
    sims: Vec<usize>,
    /// Node names, in node order.
    node_names: Vec<String>,
    /// `up[node][port - 1]`: the port's link is up.
    up: Vec<Vec<bool>>,
    /// Where [`crate::status`] is written, and whether it is out of date.
    status: Option<(std::path::PathBuf, bool)>,
    /// Nodes (switches, CAs) with a trap outstanding.
    trapping: BTreeSet<usize>,
    /// The control socket ([`crate::control`]), if one was asked for.
    control: Option<ControlSocket>,
    /// In-memory wires taken down by the control socket's `link` (both
    /// ends): nothing crosses them until `link ... up`.
    cut: BTreeSet<(usize, u8)>,
    /// The hosted switches as the file gives them, to power one on again
    /// ([`outages`]).
    switch_specs: Vec<SwitchSpec>,
    sm_managed: bool,
    /// Switches powered off by the control socket's `switch NODE down`,
    /// each with the in-memory wires that took down (both ends cut).
    off: BTreeMap<usize, Vec<u8>>,
    /// How the loop waits for its next event ([`idle_wait`]).
    idle: IdleWait,
}

impl Hive {
    /// Builds every node, binds listen endpoints and brings the in-memory
    /// wires up (their `Up` events are the first work).
    pub fn new(cfg: &HiveConfig) -> Result<Hive, String> {
        let mut nodes = Vec::new();
        let switch_sent = Arc::new(Sent::default());
        for s in &cfg.switches {
            nodes.push(switch_node(s, cfg.sm_managed, &switch_sent)?);
        }
        let mut sims = Vec::new();
        for c in &cfg.cas {
            match &c.sim {
                None => nodes.push(Node::Ca(HostedCa::new(c, cfg.sm_managed))),
                Some(base) => {
                    let sim = HostedSim::new(c, base, cfg.sm_managed)
                        .map_err(|e| format!("CA {}: host port {base}: {e}", c.name))?;
                    sims.push(nodes.len());
                    nodes.push(Node::Sim(Box::new(sim)));
                }
            }
        }
        let names: HashMap<String, usize> = cfg
            .nodes()
            .enumerate()
            .map(|(i, (name, _))| (name.to_owned(), i))
            .collect();
        let mut hive = Hive {
            nodes,
            names,
            peers: Peers::default(),
            sockets: Vec::new(),
            work: VecDeque::new(),
            sent: Vec::new(),
            switch_sent,
            work_dropped: 0,
            passed_at_once: 0,
            drops: Drops::default(),
            sims,
            node_names: cfg.nodes().map(|(n, _)| n.to_owned()).collect(),
            up: cfg.nodes().map(|(_, w)| vec![false; w.len()]).collect(),
            status: None,
            trapping: BTreeSet::new(),
            control: None,
            cut: BTreeSet::new(),
            switch_specs: cfg.switches.clone(),
            sm_managed: cfg.sm_managed,
            off: BTreeMap::new(),
            idle: IdleWait::new(Duration::ZERO),
        };
        let specs: Vec<Vec<WireSpec>> = cfg.nodes().map(|(_, w)| w.to_vec()).collect();
        for (node, wires) in specs.iter().enumerate() {
            let mut peers = Vec::with_capacity(wires.len());
            for (i, wire) in wires.iter().enumerate() {
                let here = PortRef {
                    node,
                    port: u8::try_from(i + 1).unwrap_or(u8::MAX),
                };
                peers.push(match wire {
                    WireSpec::None => Peer::None,
                    WireSpec::Hive(name, port) => Peer::Hive(PortRef {
                        node: hive.names[name.as_str()],
                        port: *port,
                    }),
                    WireSpec::Socket(endpoint) => {
                        let wire = SocketWire::new(endpoint, hive.local(here))
                            .map_err(|e| format!("{}: {e}", endpoint))?;
                        hive.sockets.push((here, wire));
                        Peer::Socket(hive.sockets.len() - 1)
                    }
                });
            }
            hive.peers.push_node(peers)?;
        }
        for node in 0..hive.nodes.len() {
            hive.mark_in_process(node);
            for (i, peer) in hive.peers.of(node).into_iter().enumerate() {
                if let Peer::Hive(other) = peer {
                    let here = PortRef {
                        node,
                        port: u8::try_from(i + 1).unwrap_or(u8::MAX),
                    };
                    let peer = hive.local(other);
                    hive.work
                        .push_back((here, LinkEvent::Up { peer }, Origin::Process));
                }
            }
        }
        Ok(hive)
    }

    /// Marks the ports of `node`, if a switch, whose peers are hosted:
    /// every hosted node takes what the hive carries as built here, its
    /// CRCs unread ([`Wires::in_process`]).
    fn mark_in_process(&self, node: usize) {
        let Node::Switch(_, outbox) = &self.nodes[node] else {
            return;
        };
        for (i, peer) in self.peers.of(node).into_iter().enumerate() {
            if let Peer::Hive(_) = peer {
                outbox.set_in_process(u8::try_from(i + 1).unwrap_or(u8::MAX));
            }
        }
    }

    /// What port `at` says of itself in a `Hello`.
    fn local(&self, at: PortRef) -> LocalPort {
        match &self.nodes[at.node] {
            Node::Switch(sw, _) => LocalPort {
                node_guid: sw.guid(),
                port: at.port,
                lid: sw.hello_lid(),
            },
            Node::Ca(ca) => ca.local(),
            Node::Sim(sim) => sim.local(),
        }
    }

    /// Polls for up to `limit` (adaptively, [`idle_wait`]) before the
    /// loop sleeps; zero, the default, sleeps at once.
    pub fn set_idle_spin(&mut self, limit: Duration) {
        self.idle = IdleWait::new(limit);
    }

    /// Hops packets took through a hosted switch that passed them on at
    /// once (a directed SMP on its path), with no turn of the work queue.
    pub fn passed_at_once(&self) -> u64 {
        self.passed_at_once
    }

    /// Waits a spin ended with an event, and waits that slept.
    pub fn idle_waits(&self) -> (u64, u64) {
        (self.idle.caught, self.idle.slept)
    }

    /// Hosted nodes.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Wires to nodes outside.
    pub fn socket_count(&self) -> usize {
        self.sockets.len()
    }

    /// Packets dropped between hosted nodes so far, by reason.
    pub fn drops(&self) -> Drops {
        let link_down = self
            .nodes
            .iter()
            .map(|n| match n {
                Node::Switch(_, outbox) => outbox.refused.load(Ordering::Relaxed),
                _ => 0,
            })
            .sum();
        Drops {
            link_down,
            queue_full: self.work_dropped,
            ..self.drops
        }
    }

    /// Logs every host port's counters ([`HostedSim::counters`]).
    pub fn log_host_ports(&self, when: &str) {
        for &node in &self.sims {
            if let Node::Sim(sim) = &self.nodes[node] {
                sim.log_counters(when);
            }
        }
    }

    /// Hands every queued event to its node, and what they send on.
    pub fn drain_work(&mut self) {
        while let Some((to, ev, origin)) = self.work.pop_front() {
            match (ev, origin) {
                (LinkEvent::Packet(p), Origin::Process) => self.carry(to, p),
                (ev, origin) => self.deliver(to, ev, origin),
            }
        }
    }

    /// Delivers `packet`, built in the hive, to `to`, first carrying it
    /// through every hosted switch that only passes it on
    /// ([`HostedSwitch::pass_directed`]: a directed SMP on its path) with
    /// no turn of the work queue. It does so only while the queue is
    /// empty: each switch then gets the packet when the queue would have
    /// given it, nothing else being in it, and the hive's deliveries keep
    /// the queue's order.
    fn carry(&mut self, mut to: PortRef, mut packet: Vec<u8>) {
        while self.work.is_empty() && !self.off.contains_key(&to.node) {
            let Node::Switch(sw, _) = &self.nodes[to.node] else {
                break;
            };
            let Some(out) = sw.pass_directed(to.port, &mut packet) else {
                break;
            };
            self.passed_at_once += 1;
            let from = PortRef {
                node: to.node,
                port: out,
            };
            match self.peers.get(from.node, from.port) {
                Peer::Hive(next) if !self.cut.contains(&(from.node, from.port)) => to = next,
                _ => return self.send_from(from, packet),
            }
        }
        self.deliver(to, LinkEvent::Packet(packet), Origin::Process);
    }

    /// Keeps the status file at `path` ([`crate::status`]) from now on.
    pub fn set_status_file(&mut self, path: std::path::PathBuf) {
        self.status = Some((path, true));
    }

    /// Serves the control socket at `path` ([`crate::control`]) from now
    /// on.
    pub fn set_control_socket(&mut self, path: &std::path::Path) -> io::Result<()> {
        self.control = Some(ControlSocket::bind(path)?);
        Ok(())
    }

    fn deliver(&mut self, to: PortRef, ev: LinkEvent, origin: Origin) {
        if self.off.contains_key(&to.node) {
            // A switch without power hears nothing.
            if let LinkEvent::Packet(_) = ev {
                self.drops.unpowered += 1;
            }
            return;
        }
        if let LinkEvent::Up { .. } | LinkEvent::Down { .. } = &ev {
            let up = matches!(ev, LinkEvent::Up { .. });
            if let Some(p) = self.up[to.node].get_mut(usize::from(to.port) - 1) {
                if *p != up {
                    *p = up;
                    if let Some((_, dirty)) = &mut self.status {
                        *dirty = true;
                    }
                }
            }
        }
        if let (true, LinkEvent::Packet(p)) = (matches!(self.nodes[to.node], Node::Sim(_)), &ev) {
            // A request a host port may hand to its SM client.
            self.mark_left(p);
        }
        let mut out = std::mem::take(&mut self.sent);
        match &mut self.nodes[to.node] {
            Node::Switch(sw, outbox) => {
                // Only a link event raises a switch's trap; a packet can
                // only repress one that is already in `trapping`.
                let link_event = !matches!(ev, LinkEvent::Packet(_));
                match (ev, origin) {
                    (LinkEvent::Packet(p), Origin::Process) => sw.on_built_packet(to.port, p),
                    (ev, _) => {
                        match &ev {
                            LinkEvent::Up { .. } => outbox.set_up(to.port, true),
                            LinkEvent::Down { .. } => outbox.set_up(to.port, false),
                            LinkEvent::Packet(_) => {}
                        }
                        sw.on_event(to.port, ev);
                    }
                }
                if link_event && sw.next_trap_deadline().is_some() {
                    self.trapping.insert(to.node);
                }
                outbox.take_into(&mut out);
            }
            Node::Ca(ca) => {
                out.extend(ca.on_event(ev, origin).map(|p| (1, p)));
                if ca.next_trap_deadline().is_some() {
                    self.trapping.insert(to.node);
                }
            }
            Node::Sim(sim) => sim.on_event(ev, origin, &mut out),
        }
        self.send_all_from(to.node, out);
    }

    fn send_from(&mut self, from: PortRef, packet: Vec<u8>) {
        match self.peers.get(from.node, from.port) {
            Peer::None => self.drops.unwired += 1,
            Peer::Hive(_) if self.cut.contains(&(from.node, from.port)) => self.drops.cut += 1,
            Peer::Hive(to) if self.work.len() < WORK_LIMIT => {
                self.work
                    .push_back((to, LinkEvent::Packet(packet), Origin::Process));
            }
            Peer::Hive(_) => self.work_dropped += 1,
            Peer::Socket(i) => {
                self.mark_left(&packet);
                // Hosted nodes build SMPs for one another with their CRCs
                // zero; what leaves on a wire carries both.
                let mut packet = packet;
                encoded::stamp_unstamped(&mut packet);
                self.sockets[i].1.send(packet);
            }
        }
    }

    /// Runs until `stop` is readable (or polling fails).
    pub fn run(&mut self, stop: RawFd) -> io::Result<()> {
        let mut events = Vec::new();
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut polled: Vec<usize> = Vec::new();
        // Per host port, how many of `fds` are its (in `self.sims` order).
        let mut sim_fds_each: Vec<usize> = Vec::new();
        // Turns in a row that read a client's MAD ahead, without a poll.
        let mut ahead = 0;
        loop {
            self.drain_work();
            for (at, wire) in &mut self.sockets {
                wire.flush(&mut events);
                queue(&mut self.work, *at, &mut events);
            }
            let mut deadline = if self.trapping.is_empty() {
                None
            } else {
                self.send_due_traps(Instant::now())
            };
            if !self.work.is_empty() {
                continue;
            }
            self.answer_stranded();
            self.flush_sims();
            if ahead < READ_AHEAD_TURNS && self.read_sims_ahead() {
                ahead += 1;
                continue;
            }
            ahead = 0;
            self.write_status();
            fds.clear();
            polled.clear();
            sim_fds_each.clear();
            fds.push(libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            });
            for (i, (_, wire)) in self.sockets.iter().enumerate() {
                if let Some((fd, wanted)) = wire.poll_fd() {
                    fds.push(libc::pollfd {
                        fd,
                        events: wanted,
                        revents: 0,
                    });
                    polled.push(i);
                }
                if let Some(d) = wire.deadline() {
                    deadline = Some(deadline.map_or(d, |x| x.min(d)));
                }
            }
            let sim_fds = fds.len();
            for &node in &self.sims {
                let before = fds.len();
                if let Node::Sim(sim) = &self.nodes[node] {
                    fds.extend(sim.poll_fds());
                    if let Some(d) = sim.deadline() {
                        deadline = Some(deadline.map_or(d, |x| x.min(d)));
                    }
                }
                sim_fds_each.push(fds.len() - before);
            }
            let control_fds = fds.len();
            if let Some(c) = &self.control {
                fds.extend(c.poll_fds());
            }
            let timeout = deadline.map_or(-1, |d| {
                let ms = d
                    .saturating_duration_since(Instant::now())
                    .as_micros()
                    .div_ceil(1000);
                i32::try_from(ms).unwrap_or(i32::MAX)
            });
            if let Err(e) = self.idle.wait(&mut RealSys, &mut fds, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                return Ok(());
            }
            let now = Instant::now();
            self.service_sims(&fds[sim_fds..control_fds], &sim_fds_each, now);
            self.service_control(&fds[control_fds..]);
            // The ready wires' indexes, in order (`polled` is).
            let mut ready = fds[1..sim_fds]
                .iter()
                .zip(&polled)
                .filter(|(fd, _)| fd.revents != 0)
                .map(|(_, &i)| i)
                .peekable();
            for (i, (at, wire)) in self.sockets.iter_mut().enumerate() {
                let readable = ready.next_if_eq(&i).is_some();
                if readable || wire.deadline().is_some_and(|d| d <= now) {
                    wire.service(now, &mut events);
                    queue(&mut self.work, *at, &mut events);
                }
            }
        }
    }
}

impl Hive {
    /// Serves the host ports whose sockets `fds` (theirs, in order;
    /// `each` of them per port) say are readable or whose requests are
    /// due, and sends what they send.
    fn service_sims(&mut self, fds: &[libc::pollfd], each: &[usize], now: Instant) {
        let mut start = 0;
        for (i, &n) in each.iter().enumerate() {
            let mine = fds.get(start..start + n).unwrap_or_default();
            start += n;
            let node = self.sims[i];
            let Node::Sim(sim) = &mut self.nodes[node] else {
                continue;
            };
            let ready = mine.iter().any(|fd| fd.revents & !libc::POLLOUT != 0);
            if !ready && sim.deadline().is_none_or(|d| d > now) {
                continue;
            }
            let mut out = std::mem::take(&mut self.sent);
            sim.service(mine, now, &mut out);
            self.send_all_from(node, out);
        }
    }

    /// Reads ahead the next MAD of each host port's clients that the
    /// turn answered ([`HostedSim::read_ahead`]) and sends what they
    /// send: whether any came.
    fn read_sims_ahead(&mut self) -> bool {
        let now = Instant::now();
        let mut read = false;
        for i in 0..self.sims.len() {
            let node = self.sims[i];
            let Node::Sim(sim) = &mut self.nodes[node] else {
                continue;
            };
            let mut out = std::mem::take(&mut self.sent);
            read |= sim.read_ahead(now, &mut out);
            self.send_all_from(node, out);
        }
        read
    }

    /// Sends `out`'s packets from their ports of `node`, and keeps the
    /// emptied buffer for the next.
    fn send_all_from(&mut self, node: usize, mut out: Vec<(u8, Vec<u8>)>) {
        for (port, packet) in out.drain(..) {
            self.send_from(PortRef { node, port }, packet);
        }
        self.sent = out;
    }

    /// Sends each host port's clients what the turn queued for them.
    fn flush_sims(&mut self) {
        for &node in &self.sims {
            if let Node::Sim(sim) = &mut self.nodes[node] {
                sim.flush_clients();
            }
        }
    }

    /// Sends the traps due at `now` of every node with one outstanding;
    /// returns when the next is due.
    fn send_due_traps(&mut self, now: Instant) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        for node in std::mem::take(&mut self.trapping) {
            let mut out = std::mem::take(&mut self.sent);
            let due = match &mut self.nodes[node] {
                Node::Switch(sw, outbox) => {
                    sw.send_due_traps(now);
                    outbox.take_into(&mut out);
                    sw.next_trap_deadline()
                }
                Node::Ca(ca) => {
                    out.extend(ca.due_traps(now).into_iter().map(|p| (1, p)));
                    ca.next_trap_deadline()
                }
                Node::Sim(_) => None,
            };
            self.send_all_from(node, out);
            if let Some(d) = due {
                self.trapping.insert(node);
                next = Some(next.map_or(d, |x| x.min(d)));
            }
        }
        next
    }

    /// Serves the control socket's ready descriptors.
    fn service_control(&mut self, fds: &[libc::pollfd]) {
        let Some(mut control) = self.control.take() else {
            return;
        };
        control.service(fds, &mut |line| self.execute(line));
        self.control = Some(control);
    }

    /// Answers one control command line.
    fn execute(&mut self, line: &str) -> String {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words[..] {
            ["inspect"] => self.inspect_reply(),
            ["link", node, port, action @ ("down" | "up")] => {
                match self.set_link(node, port, action == "up") {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => format!("error {e}"),
                }
            }
            ["switch", node, action @ ("down" | "up")] => {
                match self.set_switch_power(node, action == "up") {
                    Ok(()) => "ok".to_owned(),
                    Err(e) => format!("error {e}"),
                }
            }
            _ => format!(
                "error unknown command `{line}` (inspect, link NODE PORT down|up, switch NODE down|up)"
            ),
        }
    }

    /// The `inspect` reply: every hosted node's ports, states and counters
    /// ([`crate::report`]), `{"nodes":[...]}`, written node by node (at
    /// 11,664 CAs the whole answer as one JSON tree took hundreds of MB
    /// and held the loop for seconds; one node's tree is small).
    pub fn inspect_reply(&self) -> String {
        let mut out = String::from("ok {\"nodes\":[");
        for i in 0..self.nodes.len() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&self.node_json(i).to_string());
        }
        out.push_str("]}");
        out
    }

    /// Hosted node `i`'s ports, states and counters ([`crate::report`]).
    pub fn node_json(&self, i: usize) -> serde_json::Value {
        let name = &self.node_names[i];
        let up = self.up[i].first().copied().unwrap_or(false);
        match &self.nodes[i] {
            Node::Switch(sw, _) => {
                let mut v = crate::report::switch_json(name, sw);
                v["powered"] = (!self.off.contains_key(&i)).into();
                v
            }
            Node::Ca(ca) => crate::report::ca_json(
                name,
                ca.guid(),
                (ca.lid(), ca.state()),
                up,
                &ca.totals(),
                Some(&ca.trap_counts()),
            ),
            Node::Sim(sim) => crate::report::ca_json(
                name,
                sim.guid(),
                sim.lid_and_state(),
                up,
                &sim.totals(),
                None,
            ),
        }
    }

    /// Rewrites the status file if a link changed since the last write.
    fn write_status(&mut self) {
        let Some((path, dirty)) = &mut self.status else {
            return;
        };
        if !*dirty {
            return;
        }
        *dirty = false;
        if let Err(e) = crate::status::write(path, &self.node_names, &self.up) {
            tracing::warn!("cannot write {}: {e}", path.display());
        }
    }
}

/// A hosted switch as it starts (power on): the file's LID and routes, or
/// none under an SM, every port down until its wire comes up, sending into
/// `sent`.
fn switch_node(s: &SwitchSpec, sm_managed: bool, sent: &Arc<Sent>) -> Result<Node, String> {
    let n = s.ports.len();
    let outbox = Arc::new(Outbox::new(Arc::clone(sent)));
    let config = SwitchConfig {
        name: s.description.clone(),
        guid: s.guid,
        lid: s.lid,
        // The endpoint is not used: the hive carries the port.
        ports: (0..n)
            .map(|_| PortConfig::new(ibtca_link::LinkEndpoint::Listen("-".into())))
            .collect(),
        routes: s.routes.clone(),
        link: Default::default(),
        sm_managed,
    };
    let sw = HostedSwitch::new(config, Arc::clone(&outbox) as Arc<dyn Wires>)
        .map_err(|e| format!("switch {}: {e}", s.name))?;
    Ok(Node::Switch(sw, outbox))
}

/// Queues a socket wire's events for its port (never dropped: they are
/// bounded by what one read brings), packets to be checked in full.
fn queue(
    work: &mut VecDeque<(PortRef, LinkEvent, Origin)>,
    at: PortRef,
    events: &mut Vec<LinkEvent>,
) {
    work.extend(events.drain(..).map(|ev| (at, ev, Origin::Wire)));
}

#[cfg(test)]
mod tests;
