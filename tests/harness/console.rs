//! Reading what guests print: waiting for a line to appear in a console
//! or log file the fabric writes, and taking the `key=value` fields and
//! tagged lines out of it; and the guest commands that tag their output
//! (each line `TAG `, the exit status as `TAG exit=N`). Kernel messages
//! may share a line with a tagged one, so a tag is looked for anywhere in
//! a line.

use std::path::Path;
use std::time::{Duration, Instant};

/// Waits until `file` holds `needle` `n` times (or more) in complete
/// lines; returns its text up to the last complete line (a guest may be
/// halfway through writing the line the caller wants to read). Panics
/// after `timeout`, with the text read last.
pub fn wait_for(file: &Path, needle: &str, n: usize, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let mut text = std::fs::read_to_string(file).unwrap_or_default();
        text.truncate(text.rfind('\n').map_or(0, |i| i + 1));
        if text.matches(needle).count() >= n {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {n} x {needle:?} in {} after {timeout:?}:\n{text}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The value of `key=value` in `line` (up to the next white space); the
/// key is a whole word, so `match` is not found in `payload_match=1`.
/// Panics if `line` has no `key=`.
pub fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

/// Runs `cmd` once, its output on the console with every line tagged
/// `TAG `; fails as `cmd` does.
pub fn tagged(tag: &str, cmd: &str) -> String {
    format!(
        "out=$({cmd} 2>&1); st=$?; echo \"$out\" | sed 's/^/{tag} /'; \
         echo \"{tag} exit=$st\"; exit $st"
    )
}

/// A client: `cmd` until the server (started meanwhile in another guest)
/// answers, at most `tries` times a second apart; a failure after
/// connecting (the output names the remote address) is final, unless it
/// is one of perftest's failures outside the fabric ([`PERFTEST_REDO`]).
/// A run that names one of those is tried again even when it exited 0:
/// its server saw the same run fail and waits for the next try.
/// Each earlier try's output is kept on the console, every line marked
/// `IBTCA-RETRY try=N exit=STATUS TAG: ` ([`crate::retries::MARK`]; the
/// test reports them with [`crate::retries::report_console`]); `TAG:`,
/// not `TAG `, so that [`tagged_lines`] leaves them out.
pub fn client(tag: &str, cmd: &str, tries: u32) -> String {
    format!(
        "for i in $(seq {tries}); do out=$({cmd} 2>&1); st=$?; \
         if ! echo \"$out\" | grep -q {PERFTEST_REDO} && \
         {{ [ $st = 0 ] || echo \"$out\" | grep -q 'remote address'; }}; then \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=$st\"; exit $st; fi; \
         {}; sleep 1; done; \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=failed\"; exit 1",
        mark_failed_try(tag, "$out")
    )
}

/// `grep` patterns for what perftest prints when a run fails for a reason
/// outside the fabric: its clock calibration, which a descheduled TCG
/// vCPU can spoil ("Correlation coefficient r^2: 0.86 < 0.9", then
/// "Can't produce a report"), or its peer leaving for that reason before
/// their exchange over the management wire ("Failed to exchange data
/// between server and clients") or before their closing handshake
/// ("Failed to close connection between server and client", after which
/// perftest still exits 0). Either side that sees one tries again, so a
/// pair always tries again together: a side that stopped for good while
/// its peer tried again would leave that peer's next try to the next
/// pair's server on the same port.
pub const PERFTEST_REDO: &str =
    "-e 'produce a report' -e 'Failed to exchange data' -e 'Failed to close connection'";

/// A perftest server: `cmd` once, or again (at most `tries` times) after
/// a failure [`PERFTEST_REDO`] names, for the client's next try. Earlier
/// tries are marked as [`client`]'s are.
pub fn perftest_server(tag: &str, cmd: &str, tries: u32) -> String {
    format!(
        "for i in $(seq {tries}); do out=$({cmd} 2>&1); st=$?; \
         if ! echo \"$out\" | grep -q {PERFTEST_REDO}; then \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=$st\"; exit $st; fi; \
         {}; done; \
         echo \"$out\" | sed 's/^/{tag} /'; echo \"{tag} exit=failed\"; exit 1",
        mark_failed_try(tag, "$out")
    )
}

/// `ping` (a ping command line) printing its output and failing unless
/// every echo was answered: under [`client`], a run that lost one (IPoIB
/// drops what it queued while it resolves the peer's path, and busybox
/// ping stops waiting for a late last reply) is tried again and reported,
/// not taken as done.
pub fn every_echo_answered(ping: &str) -> String {
    format!("{ping} > /tmp/ping.out; cat /tmp/ping.out; grep -q ' 0% packet loss' /tmp/ping.out")
}

/// A shell command that prints `output` (an expansion, e.g. `$out` or
/// `$(cat F)`, which it quotes) with every line marked as try `$i` of `tag` that failed
/// with status `$st` ([`crate::retries::MARK`]).
pub fn mark_failed_try(tag: &str, output: &str) -> String {
    format!(
        "echo \"{output}\" | sed \"s/^/{}try=$i exit=$st {tag}: /\"",
        crate::retries::MARK
    )
}

/// The lines of `console` tagged `tag` (a `--run` command's output piped
/// through `sed 's/^/TAG /'`), without the tag.
pub fn tagged_lines<'a>(console: &'a str, tag: &str) -> Vec<&'a str> {
    let t = format!("{tag} ");
    console
        .lines()
        .filter_map(|l| l.find(&t).map(|i| l[i + t.len()..].trim_end_matches('\r')))
        .collect()
}

