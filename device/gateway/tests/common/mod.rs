//! What the gateway's integration tests share: a run directory, a
//! connection to a gateway's ATM port and tshark's reading of a capture.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a test waits for a gateway's ATM port to listen.
const T: Duration = Duration::from_secs(60);

/// A fresh directory for the test's sockets and captures.
pub fn run_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ibtca-gw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Connects to the ATM port listening at `p`, once it listens.
pub fn connect_atm(p: &Path) -> UnixStream {
    let deadline = Instant::now() + T;
    loop {
        match UnixStream::connect(p) {
            Ok(s) => return s,
            Err(e) => {
                assert!(Instant::now() < deadline, "ATM port {}: {e}", p.display());
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// tshark's `-T fields` output for `pcap` (one line a packet, fields
/// tab-separated) with `args` (the `-e FIELD`s and any others).
pub fn tshark_fields(pcap: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("tshark is needed to decode captures (scripts/host-tools.sh installs it): {e}")
        });
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
