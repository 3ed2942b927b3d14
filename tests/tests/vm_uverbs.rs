//! Full stack, the kernel-bypass data path: two guests on one ibtca link
//! (`ibtca-fabric up --guests --run ... --wait`, one boot for every check)
//! run unmodified rdma-core and perftest programs on `ibtca0` through the
//! ibtca provider, which posts WQEs into mapped queues, rings the context's
//! mapped doorbell page and polls mapped CQs:
//!
//! - `ibv_devinfo -v -d ibtca0` in each guest: the port Active, on
//!   InfiniBand, with the topology's LID;
//! - `ibv_rc_pingpong -d ibtca0` (LID addressing, no GRH), server on n1,
//!   client on n2 by node name, and again with completion events
//!   (`-e`: `ibv_req_notify_cq`, `ibv_get_cq_event` through the CQ's
//!   interrupt) with the roles swapped;
//! - `ibv_srq_pingpong -d ibtca0 -c` (16 QPs on each side taking their
//!   receives from one shared receive queue, every received buffer
//!   checked by `-c`), server on n1, and again with 64-byte messages,
//!   which it sends inline (`IBV_SEND_INLINE`: the QPs report
//!   max_inline_data 64);
//! - `ibv_ud_pingpong -d ibtca0 -c` (UD: address handles, the GRH area,
//!   every received buffer's bytes checked by the program), again with
//!   64-byte messages (a UD QP reports no inline data, so the program,
//!   which sends inline what the QP says fits, does not ask), and
//!   `ib_send_bw -c UD` (MTU-sized datagrams), each to completion on both
//!   sides;
//! - perftest's `ib_write_bw`, `ib_send_bw`, `ib_read_bw`, `ib_atomic_bw`,
//!   `ib_write_lat`, `ib_read_lat` and `ib_send_lat` (each `-D 2`), each to
//!   completion on both sides, with a result line; the test prints what
//!   they measured;
//! - an R_Key violation through libibverbs (`ibtca-provider-test
//!   bad-rkey-server` on n1, `bad-rkey-client n1` on n2, exchanging
//!   address and R_Key over TCP): the client's RDMA WRITE with a wrong
//!   R_Key completes `IBV_WC_REM_ACCESS_ERR`, its QP goes to the error
//!   state (`ibv_query_qp` says `IBV_QPS_ERR`; the next WRITE, right R_Key,
//!   completes `IBV_WC_WR_FLUSH_ERR`), the server's buffer is byte for
//!   byte untouched, and the server's QP, the responder that NAKed the
//!   WRITE, is in the error state too (`ibv_query_qp`);
//! - the direct verbs (`ibtcadv-test`, both windows), and the DRDMA
//!   benchmark's tool (`ibtcadv-bench`, scripts/drdma-verbs-bench.sh) once
//!   through n2's mapped window, one transfer of each kind, every
//!   transfer's bytes checked;
//! - QP0 into the guest, last on n1 (`ib_umad` loaded then): unmodified
//!   infiniband-diags through libibumad and the kernel's MAD layer on
//!   `ibtca0`. `smpquery -D nodeinfo 0`, a directed-route SMP of no hops,
//!   which the MAD layer hands to the driver's `process_mad`, which hands
//!   it to the device's own agent (SMA_MAD): the NodeInfo of the guest's
//!   own device; `smpquery -D nodeinfo 0,1`, one hop out of port 1, on the
//!   wire from the guest's QP0 on VL15, answered by the other device's
//!   agent, the answer reaching the guest's QP0 (the device's agent leaves
//!   responses for the SM); `smpquery nodeinfo 2` (LID-routed to the other
//!   device) the same way. Each output's NodeGuid is compared with the
//!   topology's. Then the IsSM capability bit: `smpquery -D portinfo 0`
//!   shows it only while a process holds `/dev/infiniband/issm0` open
//!   (ib_umad's `modify_port`, which the driver passes to the device's
//!   agent: SET_PORT_CAPS), as OpenSM does.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use std::time::Instant;

