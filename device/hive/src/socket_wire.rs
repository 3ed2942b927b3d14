//! One port's link to a node outside the hive, in the Unix-socket link
//! protocol (`ibtca_protocol::link`, as `ibtca_link::Link` speaks it),
//! driven by the hive's event loop: non-blocking socket, no thread.
//!
//! - Connection: `listen:PATH` accepts one peer at a time; `connect:PATH`
//!   retries with a 50 ms → 1 s backoff. Each side sends its `Hello`
//!   (announcing no shared ring: frames stay on the socket); a peer that
//!   sends no `Hello` within the timeout, a wrong version, a malformed or
//!   oversized frame, or a `RingOffer`, is dropped.
//! - Flow control: the peer may send [`DEFAULT_CREDITS`] packets per data
//!   VL at first; the hive hands each packet on at once, so its buffer is
//!   free again right away, and the credits go back in a `Credit` frame
//!   once half a buffer is owed. What this end sends waits for the peer's
//!   credits per data VL (VL15 needs none), in a bounded queue per wire
//!   ([`ibtca_link::QUEUE_CAPACITY`] packets; beyond it, dropped and
//!   counted). Queued data VLs take turns, lowest first; the SM's VL
//!   arbitration tables are not applied on these wires.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ibtca_link::socket_file::{self, SocketId};
use ibtca_link::{LinkEndpoint, LinkEvent, LocalPort, MAX_BODY, NUM_VLS, QUEUE_CAPACITY, VL15};
use ibtca_protocol::encoded;
use ibtca_protocol::link::{split_frame, Frame, Hello, LINK_PROTOCOL_VERSION};

/// Receive buffer per data VL granted to the peer (as a device's).
pub const DEFAULT_CREDITS: u16 = 1024;
/// How long a peer may take to send its `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// First and last wait between connection attempts.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(50), Duration::from_secs(1));
/// Bytes asked of one read.
const READ_CHUNK: usize = 64 * 1024;
/// Unsent bytes beyond which what is sent is dropped (a peer not reading).
const WRITE_LIMIT: usize = 16 << 20;

/// Counters of one socket wire.
#[derive(Debug, Default, Clone, Copy)]
pub struct WireCounts {
    /// Packets dropped on the way out: down, queue full, peer not reading.
    pub tx_dropped: u64,
    /// Connections dropped for a protocol violation or a silent peer.
    pub rejected: u64,
}

enum Side {
    Listen {
        listener: UnixListener,
        path: PathBuf,
        id: SocketId,
    },
    Connect {
        path: PathBuf,
        next_try: Instant,
        backoff: Duration,
    },
    /// The node is powered off: nothing listens, nothing connects.
    Off(LinkEndpoint),
}

struct Conn {
    stream: UnixStream,
    since: Instant,
    up: bool,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    /// Credits the peer granted, per VL.
    credits: [u32; NUM_VLS],
    /// Buffers freed since the last `Credit` frame, per VL.
    owed: [u32; NUM_VLS],
    queued: [VecDeque<Vec<u8>>; NUM_VLS],
    queued_total: usize,
}

/// A wire to a node outside the hive.
pub struct SocketWire {
    local: LocalPort,
    side: Side,
    conn: Option<Conn>,
    /// Counters.
    pub counts: WireCounts,
}

impl SocketWire {
    /// Binds a listen endpoint now; a connect endpoint tries at once. TCP
    /// endpoints are refused (`Unsupported`).
    pub fn new(endpoint: &LinkEndpoint, local: LocalPort) -> io::Result<Self> {
        Ok(SocketWire {
            local,
            side: Self::side(endpoint)?,
            conn: None,
            counts: WireCounts::default(),
        })
    }

