//! Booting one QEMU guest per node (`ibtca-fabric up --guests`) through
//! `scripts/run-vm.sh`, which runs the QEMU of the VM-stack chroot
//! (`scripts/setup-vm-stack.sh`): its sockets and consoles must therefore be
//! inside that chroot, which [`VmStack::find`] and [`resolve`] check before
//! anything starts.
//!
//! What each guest boots: kernel, initramfs, RAM and kernel command line
//! come from the node's own `guest` entry in the topology file, then the
//! command line (`--kernel`, `--initrd`, `--append NODE=TEXT`), then the
//! file's `guest` section, then the bundled guest that
//! `scripts/build-guest.sh` builds into `$IBTCA_GUEST_DIR` (default
//! `$IBTCA_CACHE/guest`). Kernel command lines add up (file, node, command
//! line); the rest is the first one given. The root file system, the
//! initramfs or the VM stack's Debian system, is [`guest_root`]'s.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guest_root::{self, Root};
use super::plan::NodePlan;
use super::topology::{GuestSpec, Topology};

/// Why guests cannot be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestError {
    /// No VM stack installed.
    #[error("no VM stack in {0} (stack.env missing): run scripts/setup-vm-stack.sh")]
    NoStack(PathBuf),
    /// The stack's chroot has no QEMU.
    #[error("the VM stack's chroot {0} has no usr/bin/qemu-system-x86_64: run scripts/setup-vm-stack.sh")]
    NoQemu(PathBuf),
    /// `scripts/run-vm.sh` was not found.
    #[error("scripts/run-vm.sh not found (looked at {0}); pass --run-vm PATH or set IBTCA_RUN_VM")]
    NoRunVm(String),
    /// A guest kernel or initramfs is missing.
    #[error(
        "guest `{node}`: {what} {path} not found (scripts/build-guest.sh builds the bundled guest)"
    )]
    MissingFile {
        /// The node.
        node: String,
        /// kernel or initramfs.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// The run directory is outside the chroot QEMU runs in.
    #[error("with --guests the run directory must be inside the VM-stack chroot {chroot} (QEMU runs chrooted and must see the sockets), e.g. {chroot}/tmp/fab; {run_dir} is not")]
    OutsideChroot {
        /// The chroot.
        chroot: PathBuf,
        /// The run directory.
        run_dir: PathBuf,
    },
    /// `--append NODE=TEXT` (or a `--kernel`-style option) names no node.
    #[error("`{0}` names no node of the topology (NODE=VALUE)")]
    UnknownNode(String),
    /// A root or packages that cannot be given ([`guest_root::root`]).
    #[error("{0}")]
    Root(String),
    /// A guest RAM size QEMU would not take.
    #[error("guest `{node}`: bad RAM size `{mem}` (e.g. 512M, 1G)")]
    BadMem {
        /// The node.
        node: String,
        /// The text.
        mem: String,
    },
}

/// The installed VM stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmStack {
    /// Root of the chroot QEMU runs in (canonical).
    pub chroot: PathBuf,
    /// Directory of the bundled guest's `vmlinuz` and `initramfs.cpio.gz`.
    pub guest_dir: PathBuf,
}

/// `$IBTCA_CACHE`, default `~/.cache/ibtca`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("IBTCA_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into()))
                .join(".cache/ibtca")
        })
}

impl VmStack {
    /// Finds the stack `scripts/setup-vm-stack.sh` installed in `cache`.
    pub fn find(cache: &Path) -> Result<VmStack, GuestError> {
        let env = fs::read_to_string(cache.join("stack.env"))
            .map_err(|_| GuestError::NoStack(cache.to_path_buf()))?;
        let chroot = env
            .lines()
            .find_map(|l| l.strip_prefix("IBTCA_CHROOT="))
            .map(|v| PathBuf::from(v.trim().trim_matches('"')))
            .ok_or_else(|| GuestError::NoStack(cache.to_path_buf()))?;
        let chroot = fs::canonicalize(&chroot).map_err(|_| GuestError::NoQemu(chroot.clone()))?;
        if !chroot.join("usr/bin/qemu-system-x86_64").exists() {
            return Err(GuestError::NoQemu(chroot));
        }
        let guest_dir = std::env::var_os("IBTCA_GUEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| cache.join("guest"));
        Ok(VmStack { chroot, guest_dir })
    }
}

/// Guest options from the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestOptions {
    /// Kernel for every guest.
    pub kernel: Option<PathBuf>,
    /// Initramfs for every guest.
    pub initrd: Option<PathBuf>,
    /// Kernel command line additions: (node, text); node `None` for all.
    pub append: Vec<(Option<String>, String)>,
    /// Upper bound of each guest's life (run-vm.sh `--timeout`).
    pub timeout: Duration,
    /// Debian packages for every guest (`--guest-packages`).
    pub packages: Vec<String>,
}

