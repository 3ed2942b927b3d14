//! `ibtca-fabric console NODE`: the terminal attached to a running
//! guest's serial console (`NODE.console.sock`,
//! [`crate::guest_channels`]). QEMU keeps writing everything the guest
//! prints to `NODE.console`, attached or not.
//!
//! - On a terminal: raw mode (keys go to the guest as typed, Ctrl-C
//!   included), restored on exit however the session ends; [`DETACH_KEY`]
//!   (Ctrl-], as telnet and virsh use) detaches and leaves the guest
//!   running.
//! - Standard input not a terminal: its bytes go to the console as they
//!   are (no detach key); its end detaches, or with `until` the session
//!   ends once the guest printed that text, so a script can pipe in a
//!   command line and read its output.
//!
//! One console session per node at a time (`NODE.console.lock`, a second
//! one is refused); `exec` is independent of it.

use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::guest_channels::{self, ReachError};

/// The byte that detaches from a console on a terminal: Ctrl-].
pub const DETACH_KEY: u8 = 0x1d;

/// How long a console waits for QEMU to listen (a guest just started)
/// unless `timeout` says otherwise.
pub const CONNECT_WAIT: Duration = Duration::from_secs(120);

/// How a console session runs.
#[derive(Debug, Clone, Default)]
pub struct ConsoleOptions {
    /// End the session once the guest printed this text.
    pub until: Option<String>,
    /// End the session with an error after this long.
    pub timeout: Option<Duration>,
}

/// How a console session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The detach key, or the end of piped input.
    Detached,
    /// The `until` text appeared.
    Seen,
}

/// Why a console session failed.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The node or its guest.
    #[error(transparent)]
    Reach(#[from] ReachError),
    /// Another session holds the console.
    #[error("the console of `{0}` is attached elsewhere (one session at a time)")]
    Busy(String),
    /// The guest's side closed.
    #[error("the console of `{0}` closed: the guest stopped")]
    Closed(String),
    /// `timeout` passed.
    #[error("{0}")]
    TimedOut(String),
    /// A local I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ConsoleError {
    move |source| ConsoleError::Io {
        what: what.into(),
        source,
    }
}

/// Raw mode on standard input while alive; the saved settings back on
/// drop.
struct RawMode(libc::termios);

