//! `scripts/demo-storage.sh` without a VM: its `--help` names its options,
//! and a bad argument (an unknown one, a transport other than rxe or
//! ibtca, `--transport` without a value) exits 2 before the script sets
//! up the VM stack, builds or boots anything. The demo itself boots two
//! guests: its guest commands are scripts/ulp-guest.sh's, which
//! `vm_ulp` runs (docs/ulp.md).

use ibtca_tests::script_cli;
use ibtca_tests::TempDir;

#[test]
fn help_and_bad_arguments() {
    // A cache with no VM stack: a bad argument that got as far as the
    // set-up would try to install one there instead of exiting 2.
    let cache = TempDir::new("demo-storage-cache");
    let cache = cache.0.display().to_string();
    script_cli::help_and_bad_options(
        "demo-storage.sh",
        &["--transport rxe", "--keep"],
        &[
            &["--bogus"],
            &["--transport", "roce"],
            &["--transport"],
            &["extra"],
        ],
        &[("IBTCA_CACHE", &cache), ("IBTCA_FABRIC", "/nonexistent")],
    );
}
