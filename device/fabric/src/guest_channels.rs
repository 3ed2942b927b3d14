//! The two host ends of a running guest that `exec` and `console` use,
//! both Unix sockets QEMU listens on in the run directory:
//!
//! - `NODE.agent.sock`: a virtio-serial port named [`AGENT_PORT`] that the
//!   guest agent serves ([`crate::guest_exec`], frames in
//!   [`crate::agent_frame`]);
//! - `NODE.console.sock`: the serial console (ttyS0), whose output QEMU
//!   also writes to `NODE.console` (`logfile=`), so the console file is
//!   complete whether or not anyone is attached ([`crate::guest_console`]).
//!
//! Neither is a host network interface: the guest has no route to the host.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::processes;
use super::state::{Started, State};
use super::topology::Topology;

/// The virtio-serial port's name (`/sys/class/virtio-ports/*/name`).
pub const AGENT_PORT: &str = "org.ibtca.agent";

/// The agent's socket of `node`.
pub fn agent_socket(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join(format!("{node}.agent.sock"))
}

/// The serial console's socket of `node`.
pub fn console_socket(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join(format!("{node}.console.sock"))
}

/// The lock file that serializes `exec`s on `node`.
pub fn exec_lock(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join(format!("{node}.agent.lock"))
}

/// QEMU arguments of the agent's virtio-serial port, its socket given as
/// QEMU sees it (inside its chroot).
pub fn agent_qemu_args(socket_in_chroot: &Path) -> Vec<String> {
    vec![
        "-device".into(),
        "virtio-serial-pci,id=ibtca-vser".into(),
        "-chardev".into(),
        format!(
            "socket,id=ibtca-agent,path={},server=on,wait=off",
            socket_in_chroot.display()
        ),
        "-device".into(),
        format!("virtserialport,bus=ibtca-vser.0,chardev=ibtca-agent,name={AGENT_PORT}"),
    ]
}

/// Makes way for QEMU's sockets of a guest about to boot: a stale socket
/// is removed; a regular file, directory, symlink or a socket something
/// listens on is refused (QEMU itself would replace any of them).
pub fn clear_sockets(run_dir: &Path, node: &str) -> io::Result<()> {
    for p in [agent_socket(run_dir, node), console_socket(run_dir, node)] {
        ibtca_link::socket_file::remove_stale(&p)?;
    }
    Ok(())
}

/// Why a node's guest cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum ReachError {
    /// No fabric in the run directory.
    #[error("no fabric is up in {0}")]
    NotUp(PathBuf),
    /// The state file or the topology copy cannot be read.
    #[error("{0}")]
    Unreadable(String),
    /// The name is no node of the fabric (a usage error).
    #[error("`{node}` is no node of the fabric in {run_dir} (nodes: {names})")]
    UnknownNode {
        /// The name given.
        node: String,
        /// The run directory.
        run_dir: PathBuf,
        /// The fabric's nodes.
        names: String,
    },
    /// The node has no guest (not `up --guests`, a gateway, or not booted).
    #[error("node `{0}` has no guest: bring the fabric up with --guests (gateways and nodes left out by an SM fabric boot none)")]
    NoGuest(String),
    /// The guest was started but its socket has nobody listening.
    #[error("the guest of `{node}` is not running ({path}: {source})")]
    NotRunning {
        /// The node.
        node: String,
        /// The socket.
        path: PathBuf,
        /// The connect error.
        source: io::Error,
    },
}

impl ReachError {
    /// Whether the mistake is the command line's (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(self, ReachError::UnknownNode { .. })
    }
}

/// Checks that `node` is a node of the fabric running in `run_dir` and
/// that `up --guests` booted a guest for it; that guest's process
/// (run-vm.sh).
pub fn guest_of(run_dir: &Path, node: &str) -> Result<Started, ReachError> {
    let state = State::load(run_dir)
        .map_err(|e| ReachError::Unreadable(e.to_string()))?
        .ok_or_else(|| ReachError::NotUp(run_dir.to_path_buf()))?;
    let file = run_dir.join(super::state::TOPOLOGY_FILE);
    let text = std::fs::read_to_string(&file)
        .map_err(|e| ReachError::Unreadable(format!("cannot read {}: {e}", file.display())))?;
    let topo: Topology = crate::parse(&text)
        .map_err(|e| ReachError::Unreadable(format!("{}: {e}", file.display())))?;
    if !topo.nodes.iter().any(|n| n.name == node) {
        return Err(ReachError::UnknownNode {
            node: node.to_owned(),
            run_dir: run_dir.to_path_buf(),
            names: topo
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    let guest = super::launch::guest_name(node);
    state
        .processes
        .into_iter()
        .find(|p| p.guest && p.name == guest)
        .ok_or_else(|| ReachError::NoGuest(node.to_owned()))
}

/// Connects to a guest's socket `path` (one of [`agent_socket`],
/// [`console_socket`]). While the guest's process runs and QEMU has not
/// listened yet (it starts after `up` returns), tries again until `wait`
/// has passed.
pub fn connect(
    node: &str,
    guest: &Started,
    path: &Path,
    wait: Duration,
) -> Result<UnixStream, ReachError> {
    let deadline = Instant::now() + wait;
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return Ok(s),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) && processes::is_ours(guest)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(source) => {
                return Err(ReachError::NotRunning {
                    node: node.to_owned(),
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// Whether a read error only means "read again": a signal, or a read
/// timeout (`WouldBlock`/`TimedOut`) whose deadline the caller checks.
pub fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Opens `path` (created if missing) and takes an exclusive `flock` on
/// it, released when the file is closed: waiting for it when `wait`, else
/// `None` if another process holds it.
pub fn lock_file(path: &Path, wait: bool) -> io::Result<Option<File>> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("opening {}: {e}", path.display())))?;
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: flock on a descriptor `file` owns, which outlives the call.
    if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
        return Ok(Some(file));
    }
    let e = io::Error::last_os_error();
    if !wait && e.kind() == io::ErrorKind::WouldBlock {
        return Ok(None);
    }
    Err(io::Error::new(
        e.kind(),
        format!("locking {}: {e}", path.display()),
    ))
}
