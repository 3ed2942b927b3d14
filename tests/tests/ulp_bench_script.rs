//! `scripts/ulp-bench.sh` without a VM: its options (a bad one exits 2
//! before anything boots), the guests' commands it writes with
//! `--commands` (each parses as shell; n2 measures both transports' NVMe-oF,
//! iperf3 on the three wires, the rdma_cm rows and ucx_perftest, each run
//! as long as `--seconds` says), and the table `--table` makes of ULP-BENCH lines
//! (rates as ibtca / baseline, times as baseline / ibtca, no ratio where a
//! value is missing). The measurement itself boots guests: by hand, as
//! docs/ulp-benchmarks.md says.

use std::path::PathBuf;
use std::process::{Command, Output};

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

fn bench(args: &[&str]) -> Output {
    script_cli::run("ulp-bench.sh", args, &[])
}

fn which(name: &str) -> PathBuf {
    let out = Command::new("bash")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .expect("run bash");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn which_bash() -> PathBuf {
    which("bash")
}

#[test]
fn help_and_bad_options() {
    script_cli::help_and_bad_options(
        "ulp-bench.sh",
        &[
            "--seconds N",
            "--rdma-cm",
            "--commands DIR",
            "--table RESULTS",
        ],
        &[
            &["--bogus"],
            &["--seconds", "0"],
            &["--seconds", "ten"],
            &["a", "b"],
        ],
        &[],
    );
}

#[test]
fn the_guests_commands_parse_and_measure_what_the_table_shows() {
    let dir = TempDir::new("ulp-bench-commands");
    let out = bench(&["--seconds", "7", "--commands", &dir.0.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let cmds = |n: &str| script_cli::written_commands(&dir.0, n);
    let (n1, n2) = (cmds("n1"), cmds("n2"));
    assert_eq!((n1.len(), n2.len()), (4, 7), "{n1:?}\n{n2:?}");
    script_cli::assert_each_parses_as_shell(n1.iter().chain(&n2));
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
        "ucmatose -s 10.78.0.1 -b 10.78.0.2 -c 10 -C 1 ",
        "ucmatose -s 10.77.0.1 -b 10.77.0.2 -c 10 -C 1 ",
        "ib_write_lat -R -d ibtca0 ",
        "ib_write_lat -R -d rxe0 ",
        "UCX_NET_DEVICES=ibtca0:1 UCX_TLS=rc_verbs,ud_verbs:aux ",
        "UCX_NET_DEVICES=rxe0:1,eth0 UCX_TLS=rc_verbs,tcp:aux ",
        "ucx_perftest -P 0 10.77.0.1 -t tag_lat -s 8 ",
        "ucx_perftest -P 0 10.77.0.1 -t tag_bw -s 1048576 ",
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
    for (i, c) in n2[1..6].iter().enumerate() {
        assert!(
            c.contains("|| { echo 'ULP-BENCH-FAILED "),
            "n2.{}: {c}",
            i + 2
        );
    }
    assert_eq!(
        n2[6].trim(),
        "touch /share/bench-done; [ ! -e /tmp/bench-failed ]"
    );
    // n1 serves ucmatose on both addresses, a one-shot server per run.
    for a in ["10.78.0.1", "10.77.0.1"] {
        let serve = format!("ucmatose -b {a} -c 10 -C 1 &");
        assert!(n1[1].contains(&serve), "n1 lacks {serve:?}:\n{}", n1[1]);
    }
    // n1 serves both transports' target and switches ib0 to connected
    // mode only once n2's datagram iperf3 is done.
    assert!(n1[2].contains("ULP-TARGET"), "{}", n1[2]);
    assert!(
        n1[3].contains("iperf-datagram-done") && n1[3].contains("connected"),
        "{}",
        n1[3]
    );
    // n1 serves every ucx_perftest run (each serves one) on its own port,
    // with the client's transport, and waits until each one listens.
    for port in 13500..13508 {
        let env = if port < 13504 {
            "UCX_NET_DEVICES=ibtca0:1 UCX_TLS=rc_verbs,ud_verbs:aux"
        } else {
            "UCX_NET_DEVICES=rxe0:1,eth0 UCX_TLS=rc_verbs,tcp:aux"
        };
        let serve = format!("{env} ucx_perftest -P 0 -p {port} ");
        assert!(n1[1].contains(&serve), "n1 lacks {serve:?}:\n{}", n1[1]);
        assert!(all.contains(&format!(" -p {port} ")), "no client of {port}");
        let listening = format!(":{port:04X} 0+:0000 0A");
        assert!(n1[1].contains(&listening), "{listening}:\n{}", n1[1]);
    }
}

/// Each ucx_perftest row: a short run (100 ping-pongs, 10 messages) whose
/// Final line says how long one iteration takes, then a run of as many
/// iterations as fill `--seconds`, whose Final line gives the row. Run
/// here with a `ucx_perftest` that prints a Final line as UCX 1.18 does.
#[test]
fn the_ucx_runs_last_as_long_as_seconds_says() {
    let dir = TempDir::new("ulp-bench-ucx");
    let cmds = dir.0.join("cmds");
    let out = bench(&["--seconds", "7", "--commands", &cmds.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let n2 = std::fs::read_to_string(cmds.join("n2.6")).unwrap();
    assert!(n2.contains("ULP-BENCH ucx-tag-lat-8/"), "{n2}");
    let run = dir.0.join("run");
    std::fs::create_dir(&run).unwrap();
    let n2 = n2.replace("/tmp/", &format!("{}/", run.display()));
    // Final: iterations, latency (usec) median, average, overall,
    // bandwidth (MB/s) average, overall, message rate average, overall.
    // tag_lat: 50 usec one way, 100 usec per ping-pong; tag_bw: 25 MB/s,
    // 25 messages of 1 MiB a second.
    let bin = dir.0.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = format!(
        "#!/bin/sh\n\
         echo \"$UCX_NET_DEVICES $*\" >>{log}\n\
         n=0; t=; while [ $# -gt 0 ]; do case $1 in -n) n=$2 ;; -t) t=$2 ;; esac; shift; done\n\
         case $t in\n\
         tag_lat) echo \"Final: $n 40.000 45.000 50.000 0.15 0.15 10000 10000\" ;;\n\
         tag_bw) echo \"Final: $n 39900.000 40000.000 40000.000 24.00 25.00 25 25\" ;;\n\
         esac\n",
        log = dir.0.join("calls").display()
    );
    let fake_path = bin.join("ucx_perftest");
    std::fs::write(&fake_path, fake).unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(&fake_path)
        .status()
        .unwrap();
    // The guests' dash has `set -o pipefail`; a build host's sh may not.
    std::os::unix::fs::symlink(which_bash(), bin.join("sh")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let ran = Command::new("sh")
        .args(["-c", &n2])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(ran.status.success(), "{}", text(&ran));
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "ULP-BENCH ucx-tag-lat-8/ibtca 40.000 usec (70000 iterations)\n\
         ULP-BENCH ucx-tag-bw-1m/ibtca 25.00 MB/s (175 iterations)\n\
         ULP-BENCH ucx-tag-lat-8/rxe 40.000 usec (70000 iterations)\n\
         ULP-BENCH ucx-tag-bw-1m/rxe 25.00 MB/s (175 iterations)\n",
        "{}",
        text(&ran)
    );
    let calls = std::fs::read_to_string(dir.0.join("calls")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 8, "{calls:#?}");
    for (i, (dev, size, n)) in [
        ("ibtca0:1", "8", "100"),
        ("ibtca0:1", "8", "70000"),
        ("ibtca0:1", "1048576", "10"),
        ("ibtca0:1", "1048576", "175"),
        ("rxe0:1,eth0", "8", "100"),
        ("rxe0:1,eth0", "8", "70000"),
        ("rxe0:1,eth0", "1048576", "10"),
        ("rxe0:1,eth0", "1048576", "175"),
    ]
    .into_iter()
    .enumerate()
    {
        let port = 13500 + i;
        assert!(
            calls[i].starts_with(&format!("{dev} -P 0 10.77.0.1 "))
                && calls[i].contains(&format!(" -s {size} "))
                && calls[i].ends_with(&format!(" -p {port} -n {n}")),
            "call {i}: {}",
            calls[i]
        );
    }
}

/// `--rdma-cm` keeps the rdma_cm rows (rping and ucmatose on both
/// transports, `ib_write_lat -R` on both devices) and their servers, and
/// drops the rest: no fio, iperf3 client, UCX client or nvmet target; n2
/// starts once n1 says its servers listen, and n1 stays up until n2 is
/// done.
#[test]
fn rdma_cm_alone_measures_only_the_rdma_cm_rows() {
    let dir = TempDir::new("ulp-bench-rdma-cm");
    let out = bench(&["--rdma-cm", "--commands", &dir.0.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let cmds = |n: &str| script_cli::written_commands(&dir.0, n);
    let (n1, n2) = (cmds("n1"), cmds("n2"));
    assert_eq!((n1.len(), n2.len()), (3, 4), "{n1:?}\n{n2:?}");
    // n2 measures once n1's servers listen.
    assert!(
        n1[2].contains("touch /share/rdma-cm-servers-up"),
        "{}",
        n1[2]
    );
    assert!(
        n2[1].contains("wait_for '[ -e /share/rdma-cm-servers-up ]'"),
        "{}",
        n2[1]
    );
    script_cli::assert_each_parses_as_shell(n1.iter().chain(&n2));
    let (n1, n2) = (n1.join("\n"), n2.join("\n"));
    for want in [
        "rping -c -a 10.78.0.1 ",
        "rping -c -a 10.77.0.1 ",
        "ucmatose -s 10.78.0.1 ",
        "ucmatose -s 10.77.0.1 ",
        "ib_write_lat -R -d ibtca0 ",
        "ib_write_lat -R -d rxe0 ",
        "touch /share/bench-done",
    ] {
        assert!(n2.contains(want), "n2 lacks {want:?}:\n{n2}");
    }
    for gone in [
        "fio ",
        "iperf3 -c",
        "ucx_perftest -P 0 10.77.0.1",
        "ULP-HOST",
    ] {
        assert!(!n2.contains(gone), "n2 still runs {gone:?}:\n{n2}");
    }
    for want in [
        "rping -s -P -V -S 64 -a 10.78.0.1 ",
        "ucmatose -b 10.78.0.1 ",
        "ucmatose -b 10.77.0.1 ",
        "wait_for '[ -e /share/bench-done ]'",
    ] {
        assert!(n1.contains(want), "n1 lacks {want:?}:\n{n1}");
    }
    assert!(
        !n1.contains("nvmet/ports"),
        "n1 still starts the target:\n{n1}"
    );
}

/// Writes an executable stand-in `bin/NAME` with `body` (after `#!/bin/sh`).
fn stand_in(bin: &std::path::Path, name: &str, body: &str) {
    let path = bin.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    Command::new("chmod").arg("+x").arg(&path).status().unwrap();
}

/// The ucmatose row, run with stand-ins for the guests' tools: n1's
/// one-shot servers (each serves one client run, then the next one
/// starts) and n2's rdma_cm measurement, which runs each client only once
/// that run's server listens and times the client runs alone: ten runs of
/// ten connections, 50 ms a run over ibtca and 200 ms over rxe on the
/// stand-in clock, are 5 and 20 ms per connection. A failed client leaves
/// its transport's cell empty, prints its output and fails the
/// measurement.
#[test]
fn the_ucmatose_row_times_each_run_against_its_own_server() {
    let dir = TempDir::new("ulp-bench-ucmatose");
    let cmds = dir.0.join("cmds");
    let out = bench(&["--rdma-cm", "--commands", &cmds.display().to_string()]);
    assert!(out.status.success(), "{}", text(&out));
    let n1 = std::fs::read_to_string(cmds.join("n1.2")).unwrap();
    let n2 = std::fs::read_to_string(cmds.join("n2.3")).unwrap();
    // n1's helpers and its ucmatose server loops, from the first loop's
    // `for` to the last loop's `done`.
    let lines: Vec<&str> = n1.lines().collect();
    let helper = |name: &str| {
        *lines
            .iter()
            .find(|l| l.starts_with(&format!("{name}() {{")))
            .unwrap_or_else(|| panic!("n1 has no {name}:\n{n1}"))
    };
    let first = lines
        .iter()
        .position(|l| l.contains("ucmatose -b "))
        .unwrap_or_else(|| panic!("n1 serves no ucmatose:\n{n1}"));
    let last = lines
        .iter()
        .rposition(|l| l.starts_with("done >/tmp/ucmatose-srv-"))
        .unwrap();
    let servers = lines[first - 1..=last].join("\n");
    assert!(servers.starts_with("for i in "), "{servers}");

    let d = dir.0.display().to_string();
    let bin = dir.0.join("bin");
    std::fs::create_dir(&bin).unwrap();
    // A server listens on a FIFO (which the stand-in `rdma` shows as a
    // listener) until a client writes to it; a client with no server
    // listening is rejected.
    stand_in(
        &bin,
        "ucmatose",
        &format!(
            "echo \"$*\" >>{d}/calls\n\
             l={d}/cm/listen-$2\n\
             case $1 in\n\
             -b) mkfifo $l && read x <$l; rm -f $l ;;\n\
             -s) [ -p $l ] || {{ echo 'cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8'; exit 8; }}\n\
             \techo go >$l\n\
             \t[ \"$2\" = \"$UCM_FAIL\" ] && {{ echo 'return status 110'; exit 110; }}\n\
             \tcase $2 in 10.78.*) t=50000000 ;; *) t=200000000 ;; esac\n\
             \techo $(($(cat {d}/clock) + t)) >{d}/clock\n\
             \techo 'data transfers complete' ;;\n\
             esac\n"
        ),
    );
    stand_in(
        &bin,
        "rdma",
        &format!(
            "for f in {d}/cm/listen-*; do [ -p \"$f\" ] && \
             echo \"link x/1 cm-idn 0 state LISTEN ps TCP src-addr ${{f##*/listen-}}:7471 dst-addr 0.0.0.0:0 \"; done\n"
        ),
    );
    stand_in(&bin, "date", &format!("cat {d}/clock\n"));
    stand_in(&bin, "rping", "exit 0\n");
    // The guests poll every 0.1 s; here every 0.01 s.
    let sleep = which("sleep");
    stand_in(&bin, "sleep", &format!("exec {} 0.01\n", sleep.display()));
    stand_in(
        &bin,
        "ib_write_lat",
        "echo ' #bytes #iterations t_min[usec] t_max[usec] t_typical[usec]'\n\
         echo ' 64 1000 1.00 2.00 3.00'\n",
    );
    // The guests' dash has `set -o pipefail`; a build host's sh may not.
    std::os::unix::fs::symlink(which_bash(), bin.join("sh")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    // The guests' paths, here under `dir`.
    let here = |s: &str| {
        s.replace("/tmp/", &format!("{d}/run/"))
            .replace("/share/", &format!("{d}/share/"))
            .replace("/proc/uptime", &format!("{d}/uptime"))
    };
    // n1's servers in a process group of their own, n2's measurement, then
    // the servers still waiting for a client (after a failure) killed.
    let script = format!(
        "set -o pipefail\nset -m\n({}\n{}\n{}\nwait) &\nsp=$!\nset +m\n{}\nkill -- -$sp 2>/dev/null\nwait\n",
        helper("wait_for"),
        helper("listening"),
        here(&servers),
        here(&n2)
    );

    let run = |fail: &str| {
        for sub in ["run", "share", "cm"] {
            let _ = std::fs::remove_dir_all(dir.0.join(sub));
            std::fs::create_dir(dir.0.join(sub)).unwrap();
        }
        let _ = std::fs::remove_file(dir.0.join("calls"));
        std::fs::write(dir.0.join("clock"), "1000000000000\n").unwrap();
        std::fs::write(dir.0.join("uptime"), "100.00 50.00\n").unwrap();
        let ran = Command::new("timeout")
            .args(["300", "sh", "-c", &script])
            .env("PATH", &path)
            .env("UCM_FAIL", fail)
            .output()
            .unwrap();
        let calls = std::fs::read_to_string(dir.0.join("calls")).unwrap_or_default();
        (ran, calls)
    };

    let (ran, calls) = run("");
    assert!(ran.status.success(), "{}", text(&ran));
    assert_eq!(
        String::from_utf8_lossy(&ran.stdout),
        "ULP-BENCH rping-connect/ibtca 0.0 ms\n\
         ULP-BENCH ucmatose-connect/ibtca 5.00 ms\n\
         ULP-BENCH write-lat-64/ibtca 3.00 usec\n\
         ULP-BENCH rping-connect/rxe 0.0 ms\n\
         ULP-BENCH ucmatose-connect/rxe 20.00 ms\n\
         ULP-BENCH write-lat-64/rxe 3.00 usec\n",
        "{}\n{calls}",
        text(&ran)
    );
    // Ten servers and ten client runs on each address.
    for (a, b) in [("10.78.0.1", "10.78.0.2"), ("10.77.0.1", "10.77.0.2")] {
        for call in [
            format!("-b {a} -c 10 -C 1"),
            format!("-s {a} -b {b} -c 10 -C 1"),
        ] {
            let n = calls.lines().filter(|l| *l == call).count();
            assert_eq!(n, 10, "{call}:\n{calls}");
        }
    }

    let (ran, calls) = run("10.77.0.1");
    let said = String::from_utf8_lossy(&ran.stdout);
    assert!(
        said.contains("ULP-BENCH ucmatose-connect/ibtca 5.00 ms\n")
            && !said.contains("ucmatose-connect/rxe")
            && said.contains("ULP-UCMATOSE-FAILED rxe: return status 110\n")
            && said.contains("ULP-BENCH-FAILED rdma_cm\n")
            && said.contains("ULP-BENCH write-lat-64/rxe 3.00 usec\n"),
        "{}\n{calls}",
        text(&ran)
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
         ULP-BENCH ucmatose-connect/ibtca 8.00 ms\n\
         ULP-BENCH ucmatose-connect/rxe 6.00 ms\n\
         ULP-BENCH write-lat-64/ibtca 40.5 usec\n\
         ULP-BENCH nvme-randread-4k-qd1-usec/ibtca 800 usec\n\
         ULP-BENCH nvme-randread-4k-qd1-usec/rxe 2000 usec\n\
         ULP-BENCH nvme-randread-4k-qd16-iops/local 4000 IOPS\n\
         ULP-BENCH nvme-randread-4k-qd16-busy/ibtca 95 %\n\
         ULP-BENCH ucx-tag-lat-8/ibtca 30.000 usec (70000 iterations)\n\
         ULP-BENCH ucx-tag-lat-8/rxe 120.000 usec (20000 iterations)\n\
         ULP-BENCH ucx-tag-bw-1m/ibtca 150.00 MB/s (1500 iterations)\n\
         ULP-BENCH ucx-tag-bw-1m/rxe 12.00 MB/s (120 iterations)\n",
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
    assert_eq!(row("ucmatose"), ["8.00", "6.00", "soft-RoCE", "0.75"]);
    assert_eq!(
        row("ucx_perftest tag_lat"),
        ["30.000", "120.000", "soft-RoCE", "4.00"]
    );
    // A rate: ibtca's over the baseline's.
    assert_eq!(
        row("ucx_perftest tag_bw"),
        ["150.00", "12.00", "soft-RoCE", "12.50"]
    );
    // One value missing: no ratio.
    assert_eq!(row("ib_write_lat"), ["40.5", "soft-RoCE"]);
    assert_eq!(
        row("iperf3 over IPoIB, datagram"),
        ["200", "iperf3 on the virtio management wire"]
    );
}
