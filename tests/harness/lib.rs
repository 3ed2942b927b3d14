//! Test harness: a vfio-user client that drives an ibtca server the way QEMU
//! does (version negotiation, region info, config and BAR access, DMA_MAP
//! with a memfd, SET_IRQS with eventfds), plus raw access for malformed
//! messages, and helpers to run a server in-process or as a binary.
//!
//! The client writes its own messages byte by byte from the vfio-user
//! specification, so the server is not tested against its own encoder.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use ibtca_device::tca::Tca;
use ibtca_device::vfio_user::{Server, ServerConfig};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

pub mod capture;
pub mod console;
pub mod datagram;
pub mod device_process;
pub mod drdma;
pub mod fabric;
pub mod fast_reg;
pub mod guest_boot;
pub mod guest_fabric;
pub mod host_sm;
pub mod ib_diags;
pub mod kverbs;
pub mod launcher;
pub mod links;
pub mod netns;
pub mod own_agent;
pub mod pair;
pub mod peer_death;
pub mod qp_retry;
pub mod raw_port;
pub mod retries;
pub mod script_cli;
pub mod sim_guest;
pub mod sm_client;
pub mod sm_nodes;
pub mod vm;
pub mod vm_lock;

/// vfio-user command numbers (from the specification).
pub mod cmd {
    pub const VERSION: u16 = 1;
    pub const DMA_MAP: u16 = 2;
    pub const DMA_UNMAP: u16 = 3;
    pub const DEVICE_GET_INFO: u16 = 4;
    pub const DEVICE_GET_REGION_INFO: u16 = 5;
    pub const DEVICE_GET_IRQ_INFO: u16 = 7;
    pub const DEVICE_SET_IRQS: u16 = 8;
    pub const REGION_READ: u16 = 9;
    pub const REGION_WRITE: u16 = 10;
    pub const DMA_READ: u16 = 11;
    pub const DEVICE_RESET: u16 = 13;
}

/// Header flag: no reply wanted.
pub const NO_REPLY: u32 = 0x10;
/// Header flag: error reply.
pub const ERROR: u32 = 0x20;

/// SET_IRQS flags.
pub mod irq {
    pub const DATA_NONE: u32 = 1;
    pub const DATA_BOOL: u32 = 2;
    pub const DATA_EVENTFD: u32 = 4;
    pub const ACTION_MASK: u32 = 8;
    pub const ACTION_UNMASK: u32 = 16;
    pub const ACTION_TRIGGER: u32 = 32;
    pub const MSIX: u32 = 2;
    pub const ERR: u32 = 3;
}

/// vfio PCI region index of config space.
pub const CONFIG: u32 = 7;

/// A reply as received.
#[derive(Debug, Clone)]
pub struct Reply {
    pub id: u16,
    pub command: u16,
    pub flags: u32,
    pub error: u32,
    pub payload: Vec<u8>,
}

impl Reply {
    /// The errno if this is an error reply.
    pub fn errno(&self) -> Option<i32> {
        (self.flags & ERROR != 0).then_some(self.error as i32)
    }

    /// Panics unless this is a success reply; returns the payload.
    pub fn ok(self) -> Vec<u8> {
        assert_eq!(self.flags & 0xf, 1, "not a reply: {self:?}");
        assert!(self.errno().is_none(), "error reply: {self:?}");
        self.payload
    }
}

