//! An own kernel on the fabric (issue 33, docs/own-kernel.md): Debian
//! stable's kernel (the VM stack's second kernel, 6.12; the bundled guest
//! runs the backports kernel) presented as a kernel tree built in place
//! (its image as `arch/x86/boot/bzImage`, its headers' build directory,
//! its modules unsigned and uncompressed in their source directories,
//! `modules.order` and `modules.builtin` as `make` leaves them) and booted
//! with `ibtca-fabric up --guests --kernel-tree DIR --kernel-tests`.
//! ibtca.ko and the kernel verbs test modules are built against the tree
//! by `up`; two guests then run the kernel verbs tests of
//! tests/tests/vm_kverbs.rs (each module checks what landed and counts its
//! failures), and say which RDMA core they loaded: the tree's (its build
//! ID, unsigned), with the module groups of the tree's modules.order (a
//! stale module left beside them is not packed). Also: the build script
//! reads an installed kernel's module directory (`--kernel IMAGE --modules
//! DIR`) to the same modules as the tree, and `up` refuses, with exit
//! status 2 and before anything starts, a kernel whose configuration lacks
//! options the guest needs, naming every one.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root for the chroot:
//! `scripts/test.sh` runs it; plain `cargo test` lists it as ignored.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

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

/// The module the tree leaves out of its modules.order, as a tree
/// reconfigured without it after a build that had it: `make` builds it no
/// more and leaves its old .ko in place. Its group (`rxe`) is optional and
/// the kernel verbs tests do not load it.
const STALE: &str = "drivers/infiniband/sw/rxe/rdma_rxe";

/// Runs `cmd`, asserting that it succeeded; its stdout.
fn run(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", text(&out));
    out.stdout
}

/// Module `ko` without the signature `make modules_install` appends (a
/// tree's modules are unsigned), and whether it had one.
fn unsigned(mut ko: Vec<u8>) -> (Vec<u8>, bool) {
    const MARK: &[u8] = b"~Module signature appended~\n";
    if !ko.ends_with(MARK) {
        return (ko, false);
    }
    let end = ko.len() - MARK.len();
    // struct module_signature: 12 bytes, ending in the signature's
    // length (big-endian); the signature before it.
    let sig_len = u32::from_be_bytes(ko[end - 4..end].try_into().unwrap()) as usize;
    ko.truncate(end - 12 - sig_len);
    (ko, true)
}

