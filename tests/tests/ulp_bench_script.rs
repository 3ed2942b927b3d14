//! `scripts/ulp-bench.sh` without a VM: its options (a bad one exits 2
//! before anything boots), the guests' commands it writes with
//! `--commands` (each parses as shell; n2 measures both transports' NVMe-oF,
//! iperf3 on the three wires and the rdma_cm rows, each run as long as
//! `--seconds` says), and the table `--table` makes of ULP-BENCH lines
//! (rates as ibtca / baseline, times as baseline / ibtca, no ratio where a
//! value is missing). The measurement itself boots guests: by hand, as
//! docs/ulp-benchmarks.md says.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ibtca_tests::launcher::text;
use ibtca_tests::TempDir;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/ulp-bench.sh")
}

fn bench(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .expect("run bash")
}

#[test]
fn help_and_bad_options() {
    let help = bench(&["--help"]);
    assert!(help.status.success(), "{}", text(&help));
    let said = String::from_utf8_lossy(&help.stdout);
    for opt in ["--seconds N", "--commands DIR", "--table RESULTS"] {
        assert!(said.contains(opt), "{said}");
    }
    for bad in [
        &["--bogus"][..],
        &["--seconds", "0"],
        &["--seconds", "ten"],
        &["a", "b"],
    ] {
        let out = bench(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out));
    }
}

