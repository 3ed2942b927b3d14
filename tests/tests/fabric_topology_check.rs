//! `ibtca-fabric`'s topology check as a user meets it: every problem in
//! one report, warnings that do not fail, `up` logging each port as it
//! comes up, and run-time commands that act on `up`'s copy of the file
//! (from any directory, whatever became of the original).

use std::path::Path;
use std::process::{Command, Output};

use ibtca_tests::launcher::{text, Down};
use ibtca_tests::{workspace_bin, TempDir};

fn fabric_in(cwd: &Path, args: &[&str]) -> Output {
    Command::new(workspace_bin("ibtca-fabric"))
        .current_dir(cwd)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn check_reports_every_problem_at_once() {
    let dir = TempDir::new("topo-all");
    std::fs::write(
        dir.join("bad.json"),
        r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 1}],
             "switches": [{"name": "sw", "ports": 2}],
             "links": [{"a": "a", "b": "sw:9"}, {"a": "sw:1", "b": "sw:1"}] }"#,
    )
    .unwrap();
    let o = fabric_in(&dir.0, &["check", "bad.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(
        stderr(&o),
        "ibtca-fabric: error: bad.json: 3 problems:\n  \
         LID 1 is given to both `a` and `b`\n  \
         link 0: switch `sw` has ports 1..=2, not 9\n  \
         link 1 connects sw port 1 to itself\n"
    );
    std::fs::write(dir.join("empty.json"), "{}").unwrap();
    let o = fabric_in(&dir.0, &["check", "empty.json"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "ibtca-fabric: error: empty.json: the topology has no nodes: \
         a fabric needs at least one (\"nodes\": [...])\n"
    );
}

#[test]
fn check_warns_of_islands_unlinked_nodes_and_self_cabled_switches() {
    let dir = TempDir::new("topo-warn");
    std::fs::write(
        dir.join("t.json"),
        r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2},
                       {"name": "c", "lid": 3}],
             "switches": [{"name": "sw", "ports": 3}],
             "links": [{"a": "a", "b": "b"}, {"a": "sw:1", "b": "sw:2"}] }"#,
    )
    .unwrap();
    let o = fabric_in(&dir.0, &["check", "t.json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "warnings do not fail: {}",
        text(&o)
    );
    assert_eq!(
        stderr(&o),
        "ibtca-fabric: warning: t.json: node `c` has no link: it reaches no one\n\
         ibtca-fabric: warning: t.json: switch `sw` is cabled to itself (port 1 to port 2)\n\
         ibtca-fabric: warning: t.json: the fabric is in 2 islands no link joins: {a, b} {sw}\n"
    );
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("t.json: OK"));
}

#[test]
fn run_time_commands_use_ups_copy_of_the_topology() {
    let dir = TempDir::new("topo-copy");
    let json = r#"{ "nodes": [{"name": "a", "lid": 1}, {"name": "b", "lid": 2}],
                    "switches": [{"name": "sw", "ports": 2}],
                    "links": [{"a": "a", "b": "sw:1"}, {"a": "b", "b": "sw:2"}] }"#;
    std::fs::write(dir.join("t.json"), json).unwrap();
    // A relative file and run directory, from `dir`.
    let run = dir.join("run");
    let _down = Down(run.clone());
    let up = fabric_in(&dir.0, &["up", "t.json", "--run-dir", "run"]);
    assert!(up.status.success(), "{}", text(&up));
    // `up` logged each port as it came up, with what it saw.
    let log = stderr(&up);
    for want in [
        "sw:1: link up, peer LID 1",
        "sw:2: link up, peer LID 2",
        "a: link up, LID 1",
        "b: link up, LID 2",
    ] {
        assert_eq!(
            log.lines().filter(|l| l.ends_with(want)).count(),
            1,
            "`{want}` once in:\n{log}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(run.join("fabric-topology.json")).unwrap(),
        json
    );
    // The original goes: the run-time commands, from elsewhere, still
    // find the fabric.
    std::fs::write(dir.join("t.json"), "not even JSON").unwrap();
    let elsewhere = TempDir::new("topo-copy-cwd");
    let run_s = run.display().to_string();
    let o = fabric_in(&elsewhere.0, &["link", "--run-dir", &run_s, "a", "down"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "sw: ok port 1 down\n");
    let o = fabric_in(&elsewhere.0, &["stats", "--run-dir", &run_s]);
    assert!(o.status.success(), "{}", text(&o));
    let stats = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(stats.contains("switch sw"), "{stats}");
    let o = fabric_in(&elsewhere.0, &["down", "--run-dir", &run_s]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn check_refuses_a_partition_file_given_twice() {
    let dir = TempDir::new("topo-partitions");
    let file = |options: &str| {
        format!(
            r#"{{ "sm": "a", "sm_options": [{options}],
                 "sm_partitions": ["Default=0x7fff, ipoib : ALL=full ;"],
                 "nodes": [{{"name": "a", "lid": 1}}] }}"#
        )
    };
    std::fs::write(dir.join("ok.json"), file(r#""--sweep", "10""#)).unwrap();
    let o = fabric_in(&dir.0, &["check", "ok.json"]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::write(dir.join("twice.json"), file(r#""-P", "/x.conf""#)).unwrap();
    let o = fabric_in(&dir.0, &["check", "twice.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("`sm_options` gives `-P` and `sm_partitions` a partition file"),
        "{}",
        stderr(&o)
    );
}
