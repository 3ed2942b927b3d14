//! A control socket that speaks lines: one command per line, one reply
//! line each (`ok ...` or `error ...`). The switch (`switch::control`)
//! and the ATM gateway serve their commands through it. Connections are
//! served one at a time by one thread; a connection idle for 10 s, one
//! whose reply cannot be written for 10 s (a client that does not read),
//! or one that sends a line over [`MAX_LINE`] bytes, is closed.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ibtca_link::socket_file::{self, SocketId};
use ibtca_sandbox::Role;

/// Longest command line accepted.
pub const MAX_LINE: usize = 1024;

/// How long a connection may stay idle, or a reply unwritten (shorter in
/// this crate's unit tests, which wait for a hostile client to be cut off).
const IDLE: Duration = if cfg!(test) {
    Duration::from_secs(1)
} else {
    Duration::from_secs(10)
};

/// A running control socket; stops (and removes its file) when dropped.
pub struct LineServer {
    path: PathBuf,
    id: SocketId,
    /// The listening socket, owned by the thread until it ends.
    listener_fd: RawFd,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LineServer {
    /// Binds `path` (replacing a stale socket file nobody listens on; any
    /// other file is an error) and answers each command line
    /// with `execute(line)` (the line trimmed), on a thread named `name`
    /// (sandboxed as [`Role::Control`]: commands that read state).
    pub fn start<F>(path: &Path, name: &str, execute: F) -> io::Result<LineServer>
    where
        F: Fn(&str) -> String + Send + 'static,
    {
        LineServer::start_as(path, name, Role::Control, execute)
    }

    /// [`LineServer::start`], with the thread sandboxed as `role`.
    pub fn start_as<F>(path: &Path, name: &str, role: Role, execute: F) -> io::Result<LineServer>
    where
        F: Fn(&str) -> String + Send + 'static,
    {
        let (listener, id) = socket_file::bind_listener(path)?;
        let listener_fd = listener.as_raw_fd();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                ibtca_sandbox::enter(role);
                for conn in listener.incoming() {
                    if thread_stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match conn {
                        Ok(stream) => serve(&execute, stream),
                        Err(e) => tracing::warn!(error = %e, "control accept failed"),
                    }
                }
            })?;
        Ok(LineServer {
            path: path.to_path_buf(),
            id,
            listener_fd,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops serving and removes the socket file.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accept: a shut-down listening socket fails
        // `accept` with EINVAL. This needs no socket file, so a file
        // deleted or replaced from under the server cannot hang the stop.
        // SAFETY: `listener_fd` is the listener the thread owns; the thread
        // ends only after seeing `stop`, set above, so the descriptor is
        // still open here. `shutdown` touches no memory.
        unsafe { libc::shutdown(self.listener_fd, libc::SHUT_RDWR) };
        let _ = thread.join();
        socket_file::remove_own(&self.path, self.id);
    }
}

impl Drop for LineServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Sends one command to the control socket at `path`; returns the reply
/// line (without its newline).
pub fn request(path: &Path, line: &str) -> io::Result<String> {
    request_within(path, line, Duration::from_secs(30))
}

/// [`request`], waiting at most `timeout` for each read and write (a
/// stopped server: an error, not a hang).
pub fn request_within(path: &Path, line: &str, timeout: Duration) -> io::Result<String> {
    let mut stream = UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(format!("{line}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    Ok(reply.trim_end().to_owned())
}

/// Serves one connection: a reply line per command line.
fn serve(execute: &dyn Fn(&str) -> String, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(IDLE));
    // A client that sends commands and never reads the replies: the
    // connection ends when a reply cannot be written for as long.
    let _ = stream.set_write_timeout(Some(IDLE));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream).take(MAX_LINE as u64 * 64);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.len() > MAX_LINE => {
                let _ = out.write_all(b"error line too long\n");
                return;
            }
            Ok(_) => {
                let reply = execute(line.trim());
                tracing::info!(command = line.trim(), %reply, "control");
                if out.write_all(format!("{reply}\n").as_bytes()).is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(path: &Path, text: &[u8]) -> String {
        let mut s = UnixStream::connect(path).unwrap();
        s.write_all(text).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    }

    #[test]
    fn stop_returns_when_the_socket_file_was_deleted_from_under_it() {
        let dir = std::env::temp_dir().join(format!("ibtca-line-rm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let server = LineServer::start(&path, "ctl-rm", |_| "ok".into()).unwrap();
        assert_eq!(ask(&path, b"x\n"), "ok\n");
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"a regular file now").unwrap();
        let (done, stopped) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            server.stop();
            let _ = done.send(());
        });
        // A bound no loaded machine reaches: a hang is the failure.
        stopped
            .recv_timeout(Duration::from_secs(120))
            .expect("stop returned");
        assert_eq!(std::fs::read(&path).unwrap(), b"a regular file now");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_line_gets_its_reply_and_a_long_line_ends_the_connection() {
        let dir = std::env::temp_dir().join(format!("ibtca-line-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let server = LineServer::start(&path, "test-control", |l| format!("ok {l}")).unwrap();
        assert_eq!(ask(&path, b"a\n  b c \n"), "ok a\nok b c\n");
        let long = vec![b'x'; MAX_LINE + 1];
        assert_eq!(
            ask(&path, &[&long[..], b"\nnext\n"].concat()),
            "error line too long\n"
        );
        server.stop();
        assert!(!path.exists(), "the socket file is removed");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_client_that_does_not_read_its_replies_does_not_stop_the_next() {
        let dir = std::env::temp_dir().join(format!("ibtca-line-nr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        // Replies far larger than a socket's buffers.
        let server = LineServer::start(&path, "test-control", |l| {
            format!("ok {l} {}", "y".repeat(1 << 20))
        })
        .unwrap();
        let mut hog = UnixStream::connect(&path).unwrap();
        hog.write_all(b"a\nb\nc\n").unwrap();
        // The server gives up on `hog` after IDLE; this one waits for that
        // (a bound no loaded machine reaches: a server that keeps blocking
        // on `hog` is the failure).
        let mut next = UnixStream::connect(&path).unwrap();
        next.set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        next.write_all(b"next\n").unwrap();
        let mut reply = String::new();
        BufReader::new(&next)
            .read_line(&mut reply)
            .expect("the next client is served");
        assert!(reply.starts_with("ok next y"), "{}", &reply[..20]);
        drop(hog);
        server.stop();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
