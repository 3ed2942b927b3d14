//! Full stack, port events: a guest on device A (linked to device B, which
//! has no guest) waits in the driver for port changes; the host takes B
//! away and brings it back. The guest's driver sees each change through the
//! asynchronous event vector (EVENT_CAUSE, PORT_STATE) and the tool prints
//! `IBTCA-PORT state=N events=N`: DOWN (1), then ACTIVE (4).
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::path::Path;
use std::time::{Duration, Instant};

use ibtca_device::regs;
use ibtca_tests::vm::{DeviceProcess, VmConfig, VmStack};

/// Waits until the guest's console (the serial log file) has a line
/// containing `prefix` (kernel messages may share the line); returns it.
fn wait_line(log: &Path, prefix: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(prefix)) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no {prefix:?} on the console within {timeout:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "boots a QEMU guest; run by scripts/test.sh"]
fn guest_sees_the_port_go_down_and_up() {
    let stack = VmStack::get();
    let dir = stack.scratch("port");
    let link = dir.join("ab.link");
    let listen = format!("listen:{}", link.display());
    let connect = format!("connect:{}", link.display());
    let dev_a = DeviceProcess::start(
        &dir.join("a.sock"),
        None,
        &["--lid", "1", "--link", &listen],
    );
    let dev_b = DeviceProcess::start(
        &dir.join("b.sock"),
        None,
        &["--lid", "2", "--link", &connect],
    );
    let log = dir.join("console.log");
    let mut vm = VmConfig::new(&dev_a.socket, "port-events");
    vm.serial_log = Some(log.clone());
    vm.timeout = Duration::from_secs(400);

    let run = std::thread::scope(|s| {
        let guest = s.spawn(|| stack.boot(&vm));
        let t = Duration::from_secs(240);
        let ready = wait_line(&log, "IBTCA-PORT-READY", t);
        eprintln!("{ready}");
        // B goes away: the guest is told the port is down.
        assert!(dev_b.stop(), "device B did not exit cleanly");
        let down = wait_line(&log, "IBTCA-PORT state=", t);
        // B comes back on the same link.
        let dev_b2 = DeviceProcess::start(
            &dir.join("b2.sock"),
            None,
            &["--lid", "2", "--link", &connect],
        );
        let run = guest.join().unwrap();
        drop(dev_b2);
        eprintln!("{down}");
        run
    });
    let dump = format!(
        "console:\n{}\ndevice A log:\n{}",
        run.serial,
        dev_a.log_text()
    );
    assert_eq!(
        run.status,
        Some(0),
        "QEMU did not power off cleanly\n{dump}"
    );
    let ready: u32 = run
        .field("IBTCA-PORT-READY", "events")
        .and_then(|v| {
            let digits: String = v.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or_else(|| panic!("no READY line\n{dump}"));
    // The driver's own log line may land on the same console line (the
    // kernel prints while the tool writes): take each report by itself.
    let lines: Vec<String> = run
        .lines_with("IBTCA-PORT state=")
        .filter_map(|l| {
            let at = l.find("IBTCA-PORT state=")?;
            let rest = &l[at..];
            let events = rest.find("events=")? + "events=".len();
            let digits = rest[events..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
            Some(rest[..events + digits].to_string())
        })
        .collect();
    assert_eq!(
        lines,
        vec![
            format!("IBTCA-PORT state={} events={}", regs::PORT_DOWN, ready + 1),
            format!(
                "IBTCA-PORT state={} events={}",
                regs::PORT_ACTIVE,
                ready + 2
            ),
        ],
        "{dump}"
    );
    assert!(
        run.lines_with("IBTCA-PORT-LOG ")
            .any(|l| l.contains("port DOWN")),
        "the driver logs the change\n{dump}"
    );
    // Each change also reached the RDMA core as an IB event on ibtca0.
    for event in ["ibtca0: port event down", "ibtca0: port event active"] {
        assert!(
            run.lines_with("IBTCA-PORT-LOG ").any(|l| l.contains(event)),
            "no {event:?}\n{dump}"
        );
    }
    run.expect_line("IBTCA-UNLOAD ok");
}
