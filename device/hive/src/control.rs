//! The hive's control socket, served on the hive's own thread: one
//! command per line, one reply line each (`ok ...` or `error ...`), as a
//! switch's control socket (`ibtca_agents::control_socket`) speaks, but
//! non-blocking in the hive's `poll(2)`:
//!
//! ```text
//! inspect   ok {"nodes":[{"name","kind","guid","lid","sm_lid","traps",
//!           "ports":[{"port","up","state","counters":{"PortXmitData":N,...}}]}]}
//! link NODE PORT down|up
//!           ok   (the in-memory wire at NODE's PORT: both ends see the
//!                link go down, or come up again)
//! switch NODE down|up
//!           ok   (hosted switch NODE powered off: every link of it down
//!                at both ends, its state gone; or on again)
//! ```
//!
//! A client cannot stall the hive: the listening socket and every
//! connection are non-blocking; a reply waits in memory until the client
//! reads it, and the client's next line is not read before. A line over [`MAX_LINE`] bytes ends its connection; beyond
//! [`MAX_CLIENTS`] connections the oldest is closed.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use ibtca_link::socket_file::{self, SocketId};

/// Longest command line accepted.
pub const MAX_LINE: usize = 1024;
/// Connections served at once.
pub const MAX_CLIENTS: usize = 8;

struct Client {
    stream: UnixStream,
    input: Vec<u8>,
    output: Vec<u8>,
    /// Close once the lines read are answered and written (a line too
    /// long, or the client shut its side).
    closing: bool,
}

/// The listening socket and its connections.
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
    id: SocketId,
    clients: Vec<Client>,
}

impl ControlSocket {
    /// Binds `path` (a stale socket file nobody listens on is replaced).
    pub fn bind(path: &Path) -> io::Result<ControlSocket> {
        let (listener, id) = socket_file::bind_listener(path)?;
        listener.set_nonblocking(true)?;
        Ok(ControlSocket {
            listener,
            path: path.to_path_buf(),
            id,
            clients: Vec::new(),
        })
    }

    /// The descriptors to poll: the listener, then each connection (for
    /// reading, and for writing while a reply waits).
    pub fn poll_fds(&self) -> impl Iterator<Item = libc::pollfd> + '_ {
        let listener = libc::pollfd {
            fd: self.listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        std::iter::once(listener).chain(self.clients.iter().map(|c| libc::pollfd {
            fd: c.stream.as_raw_fd(),
            events: if c.output.is_empty() {
                libc::POLLIN
            } else {
                libc::POLLIN | libc::POLLOUT
            },
            revents: 0,
        }))
    }

    /// Serves what `fds` ([`ControlSocket::poll_fds`]'s, polled) say is
    /// ready, answering each command line with `execute(line)`.
    pub fn service(&mut self, fds: &[libc::pollfd], execute: &mut dyn FnMut(&str) -> String) {
        if fds.iter().all(|f| f.revents == 0) {
            return;
        }
        let ready: Vec<bool> = fds.iter().skip(1).map(|f| f.revents != 0).collect();
        let mut keep = Vec::with_capacity(self.clients.len());
        for (i, mut c) in std::mem::take(&mut self.clients).into_iter().enumerate() {
            if ready.get(i).copied().unwrap_or(false) && !serve(&mut c, execute) {
                continue;
            }
            keep.push(c);
        }
        self.clients = keep;
        if fds.first().is_some_and(|f| f.revents != 0) {
            self.accept();
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if self.clients.len() >= MAX_CLIENTS {
                        self.clients.remove(0);
                    }
                    self.clients.push(Client {
                        stream,
                        input: Vec::new(),
                        output: Vec::new(),
                        closing: false,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        socket_file::remove_own(&self.path, self.id);
    }
}

/// Writes what waits for `c`, answers its next whole line, reads more
/// only when no reply waits and no whole line is left (so a client that
/// does not read holds one reply, and its input stays under
/// [`MAX_LINE`] plus one read); false once the connection is done.
fn serve(c: &mut Client, execute: &mut dyn FnMut(&str) -> String) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        while !c.output.is_empty() {
            match c.stream.write(&c.output) {
                Ok(0) => return false,
                Ok(n) => {
                    c.output.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        if let Some(end) = c.input.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = c.input.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            tracing::debug!(command = line.trim(), "control");
            c.output.extend_from_slice(execute(line.trim()).as_bytes());
            c.output.push(b'\n');
            continue;
        }
        if c.closing {
            return false;
        }
        if c.input.len() > MAX_LINE {
            c.output.extend_from_slice(b"error line too long\n");
            c.input.clear();
            c.closing = true;
            continue;
        }
        match c.stream.read(&mut buf) {
            Ok(0) => c.closing = true,
            Ok(n) => c.input.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
}
