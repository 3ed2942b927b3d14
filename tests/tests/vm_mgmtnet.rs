//! Full stack, the guests' management network and commands: one
//! `ibtca-fabric up --guests --share DIR --run ... --wait` boots three
//! guests on a switch, joined by the management wire (`ibtca-mgmt-hub`),
//! and every check shares that one boot:
//!
//! - every guest pings the other two by node name (`/etc/hosts` from the
//!   configuration directory), so frames cross the hub between each pair;
//! - n1 reads a file from `--share` and writes one back (read-write 9p,
//!   through the bind mount into the chroot);
//! - a command with quotes, double spaces and a `$` reaches n2 byte for
//!   byte;
//! - soft-RoCE between n1 and n2 on the wire: `rdma link add rxe0 type rxe
//!   netdev eth0`, then `ib_write_bw -D 2` server on n1 and client on n2
//!   (by node name), both to completion: the baseline of issue 21's
//!   perftest table;
//! - n3's second command exits 3, so `--wait` fails naming n3, the
//!   command and status 3, while n1 and n2 pass;
//! - `down` stops the hub and undoes the share's bind mount.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use std::path::Path;

use ibtca_fabric::state::State;
use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::launcher::{alive, fabric, text};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 }, { "name": "n3", "lid": 3 } ],
  "switches": [ { "name": "sw0", "ports": 3 } ],
  "links": [ { "a": "n1", "b": "sw0:1" }, { "a": "n2", "b": "sw0:2" }, { "a": "n3", "b": "sw0:3" } ],
  "guest": { "mem": "512M" }
}"#;

/// Pings each of `peers` until it answers (the others may still boot),
/// then says so in the share for n3, which waits to be pinged.
fn ping_all(me: &str, peers: &[&str]) -> String {
    let mut s = String::new();
    for p in peers {
        s.push_str(&format!(
            "ok=0; for i in $(seq 300); do ping -c1 -W1 {p} >/dev/null && ok=1 && break; done; \
             [ $ok = 1 ] || exit 10; ping -c2 {p} | sed 's/^/PING-{me}-{p} /'; "
        ));
    }
    s.push_str(&format!("touch /share/pinged-by-{me}"));
    s
}

