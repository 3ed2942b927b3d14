//! A hosted host port: a CA whose port host programs own through ibsim's
//! client protocol (Debian's `libumad2sim.so`), as `ibtca-simport` is,
//! served on the hive's own thread. Its sockets are in the hive's
//! `poll(2)`: a client's MAD reaches the fabric's hosted switches and
//! their answer reaches the client with no thread hand-off and no link
//! socket in between (docs/host-sm.md). The hive polls the control
//! socket and the sockets of the slots clients hold, not the free ones
//! ([`HostedSim::poll_fds`]), and reads one MAD of a slot a turn
//! ([`MADS_PER_TURN`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ibtca_agents::pma::PortTotals;
use ibtca_link::{LinkEvent, LocalPort};
use ibtca_simport::clients::MAX_CLIENTS;
use ibtca_simport::port::{PortSettings, Sends, SimPort};
use ibtca_simport::server::serve_control;
use ibtca_simport::sockets::{read_buffer, Datagram, RecvBatch, SimSockets};
use ibtca_simport::wire::REQUEST_LEN;
use ibtca_switch::Origin;

use crate::config::CaSpec;

mod stats;
pub use stats::{ClientReads, ClientSends, Counters, BATCH_BUCKETS};

/// How long a client's request waits for its response (as
/// `ibtca-simport`'s default).
const MAD_TIMEOUT: Duration = Duration::from_millis(1000);

/// A client's MADs a turn of the hive's loop reads: one, so that each is
/// answered (carried through the fabric, and its answer sent) before the
/// next is read. OpenSM keeps up to four SMPs on the wire and handles each
/// answer as it comes: answering four in one turn kept it idle while the
/// hive worked on all four, and the hive idle while OpenSM took four
/// answers at once. One a turn costs the hive a `poll(2)` per MAD, and
/// brought OpenSM's sweep of the 1,296-CA tree from 1.17 to 1.06 times
/// ibsim's (medians of 12 alternated runs each, docs/host-sm.md).
pub const MADS_PER_TURN: usize = 1;

/// MADs kept per client while its socket is full: far more than an SM
/// keeps outstanding (OpenSM: 4 SMPs on the wire), so only a client that
/// stopped reading loses any.
pub const KEPT_PER_CLIENT: usize = 1024;

/// One hosted host port.
pub struct HostedSim {
    sockets: SimSockets,
    port: SimPort,
    totals: PortTotals,
    guid: u64,
    /// The node's name, in the log.
    name: String,
    /// Control messages are read into `buf` and then `ctl`; clients' MADs
    /// into `batch`, [`MADS_PER_TURN`] at a time.
    buf: Vec<u8>,
    ctl: Vec<Datagram>,
    batch: RecvBatch,
    /// What the port sends, taken from it call after call (the same
    /// buffer: no allocation per MAD).
    outs: Sends,
    /// Per slot, MADs for its client not sent yet, in order: a turn's,
    /// sent together by [`HostedSim::flush_clients`], then those its
    /// client's socket did not take.
    kept: Vec<VecDeque<[u8; REQUEST_LEN]>>,
    /// The slots whose `kept` holds MADs (bit `slot`).
    queued: Slots,
    /// MADs and `sendmmsg(2)` calls to clients so far.
    client_sends: ClientSends,
    /// Per slot: its socket took an answer at the last
    /// [`HostedSim::flush_clients`] ([`HostedSim::read_ahead`] reads it).
    answered: Slots,
    /// MADs [`HostedSim::read_ahead`] read.
    read_ahead: u64,
}

