//! `scripts/drdma-verbs-bench.sh` without a VM: its options (a bad one
//! exits 2 before anything boots) and the table `--table` makes of
//! `ibtcadv-bench` DVBENCH lines: one row per window, operation and size,
//! DRDMA / RDMA for the QD 1 median and for the rate, no ratio where a
//! value is missing, and exit 1 when a client failed or verified nothing.
//! The measurement itself boots guests: by hand, as docs/drdma-verbs.md
//! says.

use std::process::Output;

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

fn bench(args: &[&str]) -> Output {
    script_cli::run("drdma-verbs-bench.sh", args, &[])
}

#[test]
fn help_and_bad_options() {
    script_cli::help_and_bad_options(
        "drdma-verbs-bench.sh",
        &["--iters N", "--seconds S", "--table RESULTS"],
        &[
            &["--bogus"],
            &["--iters", "0"],
            &["--iters", "ten"],
            &["--seconds", "x"],
            &["--seconds", "1.2.3"],
            &["a", "b"],
        ],
        &[],
    );
}

/// The cells of the table's row that starts with `start`.
fn row(table: &str, start: &str) -> Vec<String> {
    table
        .lines()
        .find(|l| l.starts_with(&format!("| {start} |")))
        .unwrap_or_else(|| panic!("no row {start}:\n{table}"))
        .split('|')
        .map(str::trim)
        .skip(1)
        .map(str::to_owned)
        .collect::<Vec<_>>()
}

const LINES: &str = "DVBENCH client window=mapped ranges=32 pmbs=32 open=32 mtu=4096 rd_atom=16\n\
    # DVBENCH window path op size med_us p99_us msg_s depth qd1_n rate_n\n\
    DVBENCH mapped rdma write 64 100.0 180.5 8000 8 200 150\n\
    DVBENCH mapped drdma write 64 250.0 400.0 2000 8 200 120\n\
    DVBENCH mapped rdma read 65536 900.0 1000.0 500 2 50 40\n\
    DVBENCH mapped drdma read 65536 2700.0 3000.0 125 2 20 10\n\
    DVBENCH verified 1234 transfers\n\
    DVBENCH trapped rdma write 1024 80.0 90.0 9000 8 200 150\n\
    DVBENCH trapped rdma read 4096 80.0 90.0 9000 8 200 150\n\
    DVBENCH trapped drdma read 4096 8000.0 9000.0 80 8 20 3\n\
    DVBENCH verified 99 transfers\n";

#[test]
fn the_table_sets_drdma_against_rdma() {
    let dir = TempDir::new("drdma-verbs-table");
    let results = dir.0.join("results.txt");
    std::fs::write(&results, LINES).unwrap();
    let out = bench(&["--table", &results.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        row(&table, "mapped | WRITE | 64 B"),
        [
            "mapped",
            "WRITE",
            "64 B",
            "100.0 (180.5)",
            "250.0 (400.0)",
            "2.50",
            "8000",
            "2000",
            "0.25",
            "8",
            ""
        ]
    );
    assert_eq!(
        row(&table, "mapped | READ | 64 KiB"),
        [
            "mapped",
            "READ",
            "64 KiB",
            "900.0 (1000.0)",
            "2700.0 (3000.0)",
            "3.00",
            "500",
            "125",
            "0.25",
            "2",
            ""
        ]
    );
    // Only the ordinary path measured: no ratio.
    assert_eq!(
        row(&table, "trapped | WRITE | 1 KiB"),
        [
            "trapped",
            "WRITE",
            "1 KiB",
            "80.0 (90.0)",
            "",
            "",
            "9000",
            "",
            "",
            "8",
            ""
        ]
    );
    // A rate below a hundredth of the other's.
    assert_eq!(
        row(&table, "trapped | READ | 4 KiB"),
        [
            "trapped",
            "READ",
            "4 KiB",
            "80.0 (90.0)",
            "8000.0 (9000.0)",
            "100.00",
            "9000",
            "80",
            "<0.01",
            "8",
            ""
        ]
    );
    // Header, separator and the four rows: the client and comment lines
    // make none.
    assert_eq!(table.lines().count(), 6, "{table}");
}

#[test]
fn a_failed_or_silent_client_fails_the_table() {
    let dir = TempDir::new("drdma-verbs-table-failed");
    let failed = dir.0.join("failed.txt");
    std::fs::write(
        &failed,
        format!("{LINES}DVBENCH-FAIL drdma WRITE 4096: the server's memory differs\n"),
    )
    .unwrap();
    let out = bench(&["--table", &failed.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let unverified = dir.0.join("unverified.txt");
    std::fs::write(&unverified, "DVBENCH mapped rdma write 64 1 2 3 8 3 3\n").unwrap();
    let out = bench(&["--table", &unverified.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}
