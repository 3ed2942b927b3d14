//! `ibtca-fabric restart SWITCH` without VMs: the switch process starts
//! again on the same sockets and its links come back. Without an SM it
//! has the file's routes again and RDMA between simulated guests goes on
//! over the same QPs; with one (`"sm"`) it comes back `--sm-managed`,
//! without routes, its ports Init for OpenSM to sweep again.
//!
//! `ibtca-fabric switch SWITCH down|up` on a switch process: `down` kills
//! it (its devices' links go down), `up` starts it again on the same
//! sockets and RDMA goes on over the same QPs.

use std::path::Path;
use std::time::{Duration, Instant};

use ibtca_device::verbs::abi::*;
use ibtca_fabric::state::State;
use ibtca_tests::launcher::{alive, config, fabric, text, up};
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{remote, send_wqe};
use ibtca_tests::TempDir;

const T: Duration = Duration::from_secs(20);

fn pid_of(run: &Path, name: &str) -> u32 {
    let state = State::load(run).unwrap().expect("a state file");
    state
        .processes
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no process {name}"))
        .pid
}

fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Waits until `node`'s log says `what` ("link up", "link down") `n`
/// times.
fn wait_log(run: &Path, node: &str, what: &str, n: usize) {
    let deadline = Instant::now() + T;
    loop {
        let log = std::fs::read_to_string(run.join(format!("{node}.log"))).unwrap();
        if log.matches(what).count() >= n {
            return;
        }
        assert!(Instant::now() < deadline, "{node}: {log}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_link_ups(run: &Path, node: &str, n: usize) {
    wait_log(run, node, "link up", n);
}

/// Simulated guests on n1 and n3 with an RC QP connected between them.
fn pair(run: &Path) -> (Side, Side) {
    let o = PairOptions::default();
    let mut a = Side::new(&run.join("n1.sock"), &o, ALL_ACCESS);
    let mut b = Side::new(&run.join("n3.sock"), &o, ALL_ACCESS);
    a.g.connect(&a.qp, 3, b.qp.qpn, MTU_4096, ALL_ACCESS);
    b.g.connect(&b.qp, 1, a.qp.qpn, MTU_4096, ALL_ACCESS);
    (a, b)
}

/// An 8 KiB RDMA WRITE of `byte`s from `a` to `b`: it completes and
/// lands.
fn write(a: &mut Side, b: &mut Side, wr_id: u64, byte: u8) {
    a.g.write(a.buf, &[byte; 8192]);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, wr_id, a.buf, 8192, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("the WRITE completes");
    assert_eq!((c.wr_id.to_native(), c.status), (wr_id, WC_SUCCESS));
    assert_eq!(b.g.read(b.buf, 8192), vec![byte; 8192]);
}

/// Restarts `sw` and checks what the launcher says and records.
fn restart(run: &Path, sw: &str) -> u32 {
    let old = pid_of(run, sw);
    let run_s = run.display().to_string();
    let out = fabric(&["restart", "--run-dir", &run_s, sw]);
    assert!(out.status.success(), "restart failed: {}", text(&out));
    let new = pid_of(run, sw);
    assert!(
        text(&out).contains(&format!("restarted {sw} (pid {new})")),
        "{}",
        text(&out)
    );
    assert!(new != old && alive(new) && !alive(old));
    let old_log = std::fs::read_to_string(run.join(format!("{sw}.log.1"))).expect("old log kept");
    assert!(!old_log.is_empty());
    new
}

/// How many switch ports `ibtca-fabric stats --json` shows up.
fn switch_ports_up(run: &str) -> usize {
    let out = fabric(&["stats", "--run-dir", run, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["kind"] == "switch" && p["up"] == true)
        .count()
}

#[test]
fn a_restarted_switch_gets_its_routes_again_and_rdma_goes_on() {
    let dir = TempDir::new("fab-swr");
    let fab = up(&config("four-nodes-one-switch.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let (mut a, mut b) = pair(run);
    write(&mut a, &mut b, 1, 0x11);

    let new = restart(run, "sw0");
    let args = cmdline(new);
    for route in ["--route=1=1", "--route=2=2", "--route=3=3", "--route=4=4"] {
        assert!(args.iter().any(|x| x == route), "{route}: {args:?}");
    }
    assert!(!args.iter().any(|x| x == "--sm-managed"), "{args:?}");
    for n in ["n1", "n2", "n3", "n4"] {
        wait_link_ups(run, n, 2);
    }
    assert_eq!(switch_ports_up(&run_s), 4);
    // The same QPs go on through the new switch.
    write(&mut a, &mut b, 2, 0x22);

    let bad = fabric(&["restart", "--run-dir", &run_s, "sw9"]);
    assert!(text(&bad).contains("`sw9` is no node"), "{}", text(&bad));
}

#[test]
fn a_switch_process_powered_off_takes_its_links_down_and_powered_on_carries_rdma_again() {
    let dir = TempDir::new("fab-sw-power");
    let fab = up(&config("four-nodes-one-switch.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let (mut a, mut b) = pair(run);
    write(&mut a, &mut b, 1, 0x11);

    let old = pid_of(run, "sw0");
    let out = fabric(&["switch", "--run-dir", &run_s, "sw0", "down"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("sw0: powered off"), "{}", text(&out));
    assert!(!alive(old));
    for n in ["n1", "n2", "n3", "n4"] {
        wait_log(run, n, "link down", 1);
    }
    assert_eq!(switch_ports_up(&run_s), 0);

    let out = fabric(&["switch", "--run-dir", &run_s, "sw0", "up"]);
    assert!(out.status.success(), "{}", text(&out));
    let new = pid_of(run, "sw0");
    assert!(
        text(&out).contains(&format!("sw0: powered on (pid {new})")),
        "{}",
        text(&out)
    );
    assert!(new != old && alive(new));
    for n in ["n1", "n2", "n3", "n4"] {
        wait_link_ups(run, n, 2);
    }
    assert_eq!(switch_ports_up(&run_s), 4);
    write(&mut a, &mut b, 2, 0x22);
    let again = fabric(&["switch", "--run-dir", &run_s, "sw0", "up"]);
    assert!(
        text(&again).contains("powered on (it was)"),
        "{}",
        text(&again)
    );
}

#[test]
fn with_an_sm_a_restarted_switch_comes_back_unconfigured() {
    let dir = TempDir::new("fab-swr-sm");
    let fab = up(&config("sm-four-nodes-two-switches.json"), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let new = restart(run, "right");
    let args = cmdline(new);
    assert!(args.iter().any(|x| x == "--sm-managed"), "{args:?}");
    assert!(!args.iter().any(|x| x.starts_with("--route")), "{args:?}");
    // Its devices' links and the link to `left` came back.
    for n in ["n3", "n4"] {
        wait_link_ups(run, n, 2);
    }
    assert_eq!(switch_ports_up(&run_s), 6, "every linked port");
}
