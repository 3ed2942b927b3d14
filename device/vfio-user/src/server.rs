//! The vfio-user socket loop: accept one client, frame its messages, call
//! the [`Backend`], reply; when the client goes away, wait for the next one.
//!
//! Receiving spins for a short while after each message, polling with
//! non-blocking `recvmsg`, before it blocks in `recvmsg`: for as long as
//! the thread's adaptive idle budget says, at most `ServerConfig::spin`
//! (`ibtca_sched::idle_budget`). A trapped BAR access is a synchronous
//! round trip for the guest, and waking a blocked thread on another CPU
//! costs more than the access itself. Each message is one `recvmsg` (header
//! and payload together, plus any fds) and each reply one `write`; no epoll
//! on the hot path.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ibtca_link::socket_file::{self, SocketId};
use ibtca_sched::IdleBudget;
use vmm_sys_util::epoll::{ControlOperation, Epoll, EpollEvent, EventSet};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::socket::{recv_with_fds, ShutdownHandle};
use super::wire::{self, Command, Header, HEADER_SIZE};
use super::{Backend, Errno};

/// Tunables of the server loop.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The most the server polls the socket after a message before it
    /// blocks (the limit of its adaptive idle budget).
    pub spin: Duration,
    /// How long a reply may wait for the client to drain the socket.
    pub write_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            spin: Duration::from_micros(50),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// Counters of the current server, for logs and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Clients accepted.
    pub connections: u64,
    /// Messages handled.
    pub messages: u64,
    /// Messages answered with an error (or dropped errors of NO_REPLY ones).
    pub errors: u64,
}

/// Why a connection ended.
#[derive(Debug)]
enum End {
    /// The client closed the socket.
    Closed,
    /// Shutdown was requested.
    Shutdown,
    /// The stream cannot be framed any more, or I/O failed.
    Broken(String),
}

const TOKEN_SOCKET: u64 = 1;
const TOKEN_SHUTDOWN: u64 = 2;
const RECV_CHUNK: usize = 64 * 1024;

/// A vfio-user server bound to a socket path.
pub struct Server {
    listener: UnixListener,
    path: PathBuf,
    /// The socket file bound, removed on drop if still there.
    id: SocketId,
    shutdown: ShutdownHandle,
    config: ServerConfig,
    stats: ServerStats,
}

impl Server {
    /// Binds `path`. A stale socket file nobody listens on is replaced; a live
    /// one or any other file is an error.
    pub fn bind(path: &Path, config: ServerConfig) -> io::Result<Self> {
        let (listener, id) = socket_file::bind_listener(path)?;
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            path: path.to_path_buf(),
            id,
            shutdown: ShutdownHandle {
                stopped: Arc::new(AtomicBool::new(false)),
                wake: Arc::new(EventFd::new(EFD_NONBLOCK)?),
                active: Arc::new(Mutex::new(None)),
            },
            config,
            stats: ServerStats::default(),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle that stops [`Server::serve`] from another thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.shutdown.clone()
    }

