//! Guests whose root is the VM stack's Debian system (docs/guest-root.md):
//! one `ibtca-fabric up --guests --run ... --wait` boots two such guests
//! joined by a link, and every check shares that boot:
//!
//! - n1 asks for the Debian package `hello` (not in the chroot) in the
//!   topology: `scripts/guest-layer.sh` installs it into a cached layer
//!   and n1 runs it; n2 asks for nothing and has no `hello`;
//! - the kernel's whole module tree is there: `modprobe dummy` (a module
//!   the initramfs does not carry) loads it;
//! - the device works there: `ibv_rc_pingpong -d ibtca0` between the two
//!   guests (the ibtca provider carried over from the initramfs), both
//!   ends to completion;
//! - n1 writes to /etc and /usr; neither file appears in the chroot or in
//!   the layer on the host, and `down` undoes the root view's and the
//!   layer's mounts;
//! - each guest reports its uptime at its first command (boot to the first
//!   `--run` command; printed, docs/guest-root.md has the measurements);
//! - after the run, `scripts/guest-layer.sh hello hello` reuses n1's layer
//!   (the key is the sorted, deduplicated list) and installs nothing.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh), root and the package
//! mirror (for the layer, once): `scripts/test.sh` runs it; plain `cargo
//! test` lists it as ignored.

use std::path::{Path, PathBuf};

use ibtca_tests::console::{client, tagged, tagged_lines};
use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::vm::VmStack;

const TOPOLOGY: &str = r#"{
  "nodes": [ { "name": "n1", "lid": 1, "guest": { "packages": ["hello"] } },
             { "name": "n2", "lid": 2 } ],
  "links": [ { "a": "n1", "b": "n2" } ],
  "guest": { "mem": "512M", "root": "debian" }
}"#;

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&path.display().to_string()))
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn debian_root_guests_run_commands_packages_and_verbs() {
    let stack = VmStack::get();
    let mut boot = GuestBoot::with_topology(&stack, "guest-root", TOPOLOGY);
    let run = boot.run.clone();
    let token = format!("guest-write-{}-{}", std::process::id(), line!());
    let etc_file = format!("ibtca-{token}");
    let uptime = "cut -d' ' -f1 /proc/uptime";
    let n1 = [
        tagged("UPTIME", uptime),
        tagged("HELLO", "hello"),
        tagged(
            "MODPROBE",
            "modprobe dummy && grep -c '^dummy ' /proc/modules",
        ),
        tagged(
            "WRITE",
            &format!("echo {token} >/etc/{etc_file} && echo {token} >/usr/{etc_file} && cat /etc/{etc_file}"),
        ),
        tagged("PP-SERVER", "ibv_rc_pingpong -d ibtca0"),
    ];
    let n2 = [
        tagged("UPTIME", uptime),
        tagged(
            "NO-HELLO",
            "if command -v hello; then exit 1; else echo absent; fi",
        ),
        client("PP-CLIENT", "ibv_rc_pingpong -d ibtca0 n1", 120),
    ];
    let Booted { out, said, took } = boot.up(
        &["--guest-timeout", "900"],
        &[("n1", &n1[..]), ("n2", &n2[..])],
    );
    let (c1, c2) = (boot.console("n1"), boot.console("n2"));
    let all = boot.all(&said, &["n1", "n2"]);
    eprintln!(
        "two Debian-root guests: {:.0} s; boot to the first command: n1 {:?} s, n2 {:?} s",
        took.as_secs_f64(),
        tagged_lines(&c1, "UPTIME"),
        tagged_lines(&c2, "UPTIME"),
    );
    assert!(out.status.success(), "{all}");
    for (n, c) in [("n1", &c1), ("n2", &c2)] {
        assert!(
            c.contains("IBTCA-ROOT mounted ibtca_root") && c.contains("IBTCA-GUEST debian-root"),
            "{n} did not boot the Debian root:\n{all}"
        );
    }
    assert!(
        c1.contains("IBTCA-ROOT mounted ibtca_root ibtca_layer"),
        "n1 has no layer:\n{all}"
    );
    assert!(
        !c2.contains("ibtca_layer"),
        "n2 asked for no package:\n{all}"
    );
    assert_eq!(
        tagged_lines(&c1, "HELLO"),
        ["Hello, world!", "exit=0"],
        "{all}"
    );
    assert_eq!(tagged_lines(&c2, "NO-HELLO"), ["absent", "exit=0"], "{all}");
    assert_eq!(tagged_lines(&c1, "MODPROBE"), ["1", "exit=0"], "{all}");
    assert_eq!(
        tagged_lines(&c1, "WRITE"),
        [token.as_str(), "exit=0"],
        "{all}"
    );
    // ibv_rc_pingpong prints its rate and iterations at the end, both ends.
    for (c, tag) in [(&c1, "PP-SERVER"), (&c2, "PP-CLIENT")] {
        let lines = tagged_lines(c, tag);
        assert!(
            lines.iter().any(|l| l.contains("1000 iters in")),
            "{tag}: {lines:?}\n{all}"
        );
        assert_eq!(lines.last(), Some(&"exit=0"), "{all}");
    }

    // The guest's writes stayed in its RAM: not in the chroot, not in the
    // layer.
    for base in std::iter::once(stack.chroot.clone()).chain(layer_uppers()) {
        for sub in ["etc", "usr"] {
            let f = base.join(sub).join(&etc_file);
            assert!(!f.exists(), "the guest's write reached the host: {f:?}");
        }
    }
    let view = run.join("root");
    assert!(
        mounted(&view),
        "the root view is not mounted during the run"
    );
    boot.down();
    assert!(!mounted(&view), "down left the root view mounted");
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .contains(&format!("{}/layer-", run.display())),
        "down left a layer mounted"
    );

    // A later run asking for the same packages (in any order, repeated)
    // reuses the layer: the script finds it by its key and installs
    // nothing.
    let again = std::process::Command::new("bash")
        .arg(stack.repo().join("scripts/guest-layer.sh"))
        .args(["hello", "hello"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{said}");
    assert!(said.contains("[guest-layer] reusing "), "{said}");
    assert!(!said.contains("installing"), "{said}");
    let upper = PathBuf::from(String::from_utf8_lossy(&again.stdout).trim());
    assert!(layer_uppers().contains(&upper), "{upper:?}");
}

/// The upper directories of every cached package layer.
fn layer_uppers() -> Vec<PathBuf> {
    let cache = std::env::var_os("IBTCA_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/ibtca")
        });
    std::fs::read_dir(cache.join("layers"))
        .map(|d| d.flatten().map(|e| e.path().join("upper")).collect())
        .unwrap_or_default()
}
