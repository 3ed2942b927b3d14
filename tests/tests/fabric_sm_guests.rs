//! `up --guests` with an SM in the file (no VM: a VM stack of stand-ins):
//! only the SM's node boots a guest, and the nodes `--run` gives
//! commands; `--all-guests` boots every node's.

use ibtca_fabric::state::State;
use ibtca_tests::launcher::{config, text, Down, StandInStack};
use ibtca_tests::TempDir;

/// The guests `up` recorded, by node, sorted.
fn guests(run: &std::path::Path) -> Vec<String> {
    let state = State::load(run).unwrap().expect("a state file");
    let mut names: Vec<String> = state
        .processes
        .iter()
        .filter(|p| p.guest)
        .map(|p| p.name.clone())
        .collect();
    names.sort();
    names
}

#[test]
fn with_an_sm_up_guests_boots_the_sm_node_and_the_run_nodes_only() {
    let dir = TempDir::new("fab-sm-guests");
    let stack = StandInStack::new(&dir);
    let run = stack.chroot.join("tmp/run");
    let run_s = run.display().to_string();
    let run_vm = stack.run_vm.display().to_string();
    let file = config("sm-four-nodes-two-switches.json");
    let up = |extra: &[&str]| {
        let mut args = vec![
            "up",
            &file,
            "--run-dir",
            &run_s,
            "--guests",
            "--run-vm",
            &run_vm,
        ];
        args.extend_from_slice(extra);
        let out = stack.fabric(&args);
        assert!(out.status.success(), "up {extra:?} failed: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    {
        let _down = Down(run.clone());
        let out = up(&[]);
        assert_eq!(guests(&run), ["n1 (guest)"]);
        for n in ["n2", "n3", "n4"] {
            assert!(out.contains(&format!("guest {n}: not booted")), "{out}");
        }
    }
    {
        let _down = Down(run.clone());
        up(&["--run", "n3=ibstat"]);
        assert_eq!(guests(&run), ["n1 (guest)", "n3 (guest)"]);
    }
    let _down = Down(run.clone());
    let out = up(&["--all-guests"]);
    assert_eq!(
        guests(&run),
        ["n1 (guest)", "n2 (guest)", "n3 (guest)", "n4 (guest)"]
    );
    assert!(!out.contains("not booted"), "{out}");
}
