//! Full stack, a fabric: `ibtca-fabric up --guests --wait` brings up
//! `qemu-configs/three-nodes-one-switch.json` (one `ibtca-switch`, three
//! `ibtca-device`s, a capture on every switch port) and boots its three
//! QEMU guests, which run the verbs scenario (SEND/RECV, RDMA WRITE and
//! READ, atomics, a bad R_Key) across the switch between every pair, one
//! session after the other (the file's `ibtca.sessions`): n1 serves n2 and
//! n3 serves n2 on SL0, then n1 serves n3 on SL1. Every check passes in
//! every session; tshark then decodes each pair's traffic from the
//! client's port capture: the 1 MiB RDMA WRITE (opcodes, consecutive PSNs,
//! the server's QP and the R_Key the server reported), the RDMA READ
//! request and its responses with AETH, ACKs, the remote-access NAK of the
//! bad R_Key, and the SL and VL of each session. `down` stops everything.
//!
//! A second test stops guests that are still running: `down` takes the
//! guests (and the QEMU under run-vm.sh) down before the devices.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh), tshark
//! (scripts/host-tools.sh) and root for the chroot: `scripts/test.sh` runs
//! it; plain `cargo test` lists it as ignored.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ibtca_fabric::state::State;
use ibtca_tests::capture::{num, tshark, SL, VL};
use ibtca_tests::launcher::{alive, config, fabric, text, Down};
use ibtca_tests::vm::{VmStack, VERBS_CLIENT_CHECKS, VERBS_SERVER_CHECKS};

/// One test at a time: each boots several TCG guests.
static SERIAL: Mutex<()> = Mutex::new(());

/// Every log and console of the run directory, for failure messages.
fn logs(run: &Path) -> String {
    std::fs::read_dir(run)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| {
                    e.path()
                        .extension()
                        .is_some_and(|x| x == "log" || x == "console")
                })
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    format!("==> {}:\n{text}", e.path().display())
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// One verbs session of a guest's console.
struct Session {
    role: String,
    peer: u64,
    sl: u64,
    lines: Vec<String>,
}

impl Session {
    /// `key=` on the line of `check`'s PASS.
    fn field(&self, check: &str, key: &str) -> Option<u64> {
        let pass = format!("IBTCA-VERBS {check} PASS");
        let line = self.lines.iter().find(|l| l.starts_with(&pass))?;
        let at = line.find(&format!("{key}="))? + key.len() + 1;
        num(line[at..].split([' ', ','].as_ref()).next()?)
    }
}

