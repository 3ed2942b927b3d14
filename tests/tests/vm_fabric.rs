//! Full stack, a fabric: `ibtca-fabric up` brings up
//! `qemu-configs/four-nodes-one-switch.json` (one `ibtca-switch`, four
//! `ibtca-device`s, a capture on the switch port of n1); four QEMU guests
//! run the verbs scenario in two pairs across the switch at once — n1
//! serves n2, n3 serves n4 — and every check passes on all four. tshark
//! then decodes the capture of n1's port: the RDMA WRITEs n2 sent to n1
//! (DLID 1, SLID 2, n1's QP, an R_Key) and n1's ACKs back to n2, and no
//! packet of the n3/n4 pair (the switch forwards by LID, nothing leaks).
//! `ibtca-fabric down` stops everything.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh), tshark
//! (scripts/host-tools.sh) and root for the chroot: `scripts/test.sh` runs
//! it; plain `cargo test` lists it as ignored.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use ibtca_tests::capture::{num, tshark};
use ibtca_tests::vm::{
    check_scenario, VmConfig, VmStack, VERBS_CLIENT_CHECKS, VERBS_SERVER_CHECKS,
};
use ibtca_tests::workspace_bin;

fn fabric(args: &[&str]) -> Output {
    Command::new(workspace_bin("ibtca-fabric"))
        .args(args)
        .output()
        .expect("run ibtca-fabric")
}

/// Runs `down` for a run directory when dropped, whatever happened.
struct Down(String);

impl Drop for Down {
    fn drop(&mut self) {
        let _ = fabric(&["down", "--run-dir", &self.0]);
    }
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn four_guests_do_rdma_across_a_switch() {
    let stack = VmStack::get();
    let dir = stack.scratch("fabric");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let topo =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-configs/four-nodes-one-switch.json");
    let down = Down(run_s.clone());
    let out = fabric(&["up", &topo.display().to_string(), "--run-dir", &run_s]);
    assert!(
        out.status.success(),
        "up failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // (node, role, peer LID)
    let plan = [
        ("n1", "server", 2),
        ("n2", "client", 1),
        ("n3", "server", 4),
        ("n4", "client", 3),
    ];
    let vms: Vec<VmConfig> = plan
        .iter()
        .map(|(node, role, peer)| {
            let mut vm = VmConfig::new(&run.join(format!("{node}.sock")), "verbs");
            vm.append = format!("ibtca.mode=verbs ibtca.role={role} ibtca.peer_lid={peer}");
            vm.timeout = Duration::from_secs(600);
            vm
        })
        .collect();
    let runs: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = vms.iter().map(|vm| s.spawn(|| stack.boot(vm))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let logs = std::fs::read_dir(&run)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .map(|e| {
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    format!("{}:\n{text}", e.path().display())
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    for ((node, role, _), r) in plan.iter().zip(&runs) {
        let checks = if *role == "server" {
            VERBS_SERVER_CHECKS
        } else {
            VERBS_CLIENT_CHECKS
        };
        check_scenario("IBTCA-VERBS", &format!("{node} ({role})"), r, checks, &logs);
    }
    drop(down);

    // n1's port, decoded by tshark.
    let rows = tshark(&run.join("sw0-p1.pcap"));
    let field = |r: &Vec<String>, i: usize| r.get(i).and_then(|s| num(s));
    let writes: Vec<_> = rows
        .iter()
        .filter(|r| matches!(field(r, 0), Some(0x06 | 0x0a)))
        .collect();
    assert!(
        !writes.is_empty(),
        "RDMA WRITE FIRST/ONLY from n2 in {rows:?}"
    );
    for w in &writes {
        assert_eq!(field(w, 5), Some(1), "DLID n1: {w:?}");
        assert_eq!(field(w, 6), Some(2), "SLID n2: {w:?}");
        assert!(
            matches!(field(w, 2), Some(0x400 | 0x401)),
            "one of n1's two QPs: {w:?}"
        );
        assert!(field(w, 3).is_some(), "an R_Key: {w:?}");
    }
    let acks: Vec<_> = rows.iter().filter(|r| field(r, 0) == Some(0x11)).collect();
    assert!(
        acks.iter()
            .any(|a| field(a, 5) == Some(2) && field(a, 4) == Some(0x1f)),
        "n1's ACKs to n2 in {rows:?}"
    );
    let lids: Vec<(Option<u64>, Option<u64>)> =
        rows.iter().map(|r| (field(r, 5), field(r, 6))).collect();
    assert!(
        lids.iter()
            .all(|l| matches!(l, (Some(1), Some(2)) | (Some(2), Some(1)))),
        "only n1<->n2 traffic on n1's port: {lids:?}"
    );
}
