//! The project's shell scripts run as a test runs them: `bash
//! scripts/NAME` with arguments and extra environment, and the check every
//! script with options shares (its `--help` names each option; a bad
//! option exits 2 before anything runs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::launcher::text;

/// `scripts/NAME` of this checkout.
pub fn path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(name)
}

/// Runs `bash scripts/NAME ARGS` with `env` added to the environment.
pub fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new("bash")
        .arg(path(name))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("run bash")
}

/// `--help` succeeds and names each of `options`; each of `bad` exits 2.
/// `env` is given to every run (e.g. a stand-in that would fail the test
/// if a bad option ever reached it).
#[track_caller]
pub fn help_and_bad_options(name: &str, options: &[&str], bad: &[&[&str]], env: &[(&str, &str)]) {
    let help = run(name, &["--help"], env);
    assert!(help.status.success(), "{}", text(&help));
    let said = String::from_utf8_lossy(&help.stdout);
    for opt in options {
        assert!(
            said.contains(opt),
            "{name} --help does not name {opt}:\n{said}"
        );
    }
    for args in bad {
        let out = run(name, args, env);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{name} {args:?}: {}",
            text(&out)
        );
    }
}

/// The guests' commands a script wrote with `--commands DIR`: DIR/NODE.1,
/// NODE.2, ... in order, up to the first missing one.
pub fn written_commands(dir: &Path, node: &str) -> Vec<String> {
    (1..)
        .map_while(|i| std::fs::read_to_string(dir.join(format!("{node}.{i}"))).ok())
        .collect()
}

/// Each of `commands` parses as shell (`sh -n -c`).
#[track_caller]
pub fn assert_each_parses_as_shell<'a>(commands: impl IntoIterator<Item = &'a String>) {
    for (i, c) in commands.into_iter().enumerate() {
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
}
