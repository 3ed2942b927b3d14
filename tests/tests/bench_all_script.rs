//! `scripts/bench-all.sh` without running a benchmark: its options (a bad
//! one exits 2 before anything runs), that its entries and BENCHMARKS.md's
//! sections name each other (every section holding a table is measured by
//! an entry, every entry's section is in the file, and each entry's
//! program and options are those its section shows), that `--dry-run` prints
//! commands that parse and scripts that exist and runs nothing, and, with a
//! stand-in for `bash -c` (`IBTCA_BENCH_ALL_RUNNER`), that a run goes
//! through every selected entry in order after a failure, keeps each
//! one's output, lists the failures and exits 1, and holds the VM lock
//! exactly for the entries that boot guests through a script (the
//! harness's own VM lock would wait for ever under it) without handing it
//! to what they start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use ibtca_tests::launcher::text;
use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

/// The script's environment in a test: a VM lock and a cache of its own
/// (never the machine's), and `runner` in place of `bash -c`.
fn run(dir: &Path, args: &[&str], runner: &str) -> Output {
    let lock = dir.join("vm.lock").display().to_string();
    let cache = dir.join("cache").display().to_string();
    script_cli::run(
        "bench-all.sh",
        args,
        &[
            ("IBTCA_VM_LOCK", &lock),
            ("IBTCA_CACHE", &cache),
            ("IBTCA_BENCH_ALL_RUNNER", runner),
        ],
    )
}

#[test]
fn help_and_bad_options() {
    let dir = TempDir::new("bench-all-options");
    let lock = dir.0.join("vm.lock").display().to_string();
    // The stand-in would fail the test (exit 1, not 2) if a bad option
    // ever reached a run.
    script_cli::help_and_bad_options(
        "bench-all.sh",
        &["--only NAME", "--out DIR", "--list", "--dry-run"],
        &[
            &["--bogus"],
            &["--only"],
            &["--only", ""],
            &["--only", "nosuch"],
            &["--only", "verbs,,crc"],
            &["--only", "verbs,nosuch", "--dry-run"],
            &["--out"],
            &["stray"],
        ],
        &[
            ("IBTCA_BENCH_ALL_RUNNER", "false"),
            ("IBTCA_VM_LOCK", &lock),
        ],
    );
    let out = run(&dir.0, &["--only", "nosuch"], "false");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bench-all.sh: error: no entry 'nosuch'"),
        "{}",
        text(&out)
    );
}

/// One `--list` row: name, minutes, needs, section.
struct Row {
    name: String,
    minutes: u32,
    needs: String,
    section: String,
}

fn list(dir: &Path, args: &[&str]) -> (Vec<Row>, u32) {
    let out = run(dir, &[&["--list"], args].concat(), "false");
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut rows = Vec::new();
    let mut total = None;
    for line in said.lines().skip(1) {
        let mut f = line.split_whitespace();
        let name = f.next().unwrap().to_string();
        let minutes: u32 = f.next().unwrap().parse().unwrap();
        if name == "total" {
            total = Some(minutes);
            continue;
        }
        let needs = f.next().unwrap().to_string();
        let section = f.collect::<Vec<_>>().join(" ");
        rows.push(Row {
            name,
            minutes,
            needs,
            section,
        });
    }
    (rows, total.unwrap_or_else(|| panic!("no total:\n{said}")))
}

/// BENCHMARKS.md's headings, each with whether its own text (up to the
/// next heading) holds a table.
fn sections() -> Vec<(String, bool)> {
    let md = benchmarks_md();
    let mut out: Vec<(String, bool)> = Vec::new();
    let mut fence = false;
    for line in md.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        if let Some(h) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            out.push((h.to_string(), false));
        } else if line.starts_with("| ") || line.starts_with("|-") {
            if let Some(last) = out.last_mut() {
                last.1 = true;
            }
        }
    }
    out
}

/// BENCHMARKS.md's text.
fn benchmarks_md() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../BENCHMARKS.md")).unwrap()
}

/// Each heading's own text, up to the next heading, code blocks included.
fn section_texts() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut fence = false;
    for line in benchmarks_md().lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        let heading = (!fence)
            .then(|| {
                line.strip_prefix("## ")
                    .or_else(|| line.strip_prefix("### "))
            })
            .flatten();
        if let Some(h) = heading {
            current = Some(h.to_string());
            out.insert(h.to_string(), String::new());
        } else if let Some(h) = &current {
            let text = out.get_mut(h).unwrap();
            text.push_str(line);
            text.push('\n');
        }
    }
    out
}