/// What to read first when guests' commands failed, short enough to
/// survive a log excerpt: per node, the last `n` lines its commands
/// printed (kernel messages left out), the kernel's lines that name
/// ibtca or an error, and the warnings and errors of its device's log
/// (`NODE.log` in `run`).
pub fn failure_digest(run: &Path, nodes: &[&str], n: usize) -> String {
    let tail = |lines: Vec<&str>, n: usize| lines[lines.len().saturating_sub(n)..].join("\n");
    let mut out = String::new();
    for node in nodes {
        let console =
            std::fs::read_to_string(run.join(format!("{node}.console"))).unwrap_or_default();
        let log = std::fs::read_to_string(run.join(format!("{node}.log"))).unwrap_or_default();
        let printed = console.lines().filter(|l| !is_kernel_line(l)).collect();
        let kernel = console
            .lines()
            .filter(|l| is_kernel_line(l))
            .filter(|l| {
                ["ibtca", "rror", "WARN", "BUG", "fail"]
                    .iter()
                    .any(|w| l.contains(w))
            })
            .collect();
        let device = log
            .lines()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect();
        out += &format!(
            "--- {node}: last commands' output\n{}\n--- {node}: kernel\n{}\n--- {node}: device log warnings\n{}\n",
            tail(printed, n),
            tail(kernel, n / 2),
            tail(device, n / 2)
        );
    }
    out
}

