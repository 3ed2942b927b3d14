//! What the consoles of a soak must show (`ibtca-soak`): each guest's
//! `ibtca-verbs soak` lines parsed, then checked pair by pair against the
//! other end's.
//!
//! For a message from A to B, A counts it posted, then written_ok or
//! write_errors by its completions; B counts it received, then verified
//! or mismatched by its bytes. Between two nodes that lived through the
//! whole run every message A completed was verified by B; a connection
//! between them that broke (a peer silent for (retry_cnt + 1) x the ACK
//! timeout) is reported, and of its failed messages B may have received
//! some (a message can land and still fail, its acknowledgements late). With the killed node K: its first life's counts die with it
//! (only its periodic lines remain, lower bounds); a survivor's messages
//! in flight at the kill must have failed (error completions), its
//! connection must have been made again, and on the last connection (K's
//! second life) both directions must agree exactly.

use std::collections::BTreeMap;

/// `key=value` numbers of one line.
pub type Fields = BTreeMap<String, u64>;

/// Numeric `key=value` words of `line` (others are skipped).
pub fn fields(line: &str) -> Fields {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_owned(), v.parse().ok()?))
        })
        .collect()
}

/// What one guest's console says.
#[derive(Debug, Default, Clone)]
pub struct Console {
    /// The tool started (`IBTCA-SOAK-START`).
    pub started: bool,
    /// Peer LID → its `IBTCA-SOAK-FINAL` line.
    pub finals: BTreeMap<u16, Fields>,
    /// Peer LID → the last periodic `IBTCA-SOAK` line.
    pub last: BTreeMap<u16, Fields>,
    /// `IBTCA-SOAK-SUMMARY P passed, F failed`.
    pub summary: Option<(u64, u64)>,
    /// `IBTCA-SOAK-RC`.
    pub rc: Option<i64>,
    /// `IBTCA-SOAK-BAD` lines, failed checks and the driver's complaints.
    pub bad: Vec<String>,
    /// The guest powered off (`IBTCA-GUEST done`).
    pub done: bool,
}

fn peer(f: &Fields) -> Option<u16> {
    f.get("peer").and_then(|&p| u16::try_from(p).ok())
}

/// Parses a console.
pub fn console(text: &str) -> Console {
    let mut c = Console::default();
    for line in text.lines().map(str::trim_end) {
        if line.starts_with("IBTCA-SOAK-START ") {
            c.started = true;
        } else if let Some(rest) = line.strip_prefix("IBTCA-SOAK-FINAL ") {
            let f = fields(rest);
            if let Some(p) = peer(&f) {
                c.finals.insert(p, f);
            }
        } else if let Some(rest) = line.strip_prefix("IBTCA-SOAK ") {
            if rest.contains(" FAIL ") {
                c.bad.push(line.to_owned());
            }
            let f = fields(rest);
            if let (Some(p), true) = (peer(&f), rest.starts_with("t=")) {
                c.last.insert(p, f);
            }
        } else if let Some(rest) = line.strip_prefix("IBTCA-SOAK-SUMMARY ") {
            let n: Vec<u64> = rest
                .split(|ch: char| !ch.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            if let [p, f] = n[..] {
                c.summary = Some((p, f));
            }
        } else if let Some(rest) = line.strip_prefix("IBTCA-SOAK-RC ") {
            c.rc = rest.trim().parse().ok();
        } else if line.starts_with("IBTCA-SOAK-BAD ")
            || (line.starts_with("IBTCA-DMESG ") && !line.contains("module verification failed"))
        {
            c.bad.push(line.to_owned());
        } else if line.starts_with("IBTCA-GUEST done") {
            c.done = true;
        }
    }
    c
}

/// One direction of one pair, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Sender's LID.
    pub from: u16,
    /// Receiver's LID.
    pub to: u16,
    /// The sender's counts (`posted`, `written_ok`, `write_errors`,
    /// `retry_exceeded`, `flushed`, `reconnects`).
    pub sent: Fields,
    /// The receiver's (`received`, `verified`, `mismatched`,
    /// `out_of_order`).
    pub got: Fields,
}

