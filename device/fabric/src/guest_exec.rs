//! `ibtca-fabric exec NODE -- CMD...`: one command in a running guest,
//! through the guest agent on the virtio-serial port
//! ([`crate::guest_channels`]). A session is one connection: the host
//! sends [`HELLO`] with a fresh nonce and the [`EXEC`] request, the agent
//! answers the nonce, streams the command's output and ends with its exit
//! status ([`crate::agent_frame`]).
//!
//! Execs on one node run one after another: each holds `NODE.agent.lock`
//! in the run directory (`flock`) for its session, and waits for it
//! before connecting (QEMU serves one connection on the socket at a time).
//! The agent must answer within a bound (booting guests included); after
//! that the command may run as long as it runs.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use super::agent_frame::{self, Decoder, FrameError, Reply, RequestError, HELLO, STDIN};
use super::guest_channels::{self, ReachError};

/// How an exec is run.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    /// Forward this process's standard input to the command.
    pub stdin: bool,
    /// How long the agent may take to answer the session's nonce.
    pub agent_timeout: Duration,
}

/// Why an exec failed (not the command's own failure: that is its exit
/// status).
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The node or its guest.
    #[error(transparent)]
    Reach(#[from] ReachError),
    /// The command line cannot be sent.
    #[error("{0}")]
    Request(#[from] RequestError),
    /// The agent did not answer in time.
    #[error("the guest agent of `{node}` did not answer within {secs} s (is the guest up and running ibtca-guest-agent? see {node}.console)")]
    NoAnswer {
        /// The node.
        node: String,
        /// The bound.
        secs: u64,
    },
    /// The guest sent bytes that are no frame of the protocol.
    #[error("the guest agent of `{node}` broke the protocol: {error}")]
    Protocol {
        /// The node.
        node: String,
        /// What was wrong.
        error: FrameError,
    },
    /// The agent answered in a way the protocol does not allow.
    #[error("the guest agent of `{node}` sent {what}")]
    Unexpected {
        /// The node.
        node: String,
        /// What it sent.
        what: String,
    },
    /// The guest went away before the exit status.
    #[error("the guest of `{node}` closed the connection before the command's exit status (did the guest power off?)")]
    Closed {
        /// The node.
        node: String,
    },
    /// The agent could not run the command.
    #[error("the guest agent of `{node}` could not run the command: {message}")]
    Failed {
        /// The node.
        node: String,
        /// The agent's message.
        message: String,
    },
    /// A local I/O error.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

impl ExecError {
    /// Whether the mistake is the command line's (exit status 2).
    pub fn is_usage(&self) -> bool {
        match self {
            ExecError::Reach(r) => r.is_usage(),
            ExecError::Request(_) => true,
            _ => false,
        }
    }
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ExecError {
    move |source| ExecError::Io {
        what: what.into(),
        source,
    }
}

/// Runs `argv` in the guest of `node` in the fabric of `run_dir`, its
/// output to `out` and `err`; the command's exit status.
pub fn exec(
    run_dir: &Path,
    node: &str,
    argv: &[impl AsRef<[u8]>],
    opts: &ExecOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, ExecError> {
    let request = agent_frame::exec_request(argv, opts.stdin)?;
    let guest = guest_channels::guest_of(run_dir, node)?;
    let lock_path = guest_channels::exec_lock(run_dir, node);
    let lock = guest_channels::lock_file(&lock_path, true).map_err(io_err("serializing execs"))?;
    let path = guest_channels::agent_socket(run_dir, node);
    let stream = guest_channels::connect(node, &guest, &path, opts.agent_timeout)?;
    let status = session(stream, node, &request, opts, out, err);
    drop(lock);
    status
}

/// A fresh nonce for a session.
fn nonce() -> io::Result<[u8; 8]> {
    let mut n = [0; 8];
    File::open("/dev/urandom")?.read_exact(&mut n)?;
    Ok(n)
}

/// Copies standard input into [`STDIN`] frames, then the empty one.
fn forward_stdin(mut to: UnixStream) {
    let mut buf = vec![0; 16 * 1024];
    let mut input = io::stdin().lock();
    loop {
        let n = match input.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => 0,
        };
        // A session that ended takes no more input: the write fails.
        if to
            .write_all(&agent_frame::encode(STDIN, &buf[..n]))
            .is_err()
            || n == 0
        {
            return;
        }
    }
}

/// One session on a connected agent socket: the request (an [`EXEC`]
/// frame, [`agent_frame::exec_request`]) sent, the output copied until
/// the exit status.
///
/// [`EXEC`]: agent_frame::EXEC
pub fn session(
    mut stream: UnixStream,
    node: &str,
    request: &[u8],
    opts: &ExecOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<u8, ExecError> {
    let nonce = nonce().map_err(io_err("reading /dev/urandom"))?;
    let mut hello = agent_frame::encode(HELLO, &nonce);
    hello.extend_from_slice(request);
    stream
        .write_all(&hello)
        .map_err(io_err(format!("writing to the agent of {node}")))?;
    if opts.stdin {
        let to = stream
            .try_clone()
            .map_err(io_err("duplicating the agent socket"))?;
        std::thread::spawn(move || forward_stdin(to));
    }
    let deadline = Instant::now() + opts.agent_timeout;
    let mut decoder = Decoder::new();
    let mut synced = false;
    let mut buf = vec![0; 64 * 1024];
    loop {
        if !synced {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ExecError::NoAnswer {
                    node: node.to_owned(),
                    secs: opts.agent_timeout.as_secs(),
                });
            }
            stream
                .set_read_timeout(Some(left))
                .map_err(io_err("setting a read timeout"))?;
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => {
                return Err(ExecError::Closed {
                    node: node.to_owned(),
                });
            }
            Ok(n) => n,
            Err(e) if guest_channels::is_transient(&e) => continue,
            Err(e) => return Err(io_err(format!("reading from the agent of {node}"))(e)),
        };
        decoder.push(&buf[..n]);
        if !synced {
            synced = decoder.sync(&nonce);
            if !synced {
                continue;
            }
            stream
                .set_read_timeout(None)
                .map_err(io_err("clearing the read timeout"))?;
        }
        while let Some(reply) = decoder.next_reply().map_err(|error| ExecError::Protocol {
            node: node.to_owned(),
            error,
        })? {
            match reply {
                // A closed stdout or stderr does not stop the command.
                Reply::Stdout(b) => {
                    let _ = out.write_all(&b).and_then(|()| out.flush());
                }
                Reply::Stderr(b) => {
                    let _ = err.write_all(&b).and_then(|()| err.flush());
                }
                Reply::Exit(status) => return Ok(status),
                Reply::Fail(message) => {
                    return Err(ExecError::Failed {
                        node: node.to_owned(),
                        message,
                    });
                }
                Reply::Hello(_) => {
                    return Err(ExecError::Unexpected {
                        node: node.to_owned(),
                        what: "a second HELLO".into(),
                    });
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "guest_exec_tests.rs"]
mod tests;