/// Debian stable's kernel `kver` as a kernel tree built in place, made
/// once in the stack's cache (outside the clone; its files keep the
/// package's times, so the guest image built from it stays cached too).
fn debian_kernel_tree(stack: &VmStack, kver: &str) -> PathBuf {
    let trees = stack.cache().join("kernel-trees");
    let tree = trees.join(format!("{kver}-1"));
    if tree.join("modules.order").is_file() {
        return tree;
    }
    let tmp = trees.join(format!(".{kver}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    // The headers' build directory: .config, Module.symvers,
    // include/generated, its Makefile (which includes the common
    // headers' in the chroot); scripts/ and tools/ (links into the
    // chroot's linux-kbuild) as the directories a tree has.
    let headers = stack.chroot.join(format!("usr/src/linux-headers-{kver}"));
    run(Command::new("cp")
        .arg("-a")
        .arg(headers.join("."))
        .arg(&tmp));
    for d in ["scripts", "tools"] {
        let real = std::fs::canonicalize(headers.join(d)).unwrap();
        std::fs::remove_file(tmp.join(d)).unwrap();
        run(Command::new("cp").arg("-a").arg(&real).arg(tmp.join(d)));
    }
    std::fs::create_dir_all(tmp.join("arch/x86/boot")).unwrap();
    run(Command::new("cp")
        .arg("-a")
        .arg(stack.chroot.join(format!("boot/vmlinuz-{kver}")))
        .arg(tmp.join("arch/x86/boot/bzImage")));
    // The modules: kernel/DIR/M.ko.xz installed, DIR/M.ko in the tree,
    // listed as DIR/M.o in modules.order.
    let moddir = stack.chroot.join(format!("lib/modules/{kver}"));
    run(Command::new("cp")
        .arg("-a")
        .arg(moddir.join("modules.builtin"))
        .arg(moddir.join("modules.builtin.modinfo"))
        .arg(&tmp));
    let installed = std::fs::read_to_string(moddir.join("modules.order")).unwrap();
    let rels: Vec<&str> = installed
        .lines()
        .map(|l| {
            l.strip_prefix("kernel/")
                .and_then(|l| l.strip_suffix(".ko"))
                .unwrap_or_else(|| panic!("modules.order: {l}"))
        })
        .collect();
    assert!(rels.contains(&STALE), "{kver} has no {STALE}");
    std::thread::scope(|s| {
        for part in rels.chunks(rels.len().div_ceil(2)) {
            let (moddir, tmp) = (&moddir, &tmp);
            s.spawn(move || {
                for rel in part {
                    let src = moddir.join(format!("kernel/{rel}.ko.xz"));
                    let (ko, signed) = unsigned(run(Command::new("xz").arg("-dc").arg(&src)));
                    assert!(signed, "{} is not signed", src.display());
                    let dst = tmp.join(format!("{rel}.ko"));
                    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
                    std::fs::write(&dst, ko).unwrap();
                    let when = std::fs::metadata(&src).unwrap().modified().unwrap();
                    let f = std::fs::File::options().write(true).open(&dst).unwrap();
                    f.set_modified(when).unwrap();
                }
            });
        }
    });
    let order: String = rels
        .iter()
        .filter(|r| **r != STALE)
        .map(|r| format!("{r}.o\n"))
        .collect();
    std::fs::write(tmp.join("modules.order"), order).unwrap();
    let config = std::fs::read_to_string(tmp.join(".config")).unwrap();
    let without = config.replace("CONFIG_RDMA_RXE=m\n", "# CONFIG_RDMA_RXE is not set\n");
    assert_ne!(without, config, "{kver}: soft-RoCE is not a module");
    std::fs::write(tmp.join(".config"), without).unwrap();
    match std::fs::rename(&tmp, &tree) {
        Ok(()) => {}
        // Another run made it meanwhile.
        Err(_) if tree.join("modules.order").is_file() => {
            std::fs::remove_dir_all(&tmp).unwrap();
        }
        Err(e) => panic!("{}: {e}", tree.display()),
    }
    tree
}

/// The GNU build ID of the module `ko` (a file, or an .xz of one).
fn build_id(ko: &Path) -> String {
    let tmp = ibtca_tests::TempDir::new("own-kernel-ko");
    let plain = if ko.extension().is_some_and(|e| e == "xz") {
        let p = tmp.0.join("m.ko");
        std::fs::write(&p, run(Command::new("xz").arg("-dc").arg(ko))).unwrap();
        p
    } else {
        ko.to_path_buf()
    };
    let notes = String::from_utf8(run(Command::new("readelf").arg("-n").arg(&plain))).unwrap();
    notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("{}: no build ID\n{notes}", ko.display()))
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

/// Brings up the kernel verbs tests' two guests with `up --guests
/// --kernel-tests` and `kernel` (the own kernel's options), waiting for
/// them; (server console, client console, everything for messages).
fn boot_kverbs(stack: &VmStack, name: &str, kernel: &[String]) -> (String, String, String) {
    let dir = stack.scratch(name);
    let topo = dir.join("topo.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
    let run = dir.join("run");
    let _down = Down(run.clone());
    let run_vm = stack.repo().join("scripts/run-vm.sh");
    let mut args: Vec<String> = [
        "up",
        &topo.display().to_string(),
        "--run-dir",
        &run.display().to_string(),
        "--guests",
    ]
    .map(String::from)
    .to_vec();
    args.extend(kernel.iter().cloned());
    args.extend(
        [
            "--kernel-tests",
            "--run-vm",
            &run_vm.display().to_string(),
            "--guest-timeout",
            "900",
            "--wait",
        ]
        .map(String::from),
    );
    let out = fabric(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (server, client, all) = kverbs::consoles(&run, &out);
    assert!(out.status.success(), "up --guests --wait failed:\n{all}");
    (server, client, all)
}

/// The `IBTCA-KMOD ib_core ...` line of guest `who`'s console `c`.
fn ib_core_line<'a>(who: &str, c: &'a str, all: &str) -> &'a str {
    c.lines()
        .find_map(|l| l.find("IBTCA-KMOD ib_core ").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("{who}: no IBTCA-KMOD ib_core\n{all}"))
}

/// Guest `who` booted kernel `kver` (not the bundled guest's) and passed
/// every kernel verbs test module; its SEND came from `peer_lid`.
fn assert_kverbs_passed(who: &str, c: &str, kver: &str, peer_lid: &str, all: &str) {
    assert!(
        c.contains(&format!("Linux version {kver} ")),
        "{who}: not {kver}\n{all}"
    );
    kverbs::assert_ran_clean(who, c, all);
    result_ok(who, c, "IBTCA-KVERBS", None, all);
    assert!(c.contains("IBTCA-KVSRQ-RC 0"), "{who}: SRQ insmod\n{all}");
    result_ok(who, c, "IBTCA-KVSRQ", None, all);
    assert!(c.contains("IBTCA-KVDB-RC 0"), "{who}: dbrec insmod\n{all}");
    result_ok(who, c, "IBTCA-KVDB", Some("7"), all);
    assert!(c.contains("IBTCA-KVSEED-RC 0"), "{who}: seed insmod\n{all}");
    result_ok(who, c, "IBTCA-KVSEED", Some("5"), all);
    // The two guests reached each other.
    let line = c
        .lines()
        .find(|l| l.contains("IBTCA-KVERBS send_recv PASS"))
        .unwrap_or_else(|| panic!("{who}: no send_recv PASS\n{all}"));
    assert_eq!(field(line, "from_lid"), peer_lid, "{who}: {line}");
}

/// The build ID of the backports kernel's ib_core (the bundled guest's).
fn bundled_ib_core(stack: &VmStack) -> String {
    let stack_kver = std::fs::read_to_string(stack.chroot.join(".ibtca-kver")).unwrap();
    build_id(&stack.chroot.join(format!(
        "lib/modules/{}/kernel/drivers/infiniband/core/ib_core.ko.xz",
        stack_kver.trim()
    )))
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn debian_stable_kernel_as_a_kernel_tree_runs_the_kernel_verbs_tests() {
    let stack = VmStack::get();
    let kver = stable_kver(&stack);
    let start = Instant::now();
    let tree = debian_kernel_tree(&stack, &kver);
    eprintln!("kernel tree: {:.0} s", start.elapsed().as_secs_f64());
    let kernel = ["--kernel-tree".to_owned(), tree.display().to_string()];
    let (server, client, all) = boot_kverbs(&stack, "own-kernel", &kernel);
    eprintln!("kernel tree and up: {:.0} s", start.elapsed().as_secs_f64());
    assert_not_mounted(&stack, &tree);
    // The tree's ib_core, and not the stack's kernel's (the backports
    // kernel of the bundled guest).
    let tree_core = build_id(&tree.join("drivers/infiniband/core/ib_core.ko"));
    assert_ne!(tree_core, bundled_ib_core(&stack));
    for (who, c, peer) in [("server", &server, "2"), ("client", &client, "1")] {
        assert_kverbs_passed(who, c, &kver, peer, &all);
        // Its RDMA core came from the tree: the tree's build of ib_core,
        // unsigned (taint E) as the tree's files are and the installed,
        // signed ones of the same kernel are not.
        let core = ib_core_line(who, c, &all);
        assert_eq!(field(core, "build_id"), tree_core, "{who}: {core}");
        assert!(field(core, "taint").contains('E'), "{who}: {core}");
        // The module groups of the tree's modules.order: soft-RoCE's
        // stale module is not among them.
        let groups = c
            .lines()
            .find_map(|l| l.find("IBTCA-KGROUPS ").map(|i| &l[i + 14..]))
            .unwrap_or_else(|| panic!("{who}: no IBTCA-KGROUPS\n{all}"));
        let groups: Vec<&str> = groups.split_whitespace().collect();
        for g in [
            "ibcore",
            "uverbs",
            "net",
            "9p",
            "umad",
            "cm",
            "nvme-host",
            "nvmet",
        ] {
            assert!(groups.contains(&g), "{who}: no group {g}: {groups:?}");
        }
        assert!(!groups.contains(&"rxe"), "{who}: {groups:?}");
    }
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn an_installed_kernel_boots_from_its_image_and_module_directory() {
    let stack = VmStack::get();
    let kver = stable_kver(&stack);
    let image = stack.chroot.join(format!("boot/vmlinuz-{kver}"));
    let moddir = stack.chroot.join(format!("lib/modules/{kver}"));
    let kernel = [
        "--kernel".to_owned(),
        image.display().to_string(),
        "--modules".to_owned(),
        moddir.display().to_string(),
    ];
    let (server, client, all) = boot_kverbs(&stack, "installed-kernel", &kernel);
    // The installed (signed, compressed) ib_core of that kernel, not the
    // bundled guest's.
    let installed = build_id(&moddir.join("kernel/drivers/infiniband/core/ib_core.ko.xz"));
    assert_ne!(installed, bundled_ib_core(&stack));
    for (who, c, peer) in [("server", &server, "2"), ("client", &client, "1")] {
        assert_kverbs_passed(who, c, &kver, peer, &all);
        let core = ib_core_line(who, c, &all);
        assert_eq!(field(core, "build_id"), installed, "{who}: {core}");
        assert!(!field(core, "taint").contains('E'), "{who}: {core}");
    }
}

/// `gk_closure MODULE...` of scripts/guest-kernel.sh for the kernel
/// `select` names (`gk_select_tree DIR` or `gk_select_image IMAGE DIR`):
/// the module names in load order, or the script's complaint.
fn closure(stack: &VmStack, select: &[&Path], modules: &str) -> Result<Vec<String>, String> {
    let script = r#"
set -eu
CHROOT=$1; shift
. "$REPO/scripts/guest-kernel.sh"
in_chroot() { chroot "$CHROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
mods=$1; shift
"$@"
trap gk_unexpose EXIT
gk_expose
gk_index
gk_closure $mods
"#;
    let fun = if select.len() == 1 {
        "gk_select_tree"
    } else {
        "gk_select_image"
    };
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .arg("closure")
        .arg(std::fs::canonicalize(&stack.chroot).unwrap())
        .arg(modules)
        .arg(fun)
        .args(select)
        .env("REPO", stack.repo())
        .output()
        .unwrap();
    if out.status.success() {
        let said = String::from_utf8(out.stdout).unwrap();
        Ok(said.lines().map(str::to_owned).collect())
    } else {
        Err(text(&out))
    }
}

#[test]
#[ignore = "needs the VM stack; run by scripts/test.sh"]
fn the_build_script_reads_a_tree_by_its_modules_order_and_an_installed_kernel_by_its_files() {
    let stack = VmStack::get();
    let kver = stable_kver(&stack);
    let tree = debian_kernel_tree(&stack, &kver);
    let image = stack.chroot.join(format!("boot/vmlinuz-{kver}"));
    let moddir = stack.chroot.join(format!("lib/modules/{kver}"));
    // The same kernel's RDMA core and NVMe-oF modules, from either.
    let want = "ib_uverbs rdma_ucm nvme_rdma nvmet_rdma virtio_net";
    let installed = closure(&stack, &[&image, &moddir], want).unwrap();
    assert_eq!(
        closure(&stack, &[&tree], want).unwrap(),
        installed,
        "the tree and the installed modules of {kver}"
    );
    for m in ["ib_core", "ib_uverbs", "rdma_cm", "nvme_core", "nvmet"] {
        assert!(installed.iter().any(|x| x == m), "{m}: {installed:?}");
    }
    // soft-RoCE: installed, so found there; in the tree only a stale .ko
    // outside its modules.order, so not a module of the tree.
    let rxe = closure(&stack, &[&image, &moddir], "rdma_rxe").unwrap();
    assert_eq!(rxe.last().map(String::as_str), Some("rdma_rxe"), "{rxe:?}");
    assert!(tree.join(format!("{STALE}.ko")).is_file());
    let err = closure(&stack, &[&tree], "rdma_rxe").unwrap_err();
    assert!(
        err.contains("module rdma_rxe is neither built as a module under"),
        "{err}"
    );
    // The tree, outside the chroot, was bind-mounted into it for the
    // look-ups and is no longer, whether they succeeded or failed.
    assert_not_mounted(&stack, &tree);
}

/// `dir` (outside the chroot) is not bind-mounted at its path inside it.
fn assert_not_mounted(stack: &VmStack, dir: &Path) {
    let inside = stack
        .chroot
        .join(dir.strip_prefix("/").unwrap())
        .display()
        .to_string();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mounts
            .lines()
            .any(|l| l.split_whitespace().nth(4) == Some(inside.as_str())),
        "{inside} is still mounted"
    );
}

#[test]
#[ignore = "needs the VM stack; run by scripts/test.sh"]
fn a_kernel_lacking_guest_options_is_refused_naming_each() {
    let stack = VmStack::get();
    let kver = stable_kver(&stack);
    let dir = stack.scratch("own-kernel-bad");
    // The stable kernel's headers as a tree whose .config lacks virtio
    // PCI, the RDMA core's user verbs and the overlay file system (which
    // only a Debian-root guest needs).
    let headers = stack.chroot.join(format!("usr/src/linux-headers-{kver}"));
    let config = std::fs::read_to_string(headers.join(".config")).unwrap();
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("arch/x86/boot")).unwrap();
    std::fs::write(tree.join("arch/x86/boot/bzImage"), b"not booted").unwrap();
    let bad: String = config
        .lines()
        .filter(|l| {
            !l.starts_with("CONFIG_VIRTIO_PCI=")
                && !l.starts_with("CONFIG_INFINIBAND_USER_ACCESS=")
                && !l.starts_with("CONFIG_OVERLAY_FS=")
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
    let up = |extra: &[&str]| {
        let mut args = vec![
            "up".to_owned(),
            topo.display().to_string(),
            "--run-dir".to_owned(),
            run.display().to_string(),
            "--guests".to_owned(),
            "--kernel-tree".to_owned(),
            tree.display().to_string(),
            "--run-vm".to_owned(),
            run_vm.display().to_string(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        fabric(&args)
    };
    let out = up(&[]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains("CONFIG_VIRTIO_PCI=y ("), "{msg}");
    assert!(msg.contains("CONFIG_INFINIBAND_USER_ACCESS=y|m ("), "{msg}");
    assert!(!msg.contains("CONFIG_INFINIBAND=y|m"), "{msg}");
    assert!(!msg.contains("CONFIG_OVERLAY_FS"), "{msg}");
    // Packages make the guests Debian-root ones: the overlay is named too,
    // before any package layer is built.
    let out = up(&["--guest-packages", "hello"]);
    let msg = text(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains("CONFIG_OVERLAY_FS=y|m ("), "{msg}");
    assert!(msg.contains("CONFIG_VIRTIO_PCI=y ("), "{msg}");
    // Nothing started.
    assert!(!run.join("a.log").exists(), "{msg}");
}