    /// Counters so far.
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    /// Serves clients one after the other until shutdown is requested.
    pub fn serve(&mut self, backend: &mut dyn Backend) -> io::Result<()> {
        let epoll = Epoll::new()?;
        epoll.ctl(
            ControlOperation::Add,
            self.listener.as_raw_fd(),
            EpollEvent::new(EventSet::IN, TOKEN_SOCKET),
        )?;
        epoll.ctl(
            ControlOperation::Add,
            self.shutdown.wake.as_raw_fd(),
            EpollEvent::new(EventSet::IN, TOKEN_SHUTDOWN),
        )?;
        tracing::info!(socket = %self.path.display(), "waiting for a vfio-user client");
        loop {
            if wait(&epoll, -1)? == Some(TOKEN_SHUTDOWN) || self.shutdown.is_stopped() {
                return Ok(());
            }
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            self.stats.connections += 1;
            tracing::info!("client connected");
            let end = Connection::new(stream, &self.shutdown, &self.config, &mut self.stats)
                .map(|mut c| c.run(backend));
            *self
                .shutdown
                .active
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
            backend.disconnected();
            match end {
                Ok(End::Closed) => tracing::info!("client disconnected; waiting for the next one"),
                Ok(End::Shutdown) => {
                    tracing::info!("shutting down");
                    return Ok(());
                }
                Ok(End::Broken(why)) => {
                    tracing::warn!(%why, "connection dropped; waiting for the next client")
                }
                Err(e) => tracing::warn!(error = %e, "cannot set up the connection"),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        socket_file::remove_own(&self.path, self.id);
    }
}

/// Waits on `epoll` for up to `timeout_ms` (-1: forever); returns the token
/// of the first ready fd, or `None` on timeout.
fn wait(epoll: &Epoll, timeout_ms: i32) -> io::Result<Option<u64>> {
    let mut events = [EpollEvent::default(); 2];
    loop {
        match epoll.wait(timeout_ms, &mut events) {
            Ok(0) => return Ok(None),
            Ok(n) => {
                // Shutdown wins over data.
                let tokens = &events[..n];
                if tokens.iter().any(|e| e.data() == TOKEN_SHUTDOWN) {
                    return Ok(Some(TOKEN_SHUTDOWN));
                }
                return Ok(Some(tokens[0].data()));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// One client connection: receive buffer, fd bookkeeping, reply buffer.
struct Connection<'a> {
    stream: UnixStream,
    shutdown: &'a ShutdownHandle,
    config: &'a ServerConfig,
    stats: &'a mut ServerStats,
    /// Received bytes not yet consumed are `buf[start..end]`.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Stream offset of `buf[start]`.
    pos: u64,
    /// Bytes of an oversized message still to be thrown away.
    discard: u64,
    /// File descriptors, each batch with the stream offset of a byte of the
    /// message that carried it.
    fds: VecDeque<(u64, Vec<File>)>,
    out: Vec<u8>,
    negotiated: bool,
}

/// A framed message: header, payload range in `buf`, its fds.
struct Message {
    header: Header,
    payload: std::ops::Range<usize>,
    fds: Vec<File>,
}

impl<'a> Connection<'a> {
    fn new(
        stream: UnixStream,
        shutdown: &'a ShutdownHandle,
        config: &'a ServerConfig,
        stats: &'a mut ServerStats,
    ) -> io::Result<Self> {
        // Blocking socket: the spin phase asks for MSG_DONTWAIT explicitly;
        // a client that stops reading its replies times the write out.
        stream.set_nonblocking(false)?;
        stream.set_write_timeout(Some(config.write_timeout))?;
        *shutdown.active.lock().unwrap_or_else(|e| e.into_inner()) = Some(stream.try_clone()?);
        Ok(Connection {
            stream,
            shutdown,
            config,
            stats,
            buf: vec![0; wire::MAX_MSG_SIZE as usize + RECV_CHUNK],
            start: 0,
            end: 0,
            pos: 0,
            discard: 0,
            fds: VecDeque::new(),
            out: Vec::with_capacity(4096),
            negotiated: false,
        })
    }

    fn run(&mut self, backend: &mut dyn Backend) -> End {
        let mut budget = IdleBudget::new(self.config.spin);
        // When the buffer last ran out of whole messages.
        let mut idle_since: Option<Instant> = None;
        loop {
            if self.shutdown.is_stopped() {
                return End::Shutdown;
            }
            match self.next_message() {
                Ok(Some(msg)) => {
                    if let Some(since) = idle_since.take() {
                        budget.work_after(since.elapsed());
                    }
                    if let Err(e) = self.dispatch(backend, msg) {
                        return e;
                    }
                    continue;
                }
                Ok(None) => {}
                Err(end) => return end,
            }
            let now = Instant::now();
            let since = *idle_since.get_or_insert(now);
            let spinning = now.duration_since(since) < budget.spin();
            match self.fill(spinning) {
                Ok(true) => continue,
                Ok(false) if self.shutdown.is_stopped() => return End::Shutdown,
                Ok(false) => return End::Closed,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return End::Broken(format!("recvmsg: {e}")),
            }
        }
    }

    /// Receives one chunk, waiting for it unless `nonblocking`. Ok(false)
    /// when the client closed the socket.
    fn fill(&mut self, nonblocking: bool) -> io::Result<bool> {
        if self.buf.len() - self.end < RECV_CHUNK {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let (n, files) = recv_with_fds(&self.stream, &mut self.buf[self.end..], nonblocking)?;
        if n == 0 {
            return Ok(false);
        }
        if !files.is_empty() {
            // Linux stops a stream read right after the segment that carried
            // descriptors, and a sender passes them with the first segment of
            // its message: they belong to the message holding the last byte
            // read, not necessarily to the one the chunk starts with.
            let last_byte = self.pos + (self.end - self.start) as u64 + n as u64 - 1;
            self.fds.push_back((last_byte, files));
        }
        self.end += n;
        Ok(true)
    }

    /// Frames the next complete message in the buffer, if there is one.
    fn next_message(&mut self) -> Result<Option<Message>, End> {
        if self.discard > 0 {
            let n = self.discard.min((self.end - self.start) as u64);
            self.consume(n as usize);
            self.discard -= n;
            if self.discard > 0 {
                return Ok(None);
            }
        }
        let avail = self.end - self.start;
        if avail < HEADER_SIZE {
            return Ok(None);
        }
        let raw: &[u8; HEADER_SIZE] = self.buf[self.start..self.start + HEADER_SIZE]
            .try_into()
            .unwrap();
        let header = Header::parse(raw);
        let size = header.size as usize;
        if size < HEADER_SIZE {
            let why = format!("message size {} is smaller than a header", header.size);
            self.reply_error(&header, &Errno::inval(why.clone()));
            return Err(End::Broken(why));
        }
        if header.size > wire::MAX_MSG_SIZE {
            self.stats.messages += 1;
            self.reply_error(
                &header,
                &Errno::new(libc::E2BIG, format!("message of {} bytes", header.size)),
            );
            self.take_fds(self.pos, u64::from(header.size));
            self.discard = u64::from(header.size);
            return self.next_message();
        }
        if avail < size {
            return Ok(None);
        }
        let msg_pos = self.pos;
        let payload = self.start + HEADER_SIZE..self.start + size;
        self.start += size;
        self.pos += size as u64;
        Ok(Some(Message {
            header,
            payload,
            fds: self.take_fds(msg_pos, size as u64),
        }))
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.pos += n as u64;
        // Descriptors that arrived with bytes now gone belong to nobody.
        while self.fds.front().is_some_and(|(p, _)| *p < self.pos) {
            self.fds.pop_front();
        }
    }

    /// The descriptors that arrived with the message at `[pos, pos + len)`;
    /// older unclaimed ones are closed.
    fn take_fds(&mut self, pos: u64, len: u64) -> Vec<File> {
        let mut out = Vec::new();
        while let Some((p, _)) = self.fds.front() {
            if *p >= pos + len {
                break;
            }
            let (p, files) = self.fds.pop_front().unwrap();
            if p >= pos {
                out.extend(files);
            }
        }
        out
    }

    fn dispatch(&mut self, backend: &mut dyn Backend, msg: Message) -> Result<(), End> {
        self.stats.messages += 1;
        let header = msg.header;
        self.out.clear();
        // Reserve the header; its size is patched once the payload is known.
        Header::default().encode(&mut self.out);
        let payload = &self.buf[msg.payload.clone()];
        let mut reply_fd = None;
        let result = handle(
            backend,
            &header,
            payload,
            msg.fds,
            &mut self.out,
            &mut self.negotiated,
            &mut reply_fd,
        );
        match result {
            Ok(()) => {
                tracing::trace!(command = header.command, id = header.id, "ok");
                if header.no_reply() {
                    return Ok(());
                }
                let reply = Header {
                    id: header.id,
                    command: header.command,
                    size: self.out.len() as u32,
                    flags: wire::FLAG_TYPE_REPLY,
                    error: 0,
                };
                reply.encode_into(&mut self.out[..HEADER_SIZE]);
                let out = std::mem::take(&mut self.out);
                let r = match reply_fd {
                    Some(f) => self.send_with_fd(&out, f.as_raw_fd()),
                    None => self.send(&out),
                };
                self.out = out;
                r
            }
            Err(e) => {
                self.reply_error(&header, &e);
                Ok(())
            }
        }
    }

    fn reply_error(&mut self, header: &Header, e: &Errno) {
        self.stats.errors += 1;
        ibtca_log::guest_warn!(
            command = header.command,
            id = header.id,
            errno = e.errno,
            "{}",
            e.reason
        );
        if header.no_reply() {
            return;
        }
        let mut out = Vec::with_capacity(HEADER_SIZE);
        Header {
            id: header.id,
            command: header.command,
            size: HEADER_SIZE as u32,
            flags: wire::FLAG_TYPE_REPLY | wire::FLAG_ERROR,
            error: e.errno as u32,
        }
        .encode(&mut out);
        // A client that cannot take 16 bytes is gone; the read side notices.
        let _ = self.send(&out);
    }

    /// Writes `data` with one descriptor attached to its first byte.
    fn send_with_fd(&mut self, data: &[u8], fd: RawFd) -> Result<(), End> {
        match super::socket::send_with_fd(&self.stream, data, fd) {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => self.send(&data[n..]),
            Err(e) => Err(End::Broken(format!("sendmsg: {e}"))),
        }
    }

    /// Writes all of `data`; a client that does not drain its socket within
    /// the write timeout is dropped.
    fn send(&mut self, data: &[u8]) -> Result<(), End> {
        match self.stream.write_all(data) {
            Ok(()) => Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(End::Broken("client does not read its replies".into()))
            }
            Err(e) => Err(End::Broken(format!("write: {e}"))),
        }
    }
}

/// The capabilities we offer in the VERSION reply (kept short: QEMU reads the
/// reply into a buffer the size of its request).
fn capabilities_json() -> String {
    format!(
        "{{\"capabilities\":{{\"max_msg_fds\":{},\"max_data_xfer_size\":{},\"pgsizes\":4096,\"max_dma_maps\":{}}}}}",
        wire::MAX_MSG_FDS,
        wire::MAX_DATA_XFER,
        wire::MAX_DMA_MAPS
    )
}

fn no_fds(fds: &[File], what: &str) -> Result<(), Errno> {
    if fds.is_empty() {
        Ok(())
    } else {
        Err(Errno::inval(format!(
            "{what} takes no file descriptors, got {}",
            fds.len()
        )))
    }
}

/// Handles one command; appends the reply payload to `out`.
pub fn handle(
    backend: &mut dyn Backend,
    header: &Header,
    p: &[u8],
    fds: Vec<File>,
    out: &mut Vec<u8>,
    negotiated: &mut bool,
    reply_fd: &mut Option<std::sync::Arc<File>>,
) -> Result<(), Errno> {
    if header.flags & wire::FLAG_TYPE_MASK != wire::FLAG_TYPE_COMMAND {
        return Err(Errno::inval(format!(
            "message type {} is not a command",
            header.flags & 0xf
        )));
    }
    let Some(cmd) = Command::from_u16(header.command) else {
        return Err(Errno::new(
            libc::ENOSYS,
            format!("unknown command {}", header.command),
        ));
    };
    if cmd != Command::Version && !*negotiated {
        return Err(Errno::inval(format!("{cmd:?} before VERSION")));
    }
    match cmd {
        Command::Version => {
            no_fds(&fds, "VERSION")?;
            if header.no_reply() {
                return Err(Errno::inval("VERSION needs a reply"));
            }
            let v = wire::Version::parse(p)?;
            if v.major != 0 {
                return Err(Errno::new(
                    libc::ENOTSUP,
                    format!("protocol version {}.{}", v.major, v.minor),
                ));
            }
            if !v.json.is_empty() {
                serde_json::from_str::<serde_json::Value>(&v.json)
                    .map_err(|e| Errno::inval(format!("VERSION capabilities: {e}")))?;
            }
            tracing::info!(major = v.major, minor = v.minor, caps = %v.json, "client version");
            wire::Version {
                major: 0,
                minor: 0,
                json: capabilities_json(),
            }
            .encode(out);
            *negotiated = true;
        }
        Command::DmaMap => {
            let m = wire::DmaMap::parse(p)?;
            if fds.len() > 1 {
                return Err(Errno::inval(format!("DMA_MAP with {} fds", fds.len())));
            }
            backend.dma_map(&m, fds.into_iter().next())?;
        }
        Command::DmaUnmap => {
            no_fds(&fds, "DMA_UNMAP")?;
            let u = wire::DmaUnmap::parse(p)?;
            backend.dma_unmap(&u)?;
            u.encode(out);
        }
        Command::DeviceGetInfo => {
            no_fds(&fds, "DEVICE_GET_INFO")?;
            wire::DeviceInfo::parse_request(p)?;
            backend.device_info().encode(out);
        }
        Command::DeviceGetRegionInfo => {
            no_fds(&fds, "DEVICE_GET_REGION_INFO")?;
            let req = wire::RegionInfo::parse(p)?;
            if (req.argsz as usize) < wire::RegionInfo::SIZE {
                return Err(Errno::inval(format!(
                    "DEVICE_GET_REGION_INFO: argsz {}",
                    req.argsz
                )));
            }
            let mut info = backend.region_info(req.index)?;
            info.argsz = wire::RegionInfo::SIZE as u32;
            info.index = req.index;
            let mut caps = Vec::new();
            if let Some(m) = backend.region_mmap(req.index) {
                // The client learns the size it needs from argsz and asks
                // again; the capability and the file come with the reply
                // that has room for them.
                // cap_offset is valid in both replies: QEMU refuses a CAPS
                // flag whose offset points inside the struct.
                let cap = wire::sparse_mmap_cap(&m.areas);
                let needed = wire::RegionInfo::SIZE + cap.len();
                info.flags |= wire::REGION_FLAG_MMAP | wire::REGION_FLAG_CAPS;
                info.argsz = needed as u32;
                info.cap_offset = wire::RegionInfo::SIZE as u32;
                if req.argsz as usize >= needed {
                    caps = cap;
                    *reply_fd = Some(m.file);
                }
            }
            info.encode(out);
            out.extend_from_slice(&caps);
        }
        Command::DeviceGetIrqInfo => {
            no_fds(&fds, "DEVICE_GET_IRQ_INFO")?;
            let req = wire::IrqInfo::parse(p)?;
            let mut info = backend.irq_info(req.index)?;
            info.argsz = wire::IrqInfo::SIZE as u32;
            info.index = req.index;
            info.encode(out);
        }
        Command::DeviceSetIrqs => {
            let req = wire::SetIrqs::parse(p)?;
            if fds.len() > wire::MAX_MSG_FDS {
                return Err(Errno::inval("too many fds"));
            }
            backend.set_irqs(&req, fds)?;
        }
        Command::RegionRead => {
            no_fds(&fds, "REGION_READ")?;
            let (a, rest) = wire::RegionAccess::parse(p)?;
            if !rest.is_empty() {
                return Err(Errno::inval("REGION_READ carries data"));
            }
            if a.count > wire::MAX_DATA_XFER {
                return Err(Errno::new(
                    libc::E2BIG,
                    format!("REGION_READ of {} bytes", a.count),
                ));
            }
            a.encode(out);
            let at = out.len();
            out.resize(at + a.count as usize, 0);
            if let Err(e) = backend.region_read(a.region, a.offset, &mut out[at..]) {
                out.truncate(at);
                return Err(e);
            }
        }
        Command::RegionWrite => {
            no_fds(&fds, "REGION_WRITE")?;
            let (a, data) = wire::RegionAccess::parse(p)?;
            if a.count > wire::MAX_DATA_XFER {
                return Err(Errno::new(
                    libc::E2BIG,
                    format!("REGION_WRITE of {} bytes", a.count),
                ));
            }
            if data.len() != a.count as usize {
                return Err(Errno::inval(format!(
                    "REGION_WRITE count {} with {} data bytes",
                    a.count,
                    data.len()
                )));
            }
            backend.region_write(a.region, a.offset, data)?;
            a.encode(out);
        }
        Command::DeviceReset => {
            no_fds(&fds, "DEVICE_RESET")?;
            if !p.is_empty() {
                return Err(Errno::inval("DEVICE_RESET carries data"));
            }
            backend.reset()?;
        }
        Command::DeviceGetRegionIoFds
        | Command::DmaRead
        | Command::DmaWrite
        | Command::DirtyPages
        | Command::RegionWriteMulti => {
            return Err(Errno::new(
                libc::ENOTSUP,
                format!("{cmd:?} is not supported"),
            ));
        }
    }
    Ok(())
}