use ibtca_tests::console::{client, perftest_server, tagged, tagged_lines};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 1, "node_guid": "0x1200000000220001" },
             { "name": "n2", "lid": 2, "node_guid": "0x1200000000220002",
               "drdma_window": "mapped" } ],
  "links": [ { "a": "n1", "b": "n2" } ],
  "guest": { "mem": "512M" }
}"#;

/// How many times a client tries to reach its server, a second apart.
const CLIENT_TRIES: u32 = 120;

/// The programs: (tag, server command, client command without the host).
const PERFTEST: [(&str, &str); 7] = [
    ("WRITE-BW", "ib_write_bw -d ibtca0 -D 2"),
    ("SEND-BW", "ib_send_bw -d ibtca0 -D 2"),
    ("READ-BW", "ib_read_bw -d ibtca0 -D 2"),
    ("ATOMIC-BW", "ib_atomic_bw -d ibtca0 -D 2"),
    ("WRITE-LAT", "ib_write_lat -d ibtca0 -D 2"),
    ("READ-LAT", "ib_read_lat -d ibtca0 -D 2"),
    ("SEND-LAT", "ib_send_lat -d ibtca0 -D 2"),
];

/// The direct verbs between the guests (`ibtcadv-test`, ibtcadv.h), run
/// twice: client on n2 (its window mapped, `mode=1`: stores and loads go
/// straight to the PMB pages, the provider commits byte counts) with the
/// server on n1, then client on n1 (trapped, `mode=0`) with the server on
/// n2. Each time the client's DRDMA WRITE of stored bytes lands in the
/// server's page 1, its DRDMA READ loads the server's page 0 byte for byte
/// (checked in the client), and a second context naming the first's range
/// in its own work request gets `IBV_WC_LOC_PROT_ERR` (4) with nothing
/// written, while the owner's WRITE through that range lands in the
/// server's page 2 (checked in the server).
fn direct_verbs(client_console: &str, server_console: &str, tag: &str, mode: u32, all: &str) {
    let client = tagged_lines(client_console, &format!("{tag}-CLIENT"));
    let server = tagged_lines(server_console, &format!("{tag}-SERVER"));
    let window = format!("IBTCADV window PASS ranges=32 range_size=4096 mode={mode}");
    for (lines, want) in [
        (&client, window.as_str()),
        (&client, "IBTCADV range_open PASS arr="),
        (
            &client,
            "IBTCADV write_completion PASS wr_id=101 status=0 (success) opcode=1",
        ),
        (&client, "IBTCADV read_loaded PASS"),
        (&client, "IBTCADV read_data PASS 4096 bytes as the server's"),
        (
            &client,
            "IBTCADV read_completion PASS wr_id=102 status=0 (success) opcode=2",
        ),
        (&client, "IBTCADV hostile_setup PASS own range"),
        (&client, "IBTCADV hostile_post PASS"),
        (
            &client,
            "IBTCADV hostile_refused PASS wr_id=201 status=4 (local protection error)",
        ),
        (
            &client,
            "IBTCADV hostile_target_untouched PASS 4096 bytes of its buffer zero",
        ),
        (
            &client,
            "IBTCADV owner_write_completion PASS wr_id=103 status=0 (success) opcode=1",
        ),
        (&client, "IBTCADV range_close PASS"),
        (&client, "IBTCADV server_says PASS ok"),
        (
            &server,
            "IBTCADV server_write_landed PASS page 1: 4096 bytes as stored",
        ),
        (
            &server,
            "IBTCADV server_owner_write_landed PASS page 2: 256 bytes, rest zero",
        ),
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(want)),
            "no {want:?} in {lines:?}\n{all}"
        );
    }
    for lines in [&client, &server] {
        assert!(
            lines.contains(&"exit=0") && !lines.iter().any(|l| l.contains(" FAIL ")),
            "{lines:?}\n{all}"
        );
        eprintln!("direct verbs, window mode {mode}: {lines:?}");
    }
}