/// `--dry-run`'s entries: name, sections and command.
fn dry_run_commands(dir: &Path) -> Vec<(String, String, String)> {
    let out = run(dir, &["--dry-run"], "false");
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut entries = Vec::new();
    let mut lines = said.lines();
    while let Some(line) = lines.next() {
        let Some((name, rest)) = line.strip_prefix("# ").and_then(|l| l.split_once(": ")) else {
            continue;
        };
        let Some((section, _)) = rest.rsplit_once(" (~") else {
            continue;
        };
        let command = lines.next().unwrap_or_default().to_string();
        entries.push((name.to_string(), section.to_string(), command));
    }
    entries
}

/// What names the program of one command of an entry: `ibtca-bench SUB`,
/// another release binary, `scripts/NAME.sh`, or its first two words
/// (`cargo test`); and its long options and the environment it sets
/// (`PIN=1`).
fn program_and_options(command: &str) -> (String, Vec<String>) {
    let is_env = |w: &&&str| {
        w.split_once('=').is_some_and(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        })
    };
    let all: Vec<&str> = command.split_whitespace().collect();
    let env: Vec<String> = all
        .iter()
        .take_while(is_env)
        .map(|w| w.to_string())
        .collect();
    let words: Vec<&str> = all[env.len()..]
        .iter()
        .copied()
        .skip_while(|w| *w == "bash")
        .collect();
    let program = match words[0].strip_prefix("\"$BIN/") {
        Some("ibtca-bench\"") => format!("ibtca-bench {}", words[1]),
        Some(bin) => bin.trim_end_matches('"').to_string(),
        None if words[0].starts_with("scripts/") => words[0].to_string(),
        None => words[..2].join(" "),
    };
    let options = words
        .iter()
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| w.to_string())
        .chain(env)
        .collect();
    (program, options)
}

#[test]
fn each_entry_runs_the_program_and_options_its_section_shows() {
    let dir = TempDir::new("bench-all-programs");
    let texts = section_texts();
    let entries = dry_run_commands(&dir.0);
    let (rows, total) = list(&dir.0, &[]);
    assert_eq!(entries.len(), rows.len());
    for (name, sections, command) in &entries {
        let shown: String = sections
            .split("; ")
            .map(|s| texts.get(s).map_or("", String::as_str))
            .collect();
        for part in command.split(" && ") {
            let (program, options) = program_and_options(part);
            assert!(
                shown.contains(&program),
                "{name} runs {program}, which its section ({sections}) does not show"
            );
            for o in options {
                assert!(
                    shown.contains(&o),
                    "{name} passes {o} ({command}), which its section ({sections}) does not show"
                );
            }
        }
    }
    // "How to run" gives the whole run's minutes, within a tenth.
    let md = benchmarks_md();
    let said: u32 = md
        .split_once("minutes (about ")
        .and_then(|(_, rest)| rest.split_once(" in all)"))
        .and_then(|(n, _)| n.parse().ok())
        .expect("BENCHMARKS.md gives the run's minutes (\"minutes (about N in all)\")");
    assert!(
        said * 10 >= total * 9 && said * 10 <= total * 11,
        "BENCHMARKS.md says about {said} minutes, --list {total}"
    );
}

#[test]
fn the_entries_and_the_sections_of_benchmarks_md_name_each_other() {
    let dir = TempDir::new("bench-all-list");
    let (rows, total) = list(&dir.0, &[]);
    assert!(rows.len() > 20, "{} entries", rows.len());
    assert_eq!(total, rows.iter().map(|r| r.minutes).sum::<u32>());
    let names: BTreeSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names.len(), rows.len(), "a name twice");
    let sections = sections();
    let headings: BTreeSet<&str> = sections.iter().map(|s| s.0.as_str()).collect();
    let mut measured = BTreeSet::new();
    for r in &rows {
        for section in r.section.split("; ") {
            assert!(
                headings.contains(section),
                "{}'s section {section:?} is not a heading of BENCHMARKS.md",
                r.name
            );
            measured.insert(section);
        }
        assert!(r.minutes > 0, "{}", r.name);
    }
    for (heading, table) in &sections {
        if !table || heading == "How to run" {
            continue;
        }
        assert!(
            measured.contains(heading.as_str()),
            "BENCHMARKS.md's {heading:?} has a table that no entry measures"
        );
    }
    // Whoever boots guests holds the VM lock, one way or the other.
    for r in &rows {
        let needs: Vec<&str> = r.needs.split(',').collect();
        assert_eq!(
            needs.contains(&"vm"),
            needs.contains(&"lock") || needs.contains(&"self-lock"),
            "{}: {}",
            r.name,
            r.needs
        );
    }

    let (some, total) = list(&dir.0, &["--only", "crc,verbs"]);
    let some: Vec<&str> = some.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(some, ["verbs", "crc"], "the script's order");
    assert_eq!(total, 2);
}