/// Parses `--append [NODE=]TEXT`: `NODE=` only when NODE is a node of the
/// topology (a kernel parameter such as `ibtca.mode=verbs` contains `=`
/// too), otherwise the text is for every guest.
pub fn parse_append(topo: &Topology, text: &str) -> (Option<String>, String) {
    if let Some((node, rest)) = text.split_once('=') {
        if topo.nodes.iter().any(|n| n.name == node) {
            return (Some(node.to_owned()), rest.to_owned());
        }
    }
    (None, text.to_owned())
}

/// Everything needed to boot one node's guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestPlan {
    /// Node name.
    pub node: String,
    /// The node's vfio-user socket.
    pub socket: PathBuf,
    /// Kernel.
    pub kernel: PathBuf,
    /// Initramfs.
    pub initrd: PathBuf,
    /// RAM.
    pub mem: String,
    /// Kernel command line (run-vm.sh adds the console and panic=-1).
    pub append: String,
    /// Serial console file in the run directory.
    pub console: PathBuf,
    /// The console's socket for `ibtca-fabric console` (run-vm.sh
    /// `--serial-socket`; QEMU still writes `console`).
    pub console_socket: Option<PathBuf>,
    /// run-vm.sh's own log.
    pub log: PathBuf,
    /// Upper bound of the guest's life.
    pub timeout: Duration,
    /// CPUs for QEMU (run-vm.sh `--cpu-affinity`).
    pub cpus: Option<String>,
    /// QEMU's niceness (run-vm.sh `--nice`).
    pub nice: Option<i8>,
    /// More QEMU arguments (after run-vm.sh's `--`): the management NIC,
    /// the configuration directory and the share (`guest_extras`), the
    /// Debian root (`guest_root`).
    pub qemu_args: Vec<String>,
    /// The root file system.
    pub root: Root,
}

fn mem_ok(mem: &str) -> bool {
    let digits = mem.trim_end_matches(['K', 'M', 'G', 'T']);
    !digits.is_empty()
        && digits.len() + 1 >= mem.len()
        && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Works out every node's guest and checks that it can boot: files exist,
/// the run directory is inside the chroot, every `NODE=` names a node.
pub fn resolve(
    topo: &Topology,
    nodes: &[NodePlan],
    run_dir: &Path,
    stack: &VmStack,
    opts: &GuestOptions,
) -> Result<Vec<GuestPlan>, GuestError> {
    for (node, _) in &opts.append {
        if let Some(n) = node {
            if !nodes.iter().any(|x| &x.name == n) {
                return Err(GuestError::UnknownNode(n.clone()));
            }
        }
    }
    check_run_dir(run_dir, stack)?;
    let g: &GuestSpec = &topo.guest;
    let mut out = Vec::new();
    // Gateways run no guest.
    for n in nodes.iter().filter(|n| n.gateway.is_none()) {
        let own = topo
            .nodes
            .iter()
            .find(|s| s.name == n.name)
            .and_then(|s| s.guest.clone());
        let root = guest_root::root(&n.name, g, own.as_ref(), &opts.packages)
            .map_err(|e| GuestError::Root(e.to_string()))?;
        let spec = own.unwrap_or_default();
        let kernel = spec
            .kernel
            .map(PathBuf::from)
            .or_else(|| opts.kernel.clone())
            .or_else(|| g.kernel.clone().map(PathBuf::from))
            .unwrap_or_else(|| stack.guest_dir.join("vmlinuz"));
        let initrd = spec
            .initrd
            .map(PathBuf::from)
            .or_else(|| opts.initrd.clone())
            .or_else(|| g.initrd.clone().map(PathBuf::from))
            .unwrap_or_else(|| stack.guest_dir.join("initramfs.cpio.gz"));
        for (what, path) in [("kernel", &kernel), ("initramfs", &initrd)] {
            if !path.is_file() {
                return Err(GuestError::MissingFile {
                    node: n.name.clone(),
                    what,
                    path: path.clone(),
                });
            }
        }
        let mem = spec.mem.clone().unwrap_or_else(|| g.mem.clone());
        if !mem_ok(&mem) {
            return Err(GuestError::BadMem {
                node: n.name.clone(),
                mem,
            });
        }
        let mut append: Vec<&str> = vec![g.append.as_str()];
        append.extend(spec.append.as_deref());
        for (node, text) in &opts.append {
            if node.as_ref().is_none_or(|x| *x == n.name) {
                append.push(text);
            }
        }
        let append = append
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        out.push(GuestPlan {
            node: n.name.clone(),
            socket: n.socket.clone(),
            kernel,
            initrd,
            mem,
            append,
            console: run_dir.join(format!("{}.console", n.name)),
            console_socket: None,
            log: run_dir.join(format!("{}.qemu.log", n.name)),
            timeout: opts.timeout,
            cpus: n.guest_cpus.as_ref().map(ToString::to_string),
            nice: n.guest_nice,
            qemu_args: Vec::new(),
            root,
        });
    }
    Ok(out)
}

/// Checks that `run_dir` is inside the chroot QEMU runs in.
pub fn check_run_dir(run_dir: &Path, stack: &VmStack) -> Result<(), GuestError> {
    if absolute(run_dir).starts_with(&stack.chroot) {
        return Ok(());
    }
    Err(GuestError::OutsideChroot {
        chroot: stack.chroot.clone(),
        run_dir: run_dir.to_path_buf(),
    })
}

/// `p` as an absolute path, its existing part canonical.
pub fn absolute(p: &Path) -> PathBuf {
    // The run directory may not exist yet: canonicalize its nearest
    // existing ancestor and keep the rest.
    let mut base = match std::env::current_dir() {
        Ok(cwd) if p.is_relative() => cwd.join(p),
        _ => p.to_path_buf(),
    };
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = fs::canonicalize(&base) {
            return rest.iter().rev().fold(c, |acc, part| acc.join(part));
        }
        match (base.file_name().map(|f| f.to_owned()), base.parent()) {
            (Some(f), Some(parent)) => {
                rest.push(f);
                base = parent.to_path_buf();
            }
            _ => return p.to_path_buf(),
        }
    }
}