/// Encodes a header.
pub fn header(id: u16, command: u16, size: u32, flags: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(16);
    h.extend_from_slice(&id.to_le_bytes());
    h.extend_from_slice(&command.to_le_bytes());
    h.extend_from_slice(&size.to_le_bytes());
    h.extend_from_slice(&flags.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// A vfio-user client.
pub struct Client {
    stream: UnixStream,
    next_id: u16,
}

impl Client {
    /// Connects without negotiating.
    pub fn connect_raw(path: &Path) -> io::Result<Self> {
        let stream = UnixStream::connect(path)?;
        // A hang guard for a reply the server sends at once.
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client { stream, next_id: 1 })
    }

    /// Connects and negotiates the version, as QEMU does first.
    pub fn connect(path: &Path) -> io::Result<Self> {
        let mut c = Self::connect_raw(path)?;
        let r = c.version(r#"{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576}}"#);
        assert!(r.errno().is_none(), "VERSION failed: {r:?}");
        Ok(c)
    }

    /// The socket, for tests that need to close or shut it.
    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    fn id(&mut self) -> u16 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    /// Sends raw bytes with descriptors.
    pub fn send_raw(&mut self, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
        if fds.is_empty() {
            use std::io::Write;
            self.stream.write_all(bytes)
        } else {
            let n = self
                .stream
                .send_with_fds(&[bytes], fds)
                .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
            assert_eq!(n, bytes.len(), "short send with fds");
            Ok(())
        }
    }

    /// Receives one message.
    pub fn recv(&mut self) -> io::Result<Reply> {
        let mut h = [0u8; 16];
        self.stream.read_exact(&mut h)?;
        let size = le32(&h, 4) as usize;
        assert!(size >= 16, "reply with size {size}");
        let mut payload = vec![0; size - 16];
        self.stream.read_exact(&mut payload)?;
        Ok(Reply {
            id: u16::from_le_bytes([h[0], h[1]]),
            command: u16::from_le_bytes([h[2], h[3]]),
            flags: le32(&h, 8),
            error: le32(&h, 12),
            payload,
        })
    }

    /// Sends a command and waits for its reply (checking the id).
    pub fn request_with_fds(&mut self, command: u16, payload: &[u8], fds: &[RawFd]) -> Reply {
        let id = self.id();
        let mut msg = header(id, command, 16 + payload.len() as u32, 0);
        msg.extend_from_slice(payload);
        self.send_raw(&msg, fds).expect("send");
        let r = self.recv().expect("reply");
        assert_eq!(r.id, id, "reply id");
        assert_eq!(r.command, command, "reply command");
        r
    }

    /// Sends a command and waits for its reply.
    pub fn request(&mut self, command: u16, payload: &[u8]) -> Reply {
        self.request_with_fds(command, payload, &[])
    }

    /// Sends a command flagged NO_REPLY.
    pub fn post(&mut self, command: u16, payload: &[u8]) {
        let id = self.id();
        let mut msg = header(id, command, 16 + payload.len() as u32, NO_REPLY);
        msg.extend_from_slice(payload);
        self.send_raw(&msg, &[]).expect("send");
    }

    /// VERSION with the given capabilities JSON.
    pub fn version(&mut self, json: &str) -> Reply {
        let mut p = vec![0, 0, 0, 0];
        p.extend_from_slice(json.as_bytes());
        p.push(0);
        self.request(cmd::VERSION, &p)
    }

    /// DEVICE_GET_INFO: (flags, regions, irqs).
    pub fn device_info(&mut self) -> (u32, u32, u32) {
        let mut p = 16u32.to_le_bytes().to_vec();
        p.resize(16, 0);
        let r = self.request(cmd::DEVICE_GET_INFO, &p).ok();
        (le32(&r, 4), le32(&r, 8), le32(&r, 12))
    }

    /// DEVICE_GET_REGION_INFO: the reply (size and flags via helpers).
    pub fn region_info(&mut self, index: u32) -> Reply {
        let mut p = Vec::new();
        p.extend_from_slice(&32u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&index.to_le_bytes());
        p.resize(32, 0);
        self.request(cmd::DEVICE_GET_REGION_INFO, &p)
    }

    /// DEVICE_GET_REGION_INFO with a buffer of `argsz` bytes: the reply
    /// payload and the file that came with it (mappable regions).
    pub fn region_info_fd(&mut self, index: u32, argsz: u32) -> (Vec<u8>, Option<File>) {
        let id = self.id();
        let mut p = Vec::new();
        p.extend_from_slice(&argsz.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&index.to_le_bytes());
        p.resize(32, 0);
        let mut msg = header(id, cmd::DEVICE_GET_REGION_INFO, 48, 0);
        msg.extend_from_slice(&p);
        self.send_raw(&msg, &[]).expect("send");
        // The descriptor rides on the first byte of the reply.
        let mut h = [0u8; 16];
        let (n, file) = self.stream.recv_with_fd(&mut h).expect("recvmsg");
        self.stream.read_exact(&mut h[n..]).expect("reply header");
        assert_eq!(u16::from_le_bytes([h[0], h[1]]), id, "reply id");
        assert_eq!(le32(&h, 8) & 0x20, 0, "REGION_INFO failed");
        let mut payload = vec![0; le32(&h, 4) as usize - 16];
        self.stream.read_exact(&mut payload).expect("reply payload");
        (payload, file)
    }

    /// (flags, size) of a region.
    pub fn region_flags_size(&mut self, index: u32) -> (u32, u64) {
        let r = self.region_info(index).ok();
        (le32(&r, 4), le64(&r, 16))
    }

    /// DEVICE_GET_IRQ_INFO: (flags, count) or errno.
    pub fn irq_info(&mut self, index: u32) -> Result<(u32, u32), i32> {
        let mut p = Vec::new();
        p.extend_from_slice(&16u32.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&index.to_le_bytes());
        p.extend_from_slice(&0u32.to_le_bytes());
        let r = self.request(cmd::DEVICE_GET_IRQ_INFO, &p);
        match r.errno() {
            Some(e) => Err(e),
            None => Ok((le32(&r.payload, 4), le32(&r.payload, 12))),
        }
    }

    fn access(region: u32, offset: u64, count: u32) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&offset.to_le_bytes());
        p.extend_from_slice(&region.to_le_bytes());
        p.extend_from_slice(&count.to_le_bytes());
        p
    }

    /// REGION_READ: data or errno.
    pub fn read(&mut self, region: u32, offset: u64, count: u32) -> Result<Vec<u8>, i32> {
        let r = self.request(cmd::REGION_READ, &Self::access(region, offset, count));
        match r.errno() {
            Some(e) => Err(e),
            None => {
                assert_eq!(le32(&r.payload, 12), count, "reply count");
                assert_eq!(r.payload.len(), 16 + count as usize);
                Ok(r.payload[16..].to_vec())
            }
        }
    }

    /// REGION_WRITE: Ok or errno.
    pub fn write(&mut self, region: u32, offset: u64, data: &[u8]) -> Result<(), i32> {
        let mut p = Self::access(region, offset, data.len() as u32);
        p.extend_from_slice(data);
        let r = self.request(cmd::REGION_WRITE, &p);
        r.errno().map_or(Ok(()), Err)
    }

    /// REGION_WRITE flagged NO_REPLY, as QEMU posts BAR writes.
    pub fn post_write(&mut self, region: u32, offset: u64, data: &[u8]) {
        let mut p = Self::access(region, offset, data.len() as u32);
        p.extend_from_slice(data);
        self.post(cmd::REGION_WRITE, &p);
    }

    /// 32-bit read.
    pub fn read32(&mut self, region: u32, offset: u64) -> u32 {
        let d = self
            .read(region, offset, 4)
            .unwrap_or_else(|e| panic!("read {region}:{offset:#x}: errno {e}"));
        le32(&d, 0)
    }

    /// 32-bit write.
    pub fn write32(&mut self, region: u32, offset: u64, v: u32) {
        self.write(region, offset, &v.to_le_bytes())
            .unwrap_or_else(|e| panic!("write {region}:{offset:#x}: errno {e}"));
    }

    /// DMA_MAP of `size` bytes at `iova` from `file` at `offset`.
    pub fn dma_map(
        &mut self,
        iova: u64,
        size: u64,
        file: Option<&File>,
        offset: u64,
    ) -> Result<(), i32> {
        let mut p = Vec::new();
        p.extend_from_slice(&32u32.to_le_bytes());
        p.extend_from_slice(&3u32.to_le_bytes());
        p.extend_from_slice(&offset.to_le_bytes());
        p.extend_from_slice(&iova.to_le_bytes());
        p.extend_from_slice(&size.to_le_bytes());
        let fds: Vec<RawFd> = file.iter().map(|f| f.as_raw_fd()).collect();
        let r = self.request_with_fds(cmd::DMA_MAP, &p, &fds);
        r.errno().map_or(Ok(()), Err)
    }

    /// DMA_UNMAP.
    pub fn dma_unmap(&mut self, iova: u64, size: u64, flags: u32) -> Result<(), i32> {
        let mut p = Vec::new();
        p.extend_from_slice(&24u32.to_le_bytes());
        p.extend_from_slice(&flags.to_le_bytes());
        p.extend_from_slice(&iova.to_le_bytes());
        p.extend_from_slice(&size.to_le_bytes());
        let r = self.request(cmd::DMA_UNMAP, &p);
        r.errno().map_or(Ok(()), Err)
    }

    /// DEVICE_SET_IRQS.
    pub fn set_irqs(
        &mut self,
        index: u32,
        flags: u32,
        start: u32,
        count: u32,
        data: &[u8],
        fds: &[RawFd],
    ) -> Result<(), i32> {
        let mut p = Vec::new();
        p.extend_from_slice(&(20 + data.len() as u32).to_le_bytes());
        p.extend_from_slice(&flags.to_le_bytes());
        p.extend_from_slice(&index.to_le_bytes());
        p.extend_from_slice(&start.to_le_bytes());
        p.extend_from_slice(&count.to_le_bytes());
        p.extend_from_slice(data);
        let r = self.request_with_fds(cmd::DEVICE_SET_IRQS, &p, fds);
        r.errno().map_or(Ok(()), Err)
    }

    /// Enables MSI-X in the capability (as the guest does through QEMU).
    pub fn enable_msix(&mut self) {
        let ctrl = u16::from_le_bytes(self.read(CONFIG, 0x82, 2).unwrap().try_into().unwrap());
        self.write(CONFIG, 0x82, &(ctrl | 0x8000).to_le_bytes())
            .unwrap();
    }

    /// Sets Bus Master Enable and Memory Space Enable.
    pub fn enable_bus_master(&mut self) {
        self.write(CONFIG, 4, &0x0006u16.to_le_bytes()).unwrap();
    }
}