/// Splits a console at its `IBTCA-SESSION` lines and checks each session:
/// every check of its role passed, none failed, the summary and the tool's
/// exit status; and for the whole guest: the module loaded and unloaded
/// once per session, the driver logged no warning or error, the guest
/// powered off.
fn sessions(node: &str, console: &str, want: usize, all: &str) -> Vec<Session> {
    let mut out: Vec<Session> = Vec::new();
    for line in console.lines() {
        if let Some(rest) = line.strip_prefix("IBTCA-SESSION ") {
            let kv = |k: &str| {
                rest.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{k}=")))
                    .unwrap_or_default()
                    .to_owned()
            };
            out.push(Session {
                role: kv("role"),
                peer: kv("peer_lid").parse().unwrap_or(0),
                sl: kv("sl").parse().unwrap_or(99),
                lines: Vec::new(),
            });
        } else if let Some(s) = out.last_mut() {
            s.lines.push(line.to_owned());
        }
    }
    assert_eq!(out.len(), want, "{node}: sessions\n{all}");
    for (i, s) in out.iter().enumerate() {
        let ctx = format!("{node} session {} ({} of LID {})", i + 1, s.role, s.peer);
        let checks = match s.role.as_str() {
            "server" => VERBS_SERVER_CHECKS,
            "client" => VERBS_CLIENT_CHECKS,
            r => panic!("{ctx}: role {r}"),
        };
        for c in checks {
            let pass = format!("IBTCA-VERBS {c} PASS");
            assert!(
                s.lines.iter().any(|l| l.starts_with(&pass)),
                "{ctx}: no {pass:?}\n{all}"
            );
        }
        let fails: Vec<_> = s
            .lines
            .iter()
            .filter(|l| l.starts_with("IBTCA-VERBS ") && l.contains(" FAIL"))
            .collect();
        assert!(fails.is_empty(), "{ctx}: failed {fails:?}\n{all}");
        let summary = format!("IBTCA-VERBS-SUMMARY {} passed, 0 failed", checks.len());
        assert!(
            s.lines.iter().any(|l| l.contains(&summary)),
            "{ctx}: no {summary:?}\n{all}"
        );
        assert!(
            s.lines.iter().any(|l| l.contains("IBTCA-VERBS-RC 0")),
            "{ctx}\n{all}"
        );
        for l in s.lines.iter().filter(|l| l.starts_with("IBTCA-VERBS")) {
            eprintln!("{node} #{}: {l}", i + 1);
        }
    }
    let count = |needle: &str| console.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(count("IBTCA-INSMOD ok"), want, "{node}\n{all}");
    assert_eq!(count("IBTCA-UNLOAD ok"), want, "{node}\n{all}");
    let driver: Vec<_> = console
        .lines()
        .filter(|l| l.contains("IBTCA-DMESG ") && !l.contains("module verification failed"))
        .collect();
    assert!(driver.is_empty(), "{node}: driver complained {driver:?}");
    assert_eq!(count("IBTCA-GUEST done"), 1, "{node}\n{all}");
    out
}

/// What tshark must show of one session on the client's port capture.
struct Pair<'a> {
    name: &'a str,
    pcap: PathBuf,
    client: u64,
    server: u64,
    /// The R_Key the server registered (its setup line).
    rkey: u64,
    sl: u64,
}

