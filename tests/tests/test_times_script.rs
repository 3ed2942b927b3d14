//! `scripts/test-times.sh` (the wrapper scripts/test.sh runs `cargo test`
//! under) with a stand-in suite that prints cargo's and libtest's lines:
//! the suite's output passes through, every test binary's wall time is
//! listed slowest first (a binary that printed no result last, as "no
//! result"), the list is printed also when the suite failed, and the exit
//! status is the suite's.

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

/// Cargo prints "Running" and "Doc-tests" on stderr, libtest its results on
/// stdout; the last binary stops without a result and the suite exits 101.
const STAND_IN: &str = r#"
echo "     Running unittests src/lib.rs (target/debug/deps/ibtca_tca-0123abcdef)" >&2
echo "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.50s"
echo "     Running tests/vm_slow.rs (target/debug/deps/vm_slow-fedcba98)" >&2
echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 160.30s"
echo "   Doc-tests ibtca_tca" >&2
echo "test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 12.00s"
echo "     Running tests/vm_middle.rs (target/debug/deps/vm_middle-0badcafe)" >&2
echo "test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 81.04s"
echo "     Running tests/vm_dies.rs (target/debug/deps/vm_dies-aaaa1111)" >&2
echo "the suite's own line"
exit 101
"#;

#[test]
fn lists_each_binary_slowest_first_and_keeps_the_suites_status() {
    let dir = TempDir::new("test-times");
    let stand_in = dir.0.join("stand-in.sh");
    std::fs::write(&stand_in, STAND_IN).unwrap();
    let out = script_cli::run(
        "test-times.sh",
        &["bash", &stand_in.display().to_string()],
        &[],
    );
    assert_eq!(out.status.code(), Some(101), "{}", text(&out));

    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("the suite's own line"), "{}", text(&out));
    assert!(
        stdout.contains("Running tests/vm_slow.rs"),
        "cargo's stderr passes through: {}",
        text(&out)
    );

    let stderr = String::from_utf8_lossy(&out.stderr);
    let table: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("test binaries by wall time"))
        .collect();
    assert_eq!(
        table,
        [
            "test binaries by wall time, slowest first (sum 253.8 s):",
            "    160.3 s  vm_slow",
            "     81.0 s  vm_middle",
            "     12.0 s  ibtca_tca (doc tests)",
            "      0.5 s  ibtca_tca (unit tests)",
            "  no result  vm_dies",
        ],
        "{}",
        text(&out)
    );
}

#[test]
fn without_a_command_it_exits_2() {
    let out = script_cli::run("test-times.sh", &[], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