/// A small deterministic xorshift64 generator for randomized tests.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Guest RAM as QEMU provides it: a memfd the server maps.
pub struct GuestRam {
    pub file: File,
    pub size: u64,
}

impl GuestRam {
    /// A zeroed memfd of `size` bytes.
    pub fn new(size: u64) -> Self {
        let name = c"ibtca-test-ram";
        // SAFETY: memfd_create with a valid NUL-terminated name; the returned
        // descriptor (checked below) is owned by the File.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: fd is a fresh descriptor we own.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(size).unwrap();
        GuestRam { file, size }
    }

    /// Reads bytes at offset `off` in the memfd.
    pub fn read(&self, off: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0; len];
        self.file.read_exact_at(&mut v, off).unwrap();
        v
    }

    /// Writes bytes at offset `off` in the memfd.
    pub fn write(&self, off: u64, data: &[u8]) {
        self.file.write_all_at(data, off).unwrap();
    }
}

/// A nonblocking eventfd for interrupts.
pub fn eventfd() -> EventFd {
    EventFd::new(vmm_sys_util::eventfd::EFD_NONBLOCK).unwrap()
}

/// Waits up to `timeout` for an eventfd to be signalled; returns its count.
pub fn wait_eventfd(e: &EventFd, timeout: Duration) -> Option<u64> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Ok(n) = e.read() {
            return Some(n);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A unique temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Creates a directory under `base` (or the system temp dir).
    pub fn new_in(base: Option<&Path>, tag: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let base = base
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = base.join(format!("ibtca-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A new temp dir.
    pub fn new(tag: &str) -> Self {
        Self::new_in(None, tag)
    }

    /// A path inside it.
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An ibtca server running on a thread of the test process.
pub struct TestServer {
    pub dir: TempDir,
    pub socket: PathBuf,
    /// The instance's link (fault injection), for `start_instance`.
    pub link: Option<std::sync::Arc<ibtca_device::link::Link>>,
    /// The instance's DRDMA window (counters), for `start_instance`.
    pub drdma: Option<std::sync::Arc<ibtca_device::drdma::Drdma>>,
    /// The instance's engine (where its events ran), for `start_instance`.
    pub engine: Option<ibtca_device::engine::EngineHandle>,
    stop: ibtca_device::vfio_user::ShutdownHandle,
    thread: Option<JoinHandle<io::Result<()>>>,
    /// The engine's counters once a `start_instance` server stopped.
    engine_stats: std::sync::Arc<std::sync::Mutex<Option<ibtca_device::engine::EngineStats>>>,
}

impl TestServer {
    /// Starts a server with a fresh device (foundation registers only, no
    /// engine) on a temp socket.
    pub fn start() -> Self {
        let dir = TempDir::new("srv");
        let socket = dir.join("tca.sock");
        let mut server = Server::bind(&socket, ServerConfig::default()).unwrap();
        let stop = server.shutdown_handle();
        let thread = std::thread::spawn(move || {
            let mut tca = Tca::new();
            server.serve(&mut tca)
        });
        TestServer {
            dir,
            socket,
            link: None,
            drdma: None,
            engine: None,
            stop,
            thread: Some(thread),
            engine_stats: Default::default(),
        }
    }

    /// Starts a full device instance (engine, optional link) on a temp
    /// socket; `dir` holds the socket (and usually the link socket).
    pub fn start_instance(dir: TempDir, cfg: ibtca_device::instance::InstanceConfig) -> Self {
        Self::start_instance_with(dir, cfg, ServerConfig::default())
    }

    /// [`Self::start_instance`] with the vfio-user server configured by
    /// `server` (its spin).
    pub fn start_instance_with(
        dir: TempDir,
        cfg: ibtca_device::instance::InstanceConfig,
        server: ServerConfig,
    ) -> Self {
        let socket = dir.join(&format!("tca-{}.sock", cfg.lid));
        let mut server = Server::bind(&socket, server).unwrap();
        let stop = server.shutdown_handle();
        let mut instance = ibtca_device::instance::Instance::start(&cfg).unwrap();
        let link = instance.link();
        let drdma = Some(instance.tca.drdma().clone());
        let engine = Some(instance.engine());
        let engine_stats: std::sync::Arc<std::sync::Mutex<Option<_>>> = Default::default();
        let stats_out = std::sync::Arc::clone(&engine_stats);
        let thread = std::thread::spawn(move || {
            let r = server.serve(&mut instance.tca);
            *stats_out.lock().unwrap() = Some(instance.stop());
            r
        });
        TestServer {
            dir,
            socket,
            link,
            drdma,
            engine,
            stop,
            thread: Some(thread),
            engine_stats,
        }
    }

    /// Stops a `start_instance` server and returns its engine's counters.
    pub fn stop_engine(mut self) -> ibtca_device::engine::EngineStats {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            t.join()
                .expect("server thread panicked")
                .expect("server failed");
        }
        let stats = self.engine_stats.lock().unwrap().take();
        stats.expect("an instance server (start_instance)")
    }

    /// A negotiated client.
    pub fn client(&self) -> Client {
        Client::connect(&self.socket).unwrap()
    }

    /// True while the server thread runs.
    pub fn alive(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.expect("server thread panicked").expect("server failed");
            }
        }
    }
}

/// Path of a binary of this workspace. The workspace's binaries are built
/// once per test process (a no-op when they are current): `cargo test` builds
/// only the binaries of the packages it tests, and a stale binary would test
/// old code.
///
/// A test (debug) build runs the build `scripts/test.sh` runs before
/// `cargo test`, `cargo build --workspace --all-targets`: its binaries have
/// the feature set `cargo test --workspace` gives them (dev-dependencies
/// turn on the protocol's `fuzzing`), so after test.sh it builds nothing.
/// A release build (`ibtca-bench`) runs the README's `cargo build --release
/// --workspace`.
pub fn workspace_bin(name: &str) -> PathBuf {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    let exe = std::env::current_exe().unwrap();
    // Tests run from target/<profile>/deps/, binaries from target/<profile>/.
    let here = exe.parent().unwrap();
    let profile_dir = if here.ends_with("deps") {
        here.parent().unwrap()
    } else {
        here
    };
    BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "-q", "--workspace"]);
        if profile_dir.ends_with("release") {
            cmd.arg("--release");
        } else {
            cmd.arg("--all-targets");
        }
        let st = cmd.status().expect("run cargo build");
        assert!(st.success(), "cargo build --workspace failed: {cmd:?}");
    });
    let bin = profile_dir.join(name);
    assert!(bin.exists(), "{} was not built", bin.display());
    bin
}
