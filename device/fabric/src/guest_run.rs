//! What each guest of `up --guests` is given besides its kernel: a
//! configuration directory, `NODE.guest/` in the run directory, exported
//! read-write over virtio-9p (tag `ibtca_cfg`, mounted at `/ibtca` by the
//! initramfs `/init`), and optionally the user's `--share DIR` (tag
//! `ibtca_share`, mounted at `/share`).
//!
//! The directory holds the node's name (`node`), its address and MAC on
//! the management wire (`net`: `ADDR/PREFIX MAC`), the `hosts` file, and
//! each `--run NODE=COMMAND` as a file of its own (`run/1`, `run/2`, ...),
//! so a command reaches the guest byte for byte and never through the
//! kernel command line, which only gets `ibtca.cfg=ibtca_cfg` (and
//! `ibtca.mode=run` when the node has commands). The guest runs them in
//! order with `sh`, stops at the first that fails, and writes `status`
//! (`N STATUS`: the last command run and its exit status) before it powers
//! off; [`outcome`] reads it.
//!
//! QEMU runs chrooted (`scripts/run-vm.sh`), so a share outside the chroot
//! is bind-mounted to `share/` in the run directory; the state file records
//! the mount and `down` undoes it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::mgmt_net::{Address, PREFIX};

/// The 9p tag of the configuration directory.
pub const CFG_TAG: &str = "ibtca_cfg";
/// The 9p tag of `--share`.
pub const SHARE_TAG: &str = "ibtca_share";

/// Why commands or the share cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `--run` without `NODE=`, or naming no node.
    #[error("--run `{0}`: expected NODE=COMMAND with NODE a node of the topology")]
    BadRun(String),
    /// `--run NODE=` with nothing to run.
    #[error("--run `{0}`: the command is empty")]
    EmptyCommand(String),
    /// The share is no directory.
    #[error("--share {0}: not a directory")]
    ShareNotDir(PathBuf),
    /// A path QEMU's option syntax cannot carry.
    #[error("{0}: a path with a comma cannot be given to QEMU's -virtfs")]
    Comma(PathBuf),
    /// A file operation or `mount` failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> RunError {
    let what = what.into();
    move |source| RunError::Io { what, source }
}

/// Splits `--run NODE=COMMAND` at the first `=`; NODE must be in `nodes`.
pub fn parse_run(nodes: &[&str], text: &str) -> Result<(String, String), RunError> {
    match text.split_once('=') {
        Some((node, cmd)) if nodes.contains(&node) => {
            if cmd.trim().is_empty() {
                Err(RunError::EmptyCommand(text.to_owned()))
            } else {
                Ok((node.to_owned(), cmd.to_owned()))
            }
        }
        _ => Err(RunError::BadRun(text.to_owned())),
    }
}

/// The configuration directory of `node` in `run_dir`.
pub fn cfg_dir(run_dir: &Path, node: &str) -> PathBuf {
    run_dir.join(format!("{node}.guest"))
}

/// Writes `dir` afresh for guest `me`: identity, address, hosts, commands
/// and whether a share is mounted.
pub fn write_cfg(
    dir: &Path,
    me: &Address,
    hosts: &str,
    commands: &[&str],
    share: bool,
) -> Result<(), RunError> {
    let what = || format!("writing {}", dir.display());
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(what())(e)),
        _ => {}
    }
    fs::create_dir_all(dir.join("run")).map_err(io_err(what()))?;
    let mut files = vec![
        ("node".to_owned(), format!("{}\n", me.node)),
        ("net".to_owned(), format!("{}/{PREFIX} {}\n", me.ip, me.mac)),
        ("hosts".to_owned(), hosts.to_owned()),
    ];
    if share {
        files.push(("share".to_owned(), format!("/share {SHARE_TAG}\n")));
    }
    for (i, c) in commands.iter().enumerate() {
        files.push((format!("run/{}", i + 1), format!("{c}\n")));
    }
    for (name, text) in files {
        fs::write(dir.join(name), text).map_err(io_err(what()))?;
    }
    Ok(())
}

/// What the guest's `/init` reads from its kernel command line: the
/// `run` mode with commands; without, `off` (power off at once) when `up`
/// waits for the guests to end, else `/init`'s default, `interactive`.
pub fn kernel_args(has_commands: bool, ends: bool) -> String {
    let mut s = format!("ibtca.cfg={CFG_TAG}");
    if has_commands {
        s.push_str(" ibtca.mode=run");
    } else if ends {
        s.push_str(" ibtca.mode=off");
    }
    s
}