#[test]
fn the_guests_commands_parse_and_measure_what_the_table_shows() {
    let dir = TempDir::new("ulp-bench-commands");
    let out = bench(&["--seconds", "7", "--commands", &dir.0.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let read = |n: &str, i: usize| std::fs::read_to_string(dir.0.join(format!("{n}.{i}")));
    let cmds = |n: &str| -> Vec<String> { (1..).map_while(|i| read(n, i).ok()).collect() };
    let (n1, n2) = (cmds("n1"), cmds("n2"));
    assert_eq!((n1.len(), n2.len()), (4, 6), "{n1:?}\n{n2:?}");
    for (i, c) in n1.iter().chain(&n2).enumerate() {
        let parsed = Command::new("sh")
            .args(["-n", "-c", c])
            .output()
            .expect("run sh");
        assert!(
            parsed.status.success(),
            "command {i}: {}\n{c}",
            text(&parsed)
        );
    }
    let all = n2.join("\n");
    for want in [
        "ULP-HOST ibtca",
        "ULP-HOST rxe",
        "--runtime=7",
        "iperf3 -c 10.77.0.1 -t 7 ",
        "iperf3 -c 10.78.0.1 -t 7 ",
        "echo connected >/sys/class/net/ib0/mode",
        "rping -c -a 10.78.0.1 ",
        "rping -c -a 10.77.0.1 ",
        "ib_write_lat -R -d ibtca0 ",
        "ib_write_lat -R -d rxe0 ",
    ] {
        assert!(all.contains(want), "n2 lacks {want:?}:\n{all}");
    }
    // What bounds NVMe-oF: QD 1 latency and the host guest's vCPU busy
    // share on both transports, and the guest's own ceiling (local
    // null_blk) once, in the first transport's run.
    for t in ["ibtca", "rxe"] {
        let nvme = n2
            .iter()
            .find(|c| c.contains(&format!("ULP-HOST {t}")))
            .unwrap();
        for want in [
            "--rw=randread --bs=4k --iodepth=1 ".to_string(),
            format!("nvme-randread-4k-qd1-usec/{t} "),
            format!("nvme-randread-4k-qd16-busy/{t} "),
            "/proc/stat".to_string(),
        ] {
            assert!(nvme.contains(&want), "{t}'s run lacks {want:?}:\n{nvme}");
        }
    }
    let local = "--filename=/dev/nullb0 ";
    assert_eq!(all.matches(local).count(), 1, "{all}");
    assert!(all.contains("nvme-randread-4k-qd16-iops/local "), "{all}");
    // Each measurement's failure is reported and the next one still runs;
    // the last command says whether any failed.
    for (i, c) in n2[1..5].iter().enumerate() {
        assert!(
            c.contains("|| { echo 'ULP-BENCH-FAILED "),
            "n2.{}: {c}",
            i + 2
        );
    }
    assert_eq!(
        n2[5].trim(),
        "touch /share/bench-done; [ ! -e /tmp/bench-failed ]"
    );
    // n1 serves both transports' target and switches ib0 to connected
    // mode only once n2's datagram iperf3 is done.
    assert!(n1[2].contains("ULP-TARGET"), "{}", n1[2]);
    assert!(
        n1[3].contains("iperf-datagram-done") && n1[3].contains("connected"),
        "{}",
        n1[3]
    );
}

/// The guest's vCPU busy share over a run: 1 - (idle + iowait) / all of
/// /proc/stat's cpu line, between the snapshots before and after fio.
#[test]
fn the_busy_share_counts_idle_and_iowait_as_not_busy() {
    let dir = TempDir::new("ulp-bench-busy");
    let out = bench(&["--commands", &dir.0.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let n2 = std::fs::read_to_string(dir.0.join("n2.2")).unwrap();
    let line = n2
        .lines()
        .find(|l| l.contains("nvme-randread-4k-qd16-busy/ibtca"))
        .unwrap_or_else(|| panic!("no busy line:\n{n2}"));
    let prefix = dir.0.join("run").display().to_string();
    let line = line.replace("/tmp/randread-4k-qd16", &prefix);
    // user nice system idle iowait irq softirq: 1000 ticks pass, 200 of
    // them idle and 50 iowait.
    std::fs::write(
        format!("{prefix}.stat0"),
        "cpu  100 0 200 300 10 0 5 0 0 0\n",
    )
    .unwrap();
    std::fs::write(
        format!("{prefix}.stat1"),
        "cpu  400 0 600 500 60 0 55 0 0 0\n",
    )
    .unwrap();
    let ran = Command::new("sh").args(["-c", &line]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "ULP-BENCH nvme-randread-4k-qd16-busy/ibtca 75 %\n",
        "{line}\n{}",
        text(&ran)
    );
}

#[test]
fn the_table_gives_ratios_where_both_values_are_there() {
    let dir = TempDir::new("ulp-bench-table");
    let results = dir.0.join("results.txt");
    std::fs::write(
        &results,
        "ULP-BENCH nvme-randread-4k-qd16-iops/ibtca 1000 IOPS\n\
         ULP-BENCH nvme-randread-4k-qd16-iops/rxe 250 IOPS\n\
         ULP-BENCH iperf3-ib0-connected 300 Mbit/s\n\
         ULP-BENCH iperf3-eth0 200 Mbit/s\n\
         ULP-BENCH rping-connect/ibtca 20.0 ms\n\
         ULP-BENCH rping-connect/rxe 50.0 ms\n\
         ULP-BENCH write-lat-64/ibtca 40.5 usec\n\
         ULP-BENCH nvme-randread-4k-qd1-usec/ibtca 800 usec\n\
         ULP-BENCH nvme-randread-4k-qd1-usec/rxe 2000 usec\n\
         ULP-BENCH nvme-randread-4k-qd16-iops/local 4000 IOPS\n\
         ULP-BENCH nvme-randread-4k-qd16-busy/ibtca 95 %\n",
    )
    .unwrap();
    let out = bench(&["--table", &results.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |start: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {start}")))
            .unwrap_or_else(|| panic!("no row {start}:\n{table}"))
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .skip(1)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("NVMe-oF 4 KiB"), ["1000", "250", "soft-RoCE", "4.00"]);
    assert_eq!(
        row("NVMe-oF 4 KiB random read, QD 1,"),
        ["800", "2000", "soft-RoCE", "2.50"]
    );
    // The share of the host guest's own ceiling NVMe-oF over ibtca reaches.
    assert_eq!(
        row("NVMe-oF 4 KiB random read, QD 16, against"),
        [
            "1000",
            "4000",
            "the same fio on /dev/nullb0 in the host guest, no fabric",
            "0.25"
        ]
    );
    assert_eq!(row("Host guest vCPU busy"), ["95", "soft-RoCE"]);
    assert_eq!(
        row("iperf3 over IPoIB, connected"),
        ["300", "200", "iperf3 on the virtio management wire", "1.50"]
    );
    // A time: the baseline's over ibtca's.
    assert_eq!(row("rping"), ["20.0", "50.0", "soft-RoCE", "2.50"]);
    // One value missing: no ratio.
    assert_eq!(row("ib_write_lat"), ["40.5", "soft-RoCE"]);
    assert_eq!(
        row("iperf3 over IPoIB, datagram"),
        ["200", "iperf3 on the virtio management wire"]
    );
}
