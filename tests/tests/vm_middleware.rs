//! Full stack, user-space middleware on verbs between guests
//! (docs/middleware.md): one `ibtca-fabric up --guests --share DIR --run
//! ... --wait` boots three Debian-root guests with a package layer (UCX,
//! libfabric, Open MPI, OpenSSH) on one switch, OpenSM in n1's guest, and
//! every check shares that one boot:
//!
//! - libibverbs between n1 and n2 (`ibtca-provider-test sge-server` and
//!   `sge-client n1`, exchanging addresses over the management wire): RC
//!   QPs of 32 send and 32 receive SGEs (the provider's WQE strides), a
//!   SEND gathering 32 pieces into a receive of 32 other pieces and an
//!   RDMA WRITE of 32 pieces, every byte checked in n1; before it, in n1
//!   alone, the same between two QPs with the receiver's on an SRQ of 32
//!   SGEs (its receive in the SRQ's second slot, a 1024-byte stride), an
//!   SRQ of 33 refused with EINVAL, and `ibv_devinfo -v` saying
//!   `max_srq_sge` 32;
//! - `ucx_perftest` between n1 (server) and n2 (client): UCP tag
//!   matching with 1 MiB messages (rendezvous) over UCX's `rc_verbs` and
//!   `ud_verbs`; each test runs all its iterations on both sides, and
//!   UCP's protocol table names the transport that carried it;
//! - `fi_info -p verbs` lists ibtca0, and `fi_pingpong -p verbs -e msg -c`
//!   (libfabric's verbs provider, connected through rdma_cm over IPoIB,
//!   once n2's ping of n1's IPoIB address is answered) runs 50
//!   ping-pongs of 64 KiB, each buffer checked (`-c`);
//! - Open MPI: `mpirun` on n1 starts one rank in each guest through
//!   OpenSSH over the management wire (a key made for this run, in the
//!   share), `--mca pml ucx` over `rc_verbs`, and an `MPI_Allreduce` of
//!   512 Ki 64-bit integers (tests/fixtures/mpi/allreduce.c, compiled in
//!   n3 with `mpicc` while n1 and n2 run UCX) whose result every rank
//!   checks; the test compares the sum rank 0 prints with the one it
//!   computes from the rank count and the length.
//!
//! Every step prints its wall time (`STEP` lines) and the test prints
//! them as a timeline.
//!
//! UCX asks every send queue for 5 scatter-gather entries by default
//! (UD adds one for its header); the provider sizes its WQEs to hold them,
//! so UCX runs with its defaults.
//!
//! Guests wait on events (the port Active, files in the share, a server
//! answering), never a fixed sleep. Needs the VM stack, root and the
//! package mirror (for the layer, once): `scripts/test.sh` runs it; plain
//! `cargo test` lists it as ignored.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ibtca_tests::console::{client, tagged, tagged_lines};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::retries::report_console;
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

const TOPOLOGY: &str = r#"{
  "sm": "n1",
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 },
             { "name": "n3", "lid": 3 } ],
  "switches": [ { "name": "sw0", "ports": 3 } ],
  "links": [ { "a": "n1", "b": "sw0:1" }, { "a": "n2", "b": "sw0:2" },
             { "a": "n3", "b": "sw0:3" } ],
  "guest": { "mem": "768M", "root": "debian",
             "packages": ["ucx-utils", "libfabric-bin", "openmpi-bin",
                          "libopenmpi-dev", "openssh-server", "openssh-client"] }
}"#;

/// What every UCX run in the guests is given: the IB port.
const UCX_ENV: &str = "UCX_NET_DEVICES=ibtca0:1";

/// Ranks of the MPI job (one per guest) and the length of the vector of
/// 64-bit integers the fixture reduces (4 MiB: UCX's rendezvous path).
const RANKS: i64 = 3;
const ALLREDUCE_N: i64 = 512 * 1024;

/// The IPoIB address of guest `n` (ib0), for rdma_cm and fi_pingpong.
fn ib_addr(n: u32) -> String {
    format!("10.78.0.{n}")
}

/// One `ucx_perftest` pair: n1 serves, n2 runs the test.
struct Perf {
    tag: &'static str,
    /// Environment of both sides: the transports UCP may use.
    env: &'static str,
    /// The client's test options.
    test: &'static str,
    iters: u32,
    /// The transport UCP's protocol table must name.
    proto: &'static str,
}

