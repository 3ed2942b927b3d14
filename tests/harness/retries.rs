//! Tries that failed before one passed. A test that tries something again
//! reports every failed try: on stderr (the test's output) and, when
//! `IBTCA_RETRY_LOG` names a file, as a line appended to it
//! (`scripts/test.sh` sets it and prints the file at the end). A retry
//! that finally passes is never silent.
//!
//! Commands run in guests mark each line of a failed try with
//! [`MARK`] (`console::client`); [`report_console`] reports them from
//! the console text.

use std::io::Write;

/// What a guest command puts before each line a failed try printed:
/// `IBTCA-RETRY try=N exit=STATUS TAG: LINE`.
pub const MARK: &str = "IBTCA-RETRY ";

/// Reports one failed try of `what` with its `detail`.
pub fn report(what: &str, detail: &str) {
    let line = format!("retried: {what}: {detail}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("IBTCA_RETRY_LOG") {
        let test = std::thread::current().name().unwrap_or("?").to_owned();
        if let Err(e) = append(std::path::Path::new(&path), &test, &line) {
            eprintln!("retried: cannot append to IBTCA_RETRY_LOG: {e}");
        }
    }
}

/// Appends `TEST: LINE` (on one line) to the file at `path`.
fn append(path: &std::path::Path, test: &str, line: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    writeln!(f, "{test}: {}", line.replace(['\n', '\r'], " | "))
}

/// The lines of `console` a failed try marked, without the mark.
pub fn console_tries(console: &str) -> Vec<&str> {
    console
        .lines()
        .filter_map(|l| l.find(MARK).map(|i| l[i + MARK.len()..].trim_end()))
        .collect()
}

/// Reports every line of `console` (the console of guest `who`) that a
/// failed try marked; returns those lines.
pub fn report_console<'a>(who: &str, console: &'a str) -> Vec<&'a str> {
    let tries = console_tries(console);
    for t in &tries {
        report(&format!("guest {who}"), t);
    }
    tries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_tries_are_taken_from_the_console_and_appended_to_a_log() {
        let console = "boot\n[ 3.1] IBTCA-RETRY try=1 exit=1 PP: Couldn't connect\r\n\
                       PP local address\nPP exit=0\n";
        assert_eq!(
            console_tries(console),
            ["try=1 exit=1 PP: Couldn't connect"]
        );
        assert_eq!(
            crate::console::tagged_lines(console, "PP"),
            ["local address", "exit=0"],
            "a failed try is not the tag's output"
        );
        let dir = crate::TempDir::new("retries");
        let log = dir.join("retries.log");
        append(&log, "t1", "retried: a\nb").unwrap();
        append(&log, "t2", "retried: c").unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text, "t1: retried: a | b\nt2: retried: c\n");
    }
}