fn check_pair(p: &Pair) {
    let rows = tshark(&p.pcap);
    let f = |r: &Vec<String>, i: usize| r.get(i).and_then(|s| num(s));
    let between =
        |r: &&Vec<String>, from: u64, to: u64| f(r, 6) == Some(from) && f(r, 5) == Some(to);
    let to_server: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| between(r, p.client, p.server))
        .collect();
    let to_client: Vec<&Vec<String>> = rows
        .iter()
        .filter(|r| between(r, p.server, p.client))
        .collect();
    let ctx = format!("{} ({} -> {})", p.name, p.client, p.server);
    assert!(!to_server.is_empty(), "{ctx}: no packets in {rows:?}");
    for r in to_server.iter().chain(&to_client) {
        assert_eq!(f(r, SL), Some(p.sl), "{ctx}: SL of {r:?}");
        assert_eq!(f(r, VL), Some(p.sl), "{ctx}: VL (SL n on VL n) of {r:?}");
    }
    // The 1 MiB RDMA WRITE: FIRST at some PSN, LAST 255 PSNs later (MTU
    // 4096), to the server's first QP, with the server's R_Key.
    let first = to_server
        .iter()
        .find(|r| f(r, 0) == Some(0x06))
        .unwrap_or_else(|| panic!("{ctx}: no RDMA WRITE FIRST"));
    assert_eq!(f(first, 2), Some(0x402), "{ctx}: server QP {first:?}");
    assert_eq!(f(first, 3), Some(p.rkey), "{ctx}: R_Key {first:?}");
    let psn = f(first, 1).unwrap();
    for k in 1..256 {
        let want = if k == 255 { 0x08 } else { 0x07 };
        assert!(
            to_server
                .iter()
                .any(|r| f(r, 0) == Some(want) && f(r, 1) == Some(psn + k)),
            "{ctx}: WRITE {} at PSN {}",
            if k == 255 { "LAST" } else { "MIDDLE" },
            psn + k
        );
    }
    // The RDMA READ request and its responses (FIRST carries an AETH).
    let read = to_server
        .iter()
        .find(|r| f(r, 0) == Some(0x0c))
        .unwrap_or_else(|| panic!("{ctx}: no RDMA READ request"));
    assert_eq!(f(read, 3), Some(p.rkey), "{ctx}: READ R_Key {read:?}");
    let read_psn = f(read, 1).unwrap();
    let resp = to_client
        .iter()
        .find(|r| matches!(f(r, 0), Some(0x0d | 0x10)) && f(r, 1) == Some(read_psn))
        .unwrap_or_else(|| panic!("{ctx}: no READ response at PSN {read_psn}"));
    assert_eq!(f(resp, 2), Some(0x402), "{ctx}: to the client's QP");
    assert!(f(resp, 4).is_some(), "{ctx}: AETH in {resp:?}");
    // ACKs to the first QP; the bad-R_Key WRITE on the second QP is
    // answered by a remote-access NAK (AETH syndrome 0x62).
    assert!(
        to_client
            .iter()
            .any(|r| f(r, 0) == Some(0x11) && f(r, 2) == Some(0x402) && f(r, 4) == Some(0x1f)),
        "{ctx}: ACKs"
    );
    assert!(
        to_client
            .iter()
            .any(|r| f(r, 0) == Some(0x11) && f(r, 2) == Some(0x403) && f(r, 4) == Some(0x62)),
        "{ctx}: the NAK of the bad R_Key"
    );
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn three_guests_do_rdma_across_a_switch() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stack = VmStack::get();
    let dir = stack.scratch("fabric3");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let start = Instant::now();
    let mut args = stack.guests_up(&config("three-nodes-one-switch.json"), &run_s);
    args.extend(["--guest-timeout", "1500", "--wait"].map(String::from));
    let out = fabric(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let all = format!("{}\n{}", text(&out), logs(&run));
    eprintln!(
        "three guests: {:.0} s\n{}",
        start.elapsed().as_secs_f64(),
        text(&out)
    );
    assert!(out.status.success(), "up --guests --wait failed:\n{all}");
    for n in ["n1", "n2", "n3"] {
        assert!(
            text(&out).contains(&format!("guest {n}: exited, exit status: 0")),
            "{n}\n{all}"
        );
    }
    let state = State::load(&run).unwrap().expect("the state file");
    assert_eq!(
        state.processes.iter().filter(|p| p.guest).count(),
        3,
        "three guests recorded: {:?}",
        state.processes
    );
    let console = |n: &str| std::fs::read_to_string(run.join(format!("{n}.console"))).unwrap();
    let n1 = sessions("n1", &console("n1"), 2, &all);
    let n2 = sessions("n2", &console("n2"), 2, &all);
    let n3 = sessions("n3", &console("n3"), 2, &all);
    let devices_alive = state
        .processes
        .iter()
        .filter(|p| !p.guest)
        .all(|p| alive(p.pid));
    assert!(devices_alive, "every device and the switch survived\n{all}");
    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "{}", text(&out));
    for p in &state.processes {
        assert!(!alive(p.pid), "{} ({}) still runs", p.name, p.pid);
    }
    drop(down);

    // Which session is which: (server session, client session).
    let rkey = |s: &Session| s.field("setup", "rkey").expect("server's rkey");
    let pairs = [
        ("n1 serves n2", &n1[0], &n2[0], 2, 1, "sw0-p2.pcap"),
        ("n3 serves n2", &n3[0], &n2[1], 2, 3, "sw0-p2.pcap"),
        ("n1 serves n3", &n1[1], &n3[1], 3, 1, "sw0-p3.pcap"),
    ];
    for (name, server, client, client_lid, server_lid, pcap) in pairs {
        assert_eq!(
            (server.role.as_str(), client.role.as_str()),
            ("server", "client")
        );
        assert_eq!(
            (server.peer, client.peer),
            (client_lid, server_lid),
            "{name}"
        );
        assert_eq!(server.sl, client.sl, "{name}: one SL");
        assert_eq!(
            client.field("exchange", "peer_rkey"),
            Some(rkey(server)),
            "{name}: the client learnt the server's R_Key"
        );
        check_pair(&Pair {
            name,
            pcap: run.join(pcap),
            client: client_lid,
            server: server_lid,
            rkey: rkey(server),
            sl: server.sl,
        });
    }
    assert_eq!(n3[1].sl, 1, "the last session runs on SL1");
    // n1's port saw n1's two sessions only: nothing of n2 <-> n3 leaks.
    let lids: Vec<(Option<u64>, Option<u64>)> = tshark(&run.join("sw0-p1.pcap"))
        .iter()
        .map(|r| (num(&r[5]), num(&r[6])))
        .collect();
    assert!(
        lids.iter()
            .all(|l| matches!(l, (Some(1), Some(2 | 3)) | (Some(2 | 3), Some(1)))),
        "only traffic to and from n1 on its port: {lids:?}"
    );
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn down_stops_running_guests_before_the_devices() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stack = VmStack::get();
    let dir = stack.scratch("fabric3-down");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let _down = Down(run.clone());
    // Both guests wait for port changes that never come (port-events).
    // The stack's kernel, initrd and run-vm.sh, found wherever the target
    // directory is (CARGO_TARGET_DIR outside the checkout too).
    let mut up = stack.guests_up(&config("two-nodes.json"), &run_s);
    up.extend(
        [
            "--append",
            "ibtca.mode=port-events",
            "--guest-timeout",
            "900",
        ]
        .map(String::from),
    );
    let out = fabric(&up.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", text(&out));
    let state = State::load(&run).unwrap().expect("the state file");
    let guests: Vec<_> = state.processes.iter().filter(|p| p.guest).collect();
    assert_eq!(guests.len(), 2, "{:?}", state.processes);
    let deadline = Instant::now() + Duration::from_secs(600);
    for n in ["a", "b"] {
        let console = run.join(format!("{n}.console"));
        while !std::fs::read_to_string(&console)
            .unwrap_or_default()
            .contains("IBTCA-PORT-READY")
        {
            assert!(
                Instant::now() < deadline,
                "{n} never got ready\n{}",
                logs(&run)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // The QEMU processes under each guest's run-vm.sh.
    let qemus: Vec<u32> = guests
        .iter()
        .flat_map(|g| ibtca_fabric::guests::descendants(g.pid))
        .filter(|pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|e| e.to_string_lossy().contains("qemu-system"))
        })
        .collect();
    assert_eq!(qemus.len(), 2, "one QEMU per guest");
    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "{}", text(&out));
    // "stopped b (guest), a (guest), mgmt-hub, b, a": the guests first,
    // then the management wire's hub and the devices.
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let order: Vec<&str> = said
        .trim()
        .strip_prefix("stopped ")
        .unwrap_or_else(|| panic!("{said}"))
        .split(", ")
        .collect();
    assert_eq!(order.len(), 5, "{said}");
    assert!(order[2..].contains(&"mgmt-hub"), "{said}");
    assert!(
        order[..2].iter().all(|n| n.ends_with("(guest)"))
            && !order[2..].iter().any(|n| n.ends_with("(guest)")),
        "guests first: {said}"
    );
    for pid in qemus.iter().chain(state.processes.iter().map(|p| &p.pid)) {
        assert!(!alive(*pid), "{pid} still runs after down: {said}");
    }
    // A guest's console ends without a clean power-off: it was stopped.
    let console = std::fs::read_to_string(run.join("a.console")).unwrap_or_default();
    assert!(!console.contains("IBTCA-GUEST done"), "{console}");
    let log = std::fs::read_to_string(run.join("a.log")).unwrap_or_default();
    assert!(
        !log.contains("panicked"),
        "device a survived its guest: {log}"
    );
}
