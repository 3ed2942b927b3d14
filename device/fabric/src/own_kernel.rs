//! Guests on a kernel of the user's own (`up --guests --kernel-tree DIR`,
//! `up --guests --kernel IMAGE --modules DIR`; docs/own-kernel.md): the
//! kernel's configuration is checked for what the guest needs before
//! anything starts, then `scripts/build-guest.sh` builds ibtca.ko out of
//! tree against the kernel and packs it, with the kernel's own RDMA core
//! and virtio modules, into a guest image cached under
//! `$IBTCA_CACHE/kernels/` (rebuilt only when the kernel's build or the
//! driver's sources change).

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSource {
    /// A built kernel tree: `arch/x86/boot/bzImage`, modules built in
    /// place, `.config`.
    Tree(PathBuf),
    /// A kernel image and its module directory (`/lib/modules/KVER`
    /// style, whose `build/` is the tree or headers it was built with).
    Image {
        /// The kernel image.
        image: PathBuf,
        /// The module directory.
        modules: PathBuf,
    },
}

/// Why an own kernel cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnKernelError {
    /// The arguments name no usable kernel, or its configuration lacks
    /// what the guest needs (exit status 2).
    #[error("{0}")]
    Bad(String),
    /// Building the module or the guest image failed (exit status 1).
    #[error("{0}")]
    Build(String),
}

/// One kernel option the guest needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Requirement {
    /// The option without `CONFIG_`.
    pub option: &'static str,
    /// `y` only (`false`: `y` or `m`).
    pub builtin: bool,
    /// What needs it.
    pub why: &'static str,
}

const fn req(option: &'static str, builtin: bool, why: &'static str) -> Requirement {
    Requirement {
        option,
        builtin,
        why,
    }
}

/// Every option the guest needs, with why (docs/own-kernel.md lists them).
pub const REQUIRED: &[Requirement] = &[
    req("X86_64", true, "QEMU boots an x86-64 guest"),
    req("BLK_DEV_INITRD", true, "the guest's root is an initramfs"),
    req("RD_GZIP", true, "the initramfs is gzip-compressed"),
    req("DEVTMPFS", true, "/init mounts devtmpfs"),
    req("SERIAL_8250_CONSOLE", true, "the console is ttyS0"),
    req("MODULES", true, "ibtca.ko is a module"),
    req("MODULE_UNLOAD", true, "the tests unload ibtca.ko"),
    req("PCI", true, "the ibtca device is a PCI device"),
    req("PCI_MSI", true, "ibtca.ko takes its interrupts as MSI-X"),
    req(
        "VIRTIO_PCI",
        true,
        "the management NIC and the 9p shares are virtio PCI devices",
    ),
    req("NET", true, "the management network"),
    req("INET", true, "the management network is IPv4"),
    req("VIRTIO_NET", false, "the management NIC"),
    req(
        "NET_9P",
        false,
        "the configuration directory and --share (virtio-9p)",
    ),
    req(
        "NET_9P_VIRTIO",
        false,
        "the configuration directory and --share (virtio-9p)",
    ),
    req(
        "9P_FS",
        false,
        "the configuration directory and --share (virtio-9p)",
    ),
    req(
        "INFINIBAND",
        false,
        "the RDMA core (ib_core), which ibtca.ko registers with",
    ),
    req(
        "INFINIBAND_USER_ACCESS",
        false,
        "user verbs (ib_uverbs): libibverbs and the ibtca provider",
    ),
];

/// What a guest whose root is the VM stack's Debian system
/// ([`crate::guest_root`]) needs besides [`REQUIRED`]: its writes go to an
/// overlay in guest RAM.
pub const DEBIAN_ROOT_REQUIRED: &[Requirement] = &[
    req(
        "OVERLAY_FS",
        false,
        "a Debian-root guest writes to an overlay over its read-only root",
    ),
    req(
        "TMPFS",
        true,
        "a Debian-root guest's overlay keeps its writes in guest RAM",
    ),
];

/// The `.config` of `src`.
pub fn config_path(src: &KernelSource) -> PathBuf {
    match src {
        KernelSource::Tree(dir) => dir.join(".config"),
        KernelSource::Image { modules, .. } => modules.join("build/.config"),
    }
}

