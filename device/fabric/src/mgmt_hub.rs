//! The management wire's hub: a learning Ethernet switch for the guests'
//! virtio-net NICs, speaking QEMU's stream-netdev framing (each frame
//! preceded by its length, 4 bytes big-endian) on one Unix socket that
//! every guest's `-netdev stream` connects to. QEMU's stream and dgram
//! netdevs are point to point; this joins any number of them.
//!
//! One thread polls the listener and every client. A client that
//! connected before a frame was sent is a port when the frame is
//! switched (connections are accepted before frames are read). Frames go
//! to the port
//! that last sent from the destination MAC, broadcast, multicast and
//! unknown destinations to every other port. Clients are hostile or may
//! die: a length above [`MAX_FRAME`] disconnects its sender, a frame
//! shorter than an Ethernet header is dropped, and a client that stops
//! reading loses frames once [`OUT_LIMIT`] bytes wait for it (a wire drops
//! what it cannot carry), so nobody can stall the others, and the MAC table
//! holds at most [`MAX_MACS`] entries.

use std::collections::HashMap;
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

/// Largest frame accepted: QEMU's own limit for a stream-netdev packet
/// (`NET_BUFSIZE`, 4 KiB of headroom over a 64 KiB frame).
pub const MAX_FRAME: usize = 4096 + 65536;
/// Shortest frame forwarded: destination, source and EtherType.
pub const MIN_FRAME: usize = 14;
/// Bytes queued for one client before frames to it are dropped.
pub const OUT_LIMIT: usize = 1 << 20;
/// Most MACs learnt: a client sending from ever new source MACs cannot
/// grow the table without bound; once it is full, frames to MACs not in
/// it are flooded, as to any unknown destination.
pub const MAX_MACS: usize = 4096;

/// Counters of the hub's life, logged as clients come and go.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HubStats {
    /// Frames received and forwarded (to one or more ports).
    pub frames: u64,
    /// Frames shorter than an Ethernet header, dropped.
    pub runts: u64,
    /// Frame copies dropped because their port's queue was full.
    pub queue_full: u64,
    /// Clients disconnected for a length above [`MAX_FRAME`].
    pub bad_lengths: u64,
}

struct Client {
    id: u64,
    stream: UnixStream,
    /// Bytes read and not yet a whole frame.
    input: Vec<u8>,
    /// Bytes to write, from `sent` on.
    output: Vec<u8>,
    sent: usize,
}

impl Client {
    fn queued(&self) -> usize {
        self.output.len() - self.sent
    }

    /// Writes what it can without blocking; false when the peer is gone.
    fn flush(&mut self) -> bool {
        while self.sent < self.output.len() {
            match self.stream.write(&self.output[self.sent..]) {
                Ok(0) => return false,
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if self.sent == self.output.len() {
            self.output.clear();
            self.sent = 0;
        } else if self.sent > OUT_LIMIT {
            self.output.drain(..self.sent);
            self.sent = 0;
        }
        true
    }
}

/// The hub: its listening socket, its clients and the MAC table.
pub struct Hub {
    listener: UnixListener,
    clients: Vec<Client>,
    next_id: u64,
    /// Source MAC → the client it was last seen from.
    macs: HashMap<[u8; 6], u64>,
    stats: HubStats,
}

/// What one frame header says.
#[derive(Debug, PartialEq, Eq)]
enum Framing {
    /// Not enough bytes yet.
    Partial,
    /// A frame of this many bytes follows the 4-byte length.
    Frame(usize),
    /// A length no Ethernet frame has.
    TooLong(u32),
}

fn framing(input: &[u8]) -> Framing {
    let Some(head) = input.get(..4) else {
        return Framing::Partial;
    };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    match usize::try_from(len) {
        Ok(n) if n <= MAX_FRAME => {
            if input.len() >= 4 + n {
                Framing::Frame(n)
            } else {
                Framing::Partial
            }
        }
        _ => Framing::TooLong(len),
    }
}

fn mac(bytes: &[u8]) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&bytes[..6]);
    m
}

