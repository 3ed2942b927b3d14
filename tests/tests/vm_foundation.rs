//! Full stack: a real Linux guest under QEMU's vfio-user client binds the
//! device with the ibtca module; the test reads the guest's serial console.
//! QEMU is then started again against the same server, and must pass again.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::time::Duration;

use ibtca_device::regs;
use ibtca_tests::console::wait_for;
use ibtca_tests::vm::{DeviceProcess, VmConfig, VmRun, VmStack};

fn check_foundation_run(run: &VmRun, round: u32) {
    let ctx = format!("boot {round}");
    assert_eq!(
        run.status,
        Some(0),
        "{ctx}: QEMU did not power off cleanly; console:\n{}",
        run.serial
    );
    run.expect_line("IBTCA-GUEST boot");
    run.expect_line("IBTCA-INSMOD ok");
    // The kernel enumerated the device with our IDs and class.
    let pci = run.expect_line("IBTCA-PCI ");
    assert!(
        pci.contains(&format!("vendor={:#06x}", regs::PCI_VENDOR_ID))
            && pci.contains(&format!("device={:#06x}", regs::PCI_DEVICE_ID))
            && pci.contains(&format!("class={:#08x}", regs::PCI_CLASS_CODE)),
        "{ctx}: {pci}"
    );
    // The driver probed: magic/version checked, MSI-X vectors allocated.
    let probe = run.expect_line("ibtca: probe ");
    let ids = format!(
        "vendor={:04x} device={:04x} class={:06x} version=1.0",
        regs::PCI_VENDOR_ID,
        regs::PCI_DEVICE_ID,
        regs::PCI_CLASS_CODE
    );
    assert!(probe.contains(&ids), "{ctx}: {probe}");
    let vectors: u32 = run
        .field("ibtca: probe ", "vectors")
        .unwrap()
        .parse()
        .unwrap();
    assert!(vectors >= 2, "{ctx}: only {vectors} MSI-X vectors");
    // In-kernel self-tests at probe time.
    for t in [
        "selftest scratch ok",
        "selftest irq vector=0 ok",
        "selftest dma fill ok",
        "selftest dma sum ok",
    ] {
        run.expect_line(&format!("ibtca: {t}"));
    }
    assert!(
        run.lines_with("FAILED").next().is_none(),
        "{ctx}: a self-test failed:\n{}",
        run.serial
    );
    // The guest tool through /dev/ibtca0: scratch, interrupts on two vectors,
    // DMA fill/sum, DMA fault.
    for t in ["scratch", "irq", "dma", "fault"] {
        let passed = run
            .lines_with("IBTCA-TEST ")
            .filter(|l| l.contains(t) && l.contains(" PASS"))
            .count();
        assert!(passed > 0, "{ctx}: no passing '{t}' check:\n{}", run.serial);
    }
    assert!(
        run.lines_with("IBTCA-TEST ").all(|l| !l.contains(" FAIL")),
        "{ctx}:\n{}",
        run.serial
    );
    let summary = run.expect_line("IBTCA-SELFTEST ");
    assert!(summary.contains(" 0 failed"), "{ctx}: {summary}");
    run.expect_line("IBTCA-SELFTEST-RC 0");
    // Clean unload.
    run.expect_line("IBTCA-UNLOAD ok");
    run.expect_line("IBTCA-GUEST done");
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn guest_binds_device_takes_interrupts_and_survives_qemu_restart() {
    let stack = VmStack::get();
    let dir = stack.scratch("found");
    let socket = dir.join("tca0.sock");
    let mut dev = DeviceProcess::start(&socket, None, &[]);
    for round in 1..=2 {
        let run = stack.boot(&VmConfig::new(&socket, "foundation"));
        eprintln!("boot {round}: {:.1} s", run.elapsed.as_secs_f64());
        check_foundation_run(&run, round);
        assert!(
            dev.alive(),
            "device process died after boot {round}:\n{}",
            dev.log_text()
        );
    }
    // QEMU crashes (SIGKILL) while the guest's driver has the device in
    // use; the server must take the next QEMU as if nothing happened. The
    // guest binds the device and then waits for port changes that never
    // come (no link): QEMU is killed once the console says the guest
    // waits (IBTCA-PORT-READY), however long the boot took. The timeouts
    // are hang guards.
    let console = dir.join("crash.console");
    let pidfile = dir.join("crash.pid");
    let mut crash = VmConfig::new(&socket, "port-events");
    crash.timeout = Duration::from_secs(600);
    crash.serial_log = Some(console.clone());
    crash.qemu_args = vec!["-pidfile".into(), stack.in_chroot(&pidfile)];
    let run = std::thread::scope(|s| {
        let guest = s.spawn(|| stack.boot(&crash));
        wait_for(&console, "IBTCA-PORT-READY", 1, crash.timeout);
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .expect("QEMU's pid file")
            .trim()
            .parse()
            .expect("a pid in QEMU's pid file");
        // SAFETY: kill(2) of the QEMU this test started (its pid file);
        // no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "kill QEMU");
        guest.join().unwrap()
    });
    assert_ne!(run.status, Some(0), "QEMU was meant to be killed");
    run.expect_line("IBTCA-PORT-READY");
    assert!(
        dev.alive(),
        "device process died with QEMU:\n{}",
        dev.log_text()
    );
    let run = stack.boot(&VmConfig::new(&socket, "foundation"));
    check_foundation_run(&run, 3);
    let log = dev.log_text();
    assert_eq!(log.matches("client connected").count(), 4, "{log}");
    assert!(dev.stop(), "ibtca-device did not exit cleanly on SIGTERM");
}
