//! A control socket that speaks lines: one command per line, one reply
//! line each (`ok ...` or `error ...`). The switch (`switch::control`)
//! and the ATM gateway serve their commands through it. Connections are
//! served one at a time by one thread; a connection idle for 10 s, or one
//! that sends a line over [`MAX_LINE`] bytes, is closed.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sandbox::Role;

/// Longest command line accepted.
pub const MAX_LINE: usize = 1024;

/// A running control socket; stops (and removes its file) when dropped.
pub struct LineServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LineServer {
    /// Binds `path` (replacing a stale file) and answers each command line
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
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", path.display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                crate::sandbox::enter(role);
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
        // Wake the blocking accept.
        let _ = UnixStream::connect(&self.path);
        let _ = thread.join();
        let _ = std::fs::remove_file(&self.path);
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
    let mut stream = UnixStream::connect(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.write_all(format!("{line}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    Ok(reply.trim_end().to_owned())
}

/// Serves one connection: a reply line per command line.
fn serve(execute: &dyn Fn(&str) -> String, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
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
}