impl HostedSim {
    /// Binds the sockets of base name `base` for the CA of `spec`;
    /// `managed`: an SM brings its port up.
    pub fn new(spec: &CaSpec, base: &str, managed: bool) -> std::io::Result<Self> {
        let settings = PortSettings {
            node_guid: spec.guid,
            port_guid: spec.port_guid,
            description: spec.description.clone(),
            lid: if managed { 0 } else { spec.lid },
            managed,
            node_id: spec.name.clone(),
        };
        let mut port = SimPort::new(settings, MAD_TIMEOUT);
        // The hive stamps what leaves it on a wire (`Hive::send_from`).
        port.leave_crcs_unstamped();
        Ok(HostedSim {
            sockets: SimSockets::bind(base)?,
            port,
            totals: PortTotals::default(),
            guid: spec.guid,
            name: spec.name.clone(),
            buf: read_buffer(),
            ctl: Vec::new(),
            batch: RecvBatch::with_limit(MADS_PER_TURN),
            outs: Sends::new(),
            kept: (0..MAX_CLIENTS).map(|_| VecDeque::new()).collect(),
            queued: Slots::default(),
            client_sends: ClientSends::default(),
            answered: Slots::default(),
            read_ahead: 0,
        })
    }

    /// What its port says in a `Hello`.
    pub fn local(&self) -> LocalPort {
        LocalPort {
            node_guid: self.guid,
            port: 1,
            lid: self.port.lid_and_state().0,
        }
    }

    /// The port's LID and state.
    pub fn lid_and_state(&self) -> (u16, ibtca_protocol::mad::attr::PortState) {
        self.port.lid_and_state()
    }

    /// The port's counters.
    pub fn totals(&self) -> PortTotals {
        self.totals
    }

    /// The node GUID.
    pub fn guid(&self) -> u64 {
        self.guid
    }

    /// When a client's request times out next.
    pub fn deadline(&self) -> Option<Instant> {
        self.port.next_deadline()
    }

    /// An event of the port's wire, a packet from `origin` (built in the
    /// hive: its CRCs are not computed again); the packets to send (on
    /// port 1) are pushed onto `packets`.
    pub fn on_event(&mut self, ev: LinkEvent, origin: Origin, packets: &mut Vec<(u8, Vec<u8>)>) {
        match ev {
            LinkEvent::Up { .. } => self.port.link_changed(true),
            LinkEvent::Down { .. } => {
                self.port.link_changed(false);
                self.totals.link_downed += 1;
            }
            LinkEvent::Packet(p) => {
                self.totals.rcv_pkts += 1;
                self.totals.rcv_bytes += p.len() as u64;
                match origin {
                    Origin::Wire => self.port.on_link(&p, &self.totals, &mut self.outs),
                    Origin::Process => self.port.on_built_link(&p, &self.totals, &mut self.outs),
                }
                self.port.recycle(p);
                self.carry(packets);
            }
        }
    }

    /// Reads what the sockets of `polled` ([`HostedSim::poll_fds`]'s, after
    /// `poll(2)`) say they hold, and times out requests due at `now`; the
    /// packets to send (on port 1) are pushed onto `packets`.
    pub fn service(
        &mut self,
        polled: &[libc::pollfd],
        now: Instant,
        packets: &mut Vec<(u8, Vec<u8>)>,
    ) {
        for p in polled {
            // Readable, or an error a read clears (writable alone: the
            // turn's flush writes).
            if p.revents & !libc::POLLOUT == 0 {
                continue;
            }
            if p.fd == self.sockets.ctl_fd() {
                self.serve_ctl();
                continue;
            }
            let Some(slot) = self.sockets.slot_of_fd(p.fd) else {
                continue;
            };
            self.read_slot(slot, now, packets);
        }
        self.port.tick(now, &mut self.outs);
        self.carry(packets);
    }

    /// Reads up to [`MADS_PER_TURN`] of `slot`'s MADs, serves them and
    /// pushes the packets to send onto `packets`: how many it read.
    fn read_slot(&mut self, slot: usize, now: Instant, packets: &mut Vec<(u8, Vec<u8>)>) -> usize {
        self.sockets.recv_slot(slot, &mut self.batch);
        for i in 0..self.batch.len() {
            self.port
                .on_client(slot, self.batch.get(i), &self.totals, now, &mut self.outs);
        }
        self.carry(packets);
        self.batch.len()
    }

