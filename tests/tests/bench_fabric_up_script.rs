//! `scripts/bench-fabric-up.sh` with stand-ins for `ibtca-fabric` and
//! `ibtca-hive` (small shell scripts whose "nodes" are `sleep`s; no
//! fabric): its options (a bad one exits 2 before anything runs), the one
//! line it prints for `up --net` and for a hive (the net file's or hive
//! file's CAs and switches, the processes of the state file, their
//! threads, memory and idle CPU, the wall times of `up` and `down`), and
//! that it leaves no process behind. The figures themselves need the
//! real binaries: BENCHMARKS.md, "Guestless nodes in one process".

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

const SCRIPT: &str = "bench-fabric-up.sh";

/// `ibtca-fabric up|down --run-dir DIR`: `up` starts two `sleep`s, the
/// state file lists them as `up` writes it; `down` stops them. Each takes
/// half a second at least, so the script's times of them can be told from
/// times of nothing.
const FABRIC: &str = r#"#!/bin/bash
cmd=$1; shift
while [ $# -gt 0 ]; do
	case $1 in --run-dir) dir=$2; shift ;; esac
	shift
done
case $cmd in
up)
	mkdir -p "$dir"
	sleep 600 & a=$!
	sleep 600 & b=$!
	printf '{\n  "processes": [\n    { "name": "a", "pid": %d },\n    { "name": "b", "pid": %d }\n  ]\n}\n' $a $b >"$dir/fabric-state.json"
	echo "$a $b" >>"$STANDIN/pids"
	sleep 0.5
	;;
down)
	kill $(grep -o '"pid": [0-9]*' "$dir/fabric-state.json" | grep -o '[0-9]*$')
	rm "$dir/fabric-state.json"
	echo down >>"$STANDIN/downs"
	sleep 0.5
	;;
esac
"#;

/// `ibtca-hive --config FILE`: logs that it started, then sleeps.
const HIVE: &str = r#"#!/bin/bash
echo "$$" >>"$STANDIN/pids"
echo "INFO ibtca_hive: nodes=13 sockets=1 hive started"
exec sleep 600
"#;

fn standins(dir: &Path) {
    for (name, body) in [("ibtca-fabric", FABRIC), ("ibtca-hive", HIVE)] {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn bench(dir: &Path, args: &[&str]) -> Output {
    let fabric = dir.join("ibtca-fabric").display().to_string();
    let hive = dir.join("ibtca-hive").display().to_string();
    let standin = dir.display().to_string();
    script_cli::run(
        SCRIPT,
        args,
        &[
            ("IBTCA_FABRIC", &fabric),
            ("IBTCA_HIVE", &hive),
            ("STANDIN", &standin),
        ],
    )
}

/// No process the stand-ins started is left. The stand-in `down` only
/// signals its nodes, so a node may still be on its way out: they get
/// 10 s.
#[track_caller]
fn none_left(dir: &Path) {
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    for pid in pids.split_whitespace() {
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie its reaper has not waited for yet.
            if stat.is_empty() || stat.contains(") Z ") {
                break;
            }
            assert!(Instant::now() < deadline, "{pid} left running: {stat}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn help_and_bad_options() {
    let dir = TempDir::new("bench-fabric-up-options");
    standins(&dir.0);
    let fabric = dir.0.join("ibtca-fabric").display().to_string();
    let hive = dir.0.join("ibtca-hive").display().to_string();
    script_cli::help_and_bad_options(
        SCRIPT,
        &[
            "--process-per-node",
            "--hive",
            "--routes",
            "--idle S",
            "RADIX [PODS]",
        ],
        &[
            &["--bogus", "4"],
            &[],
            &["four"],
            &["4", "x"],
            &["4", "1", "2"],
            &["--idle", "0", "4"],
            &["--idle"],
            &["--routes", "4"],
            &["--hive", "4", "2"],
            &["--hive", "--process-per-node", "4"],
        ],
        &[("IBTCA_FABRIC", &fabric), ("IBTCA_HIVE", &hive)],
    );
    assert!(
        !dir.0.join("pids").exists(),
        "a bad option started something"
    );
}

#[test]
fn up_net_prints_the_processes_their_memory_and_cpu_and_the_times_of_up_and_down() {
    let dir = TempDir::new("bench-fabric-up-net");
    standins(&dir.0);
    let out = bench(&dir.0, &["--idle", "1", "--process-per-node", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    let line = said
        .lines()
        .find(|l| l.starts_with("ibtca-fabric up --net "))
        .unwrap_or_else(|| panic!("no result line:\n{said}"));
    // fat-tree-net.sh 4: 4 leaves of 2 CAs, 2 spines.
    assert!(
        line.starts_with(
            "ibtca-fabric up --net (fat-tree-net.sh 4, --process-per-node): 8 CAs, 6 switches: up "
        ),
        "{line}"
    );
    for field in [
        " s, down ",
        " s, processes 2, threads 2, RSS ",
        " MiB, PSS ",
        " MiB, idle CPU ",
        " s over 1 s (",
        " % of one CPU)",
    ] {
        assert!(line.contains(field), "no {field:?}: {line}");
    }
    // The times are of `up` and `down` themselves (each sleeps 0.5 s).
    let secs = |after: &str| -> f64 {
        let rest = line.split_once(after).unwrap().1;
        rest.split_once(" s,").unwrap().0.parse().unwrap()
    };
    assert!(secs(": up ") >= 0.5, "{line}");
    assert!(secs(" s, down ") >= 0.5, "{line}");
    assert!(said.contains("load average: "), "{said}");
    assert_eq!(
        std::fs::read_to_string(dir.0.join("downs")).unwrap(),
        "down\n"
    );
    none_left(&dir.0);
}

#[test]
fn a_hive_prints_its_nodes_memory_and_cpu_and_is_stopped() {
    let dir = TempDir::new("bench-fabric-up-hive");
    standins(&dir.0);
    let out = bench(&dir.0, &["--hive", "--routes", "--idle", "1", "4"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    // fat-tree-hive.sh 4: leaf1's port 1 is the SM's socket, not a CA.
    assert!(
        said.contains(
            "ibtca-hive --config (fat-tree-hive.sh 4, ROUTES=1): 7 CAs, 6 switches: processes 1, threads 1, RSS "
        ),
        "{said}"
    );
    assert!(!said.contains("up "), "a hive has no up: {said}");
    assert!(!dir.0.join("downs").exists());
    none_left(&dir.0);
}
