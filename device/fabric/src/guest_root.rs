//! Guests whose root is the VM stack's Debian system (`"guest": {"root":
//! "debian"}`, docs/guest-root.md) and the package layers stacked on it.
//!
//! The kernel boots the bundled initramfs as usual; its `/init` sees
//! `ibtca.root=ibtca_root` (and `ibtca.layer=ibtca_layer`), mounts the
//! exports read-only over virtio-9p under a tmpfs overlay in guest RAM
//! and switches to it (`guest-driver/initramfs/ibtca-mount-root`), so the
//! guest's writes never reach the host.
//!
//! What is exported is not the chroot QEMU runs in but a view of it made
//! here, `root/` in the run directory: a read-only bind mount of the
//! chroot's own file system (none of the proc, sys, dev or share mounts
//! below it) with an empty tmpfs over its `/tmp`, where the run
//! directories of this and other fabrics live (their consoles and
//! configuration directories stay out of every guest's reach).
//!
//! Packages (the file's, the node's and `--guest-packages`) are installed
//! by `scripts/guest-layer.sh` into a layer cached in
//! `$IBTCA_CACHE/layers/` and keyed by the package list, before anything
//! starts; the layer is bind-mounted read-only to `layer-KEY/` in the run
//! directory for QEMU. `down` undoes the mounts (the state file records
//! them). Here: which root a guest gets; [`crate::guest_root_mounts`]:
//! the layers, the mounts and the QEMU arguments.

use std::collections::BTreeSet;
use std::io;
use std::path::PathBuf;

use super::topology::{GuestSpec, NodeGuestSpec};

/// The 9p tag of the Debian root.
pub const ROOT_TAG: &str = "ibtca_root";
/// The 9p tag of a guest's package layer.
pub const LAYER_TAG: &str = "ibtca_layer";

/// What a guest's root file system is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Root {
    /// The bundled initramfs (`scripts/build-guest.sh`).
    #[default]
    Initramfs,
    /// The VM stack's Debian system with these packages layered on it
    /// (sorted, no repeats), and the layer once built.
    Debian {
        /// The packages asked for.
        packages: Vec<String>,
        /// The layer's directory on the host
        /// ([`crate::guest_root_mounts::build_layers`]).
        layer: Option<PathBuf>,
    },
}

/// Why a Debian root or its packages cannot be given.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// `"root"` is neither `initramfs` nor `debian`.
    #[error("guest `{node}`: unknown root `{root}` (use \"initramfs\" or \"debian\")")]
    BadRoot {
        /// The node.
        node: String,
        /// The text.
        root: String,
    },
    /// Packages for a guest that boots the initramfs.
    #[error("guest `{node}`: packages ({packages}) need `\"root\": \"debian\"`; the initramfs has a fixed set of programs")]
    PackagesNeedDebian {
        /// The node.
        node: String,
        /// The packages.
        packages: String,
    },
    /// `scripts/guest-layer.sh` is not where it should be.
    #[error("{0} not found (it sits next to scripts/run-vm.sh)")]
    NoLayerScript(PathBuf),
    /// The layer script failed; it said why on stderr.
    #[error("installing the guest packages {packages} failed ({status}); scripts/guest-layer.sh said why above")]
    Layer {
        /// The packages.
        packages: String,
        /// Its exit status.
        status: String,
    },
    /// A mount or file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

/// The root of guest `node`: its own `root`, else the file's, else
/// `debian` when any packages are asked for (the file's, the node's,
/// `extra` from `--guest-packages`), else the initramfs.
pub fn root(
    node: &str,
    file: &GuestSpec,
    own: Option<&NodeGuestSpec>,
    extra: &[String],
) -> Result<Root, RootError> {
    let packages: BTreeSet<String> = file
        .packages
        .iter()
        .chain(own.map(|o| &o.packages).into_iter().flatten())
        .chain(extra)
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let packages: Vec<String> = packages.into_iter().collect();
    let asked = own.and_then(|o| o.root.as_deref()).or(file.root.as_deref());
    match asked {
        Some("debian") => Ok(Root::Debian {
            packages,
            layer: None,
        }),
        None if !packages.is_empty() => Ok(Root::Debian {
            packages,
            layer: None,
        }),
        Some("initramfs") | None if packages.is_empty() => Ok(Root::Initramfs),
        Some("initramfs") | None => Err(RootError::PackagesNeedDebian {
            node: node.to_owned(),
            packages: packages.join(" "),
        }),
        Some(other) => Err(RootError::BadRoot {
            node: node.to_owned(),
            root: other.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(root: Option<&str>, packages: &[&str]) -> NodeGuestSpec {
        NodeGuestSpec {
            root: root.map(str::to_owned),
            packages: packages.iter().map(|p| (*p).to_owned()).collect(),
            ..NodeGuestSpec::default()
        }
    }

    #[test]
    fn the_root_follows_node_file_and_packages() {
        let file = GuestSpec::default();
        assert_eq!(root("a", &file, None, &[]).unwrap(), Root::Initramfs);
        let debian = |p: &[&str]| Root::Debian {
            packages: p.iter().map(|s| (*s).to_owned()).collect(),
            layer: None,
        };
        assert_eq!(
            root("a", &file, Some(&node(Some("debian"), &[])), &[]).unwrap(),
            debian(&[])
        );
        // Packages alone ask for the Debian root; lists merge, sorted.
        let file = GuestSpec {
            packages: vec!["jq".into(), "hello".into()],
            ..GuestSpec::default()
        };
        assert_eq!(
            root(
                "a",
                &file,
                Some(&node(None, &["fio", "jq"])),
                &["tree".into()]
            )
            .unwrap(),
            debian(&["fio", "hello", "jq", "tree"])
        );
        let e = root("a", &file, Some(&node(Some("initramfs"), &[])), &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("guest `a`: packages (hello jq) need `\"root\": \"debian\"`"),
            "{e}"
        );
        let e = root(
            "b",
            &GuestSpec::default(),
            Some(&node(Some("ubuntu"), &[])),
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown root `ubuntu`"), "{e}");
    }
}