/// UCP's tag matching over each transport with 1 MiB messages: UCX's
/// rendezvous protocol (RDMA READ on RC; UD's own segmentation and
/// acknowledgements on UD). The MPI job below runs over rc_verbs too.
const PERF: &[Perf] = &[
    Perf {
        tag: "RC-TAG-BW",
        env: "UCX_TLS=rc_verbs,ud_verbs:aux",
        test: "-t tag_bw -s 1048576 -n 20 -w 2",
        iters: 20,
        proto: "rc_verbs/ibtca0:1",
    },
    Perf {
        tag: "UD-TAG-BW",
        env: "UCX_TLS=ud_verbs",
        test: "-t tag_bw -s 1048576 -n 10 -w 1",
        iters: 10,
        proto: "ud_verbs/ibtca0:1",
    },
];

/// Polls shell condition `cond` every 0.1 s, at most `tenths` times;
/// prints `WAIT-TIMEOUT` and fails after that.
fn wait_for(cond: &str, tenths: u32) -> String {
    format!(
        "n=0; until {cond}; do n=$((n + 1)); \
         [ $n -ge {tenths} ] && {{ echo 'WAIT-TIMEOUT {}'; exit 1; }}; sleep 0.1; done",
        cond.replace('\'', "")
    )
}

/// `cmd` (one of a guest's `--run` commands) with its wall time: a line
/// `STEP TAG/START_NS/TOOK_MS` (the guest's clock, which QEMU sets from
/// the host's; no space after TAG, so that [`tagged_lines`] of TAG leaves
/// it out) after it, whatever its status.
fn timed(tag: &str, cmd: &str) -> String {
    format!(
        "t0=$(date +%s%N); ( {cmd} ); st=$?; \
         echo \"STEP {tag}/$t0/$(( ($(date +%s%N) - t0) / 1000000 ))\"; exit $st"
    )
}

/// The port Active (OpenSM in n1 brought the subnet up).
fn port_active() -> String {
    wait_for(
        "grep -q ACTIVE /sys/class/infiniband/ibtca0/ports/1/state",
        6000,
    )
}

/// Guest `n`'s OpenSSH server on its management address only, with a host
/// key made now in the guest's RAM (not the layer's, which every guest
/// shares), taking the run's key from the share (n1 made it).
fn sshd(n: u32) -> String {
    format!(
        "{} && mkdir -p /root/.ssh /run/sshd && chmod 700 /root/.ssh && \
         cp /share/ssh/id_ed25519 /share/ssh/id_ed25519.pub /root/.ssh/ && \
         cp /share/ssh/id_ed25519.pub /root/.ssh/authorized_keys && \
         printf 'Host *\\n StrictHostKeyChecking no\\n UserKnownHostsFile /dev/null\\n LogLevel ERROR\\n' \
         >/root/.ssh/config && chmod 600 /root/.ssh/* && \
         ssh-keygen -q -t ed25519 -N '' -f /run/sshd/host_key && \
         /usr/sbin/sshd -o ListenAddress=10.77.0.{n} -h /run/sshd/host_key && \
         touch /share/sshd-n{n} && echo sshd up",
        wait_for("[ -s /share/ssh/id_ed25519.pub ]", 6000)
    )
}

/// IPoIB on ib0 for rdma_cm, as docs/ulp.md has it.
fn ipoib(n: u32) -> String {
    format!(
        "ibtca-load-modules ipoib cm && ip addr add {}/24 dev ib0 && \
         ip link set ib0 up && echo ib0 up",
        ib_addr(n)
    )
}

/// This guest's IPoIB reaches guest `to`'s: its ARP request through the
/// broadcast group answered (a busybox ping, as the Debian root has no
/// iputils; 60 tries). fi_pingpong's control connection is TCP to the
/// server's IPoIB address, which fails with "No route to host" until the
/// neighbour is resolved. On failure: the link, the neighbour table and
/// the kernel's IPoIB messages.
fn ib_reachable(to: u32) -> String {
    let a = ib_addr(to);
    format!(
        "for i in $(seq 60); do busybox ping -c1 -W1 {a} >/dev/null && \
         {{ echo \"reached {a} after $i\"; ip neigh show {a} dev ib0; exit 0; }}; done; \
         echo 'unreachable {a}'; ip -d link show ib0; ip neigh show dev ib0; \
         dmesg | grep -i -e ib0 -e ipoib -e multicast | tail -20; exit 1"
    )
}

