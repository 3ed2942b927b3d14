//! `scripts/bench-host-sm.sh` with stand-ins for `ibtca-fabric`, ibsim,
//! OpenSM and ibnetdiscover (small shell scripts on `PATH`; no fabric, no
//! SM): its options (a bad one exits 2 before anything runs), the order it
//! runs the two simulators in (odd runs ibtca first, even runs ibsim
//! first), the fields of each run line (the server's CPU with its user
//! and system time, run-queue wait and MADs, OpenSM's CPU), the hive's MAD
//! count read from its "host port counters" log line and that line (its
//! `kinds=`) kept, the medians at the end, `PIN=CPU` pinning what it
//! starts, and `OPENSM_LOGS` keeping OpenSM's logs. The measurement
//! itself needs the real programs and a quiet machine: by hand, as
//! docs/host-sm.md says.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

const SCRIPT: &str = "bench-host-sm.sh";

/// `ibtca-fabric up|down`: a `sleep` as the hive (its pid in the state
/// file), and its log.
const FABRIC: &str = r#"#!/bin/bash
cmd=$1; shift
while [ $# -gt 0 ]; do
	case $1 in --run-dir) dir=$2; shift ;; esac
	shift
done
case $cmd in
up)
	mkdir -p "$dir"
	sleep 600 &
	echo "{\"nodes\": [{\"pid\": $!}]}" >"$dir/fabric-state.json"
	echo "$dir/hive.log" >"$STANDIN/hive-log"
	echo "INFO hive started" >"$dir/hive.log"
	;;
down)
	[ -e "$dir/fabric-state.json" ] || exit 0
	kill "$(grep -o '[0-9]*' "$dir/fabric-state.json" | tail -1)"
	rm -f "$dir/fabric-state.json"
	;;
esac
"#;

/// `opensm -o -f LOG`: a 1.5 s sweep on ibtca (after which the hive logs
/// 40 MADs more), 1.0 s on ibsim; it says which CPUs it may run on and
/// what its cache directory held, and leaves a file in it.
const OPENSM: &str = r#"#!/bin/bash
while [ $# -gt 0 ]; do
	case $1 in -f) log=$2; shift ;; esac
	shift
done
grep Cpus_allowed_list /proc/self/status >>"$STANDIN/opensm-cpus"
# Its cache directory and what it held at the start; then it writes one.
echo "${OSM_CACHE_DIR:-none} $(ls -A "$OSM_CACHE_DIR" 2>/dev/null | wc -l)" >>"$STANDIN/opensm-cache"
[ -z "$OSM_CACHE_DIR" ] || touch "$OSM_CACHE_DIR/guid2lid"
case $IBSIM_SOCKNAME in
*-ibsim) end="07:00:01 000000" ;;
*)
	end="07:00:01 500000"
	hive_log=$(cat "$STANDIN/hive-log")
	n=$(($(grep -c 'host port counters' "$hive_log") + 1))
	echo "INFO ibtca_hive::sim: host port counters (a client detached): requests=$((n * 40)) to_link=0 local=0 answers=0 timed_out=0 dropped=0 sent=$((n * 40)) sends=$((n * 10)) lost=0 batches=1:0,2:0,3:0,4:$((n * 10)),5-8:0,>8:0 kinds=81/0011/01:$((n * 40)) node=host" >>"$hive_log"
	;;
esac
printf 'Nov 30 07:00:00 000000 [1] Entering DISCOVERING state\nNov 30 %s [1] SUBNET UP\n' "$end" >"$log"
"#;

const IBSIM: &str = "#!/bin/bash\necho 'Network simulator ready'\nexec sleep 600\n";

const IBNETDISCOVER: &str =
    "#!/bin/bash\nprintf 'Switch 4 \"S-1\"\\n[1] \"H-1\"[1]\\nCa 1 \"H-1\"\\n[1] \"S-1\"[1]\\n'\n";

