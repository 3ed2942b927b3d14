//! The control socket of a running switch process: one command per line,
//! one reply line each (`ok ...` or `error ...`), so that faults, delays
//! and link state can be changed at run time and counters read:
//!
//! ```text
//! stats                      ok [{"port":1,"up":true,...},...]
//! down PORT | up PORT        take a port's link down / start it again
//! faults PORT SPEC|none      drop:N,dup:N,reorder:N,corrupt:N,seed:N (per mille)
//! delay PORT MICROSECONDS    hold what the port sends
//! ```
//!
//! `ibtca-fabric link` and `ibtca-fabric stats` speak it.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::link::FaultPlan;

use super::{spec, Switch};

/// Longest command line accepted.
const MAX_LINE: usize = 1024;

/// Counters of every port as JSON.
pub fn stats_json(switch: &Switch) -> serde_json::Value {
    let ports: Vec<_> = (1..=switch.ports())
        .filter_map(|p| u8::try_from(p).ok())
        .map(|p| {
            let s = switch.port_stats(p).unwrap_or_default();
            let peer = switch.peer(p);
            serde_json::json!({
                "port": p,
                "up": switch.is_port_up(p),
                "peer_lid": peer.map(|x| x.lid),
                "peer_guid": peer.map(|x| format!("{:#018x}", x.node_guid)),
                "rx_packets": s.rx_packets,
                "rx_bytes": s.rx_bytes,
                "tx_packets": s.tx_packets,
                "tx_bytes": s.tx_bytes,
                "drop_unknown_lid": s.drop_unknown_lid,
                "drop_crc_error": s.drop_crc_error,
                "drop_malformed": s.drop_malformed,
                "drop_queue_full": s.drop_queue_full,
                "drop_link_down": s.drop_link_down,
                "drop_port_inactive": s.drop_port_inactive,
                "credit_stalls": switch.link_stats(p).map_or(0, |l| l.credit_stalls),
            })
        })
        .collect();
    serde_json::Value::Array(ports)
}

fn port_arg(arg: Option<&str>) -> Result<u8, String> {
    arg.and_then(|a| a.parse().ok())
        .ok_or_else(|| "needs a port number".to_owned())
}

/// Runs one command line against `switch`; returns the reply line.
pub fn execute(switch: &Switch, line: &str) -> String {
    let mut words = line.split_whitespace();
    let cmd = words.next().unwrap_or_default();
    let arg1 = words.next();
    let arg2 = words.next();
    let result: Result<String, String> = (|| match cmd {
        "stats" => Ok(stats_json(switch).to_string()),
        "down" => {
            let p = port_arg(arg1)?;
            switch.port_down(p).map_err(|e| e.to_string())?;
            Ok(format!("port {p} down"))
        }
        "up" => {
            let p = port_arg(arg1)?;
            switch.port_up(p).map_err(|e| e.to_string())?;
            Ok(format!("port {p} up"))
        }
        "faults" => {
            let p = port_arg(arg1)?;
            let plan = match arg2 {
                Some("none") => FaultPlan::default(),
                Some(s) => {
                    let (_, rates) =
                        spec::parse_faults(&format!("{p}={s}")).map_err(|e| e.to_string())?;
                    FaultPlan::default().with_rates(rates)
                }
                None => return Err("faults PORT SPEC|none".into()),
            };
            switch.set_faults(p, plan).map_err(|e| e.to_string())?;
            Ok(format!("port {p} faults set"))
        }
        "delay" => {
            let p = port_arg(arg1)?;
            let us: u64 = arg2
                .and_then(|a| a.parse().ok())
                .ok_or("delay PORT MICROSECONDS")?;
            switch
                .set_delay(p, Duration::from_micros(us))
                .map_err(|e| e.to_string())?;
            Ok(format!("port {p} delay {us} us"))
        }
        _ => Err(format!(
            "unknown command `{cmd}` (stats, down P, up P, faults P SPEC|none, delay P US)"
        )),
    })();
    match result {
        Ok(s) => format!("ok {s}"),
        Err(e) => format!("error {e}"),
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

/// A control socket being served on its own thread.
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Binds `path` (replacing a stale file) and serves `switch` there.
    pub fn start(switch: Arc<Switch>, path: &Path) -> io::Result<ControlServer> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)
            .map_err(|e| io::Error::new(e.kind(), format!("bind {}: {e}", path.display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("ibtca-sw-control".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if thread_stop.load(Ordering::Relaxed) {
                        return;
                    }
                    match conn {
                        Ok(stream) => serve(&switch, stream),
                        Err(e) => tracing::warn!(error = %e, "control accept failed"),
                    }
                }
            })?;
        Ok(ControlServer {
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

/// Serves one connection: a reply line per command line.
fn serve(switch: &Switch, stream: UnixStream) {
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
                let reply = execute(switch, line.trim());
                tracing::info!(command = line.trim(), %reply, "control");
                if out.write_all(format!("{reply}\n").as_bytes()).is_err() {
                    return;
                }
            }
        }
    }
}