/// The `-virtfs` arguments exporting `path` (as QEMU sees it) as `tag`,
/// with `more` options (`,opt=value...`) appended.
pub fn virtfs(path: &Path, tag: &str, more: &str) -> Result<Vec<String>, RunError> {
    let p = path.display().to_string();
    if p.contains(',') {
        return Err(RunError::Comma(path.to_path_buf()));
    }
    Ok(vec![
        "-virtfs".into(),
        format!("local,path={p},mount_tag={tag},security_model=none,id={tag}{more}"),
    ])
}

/// The `-virtfs` arguments of the configuration directory and the share,
/// as QEMU sees them (inside its chroot).
pub fn qemu_args(
    cfg_in_chroot: &Path,
    share_in_chroot: Option<&Path>,
) -> Result<Vec<String>, RunError> {
    let mut args = virtfs(cfg_in_chroot, CFG_TAG, "")?;
    if let Some(s) = share_in_chroot {
        args.extend(virtfs(s, SHARE_TAG, "")?);
    }
    Ok(args)
}

/// Makes `share` visible inside `chroot`: itself when it is inside, else
/// a bind mount on `run_dir/share`. Returns the path on the host side
/// under the chroot, and the mount point to undo at `down`.
pub fn mount_share(
    share: &Path,
    chroot: &Path,
    run_dir: &Path,
) -> Result<(PathBuf, Option<PathBuf>), RunError> {
    let real = fs::canonicalize(share)
        .ok()
        .filter(|p| p.is_dir())
        .ok_or_else(|| RunError::ShareNotDir(share.to_path_buf()))?;
    if real.starts_with(chroot) {
        return Ok((real, None));
    }
    let point = run_dir.join("share");
    fs::create_dir_all(&point).map_err(io_err(format!("creating {}", point.display())))?;
    let st = Command::new("mount")
        .arg("--bind")
        .arg(&real)
        .arg(&point)
        .status()
        .map_err(io_err("running mount"))?;
    if !st.success() {
        return Err(RunError::Io {
            what: format!("mount --bind {} {}", real.display(), point.display()),
            source: io::Error::other(format!("{st} (needs root)")),
        });
    }
    Ok((point.clone(), Some(point)))
}

/// Undoes a bind mount of [`mount_share`] (lazily: a guest being torn
/// down may still hold it) and removes the empty mount point.
pub fn unmount_share(point: &Path) {
    let st = Command::new("umount").arg("-l").arg(point).status();
    if !st.is_ok_and(|s| s.success()) {
        tracing::warn!(point = %point.display(), "umount failed");
    }
    let _ = fs::remove_dir(point);
}

/// How a guest's commands ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every command exited 0.
    Passed,
    /// Command `index` (from 1) exited with `status`.
    Failed {
        /// Which command.
        index: usize,
        /// Its text.
        command: String,
        /// Its exit status.
        status: i32,
    },
    /// The guest wrote no status: it crashed, timed out or was stopped.
    NoStatus,
}