/// Finds `scripts/run-vm.sh`: `explicit`, else `$IBTCA_RUN_VM`, else the
/// source tree the binaries were built in (`BIN_DIR/../../scripts`).
pub fn find_run_vm(explicit: Option<&Path>, bin_dir: &Path) -> Result<PathBuf, GuestError> {
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p.to_path_buf()],
        None => std::env::var_os("IBTCA_RUN_VM")
            .map(|p| vec![PathBuf::from(p)])
            .unwrap_or_else(|| {
                vec![
                    bin_dir.join("../../scripts/run-vm.sh"),
                    bin_dir.join("../../../scripts/run-vm.sh"),
                ]
            }),
    };
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| {
            GuestError::NoRunVm(
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        })
}

/// The run-vm.sh arguments of `g`.
pub fn run_vm_args(g: &GuestPlan) -> Vec<String> {
    let mut args = vec![
        "--socket".into(),
        g.socket.display().to_string(),
        "--kernel".into(),
        g.kernel.display().to_string(),
        "--initrd".into(),
        g.initrd.display().to_string(),
        "--mem".into(),
        g.mem.clone(),
        "--append".into(),
        g.append.clone(),
        "--serial-log".into(),
        g.console.display().to_string(),
        "--timeout".into(),
        g.timeout.as_secs().max(1).to_string(),
    ];
    if let Some(sock) = &g.console_socket {
        args.push("--serial-socket".into());
        args.push(sock.display().to_string());
    }
    if let Some(cpus) = &g.cpus {
        args.push("--cpu-affinity".into());
        args.push(cpus.clone());
    }
    if let Some(nice) = g.nice {
        args.push("--nice".into());
        args.push(nice.to_string());
    }
    if !g.qemu_args.is_empty() {
        args.push("--".into());
        args.extend(g.qemu_args.iter().cloned());
    }
    args
}

