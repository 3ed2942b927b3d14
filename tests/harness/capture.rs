//! Reading packet captures the way a user would: tshark decodes the pcap
//! (ERF, InfiniBand) and the tests compare its fields with what they sent.

use std::path::Path;
use std::process::Command;

/// tshark's fields per packet, in this order (index constants below for
/// the later ones).
pub const FIELDS: [&str; 11] = [
    "infiniband.bth.opcode",
    "infiniband.bth.psn",
    "infiniband.bth.destqp",
    "infiniband.reth.r_key",
    "infiniband.aeth.syndrome",
    "infiniband.lrh.dlid",
    "infiniband.lrh.slid",
    "infiniband.lrh.vl",
    "infiniband.lrh.sl",
    "infiniband.aeth.msn",
    "infiniband.bth.a",
];

/// Index of the LRH VL in a row of [`tshark`].
pub const VL: usize = 7;
/// Index of the LRH SL.
pub const SL: usize = 8;
/// Index of the AETH MSN.
pub const MSN: usize = 9;
/// Index of the BTH AckReq bit (1 or 0; tshark may print it as True/False).
pub const ACK_REQ: usize = 10;

/// Decodes `pcap` with tshark (`--disable-protocol rpcordma`, so SEND
/// payloads are not taken for RPC-over-RDMA): one row of [`FIELDS`] per
/// packet. Panics with a clear message when tshark is missing
/// (scripts/host-tools.sh installs it).
pub fn tshark(pcap: &Path) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-r", &pcap.display().to_string()])
        .args(["--disable-protocol", "rpcordma"])
        .args(["-T", "fields", "-E", "separator=/t"]);
    for f in FIELDS {
        cmd.args(["-e", f]);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("tshark is needed to decode captures (scripts/host-tools.sh installs it): {e}")
    });
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('\t').map(str::to_owned).collect())
        .collect()
}

/// A tshark number (decimal or 0x hex); empty fields read as `None`.
pub fn num(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}
