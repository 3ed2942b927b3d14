//! Full stack, seed 002's choices for guest verbs users: two guests on one
//! ibtca link, captured (`"capture"` on the link: a relay switch records
//! both directions), run unmodified `ibv_rc_pingpong -c` (20 round trips
//! of 16 KiB, 16 packets each at MTU 1024) with the ibtca provider's
//! environment variables, which it sends as modify_qp's driver data on
//! the way to RTR:
//!
//! - no variables: each direction's ACKs carry IBA's MSN start (the first
//!   message is acknowledged with MSN 1) and come one per message, at its
//!   last packet
//!   (each message's last packet asks for it: AckReq);
//! - `IBTCA_MSN_START=0xffffff IBTCA_ACK=coalesced:4` on both sides: the
//!   first message is acknowledged with MSN 0 (the seed's start; an ACK
//!   before its end says 0xffffff), and every 4th packet of each
//!   direction asks for an ACK, and each message's last (the last there
//!   is to send); the responder ACKs
//!   only those (the device sends the latest ACK of a burst, so packets
//!   that arrived together get one);
//! - only the server with `IBTCA_MSN_START=0xffffff`: the client's first
//!   SEND lands, but the server acknowledges it with MSN 0, which is
//!   stale for a client counting from IBA's 0, so the client's send never
//!   completes and fails with IBV_WC_RETRY_EXC_ERR once its retries run
//!   out; the server's reply is acknowledged with MSN 1, which claims two
//!   messages where the server sent one: IBV_WC_BAD_RESP_ERR (the device's
//!   MSN cross-check). Both programs fail.
//!
//! The same boot, on n1 alone: the provider's messages for bad values
//! (`IBTCA_ACK=coalesced:0`, `IBTCA_ACK=,`, `IBTCA_MSN_START=0x1000000`: the variable and
//! its accepted forms on stderr, the modify to RTR refused with EINVAL),
//! a loopback connection with `per-packet,stop-and-wait` and a byte-exact
//! WRITE, and the kernel's checks of the driver data
//! (`ibtca-provider-test seed-udata`: malformed structures written
//! straight to the command file, each refused with its errno).
//!
//! A test binary of its own (not `vm_uverbs.rs`'s boot): a capture of that
//! boot's perftest runs would be gigabytes.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh), tshark
//! (scripts/host-tools.sh) and root: `scripts/test.sh` runs it; plain
//! `cargo test` lists it as ignored.

use ibtca_tests::capture::{num, tshark, ACK_REQ, MSN};
use ibtca_tests::console::mark_failed_try;
use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::launcher::{fabric, text};
use ibtca_tests::vm::VmStack;

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 1 }, { "name": "n2", "lid": 2 } ],
  "links": [ { "a": "n1", "b": "n2", "capture": "link.pcap" } ],
  "guest": { "mem": "512M" }
}"#;

/// 20 round trips of 16 KiB (16 packets at ibv_rc_pingpong's MTU 1024),
/// every received buffer checked.
const PINGPONG: &str = "ibv_rc_pingpong -d ibtca0 -c -n 20 -s 16384";
const ITERS: u64 = 20;
const PACKETS: u64 = 16;
/// The seed's choices.
const SEED_ENV: &str = "IBTCA_MSN_START=0xffffff IBTCA_ACK=coalesced:4";

/// BTH opcode of an RC Acknowledge.
const RC_ACK: u64 = 0x11;

/// Runs `cmd` once, its output on the console with every line tagged
/// `TAG `, then `TAG exit=STATUS`; never fails (the test judges).
fn tagged(tag: &str, cmd: &str) -> String {
    format!("out=$({cmd} 2>&1); st=$?; echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=$st\"; true")
}

/// A client: `cmd` until the server (started meanwhile on the other
/// guest) answers, at most two minutes; a run that connected (the output
/// names the remote address) is final, whatever its status. Earlier
/// tries' output stays on the console, marked (`mark_failed_try`).
fn client(tag: &str, cmd: &str) -> String {
    format!(
        "for i in $(seq 120); do out=$({cmd} 2>&1); st=$?; \
         if [ $st = 0 ] || echo \"$out\" | grep -q 'remote address'; then break; fi; {}; sleep 1; done; \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=$st\"; true",
        mark_failed_try(tag, "$out")
    )
}

/// The lines of `console` tagged `tag`, without the tag.
fn tagged_lines<'a>(console: &'a str, tag: &str) -> Vec<&'a str> {
    let t = format!("{tag} ");
    console
        .lines()
        .filter_map(|l| l.find(&t).map(|i| &l[i + t.len()..]))
        .collect()
}

