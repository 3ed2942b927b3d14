//! The gateway's control socket: one command per line, one reply line
//! each (`ok ...` or `error ...`), as the switch's:
//!
//! ```text
//! stats                      ok {"cells_in":...,"cells_out":...,...}
//! remote-qpn VPI/VCI QPN     set a VC's peer QP (a guest learns its QPN
//!                            only when it creates the QP); restarts the
//!                            VC's QP from its first PSNs
//! ```
//!
//! `ibtca_device::switch::control::request` is a client.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ibtca_protocol::atm::Vc;

use crate::gateway::Gateway;

/// Longest command line accepted.
const MAX_LINE: usize = 1024;

/// Parses `VPI/VCI`.
pub fn parse_vc(text: &str) -> Result<Vc, String> {
    let bad = || format!("`{text}` is not VPI/VCI (e.g. 0/32)");
    let (vpi, vci) = text.split_once('/').ok_or_else(bad)?;
    Ok(Vc {
        vpi: vpi.parse().map_err(|_| bad())?,
        vci: vci.parse().map_err(|_| bad())?,
    })
}

/// Runs one command line; returns the reply line.
pub fn execute(gw: &Gateway, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let result = match words.as_slice() {
        ["stats"] => Ok(gw.counters().to_json().to_string()),
        ["remote-qpn", vc, qpn] => parse_vc(vc).and_then(|vc| {
            let qpn = parse_qpn(qpn)?;
            gw.set_remote_qpn(vc, qpn)
        }),
        _ => Err(format!(
            "unknown command `{}` (stats, remote-qpn VPI/VCI QPN)",
            line.trim()
        )),
    };
    match result {
        Ok(s) => format!("ok {s}"),
        Err(e) => format!("error {e}"),
    }
}

fn parse_qpn(text: &str) -> Result<u32, String> {
    let n = match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16),
        None => text.parse(),
    };
    n.map_err(|_| format!("`{text}` is not a QPN"))
}

/// A control socket served on its own thread.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (replacing a stale file) and serves `gw` there.
    pub fn start(gw: Arc<Gateway>, path: &Path) -> io::Result<Self> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", path.display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ibtca-gw-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    match conn {
                        Ok(stream) => serve(&gw, stream),
                        Err(e) => tracing::warn!(error = %e, "control accept failed"),
                    }
                }
            })?;
        Ok(Self {
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

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn serve(gw: &Gateway, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream).take(MAX_LINE as u64 * 64);
    let mut line = String::new();
    loop {
        line.clear();
        let reply = match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line.len() > MAX_LINE => "error line too long".to_string(),
            Ok(_) => execute(gw, &line),
        };
        if out.write_all(format!("{reply}\n").as_bytes()).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vcs_and_qpns_parse() {
        assert_eq!(parse_vc("0/32"), Ok(Vc { vpi: 0, vci: 32 }));
        assert_eq!(
            parse_vc("255/65535"),
            Ok(Vc {
                vpi: 255,
                vci: 65535
            })
        );
        assert!(parse_vc("256/32").is_err());
        assert!(parse_vc("0.32").unwrap_err().contains("VPI/VCI"));
        assert_eq!(parse_qpn("0x10"), Ok(16));
        assert_eq!(parse_qpn("17"), Ok(17));
        assert!(parse_qpn("x").is_err());
    }
}
