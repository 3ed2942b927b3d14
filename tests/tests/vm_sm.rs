//! Full stack, the topology's `"sm"` option up to OpenSM's start: one
//! `ibtca-fabric up --guests --wait` of a device on a managed switch with
//! `"sm": "n1"` boots n1's guest, whose first command (the launcher's)
//! writes OpenSM's guid2lid from the file's LIDs, loads `ib_umad` and
//! starts `opensm --honor_guid2lid` with the file's `sm_options`; n1's own
//! command then finds the guid2lid file byte for byte, the umad device,
//! an `opensm` process and its log in the configuration directory.
//!
//! OpenSM bringing a whole subnet up, and the diagnostics against it, is
//! `vm_opensm.rs`.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::vm::VmStack;

const TOPOLOGY: &str = r#"{
  "sm": "n1",
  "sm_options": ["--sweep", "7"],
  "nodes": [ { "name": "n1", "lid": 5, "node_guid": "0x1200000000000501" } ],
  "switches": [ { "name": "sw0", "ports": 2 } ],
  "links": [ { "a": "n1", "b": "sw0:1" } ],
  "guest": { "mem": "512M" }
}"#;

const CHECKS: &str = "sleep 3; \
    sed 's/^/G2L /' /var/cache/opensm/guid2lid; \
    test -e /dev/infiniband/umad0 && echo UMAD-OK; \
    for i in $(seq 60); do pgrep -x opensm >/dev/null && break; sleep 1; done; \
    echo \"OPENSM-ARGS $(tr '\\0' ' ' </proc/$(cat /run/opensm.pid)/cmdline)\"; \
    for i in $(seq 60); do [ -s /ibtca/opensm.log ] && break; sleep 1; done; \
    test -s /ibtca/opensm.log && echo OSMLOG-OK";

#[test]
#[ignore = "boots a QEMU guest; run by scripts/test.sh"]
fn the_sm_nodes_guest_starts_opensm_with_the_files_lids() {
    let stack = VmStack::get();
    let boot = GuestBoot::with_topology(&stack, "vm-sm", TOPOLOGY);
    let run = boot.run.clone();
    let Booted { out, said, .. } = boot.up(&["--guest-timeout", "900"], &[("n1", &[CHECKS][..])]);
    let console = boot.console("n1");
    let all = boot.all(&said, &["n1"]);
    assert!(out.status.success(), "{all}");
    assert!(said.contains("guest n1: commands passed"), "{all}");
    assert!(console.contains("IBTCA-SM opensm started pid="), "{all}");
    let g2l: Vec<&str> = console
        .lines()
        .filter_map(|l| l.strip_prefix("G2L "))
        .collect();
    assert!(
        console.contains("G2L 0x1200000000000501 0x0005 0x0005"),
        "guid2lid: {g2l:?}\n{all}"
    );
    assert!(console.contains("UMAD-OK"), "{all}");
    assert!(
        console.contains(
            "OPENSM-ARGS opensm --honor_guid2lid --log_file /ibtca/opensm.log --debug 2 --sweep 7"
        ),
        "{all}"
    );
    assert!(console.contains("OSMLOG-OK"), "{all}");
    assert!(
        std::fs::metadata(run.join("n1.guest/opensm.log")).is_ok_and(|m| m.len() > 0),
        "OpenSM's log reaches the host"
    );
}