    /// Reads, without waiting for `poll(2)` to say so, the next MAD of
    /// each client whose socket took an answer at the last
    /// [`HostedSim::flush_clients`], and serves it as
    /// [`HostedSim::service`] would; the packets to send are pushed onto
    /// `packets`. Whether any came.
    ///
    /// An SM sends its next request as soon as an answer comes (OpenSM
    /// keeps four SMPs on the wire), so after an answer its socket mostly
    /// holds one already: read at once, it costs one system call (a
    /// `recv(2)`) where `poll(2)` and then `recv(2)` cost two. When the
    /// socket is empty the `recv(2)` is one call more than the poll
    /// alone: it pays where most polls find a MAD waiting (docs/host-sm.md).
    pub fn read_ahead(&mut self, now: Instant, packets: &mut Vec<(u8, Vec<u8>)>) -> bool {
        let mut read = 0;
        for slot in std::mem::take(&mut self.answered) {
            if self.port.client(slot).is_some() {
                read += self.read_slot(slot, now, packets);
            }
        }
        self.read_ahead += read as u64;
        read > 0
    }

    /// Serves the control messages waiting: CONNECT, DISCONNECT, queries.
    fn serve_ctl(&mut self) {
        let mut ctl = std::mem::take(&mut self.ctl);
        self.sockets.read_ctl(&mut self.buf, &mut ctl);
        for d in ctl.drain(..) {
            let Datagram::Ctl(bytes, from) = d else {
                continue;
            };
            let before = self.port.clients_attached();
            serve_control(&mut self.port, &self.sockets, &bytes, &from);
            if self.port.clients_attached() < before {
                self.log_counters("a client detached");
            }
            for slot in 0..MAX_CLIENTS {
                if self.port.client(slot).is_none() {
                    self.forget_kept(slot);
                }
            }
        }
        self.ctl = ctl;
    }

    /// The request that went out with TID `tid` has left the hive's sight
    /// (`hive/stranded.rs`): it waits for its answer or its timeout.
    pub fn mark_left(&mut self, tid: u64) {
        self.port.mark_left(tid);
    }

    /// Queues every request that stayed in the hive unanswered for its
    /// client, with status 110 (`hive/stranded.rs`).
    pub fn answer_stranded(&mut self) {
        self.port.stranded(&mut self.outs);
        let mut none = Vec::new();
        self.carry(&mut none);
        debug_assert!(none.is_empty());
    }

    /// How long a client's request waits for its answer from now on.
    pub fn set_request_timeout(&mut self, timeout: Duration) {
        self.port.set_request_timeout(timeout);
    }

    /// Takes what the port sent: what is for the link onto `packets` (on
    /// port 1), what is for clients into their slots' queues for
    /// [`HostedSim::flush_clients`], up to [`KEPT_PER_CLIENT`] MADs a
    /// client (beyond that lost and counted).
    fn carry(&mut self, packets: &mut Vec<(u8, Vec<u8>)>) {
        for p in self.outs.link.drain(..) {
            self.totals.xmit_pkts += 1;
            self.totals.xmit_bytes += p.len() as u64;
            packets.push((1, p));
        }
        for (slot, datagram) in &self.outs.clients {
            let Some(kept) = self.kept.get_mut(*slot) else {
                continue;
            };
            if kept.len() < KEPT_PER_CLIENT {
                // From a slice: copied once, where it goes.
                kept.extend(std::slice::from_ref(datagram));
                self.queued.insert(*slot);
            } else {
                self.client_sends.lost += 1;
                ibtca_log::guest_warn!(slot, "client does not read: MAD dropped");
            }
        }
        self.outs.clients.clear();
    }