impl RawMode {
    /// Raw mode if standard input is a terminal.
    fn enter() -> io::Result<Option<RawMode>> {
        // SAFETY: isatty reads nothing but the descriptor number.
        if unsafe { libc::isatty(0) } != 1 {
            return Ok(None);
        }
        // SAFETY: an all-zero termios is a valid value to be overwritten.
        let mut saved: libc::termios = unsafe { std::mem::zeroed() };
        // SAFETY: fd 0 is a terminal; `saved` is a valid termios to fill.
        if unsafe { libc::tcgetattr(0, &mut saved) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut raw = saved;
        // SAFETY: `raw` is a valid termios.
        unsafe { libc::cfmakeraw(&mut raw) };
        // SAFETY: fd 0 is a terminal; `raw` is a valid termios.
        if unsafe { libc::tcsetattr(0, libc::TCSAFLUSH, &raw) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Some(RawMode(saved)))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restores the settings read from fd 0 in `enter`.
        unsafe { libc::tcsetattr(0, libc::TCSAFLUSH, &self.0) };
    }
}

/// Copies standard input to the console; on a terminal up to the detach
/// key. Then shuts the connection so the reading side ends too, unless
/// piped input ended and the session waits for `until`.
fn copy_input(mut to: UnixStream, tty: bool, wait_for_text: bool, detached: &AtomicBool) {
    let mut buf = [0u8; 4096];
    let mut input = io::stdin().lock();
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        let key = if tty {
            chunk.iter().position(|&b| b == DETACH_KEY)
        } else {
            None
        };
        let send = &chunk[..key.unwrap_or(n)];
        if to.write_all(send).is_err() {
            return;
        }
        if key.is_some() {
            detached.store(true, Ordering::SeqCst);
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    if !wait_for_text {
        detached.store(true, Ordering::SeqCst);
        let _ = to.shutdown(Shutdown::Both);
    }
}

/// Whether `text` ends somewhere in `seen` + `new`; keeps in `seen` the
/// tail that may begin a later match.
fn watch(seen: &mut Vec<u8>, new: &[u8], text: &[u8]) -> bool {
    seen.extend_from_slice(new);
    if seen.windows(text.len()).any(|w| w == text) {
        return true;
    }
    let keep = seen.len().min(text.len().saturating_sub(1));
    seen.drain(..seen.len() - keep);
    false
}

/// Attaches to the console of `node` in the fabric of `run_dir` until
/// detached, the `until` text or an error; the guest's output to `out`.
pub fn attach(
    run_dir: &Path,
    node: &str,
    opts: &ConsoleOptions,
    out: &mut dyn Write,
) -> Result<Ended, ConsoleError> {
    let guest = guest_channels::guest_of(run_dir, node)?;
    let lock_path = guest_channels::console_socket(run_dir, node).with_extension("lock");
    let Some(_lock) =
        guest_channels::lock_file(&lock_path, false).map_err(io_err("taking the console"))?
    else {
        return Err(ConsoleError::Busy(node.to_owned()));
    };
    let path = guest_channels::console_socket(run_dir, node);
    let wait = opts.timeout.unwrap_or(CONNECT_WAIT);
    let mut stream = guest_channels::connect(node, &guest, &path, wait)?;
    let raw = RawMode::enter().map_err(io_err("setting the terminal to raw mode"))?;
    if raw.is_some() {
        eprint!("Connected to the console of {node}; detach with Ctrl-]\r\n");
    }
    let detached = Arc::new(AtomicBool::new(false));
    {
        let to = stream
            .try_clone()
            .map_err(io_err("duplicating the console socket"))?;
        let (tty, wait, d) = (raw.is_some(), opts.until.is_some(), detached.clone());
        std::thread::spawn(move || copy_input(to, tty, wait, &d));
    }
    let deadline = opts.timeout.map(|t| Instant::now() + t);
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let ended = loop {
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let what = match &opts.until {
                    Some(t) => format!("`{t}` did not appear on the console of `{node}`"),
                    None => format!("the console session of `{node}` ran out of time"),
                };
                let secs = opts.timeout.unwrap_or_default().as_secs();
                break Err(ConsoleError::TimedOut(format!("{what} within {secs} s")));
            }
            stream
                .set_read_timeout(Some(left))
                .map_err(io_err("setting a read timeout"))?;
        }
        let n = match stream.read(&mut buf) {
            Ok(0) if detached.load(Ordering::SeqCst) => break Ok(Ended::Detached),
            Ok(0) => break Err(ConsoleError::Closed(node.to_owned())),
            Ok(n) => n,
            Err(e) if guest_channels::is_transient(&e) => continue,
            Err(_) if detached.load(Ordering::SeqCst) => break Ok(Ended::Detached),
            Err(e) => break Err(io_err(format!("reading the console of {node}"))(e)),
        };
        let _ = out.write_all(&buf[..n]).and_then(|()| out.flush());
        if let Some(text) = &opts.until {
            if watch(&mut seen, &buf[..n], text.as_bytes()) {
                break Ok(Ended::Seen);
            }
        }
    };
    drop(raw);
    ended
}

#[cfg(test)]
mod tests {
    use super::watch;

    #[test]
    fn text_split_across_reads_is_seen_and_the_tail_stays_short() {
        let mut seen = Vec::new();
        assert!(!watch(
            &mut seen,
            b"echo marker-$((6*7))\r\nmark",
            b"marker-42"
        ));
        assert!(seen.len() < 9);
        assert!(watch(&mut seen, b"er-42\r\n", b"marker-42"));
        let mut seen = Vec::new();
        for _ in 0..1000 {
            assert!(!watch(&mut seen, &[b'm'; 100], b"marker-42"));
            assert!(seen.len() < 9);
        }
    }
}
