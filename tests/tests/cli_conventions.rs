//! Every binary keeps the conventions of docs/cli.md: its own name in
//! `-h` and `-V`, errors as `NAME: error: …` on stderr, exit status 2 for
//! a usage error (an unknown flag, a LID out of range) and 0 for help and
//! version; LIDs in hex or decimal.

use std::process::{Command, Output};

use ibtca_tests::workspace_bin;

/// Every binary of the workspace, with arguments that make it otherwise
/// valid up to the flag under test (none needs more to print help).
const BINARIES: [&str; 11] = [
    "ibtca-device",
    "ibtca-switch",
    "ibtca-hive",
    "ibtca-regs-header",
    "ibtca-fabric",
    "ibtca-mgmt-hub",
    "ibtca-gateway",
    "ibtca-gateway-bench",
    "ibtca-simport",
    "ibtca-bench",
    "ibtca-soak",
];

fn run(name: &str, args: &[&str]) -> Output {
    Command::new(workspace_bin(name))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_and_version_name_the_binary_and_exit_0() {
    for name in BINARIES {
        let v = run(name, &["-V"]);
        assert_eq!(v.status.code(), Some(0), "{name} -V: {}", stderr(&v));
        assert_eq!(
            stdout(&v),
            format!("{name} {}\n", env!("CARGO_PKG_VERSION")),
            "{name} -V"
        );
        for flag in ["-h", "--help"] {
            let h = run(name, &[flag]);
            assert_eq!(h.status.code(), Some(0), "{name} {flag}: {}", stderr(&h));
            let text = stdout(&h);
            // The usage line names it, and no other binary's name or crate
            // description stands in for it.
            let usage = text
                .split("Usage: ")
                .nth(1)
                .and_then(|rest| rest.split_whitespace().next());
            assert_eq!(usage, Some(name), "{name} {flag}:\n{text}");
            assert!(!text.starts_with("ibtca-fabric:"), "{name} {flag}:\n{text}");
            assert!(!text.starts_with("ibtca: "), "{name} {flag}:\n{text}");
        }
    }
}

#[test]
fn an_unknown_flag_is_a_usage_error_in_one_style() {
    for name in BINARIES {
        let o = run(name, &["--no-such-flag"]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!(
                "{name}: error: unexpected argument '--no-such-flag' found"
            )),
            "{name}:\n{err}"
        );
        assert!(stdout(&o).is_empty(), "{name} printed to stdout");
    }
    // The bench's and the soak's subcommands refuse unknown flags too.
    for args in [
        &["crc", "--seconds", "1"][..],
        &["link", "--smps", "5"],
        &["verbs", "--only", "write-2m"],
        &["sma", "--smps", "0"],
    ] {
        let o = run("ibtca-bench", args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).starts_with("ibtca-bench: error: "),
            "{}",
            stderr(&o)
        );
    }
    let o = run("ibtca-soak", &["--seconds", "5"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        "ibtca-soak: error: the soak runs at least 30 s\n"
    );
}

#[test]
fn lids_out_of_range_are_refused_with_their_range() {
    let cases: [(&str, &[&str], &str); 5] = [
        (
            "ibtca-device",
            &["--socket", "/nonexistent/x", "--lid", "0xc000"],
            "invalid value '0xc000' for '--lid <LID>': LID 0xc000 is out of range 1–0xbfff",
        ),
        (
            "ibtca-device",
            &["--socket", "/nonexistent/x", "--lid", "0"],
            "invalid value '0' for '--lid <LID>': LID 0 is out of range 1–0xbfff",
        ),
        (
            "ibtca-switch",
            &["--port", "listen:/nonexistent/p", "--lid", "49152"],
            "invalid value '49152' for '--lid <LID>': LID 49152 is out of range 0–0xbfff",
        ),
        (
            "ibtca-switch",
            &["--port", "listen:/nonexistent/p", "--route", "0xc000=1"],
            "invalid value '0xc000=1' for '--route <LIDS=PORT>': `0xc000=1`: LID 0xc000 is out of range 1–0xbfff",
        ),
        (
            "ibtca-gateway",
            &[
                "--link",
                "listen:/nonexistent/l",
                "--atm",
                "listen:/nonexistent/a",
                "--map",
                "/nonexistent/m",
                "--lid",
                "0xc000",
            ],
            "invalid value '0xc000' for '--lid <LID>': LID 0xc000 is out of range 1–0xbfff",
        ),
    ];
    for (name, args, want) in cases {
        let o = run(name, args);
        assert_eq!(o.status.code(), Some(2), "{name} {args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("{name}: error: {want}\n")),
            "{name} {args:?}:\n{err}"
        );
    }
}

#[test]
fn hex_and_decimal_lids_and_guids_are_both_taken() {
    // --check parses everything and starts nothing: a usage error would
    // exit 2 before the map is read, a missing map exits 2 naming it.
    for lid in ["0x10", "16"] {
        for guid in ["0x1200000000fd0010", "1297036692699283472"] {
            let o = run(
                "ibtca-gateway",
                &[
                    "--check",
                    "--link",
                    "listen:/nonexistent/l",
                    "--atm",
                    "listen:/nonexistent/a",
                    "--map",
                    "/nonexistent/m",
                    "--lid",
                    lid,
                    "--node-guid",
                    guid,
                ],
            );
            assert_eq!(o.status.code(), Some(2), "{lid} {guid}");
            assert_eq!(
                stderr(&o),
                "ibtca-gateway: error: --map /nonexistent/m: No such file or directory (os error 2)\n",
                "{lid} {guid}: the values parsed, the map is what is missing"
            );
        }
    }
}

#[test]
fn a_failure_at_run_time_exits_1_in_the_same_style() {
    let o = run("ibtca-mgmt-hub", &["--socket", "/nonexistent/dir/hub.sock"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).starts_with("ibtca-mgmt-hub: error: bind /nonexistent/dir/hub.sock: "),
        "{}",
        stderr(&o)
    );
    let o = run("ibtca-fabric", &["check", "/nonexistent/t.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "ibtca-fabric: error: cannot read /nonexistent/t.json: No such file or directory (os error 2)\n"
    );
}