/// (QPN, PSN) of ibv_rc_pingpong's `local address:` or `remote address:`
/// line.
fn address(lines: &[&str], which: &str) -> (u64, u64) {
    let l = lines
        .iter()
        .find(|l| l.contains(which))
        .unwrap_or_else(|| panic!("no {which:?} in {lines:?}"));
    let value = |key: &str| {
        let at = l.find(key).unwrap_or_else(|| panic!("{key} in {l}")) + key.len();
        let v = l[at..].trim_start().split([',', ' ']).next().unwrap();
        num(v).unwrap_or_else(|| panic!("{key} {v:?} in {l}"))
    };
    (value("QPN"), value("PSN"))
}

/// One direction of a pingpong run in the capture: the requester's
/// packets to `dest_qpn` from PSN `psn`, and the ACKs coming back to
/// `src_qpn` for them.
struct Direction {
    /// Request packets (distinct PSNs).
    requests: u64,
    /// PSN offsets of the requests that asked for an ACK (AckReq).
    ack_reqs: Vec<u64>,
    /// (PSN offset from the first request, MSN) of each distinct ACK, in
    /// capture order.
    acks: Vec<(u64, u64)>,
    /// Index of the row after the ACK of the run's last request, if it
    /// came: the run is over there.
    end: Option<usize>,
}

/// PSN offset of `psn` from `first` (24-bit), if within the run.
fn offset(psn: u64, first: u64) -> Option<u64> {
    let d = psn.wrapping_sub(first) & 0xff_ffff;
    (d < ITERS * PACKETS * 4).then_some(d)
}

/// The packets a requester with `coalesced:N` asks an ACK for in a
/// pingpong run: N packets after the last one that asked (the first N
/// counted from the connection's first PSN), and the last packet of each
/// message (the last there is to send until the reply comes).
fn coalesced_ack_reqs(n: u64) -> Vec<u64> {
    let mut last = 0;
    (0..ITERS * PACKETS)
        .filter(|&off| {
            let asks = off - last >= n || (off + 1) % PACKETS == 0;
            if asks {
                last = off;
            }
            asks
        })
        .collect()
}

fn direction(rows: &[Vec<String>], src_qpn: u64, dest_qpn: u64, psn: u64) -> Direction {
    let field = |r: &Vec<String>, i: usize| r.get(i).and_then(|f| num(f));
    let mut requests = std::collections::BTreeSet::new();
    let mut ack_reqs = std::collections::BTreeSet::new();
    let mut acks: Vec<(u64, u64)> = Vec::new();
    let mut end = None;
    for (i, r) in rows.iter().enumerate() {
        let (Some(op), Some(p), Some(qp)) = (field(r, 0), field(r, 1), field(r, 2)) else {
            continue;
        };
        let Some(off) = offset(p, psn) else { continue };
        if qp == dest_qpn && op != RC_ACK {
            requests.insert(off);
            if matches!(r.get(ACK_REQ).map(|a| a.trim()), Some("1" | "True")) {
                ack_reqs.insert(off);
            }
        } else if qp == src_qpn && op == RC_ACK && !acks.iter().any(|a| a.0 == off) {
            acks.push((off, field(r, MSN).unwrap_or(u64::MAX)));
            if off == ITERS * PACKETS - 1 {
                end = Some(i + 1);
                break;
            }
        }
    }
    Direction {
        requests: requests.len() as u64,
        ack_reqs: ack_reqs.into_iter().collect(),
        acks,
        end,
    }
}

