//! Full stack, two machines: two `ibtca-device` processes joined by a link
//! (LIDs 1 and 2), each serving one QEMU guest. The guests' `ibtca-tool
//! verbs` connect a QP pair through the real driver (command queue, WQEs,
//! doorbells, CQEs in guest memory), exchange buffer addresses and R_Keys
//! with SEND/RECV, and run RDMA WRITE, RDMA READ, fetch-and-add,
//! compare-and-swap and an RDMA WRITE with a bad R_Key, each checked on both
//! sides.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::time::Duration;

use ibtca_tests::vm::{check_scenario, DeviceProcess, VmConfig, VmRun, VmStack};

use ibtca_tests::vm::{VERBS_CLIENT_CHECKS as CLIENT_CHECKS, VERBS_SERVER_CHECKS as SERVER_CHECKS};

fn check_run(role: &str, run: &VmRun, checks: &[&str], logs: &str) {
    check_scenario("IBTCA-VERBS", role, run, checks, logs);
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn two_guests_do_send_rdma_atomics_and_bad_rkey_over_the_link() {
    let stack = VmStack::get();
    let dir = stack.scratch("verbs");
    let link = dir.join("ab.link");
    let link_listen = format!("listen:{}", link.display());
    let link_connect = format!("connect:{}", link.display());
    let mut dev_a = DeviceProcess::start(
        &dir.join("a.sock"),
        None,
        &["--lid", "1", "--link", &link_listen],
    );
    let mut dev_b = DeviceProcess::start(
        &dir.join("b.sock"),
        None,
        &["--lid", "2", "--link", &link_connect],
    );

    let guest = |socket: &std::path::Path, role: &str, peer_lid: u16| {
        let mut vm = VmConfig::new(socket, "verbs");
        vm.append = format!("ibtca.mode=verbs ibtca.role={role} ibtca.peer_lid={peer_lid}");
        vm.timeout = Duration::from_secs(300);
        vm
    };
    let server_vm = guest(&dev_a.socket, "server", 2);
    let client_vm = guest(&dev_b.socket, "client", 1);
    let (server, client) = std::thread::scope(|s| {
        let server = s.spawn(|| stack.boot(&server_vm));
        let client = s.spawn(|| stack.boot(&client_vm));
        (server.join().unwrap(), client.join().unwrap())
    });
    eprintln!(
        "server guest {:.1} s, client guest {:.1} s",
        server.elapsed.as_secs_f64(),
        client.elapsed.as_secs_f64()
    );
    let logs = format!(
        "device A log:\n{}\ndevice B log:\n{}",
        dev_a.log_text(),
        dev_b.log_text()
    );
    check_run("server", &server, SERVER_CHECKS, &logs);
    check_run("client", &client, CLIENT_CHECKS, &logs);
    assert!(dev_a.alive(), "device A died:\n{logs}");
    assert!(dev_b.alive(), "device B died:\n{logs}");
    assert!(dev_a.stop(), "device A did not exit cleanly on SIGTERM");
    assert!(dev_b.stop(), "device B did not exit cleanly on SIGTERM");
}