    /// Sends the MADs queued for clients since the last flush: each
    /// client's in order, in one system call (the owner calls this once a
    /// turn, before it sleeps: a client gets every answer of the turn
    /// with one wake-up). What a client's full socket does not take is
    /// kept, in order, up to [`KEPT_PER_CLIENT`] MADs (beyond that lost
    /// and counted), and sent when the socket takes more: the owner polls
    /// it for writing meanwhile ([`HostedSim::poll_fds`]), as ibsim waits
    /// for a client rather than drop its answer. A client that has gone is
    /// detached.
    pub fn flush_clients(&mut self) {
        for slot in self.queued {
            let Some(kept) = self.kept.get_mut(slot) else {
                continue;
            };
            let offered = kept.len();
            let msgs = kept.iter().map(|b| &b[..]);
            match self.sockets.send_batch(slot, msgs) {
                Ok(n) => {
                    self.client_sends.record(offered, n);
                    kept.drain(..n);
                    if kept.is_empty() {
                        self.queued.remove(slot);
                    }
                    if n > 0 {
                        self.answered.insert(slot);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    self.forget_kept(slot);
                    if let Some(c) = self.port.detach(slot) {
                        tracing::info!(slot, pid = c.pid, "client gone ({e}): detached");
                        self.log_counters("a client gone");
                    }
                }
            }
        }
    }

    /// Drops what is kept for `slot`'s client (it has gone), counted lost.
    fn forget_kept(&mut self, slot: usize) {
        if let Some(kept) = self.kept.get_mut(slot) {
            self.client_sends.lost += kept.len() as u64;
            kept.clear();
        }
        self.queued.remove(slot);
    }

    /// What to poll: the control socket for reading, then the socket of
    /// each slot a client holds, for reading, and for writing too while
    /// MADs are kept for it. A free slot's socket is not polled: what it
    /// holds when a client takes the slot is dropped then
    /// (`SimSockets::attach`).
    pub fn poll_fds(&self) -> impl Iterator<Item = libc::pollfd> + '_ {
        let ctl = libc::pollfd {
            fd: self.sockets.ctl_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let slots = (0..MAX_CLIENTS)
            .filter(|&slot| self.port.client(slot).is_some())
            .filter_map(|slot| {
                let waiting = self.kept.get(slot).is_some_and(|k| !k.is_empty());
                Some(libc::pollfd {
                    fd: self.sockets.slot_fd(slot)?,
                    events: libc::POLLIN | if waiting { libc::POLLOUT } else { 0 },
                    revents: 0,
                })
            });
        std::iter::once(ctl).chain(slots)
    }

    /// What the port has sent its clients.
    pub fn client_sends(&self) -> ClientSends {
        self.client_sends
    }

    /// The port's counters since it started.
    pub fn counters(&self) -> Counters<'_> {
        Counters {
            port: self.port.counts(),
            reads: ClientReads {
                mads: self.batch.datagrams,
                calls: self.batch.calls,
                ahead: self.read_ahead,
            },
            sends: self.client_sends,
            kinds: self.port.request_kinds(),
        }
    }

    /// Logs [`HostedSim::counters`], saying `when`.
    pub fn log_counters(&self, when: &str) {
        tracing::info!(node = %self.name, "host port counters ({when}): {}", self.counters());
    }
}

/// A set of client slots (0..[`MAX_CLIENTS`]), one bit each: what a
/// turn visits is the slots in it, not every slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slots(u16);

const _: () = assert!(MAX_CLIENTS <= 16, "a slot is a bit of a u16");

impl Slots {
    fn insert(&mut self, slot: usize) {
        if slot < MAX_CLIENTS {
            self.0 |= 1 << slot;
        }
    }

    fn remove(&mut self, slot: usize) {
        if slot < MAX_CLIENTS {
            self.0 &= !(1 << slot);
        }
    }
}

/// The slots in the set, lowest first.
impl Iterator for Slots {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let slot = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::{SocketAddr, UnixDatagram};

    use ibtca_protocol::mad::attr::id;
    use ibtca_protocol::mad::{method, Smp, PERMISSIVE_LID};
    use ibtca_simport::wire::{ClientInfo, Ctl, CtlType, SimRequest};

    use super::*;
    use crate::config::WireSpec;

    fn addr(name: &str) -> SocketAddr {
        ibtca_simport::sockets::abstract_addr(name).unwrap()
    }

    /// One turn of the hive's loop for `sim` alone: polls its sockets
    /// without waiting (a datagram sent is in its socket at once) and
    /// serves what they hold.
    fn serve(sim: &mut HostedSim) -> Vec<Vec<u8>> {
        let mut fds: Vec<libc::pollfd> = sim.poll_fds().collect();
        // SAFETY: `fds` is a live array of `fds.len()` pollfds for the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
        assert!(n >= 0, "poll: {}", std::io::Error::last_os_error());
        let mut packets = Vec::new();
        sim.service(&fds, Instant::now(), &mut packets);
        packets.into_iter().map(|(_, p)| p).collect()
    }