/// The options of [`REQUIRED`] (and of [`DEBIAN_ROOT_REQUIRED`] when a
/// guest boots the Debian root) that `config` (a `.config`'s text) lacks,
/// each as `CONFIG_X=y` or `CONFIG_X=y|m` with why.
pub fn missing(config: &str, debian_root: bool) -> Vec<String> {
    let value = |opt: &str| {
        let key = format!("CONFIG_{opt}=");
        config
            .lines()
            .find_map(|l| l.trim().strip_prefix(key.as_str()))
            .map(str::to_owned)
    };
    let extra = if debian_root {
        DEBIAN_ROOT_REQUIRED
    } else {
        &[]
    };
    REQUIRED
        .iter()
        .chain(extra)
        .filter(|r| match value(r.option).as_deref() {
            Some("y") => false,
            Some("m") => r.builtin,
            _ => true,
        })
        .map(|r| {
            let want = if r.builtin { "y" } else { "y|m" };
            format!("CONFIG_{}={want} ({})", r.option, r.why)
        })
        .collect()
}

/// Checks that `src` names a kernel and that its configuration has every
/// option of [`REQUIRED`] (and of [`DEBIAN_ROOT_REQUIRED`] when
/// `debian_root`); names every missing one.
pub fn check(src: &KernelSource, debian_root: bool) -> Result<(), OwnKernelError> {
    let bad = |m: String| Err(OwnKernelError::Bad(m));
    match src {
        KernelSource::Tree(dir) => {
            if !dir.is_dir() {
                return bad(format!(
                    "--kernel-tree {}: no such directory",
                    dir.display()
                ));
            }
            if !dir.join("arch/x86/boot/bzImage").is_file() {
                return bad(format!(
                    "--kernel-tree {}: no arch/x86/boot/bzImage (build the kernel there first)",
                    dir.display()
                ));
            }
        }
        KernelSource::Image { image, modules } => {
            if !image.is_file() {
                return bad(format!("--kernel {}: no such file", image.display()));
            }
            if !modules.join("build").is_dir() {
                return bad(format!(
                    "--modules {}: no build/ (the tree or headers the kernel was built with)",
                    modules.display()
                ));
            }
        }
    }
    let path = config_path(src);
    let text = fs::read_to_string(&path)
        .map_err(|e| OwnKernelError::Bad(format!("cannot read {}: {e}", path.display())))?;
    let lacks = missing(&text, debian_root);
    if lacks.is_empty() {
        return Ok(());
    }
    bad(format!(
        "{} lacks what the guest needs (docs/own-kernel.md): {}",
        path.display(),
        lacks.join(", ")
    ))
}

/// The cached guest image of `src` in `cache`: `kernels/` and a hash of
/// the kernel's paths and of `build_guest`'s (one image per kernel and
/// checkout; build-guest.sh rebuilds it when its inputs change).
pub fn image_dir(cache: &Path, build_guest: &Path, src: &KernelSource) -> PathBuf {
    let canon = |p: &Path| fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut h = DefaultHasher::new();
    canon(build_guest).hash(&mut h);
    match src {
        KernelSource::Tree(dir) => ("tree", canon(dir)).hash(&mut h),
        KernelSource::Image { image, modules } => {
            ("image", canon(image), canon(modules)).hash(&mut h)
        }
    }
    cache.join("kernels").join(format!("{:016x}", h.finish()))
}

/// The arguments of `scripts/build-guest.sh` for `src` into `out`.
pub fn build_args(src: &KernelSource, tests: bool, out: &Path) -> Vec<String> {
    let mut args = match src {
        KernelSource::Tree(dir) => vec!["--kernel-tree".into(), dir.display().to_string()],
        KernelSource::Image { image, modules } => vec![
            "--kernel".into(),
            image.display().to_string(),
            "--modules".into(),
            modules.display().to_string(),
        ],
    };
    if tests {
        args.push("--tests".into());
    }
    args.push(out.display().to_string());
    args
}

