//! A hosted host port: a CA whose port host programs own through ibsim's
//! client protocol (Debian's `libumad2sim.so`), as `ibtca-simport` is,
//! served on the hive's own thread. Its sockets are in the hive's
//! `poll(2)`: a client's MAD reaches the fabric's hosted switches and
//! their answer reaches the client with no thread hand-off and no link
//! socket in between (docs/host-sm.md).

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use ibtca_agents::pma::PortTotals;
use ibtca_link::{LinkEvent, LocalPort};
use ibtca_simport::port::{Out, PortSettings, SimPort};
use ibtca_simport::server::{send_to_client, serve_control};
use ibtca_simport::sockets::{read_buffer, Datagram, SimSockets};

use crate::config::CaSpec;

/// How long a client's request waits for its response (as
/// `ibtca-simport`'s default).
const MAD_TIMEOUT: Duration = Duration::from_millis(1000);

/// One hosted host port.
pub struct HostedSim {
    sockets: SimSockets,
    port: SimPort,
    totals: PortTotals,
    guid: u64,
    buf: Vec<u8>,
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
        Ok(HostedSim {
            sockets: SimSockets::bind(base)?,
            port: SimPort::new(settings, MAD_TIMEOUT),
            totals: PortTotals::default(),
            guid: spec.guid,
            buf: read_buffer(),
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

    /// The sockets to poll for reading.
    pub fn fds(&self) -> Vec<RawFd> {
        self.sockets.fds()
    }

    /// When a client's request times out next.
    pub fn deadline(&self) -> Option<Instant> {
        self.port.next_deadline()
    }

    /// An event of the port's wire; returns the packets to send.
    pub fn on_event(&mut self, ev: LinkEvent) -> Vec<Vec<u8>> {
        match ev {
            LinkEvent::Up { .. } => {
                self.port.link_changed(true);
                Vec::new()
            }
            LinkEvent::Down { .. } => {
                self.port.link_changed(false);
                self.totals.link_downed += 1;
                Vec::new()
            }
            LinkEvent::Packet(p) => {
                self.totals.rcv_pkts += 1;
                self.totals.rcv_bytes += p.len() as u64;
                let out = self.port.on_link(&p, &self.totals);
                self.carry(out)
            }
        }
    }

    /// Reads what sockets `ready` (indexes of [`HostedSim::fds`]) hold,
    /// and times out requests due at `now`; returns the packets to send.
    pub fn service(&mut self, ready: &[usize], now: Instant) -> Vec<Vec<u8>> {
        let mut read = Vec::new();
        for &i in ready {
            self.sockets.read_ready(i, &mut self.buf, &mut read);
        }
        let mut packets = Vec::new();
        for d in read {
            match d {
                Datagram::Ctl(bytes, from) => {
                    serve_control(&mut self.port, &self.sockets, &bytes, &from);
                }
                Datagram::Data(slot, bytes) => {
                    let out = self.port.on_client(slot, &bytes, &self.totals, now);
                    packets.extend(self.carry(out));
                }
            }
        }
        let out = self.port.tick(now);
        packets.extend(self.carry(out));
        packets
    }

    /// Sends what is for clients; returns what is for the link.
    fn carry(&mut self, out: Vec<Out>) -> Vec<Vec<u8>> {
        let mut packets = Vec::new();
        for o in out {
            match o {
                Out::Link(p) => {
                    self.totals.xmit_pkts += 1;
                    self.totals.xmit_bytes += p.len() as u64;
                    packets.push(p);
                }
                Out::Client(slot, req) => {
                    send_to_client(&mut self.port, &self.sockets, slot, &req);
                }
            }
        }
        packets
    }
}
