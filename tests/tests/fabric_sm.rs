//! The topology's `"sm"` option without VMs: `check` shows OpenSM's node,
//! command line and guid2lid records; `up` starts every device and switch
//! `--sm-managed` (no routes but the SM's), so the devices' ports stay
//! Init and the switches carry no data until an SM brings them up.

use ibtca_fabric::state::State;
use ibtca_tests::launcher::{config, fabric, text, up};
use ibtca_tests::TempDir;

const FILE: &str = "sm-four-nodes-two-switches.json";

#[test]
fn check_shows_the_sm_its_command_and_guid2lid() {
    let out = fabric(&["check", &config(FILE)]);
    assert!(out.status.success(), "{}", text(&out));
    let t = String::from_utf8_lossy(&out.stdout);
    assert!(
        t.contains("sm: OpenSM in n1's guest (up --guests), every device and switch --sm-managed"),
        "{t}"
    );
    assert!(
        t.contains("opensm --honor_guid2lid --log_file /ibtca/opensm.log --debug 2 '--sweep' '10'"),
        "{t}"
    );
    // The launcher's default GUIDs, each with its file LID.
    for lid in 1..=4u64 {
        let guid = ibtca_device::guid::FABRIC_NODE_BASE + lid;
        assert!(
            t.contains(&format!("guid2lid {guid:#018x} {lid:#06x} {lid:#06x}")),
            "LID {lid}: {t}"
        );
    }
    assert_eq!(t.matches("LFT set by the SM").count(), 2, "{t}");
}

#[test]
fn up_starts_every_device_and_switch_managed() {
    let dir = TempDir::new("fab-sm");
    let fab = up(&config(FILE), &dir);
    let run = &fab.run;
    let run_s = run.display().to_string();
    let state = State::load(run).unwrap().expect("a state file");
    assert_eq!(state.processes.len(), 6, "two switches, four devices");
    for p in &state.processes {
        let cmdline = std::fs::read(format!("/proc/{}/cmdline", p.pid)).unwrap();
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        assert!(
            args.contains(&&b"--sm-managed"[..]),
            "{}: {}",
            p.name,
            String::from_utf8_lossy(&cmdline)
        );
        assert!(
            !args.iter().any(|a| a.starts_with(b"--route")),
            "{}",
            p.name
        );
    }
    // No SM yet: every device's port is Init, every switch port Init.
    for n in 1..=4 {
        let log = std::fs::read_to_string(run.join(format!("n{n}.log"))).unwrap();
        assert!(log.contains("link up"), "n{n}: {log}");
        assert!(!log.contains("port LID set"), "n{n}: {log}");
    }
    // The agents say so: every port Init, and the devices without the
    // file's LIDs until the SM gives them.
    let out = fabric(&["stats", "--run-dir", &run_s, "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ports = stats["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 10, "6 switch ports, 4 devices: {stats}");
    for p in ports {
        assert_eq!(p["state"], "Init", "{p}");
        if p["kind"] == "device" {
            assert_eq!(p["lid"], 0, "{p}");
        }
    }
}