/// Reads at most 64 bytes of the regular file `path`, never following a
/// symlink nor blocking on a FIFO: the guest owns the directory (9p,
/// read-write) and may put anything there.
fn read_small(path: &Path) -> Option<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(64).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Reads the status the guest wrote into `dir`; `commands` are the ones
/// it was given (their text comes from here, not from the guest's files).
pub fn outcome(dir: &Path, commands: &[&str]) -> Outcome {
    let Some(text) = read_small(&dir.join("status")) else {
        return Outcome::NoStatus;
    };
    let mut words = text.split_whitespace();
    let (Some(Ok(index)), Some(Ok(status))) = (
        words.next().map(str::parse::<usize>),
        words.next().map(str::parse::<i32>),
    ) else {
        return Outcome::NoStatus;
    };
    let Some(command) = index.checked_sub(1).and_then(|i| commands.get(i)) else {
        return Outcome::NoStatus;
    };
    if status == 0 {
        return Outcome::Passed;
    }
    Outcome::Failed {
        index,
        command: (*command).to_owned(),
        status,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn commands_reach_the_directory_byte_for_byte() {
        let dir = std::env::temp_dir().join(format!("ibtca-guest-run-{}", std::process::id()));
        let me = Address {
            node: "n2".into(),
            ip: Ipv4Addr::new(10, 77, 0, 2),
            mac: "52:54:00:77:00:02".into(),
        };
        let tricky = r#"echo "a  b" 'c;d' $(x) `y` \ ibtca.mode=shell"#;
        let (node, cmd) = parse_run(&["n1", "n2"], &format!("n2={tricky}")).unwrap();
        assert_eq!((node.as_str(), cmd.as_str()), ("n2", tricky));
        write_cfg(&dir, &me, "H\n", &[&cmd, "exit 3"], true).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("run/1")).unwrap(),
            format!("{tricky}\n")
        );
        assert_eq!(
            fs::read_to_string(dir.join("net")).unwrap(),
            "10.77.0.2/16 52:54:00:77:00:02\n"
        );
        assert_eq!(fs::read_to_string(dir.join("hosts")).unwrap(), "H\n");
        assert!(dir.join("share").is_file());
        let cmds = [cmd.as_str(), "exit 3"];
        assert_eq!(outcome(&dir, &cmds), Outcome::NoStatus);
        fs::write(dir.join("status"), "2 3\n").unwrap();
        assert_eq!(
            outcome(&dir, &cmds),
            Outcome::Failed {
                index: 2,
                command: "exit 3".into(),
                status: 3
            }
        );
        fs::write(dir.join("status"), "2 0\n").unwrap();
        assert_eq!(outcome(&dir, &cmds), Outcome::Passed);
        // What a hostile guest may leave: a command it was not given, a
        // symlink out of the directory, a FIFO.
        fs::write(dir.join("status"), "7 1\n").unwrap();
        assert_eq!(outcome(&dir, &cmds), Outcome::NoStatus);
        fs::remove_file(dir.join("status")).unwrap();
        let secret = dir.with_extension("secret");
        fs::write(&secret, "1 0\n").unwrap();
        std::os::unix::fs::symlink(&secret, dir.join("status")).unwrap();
        assert_eq!(outcome(&dir, &cmds), Outcome::NoStatus, "not followed");
        fs::remove_file(dir.join("status")).unwrap();
        fs::remove_file(&secret).unwrap();
        let fifo = std::ffi::CString::new(dir.join("status").display().to_string()).unwrap();
        // SAFETY: mkfifo(3) reads the NUL-terminated path and nothing else.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(outcome(&dir, &cmds), Outcome::NoStatus, "no hang on a FIFO");
        // Written afresh: an old status and old commands are gone.
        write_cfg(&dir, &me, "H\n", &[], false).unwrap();
        assert_eq!(outcome(&dir, &cmds), Outcome::NoStatus);
        assert!(!dir.join("run/1").exists() && !dir.join("share").exists());
        let _ = fs::remove_dir_all(&dir);
        assert_eq!(
            kernel_args(true, false),
            "ibtca.cfg=ibtca_cfg ibtca.mode=run"
        );
        assert_eq!(
            kernel_args(true, true),
            "ibtca.cfg=ibtca_cfg ibtca.mode=run"
        );
        assert_eq!(
            kernel_args(false, true),
            "ibtca.cfg=ibtca_cfg ibtca.mode=off"
        );
        assert_eq!(kernel_args(false, false), "ibtca.cfg=ibtca_cfg");
    }

    #[test]
    fn bad_runs_and_paths_are_refused() {
        assert!(matches!(
            parse_run(&["n1"], "n9=ls"),
            Err(RunError::BadRun(_))
        ));
        assert!(matches!(parse_run(&["n1"], "ls"), Err(RunError::BadRun(_))));
        assert!(matches!(
            parse_run(&["n1"], "n1= "),
            Err(RunError::EmptyCommand(_))
        ));
        assert!(matches!(
            qemu_args(Path::new("/tmp/a,b"), None),
            Err(RunError::Comma(_))
        ));
        assert_eq!(
            qemu_args(Path::new("/tmp/r/n1.guest"), Some(Path::new("/s"))).unwrap(),
            [
                "-virtfs",
                "local,path=/tmp/r/n1.guest,mount_tag=ibtca_cfg,security_model=none,id=ibtca_cfg",
                "-virtfs",
                "local,path=/s,mount_tag=ibtca_share,security_model=none,id=ibtca_share"
            ]
        );
    }
}
