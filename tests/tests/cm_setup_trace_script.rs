//! `scripts/cm-setup-trace.sh` without a VM: its options (a bad one exits 2
//! before anything boots), the guests' commands it writes with `--commands`
//! (each parses as shell; n2 runs rping `--runs` times per transport and
//! round between trace markers, with the driver's device commands probed),
//! and `--summary` on a trace: ms per run from the markers, the median, and
//! the device commands per run. The trace itself needs guests:
//! docs/cm-setup.md.

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

const SCRIPT: &str = "cm-setup-trace.sh";

#[test]
fn help_and_bad_options() {
    script_cli::help_and_bad_options(
        SCRIPT,
        &["--runs N", "--commands DIR", "--summary N2_TRACE"],
        &[
            &["--bogus"],
            &["--runs", "0"],
            &["--runs", "five"],
            &["a", "b"],
        ],
        &[],
    );
}

#[test]
fn the_guests_commands_parse_and_trace_each_rping_run() {
    let dir = TempDir::new("cm-setup-commands");
    let out = script_cli::run(
        SCRIPT,
        &["--runs", "3", "--commands", &dir.0.display().to_string()],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let cmds = |n: &str| script_cli::written_commands(&dir.0, n);
    let (n1, n2) = (cmds("n1"), cmds("n2"));
    assert_eq!((n1.len(), n2.len()), (2, 2), "{n1:?}\n{n2:?}");
    script_cli::assert_each_parses_as_shell(n1.iter().chain(&n2));
    let (n1, n2) = (n1.join("\n"), n2.join("\n"));
    for want in [
        "rping -s -P -V -S 64 -a 10.78.0.1 ",
        "rping -s -P -V -S 64 -a 10.77.0.1 ",
        "cat /sys/kernel/tracing/trace > /share/n1-trace.txt",
    ] {
        assert!(n1.contains(want), "n1 lacks {want:?}:\n{n1}");
    }
    // Two rounds of both transports, three runs each, between markers.
    assert_eq!(n2.matches("for i in $(seq 3); do").count(), 4, "{n2}");
    assert_eq!(n2.matches("rping -c -a 10.78.0.1 -I 10.78.0.2 ").count(), 2);
    assert_eq!(n2.matches("rping -c -a 10.77.0.1 -I 10.77.0.2 ").count(), 2);
    for want in [
        "echo \"run ibtca $i\" > /sys/kernel/tracing/trace_marker",
        "echo \"end rxe $i\" > /sys/kernel/tracing/trace_marker",
        "p:ibtca/cmd ibtca_cmd_run op=%si:u8",
        "r:ibtca/cmdret ibtca_cmd_run ret=$retval:s32",
        "for s in rdma_cma ib_cma ib_mad ib_umad ib_sa;",
        "cat /sys/kernel/tracing/trace > /share/n2-trace.txt",
    ] {
        assert!(n2.contains(want), "n2 lacks {want:?}:\n{n2}");
    }
}

/// Three ibtca runs of 100, 300 and 200 ms (median 200) with two, one and
/// three device commands, and one rxe run of 50 ms with none; events
/// outside the markers do not count.
#[test]
fn the_summary_gives_each_transports_runs_median_and_commands() {
    let dir = TempDir::new("cm-setup-summary");
    let trace = dir.0.join("n2-trace.txt");
    let line = |t: f64, what: &str| format!("   sh-200     [000] ..... {t:.6}: {what}\n");
    let cmd = |t: f64| {
        format!("   rping-300  [000] ..... {t:.6}: cmd: (ibtca_cmd_run+0x0/0x270 [ibtca]) op=16\n")
    };
    let mut s = String::from("# tracer: nop\n");
    s += &cmd(0.5);
    for (i, (t0, ms, n)) in [(1.0, 100.0, 2), (2.0, 300.0, 1), (3.0, 200.0, 3)]
        .into_iter()
        .enumerate()
    {
        s += &line(t0, &format!("tracing_mark_write: run ibtca {}", i + 1));
        for k in 0..n {
            s += &cmd(t0 + 0.001 * f64::from(k + 1));
        }
        s += &line(
            t0 + ms / 1000.0,
            &format!("tracing_mark_write: end ibtca {}", i + 1),
        );
    }
    s += &line(5.0, "tracing_mark_write: run rxe 1");
    s += &line(5.05, "tracing_mark_write: end rxe 1");
    s += &cmd(6.0);
    std::fs::write(&trace, s).expect("write the trace");
    let out = script_cli::run(SCRIPT, &["--summary", &trace.display().to_string()], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = said.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "CM-SETUP ibtca runs 3 ms-per-run 100.0 300.0 200.0 median 200.0 device-commands-per-run 2.0",
            "CM-SETUP rxe runs 1 ms-per-run 50.0 median 50.0 device-commands-per-run 0.0",
        ],
        "{said}"
    );
}