impl Hub {
    /// Listens on `path`. A stale socket file (nothing accepting) is
    /// replaced; a live one is an error, so two hubs never share a wire,
    /// and any other file is an error too.
    pub fn bind(path: &Path) -> io::Result<Hub> {
        let (listener, _) = ibtca_link::socket_file::bind_listener(path)?;
        listener.set_nonblocking(true)?;
        Ok(Hub {
            listener,
            clients: Vec::new(),
            next_id: 1,
            macs: HashMap::new(),
            stats: HubStats::default(),
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> HubStats {
        self.stats
    }

    /// Serves until an I/O error on the listener.
    pub fn run(&mut self) -> io::Result<()> {
        loop {
            self.poll_once(-1)?;
        }
    }

    /// Waits up to `timeout_ms` (-1: for ever) for something to do and
    /// does it: accepts clients, forwards their frames, drops the dead.
    pub fn poll_once(&mut self, timeout_ms: i32) -> io::Result<()> {
        let mut fds = Vec::with_capacity(self.clients.len() + 1);
        fds.push(libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        for c in &self.clients {
            let mut events = libc::POLLIN;
            if c.queued() > 0 {
                events |= libc::POLLOUT;
            }
            fds.push(libc::pollfd {
                fd: c.stream.as_raw_fd(),
                events,
                revents: 0,
            });
        }
        let nfds = libc::nfds_t::try_from(fds.len()).map_err(io::Error::other)?;
        // SAFETY: `fds` is a live, exclusively borrowed array of `nfds`
        // pollfd structs; poll(2) writes only their `revents`.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), nfds, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        let ready: Vec<(u64, i16)> = fds[1..]
            .iter()
            .zip(&self.clients)
            .filter(|(f, _)| f.revents != 0)
            .map(|(f, c)| (c.id, f.revents))
            .collect();
        // Accepted before any frame is read: a port plugged in before a
        // frame was sent receives it, as on a wire.
        if fds[0].revents & libc::POLLIN != 0 {
            self.accept_all()?;
        }
        for (id, revents) in ready {
            let keep = if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                self.read_from(id)
            } else {
                true
            };
            let keep = keep && self.client(id).is_none_or(Client::flush);
            if !keep {
                self.drop_client(id);
            }
        }
        Ok(())
    }

    fn client(&mut self, id: u64) -> Option<&mut Client> {
        self.clients.iter_mut().find(|c| c.id == id)
    }

    fn accept_all(&mut self) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(true)?;
                    let id = self.next_id;
                    self.next_id += 1;
                    tracing::info!(client = id, clients = self.clients.len() + 1, "connected");
                    self.clients.push(Client {
                        id,
                        stream,
                        input: Vec::new(),
                        output: Vec::new(),
                        sent: 0,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // A client that went away before it was accepted.
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads what client `id` sent and forwards its whole frames; false
    /// when it is gone or broke the framing.
    fn read_from(&mut self, id: u64) -> bool {
        let mut buf = [0u8; 65536];
        // A bounded share per poll, so a fast sender cannot starve the rest.
        for _ in 0..16 {
            let Some(c) = self.client(id) else {
                return false;
            };
            match c.stream.read(&mut buf) {
                Ok(0) => return false,
                Ok(n) => c.input.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
            if !self.forward_frames(id) {
                return false;
            }
        }
        true
    }

    fn forward_frames(&mut self, id: u64) -> bool {
        let Some(c) = self.client(id) else {
            return false;
        };
        let mut input = std::mem::take(&mut c.input);
        let mut at = 0;
        let ok = loop {
            match framing(&input[at..]) {
                Framing::Partial => break true,
                Framing::TooLong(len) => {
                    self.stats.bad_lengths += 1;
                    tracing::warn!(
                        client = id,
                        len,
                        max = MAX_FRAME,
                        "frame length too large: disconnecting the client"
                    );
                    break false;
                }
                Framing::Frame(n) => {
                    self.switch_frame(id, &input[at..at + 4 + n]);
                    at += 4 + n;
                }
            }
        };
        input.drain(..at);
        if let Some(c) = self.client(id) {
            c.input = input;
        }
        ok
    }

    /// Learns the source of `wire` (length and frame) from client `from`
    /// and queues it for its destination port(s).
    fn switch_frame(&mut self, from: u64, wire: &[u8]) {
        let frame = &wire[4..];
        if frame.len() < MIN_FRAME {
            self.stats.runts += 1;
            return;
        }
        self.stats.frames += 1;
        let (dst, src) = (mac(&frame[..6]), mac(&frame[6..12]));
        if src[0] & 1 == 0 && (self.macs.len() < MAX_MACS || self.macs.contains_key(&src)) {
            self.macs.insert(src, from);
        }
        let to = if dst[0] & 1 == 0 {
            self.macs.get(&dst).copied()
        } else {
            None
        };
        for c in self.clients.iter_mut() {
            if c.id == from || to.is_some_and(|t| t != c.id) {
                continue;
            }
            if c.queued() + wire.len() > OUT_LIMIT {
                self.stats.queue_full += 1;
                continue;
            }
            c.output.extend_from_slice(wire);
        }
        let ids: Vec<u64> = self
            .clients
            .iter()
            .filter(|c| c.queued() > 0)
            .map(|c| c.id)
            .collect();
        for id in ids {
            if self.client(id).is_some_and(|c| !c.flush()) {
                self.drop_client(id);
            }
        }
    }

    fn drop_client(&mut self, id: u64) {
        let before = self.clients.len();
        self.clients.retain(|c| c.id != id);
        if self.clients.len() == before {
            return;
        }
        self.macs.retain(|_, c| *c != id);
        tracing::info!(
            client = id,
            clients = self.clients.len(),
            frames = self.stats.frames,
            runts = self.stats.runts,
            queue_full = self.stats.queue_full,
            bad_lengths = self.stats.bad_lengths,
            "disconnected"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(s: &mut UnixStream, frame: &[u8]) {
        let len = u32::try_from(frame.len()).unwrap().to_be_bytes();
        s.write_all(&len).unwrap();
        s.write_all(frame).unwrap();
    }

    #[test]
    fn a_client_that_connected_before_a_frame_was_sent_receives_it() {
        let dir = std::env::temp_dir().join(format!("ibtca-hub-order-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("hub.sock");
        let mut hub = Hub::bind(&path).unwrap();
        let mut a = UnixStream::connect(&path).unwrap();
        hub.poll_once(1000).unwrap();
        assert_eq!(hub.clients.len(), 1, "a accepted");
        // b waits in the backlog while a's broadcast is on its way: one
        // poll finds both, and b is a port by the time the frame is read.
        let mut b = UnixStream::connect(&path).unwrap();
        let mut frame = vec![0xff; 6];
        frame.extend_from_slice(&[0x52, 0x54, 0, 0, 0, 1, 0x88, 0xb5]);
        frame.extend_from_slice(b"to every port");
        send(&mut a, &frame);
        hub.poll_once(1000).unwrap();
        assert_eq!(hub.clients.len(), 2, "b accepted");
        b.set_nonblocking(true).unwrap();
        let mut got = vec![0u8; 4 + frame.len()];
        b.read_exact(&mut got)
            .expect("the frame already waits for b");
        assert_eq!(&got[4..], &frame[..]);
        assert_eq!(hub.stats().frames, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn framing_reads_big_endian_lengths_and_refuses_huge_ones() {
        assert_eq!(framing(&[0, 0]), Framing::Partial);
        assert_eq!(framing(&[0, 0, 0, 2, 9]), Framing::Partial);
        assert_eq!(framing(&[0, 0, 0, 2, 9, 9, 7]), Framing::Frame(2));
        assert_eq!(framing(&[0, 0, 0, 0]), Framing::Frame(0));
        assert_eq!(
            framing(&[0xff, 0xff, 0xff, 0xff]),
            Framing::TooLong(u32::MAX)
        );
        let over = u32::try_from(MAX_FRAME + 1).unwrap().to_be_bytes();
        assert_eq!(framing(&over), Framing::TooLong(u32::from_be_bytes(over)));
        let most = u32::try_from(MAX_FRAME).unwrap().to_be_bytes();
        assert_eq!(
            framing(&most),
            Framing::Partial,
            "the largest frame is waited for"
        );
    }
}