/// The PIDs of every descendant of `pid` (children first, from
/// `/proc/*/stat`).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32)> = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(p) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            let ppid = fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| {
                    let (_, rest) = s.rsplit_once(')')?;
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                });
            if let Some(ppid) = ppid {
                parent_of.push((p, ppid));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![pid];
    while let Some(p) = frontier.pop() {
        for &(child, _) in parent_of.iter().filter(|(_, pp)| *pp == p) {
            if !out.contains(&child) {
                out.push(child);
                frontier.push(child);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, plan};

    const TOPO: &str = r#"{
      "nodes": [ { "name": "a", "lid": 1, "guest": { "append": "ibtca.role=server", "mem": "256M", "cpus": "0", "nice": 19 } },
                 { "name": "b", "lid": 2 } ],
      "links": [ { "a": "a", "b": "b" } ],
      "guest": { "append": "ibtca.mode=verbs" }
    }"#;

    fn stack(dir: &Path) -> VmStack {
        let guest_dir = dir.join("guest");
        fs::create_dir_all(&guest_dir).unwrap();
        fs::write(guest_dir.join("vmlinuz"), b"k").unwrap();
        fs::write(guest_dir.join("initramfs.cpio.gz"), b"i").unwrap();
        VmStack {
            chroot: fs::canonicalize(dir).unwrap(),
            guest_dir,
        }
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ibtca-guests-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn settings_merge_node_over_command_line_over_file() {
        let dir = scratch("merge");
        let st = stack(&dir);
        let topo = parse(TOPO).unwrap();
        let run = dir.join("tmp/run");
        let p = plan(&topo, &run).unwrap();
        let own_kernel = dir.join("other-vmlinuz");
        fs::write(&own_kernel, b"k2").unwrap();
        let opts = GuestOptions {
            kernel: Some(own_kernel.clone()),
            append: vec![
                parse_append(&topo, "b=ibtca.role=client ibtca.peer_lid=1"),
                parse_append(&topo, "quiet"),
            ],
            timeout: Duration::from_secs(60),
            ..GuestOptions::default()
        };
        let g = resolve(&topo, &p.nodes, &run, &st, &opts).unwrap();
        assert_eq!(g[0].append, "ibtca.mode=verbs ibtca.role=server quiet");
        assert_eq!(
            g[1].append,
            "ibtca.mode=verbs ibtca.role=client ibtca.peer_lid=1 quiet"
        );
        assert_eq!((g[0].mem.as_str(), g[1].mem.as_str()), ("256M", "1G"));
        assert_eq!(g[0].kernel, own_kernel);
        assert_eq!(g[1].initrd, st.guest_dir.join("initramfs.cpio.gz"));
        assert_eq!(g[1].console, run.join("b.console"));
        let args = run_vm_args(&g[1]);
        assert!(args.windows(2).any(|w| w[0] == "--timeout" && w[1] == "60"));
        assert!(!args.contains(&"--cpu-affinity".to_owned()), "{args:?}");
        assert!(!args.contains(&"--nice".to_owned()), "{args:?}");
        let args = run_vm_args(&g[0]);
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--cpu-affinity" && w[1] == "0"),
            "{args:?}"
        );
        assert!(
            args.windows(2).any(|w| w[0] == "--nice" && w[1] == "19"),
            "{args:?}"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_guest_settings_are_refused() {
        let dir = scratch("bad");
        let st = stack(&dir);
        let topo = parse(TOPO).unwrap();
        let run = dir.join("tmp/run");
        let p = plan(&topo, &run).unwrap();
        let opts = GuestOptions::default();
        let outside = scratch("outside");
        assert!(matches!(
            resolve(&topo, &p.nodes, &outside, &st, &opts),
            Err(GuestError::OutsideChroot { .. })
        ));
        let _ = fs::remove_dir_all(&outside);
        let mut missing = opts.clone();
        missing.initrd = Some(dir.join("nope.cpio.gz"));
        assert!(matches!(
            resolve(&topo, &p.nodes, &run, &st, &missing),
            Err(GuestError::MissingFile {
                what: "initramfs",
                ..
            })
        ));
        let mut unknown = opts.clone();
        unknown.append.push((Some("zz".into()), "x".into()));
        assert_eq!(
            resolve(&topo, &p.nodes, &run, &st, &unknown),
            Err(GuestError::UnknownNode("zz".into()))
        );
        assert_eq!(
            parse_append(&topo, "zz=1"),
            (None, "zz=1".into()),
            "not a node: for every guest"
        );
        let bad_mem = parse(&TOPO.replace("256M", "lots")).unwrap();
        assert!(matches!(
            resolve(&bad_mem, &p.nodes, &run, &st, &opts),
            Err(GuestError::BadMem { .. })
        ));
        assert!(matches!(
            VmStack::find(&dir.join("no-cache")),
            Err(GuestError::NoStack(_))
        ));
        let _ = fs::remove_dir_all(&dir);
    }
}