/// Both directions of the run whose client printed `lines`: (client's
/// requests, server's requests), and the rows after the run. The runs
/// follow each other on the link, and a later run's packets can match an
/// earlier run's QPN and PSN window (pingpong seeds its PSNs with
/// pid × time; CI once counted the seed run's ACKs in the default run's),
/// so each run is looked for only after the one before it.
fn run_directions<'a>(
    rows: &'a [Vec<String>],
    lines: &[&str],
) -> (Direction, Direction, &'a [Vec<String>]) {
    let (cq, cpsn) = address(lines, "local address:");
    let (sq, spsn) = address(lines, "remote address:");
    let (to_server, to_client) = (direction(rows, cq, sq, cpsn), direction(rows, sq, cq, spsn));
    let end = to_server.end.max(to_client.end).unwrap_or(rows.len());
    (to_server, to_client, &rows[end..])
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn guests_choose_the_msn_start_and_ack_policy() {
    let stack = VmStack::get();
    let mut boot = GuestBoot::with_topology(&stack, "seed-options", TOPOLOGY);
    let run = boot.run.clone();
    let run_s = boot.run_dir();

    let seed = format!("{SEED_ENV} {PINGPONG}");
    let half = format!("IBTCA_MSN_START=0xffffff {PINGPONG}");
    let n1 = [
        tagged("DEFAULT-SERVER", PINGPONG),
        tagged("SEED-SERVER", &seed),
        tagged("HALF-SERVER", &half),
        tagged(
            "BAD-ACK",
            "IBTCA_ACK=coalesced:0 ibtca-provider-test seed-env",
        ),
        tagged("BAD-EMPTY", "IBTCA_ACK=, ibtca-provider-test seed-env"),
        tagged(
            "BAD-MSN",
            "IBTCA_MSN_START=0x1000000 ibtca-provider-test seed-env",
        ),
        tagged(
            "GOOD-ENV",
            "IBTCA_MSN_START=0xffffff IBTCA_ACK=per-packet,stop-and-wait ibtca-provider-test seed-env",
        ),
        tagged("UDATA", "ibtca-provider-test seed-udata"),
    ];
    let n2 = [
        client("DEFAULT-CLIENT", &format!("{PINGPONG} n1")),
        client("SEED-CLIENT", &format!("{seed} n1")),
        client("HALF-CLIENT", &format!("{PINGPONG} n1")),
    ];
    let Booted { out, said, .. } = boot.up(
        &["--guest-timeout", "900"],
        &[("n1", &n1[..]), ("n2", &n2[..])],
    );
    let (c1, c2) = (boot.console("n1"), boot.console("n2"));
    // The clients' tries that failed before one passed.
    ibtca_tests::retries::report_console("n1", &c1);
    ibtca_tests::retries::report_console("n2", &c2);
    let all = boot.all(&said, &["n1", "n2"]);
    assert!(out.status.success(), "every command ran:\n{all}");
    let rows = tshark(&run.join("link.pcap"));

    // Defaults and the seed's choices: both programs pass, byte-checked.
    for tag in [
        "DEFAULT-SERVER",
        "DEFAULT-CLIENT",
        "SEED-SERVER",
        "SEED-CLIENT",
    ] {
        let l = tagged_lines(if tag.ends_with("SERVER") { &c1 } else { &c2 }, tag);
        assert!(
            l.iter().any(|l| l.contains("20 iters in"))
                && l.contains(&"exit=0")
                && !l.iter().any(|l| l.contains("invalid data")),
            "{tag}: {l:?}\n{all}"
        );
    }

    // No variables: MSN 1 for the first message, one ACK per message at
    // its last packet, MSNs counting up.
    let (to_server, to_client, rows) = run_directions(&rows, &tagged_lines(&c2, "DEFAULT-CLIENT"));
    for (name, d) in [
        ("client->server", &to_server),
        ("server->client", &to_client),
    ] {
        eprintln!("default {name}: {} requests, ACKs {:?}", d.requests, d.acks);
        assert_eq!(d.requests, ITERS * PACKETS, "default {name}");
        let ends: Vec<u64> = (1..=ITERS).map(|m| m * PACKETS - 1).collect();
        assert_eq!(d.ack_reqs, ends, "default {name}: AckReq at message ends");
        let want: Vec<(u64, u64)> = (0..ITERS).map(|m| ((m + 1) * PACKETS - 1, m + 1)).collect();
        assert_eq!(
            d.acks, want,
            "default {name}: one ACK per message, MSN from 1"
        );
    }

    // The seed's: an ACK every 4 packets; the first message acknowledged
    // with MSN 0, the ACKs inside it with 0xffffff.
    let (to_server, to_client, rows) = run_directions(rows, &tagged_lines(&c2, "SEED-CLIENT"));
    for (name, d) in [
        ("client->server", &to_server),
        ("server->client", &to_client),
    ] {
        eprintln!("seed {name}: {} requests, ACKs {:?}", d.requests, d.acks);
        assert_eq!(d.requests, ITERS * PACKETS, "seed {name}");
        let every4 = coalesced_ack_reqs(4);
        assert_eq!(d.ack_reqs, every4, "seed {name}: AckReq every 4 packets");
        // The responder ACKs only what asked (the engine sends the latest
        // of a burst's ACKs): each message's end, sometimes packets inside
        // it, each with the MSN of the messages complete by then.
        for &(off, msn) in &d.acks {
            let done = (off + 1) / PACKETS;
            assert!(
                every4.contains(&off) && msn == (0xff_ffff + done) & 0xff_ffff,
                "seed {name}: ACK at {off} with MSN {msn:#x}: {:?}",
                d.acks
            );
        }
        let ends: Vec<(u64, u64)> = d
            .acks
            .iter()
            .copied()
            .filter(|a| (a.0 + 1) % PACKETS == 0)
            .collect();
        let want: Vec<(u64, u64)> = (0..ITERS).map(|m| ((m + 1) * PACKETS - 1, m)).collect();
        assert_eq!(
            ends, want,
            "seed {name}: each message acknowledged, MSN from 0"
        );
    }

    // Only the server counts from the seed's start: the client's SEND
    // landed and was acknowledged with MSN 0, stale for the client, which
    // gave up (retries exceeded, 12); the server's reply was acknowledged
    // with MSN 1, two messages for its one (bad response, 7).
    let hs = tagged_lines(&c1, "HALF-SERVER");
    let hc = tagged_lines(&c2, "HALF-CLIENT");
    eprintln!("mismatched MSN start:\n  server {hs:?}\n  client {hc:?}");
    assert!(
        hs.iter()
            .any(|l| l.contains("Failed status") && l.contains("(7)"))
            && !hs.contains(&"exit=0"),
        "server: IBV_WC_BAD_RESP_ERR: {hs:?}\n{all}"
    );
    assert!(
        hc.iter()
            .any(|l| l.contains("Failed status") && l.contains("(12)"))
            && !hc.contains(&"exit=0"),
        "client: IBV_WC_RETRY_EXC_ERR: {hc:?}\n{all}"
    );
    let (to_server, to_client, _) = run_directions(rows, &hc);
    assert_eq!(
        to_server.acks.first(),
        Some(&(PACKETS - 1, 0)),
        "the server's first ACK: MSN 0 (its start 0xffffff + 1)"
    );
    assert_eq!(
        to_client.acks.first(),
        Some(&(PACKETS - 1, 1)),
        "the client's first ACK: MSN 1 (IBA's start + 1)"
    );

    // Bad values: the variable, the accepted forms, EINVAL.
    for (tag, want) in [
        (
            "BAD-ACK",
            "ibtca: IBTCA_ACK=\"coalesced:0\" is not valid: it takes a comma-separated list of one mode (per-message, per-packet or coalesced:N with N 1..65535) and one window (window:N with N 0..1024, or stop-and-wait)",
        ),
        (
            "BAD-EMPTY",
            "ibtca: IBTCA_ACK=\",\" is not valid: it takes a comma-separated list of one mode",
        ),
        (
            "BAD-MSN",
            "ibtca: IBTCA_MSN_START=\"0x1000000\" is not valid: it takes a number 0..0xffffff (decimal or 0x hex)",
        ),
    ] {
        let l = tagged_lines(&c1, tag);
        assert!(l.iter().any(|l| l.contains(want)), "{tag}: {want}\n{l:?}");
        assert!(
            l.iter()
                .any(|l| l.contains("IBTCA-PROVIDER seed_env connect errno=22 (Invalid argument)"))
                && l.contains(&"exit=1"),
            "{tag}: {l:?}"
        );
    }
    let good = tagged_lines(&c1, "GOOD-ENV");
    assert!(
        good.iter()
            .any(|l| l.contains("seed_env connect errno=0 (connected)"))
            && good
                .iter()
                .any(|l| l
                    .contains("IBTCA-PROVIDER seed_env_write PASS 8192 bytes: status=0, match"))
            && good.contains(&"exit=0"),
        "{good:?}\n{all}"
    );

    // The kernel's checks of the driver data.
    let udata = tagged_lines(&c1, "UDATA");
    for step in [
        "seed_at_init",
        "seed_init",
        "seed_unknown_bit",
        "seed_reserved",
        "seed_msn_range",
        "seed_coalesced_zero",
        "seed_window_range",
        "seed_ack_mode",
        "seed_short",
        "seed_tail",
        "seed_accepted",
    ] {
        let pass = format!("IBTCA-PROVIDER {step} PASS");
        assert!(
            udata.iter().any(|l| l.contains(&pass)),
            "{pass}: {udata:?}\n{all}"
        );
    }
    assert!(
        udata
            .iter()
            .any(|l| l.contains("seed_tail PASS 24 bytes: errno 95")),
        "{udata:?}"
    );
    assert!(
        udata.contains(&"IBTCA-PROVIDER result 0 failed") && udata.contains(&"exit=0"),
        "{udata:?}"
    );

    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "{}", text(&out));
    boot.down();
}