/// Builds (or finds cached) the guest image of `src` with `build_guest`
/// (`scripts/build-guest.sh`, its messages to stderr); returns its
/// directory, holding `vmlinuz` and `initramfs.cpio.gz`.
pub fn build(
    build_guest: &Path,
    cache: &Path,
    src: &KernelSource,
    tests: bool,
) -> Result<PathBuf, OwnKernelError> {
    let out = image_dir(cache, build_guest, src);
    let status = Command::new("bash")
        .arg(build_guest)
        .args(build_args(src, tests, &out))
        .status()
        .map_err(|e| OwnKernelError::Build(format!("cannot run {}: {e}", build_guest.display())))?;
    match status.code() {
        Some(0) => Ok(out),
        Some(2) => Err(OwnKernelError::Bad(format!(
            "{} refused the kernel (see its message above)",
            build_guest.display()
        ))),
        _ => Err(OwnKernelError::Build(format!(
            "building ibtca.ko and the guest image for the own kernel failed ({status}; {} above)",
            build_guest.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_config() -> String {
        REQUIRED
            .iter()
            .map(|r| format!("CONFIG_{}=y\n", r.option))
            .collect()
    }

    #[test]
    fn a_config_with_every_option_lacks_nothing() {
        assert!(missing(&full_config(), false).is_empty());
    }

    #[test]
    fn every_missing_option_is_named_with_why() {
        let cfg = full_config()
            .replace("CONFIG_VIRTIO_PCI=y", "# CONFIG_VIRTIO_PCI is not set")
            .replace("CONFIG_INFINIBAND=y\n", "")
            .replace("CONFIG_PCI_MSI=y", "CONFIG_PCI_MSI=m");
        let m = missing(&cfg, false);
        assert_eq!(
            m,
            [
                "CONFIG_PCI_MSI=y (ibtca.ko takes its interrupts as MSI-X)",
                "CONFIG_VIRTIO_PCI=y (the management NIC and the 9p shares are virtio PCI devices)",
                "CONFIG_INFINIBAND=y|m (the RDMA core (ib_core), which ibtca.ko registers with)",
            ]
        );
    }

    #[test]
    fn a_debian_root_guest_also_needs_the_overlay() {
        assert!(missing(&full_config(), false).is_empty());
        assert_eq!(
            missing(&full_config(), true),
            [
                "CONFIG_OVERLAY_FS=y|m (a Debian-root guest writes to an overlay over its read-only root)",
                "CONFIG_TMPFS=y (a Debian-root guest's overlay keeps its writes in guest RAM)",
            ]
        );
        let cfg = full_config() + "CONFIG_OVERLAY_FS=m\nCONFIG_TMPFS=y\n";
        assert!(missing(&cfg, true).is_empty());
    }

    #[test]
    fn modules_count_where_a_module_will_do() {
        let cfg = full_config().replace("CONFIG_INFINIBAND=y", "CONFIG_INFINIBAND=m");
        assert!(missing(&cfg, false).is_empty());
    }

    #[test]
    fn check_reads_the_tree_config_and_refuses_a_bad_tree() {
        let dir = std::env::temp_dir().join(format!("ibtca-own-kernel-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let tree = KernelSource::Tree(dir.clone());
        assert!(
            matches!(check(&tree, false), Err(OwnKernelError::Bad(m)) if m.contains("no such directory"))
        );
        fs::create_dir_all(dir.join("arch/x86/boot")).unwrap();
        assert!(
            matches!(check(&tree, false), Err(OwnKernelError::Bad(m)) if m.contains("bzImage"))
        );
        fs::write(dir.join("arch/x86/boot/bzImage"), b"k").unwrap();
        fs::write(
            dir.join(".config"),
            full_config().replace("CONFIG_9P_FS=y", ""),
        )
        .unwrap();
        match check(&tree, false) {
            Err(OwnKernelError::Bad(m)) => {
                assert!(m.contains("CONFIG_9P_FS=y|m"), "{m}");
                assert!(!m.contains("CONFIG_NET_9P="), "{m}");
            }
            other => panic!("{other:?}"),
        }
        fs::write(dir.join(".config"), full_config()).unwrap();
        assert_eq!(check(&tree, false), Ok(()));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn image_and_modules_need_a_build_directory() {
        let dir = std::env::temp_dir().join(format!("ibtca-own-modules-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("mods")).unwrap();
        fs::write(dir.join("vmlinuz"), b"k").unwrap();
        let src = KernelSource::Image {
            image: dir.join("vmlinuz"),
            modules: dir.join("mods"),
        };
        assert!(
            matches!(check(&src, false), Err(OwnKernelError::Bad(m)) if m.contains("no build/"))
        );
        fs::create_dir_all(dir.join("mods/build")).unwrap();
        fs::write(dir.join("mods/build/.config"), full_config()).unwrap();
        assert_eq!(check(&src, false), Ok(()));
        assert_eq!(
            build_args(&src, true, Path::new("/o")),
            [
                "--kernel".to_owned(),
                dir.join("vmlinuz").display().to_string(),
                "--modules".into(),
                dir.join("mods").display().to_string(),
                "--tests".into(),
                "/o".into(),
            ]
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn each_kernel_has_its_own_cached_image() {
        let (c, s) = (Path::new("/c"), Path::new("/s/build-guest.sh"));
        let a = image_dir(c, s, &KernelSource::Tree("/a".into()));
        assert!(a.starts_with("/c/kernels"));
        assert_eq!(a, image_dir(c, s, &KernelSource::Tree("/a".into())));
        assert_ne!(a, image_dir(c, s, &KernelSource::Tree("/b".into())));
        let other_checkout = Path::new("/t/build-guest.sh");
        assert_ne!(
            a,
            image_dir(c, other_checkout, &KernelSource::Tree("/a".into()))
        );
    }
}