#[test]
fn dry_run_prints_commands_that_parse_and_runs_nothing() {
    let dir = TempDir::new("bench-all-dry-run");
    let calls = dir.0.join("calls");
    let stand_in = dir.0.join("stand-in.sh");
    std::fs::write(&stand_in, STAND_IN).unwrap();
    let runner = format!("bash {} {}", stand_in.display(), dir.0.display());
    let out_dir = dir.0.join("out");
    let out = run(
        &dir.0,
        &["--dry-run", "--out", &out_dir.display().to_string()],
        &runner,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(!calls.exists(), "--dry-run ran an entry");
    assert!(!out_dir.exists(), "--dry-run made its output directory");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let (rows, _) = list(&dir.0, &[]);
    let commands: Vec<String> = said
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("export "))
        .map(str::to_owned)
        .collect();
    assert_eq!(commands.len(), rows.len(), "{said}");
    for r in &rows {
        assert!(
            said.contains(&format!("# {}: {} (", r.name, r.section)),
            "{}:\n{said}",
            r.name
        );
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for c in &commands {
        let parsed = Command::new("bash").args(["-n", "-c", c]).output().unwrap();
        assert!(parsed.status.success(), "{c}: {}", text(&parsed));
        for word in c.split_whitespace() {
            if word.starts_with("scripts/") || word.starts_with("qemu-configs/") {
                assert!(root.join(word).exists(), "{c}: no {word}");
            }
        }
    }
}

/// The stand-in for `bash -c`: called with its directory, the entry's
/// command and name; records the name, whether the VM lock is free and
/// how many of its descriptors are open on the lock file, prints a line,
/// and fails the entries named in `fail-NAME` files with their content as
/// the exit status.
const STAND_IN: &str = r#"d=$1 cmd=$2 name=$3
if flock -n "$IBTCA_VM_LOCK" true; then lock=free; else lock=held; fi
fds=0
for f in /proc/$$/fd/*; do
	[ "$(readlink "$f")" = "$IBTCA_VM_LOCK" ] && fds=$((fds + 1))
done
echo "$name $lock $fds" >>"$d/calls"
echo "ran $name: $cmd"
[ ! -e "$d/fail-$name" ] || exit "$(cat "$d/fail-$name")"
"#;

#[test]
fn a_run_goes_on_after_a_failure_and_holds_the_vm_lock_for_scripts_that_boot_guests() {
    let dir = TempDir::new("bench-all-run");
    let stand_in = dir.0.join("stand-in.sh");
    std::fs::write(&stand_in, STAND_IN).unwrap();
    std::fs::write(dir.0.join("fail-perftest"), "3").unwrap();
    std::fs::write(dir.0.join("fail-crc"), "1").unwrap();
    let runner = format!("bash {} {}", stand_in.display(), dir.0.display());
    let out_dir = dir.0.join("out");
    // A script that boots guests (perftest, drdma-verbs), the harness
    // booting them (guest-verbs), and no guests (verbs, crc, cross-host).
    let only = "crc,perftest,verbs,guest-verbs,drdma-verbs,cross-host";
    let out = run(
        &dir.0,
        &["--only", only, "--out", &out_dir.display().to_string()],
        &runner,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    let calls = std::fs::read_to_string(dir.0.join("calls")).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "verbs free 0",
            "guest-verbs free 0",
            "perftest held 0",
            "cross-host free 0",
            "drdma-verbs held 0",
            "crc free 0",
        ],
        "{}",
        text(&out)
    );
    for name in ["verbs", "perftest", "crc"] {
        let log = std::fs::read_to_string(out_dir.join(format!("{name}.log"))).unwrap();
        assert!(log.starts_with(&format!("ran {name}: ")), "{log}");
    }
    let perftest = std::fs::read_to_string(out_dir.join("perftest.log")).unwrap();
    assert_eq!(
        perftest.trim(),
        "ran perftest: bash scripts/perftest-table.sh"
    );
    for f in ["machine.txt", "commands.sh", "summary.md"] {
        assert!(out_dir.join(f).exists(), "no {f}");
    }
    let commands = std::fs::read_to_string(out_dir.join("commands.sh")).unwrap();
    assert!(
        commands.contains("\nbash scripts/perftest-table.sh\n"),
        "{commands}"
    );

    let summary = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |name: &str| {
        summary
            .lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row {name}:\n{summary}"))
            .to_string()
    };
    assert!(
        row("verbs").contains("| Verbs (no VM) | passed |"),
        "{summary}"
    );
    assert!(row("perftest").contains("| FAILED (exit 3) |"), "{summary}");
    assert!(row("crc").contains("| FAILED (exit 1) |"), "{summary}");
    assert!(row("drdma-verbs").contains("| passed |"), "{summary}");
    assert!(
        summary.contains("2 of 6 entries failed: perftest, crc"),
        "{summary}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("[3/6] perftest: perftest between two guests"),
        "{stderr}"
    );

    // Everything passing: exit 0.
    let out = run(
        &dir.0,
        &["--only", "verbs", "--out", &out_dir.display().to_string()],
        &runner,
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("All 1 entries passed."),
        "{}",
        text(&out)
    );
}