fn standins(dir: &Path) {
    for (name, body) in [
        ("ibtca-fabric", FABRIC),
        ("opensm", OPENSM),
        ("ibsim", IBSIM),
        ("ibnetdiscover", IBNETDISCOVER),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn bench(dir: &Path, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let fabric = dir.join("ibtca-fabric").display().to_string();
    let standin = dir.display().to_string();
    let mut env = vec![
        ("PATH", path.as_str()),
        ("IBTCA_FABRIC", fabric.as_str()),
        ("UMAD2SIM", ""),
        ("STANDIN", standin.as_str()),
    ];
    env.extend_from_slice(extra);
    script_cli::run(SCRIPT, args, &env)
}

#[test]
fn help_and_bad_options() {
    let dir = TempDir::new("bench-host-sm-options");
    standins(&dir.0);
    let fabric = dir.0.join("ibtca-fabric").display().to_string();
    // The stand-in fabric would make a run dir: a bad option stops first.
    script_cli::help_and_bad_options(
        SCRIPT,
        &["RADIX [RUNS] [PODS]", "PIN=", "rq-wait", "mads", "median"],
        &[
            &["--bogus"],
            &[],
            &["3"],
            &["four"],
            &["4", "0"],
            &["4", "x"],
            &["4", "1", "p"],
            &["4", "1", "2", "3"],
        ],
        &[("IBTCA_FABRIC", fabric.as_str())],
    );
    let out = bench(&dir.0, &["4", "1"], &[("PIN", "zero")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!dir.0.join("hive-log").exists(), "nothing ran");
}

#[test]
fn runs_alternate_and_report_cpu_waits_mads_and_medians() {
    let dir = TempDir::new("bench-host-sm-runs");
    standins(&dir.0);
    let out = bench(&dir.0, &["4", "2"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = said.lines().collect();
    let at = |start: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?}:\n{said}"))
    };
    assert!(at("ibtca run 1:") < at("ibsim run 1:"), "{said}");
    assert!(at("ibsim run 2:") < at("ibtca run 2:"), "{said}");
    for start in [
        "ibtca run 1:",
        "ibsim run 1:",
        "ibtca run 2:",
        "ibsim run 2:",
    ] {
        let l = lines[at(start)];
        for field in [
            "sweep ",
            "server cpu ",
            " s (user ",
            " sys ",
            " rq-wait ",
            " slices ",
            " preempted ",
            "mads ",
            "opensm cpu ",
            "ibnetdiscover ",
        ] {
            assert!(l.contains(field), "{start} lacks {field:?}: {l}");
        }
    }
    // The hive's count is its log's `sent` over the sweep, with what
    // went wrong and the batches.
    for run in ["ibtca run 1:", "ibtca run 2:"] {
        let l = lines[at(run)];
        assert!(
            l.contains(", mads 40 requests 40 timed_out 0 undeliverable 0 lost 0 batches "),
            "{l}"
        );
    }
    // The hive's counters line, its MADs by kind with it, outlives the
    // run dir.
    for run in ["ibtca run 1 hive: ", "ibtca run 2 hive: "] {
        let l = lines[at(run)];
        assert!(
            l.starts_with(&format!(
                "{run}host port counters (a client detached): requests=40 "
            )) && l.contains(" kinds=81/0011/01:40"),
            "{l}"
        );
    }
    assert!(!said.contains("ibsim run 1 hive"), "{said}");
    assert!(lines[at("ibtca run 1:")].contains("sweep 1.50 s"), "{said}");
    assert!(lines[at("ibsim run 2:")].contains("sweep 1.00 s"), "{said}");
    assert_eq!(lines[at("run 1: sweep")], "run 1: sweep ibtca/ibsim 1.50");
    assert_eq!(
        lines[at("median ibtca/ibsim")],
        "median ibtca/ibsim 1.50 (1.50-1.50) over 2 runs"
    );
    assert!(
        lines[at("median server cpu s: ibtca ")].contains("; rq-wait s: ibtca "),
        "{said}"
    );
}

#[test]
fn pinned_runs_start_everything_on_one_cpu() {
    let dir = TempDir::new("bench-host-sm-pin");
    standins(&dir.0);
    let out = bench(&dir.0, &["4", "1"], &[("PIN", "0")]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(", pinned to CPU 0;"),
        "{}",
        text(&out)
    );
    let cpus = std::fs::read_to_string(dir.0.join("opensm-cpus")).unwrap();
    assert_eq!(
        cpus, "Cpus_allowed_list:\t0\nCpus_allowed_list:\t0\n",
        "both OpenSM runs on CPU 0"
    );
}

#[test]
fn every_sweep_starts_with_an_empty_opensm_cache_of_its_own() {
    let dir = TempDir::new("bench-host-sm-cache");
    standins(&dir.0);
    let out = bench(&dir.0, &["4", "2"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let caches = std::fs::read_to_string(dir.0.join("opensm-cache")).unwrap();
    let lines: Vec<&str> = caches.lines().collect();
    assert_eq!(lines.len(), 4, "{caches}");
    for l in &lines {
        let (path, held) = l.rsplit_once(' ').unwrap();
        assert!(path.starts_with('/'), "a directory: {l}");
        assert_eq!(held, "0", "empty though the sweep before wrote one: {l}");
    }
}

#[test]
fn opensm_logs_are_kept_by_kind_and_run_when_asked() {
    let dir = TempDir::new("bench-host-sm-logs");
    standins(&dir.0);
    let logs = dir.0.join("sm-logs");
    let logs_arg = logs.display().to_string();
    let out = bench(&dir.0, &["4", "2"], &[("OPENSM_LOGS", logs_arg.as_str())]);
    assert!(out.status.success(), "{}", text(&out));
    let mut kept: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            "opensm-ibsim-1.log",
            "opensm-ibsim-2.log",
            "opensm-ibtca-1.log",
            "opensm-ibtca-2.log"
        ]
    );
    // Each is the log of its own simulator's sweep (the stand-in OpenSM
    // ends 0.5 s later on ibtca).
    for (kind, end) in [("ibtca", "07:00:01 500000"), ("ibsim", "07:00:01 000000")] {
        for run in [1, 2] {
            let log =
                std::fs::read_to_string(logs.join(format!("opensm-{kind}-{run}.log"))).unwrap();
            assert!(
                log.contains(&format!("{end} [1] SUBNET UP")),
                "{kind} {run}: {log}"
            );
        }
    }
}