/// `ibtcadv-bench client n1 1 0` on n2 (mapped window): a line for each
/// of the 24 cells (6 sizes, WRITE and READ, ordinary and DRDMA), each with
/// one QD 1 transfer and one round in flight, and every transfer's bytes
/// checked where they arrived (the tool exits 1 at the first difference),
/// as many as the cells moved; it opens every range of the window though
/// ibtcadv-test ran before it.
fn drdma_bench(lines: &[&str], all: &str) {
    assert!(
        lines.contains(&"exit=0") && !lines.iter().any(|l| l.contains("DVBENCH-FAIL")),
        "{lines:?}\n{all}"
    );
    // Every range of the window opens, ibtcadv-test having run before.
    let client = lines
        .iter()
        .find(|l| l.starts_with("DVBENCH client "))
        .unwrap_or_else(|| panic!("no client line in {lines:?}"));
    let field = |k: &str| -> u32 {
        client
            .split_whitespace()
            .find_map(|f| f.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {client:?}"))
    };
    // The tool opens at most 32 ranges, and no more than the PMBs (0: no
    // bound).
    let pmbs = match field("pmbs=") {
        0 => u32::MAX,
        n => n,
    };
    let all_ranges = field("ranges=").min(32).min(pmbs);
    assert_eq!(field("open="), all_ranges, "a range stayed busy: {client}");
    let mut moved = 0;
    for size in ["64", "256", "1024", "4096", "16384", "65536"] {
        for op in ["write", "read"] {
            for path in ["rdma", "drdma"] {
                let head = format!("DVBENCH mapped {path} {op} {size} ");
                let cell: Vec<u64> = lines
                    .iter()
                    .find_map(|l| l.strip_prefix(head.as_str()))
                    .unwrap_or_else(|| panic!("no {head:?} in {lines:?}"))
                    .split_whitespace()
                    .skip(3)
                    .map(|v| v.parse().unwrap())
                    .collect();
                // depth, QD 1 transfers, rounds
                assert_eq!(cell[1..], [1, 1], "{head}: {cell:?}");
                moved += cell[1] + cell[0] * cell[2];
            }
        }
    }
    let verified = format!("DVBENCH verified {moved} transfers");
    assert!(
        lines.contains(&verified.as_str()),
        "no {verified:?} in {lines:?}"
    );
    eprintln!("ibtcadv-bench (mapped, one of each): {lines:?}");
}

/// perftest's result: the line after the `#bytes` header, as fields.
fn perftest_result(lines: &[&str]) -> Option<Vec<String>> {
    let i = lines
        .iter()
        .position(|l| l.trim_start().starts_with("#bytes"))?;
    let fields: Vec<String> = lines
        .get(i + 1)?
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    fields.first()?.parse::<u64>().ok()?;
    Some(fields)
}

/// n1's NodeInfo queries through ib_umad: (tag, command, the NodeGuid
/// the topology gives the node that answers): its own device by
/// `process_mad`, the peer's by directed route and by LID.
const SMP_NODE_INFO: [(&str, &str, u64); 3] = [
    (
        "SMP-SELF-DR",
        "smpquery -C ibtca0 -D nodeinfo 0",
        0x1200_0000_0022_0001,
    ),
    (
        "SMP-PEER-DR",
        "smpquery -C ibtca0 -D nodeinfo 0,1",
        0x1200_0000_0022_0002,
    ),
    (
        "SMP-PEER-LID",
        "smpquery -C ibtca0 nodeinfo 2",
        0x1200_0000_0022_0002,
    ),
];

/// The guest's own PortInfo, read for its IsSM capability bit.
const SMP_PORTINFO: &str = "smpquery -C ibtca0 -D portinfo 0";

/// n1's QP0 commands: ib_umad loaded, the NodeInfo queries, then its
/// PortInfo with no process holding `issm0`, while one does, and after.
fn smp_commands() -> Vec<String> {
    let mut cmds = vec!["ibtca-load-modules umad".to_owned()];
    for (tag, cmd, _) in SMP_NODE_INFO {
        cmds.push(tagged(tag, cmd));
    }
    for (tag, cmd) in [
        ("SMP-NO-SM", SMP_PORTINFO.to_owned()),
        (
            "SMP-IS-SM",
            format!("sh -c 'exec 3</dev/infiniband/issm0; {SMP_PORTINFO}'"),
        ),
        ("SMP-SM-GONE", SMP_PORTINFO.to_owned()),
    ] {
        cmds.push(tagged(tag, &cmd));
    }
    cmds
}

/// The CapMask smpquery portinfo printed (`CapMask:.....0x...`).
fn cap_mask(lines: &[&str]) -> Option<u32> {
    let l = lines.iter().find(|l| l.starts_with("CapMask:"))?;
    let hex = l.rsplit("0x").next()?;
    u32::from_str_radix(hex.trim(), 16).ok()
}

/// The node GUID smpquery printed (`Guid:.....0x...`).
fn node_guid(lines: &[&str]) -> Option<u64> {
    let l = lines.iter().find(|l| l.starts_with("Guid:"))?;
    let hex = l.rsplit("0x").next()?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// What [`smp_commands`] printed on n1's console `c1`: each NodeInfo
/// query's NodeGuid the topology's, IsSM set only while `issm0` was open.
fn smp_checks(c1: &str, all: &str) {
    for (tag, cmd, guid) in SMP_NODE_INFO {
        let l = tagged_lines(c1, tag);
        assert!(l.contains(&"exit=0"), "{cmd}: {l:?}\n{all}");
        assert_eq!(node_guid(&l), Some(guid), "{cmd}: {l:?}\n{all}");
        eprintln!("{cmd}: NodeGuid {guid:#x}");
    }
    const IS_SM: u32 = 1 << 1;
    let caps = |tag| cap_mask(&tagged_lines(c1, tag));
    let (before, held, after) = (caps("SMP-NO-SM"), caps("SMP-IS-SM"), caps("SMP-SM-GONE"));
    assert!(
        before.is_some_and(|c| c & IS_SM == 0)
            && held.is_some_and(|c| c & IS_SM != 0)
            && after == before,
        "IsSM only while issm0 is open: {before:x?} {held:x?} {after:x?}\n{all}"
    );
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn pingpong_and_perftest_run_over_ibtca() {
    let stack = VmStack::get();
    let dir = stack.scratch("uverbs");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let topo = dir.join("two.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();

    let devinfo = tagged("DEVINFO", "ibv_devinfo -v -d ibtca0");
    let mut n1 = vec![
        devinfo.clone(),
        tagged("PP-SERVER", "ibv_rc_pingpong -d ibtca0"),
        client(
            "PP-EV-CLIENT",
            "ibv_rc_pingpong -d ibtca0 -e n2",
            CLIENT_TRIES,
        ),
        tagged("SRQ-SERVER", "ibv_srq_pingpong -d ibtca0 -c"),
        tagged("SRQ-INLINE-SERVER", "ibv_srq_pingpong -d ibtca0 -c -s 64"),
        tagged("UD-SERVER", "ibv_ud_pingpong -d ibtca0 -c"),
        tagged("UD-SMALL-SERVER", "ibv_ud_pingpong -d ibtca0 -c -s 64"),
        perftest_server("UD-BW-SERVER", "ib_send_bw -d ibtca0 -c UD -D 2", 3),
    ];
    let mut n2 = vec![
        devinfo,
        client("PP-CLIENT", "ibv_rc_pingpong -d ibtca0 n1", CLIENT_TRIES),
        tagged("PP-EV-SERVER", "ibv_rc_pingpong -d ibtca0 -e"),
        client(
            "SRQ-CLIENT",
            "ibv_srq_pingpong -d ibtca0 -c n1",
            CLIENT_TRIES,
        ),
        client(
            "SRQ-INLINE-CLIENT",
            "ibv_srq_pingpong -d ibtca0 -c -s 64 n1",
            CLIENT_TRIES,
        ),
        client("UD-CLIENT", "ibv_ud_pingpong -d ibtca0 -c n1", CLIENT_TRIES),
        client(
            "UD-SMALL-CLIENT",
            "ibv_ud_pingpong -d ibtca0 -c -s 64 n1",
            CLIENT_TRIES,
        ),
        client(
            "UD-BW-CLIENT",
            "ib_send_bw -d ibtca0 -c UD -D 2 n1",
            CLIENT_TRIES,
        ),
    ];
    for (tag, cmd) in PERFTEST {
        n1.push(perftest_server(&format!("{tag}-SERVER"), cmd, 3));
        n2.push(client(
            &format!("{tag}-CLIENT"),
            &format!("{cmd} n1"),
            CLIENT_TRIES,
        ));
    }
    // The client retries its TCP connection itself while the server starts.
    n1.push(tagged("RKEY-SERVER", "ibtca-provider-test bad-rkey-server"));
    n2.push(tagged(
        "RKEY-CLIENT",
        "ibtca-provider-test bad-rkey-client n1",
    ));
    // The direct verbs (ibtcadv.h) last: DRDMA through the window, with
    // doorbell records on (a WRITE right after a drained READ on the same
    // QP is posted on a record that must have gone back to sleep); first
    // through n2's mapped window, then through n1's trapped one.
    // Then the DRDMA benchmark's tool, client on n2 (mapped window): one
    // transfer or round per cell, every transfer's bytes checked; it opens
    // every range of the window, so none stays busy after ibtcadv-test's
    // hostile step (the kernel releases a closed range, DRDMA_RELEASE).
    n1.push(tagged("DVM-SERVER", "ibtcadv-test server"));
    n2.push(tagged("DVM-CLIENT", "ibtcadv-test client n1"));
    n1.push(tagged("DVB-SERVER", "ibtcadv-bench server"));
    n2.push(tagged("DVB-CLIENT", "ibtcadv-bench client n1 1 0"));
    n2.push(tagged("DVT-SERVER", "ibtcadv-test server"));
    n1.push(tagged("DVT-CLIENT", "ibtcadv-test client n2"));
    // QP0 last, on n1 alone: ib_umad stays out of every check above.
    n1.extend(smp_commands());
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(["--guest-timeout", "1500", "--wait"].map(String::from));
    for (node, cmds) in [("n1", &n1), ("n2", &n2)] {
        for c in cmds.iter() {
            args.push("--run".into());
            args.push(format!("{node}={c}"));
        }
    }
    let start = Instant::now();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fabric(&argv);
    let said = text(&out);
    let console =
        |n: &str| std::fs::read_to_string(run.join(format!("{n}.console"))).unwrap_or_default();
    let (c1, c2) = (console("n1"), console("n2"));
    // The clients' tries that failed before one passed.
    ibtca_tests::retries::report_console("n1", &c1);
    ibtca_tests::retries::report_console("n2", &c2);
    let all = format!("{said}\n==> n1:\n{c1}\n==> n2:\n{c2}");
    eprintln!("two guests: {:.0} s\n{said}", start.elapsed().as_secs_f64());
    assert!(
        out.status.success(),
        "every command passes:\n{}\n{all}",
        ibtca_tests::console::failure_digest(&run, &["n1", "n2"], 30)
    );

    // ibv_devinfo -v in each guest: ibtca0's port Active on InfiniBand
    // with the topology's LID.
    for (c, lid) in [(&c1, "1"), (&c2, "2")] {
        let l = tagged_lines(c, "DEVINFO");
        let value = |key: &str| {
            l.iter()
                .find_map(|l| l.trim().strip_prefix(key).map(str::trim))
                .unwrap_or_else(|| panic!("ibv_devinfo -v: no {key:?}: {l:?}\n{all}"))
        };
        assert_eq!(value("hca_id:"), "ibtca0", "{l:?}");
        assert_eq!(value("state:"), "PORT_ACTIVE (4)", "{l:?}");
        assert_eq!(value("port_lid:"), lid, "{l:?}");
        assert_eq!(value("link_layer:"), "InfiniBand", "{l:?}");
        assert!(l.contains(&"exit=0"), "{l:?}");
    }
    // ibv_rc_pingpong: both ends moved their 1000 round trips, polled and
    // with completion events; ibv_srq_pingpong its 1000 over 16 QPs on one
    // SRQ, every buffer validated.
    for (c, tag) in [
        (&c1, "PP-SERVER"),
        (&c2, "PP-CLIENT"),
        (&c1, "PP-EV-CLIENT"),
        (&c2, "PP-EV-SERVER"),
        (&c1, "SRQ-SERVER"),
        (&c2, "SRQ-CLIENT"),
        (&c1, "SRQ-INLINE-SERVER"),
        (&c2, "SRQ-INLINE-CLIENT"),
        (&c1, "UD-SERVER"),
        (&c2, "UD-CLIENT"),
        (&c1, "UD-SMALL-SERVER"),
        (&c2, "UD-SMALL-CLIENT"),
    ] {
        let l = tagged_lines(c, tag);
        assert!(
            l.iter()
                .any(|l| l.contains("bytes in") && l.contains("Mbit/sec"))
                && l.iter().any(|l| l.contains("1000 iters in"))
                && l.contains(&"exit=0")
                && !l.iter().any(|l| l.contains("invalid data")),
            "{tag}: {l:?}\n{all}"
        );
        for l in l.iter().filter(|l| l.contains(" in ")) {
            eprintln!("{tag}: {l}");
        }
    }
    // ib_send_bw over UD: MTU-sized datagrams, a result on both sides.
    for (c, t) in [(&c1, "UD-BW-SERVER"), (&c2, "UD-BW-CLIENT")] {
        let l = tagged_lines(c, t);
        let result = perftest_result(&l);
        assert!(
            l.contains(&"exit=0") && result.as_ref().is_some_and(|r| r[0] == "4096"),
            "{t}: {l:?}\n{all}"
        );
        eprintln!("ib_send_bw -c UD ({t}): {}", result.unwrap().join(" "));
    }
    // perftest: both sides to completion, the client with a result line
    // (servers of some tests print none).
    for (tag, cmd) in PERFTEST {
        for (c, side) in [(&c1, "SERVER"), (&c2, "CLIENT")] {
            let t = format!("{tag}-{side}");
            let l = tagged_lines(c, &t);
            let result = perftest_result(&l);
            assert!(
                l.contains(&"exit=0") && (side == "SERVER" || result.is_some()),
                "{t}: {l:?}\n{all}"
            );
            if let Some(r) = result {
                eprintln!("{cmd} ({side}): {}", r.join(" "));
            }
        }
    }
    // The R_Key violation between the guests, through libibverbs:
    // IBV_WC_REM_ACCESS_ERR (10), the QP in error (IBV_QPS_ERR, 6), the
    // next WRITE flushed (IBV_WC_WR_FLUSH_ERR, 5), nothing landed at the
    // server, whose QP is in error too.
    let client = tagged_lines(&c2, "RKEY-CLIENT");
    let server = tagged_lines(&c1, "RKEY-SERVER");
    for (lines, want) in [
        (
            &client,
            "IBTCA-PROVIDER remote_bad_rkey PASS rkey=0x",
        ),
        (&client, "status=10 (remote access error)"),
        (
            &client,
            "IBTCA-PROVIDER remote_bad_rkey_qp_err PASS ibv_query_qp: qp_state=6 cur_qp_state=6",
        ),
        (
            &client,
            "IBTCA-PROVIDER remote_bad_rkey_flush PASS next WRITE (valid rkey): status=5 (Work Request Flushed Error)",
        ),
        (
            &client,
            "IBTCA-PROVIDER remote_bad_rkey_cq_drained PASS 0 further completions",
        ),
        (
            &client,
            "IBTCA-PROVIDER remote_bad_rkey_server_says PASS server's buffer untouched",
        ),
        (
            &server,
            "IBTCA-PROVIDER remote_bad_rkey_target PASS 4096 bytes untouched",
        ),
        (
            &server,
            "IBTCA-PROVIDER remote_bad_rkey_target_qp_err PASS ibv_query_qp: qp_state=6 cur_qp_state=6",
        ),
    ] {
        assert!(
            lines.iter().any(|l| l.contains(want)),
            "no {want:?} in {lines:?}\n{all}"
        );
    }
    for lines in [&client, &server] {
        assert!(
            lines.contains(&"IBTCA-PROVIDER result 0 failed") && lines.contains(&"exit=0"),
            "{lines:?}"
        );
    }
    eprintln!("R_Key violation between guests: {client:?}");
    direct_verbs(&c2, &c1, "DVM", 1, &all);
    drdma_bench(&tagged_lines(&c2, "DVB-CLIENT"), &all);
    direct_verbs(&c1, &c2, "DVT", 0, &all);
    smp_checks(&c1, &all);
    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "{}", text(&out));
    drop(down);
}
