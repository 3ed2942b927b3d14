//! The Debian root's host side ([`crate::guest_root`]): building the
//! package layers, mounting the root view and the layers into the run
//! directory, and the 9p exports and kernel command line of each
//! Debian-root guest.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::guest_extras::in_chroot;
use super::guest_root::{Root, RootError, LAYER_TAG, ROOT_TAG};
use super::guest_run::virtfs;
use super::guests::GuestPlan;
use super::state::State;

/// The script that builds package layers, next to `scripts/run-vm.sh`.
pub const LAYER_SCRIPT: &str = "guest-layer.sh";

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RootError {
    let what = what.into();
    move |source| RootError::Io { what, source }
}

/// Builds or reuses the package layer of every Debian-root guest that asks
/// for packages, with `script` (`scripts/guest-layer.sh`, whose progress
/// and errors go to our stderr). Runs before anything starts.
pub fn build_layers(plans: &mut [GuestPlan], script: &Path) -> Result<(), RootError> {
    // One run of the script per distinct list; guests with the same list
    // share its layer.
    let mut built: Vec<(Vec<String>, PathBuf)> = Vec::new();
    for g in plans.iter_mut() {
        let Root::Debian { packages, layer } = &mut g.root else {
            continue;
        };
        if packages.is_empty() {
            continue;
        }
        if let Some((_, dir)) = built.iter().find(|(p, _)| p == packages) {
            *layer = Some(dir.clone());
            continue;
        }
        if !script.is_file() {
            return Err(RootError::NoLayerScript(script.to_path_buf()));
        }
        let out = Command::new("bash")
            .arg(script)
            .args(packages.iter())
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(io_err(format!("running {}", script.display())))?;
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || dir.is_empty() {
            return Err(RootError::Layer {
                packages: packages.join(" "),
                status: out.status.to_string(),
            });
        }
        *layer = Some(PathBuf::from(&dir));
        built.push((packages.clone(), PathBuf::from(dir)));
    }
    Ok(())
}

fn mount(args: &[&str]) -> Result<(), RootError> {
    let st = Command::new("mount")
        .args(args)
        .status()
        .map_err(io_err("running mount"))?;
    if st.success() {
        Ok(())
    } else {
        Err(RootError::Io {
            what: format!("mount {}", args.join(" ")),
            source: io::Error::other(format!("{st} (needs root)")),
        })
    }
}

/// A read-only bind mount of `from` (not what is mounted below it) on
/// `point`.
fn bind_ro(from: &Path, point: &Path) -> Result<(), RootError> {
    fs::create_dir_all(point).map_err(io_err(format!("creating {}", point.display())))?;
    let (from, to) = (from.display().to_string(), point.display().to_string());
    mount(&["--bind", &from, &to])?;
    mount(&["-o", "remount,bind,ro", &to])
}

