//! `scripts/fuzz.sh`'s verdicts without building the fuzz targets
//! (`IBTCA_FUZZ_BIN_DIR`): stand-in fuzzers that end the way libFuzzer
//! does (its FuzzerLoop.cpp: a crash, timeout or out-of-memory writes
//! `crash-`/`timeout-`/`oom-` under -artifact_prefix, says "Test unit
//! written to ..." and exits 77/70/71; SIGINT or SIGTERM prints "run
//! interrupted" and exits 72 with no input written). A run stopped by hand
//! is "stopped" and no failure; a crash, timeout or out-of-memory is, and
//! so is any other exit. A SIGTERM to the script itself ends it after the
//! current target, with exit status 130.
//!
//! The script runs from a copy of the repository layout in a temporary
//! directory (`scripts/fuzz.sh`, `fuzz/corpus/`), so nothing is written
//! under the checkout's `fuzz/`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use ibtca_tests::launcher::text;
use ibtca_tests::TempDir;

/// One fuzzer stand-in; what it does is chosen by the name it runs under.
const FAKE_FUZZER: &str = r#"#!/bin/sh
prefix=
for a; do
	case $a in -artifact_prefix=*) prefix=${a#*=} ;; esac
done
stats() {
	echo "stat::number_of_executed_units: 1234"
	echo "stat::average_exec_per_sec: 617"
}
unit() {
	echo x >"$prefix$1-0a1b2c"
	echo "artifact_prefix='$prefix'; Test unit written to $prefix$1-0a1b2c"
}
case ${0##*/} in
clean) stats ;;
crash) echo "==7== ERROR: libFuzzer: deadly signal"; unit crash; stats; exit 77 ;;
timeout) echo "==7== ERROR: libFuzzer: timeout after 1 seconds"; unit timeout; stats; exit 70 ;;
oom) echo "==7== ERROR: libFuzzer: out-of-memory"; unit oom; stats; exit 71 ;;
bad_flag) echo "unknown flag"; exit 1 ;;
stopped)
	trap 'echo "==7== libFuzzer: run interrupted; exiting"; stats; exit 72' INT TERM
	echo $$ >"$FAKE_PID.tmp" && mv "$FAKE_PID.tmp" "$FAKE_PID"
	while :; do sleep 1 & wait $!; done
	;;
esac
"#;

const FAKES: [&str; 6] = ["clean", "crash", "timeout", "oom", "bad_flag", "stopped"];

struct Layout {
    dir: TempDir,
}

