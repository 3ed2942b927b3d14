//! `scripts/ulp-profile.sh` without a VM: its options (a bad one exits 2
//! before anything boots), the guests' commands it writes with
//! `--commands` (each parses as shell; n2 runs the 4 KiB and 128 KiB reads
//! on its own null_blk, over NVMe-oF, and over NVMe-oF under `perf record`,
//! each between start and end markers; n1 opens one window per run in the
//! same order, for as long as a run lasts, and records the perf runs;
//! `--no-dim` and `--scheduler` reach the guests), and its host-side CPU
//! count (`tree_ticks`: a process's ticks with its threads and
//! descendants, read from stat files whose command names hold spaces and
//! parentheses). The profile itself boots guests: docs/ulp-benchmarks.md.

use std::process::Command;

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

const SCRIPT: &str = "ulp-profile.sh";

/// The runs, in the order n2 makes them.
const RUNS: [&str; 6] = [
    "local-randread-4k-qd16",
    "local-seqread-128k-qd16",
    "nvme-randread-4k-qd16",
    "nvme-seqread-128k-qd16",
    "perf-randread-4k-qd16",
    "perf-seqread-128k-qd16",
];

fn commands(args: &[&str]) -> (Vec<String>, Vec<String>) {
    let dir = TempDir::new("ulp-profile-commands");
    let d = dir.0.display().to_string();
    let mut all = args.to_vec();
    all.extend(["--commands", &d]);
    let out = script_cli::run(SCRIPT, &all, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let (n1, n2) = (
        script_cli::written_commands(&dir.0, "n1"),
        script_cli::written_commands(&dir.0, "n2"),
    );
    script_cli::assert_each_parses_as_shell(n1.iter().chain(&n2));
    (n1, n2)
}

/// The names of `what-NAME` in `text`, in order of appearance.
fn markers(text: &str, what: &str) -> Vec<String> {
    text.match_indices(what)
        .map(|(i, _)| {
            text[i + what.len()..]
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .next()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn help_and_bad_options() {
    script_cli::help_and_bad_options(
        SCRIPT,
        &["--seconds N", "--no-dim", "--scheduler S", "--commands DIR"],
        &[
            &["--bogus"],
            &["--seconds", "0"],
            &["--seconds", "ten"],
            &["--seconds"],
            &["--scheduler", "bfq"],
            &["--commands"],
            &["a", "b"],
        ],
        &[],
    );
}

#[test]
fn n1_opens_one_window_per_run_of_n2_in_the_same_order() {
    let (n1, n2) = commands(&["--seconds", "7"]);
    assert_eq!((n1.len(), n2.len()), (3, 3), "{n1:?}\n{n2:?}");
    let (host, watch) = (&n2[2], &n1[1]);

    // n2: each run between its markers, as long as --seconds says, on the
    // device its name says, the perf runs under perf record; n1's report
    // awaited before the next run.
    assert_eq!(markers(host, "touch /share/prof/start-"), RUNS, "{host}");
    assert_eq!(markers(host, "touch /share/prof/end-"), RUNS, "{host}");
    assert_eq!(markers(host, "[ -e /share/prof/n1-"), RUNS, "{host}");
    for run in RUNS {
        let fio = host
            .lines()
            .find(|l| l.contains(&format!("fio --name={run} ")))
            .unwrap_or_else(|| panic!("no fio run {run}:\n{host}"));
        assert!(
            fio.contains(" --runtime=7 ") && fio.contains(" --direct=1 "),
            "{fio}"
        );
        let dev = if run.starts_with("local-") {
            "--filename=/dev/nullb0 "
        } else {
            "--filename=$ns1 "
        };
        assert!(fio.contains(dev), "{fio}");
        let args = if run.contains("4k") {
            "--rw=randread --bs=4k --iodepth=16"
        } else {
            "--rw=read --bs=128k --iodepth=16"
        };
        assert!(
            fio.ends_with(&format!(
                "{args} >/tmp/{run}.terse 2>/tmp/{run}.err || rc=1"
            )),
            "{fio}"
        );
        assert_eq!(
            fio.starts_with(&format!(
                "perf record -a -g -e cpu-clock -F 1000 -o /tmp/{run}.data -- fio "
            )),
            run.starts_with("perf-"),
            "{fio}"
        );
    }

    // n1: waits for the same start markers in the same order, each window
    // --seconds long, the perf runs recorded.
    assert_eq!(markers(watch, "[ -e /share/prof/start-"), RUNS, "{watch}");
    let windows: Vec<&str> = watch.lines().filter(|l| l.contains("sleep 7")).collect();
    assert_eq!(windows.len(), RUNS.len(), "{watch}");
    for (w, run) in windows.iter().zip(RUNS) {
        assert_eq!(
            w.starts_with(&format!(
                "perf record -a -g -e cpu-clock -F 1000 -o /tmp/{run}.data -- sleep 7"
            )),
            run.starts_with("perf-"),
            "{w}"
        );
    }
    assert!(watch.contains(") >/tmp/prof-watch.log 2>&1 &"), "{watch}");
    // The kernel's choice of scheduler and DIM unless told.
    let all = format!("{}\n{}", n1.join("\n"), n2.join("\n"));
    assert!(!all.contains("adaptive-moderation off"), "{all}");
    assert!(!all.contains("/queue/scheduler; do echo"), "{all}");
}

#[test]
fn no_dim_and_the_scheduler_reach_the_guests() {
    let (n1, n2) = commands(&["--no-dim", "--scheduler", "none"]);
    for (n, c) in [("n1", &n1[1]), ("n2", &n2[1])] {
        assert!(
            c.contains("rdma dev set ibtca0 adaptive-moderation off || exit 1"),
            "{n}: {c}"
        );
    }
    assert!(
        n2[2].contains(
            "for q in /sys/block/nvme*c*n*/queue/scheduler; do echo none >$q || rc=1; done"
        ),
        "{}",
        n2[2]
    );
    // Set after the connection (ulp_host's nvmf_up), before the first run.
    let set = n2[2].find("echo none >$q").unwrap();
    assert!(n2[2].find("nvmf_up || exit 1").unwrap() < set, "{}", n2[2]);
    assert!(
        set < n2[2].find("touch /share/prof/start-").unwrap(),
        "{}",
        n2[2]
    );
}

#[test]
fn tree_ticks_counts_a_process_with_its_descendants() {
    let proc = TempDir::new("ulp-profile-proc");
    // pid, comm, ppid, utime, stime.
    let procs: [(u32, &str, u32, u64, u64); 6] = [
        (1, "init", 0, 1000, 1000),
        (100, "run-vm.sh", 1, 1, 2),
        (101, "qemu (n1) x) y", 100, 300, 50),
        (102, "qemu-helper", 101, 5, 5),
        (200, "ibtca-device", 1, 7, 3),
        (300, "other", 1, 40, 40),
    ];
    for (pid, comm, ppid, u, s) in procs {
        let dir = proc.0.join(pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        // Fields 3.. after "pid (comm) ": state, ppid, pgrp, session,
        // tty_nr, tpgid, flags, minflt, cminflt, majflt, cmajflt, utime,
        // stime, cutime (a reaped child's: not counted), ...
        let stat = format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194304 9 0 0 0 {u} {s} 999 0 20 0 1 0\n"
        );
        std::fs::write(dir.join("stat"), stat).unwrap();
    }
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ULP_PROFILE_LIB=1 . {} && PROC={} tree_ticks 100 200 300 102",
            script_cli::path(SCRIPT).display(),
            proc.0.display()
        ))
        .output()
        .expect("run bash");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "100 363\n200 10\n300 80\n102 10\n"
    );
}
