//! The host's OpenSM attached to a fabric port through Debian's
//! `libumad2sim.so` (docs/host-sm.md), as the host-SM tests run it.

use std::collections::BTreeSet;
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

/// `ibnetdiscover` through libumad2sim on the port `sock` (ibsim's
/// `SIM_HOST` `host`).
pub fn ibnetdiscover(sock: &str, host: &str) -> String {
    let out = Command::new("ibnetdiscover")
        .env("LD_PRELOAD", UMAD2SIM)
        .env("IBSIM_SOCKNAME", sock)
        .env("SIM_HOST", host)
        .output()
        .expect("run ibnetdiscover");
    assert!(
        out.status.success(),
        "ibnetdiscover: {}",
        crate::launcher::text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A link: (node id, port, node id, port), the lower end first.
pub type Link = (String, u32, String, u32);

/// Switches and CAs of an `ibnetdiscover` listing, and its links as
/// (GUID, port, GUID, port), each once, lower end first.
pub fn fabric_of(listing: &str) -> (usize, usize, BTreeSet<Link>) {
    let mut links = BTreeSet::new();
    let mut here = String::new();
    let (mut switches, mut cas) = (0, 0);
    for line in listing.lines() {
        if line.starts_with("Switch") || line.starts_with("Ca") {
            if line.starts_with("Switch") {
                switches += 1;
            } else {
                cas += 1;
            }
            here = line.split('"').nth(1).unwrap().to_owned();
        } else if let Some(rest) = line.strip_prefix('[') {
            // [3]	"S-0000000003000101"[1]		# "agg 1-1" lid 3 4xQDR
            // [1](100000201)	"S-0000000002000101"[1]	...
            let port: u32 = rest.split(']').next().unwrap().parse().unwrap();
            let mut q = rest.split('"');
            let peer = q.nth(1).unwrap().to_owned();
            let rport: u32 = q
                .next()
                .unwrap()
                .trim_start_matches('[')
                .split(']')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            let (a, b) = ((here.clone(), port), (peer, rport));
            let (a, b) = if a <= b { (a, b) } else { (b, a) };
            links.insert((a.0, a.1, b.0, b.1));
        }
    }
    (switches, cas, links)
}

/// Asserts that the host has `tool` (on PATH or in /usr/sbin).
pub fn need(tool: &str) {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).exists()))
        .unwrap_or(false)
        || Path::new("/usr/sbin").join(tool).exists();
    assert!(found, "{tool} missing: scripts/host-tools.sh installs it");
}

/// The host's OpenSM, kept running (it sweeps again on a trap), stopped
/// when dropped.
pub struct HostSm(std::process::Child);

impl HostSm {
    /// Starts `opensm` on the port named `sock`, logging to `log`, in
    /// `cwd` (where libumad2sim makes its sysfs).
    pub fn start(sock: &str, log: &Path, cwd: &Path) -> HostSm {
        let sm = Command::new("opensm")
            .args(["-f", &log.display().to_string()])
            .env("LD_PRELOAD", UMAD2SIM)
            .env("IBSIM_SOCKNAME", sock)
            .current_dir(cwd)
            .stdout(Stdio::null())
            .spawn()
            .expect("start opensm");
        HostSm(sm)
    }
}

impl Drop for HostSm {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ibtracert -G FROM TO` (port GUIDs) through the port `sock`: the
/// switches on the route, by NodeDescription without spaces (`"leaf 1-1"`
/// is `leaf1-1`, the name `fat-tree-net.sh` gives it), each with the port
/// the route leaves it by; `None` while ibtracert fails (the SM has not
/// routed it yet, or is sweeping).
pub fn route(sock: &str, cwd: &Path, from: &str, to: &str) -> Option<Vec<(String, u64)>> {
    // `timeout`: an ibtracert that gets no answer is tried again, not
    // waited for. One that printed its whole route ("To ca ...") and then
    // hung at exit (libumad2sim's atexit cleanup joins its receiver thread
    // while holding the mutex that thread takes for a MAD arriving then)
    // has its route.
    let out = Command::new("timeout")
        .args(["10", "ibtracert", "-G", from, to])
        .env("LD_PRELOAD", UMAD2SIM)
        .env("IBSIM_SOCKNAME", sock)
        .current_dir(cwd)
        .stderr(Stdio::null())
        .output()
        .expect("run ibtracert");
    let printed = String::from_utf8_lossy(&out.stdout);
    let hung_at_exit = out.status.code() == Some(124) && printed.contains("\nTo ca");
    if !out.status.success() && !hung_at_exit {
        return None;
    }
    // [1] -> switch port {0x0000000002000101}[1] lid 2-2 "leaf 1-1"
    // [4] -> switch port {0x0000000003000102}[1] lid 5-5 "agg 1-2"
    // ...
    // [2] -> ca port {0x0000000100040405}[1] lid 9-9 "host 2-2-2"
    let hops: Vec<(u64, bool, String)> = printed
        .lines()
        .filter(|l| l.contains(" -> "))
        .map(|l| {
            let port = l[1..l.find(']').unwrap()].parse().unwrap();
            let name = l.split('"').nth(1).unwrap().replace(' ', "");
            (port, l.contains("-> switch port"), name)
        })
        .collect();
    let switches = hops
        .windows(2)
        .filter(|w| w[0].1)
        .map(|w| (w[0].2.clone(), w[1].0))
        .collect();
    Some(switches)
}

/// Polls [`route`] until `want` holds of a route; panics after `guard`
/// (a hang guard, not a timing bound).
pub fn route_until(
    (sock, cwd): (&str, &Path),
    (from, to): (&str, &str),
    guard: Duration,
    want: impl Fn(&[(String, u64)]) -> bool,
) -> Vec<(String, u64)> {
    let deadline = Instant::now() + guard;
    loop {
        if let Some(r) = route(sock, cwd, from, to).filter(|r| want(r)) {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "no such route {from} -> {to} in {guard:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
