//! A link connection's socket, Unix or TCP, and the listener it comes
//! from: one type for the session, the pipes and the writer, which use
//! only what both families do (read, write, shutdown, timeouts), and
//! [`LinkSocket::carries_files`] to tell whether a ring offer (files passed
//! with `SCM_RIGHTS`) can go over it.
//!
//! A TCP connection is set up for a link: `TCP_NODELAY` (a frame goes out
//! at once, not when Nagle's algorithm lets it), and keepalive probes plus
//! `TCP_USER_TIMEOUT`, so that a peer host that vanishes (cable pulled,
//! host down: no FIN, no RST) ends the connection within
//! [`TCP_DEAD_PEER`] and the link reconnects, as a Unix link does when
//! its peer process dies.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Deref;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use socket2::{Socket, TcpKeepalive};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use super::endpoint::TcpAddress;

/// How long a TCP link's peer may stay silent (no answer to keepalive
/// probes, or sent data unacknowledged) before the connection is dropped:
/// idle 2 s, then 3 probes 1 s apart; `TCP_USER_TIMEOUT` the same 5 s.
pub const TCP_DEAD_PEER: Duration = Duration::from_secs(5);
const KEEPALIVE_IDLE: Duration = Duration::from_secs(2);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
const KEEPALIVE_PROBES: u32 = 3;

/// One connection of a link.
#[derive(Debug)]
pub(crate) struct LinkSocket {
    socket: Socket,
    /// A Unix stream: can carry files (a ring offer).
    unix: bool,
}

impl LinkSocket {
    /// A Unix stream connection.
    pub fn unix(stream: UnixStream) -> Self {
        LinkSocket {
            socket: Socket::from(stream),
            unix: true,
        }
    }

    /// A TCP connection, set up for a link (module docs).
    pub fn tcp(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let socket = Socket::from(stream);
        let keepalive = TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL)
            .with_retries(KEEPALIVE_PROBES);
        socket.set_tcp_keepalive(&keepalive)?;
        socket.set_keepalive(true)?;
        socket.set_tcp_user_timeout(Some(TCP_DEAD_PEER))?;
        Ok(LinkSocket {
            socket,
            unix: false,
        })
    }

    /// Connects to the first of `addrs` that answers, each attempt
    /// bounded by `timeout` (an unreachable host would otherwise hold the
    /// attempt for minutes).
    pub fn connect_tcp(addrs: &[SocketAddr], timeout: Duration) -> io::Result<Self> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
        for addr in addrs {
            match TcpStream::connect_timeout(addr, timeout) {
                Ok(stream) => return LinkSocket::tcp(stream),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Whether files can be passed over it (Unix only).
    pub fn carries_files(&self) -> bool {
        self.unix
    }

    /// A second handle on the same connection.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(LinkSocket {
            socket: self.socket.try_clone()?,
            unix: self.unix,
        })
    }
}

impl Deref for LinkSocket {
    type Target = Socket;

    fn deref(&self) -> &Socket {
        &self.socket
    }
}

impl AsRawFd for LinkSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

impl Read for &LinkSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&self.socket).read(buf)
    }

    fn read_vectored(&mut self, bufs: &mut [IoSliceMut<'_>]) -> io::Result<usize> {
        (&self.socket).read_vectored(bufs)
    }
}

/// Writes go out as `sendmsg` (socket2's vectored send, with
/// `MSG_NOSIGNAL`), the call the sandbox allows a link (docs/sandbox.md),
/// not `sendto`.
impl Write for &LinkSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&self.socket).write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        (&self.socket).write_vectored(bufs)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ScmSocket for LinkSocket {
    fn socket_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

/// The listen side's socket, non-blocking (the supervisor waits in epoll).
#[derive(Debug)]
pub(crate) enum LinkListener {
    /// A Unix socket file.
    Unix(UnixListener),
    /// A TCP address.
    Tcp(TcpListener),
}

impl LinkListener {
    /// Binds `address` (`SO_REUSEADDR`, as std sets it: a restarted
    /// process binds again while the old connection is in TIME_WAIT).
    pub fn bind_tcp(address: &TcpAddress) -> io::Result<Self> {
        let listener = TcpListener::bind((address.host.as_str(), address.port))
            .map_err(|e| io::Error::new(e.kind(), format!("bind tcp:{address}: {e}")))?;
        listener.set_nonblocking(true)?;
        Ok(LinkListener::Tcp(listener))
    }

    /// Accepts one waiting connection (`WouldBlock` if none), blocking.
    pub fn accept(&self) -> io::Result<LinkSocket> {
        match self {
            LinkListener::Unix(l) => {
                let (stream, _) = l.accept()?;
                stream.set_nonblocking(false)?;
                Ok(LinkSocket::unix(stream))
            }
            LinkListener::Tcp(l) => {
                let (stream, peer) = l.accept()?;
                tracing::debug!(%peer, "link TCP peer connected");
                stream.set_nonblocking(false)?;
                LinkSocket::tcp(stream)
            }
        }
    }
}

impl AsRawFd for LinkListener {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            LinkListener::Unix(l) => l.as_raw_fd(),
            LinkListener::Tcp(l) => l.as_raw_fd(),
        }
    }
}