    /// A host port of base name `base` and no client.
    fn host_port(base: &str) -> HostedSim {
        let spec = CaSpec {
            name: "host".into(),
            description: "host".into(),
            guid: 0x77,
            port_guid: 0x77,
            lid: 5,
            port: WireSpec::None,
            sim: Some(base.to_owned()),
        };
        HostedSim::new(&spec, base, false).unwrap()
    }

    /// The client of [`attach`] (its control socket, CONNECT and slot)
    /// leaves `sim` with a DISCONNECT, which gets no answer.
    fn detach(sim: &mut HostedSim, base: &str, ctl: &UnixDatagram, connect: Ctl, slot: usize) {
        let disconnect = Ctl {
            kind: CtlType::Disconnect.to_wire(),
            client_id: slot as u32,
            ..connect
        };
        ctl.send_to_addr(&disconnect.to_bytes(), &addr(&format!("{base}:ctl")))
            .unwrap();
        assert!(serve(sim).is_empty());
    }

    /// A client attached to `sim` (base name `base`) as umad2sim attaches
    /// one: (its data socket, its control socket, its CONNECT, its slot).
    fn attach(sim: &mut HostedSim, base: &str) -> (UnixDatagram, UnixDatagram, Ctl, usize) {
        let pid = std::process::id();
        let data = UnixDatagram::bind_addr(&addr(&format!("{base}:in{pid}"))).unwrap();
        let ctl = UnixDatagram::bind_addr(&addr(&format!("{base}:ctl{pid}"))).unwrap();
        let connect = Ctl::connect(&ClientInfo {
            id: pid,
            qp: 0,
            issm: false,
            node_id: String::new(),
        });
        ctl.send_to_addr(&connect.to_bytes(), &addr(&format!("{base}:ctl")))
            .unwrap();
        assert!(serve(sim).is_empty());
        let mut buf = [0u8; 1024];
        assert_eq!(ctl.recv(&mut buf).unwrap(), 80);
        let answer = Ctl::parse(&buf[..80]).unwrap();
        assert_eq!(answer.kind, CtlType::Connect.to_wire());
        let slot = answer.client_id as usize;
        data.connect_addr(&addr(&format!("{base}:out{slot}")))
            .unwrap();
        (data, ctl, connect, slot)
    }

    /// A host port of base name `base` with one client attached: (port,
    /// client's data socket, its control socket, its CONNECT, its slot).
    fn attached(base: &str) -> (HostedSim, UnixDatagram, UnixDatagram, Ctl, usize) {
        let mut sim = host_port(base);
        let (data, ctl, connect, slot) = attach(&mut sim, base);
        (sim, data, ctl, connect, slot)
    }