fn n1_commands() -> Vec<String> {
    let mut c = vec![
        step(
            "KEY",
            "mkdir -p /share/ssh && ssh-keygen -q -t ed25519 -N '' -C ibtca-run \
             -f /share/ssh/id_ed25519 && echo made",
        ),
        // n1's own ssh client (mpirun's) takes the key and config from here.
        step("SSHD", &sshd(1)),
        step("PORT", &port_active()),
        step("DEVICES", "ibv_devices"),
        step("DEVINFO", "ibv_devinfo -v -d ibtca0"),
        step("IPOIB", &ipoib(1)),
        step("SGE-SRV", "ibtca-provider-test sge-server"),
    ];
    for p in PERF {
        c.push(step(
            &format!("SRV-{}", p.tag),
            &format!(
                "{UCX_ENV} {} UCX_PROTO_INFO=y timeout 300 ucx_perftest -P 0 -p {}",
                p.env,
                port(p)
            ),
        ));
    }
    c.push(step("FI-INFO", "fi_info -p verbs -d ibtca0"));
    c.push(step(
        "FI-SRV",
        "timeout 300 fi_pingpong -p verbs -e msg -c -I 50 -S 65536",
    ));
    c.push(step(
        "MPI-READY",
        &format!(
            "{} && [ -x /share/mpi/allreduce ]",
            wait_for(
                "[ -e /share/sshd-n2 ] && [ -e /share/sshd-n3 ] && [ -e /share/mpi/built ]",
                6000,
            )
        ),
    ));
    c.push(step(
        "MPI",
        &format!(
            "HOME=/root mpirun --allow-run-as-root --host n1,n2,n3 -np {RANKS} \
             --prtemca oob_tcp_if_include eth0 --mca btl_tcp_if_include eth0 \
             --mca pml ucx -x UCX_TLS=self,rc_verbs,ud_verbs:aux \
             -x UCX_NET_DEVICES=ibtca0:1 -x UCX_PROTO_INFO=y \
             /share/mpi/allreduce {ALLREDUCE_N}"
        ),
    ));
    // n2 and n3 stay up until n1 is done, whether its commands passed or
    // not (the first failing command ends a guest's commands).
    finish(c, "n1")
}

/// Guest `node`'s `--run` commands: each step timed, the first failing
/// one ending them; n1's last (or failing) one tells n2 and n3 it is done.
fn finish(steps: Vec<(String, String)>, node: &str) -> Vec<String> {
    let done = if node == "n1" {
        "touch /share/mpi-done"
    } else {
        "true"
    };
    let mut c: Vec<String> = steps
        .into_iter()
        .map(|(tag, cmd)| {
            format!(
                "( {} ) || {{ {done}; exit 1; }}",
                timed(&format!("{node}.{tag}"), &cmd)
            )
        })
        .collect();
    if node == "n1" {
        c.push(done.to_owned());
    }
    c
}

/// A step: `cmd`, its output tagged `tag`.
fn step(tag: &str, cmd: &str) -> (String, String) {
    (tag.to_owned(), tagged(tag, cmd))
}

/// A client step (`client`: tried again until its server answers).
fn client_step(tag: &str, cmd: &str, tries: u32) -> (String, String) {
    (tag.to_owned(), client(tag, cmd, tries))
}

fn port(p: &Perf) -> usize {
    13400 + PERF.iter().position(|q| q.tag == p.tag).unwrap()
}

fn n2_commands() -> Vec<String> {
    let mut c = vec![
        step("SSHD", &sshd(2)),
        step("PORT", &port_active()),
        step("IPOIB", &ipoib(2)),
        step("SGE-CLI", "ibtca-provider-test sge-client n1"),
    ];
    for p in PERF {
        c.push(client_step(
            &format!("CLI-{}", p.tag),
            &format!(
                "{UCX_ENV} {} ucx_perftest -P 0 n1 -p {} {}",
                p.env,
                port(p),
                p.test
            ),
            300,
        ));
    }
    c.push(step("IB-PEER", &ib_reachable(1)));
    c.push(client_step(
        "FI-CLI",
        &format!(
            "fi_pingpong -p verbs -e msg -c -I 50 -S 65536 {}",
            ib_addr(1)
        ),
        120,
    ));
    c.push(step("MPI-WAIT", &wait_for("[ -e /share/mpi-done ]", 9000)));
    finish(c, "n2")
}

/// n3 builds the MPI program while n1 and n2 run UCX and libfabric.
fn n3_commands() -> Vec<String> {
    let c = vec![
        step("SSHD", &sshd(3)),
        step(
            "MPICC",
            "mpicc -O2 -Wall -o /share/mpi/allreduce /share/mpi/allreduce.c; st=$?; \
             touch /share/mpi/built; [ $st = 0 ] && echo built",
        ),
        step("MPI-WAIT", &wait_for("[ -e /share/mpi-done ]", 9000)),
    ];
    finish(c, "n3")
}