/// A kernel message on a serial console (`[    1.234567] ...`).
fn is_kernel_line(l: &str) -> bool {
    l.trim_start().starts_with('[')
        && l.contains(']')
        && l.trim_start()[1..]
            .trim_start()
            .starts_with(|c: char| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_tagged_lines_are_taken_from_console_text() {
        let line = "IBTCA-PERF-FAIL size=1048576 status=12 after_s=1.07";
        assert_eq!(field(line, "status"), "12");
        assert_eq!(field(line, "after_s"), "1.07");
        let both = "setup PASS payload_match=1/2 match=3/4";
        assert_eq!(field(both, "match"), "3/4");
        assert_eq!(field(both, "payload_match"), "1/2");
        let console = "[ 1.0] RUN1 #bytes iterations\nother\n[ 2.0] RUN1 exit=0\nRUN2 x";
        assert_eq!(
            tagged_lines(console, "RUN1"),
            ["#bytes iterations", "exit=0"]
        );
        assert_eq!(tagged_lines(console, "RUN2"), ["x"]);
    }

    #[test]
    #[should_panic(expected = "no missing= in")]
    fn a_missing_field_panics_naming_it() {
        field("a=1 b=2", "missing");
    }

    #[test]
    fn a_client_keeps_the_output_of_its_failed_tries_marked() {
        let dir = crate::TempDir::new("client");
        let count = dir.join("count");
        std::fs::write(&count, "0").unwrap();
        // Refused twice, then served.
        let cmd = format!(
            "n=$(cat {c}); echo $((n + 1)) >{c}; \
             if [ $n -ge 2 ]; then echo served; else echo refused $n; false; fi",
            c = count.display()
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(client("CL", &cmd, 5))
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            text,
            "IBTCA-RETRY try=1 exit=1 CL: refused 0\n\
             IBTCA-RETRY try=2 exit=1 CL: refused 1\n\
             CL served\nCL exit=0\n"
        );
        assert_eq!(tagged_lines(&text, "CL"), ["served", "exit=0"]);
    }

    /// Runs `script` under `sh`; its exit status and standard output.
    fn sh(script: &str) -> (bool, String) {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap();
        (out.status.success(), String::from_utf8(out.stdout).unwrap())
    }

    /// A command that fails with `fail` (its output) on its first run and
    /// passes on the next, counting its runs in the file `count`.
    fn fails_once(count: &Path, fail: &str) -> String {
        format!(
            "n=$(cat {c} 2>/dev/null || echo 0); echo $((n + 1)) >{c}; \
             if [ $n -ge 1 ]; then echo ran; else echo \"{fail}\"; false; fi",
            c = count.display()
        )
    }

    #[test]
    fn perftest_failures_outside_the_fabric_are_tried_again_on_both_sides() {
        let dir = crate::TempDir::new("perftest-redo");
        let cal = "remote address: LID 1\nCorrelation coefficient r^2: 0.86 < 0.9\nCan't produce a report";
        let (ok, text) = sh(&client("CL", &fails_once(&dir.join("c"), cal), 5));
        assert!(ok, "{text}");
        assert_eq!(tagged_lines(&text, "CL"), ["ran", "exit=0"], "{text}");
        assert!(
            text.starts_with("IBTCA-RETRY try=1 exit=1 CL: remote address"),
            "{text}"
        );
        let gone = "Failed to exchange data between server and clients";
        let (ok, text) = sh(&perftest_server("SV", &fails_once(&dir.join("s"), gone), 3));
        assert!(ok, "{text}");
        assert_eq!(tagged_lines(&text, "SV"), ["ran", "exit=0"], "{text}");
    }

    /// A command that prints `first` and exits 0 on its first run and
    /// prints `ran` on the next, counting its runs in the file `count`.
    fn odd_once(count: &Path, first: &str) -> String {
        format!(
            "n=$(cat {c} 2>/dev/null || echo 0); echo $((n + 1)) >{c}; \
             if [ $n -ge 1 ]; then echo ran; else echo \"{first}\"; fi",
            c = count.display()
        )
    }

    #[test]
    fn a_side_whose_peer_left_before_closing_tries_again_though_it_exited_0() {
        // The client's calibration failed after the run; the server had
        // its own report, saw the close fail and exited 0. Taking that as
        // done would send the client's next try to the next server.
        let dir = crate::TempDir::new("perftest-close");
        let closed = "remote address: LID 2\n 65536 1114 0.00 18.96\n\
                      Failed to close connection between server and client";
        let (ok, text) = sh(&perftest_server("SV", &odd_once(&dir.join("s"), closed), 3));
        assert!(ok, "{text}");
        assert_eq!(tagged_lines(&text, "SV"), ["ran", "exit=0"], "{text}");
        assert!(
            text.starts_with("IBTCA-RETRY try=1 exit=0 SV: remote address"),
            "{text}"
        );
        let (ok, text) = sh(&client("CL", &odd_once(&dir.join("c"), closed), 5));
        assert!(ok, "{text}");
        assert_eq!(tagged_lines(&text, "CL"), ["ran", "exit=0"], "{text}");
    }

    #[test]
    fn other_failures_after_connecting_are_final_on_both_sides() {
        let dir = crate::TempDir::new("perftest-final");
        let wc = "remote address: LID 1\nCompletion with error at client";
        let (ok, text) = sh(&client("CL", &fails_once(&dir.join("c"), wc), 5));
        assert!(!ok, "{text}");
        assert_eq!(tagged_lines(&text, "CL").last(), Some(&"exit=1"), "{text}");
        let (ok, text) = sh(&perftest_server("SV", &fails_once(&dir.join("s"), wc), 3));
        assert!(!ok, "{text}");
        assert!(!text.contains("IBTCA-RETRY"), "{text}");
    }

    #[test]
    fn wait_for_returns_the_text_once_the_needle_is_there_n_times() {
        let dir = crate::TempDir::new("console");
        let file = dir.join("c.console");
        std::fs::write(&file, "x DONE\ny DONE\nz DO").unwrap();
        let text = wait_for(&file, "DONE", 2, Duration::from_secs(1));
        assert_eq!(text, "x DONE\ny DONE\n");
    }

    #[test]
    #[should_panic(expected = "no 2 x \"DONE status=1\"")]
    fn wait_for_ignores_a_line_still_being_written() {
        let dir = crate::TempDir::new("console");
        let file = dir.join("c.console");
        std::fs::write(&file, "x DONE status=1\ny DONE status=1").unwrap();
        wait_for(&file, "DONE status=1", 2, Duration::from_millis(100));
    }

    #[test]
    #[should_panic(expected = "no 3 x \"DONE\"")]
    fn wait_for_panics_after_its_timeout() {
        let dir = crate::TempDir::new("console");
        let file = dir.join("c.console");
        std::fs::write(&file, "x DONE\n").unwrap();
        wait_for(&file, "DONE", 3, Duration::from_millis(100));
    }

    #[test]
    fn a_failure_digest_leads_with_what_the_commands_printed() {
        let dir = crate::TempDir::new("console");
        let console = "[    0.100000] Linux version 7\nRB-CLIENT  65536 x\n\
                       [    1.500000] ibtca 0000:00:03.0: QP 0x402 to error\n\
                       [    1.600000] random driver line\nRB-CLIENT exit=1\n";
        std::fs::write(dir.join("n2.console"), console).unwrap();
        std::fs::write(
            dir.join("n2.log"),
            "t  INFO a: fine\nt  WARN ibtca_device: NAK sent\n",
        )
        .unwrap();
        let d = failure_digest(&dir.join(""), &["n2"], 10);
        let want = "--- n2: last commands' output\nRB-CLIENT  65536 x\nRB-CLIENT exit=1\n\
                    --- n2: kernel\n[    1.500000] ibtca 0000:00:03.0: QP 0x402 to error\n\
                    --- n2: device log warnings\nt  WARN ibtca_device: NAK sent\n";
        assert_eq!(d, want);
    }
}