impl Layout {
    fn new(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        std::fs::create_dir_all(dir.0.join("scripts")).unwrap();
        std::fs::copy(repo.join("scripts/fuzz.sh"), dir.0.join("scripts/fuzz.sh")).unwrap();
        let bin = dir.0.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for name in FAKES {
            std::fs::create_dir_all(dir.0.join("fuzz/corpus").join(name)).unwrap();
            let path = bin.join(name);
            std::fs::write(&path, FAKE_FUZZER).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Layout { dir }
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.0.join("fake.pid")
    }

    fn command(&self, targets: &[&str]) -> Command {
        let mut c = Command::new("bash");
        c.arg(self.dir.0.join("scripts/fuzz.sh"))
            .arg("5")
            .args(targets)
            .env("IBTCA_FUZZ_BIN_DIR", self.dir.0.join("bin"))
            .env("FAKE_PID", self.pid_file())
            .env_remove("IBTCA_FUZZ_ARGS");
        // A suite started in the background of a non-interactive shell
        // (`nohup scripts/test.sh &`) inherits SIGINT ignored, and a shell
        // cannot trap a signal ignored on entry: the `stopped` stand-in
        // would never see the test's SIGINT. Ctrl-C reaches a fuzzer with
        // the default disposition, so the script runs with that one.
        use std::os::unix::process::CommandExt;
        // SAFETY: signal(2) is async-signal-safe, and the closure touches
        // no memory of the parent between fork and exec.
        unsafe {
            c.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        c
    }

    fn run(&self, targets: &[&str]) -> Output {
        self.command(targets).output().expect("run bash")
    }

    fn spawn(&self, targets: &[&str]) -> Child {
        self.command(targets)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run bash")
    }

    /// The pid the `stopped` stand-in writes once its signal trap is set.
    fn wait_for_stopped_fuzzer(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(pid) = std::fs::read_to_string(self.pid_file()) {
                return pid.trim().to_string();
            }
            assert!(Instant::now() < deadline, "the stand-in never started");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits for the script after a signal; a script still running 300 s
/// later (and its stand-in) is killed and the test fails rather than hangs.
fn finish(child: Child, fuzzer: &str) -> Output {
    let (done, ended) = std::sync::mpsc::channel::<()>();
    let pids = [child.id().to_string(), fuzzer.to_string()];
    let watchdog = std::thread::spawn(move || {
        let hung = ended.recv_timeout(Duration::from_secs(300)).is_err();
        if hung {
            for pid in &pids {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
        hung
    });
    let out = child.wait_with_output().expect("wait for the script");
    let _ = done.send(());
    let hung = watchdog.join().expect("watchdog");
    assert!(
        !hung,
        "the script was still running 300 s after the signal:\n{}",
        text(&out)
    );
    out
}

fn kill(signal: &str, pid: &str) {
    let st = Command::new("kill")
        .args([signal, pid])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill {signal} {pid}");
}

/// The script's line for `target`.
fn verdict(out: &Output, target: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let head = format!("fuzz: {target}: ");
    stdout
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no line for {target}:\n{}", text(out)))
        .to_string()
}

#[test]
fn crashes_timeouts_and_oom_fail_with_their_names() {
    let l = Layout::new("fuzz-script-fail");
    for (target, said) in [
        ("crash", ", crash (log"),
        ("timeout", ", timeout (log"),
        ("oom", ", out of memory (log"),
        ("bad_flag", ", failed (exit 1) (log"),
    ] {
        let out = l.run(&["clean", target]);
        assert_eq!(out.status.code(), Some(1), "{target}: {}", text(&out));
        let line = verdict(&out, target);
        assert!(line.contains(said), "{target}: {line}");
        assert!(
            verdict(&out, "clean").contains("1234 executions in"),
            "{}",
            text(&out)
        );
        assert!(verdict(&out, "clean").contains(", no crash (log"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("violations in: {target} ")),
            "{stderr}"
        );
    }
    assert!(l.dir.0.join("fuzz/artifacts/crash/crash-0a1b2c").exists());
}

#[test]
fn a_run_stopped_by_hand_is_stopped_not_a_failure() {
    let l = Layout::new("fuzz-script-stopped");
    let child = l.spawn(&["stopped", "clean"]);
    let fuzzer = l.wait_for_stopped_fuzzer();
    kill("-INT", &fuzzer);
    let out = finish(child, &fuzzer);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let line = verdict(&out, "stopped");
    assert!(line.contains(", stopped (log"), "{line}");
    assert!(line.contains("1234 executions in"), "{line}");
    assert!(verdict(&out, "clean").contains(", no crash (log"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stopped by hand (no input written): stopped"),
        "{stderr}"
    );
    assert!(!stderr.contains("violations"), "{stderr}");
}

#[test]
fn a_stopped_script_runs_no_further_target() {
    let l = Layout::new("fuzz-script-term");
    let child = l.spawn(&["stopped", "clean"]);
    let fuzzer = l.wait_for_stopped_fuzzer();
    // As a process-group kill does: the script and its fuzzer both get it.
    kill("-TERM", &child.id().to_string());
    kill("-TERM", &fuzzer);
    let out = finish(child, &fuzzer);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(verdict(&out, "stopped").contains(", stopped (log"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("== fuzz clean"), "{}", text(&out));
}

/// `--changed-longer`: a target runs the longer time when code among its
/// sources (fuzz/long-runs.tsv) changed since its last long run, or when it
/// has none; a change of `//` comments and blank lines only is no change.
#[test]
fn changed_longer_counts_code_changes_not_comments() {
    let l = Layout::new("fuzz-script-changed");
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
            .arg(&l.dir.0)
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let source = l.dir.0.join("src.rs");
    std::fs::write(&source, "// parses a frame\nfn parse() {}\n").unwrap();
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "long run"]);
    let long_run = git(&["rev-parse", "HEAD"]);
    std::fs::write(
        l.dir.0.join("fuzz/long-runs.tsv"),
        format!("# target\tcommit\tsources\nclean\t{long_run}\tsrc.rs\n"),
    )
    .unwrap();
    let said_longer = |edit: &str| {
        std::fs::write(&source, edit).unwrap();
        git(&["commit", "-q", "-a", "-m", "edit", "--allow-empty"]);
        let out = Command::new("bash")
            .arg(l.dir.0.join("scripts/fuzz.sh"))
            .args(["--changed-longer", "9", "5", "clean", "crash"])
            .env("IBTCA_FUZZ_BIN_DIR", l.dir.0.join("bin"))
            .env_remove("IBTCA_FUZZ_ARGS")
            .output()
            .expect("run bash");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        // `crash` has no long run: it always gets the longer time.
        assert!(
            stderr.contains("fuzz: crash changed since its last long run (none): 9s"),
            "{}",
            text(&out)
        );
        stderr.contains(&format!(
            "fuzz: clean changed since its last long run ({long_run}): 9s"
        ))
    };
    assert!(!said_longer("// parses one frame\n\nfn parse() {}\n"));
    assert!(said_longer(
        "// parses one frame\n\nfn parse() { todo!() }\n"
    ));
}
