//! An own kernel on the fabric (issue 33, docs/own-kernel.md): Debian
//! stable's kernel (the VM stack's second kernel, 6.12; the bundled guest
//! runs the backports kernel) booted with `ibtca-fabric up --guests
//! --kernel IMAGE --modules DIR --kernel-tests`, its /lib/modules directory
//! presented as the kernel's modules (build/ its headers). ibtca.ko and
//! the kernel verbs test modules are built against that kernel by `up`;
//! two guests then run the kernel verbs tests of tests/tests/vm_kverbs.rs
//! (each module checks what landed and counts its failures). Also: `up`
//! refuses, with exit status 2 and before anything starts, a kernel whose
//! configuration lacks options the guest needs, naming every one.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use ibtca_tests::console::field;
use ibtca_tests::kverbs::{self, TOPOLOGY};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;

/// Debian stable's kernel release in the stack's chroot.
fn stable_kver(stack: &VmStack) -> String {
    let f = stack.chroot.join(".ibtca-kver-stable");
    std::fs::read_to_string(&f)
        .unwrap_or_else(|_| panic!("no {}: run scripts/setup-vm-stack.sh", f.display()))
        .trim()
        .to_owned()
}

/// The `TAG ... result ...` line of `console`, with `failed=0` and
/// `passed=N` checked (when `passed` is given).
fn result_ok(who: &str, console: &str, tag: &str, passed: Option<&str>, all: &str) {
    let tag = format!("{tag} result ");
    let line = console.lines().find_map(|l| l.find(&tag).map(|i| &l[i..]));
    let line = line.unwrap_or_else(|| panic!("{who}: no {tag:?} line\n{all}"));
    assert_eq!(field(line, "failed"), "0", "{who}: {line}");
    if let Some(n) = passed {
        assert_eq!(field(line, "passed"), n, "{who}: {line}");
    }
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn debian_stable_kernel_as_own_kernel_runs_the_kernel_verbs_tests() {
    let stack = VmStack::get();
    let kver = stable_kver(&stack);
    let image = stack.chroot.join(format!("boot/vmlinuz-{kver}"));
    let modules = stack.chroot.join(format!("lib/modules/{kver}"));
    let dir = stack.scratch("own-kernel");
    let topo = dir.join("topo.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let run = dir.join("run");
    let rd = run.display().to_string();
    let _down = Down(run.clone());
    let run_vm = stack.repo().join("scripts/run-vm.sh");
    let args = [
        "up",
        &topo.display().to_string(),
        "--run-dir",
        &rd,
        "--guests",
        "--kernel",
        &image.display().to_string(),
        "--modules",
        &modules.display().to_string(),
        "--kernel-tests",
        "--run-vm",
        &run_vm.display().to_string(),
        "--guest-timeout",
        "900",
        "--wait",
    ]
    .map(String::from);
    let out = fabric(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (server, client, all) = kverbs::consoles(&run, &out);
    assert!(out.status.success(), "up --guests --wait failed:\n{all}");
    for (who, c) in [("server", &server), ("client", &client)] {
        // The stable kernel booted, not the bundled guest's.
        assert!(
            c.contains(&format!("Linux version {kver} ")),
            "{who}: not {kver}\n{all}"
        );
        assert!(c.contains("IBTCA-KVERBS-RC 0"), "{who}: insmod\n{all}");
        assert!(c.contains("IBTCA-UNLOAD ok"), "{who}: unload\n{all}");
        assert!(
            !c.contains("IBTCA-DMESG"),
            "{who}: kernel complaints\n{all}"
        );
        assert!(!c.contains(" FAIL"), "{who}: a check failed\n{all}");
        result_ok(who, c, "IBTCA-KVERBS", None, &all);
        assert!(c.contains("IBTCA-KVSRQ-RC 0"), "{who}: SRQ insmod\n{all}");
        result_ok(who, c, "IBTCA-KVSRQ", None, &all);
        assert!(c.contains("IBTCA-KVDB-RC 0"), "{who}: dbrec insmod\n{all}");
        result_ok(who, c, "IBTCA-KVDB", Some("7"), &all);
        assert!(c.contains("IBTCA-KVSEED-RC 0"), "{who}: seed insmod\n{all}");
        result_ok(who, c, "IBTCA-KVSEED", Some("5"), &all);
    }
    // The two guests reached each other: each side's SEND came from the
    // other's LID.
    for (who, c, peer) in [("server", &server, "2"), ("client", &client, "1")] {
        let line = c
            .lines()
            .find(|l| l.contains("IBTCA-KVERBS send_recv PASS"))
            .unwrap_or_else(|| panic!("{who}: no send_recv PASS\n{all}"));
        assert_eq!(field(line, "from_lid"), peer, "{who}: {line}");
    }
}

#[test]
#[ignore = "needs the VM stack; run by scripts/test.sh"]
fn a_kernel_lacking_guest_options_is_refused_naming_each() {
    let stack = VmStack::get();
    let kver = stable_kver(&stack);
    let dir = stack.scratch("own-kernel-bad");
    // The stable kernel's headers as a tree whose .config lacks virtio
    // PCI and the RDMA core's user verbs.
    let headers = stack.chroot.join(format!("usr/src/linux-headers-{kver}"));
    let config = std::fs::read_to_string(headers.join(".config")).unwrap();
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("arch/x86/boot")).unwrap();
    std::fs::write(tree.join("arch/x86/boot/bzImage"), b"not booted").unwrap();
    let bad: String = config
        .lines()
        .filter(|l| {
            !l.starts_with("CONFIG_VIRTIO_PCI=") && !l.starts_with("CONFIG_INFINIBAND_USER_ACCESS=")
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(
        bad.len(),
        config.len(),
        "the stable kernel's config changed"
    );
    std::fs::write(tree.join(".config"), bad).unwrap();
    let topo = dir.join("topo.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let run = dir.join("run");
    let run_vm = stack.repo().join("scripts/run-vm.sh");
    let out = fabric(&[
        "up",
        &topo.display().to_string(),
        "--run-dir",
        &run.display().to_string(),
        "--guests",
        "--kernel-tree",
        &tree.display().to_string(),
        "--run-vm",
        &run_vm.display().to_string(),
    ]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains("CONFIG_VIRTIO_PCI=y ("), "{msg}");
    assert!(msg.contains("CONFIG_INFINIBAND_USER_ACCESS=y|m ("), "{msg}");
    assert!(!msg.contains("CONFIG_INFINIBAND=y|m"), "{msg}");
    // Nothing started.
    assert!(!run.join("a.log").exists(), "{msg}");
}
