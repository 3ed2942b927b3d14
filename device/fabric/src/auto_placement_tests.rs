//! The launcher's own placement: the choice for given CPU counts, the
//! default topology made like the tuned one, and the file's settings kept.

use std::path::Path;

use ibtca_sched::CpuList;

use super::auto_placement::{apply, choose, Choice};
use super::launch::device_args;
use super::plan::{parse, plan, Plan};
use super::qemu::{guest_script, node_guest};

fn planned(json: &str) -> Plan {
    plan(&parse(json).unwrap(), Path::new("/tmp/r")).unwrap()
}

fn config(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../qemu-configs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn cpus(text: &str) -> CpuList {
    text.parse().unwrap()
}

/// Each node's device arguments and guest script.
fn commands(json: &str, machine: &[usize]) -> Vec<(Vec<String>, String)> {
    let topo = parse(json).unwrap();
    let mut p = plan(&topo, Path::new("/tmp/r")).unwrap();
    apply(&mut p, machine);
    p.nodes
        .iter()
        .map(|n| (device_args(n), guest_script(n, &node_guest(&topo, &n.name))))
        .collect()
}

#[test]
fn fewer_cpus_than_guests_and_devices_share_them_and_enough_dedicate_them() {
    for (machine, nodes) in [(&[0][..], 1), (&[0, 1], 2), (&[0, 1, 2], 2), (&[0; 0], 1)] {
        assert_eq!(
            choose(machine, nodes),
            Choice::Shared,
            "{machine:?} {nodes}"
        );
    }
    assert_eq!(
        choose(&[0, 1], 1),
        Choice::Dedicated {
            guests: vec![cpus("0")],
            devices: cpus("1")
        }
    );
    assert_eq!(
        choose(&[0, 1, 2, 3], 2),
        Choice::Dedicated {
            guests: vec![cpus("0"), cpus("1")],
            devices: cpus("2-3")
        }
    );
    // Only the CPUs the launcher may use, whatever their numbers.
    assert_eq!(
        choose(&[2, 4, 6, 8, 10], 2),
        Choice::Dedicated {
            guests: vec![cpus("2"), cpus("4")],
            devices: cpus("6,8,10")
        }
    );
}

#[test]
fn on_two_cpus_the_default_topology_runs_like_the_niced_one() {
    let default = commands(&config("two-nodes.json"), &[0, 1]);
    let nice = commands(&config("two-nodes-nice.json"), &[0, 1]);
    assert_eq!(default, nice);
    for (args, script) in &default {
        assert!(args.contains(&"--spin-us=0".to_owned()), "{args:?}");
        assert!(script.contains("exec nice -n 19 qemu-system"), "{script}");
    }
}

#[test]
fn with_a_cpu_for_each_guest_and_device_both_are_pinned_and_devices_spin() {
    let got = commands(&config("two-nodes.json"), &[0, 1, 2, 3]);
    for (i, (args, script)) in got.iter().enumerate() {
        assert!(args.contains(&"--cpus=2,3".to_owned()), "{args:?}");
        assert!(!args.iter().any(|a| a.starts_with("--spin-us")), "{args:?}");
        assert!(
            script.contains(&format!("exec taskset -c {i} qemu-system")),
            "{script}"
        );
    }
}

#[test]
fn settings_the_file_gives_are_kept() {
    let json = r#"{ "nodes": [{"name": "a", "lid": 1, "guest": {"nice": 0}},
                             {"name": "b", "lid": 2}] }"#;
    let mut p = planned(json);
    let applied = apply(&mut p, &[0, 1]);
    assert_eq!(
        (p.nodes[0].guest_nice, p.nodes[1].guest_nice),
        (Some(0), Some(19))
    );
    assert!(!device_args(&p.nodes[0]).contains(&"--spin-us=0".to_owned()));
    assert!(device_args(&p.nodes[1]).contains(&"--spin-us=0".to_owned()));
    assert_eq!(applied.kept, ["a: guest.nice"]);

    let json = r#"{ "nodes": [{"name": "a", "lid": 1, "cpus": "0", "guest": {"cpus": "1"}},
                             {"name": "b", "lid": 2}] }"#;
    let mut p = planned(json);
    let applied = apply(&mut p, &[0, 1, 2, 3]);
    assert_eq!(
        (p.nodes[0].cpus.clone(), p.nodes[0].guest_cpus.clone()),
        (Some(cpus("0")), Some(cpus("1")))
    );
    assert_eq!(
        (p.nodes[1].cpus.clone(), p.nodes[1].guest_cpus.clone()),
        (Some(cpus("2-3")), Some(cpus("1")))
    );
    assert_eq!(applied.kept, ["a: guest.cpus", "a: cpus"]);
}

#[test]
fn the_log_line_says_what_was_chosen() {
    let mut p = planned(&config("two-nodes-nice.json"));
    let line = apply(&mut p, &[0, 1]).to_string();
    assert_eq!(
        line,
        "placement: 2 CPUs for 2 guests and 2 devices: guests the file gives no nice at \
         nice 19, their devices not spinning, nothing pinned; kept from the file: a: guest.nice, b: guest.nice \
         (docs/placement.md)"
    );
    let mut p = planned(&config("two-nodes.json"));
    let line = apply(&mut p, &[0, 1, 2, 3, 4]).to_string();
    assert_eq!(
        line,
        "placement: 5 CPUs for 2 guests and 2 devices: guests on CPUs 0 1 (one each), \
         devices on 2,3,4 and spin (docs/placement.md)"
    );
}