    fn side(endpoint: &LinkEndpoint) -> io::Result<Side> {
        Ok(match endpoint {
            LinkEndpoint::Listen(path) => {
                let (listener, id) = socket_file::bind_listener(path)?;
                listener.set_nonblocking(true)?;
                Side::Listen {
                    listener,
                    path: path.clone(),
                    id,
                }
            }
            LinkEndpoint::Connect(path) => Side::Connect {
                path: path.clone(),
                next_try: Instant::now(),
                backoff: BACKOFF.0,
            },
            LinkEndpoint::ListenTcp(_) | LinkEndpoint::ConnectTcp(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("{endpoint}: a hive's outside wires are Unix sockets, not TCP"),
                ))
            }
        })
    }

    /// The node lost power: the connection is closed (the peer sees its
    /// link go down) and a listening socket closed and removed (the peer's
    /// reconnects are refused) until [`SocketWire::power_on`]. The node's
    /// side hears nothing.
    pub fn power_off(&mut self) {
        let endpoint = match &self.side {
            Side::Listen { path, id, .. } => {
                socket_file::remove_own(path, *id);
                LinkEndpoint::Listen(path.clone())
            }
            Side::Connect { path, .. } => LinkEndpoint::Connect(path.clone()),
            Side::Off(_) => return,
        };
        self.conn = None;
        self.side = Side::Off(endpoint);
    }

    /// The node is powered on as `local`: listens or connects again.
    pub fn power_on(&mut self, local: LocalPort) -> io::Result<()> {
        if let Side::Off(endpoint) = &self.side {
            self.side = Self::side(endpoint)?;
        }
        self.local = local;
        Ok(())
    }

    /// The LID this end announces in its next `Hello`.
    pub fn set_local_lid(&mut self, lid: u16) {
        self.local.lid = lid;
    }

    /// The descriptor to poll and the events wanted.
    pub fn poll_fd(&self) -> Option<(RawFd, libc::c_short)> {
        match (&self.conn, &self.side) {
            (Some(c), _) => {
                let out = if c.wbuf.is_empty() { 0 } else { libc::POLLOUT };
                Some((c.stream.as_raw_fd(), libc::POLLIN | out))
            }
            (None, Side::Listen { listener, .. }) => Some((listener.as_raw_fd(), libc::POLLIN)),
            (None, Side::Connect { .. } | Side::Off(_)) => None,
        }
    }

    /// When the wire wants to be woken without an event.
    pub fn deadline(&self) -> Option<Instant> {
        match (&self.conn, &self.side) {
            (Some(c), _) if !c.up => Some(c.since + HELLO_TIMEOUT),
            (Some(_), _) => None,
            (None, Side::Connect { next_try, .. }) => Some(*next_try),
            (None, Side::Listen { .. } | Side::Off(_)) => None,
        }
    }

    /// Does what is due: accept, connect, read, write, time out. Events
    /// for the port go to `events`.
    pub fn service(&mut self, now: Instant, events: &mut Vec<LinkEvent>) {
        if self.conn.is_none() {
            self.open(now);
        }
        let Some(conn) = self.conn.as_mut() else {
            return;
        };
        let result = conn.read(events).and_then(|()| conn.flush());
        let result = match result {
            Ok(()) if !conn.up && now >= conn.since + HELLO_TIMEOUT => Err("no Hello".into()),
            other => other,
        };
        if let Err(reason) = result {
            self.close(reason, events);
        }
    }

    fn open(&mut self, now: Instant) {
        let stream = match &mut self.side {
            Side::Listen { listener, .. } => match listener.accept() {
                Ok((s, _)) => s,
                Err(_) => return,
            },
            Side::Connect {
                path,
                next_try,
                backoff,
            } => {
                if now < *next_try {
                    return;
                }
                match UnixStream::connect(&*path) {
                    Ok(s) => {
                        *backoff = BACKOFF.0;
                        s
                    }
                    Err(_) => {
                        *next_try = now + *backoff;
                        *backoff = (*backoff * 2).min(BACKOFF.1);
                        return;
                    }
                }
            }
            Side::Off(_) => return,
        };
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut conn = Conn {
            stream,
            since: now,
            up: false,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            credits: [0; NUM_VLS],
            owed: [0; NUM_VLS],
            queued: Default::default(),
            queued_total: 0,
        };
        conn.frame(&Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: self.local.node_guid,
            port: self.local.port,
            lid: self.local.lid,
            features: 0,
        }));
        self.conn = Some(conn);
    }

    fn close(&mut self, reason: String, events: &mut Vec<LinkEvent>) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if conn.up {
            tracing::info!(port = self.local.port, %reason, "hive wire down");
            events.push(LinkEvent::Down { reason });
        } else {
            self.counts.rejected += 1;
            tracing::warn!(port = self.local.port, %reason, "hive wire peer dropped before Hello");
        }
        if let Side::Connect { next_try, .. } = &mut self.side {
            *next_try = Instant::now() + BACKOFF.0;
        }
    }

    /// Sends `packet` (or drops and counts it: down, queue full).
    pub fn send(&mut self, packet: Vec<u8>) -> bool {
        let Some(conn) = self.conn.as_mut().filter(|c| c.up) else {
            self.counts.tx_dropped += 1;
            return false;
        };
        let vl = encoded::vl(&packet).unwrap_or(0);
        if vl != VL15
            && (conn.credits[usize::from(vl)] == 0 || !conn.queued[usize::from(vl)].is_empty())
        {
            if conn.queued_total >= QUEUE_CAPACITY {
                self.counts.tx_dropped += 1;
                return false;
            }
            conn.queued[usize::from(vl)].push_back(packet);
            conn.queued_total += 1;
            return true;
        }
        if conn.wbuf.len() > WRITE_LIMIT {
            self.counts.tx_dropped += 1;
            return false;
        }
        if vl != VL15 {
            conn.credits[usize::from(vl)] -= 1;
        }
        conn.frame(&Frame::Packet(packet));
        true
    }

    /// Writes what is pending (after a round of sends).
    pub fn flush(&mut self, events: &mut Vec<LinkEvent>) {
        if let Some(Err(reason)) = self.conn.as_mut().map(Conn::flush) {
            self.close(reason, events);
        }
    }
}