/// The lines of `console` starting with `prefix`.
fn lines<'a>(console: &'a str, prefix: &'a str) -> Vec<&'a str> {
    console.lines().filter(|l| l.starts_with(prefix)).collect()
}

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&path.display().to_string()))
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn three_guests_ping_share_run_and_soft_roce() {
    let stack = VmStack::get();
    let mut boot = GuestBoot::with_topology(&stack, "mgmtnet", TOPOLOGY);
    let (run, run_s) = (boot.run.clone(), boot.run_dir());
    // The share lives outside the chroot: the launcher bind-mounts it.
    let share = TempDir::new("mgmtnet-share");
    let token = format!("token-{}-{}", std::process::id(), line!());
    std::fs::write(share.join("greeting.txt"), format!("{token}\n")).unwrap();
    let rxe = "ibtca-load-modules rxe && rdma link add rxe0 type rxe netdev eth0 && \
               rdma link show rxe0/1 | sed 's/^/RXE-LINK /'";
    let n1 = [
        ping_all("n1", &["n2", "n3"]),
        "echo \"SHARE-READ $(cat /share/greeting.txt)\"; echo written-by-n1 >/share/from-n1.txt"
            .to_owned(),
        // perftest gives up on a run whose clock calibration a TCG vCPU
        // disturbed ("Correlation coefficient r^2 < 0.9 ... Can't produce
        // a report"); both ends then try again.
        format!(
            "{rxe} && for i in 1 2 3; do timeout 120 ib_write_bw -d rxe0 -D 2 && exit 0; done; exit 1"
        ),
    ];
    let n2 = [
        ping_all("n2", &["n1", "n3"]),
        r#"printf 'QUOTED %s|%s|\n' "two  spaces" 'single $HOME'"#.to_owned(),
        format!(
            "{rxe} && for i in $(seq 120); do ib_write_bw -d rxe0 -D 2 n1 && exit 0; sleep 1; done; exit 1"
        ),
    ];
    let n3 = [
        ping_all("n3", &["n1", "n2"]),
        // Stay on the wire until both others have pinged us, then fail.
        "for i in $(seq 600); do [ -e /share/pinged-by-n1 ] && [ -e /share/pinged-by-n2 ] && exit 3; sleep 1; done; exit 4"
            .to_owned(),
    ];
    let Booted { out, said, took } = boot.up(
        &[
            "--share",
            &share.0.display().to_string(),
            "--guest-timeout",
            "1200",
        ],
        &[("n1", &n1[..]), ("n2", &n2[..]), ("n3", &n3[..])],
    );
    let console = |n: &str| boot.console(n);
    let all = format!(
        "{}\n==> hub:\n{}",
        boot.all(&said, &["n1", "n2", "n3"]),
        std::fs::read_to_string(run.join("mgmt-hub.log")).unwrap_or_default()
    );
    eprintln!("three guests: {:.0} s\n{said}", took.as_secs_f64());

    // --wait fails, naming n3, its command and the status.
    assert!(
        !out.status.success(),
        "n3's `exit 3` must fail --wait:\n{all}"
    );
    assert!(
        said.contains("n3: command 2 (`for i in $(seq 600)")
            && said.contains("exited with status 3"),
        "{all}"
    );
    for n in ["n1", "n2"] {
        assert!(
            said.contains(&format!("guest {n}: commands passed")),
            "{all}"
        );
    }
    let failed = said
        .lines()
        .find(|l| l.contains("guests that failed: "))
        .unwrap_or_default();
    assert!(
        failed.contains("guests that failed: n3: command 2 (`")
            && failed.matches(": command ").count() == 1,
        "only n3 failed: {failed}\n{all}"
    );

    // Addresses by position, pings by name between every pair.
    for (i, n) in ["n1", "n2", "n3"].iter().enumerate() {
        let c = console(n);
        let net = lines(&c, "IBTCA-NET ");
        assert!(
            net.len() == 1 && net[0].contains(&format!("addr=10.77.0.{}/16", i + 1)),
            "{n}: {net:?}\n{all}"
        );
        eprintln!("{n}: {}", net[0]);
        for p in ["n1", "n2", "n3"].iter().filter(|p| *p != n) {
            let tag = format!("PING-{n}-{p} ");
            let ping = lines(&c, &tag);
            assert!(
                ping.iter()
                    .any(|l| l.contains("2 packets transmitted, 2 packets received")),
                "{n} pings {p}: {ping:?}\n{all}"
            );
            assert!(
                ping.iter().any(|l| l.contains(&format!(
                    "PING {p} (10.77.0.{}",
                    p[1..].parse::<u8>().unwrap()
                ))),
                "{p} resolved by name: {ping:?}"
            );
        }
    }

    // The share, both ways.
    let c1 = console("n1");
    assert!(
        lines(&c1, "SHARE-READ ").contains(&format!("SHARE-READ {token}").as_str()),
        "{all}"
    );
    assert_eq!(
        std::fs::read_to_string(share.join("from-n1.txt")).unwrap_or_default(),
        "written-by-n1\n"
    );
    // Quotes and spaces survive.
    assert_eq!(
        lines(&console("n2"), "QUOTED "),
        ["QUOTED two  spaces|single $HOME|"],
        "{all}"
    );

    // Soft-RoCE: both ends ran ib_write_bw over rxe0 to completion.
    for n in ["n1", "n2"] {
        let c = console(n);
        assert!(
            lines(&c, "RXE-LINK ")
                .iter()
                .any(|l| l.contains("ACTIVE") && l.contains("eth0")),
            "{n}: rxe0 on eth0\n{all}"
        );
        // The line under a result header of the run that completed.
        let all_lines: Vec<&str> = c.lines().collect();
        let result = all_lines.windows(2).find_map(|w| {
            let header = w[0].contains("#bytes") && w[0].contains("BW average");
            let fields: Vec<&str> = w[1].split_whitespace().collect();
            let bw: f64 = fields.get(3).and_then(|v| v.parse().ok()).unwrap_or(0.0);
            (header && fields.first() == Some(&"65536") && bw > 0.0).then_some(w[1])
        });
        let result = result.unwrap_or_else(|| panic!("{n}: no ib_write_bw result line\n{all}"));
        eprintln!("soft-RoCE ib_write_bw -D 2 on {n}: {}", result.trim());
    }

    // The hub was recorded and runs until `down`, which also unmounts.
    let state = State::load(&run).unwrap().expect("the state file");
    let hub = state
        .processes
        .iter()
        .find(|p| p.name == "mgmt-hub")
        .expect("the hub in the state file");
    assert!(alive(hub.pid), "the hub runs until down");
    assert_eq!(state.mounts, [run.join("share")]);
    assert!(mounted(&run.join("share")), "the share is bind-mounted");
    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!alive(hub.pid), "down stopped the hub");
    assert!(!mounted(&run.join("share")), "down unmounted the share");
    assert!(share.join("greeting.txt").exists(), "the host's files stay");
    boot.down();
}
