//! One running port: the link, the sockets' reader thread, and the loop
//! that owns the [`SimPort`] and carries messages between them.

use std::io;
use std::path::Path;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::time::{Duration, Instant};

use ibtca_agents::pma::PortTotals;
use ibtca_link::{Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};

use crate::port::{PortSettings, Sends, SimPort};
use crate::sockets::{Datagram, SimSockets};
use crate::wire::REQUEST_LEN;
use std::os::unix::net::SocketAddr;

/// What a port is.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The socket base name (`IBSIM_SOCKNAME`).
    pub base: String,
    /// The fabric link.
    pub link: LinkEndpoint,
    /// The link's shared ring per direction, in bytes (0: the socket).
    pub link_ring: u64,
    /// The port's node, GUIDs, LID and agent.
    pub port: PortSettings,
    /// How long a client's request waits for its response.
    pub mad_timeout: Duration,
}

/// What the loop waits on.
#[derive(Debug)]
pub enum Event {
    /// From the sockets.
    Sim(Datagram),
    /// From the link.
    Link(LinkEvent),
    /// Stop the loop.
    Stop,
}

/// A started port.
pub struct Server {
    sockets: SimSockets,
    link: Link,
    port: SimPort,
    rx: Receiver<Event>,
    tx: SyncSender<Event>,
}

/// Events the loop's queue holds; a full queue holds up the link's reader
/// (its credits then hold up the peer) and the sockets' reader (clients'
/// datagrams then wait in, or are refused by, their sockets): a flooding
/// client costs no memory.
const EVENT_QUEUE: usize = 4096;

fn process_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

impl Server {
    /// Binds the sockets and starts the link and the reader thread.
    pub fn start(cfg: &ServerConfig) -> io::Result<Self> {
        let sockets = SimSockets::bind(&cfg.base)?;
        let (tx, rx) = mpsc::sync_channel(EVENT_QUEUE);
        let (dtx, drx) = mpsc::sync_channel(EVENT_QUEUE);
        sockets.start_reader(dtx)?;
        let fwd = tx.clone();
        std::thread::Builder::new()
            .name("ibtca-sim-fwd".into())
            .spawn(move || {
                ibtca_sandbox::enter(ibtca_sandbox::Role::SimportForward);
                for d in drx {
                    if fwd.send(Event::Sim(d)).is_err() {
                        return;
                    }
                }
            })?;
        let local = LocalPort {
            node_guid: cfg.port.node_guid,
            port: 1,
            lid: cfg.port.lid,
        };
        let config = LinkConfig {
            shared_ring: cfg.link_ring,
            ..LinkConfig::default()
        };
        let events = tx.clone();
        let link = Link::start_with(cfg.link.clone(), local, config, move |ev| {
            let _ = events.send(Event::Link(ev));
        })?;
        Ok(Server {
            sockets,
            link,
            port: SimPort::new(cfg.port.clone(), cfg.mad_timeout),
            rx,
            tx,
        })
    }

    /// A sender whose [`Event::Stop`] ends [`Server::run`].
    pub fn stopper(&self) -> SyncSender<Event> {
        self.tx.clone()
    }

    /// Serves until [`Event::Stop`]; returns the port (its counters).
    pub fn run(mut self) -> SimPort {
        loop {
            let wait = self
                .port
                .next_deadline()
                .map_or(Duration::from_secs(1), |d| {
                    d.saturating_duration_since(Instant::now())
                });
            match self.rx.recv_timeout(wait) {
                Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(ev) => self.handle(ev),
                Err(RecvTimeoutError::Timeout) => {}
            }
            let mut out = Sends::new();
            self.port.tick(Instant::now(), &mut out);
            self.flush(out);
        }
        self.link.stop();
        self.port
    }

    fn totals(&self) -> PortTotals {
        PortTotals::of_link(&self.link.stats())
    }

    fn handle(&mut self, ev: Event) {
        let mut out = Sends::new();
        match ev {
            Event::Link(LinkEvent::Up { peer }) => {
                tracing::info!(
                    peer_guid = format_args!("{:#x}", peer.node_guid),
                    peer_port = peer.port,
                    "link up"
                );
                self.port.link_changed(true);
                return;
            }
            Event::Link(LinkEvent::Down { reason }) => {
                tracing::info!(%reason, "link down");
                self.port.link_changed(false);
                return;
            }
            Event::Link(LinkEvent::Packet(p)) => {
                let totals = self.totals();
                self.port.on_link(&p, &totals, &mut out);
            }
            Event::Sim(Datagram::Ctl(bytes, from)) => {
                serve_control(&mut self.port, &self.sockets, &bytes, &from);
                return;
            }
            Event::Sim(Datagram::Data(slot, bytes)) => {
                let totals = self.totals();
                self.port
                    .on_client(slot, &bytes, &totals, Instant::now(), &mut out);
            }
            Event::Stop => return,
        }
        self.flush(out);
    }

    fn flush(&mut self, out: Sends) {
        for p in out.link {
            if let Err(e) = self.link.send(p) {
                tracing::debug!("packet not sent: {e}");
            }
        }
        for (slot, datagram) in &out.clients {
            send_to_client(&mut self.port, &self.sockets, *slot, datagram);
        }
    }
}

/// Answers the control message `bytes` from `from`; a CONNECT attaches
/// the client's data socket to its slot (what that slot's socket held
/// before is dropped and counted).
pub fn serve_control(port: &mut SimPort, sockets: &SimSockets, bytes: &[u8], from: &SocketAddr) {
    let Some(mut outcome) = port.on_ctl(bytes, process_gone) else {
        return;
    };
    if let Some((slot, pid)) = outcome.attached {
        match sockets.attach(slot, pid) {
            Ok(stale) => port.drop_stale(slot, stale),
            Err(e) => {
                tracing::warn!(slot, pid, "cannot reach the client's data socket: {e}");
                port.detach(slot);
                outcome.reply.kind = crate::wire::CtlType::Error.to_wire();
            }
        }
    }
    if let Err(e) = sockets.reply(&outcome.reply.to_bytes(), from) {
        tracing::debug!("control answer not sent: {e}");
    }
}

/// Sends `datagram`, a MAD in its envelope, to the client in `slot`
/// without waiting: a client that does not read loses it, one that has
/// gone is detached.
pub fn send_to_client(
    port: &mut SimPort,
    sockets: &SimSockets,
    slot: usize,
    datagram: &[u8; REQUEST_LEN],
) {
    match sockets.send(slot, datagram) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            ibtca_log::guest_warn!(slot, "client does not read: MAD dropped");
        }
        Err(e) => {
            if let Some(c) = port.detach(slot) {
                tracing::info!(slot, pid = c.pid, "client gone ({e}): detached");
            }
        }
    }
}
