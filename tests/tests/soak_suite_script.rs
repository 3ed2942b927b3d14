//! `scripts/soak-suite.sh` without running the real suite: its
//! options (a bad one exits 2 before any hog starts), and, with a stand-in
//! suite command (`IBTCA_SUITE_CMD`), that every run sees one busy hog per
//! CPU beside it and is told to keep going after a failure, that a failed
//! run's row names the tests that failed and the exit status is 1, and that
//! no hog outlives the script.

use std::process::Output;

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

fn run(args: &[&str], suite: Option<&str>) -> Output {
    let env: Vec<(&str, &str)> = suite.map(|s| ("IBTCA_SUITE_CMD", s)).into_iter().collect();
    script_cli::run("soak-suite.sh", args, &env)
}

#[test]
fn help_and_bad_options() {
    // The stand-in would fail the test if a bad option ever reached a run.
    script_cli::help_and_bad_options(
        "soak-suite.sh",
        &["--runs N", "--no-vm", "--hog-nice N", "--log-dir DIR"],
        &[
            &["--bogus"],
            &["--runs", "0"],
            &["--runs", "five"],
            &["--runs"],
            &["--hog-nice", "20"],
            &["--hog-nice", "-1"],
        ],
        &[("IBTCA_SUITE_CMD", "false")],
    );
    let out = run(&["--bogus"], Some("false"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("soak-suite.sh: error: "),
        "{}",
        text(&out)
    );
}

/// The stand-in suite: counts its runs, records the `yes` processes whose
/// parent is the script and the keep-going setting it was given, and fails
/// its second run with libtest's line for a failed test. A hog the script
/// forked runs `yes` only once it has exec'd, maybe after the suite
/// started: the stand-in waits (10 s at most) for one per CPU (`nproc`,
/// as the script counts them) before it records them.
const STAND_IN: &str = r#"set -u
d=$1
n=$(cat "$d/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" >"$d/count"
hogs() {
	for p in /proc/[0-9]*; do
		[ "$(cat "$p/comm" 2>/dev/null)" = yes ] || continue
		[ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$PPID" ] && echo "${p#/proc/}"
	done
}
for _ in $(seq 200); do
	[ "$(hogs | wc -l)" -ge "$(nproc)" ] && break
	sleep 0.05
done
hogs >"$d/hogs-$n"
echo "${IBTCA_TEST_NO_FAIL_FAST:-unset}" >"$d/keep-going-$n"
echo "test passing::one ... ok"
if [ "$n" = 2 ]; then
	echo "test vm_x::boots_and_pings ... FAILED"
	echo "test other::check ... FAILED"
	exit 3
fi
"#;

#[test]
fn every_run_has_a_hog_per_cpu_and_a_failed_run_names_its_tests() {
    let dir = TempDir::new("soak-suite");
    let stand_in = dir.0.join("stand-in.sh");
    std::fs::write(&stand_in, STAND_IN).unwrap();
    let logs = dir.0.join("logs");
    let suite = format!("bash {} {}", stand_in.display(), dir.0.display());
    let out = run(
        &[
            "--runs",
            "3",
            "--hog-nice",
            "19",
            "--log-dir",
            &logs.display().to_string(),
        ],
        Some(&suite),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    let cpus = std::thread::available_parallelism().unwrap().get();
    let mut hogs = Vec::new();
    for n in 1..=3 {
        let seen = std::fs::read_to_string(dir.0.join(format!("hogs-{n}"))).unwrap();
        let pids: Vec<&str> = seen.lines().collect();
        assert_eq!(pids.len(), cpus, "run {n} ran beside {pids:?}");
        hogs.extend(pids.iter().map(|p| p.to_string()));
        let keep_going = std::fs::read_to_string(dir.0.join(format!("keep-going-{n}"))).unwrap();
        assert_eq!(keep_going.trim(), "1", "run {n}");
        assert!(logs.join(format!("run-{n}.log")).exists(), "run {n}'s log");
    }
    for pid in &hogs {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        assert_ne!(comm.trim(), "yes", "hog {pid} outlived the script");
    }

    let table = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
    assert_eq!(rows.len(), 4, "{table}");
    assert!(
        rows[1].starts_with("| 1 |") && rows[1].contains("| passed | - |"),
        "{table}"
    );
    assert!(
        rows[2].starts_with("| 2 |")
            && rows[2].contains("| FAILED (exit 3) | other::check, vm_x::boots_and_pings |"),
        "{table}"
    );
    assert!(
        rows[3].starts_with("| 3 |") && rows[3].contains("| passed |"),
        "{table}"
    );
    assert!(table.contains("1 of 3 runs failed."), "{table}");
    assert!(
        table.contains(&format!("{cpus} CPU hog(s) at nice 19")),
        "{table}"
    );
}