/// The soak's verdict.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Every direction of every pair.
    pub rows: Vec<Row>,
    /// What failed (empty: the soak passed).
    pub failures: Vec<String>,
}

fn get(f: &Fields, k: &str) -> u64 {
    f.get(k).copied().unwrap_or(0)
}

/// Checks the final consoles of the nodes `lids` (a killed node's second
/// life), with `killed` the killed node's LID and the console of its first
/// life.
pub fn check(
    lids: &[u16],
    finals: &BTreeMap<u16, Console>,
    killed: Option<(u16, &Console)>,
) -> Verdict {
    let mut v = Verdict::default();
    let mut fail = |s: String| v.failures.push(s);
    let peers = lids.len().saturating_sub(1) as u64;
    for &lid in lids {
        let Some(c) = finals.get(&lid) else {
            fail(format!("LID {lid}: no console"));
            continue;
        };
        if !c.started {
            fail(format!("LID {lid}: the soak never started"));
        }
        // One setup and one end-of-run check per peer.
        if c.summary != Some((2 * peers, 0)) {
            fail(format!(
                "LID {lid}: summary {:?}, want {} passed, 0 failed",
                c.summary,
                2 * peers
            ));
        }
        if c.rc != Some(0) {
            fail(format!("LID {lid}: ibtca-tool exit status {:?}", c.rc));
        }
        if !c.done {
            fail(format!("LID {lid}: the guest did not power off"));
        }
        for b in &c.bad {
            fail(format!("LID {lid}: {b}"));
        }
    }
    let k = killed.map(|(l, _)| l);
    for &a in lids {
        for &b in lids.iter().filter(|&&b| b != a) {
            let (Some(fa), Some(fb)) = (
                finals.get(&a).and_then(|c| c.finals.get(&b)),
                finals.get(&b).and_then(|c| c.finals.get(&a)),
            ) else {
                fail(format!("{a} -> {b}: no final counts at both ends"));
                continue;
            };
            let ctx = format!("{a} -> {b}");
            let s = |key: &str| get(fa, key);
            let r = |key: &str| get(fb, key);
            if s("posted") != s("written_ok") + s("write_errors") {
                fail(format!(
                    "{ctx}: {} posted, {} completed ok and {} with an error: some never completed",
                    s("posted"),
                    s("written_ok"),
                    s("write_errors")
                ));
            }
            for key in ["missing", "unexpected"] {
                if s(key) != 0 || r(key) != 0 {
                    fail(format!("{ctx}: {key} {} / {}", s(key), r(key)));
                }
            }
            if r("mismatched") != 0 || r("out_of_order") != 0 || r("verified") != r("received") {
                fail(format!(
                    "{ctx}: received {}, verified {}, mismatched {}, out of order {}",
                    r("received"),
                    r("verified"),
                    r("mismatched"),
                    r("out_of_order")
                ));
            }
            // Every message completed was received; of those that failed,
            // some may have landed (their acknowledgements lost or late).
            let landed = |got: u64, ok: u64, failed: u64| ok <= got && got <= ok + failed;
            if !landed(
                r("conn_received"),
                s("conn_written_ok"),
                s("conn_write_errors"),
            ) {
                fail(format!(
                    "{ctx}: last connection: {} written ok, {} failed, {} received",
                    s("conn_written_ok"),
                    s("conn_write_errors"),
                    r("conn_received")
                ));
            }
            if s("written_ok") == 0 {
                fail(format!("{ctx}: no message went through"));
            }
            if k != Some(a) && k != Some(b) {
                // Both lived through the run: every message completed was
                // received, over every connection (one that broke is in the
                // report, with its errors).
                if !landed(r("received"), s("written_ok"), s("write_errors")) {
                    fail(format!(
                        "{ctx}: survivors: {} written ok, {} with errors, {} received; reconnects {} / {}",
                        s("written_ok"),
                        s("write_errors"),
                        r("received"),
                        s("reconnects"),
                        r("reconnects")
                    ));
                }
            } else if k == Some(b) {
                // A survivor's messages to the killed node: those in flight
                // at the kill failed, the connection was made again, and the
                // first life verified no more than went before.
                if s("write_errors") == 0 || s("retry_exceeded") == 0 || s("reconnects") == 0 {
                    fail(format!(
                        "{ctx}: to the killed node: {} write errors, {} retry exceeded, {} reconnects (each must be > 0)",
                        s("write_errors"),
                        s("retry_exceeded"),
                        s("reconnects")
                    ));
                }
                let before = s("written_ok") - s("conn_written_ok").min(s("written_ok"));
                let first = killed
                    .and_then(|(_, c)| c.last.get(&a))
                    .map_or(0, |f| get(f, "verified"));
                if first > before {
                    fail(format!(
                        "{ctx}: the killed node's first life verified {first}, more than the {before} written ok to it"
                    ));
                }
            } else {
                // The killed node's messages to a survivor: everything its
                // second life wrote and at least what its first reported.
                let first = killed
                    .and_then(|(_, c)| c.last.get(&b))
                    .map_or(0, |f| get(f, "written_ok"));
                if r("received") < s("written_ok") + first {
                    fail(format!(
                        "{ctx}: from the killed node: received {}, fewer than the {} written ok (first life: at least {first})",
                        r("received"),
                        s("written_ok") + first
                    ));
                }
            }
            v.rows.push(Row {
                from: a,
                to: b,
                sent: fa.clone(),
                got: fb.clone(),
            });
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn final_line(lid: u16, peer: u16, sent: [u64; 4], got: [u64; 2], conn: [u64; 2]) -> String {
        let [posted, ok, errors, reconnects] = sent;
        let [received, ooo] = got;
        let [conn_ok, conn_received] = conn;
        format!(
            "IBTCA-SOAK-FINAL lid={lid} peer={peer} posted={posted} written_ok={ok} write_errors={errors} \
             retry_exceeded={} flushed={} received={received} verified={received} mismatched=0 \
             out_of_order={ooo} unexpected=0 reconnects={reconnects} missing=0 conn_written_ok={conn_ok} \
             conn_received={conn_received}",
            errors.min(1),
            errors.saturating_sub(1)
        )
    }

    fn tail() -> &'static str {
        "IBTCA-SOAK check_x PASS\nIBTCA-SOAK-SUMMARY 4 passed, 0 failed\nIBTCA-SOAK-RC 0\nIBTCA-GUEST done\n"
    }

    /// Three nodes, LID 3 killed: 1 and 2 agree in full; 1 and 2 lost
    /// messages in flight to 3 and reconnected; 3's second life agrees.
    fn consoles(received_2_from_1: u64) -> (BTreeMap<u16, Console>, Console) {
        let start = "IBTCA-SOAK-START lid=x\n";
        let c1 = format!(
            "{start}{}\n{}\n{}",
            final_line(1, 2, [100, 100, 0, 0], [90, 0], [100, 90]),
            final_line(1, 3, [80, 75, 5, 1], [70, 0], [30, 20]),
            tail()
        );
        let c2 = format!(
            "{start}{}\n{}\n{}",
            final_line(2, 1, [90, 90, 0, 0], [received_2_from_1, 0], [90, 100]),
            final_line(2, 3, [60, 58, 2, 1], [50, 0], [25, 20]),
            tail()
        );
        let c3 = format!(
            "{start}{}\n{}\n{}",
            final_line(3, 1, [20, 20, 0, 0], [30, 0], [20, 30]),
            final_line(3, 2, [20, 20, 0, 0], [25, 0], [20, 25]),
            tail()
        );
        let first = console(
            "IBTCA-SOAK t=10 lid=3 peer=1 state=run epoch=1 posted=45 written_ok=40 verified=40\n\
             IBTCA-SOAK t=10 lid=3 peer=2 state=run epoch=1 posted=31 written_ok=30 verified=30\n",
        );
        let all = [(1, c1), (2, c2), (3, c3)]
            .into_iter()
            .map(|(l, t)| (l, console(&t)))
            .collect();
        (all, first)
    }

    #[test]
    fn a_consistent_soak_passes() {
        let (all, first) = consoles(100);
        let v = check(&[1, 2, 3], &all, Some((3, &first)));
        assert!(v.failures.is_empty(), "{:?}", v.failures);
        assert_eq!(v.rows.len(), 6);
    }

    #[test]
    fn a_lost_message_between_survivors_fails() {
        let (all, first) = consoles(99);
        let v = check(&[1, 2, 3], &all, Some((3, &first)));
        assert_eq!(v.failures.len(), 1, "{:?}", v.failures);
        assert!(
            v.failures[0].starts_with("1 -> 2: survivors"),
            "{:?}",
            v.failures
        );
        assert!(v.failures[0].contains("99 received"), "{:?}", v.failures);
    }

    /// A connection between survivors that broke: the messages that
    /// failed may have landed, no more than them.
    #[test]
    fn a_broken_survivor_connection_passes_if_every_message_is_accounted_for() {
        let (mut all, first) = consoles(104);
        let f = all.get_mut(&1).unwrap().finals.get_mut(&2).unwrap();
        f.insert("posted".into(), 105);
        f.insert("write_errors".into(), 5);
        f.insert("retry_exceeded".into(), 1);
        f.insert("reconnects".into(), 1);
        let v = check(&[1, 2, 3], &all, Some((3, &first)));
        assert!(v.failures.is_empty(), "{:?}", v.failures);
        let (mut all, first) = consoles(106);
        let f = all.get_mut(&1).unwrap().finals.get_mut(&2).unwrap();
        f.insert("posted".into(), 105);
        f.insert("write_errors".into(), 5);
        let v = check(&[1, 2, 3], &all, Some((3, &first)));
        assert_eq!(v.failures.len(), 1, "{:?}", v.failures);
        assert!(v.failures[0].contains("106 received"), "{:?}", v.failures);
    }

    #[test]
    fn a_mismatch_or_a_message_never_completed_fails() {
        let (mut all, first) = consoles(100);
        let f = all.get_mut(&2).unwrap().finals.get_mut(&1).unwrap();
        f.insert("mismatched".into(), 1);
        f.insert("posted".into(), 91);
        let v = check(&[1, 2, 3], &all, Some((3, &first)));
        let text = v.failures.join("\n");
        assert!(text.contains("mismatched 1"), "{text}");
        assert!(text.contains("some never completed"), "{text}");
    }

    #[test]
    fn no_error_to_the_killed_node_fails() {
        let (mut all, first) = consoles(100);
        let f = all.get_mut(&1).unwrap().finals.get_mut(&3).unwrap();
        f.insert("write_errors".into(), 0);
        f.insert("written_ok".into(), 80);
        let v = check(&[1, 2, 3], &all, Some((3, &first)));
        assert!(
            v.failures.iter().any(|f| f.contains("to the killed node")),
            "{:?}",
            v.failures
        );
    }

    #[test]
    fn console_lines_parse() {
        let c = console(
            "IBTCA-SOAK setup_2 PASS peer_qpn=0x400\n\
             IBTCA-SOAK t=20 lid=1 peer=2 state=run epoch=1 posted=5 written_ok=4\n\
             IBTCA-SOAK check_2 FAIL verified=1\n\
             IBTCA-DMESG [ 4.9] ibtca: module verification failed: tainting\n\
             IBTCA-DMESG [ 9.1] ibtca: command timed out\n\
             IBTCA-SOAK-SUMMARY 1 passed, 1 failed\nIBTCA-SOAK-RC 1\n",
        );
        assert_eq!(c.last[&2]["written_ok"], 4);
        assert_eq!(c.summary, Some((1, 1)));
        assert_eq!(c.rc, Some(1));
        assert_eq!(c.bad.len(), 2, "{:?}", c.bad);
        assert!(!c.started && !c.done);
    }
}