/// Mounts the root view and the layers the Debian-root guests need into
/// `run_dir` (recorded in `state`, saved) and gives those guests their
/// 9p exports and kernel command line.
pub fn prepare(
    plans: &mut [GuestPlan],
    state: &mut State,
    chroot: &Path,
    run_dir: &Path,
) -> Result<(), RootError> {
    if !plans.iter().any(|g| matches!(g.root, Root::Debian { .. })) {
        return Ok(());
    }
    let save = |state: &State| {
        state
            .save(run_dir)
            .map_err(io_err("writing the state file"))
    };
    let view = run_dir.join("root");
    bind_ro(chroot, &view)?;
    state.mounts.push(view.clone());
    save(state)?;
    // `down` detaches the view with this tmpfs on it.
    let tmp = view.join("tmp").display().to_string();
    mount(&[
        "-t",
        "tmpfs",
        "-o",
        "ro,size=4k,mode=0755",
        "ibtca-hide",
        &tmp,
    ])?;
    let ro = ",readonly=on,multidevs=remap";
    let root_args = virtfs(&in_chroot(&view, chroot), ROOT_TAG, ro).map_err(|e| RootError::Io {
        what: "exporting the root".into(),
        source: io::Error::other(e.to_string()),
    })?;
    let mut mounted: Vec<(PathBuf, PathBuf)> = Vec::new();
    for g in plans.iter_mut() {
        let Root::Debian { layer, .. } = &g.root else {
            continue;
        };
        g.qemu_args.extend(root_args.iter().cloned());
        let mut more = format!("ibtca.root={ROOT_TAG}");
        if let Some(layer) = layer {
            let point = match mounted.iter().find(|(l, _)| l == layer) {
                Some((_, p)) => p.clone(),
                None => {
                    let key = layer
                        .parent()
                        .and_then(Path::file_name)
                        .map(|k| k.to_string_lossy().into_owned())
                        .unwrap_or_else(|| "packages".into());
                    let p = run_dir.join(format!("layer-{key}"));
                    bind_ro(layer, &p)?;
                    state.mounts.push(p.clone());
                    save(state)?;
                    mounted.push((layer.clone(), p.clone()));
                    p
                }
            };
            g.qemu_args.extend(
                virtfs(&in_chroot(&point, chroot), LAYER_TAG, ro).map_err(|e| RootError::Io {
                    what: "exporting the package layer".into(),
                    source: io::Error::other(e.to_string()),
                })?,
            );
            more.push_str(&format!(" ibtca.layer={LAYER_TAG}"));
        }
        g.append = format!("{} {more}", g.append).trim().to_owned();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn plan(node: &str, packages: &[&str]) -> GuestPlan {
        GuestPlan {
            node: node.into(),
            socket: PathBuf::new(),
            kernel: PathBuf::new(),
            initrd: PathBuf::new(),
            mem: "512M".into(),
            append: String::new(),
            console: PathBuf::new(),
            console_socket: None,
            log: PathBuf::new(),
            timeout: Duration::from_secs(1),
            cpus: None,
            nice: None,
            qemu_args: Vec::new(),
            root: Root::Debian {
                packages: packages.iter().map(|p| (*p).to_owned()).collect(),
                layer: None,
            },
        }
    }

    fn layer(g: &GuestPlan) -> Option<PathBuf> {
        match &g.root {
            Root::Debian { layer, .. } => layer.clone(),
            Root::Initramfs => None,
        }
    }

    #[test]
    fn one_layer_per_package_list_and_the_script_s_failure_is_reported() {
        let dir = std::env::temp_dir().join(format!("ibtca-layers-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        // A stand-in for guest-layer.sh: logs each call, prints a
        // directory named after its arguments.
        let script = dir.join("layer.sh");
        let calls = dir.join("calls");
        fs::write(
            &script,
            format!(
                "echo \"$*\" >>{c}\n[ \"$1\" = bad ] && exit 3\necho /layers/$(echo \"$*\" | tr ' ' _)/upper\n",
                c = calls.display()
            ),
        )
        .unwrap();
        let mut plans = [
            plan("a", &["hello", "jq"]),
            plan("b", &[]),
            plan("c", &["hello", "jq"]),
            plan("d", &["fio"]),
        ];
        build_layers(&mut plans, &script).unwrap();
        let got: Vec<Option<PathBuf>> = plans.iter().map(layer).collect();
        assert_eq!(
            got,
            [
                Some("/layers/hello_jq/upper".into()),
                None,
                Some("/layers/hello_jq/upper".into()),
                Some("/layers/fio/upper".into()),
            ]
        );
        assert_eq!(fs::read_to_string(&calls).unwrap(), "hello jq\nfio\n");
        let e = build_layers(&mut [plan("e", &["bad"])], &script).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("installing the guest packages bad failed (exit status: 3)"),
            "{e}"
        );
        let e = build_layers(&mut [plan("e", &["x"])], &dir.join("none.sh")).unwrap_err();
        assert!(e.to_string().contains("none.sh not found"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
