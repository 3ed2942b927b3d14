//! The host's OpenSM attached to a fabric port through Debian's
//! `libumad2sim.so` (docs/host-sm.md), as the host-SM tests run it.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Debian's libumad2sim (package libumad2sim0).
pub const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// Runs `opensm -o` (one sweep, then exit) on the port named `sock`,
/// logging to `log`; asserts that it succeeded and reached SUBNET UP, and
/// returns its log. `guard` only stops a hung OpenSM.
pub fn opensm_once(sock: &str, log: &Path, guard: Duration) -> String {
    let mut sm = Command::new("opensm")
        .args(["-o", "-f", &log.display().to_string()])
        .env("LD_PRELOAD", UMAD2SIM)
        .env("IBSIM_SOCKNAME", sock)
        .stdout(Stdio::null())
        .spawn()
        .expect("start opensm");
    let deadline = Instant::now() + guard;
    let status = loop {
        if let Some(st) = sm.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = sm.kill();
            panic!("opensm -o did not finish its sweep in {guard:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let sm_log = std::fs::read_to_string(log).unwrap_or_default();
    assert!(status.success(), "opensm: {status}\n{sm_log}");
    assert!(sm_log.contains("SUBNET UP"), "{sm_log}");
    sm_log
}