    /// A NodeInfo Get of the port itself (its own agent answers it).
    fn node_info_get(tid: u64) -> [u8; REQUEST_LEN] {
        let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[]).unwrap();
        smp.tid = tid;
        SimRequest::smp(PERMISSIVE_LID, smp.to_bytes()).to_bytes()
    }

    #[test]
    fn a_set_of_slots_gives_each_slot_in_it_once_lowest_first() {
        let mut slots = Slots::default();
        for slot in [9, 0, 3, 3, MAX_CLIENTS, 64] {
            slots.insert(slot);
        }
        slots.remove(0);
        assert_eq!(slots.collect::<Vec<_>>(), [3, 9], "past MAX_CLIENTS: none");
        assert_eq!(Slots::default().next(), None);
    }

    #[test]
    fn a_turn_reads_one_mad_and_its_answer_leaves_before_the_next_is_read() {
        let base = format!("ibtca-hive-sim-test-{}", std::process::id());
        let (mut sim, data, ctl, connect, slot) = attached(&base);
        let mut buf = [0u8; 1024];

        // Four NodeInfo Gets of the port itself, all in its socket at once.
        for tid in 1..=4u64 {
            data.send(&node_info_get(tid)).unwrap();
        }
        data.set_nonblocking(true).unwrap();
        for tid in 1..=4u64 {
            assert!(serve(&mut sim).is_empty());
            assert!(data.recv(&mut buf).is_err(), "nothing before the flush");
            sim.flush_clients();
            // This turn's answer, and only it: the next request is still
            // in the socket.
            let n = data.recv(&mut buf).unwrap();
            assert_eq!(n, REQUEST_LEN);
            let answer = SimRequest::parse(&buf[..n]).unwrap();
            let smp = Smp::parse(&answer.mad).unwrap();
            assert_eq!((smp.tid, smp.method), (tid, method::GET_RESP));
            assert_eq!(&smp.data[12..20], &0x77u64.to_be_bytes(), "NodeGUID");
            assert!(data.recv(&mut buf).is_err(), "one answer a turn");
            assert_eq!(sim.counters().reads.mads, tid, "one MAD read a turn");
        }
        // Nothing left to read: an empty socket is not read.
        assert!(serve(&mut sim).is_empty());
        let reads = sim.counters().reads;
        assert_eq!((reads.mads, reads.calls), (4, 4), "a read a turn");
        let sends = sim.client_sends();
        assert_eq!((sends.mads, sends.calls), (4, 4));
        assert_eq!(sends.batches, [4, 0, 0, 0, 0, 0], "four batches of one");
        // The client leaves: the port's counters say what it did.
        detach(&mut sim, &base, &ctl, connect, slot);
        let counts = sim.counters().port;
        assert_eq!((counts.requests, counts.local), (4, 4));
        assert_eq!(sim.port.clients_attached(), 0);
        let line = sim.counters().to_string();
        assert!(
            line.contains(" batches=1:4,2:0,3:0,4:0,5-8:0,>8:0 "),
            "{line}"
        );
        assert!(line.ends_with(" kinds=81/0011/01:4"), "{line}");
    }

    #[test]
    fn a_clients_next_mad_is_read_ahead_only_right_after_an_answer_went_to_it() {
        let base = format!("ibtca-hive-sim-ahead-{}", std::process::id());
        let (mut sim, data, _ctl, _connect, _slot) = attached(&base);
        let mut packets = Vec::new();
        let mut ahead = |sim: &mut HostedSim| sim.read_ahead(Instant::now(), &mut packets);
        let calls = |sim: &HostedSim| sim.counters().reads.calls;
        data.send(&node_info_get(1)).unwrap();
        data.send(&node_info_get(2)).unwrap();
        assert!(serve(&mut sim).is_empty());
        // The answer has not gone yet: nothing is read ahead, not even tried.
        let before = calls(&sim);
        assert!(!ahead(&mut sim));
        assert_eq!(calls(&sim), before);
        // It went: the second request is read and answered.
        sim.flush_clients();
        assert!(ahead(&mut sim));
        assert_eq!(sim.counters().reads.ahead, 1);
        sim.flush_clients();
        let mut buf = [0u8; 1024];
        for tid in 1..=2 {
            let n = data.recv(&mut buf).unwrap();
            let answer = SimRequest::parse(&buf[..n]).unwrap();
            assert_eq!(Smp::parse(&answer.mad).unwrap().tid, tid);
        }
        // After the second answer the socket is empty: one read finds
        // nothing, and without another answer none is tried again.
        let before = calls(&sim);
        assert!(!ahead(&mut sim));
        assert!(!ahead(&mut sim));
        assert_eq!(calls(&sim), before + 1);
        assert_eq!(sim.counters().reads.mads, 2);
    }

    #[test]
    fn answers_wait_for_a_full_client_and_arrive_in_order() {
        let base = format!("ibtca-hive-sim-full-{}", std::process::id());
        let (mut sim, data, _ctl, _connect, _slot) = attached(&base);
        // The client's slot's socket: polled after the control socket.
        let fd = |sim: &HostedSim| sim.poll_fds().nth(1).unwrap();
        // The client reads nothing; answers go to it until its socket is
        // full (the sockets are connected both ways, so its send buffer
        // bounds it, not net.unix.max_dgram_qlen), and a turn beyond.
        let mut sent = 0u64;
        let turn = |sim: &mut HostedSim, sent: &mut u64| {
            for _ in 0..MADS_PER_TURN {
                *sent += 1;
                data.send(&node_info_get(*sent)).unwrap();
            }
            assert!(serve(sim).is_empty());
            sim.flush_clients();
        };
        while fd(&sim).events & libc::POLLOUT == 0 && sim.client_sends().lost == 0 {
            assert!(sent < 100_000, "the client's socket never filled");
            turn(&mut sim, &mut sent);
        }
        turn(&mut sim, &mut sent);
        assert_ne!(fd(&sim).events & libc::POLLOUT, 0, "waits to write");
        // The client reads what it has; each time its socket can take
        // more, the owner's next turn sends more, in order.
        data.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 1024];
        let mut tids = Vec::new();
        for _ in 0..sent {
            while let Ok(n) = data.recv(&mut buf) {
                let answer = SimRequest::parse(&buf[..n]).unwrap();
                tids.push(Smp::parse(&answer.mad).unwrap().tid);
            }
            if tids.len() as u64 == sent {
                break;
            }
            let mut p = [fd(&sim)];
            // SAFETY: `p` is one live pollfd for the call's duration.
            let ready = unsafe { libc::poll(p.as_mut_ptr(), 1, 60_000) };
            assert_eq!(ready, 1, "the emptied socket is writable");
            assert_ne!(p[0].revents & libc::POLLOUT, 0);
            sim.flush_clients();
        }
        assert_eq!(
            tids,
            (1..=sent).collect::<Vec<_>>(),
            "every answer, in order"
        );
        assert_eq!(sim.client_sends().lost, 0);
        assert_eq!(fd(&sim).events & libc::POLLOUT, 0, "nothing left to write");
    }

    #[test]
    fn a_host_port_polls_its_control_socket_and_only_the_slots_clients_hold() {
        let base = format!("ibtca-hive-sim-poll-{}", std::process::id());
        let mut sim = host_port(&base);
        let ctl_fd = sim.sockets.ctl_fd();
        let fds: Vec<libc::pollfd> = sim.poll_fds().collect();
        assert_eq!(fds.len(), 1, "no client: the control socket alone");
        assert_eq!((fds[0].fd, fds[0].events), (ctl_fd, libc::POLLIN));
        let (_data, ctl, connect, slot) = attach(&mut sim, &base);
        let fds: Vec<libc::pollfd> = sim.poll_fds().collect();
        assert_eq!(fds.len(), 2, "one client: its slot's socket too");
        assert_eq!(Some(fds[1].fd), sim.sockets.slot_fd(slot));
        detach(&mut sim, &base, &ctl, connect, slot);
        assert_eq!(sim.poll_fds().count(), 1, "the client left");
    }

    #[test]
    fn a_datagram_on_a_free_slot_is_not_given_to_its_next_client() {
        let base = format!("ibtca-hive-sim-stale-{}", std::process::id());
        let mut sim = host_port(&base);
        // A well-formed MAD on slot 0's socket while no client holds it.
        let stranger = UnixDatagram::unbound().unwrap();
        stranger
            .send_to_addr(&node_info_get(99), &addr(&format!("{base}:out0")))
            .unwrap();
        assert!(serve(&mut sim).is_empty());
        let (data, _ctl, _connect, slot) = attach(&mut sim, &base);
        assert_eq!(slot, 0, "the client takes the slot the MAD waited on");
        data.send(&node_info_get(1)).unwrap();
        assert!(serve(&mut sim).is_empty());
        sim.flush_clients();
        data.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 1024];
        let mut tids = Vec::new();
        while let Ok(n) = data.recv(&mut buf) {
            let answer = SimRequest::parse(&buf[..n]).unwrap();
            tids.push(Smp::parse(&answer.mad).unwrap().tid);
        }
        assert_eq!(tids, vec![1], "the client's own MAD answered, alone");
        let counts = sim.counters().port;
        assert_eq!((counts.requests, counts.dropped), (1, 1));
    }
}