/// The `Final:` line of a `ucx_perftest` run: its iteration count.
fn final_iters(lines: &[&str]) -> Option<u32> {
    lines
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("Final:"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
}

/// Prints every guest's steps (`STEP NODE.TAG/START_NS/TOOK_MS` lines)
/// in the order they started: when, from the test's start, and how long.
fn report_steps(consoles: &[&str], start_ns: u128) {
    let mut steps: Vec<(u128, &str, &str)> = consoles
        .iter()
        .flat_map(|c| tagged_lines(c, "STEP"))
        .filter_map(|l| {
            let mut w = l.split('/');
            let (tag, t0, ms) = (w.next()?, w.next()?.parse().ok()?, w.next()?);
            Some((t0, tag, ms))
        })
        .collect();
    steps.sort();
    for (t0, tag, ms) in steps {
        let at = t0.saturating_sub(start_ns) as f64 / 1e9;
        eprintln!("step {tag:<18} at {at:6.1} s took {ms:>7} ms");
    }
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn ucx_libfabric_and_open_mpi_run_between_guests() {
    let stack = VmStack::get();
    let dir = stack.scratch("middleware");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let topo = dir.join("three.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let share = TempDir::new("middleware-share");
    std::fs::create_dir_all(share.0.join("mpi")).unwrap();
    std::fs::copy(
        stack.repo().join("tests/fixtures/mpi/allreduce.c"),
        share.0.join("mpi/allreduce.c"),
    )
    .unwrap();
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(
        [
            "--share",
            &share.0.display().to_string(),
            "--guest-timeout",
            "2400",
            "--wait",
        ]
        .map(String::from),
    );
    for (node, cmds) in [
        ("n1", n1_commands()),
        ("n2", n2_commands()),
        ("n3", n3_commands()),
    ] {
        for c in cmds {
            args.push("--run".into());
            args.push(format!("{node}={c}"));
        }
    }
    let start = Instant::now();
    let start_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fabric(&argv);
    let said = text(&out);
    let console =
        |n: &str| std::fs::read_to_string(run.join(format!("{n}.console"))).unwrap_or_default();
    let (c1, c2, c3) = (console("n1"), console("n2"), console("n3"));
    let all = format!("{said}\n==> n1:\n{c1}\n==> n2:\n{c2}\n==> n3:\n{c3}");
    eprintln!(
        "three Debian-root guests, middleware: {:.0} s",
        start.elapsed().as_secs_f64()
    );
    report_console("n2", &c2);
    report_steps(&[&c1, &c2, &c3], start_ns);
    assert!(out.status.success(), "every command passes:\n{all}");

    // What libibverbs reports of SRQs: ibv_devinfo -v's max_srq_sge.
    let devinfo = tagged_lines(&c1, "DEVINFO");
    assert!(
        devinfo
            .iter()
            .any(|l| l.split_whitespace().eq(["max_srq_sge:", "32"])),
        "ibv_devinfo -v: no max_srq_sge 32: {devinfo:#?}\n{all}"
    );
    // 32 SGEs each way through libibverbs, every byte in n1 checked; and
    // in n1 alone into an SRQ receive of 32 SGEs, at slot 1.
    let sge = [
        (
            &c1,
            "SGE-SRV",
            vec![
                "sge_srq_refused PASS max_srq_sge=32; ibv_create_srq(max_sge=33): Invalid argument (errno 22)",
                "sge_srq_create PASS max_srq_sge=32; ibv_create_srq(max_sge=32): created max_sge=32",
                "sge_srq_post_recv PASS 32 SGEs on the SRQ: err=0",
                "sge_srq_first PASS SEND of 8 bytes into slot 0: status 0, receive wr_id 0x51 status 0 byte_len 8, bytes landed",
                "sge_srq_send PASS 32 SGEs, 3760 bytes: status=0",
                "sge_srq_write PASS 32 SGEs, 3760 bytes: status=0",
                "sge_srq_recv PASS status=0 byte_len=3760",
                "sge_srq_recv_bytes PASS 3760 bytes over 32 SGEs in order; 0 bytes around",
                "sge_srq_write_bytes PASS 3760 bytes from 32 SGEs at 40000 in order",
                "sge_srq_loopback PASS 0 failed",
                "sge_qp_receiver PASS max_sge=32 ",
                "sge_recv PASS status=0 byte_len=3760",
                "sge_recv_bytes PASS 3760 bytes over 32 SGEs in order; 0 bytes around",
                "sge_write_bytes PASS 3760 bytes from 32 SGEs at 40000 in order",
            ],
        ),
        (
            &c2,
            "SGE-CLI",
            vec![
                "sge_qp_sender PASS max_sge=32 ",
                "sge_send PASS 32 SGEs, 3760 bytes: status=0",
                "sge_write PASS 32 SGEs, 3760 bytes: status=0",
                "sge_server_says PASS bytes ok",
            ],
        ),
    ];
    for (console, tag, wants) in sge {
        let lines = tagged_lines(console, tag);
        for want in wants.iter().chain(&["result 0 failed"]) {
            let want = format!("IBTCA-PROVIDER {want}");
            assert!(
                lines.iter().any(|l| l.starts_with(&want)),
                "{tag}: no {want:?}: {lines:#?}\n{all}"
            );
        }
    }

    // ucx_perftest: every iteration ran on both sides, over the transport
    // asked for.
    for p in PERF {
        let cli = tagged_lines(&c2, &format!("CLI-{}", p.tag));
        let srv = tagged_lines(&c1, &format!("SRV-{}", p.tag));
        assert_eq!(cli.last(), Some(&"exit=0"), "{}: {cli:?}\n{all}", p.tag);
        assert_eq!(srv.last(), Some(&"exit=0"), "{}: {srv:?}\n{all}", p.tag);
        assert_eq!(
            final_iters(&cli),
            Some(p.iters),
            "{}: {cli:#?}\n{all}",
            p.tag
        );
        assert!(
            srv.iter().any(|l| l.contains(p.proto)),
            "{}: UCP's protocols name no {}: {srv:#?}",
            p.tag,
            p.proto
        );
        eprintln!(
            "ucx_perftest {}: {}",
            p.tag,
            cli.iter().find(|l| l.contains("Final:")).unwrap()
        );
    }

    // libfabric: ibtca0 as a verbs domain, and the whole ping-pong
    // with its data checked.
    let info = tagged_lines(&c1, "FI-INFO");
    assert!(
        info.iter().any(|l| l.trim() == "domain: ibtca0"),
        "{info:#?}\n{all}"
    );
    for (c, tag) in [(&c1, "FI-SRV"), (&c2, "FI-CLI")] {
        let lines = tagged_lines(c, tag);
        assert_eq!(lines.last(), Some(&"exit=0"), "{tag}: {lines:#?}\n{all}");
        // fi_pingpong's result row: bytes (`64k`), sent, acknowledged
        // (`=N`: as many as sent), ...
        let row = lines
            .iter()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|w| w.first() == Some(&"64k"));
        assert_eq!(
            row.as_deref().map(|w| &w[..3.min(w.len())]),
            Some(&["64k", "50", "=50"][..]),
            "{tag}: {lines:#?}\n{all}"
        );
    }

    // Open MPI: one rank in each guest, each checked the whole result.
    let mpi = tagged_lines(&c1, "MPI");
    for (rank, host) in [(0, "n1"), (1, "n2"), (2, "n3")] {
        let want = format!("ALLREDUCE rank {rank} of {RANKS} on {host}: ok");
        assert!(mpi.contains(&want.as_str()), "no {want:?}: {mpi:#?}\n{all}");
    }
    let sum = (RANKS * (RANKS + 1) / 2) * ALLREDUCE_N * (ALLREDUCE_N + 1) / 2;
    assert!(
        mpi.contains(&format!("ALLREDUCE-SUM {sum}").as_str()),
        "no sum {sum}: {mpi:#?}"
    );
    assert!(mpi.contains(&"ALLREDUCE-ALL ok"), "{mpi:#?}");
    assert_eq!(mpi.last(), Some(&"exit=0"), "{mpi:#?}");
    assert!(
        mpi.iter().any(|l| l.contains("rc_verbs/ibtca0:1")),
        "UCP's protocols for the MPI job name no rc_verbs: {mpi:#?}"
    );

    // Every UCX process destroyed its completion channels (the provider's
    // extended CQs hold one reference each; UCX warns when a destroy
    // fails).
    for (n, c) in [("n1", &c1), ("n2", &c2), ("n3", &c3)] {
        assert!(
            !c.contains("ibv_destroy_comp_channel"),
            "{n}: a completion channel stayed busy:\n{all}"
        );
    }
    drop(down);
}