impl Drop for SocketWire {
    fn drop(&mut self) {
        if let Side::Listen { path, id, .. } = &self.side {
            socket_file::remove_own(path, *id);
        }
    }
}

impl Conn {
    fn frame(&mut self, frame: &Frame) {
        // Only a body over 4 GiB fails to encode.
        let _ = frame.encode(&mut self.wbuf);
    }

    fn flush(&mut self) -> Result<(), String> {
        while !self.wbuf.is_empty() {
            match self.stream.write(&self.wbuf) {
                Ok(0) => return Err("peer closed the connection".into()),
                Ok(n) => {
                    self.wbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        if self.wbuf.is_empty() && self.wbuf.capacity() > READ_CHUNK {
            self.wbuf = Vec::new();
        }
        Ok(())
    }

    fn read(&mut self, events: &mut Vec<LinkEvent>) -> Result<(), String> {
        loop {
            let start = self.rbuf.len();
            self.rbuf.resize(start + READ_CHUNK, 0);
            let n = match self.stream.read(&mut self.rbuf[start..]) {
                Ok(0) => {
                    self.rbuf.truncate(start);
                    return Err("peer closed the connection".into());
                }
                Ok(n) => n,
                Err(e) => {
                    self.rbuf.truncate(start);
                    return match e.kind() {
                        io::ErrorKind::WouldBlock => Ok(()),
                        io::ErrorKind::Interrupted => continue,
                        _ => Err(format!("read: {e}")),
                    };
                }
            };
            self.rbuf.truncate(start + n);
            let mut used = 0;
            while let Some((frame, len)) =
                split_frame(&self.rbuf[used..], MAX_BODY).map_err(|e| e.to_string())?
            {
                let frame = frame.decode().map_err(|e| e.to_string())?;
                used += len;
                self.handle(frame, events)?;
            }
            self.rbuf.drain(..used);
            if self.rbuf.is_empty() {
                self.rbuf = Vec::new();
            }
        }
    }

    fn handle(&mut self, frame: Frame, events: &mut Vec<LinkEvent>) -> Result<(), String> {
        match frame {
            Frame::Hello(h) if !self.up => {
                if h.version != LINK_PROTOCOL_VERSION {
                    return Err(format!("peer speaks link protocol {}", h.version));
                }
                self.up = true;
                for vl in 0..NUM_VLS {
                    if vl != usize::from(VL15) {
                        self.credit(vl, DEFAULT_CREDITS);
                    }
                }
                events.push(LinkEvent::Up {
                    peer: LocalPort {
                        node_guid: h.node_guid,
                        port: h.port,
                        lid: h.lid,
                    },
                });
                Ok(())
            }
            _ if !self.up => Err("first frame is not a Hello".into()),
            Frame::Hello(_) => Err("second Hello".into()),
            Frame::RingOffer { .. } => Err("ring offered, none announced".into()),
            Frame::LinkState(_) => Ok(()),
            Frame::Credit { vl, credits } => {
                if let Some(c) = self.credits.get_mut(usize::from(vl)) {
                    *c = c.saturating_add(u32::from(credits));
                }
                self.send_queued(usize::from(vl));
                Ok(())
            }
            Frame::Packet(packet) => {
                let vl = usize::from(encoded::vl(&packet).unwrap_or(0));
                if vl != usize::from(VL15) {
                    // Handed on at once: the buffer is free again.
                    self.owed[vl] += 1;
                    if self.owed[vl] >= u32::from(DEFAULT_CREDITS / 2) {
                        let n = std::mem::take(&mut self.owed[vl]);
                        self.credit(vl, u16::try_from(n).unwrap_or(u16::MAX));
                    }
                }
                events.push(LinkEvent::Packet(packet));
                Ok(())
            }
        }
    }

    /// Grants the peer `n` more packets on `vl`.
    fn credit(&mut self, vl: usize, n: u16) {
        let vl = u8::try_from(vl).unwrap_or(0);
        self.frame(&Frame::Credit { vl, credits: n });
    }

    fn send_queued(&mut self, vl: usize) {
        let Some(queue) = self.queued.get_mut(vl) else {
            return;
        };
        while self.credits[vl] > 0 {
            let Some(packet) = queue.pop_front() else {
                break;
            };
            self.credits[vl] -= 1;
            self.queued_total -= 1;
            let _ = Frame::Packet(packet).encode(&mut self.wbuf);
        }
    }
}
