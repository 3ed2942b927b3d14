//! The kernels ibtca.ko builds against (README, docs/own-kernel.md,
//! "Supported kernels"): `guest-driver/kernel/ibtca_compat.h` stops the
//! build against a kernel older than 6.12 or newer than 7.3 with an
//! `#error` naming the range, lets both ends through, and lets a newer
//! kernel through with `IBTCA_UNTESTED_KERNEL`. The header is preprocessed
//! by the host's `cc` against a stand-in `<linux/version.h>` of each
//! version, so no kernel headers are needed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Preprocesses ibtca_compat.h as if built against Linux `a.b.c`; the
/// preprocessor's messages if it stopped.
fn build_against(a: u32, b: u32, c: u32, untested: bool) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!(
        "ibtca-kernel-range-{}-{a}.{b}.{c}-{untested}",
        std::process::id()
    ));
    std::fs::create_dir_all(dir.join("linux")).unwrap();
    std::fs::write(
        dir.join("linux/version.h"),
        format!(
            "#define KERNEL_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + ((c) > 255 ? 255 : (c)))\n\
             #define LINUX_VERSION_CODE KERNEL_VERSION({a}, {b}, {c})\n"
        ),
    )
    .unwrap();
    let header: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-driver/kernel/ibtca_compat.h");
    let mut cc = Command::new("cc");
    cc.args(["-E", "-nostdinc", "-o", "/dev/null", "-I"])
        .arg(&dir)
        .arg(&header);
    if untested {
        cc.arg("-DIBTCA_UNTESTED_KERNEL");
    }
    let out = cc.output().expect("cc (the C compiler Rust links with)");
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn both_ends_of_the_range_build() {
    for (a, b, c) in [(6, 12, 0), (6, 12, 117), (7, 3, 0), (7, 3, 255)] {
        assert_eq!(build_against(a, b, c, false), Ok(()), "{a}.{b}.{c}");
    }
}

#[test]
fn a_kernel_outside_the_range_stops_the_build_naming_it() {
    let e = build_against(6, 11, 255, false).unwrap_err();
    assert!(
        e.contains("ibtca supports Linux 6.12 to 7.3: this kernel is older"),
        "{e}"
    );
    let e = build_against(7, 4, 0, false).unwrap_err();
    assert!(
        e.contains("ibtca supports Linux 6.12 to 7.3: this kernel is newer"),
        "{e}"
    );
    assert_eq!(
        build_against(7, 4, 0, true),
        Ok(()),
        "IBTCA_UNTESTED_KERNEL"
    );
    assert!(
        build_against(6, 11, 0, true).is_err(),
        "IBTCA_UNTESTED_KERNEL lets only newer kernels through"
    );
}
