//! Everything `up --guests` gives each guest besides its kernel, device
//! and console: the management wire ([`crate::mgmt_net`], its hub started
//! here), the configuration directory with `--run` commands and the
//! `--share` ([`crate::guest_run`]), the agent's virtio-serial port and
//! the console's socket ([`crate::guest_channels`]). [`check`] runs before anything
//! starts, [`prepare`] once the fabric is up and before the guests boot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::guest_channels;
use super::guest_run::{self, RunError};
use super::guests::{absolute, GuestPlan};
use super::launch::{self, LaunchError};
use super::mgmt_net::{self, Address, NetError};
use super::plan::NodePlan;
use super::state::State;

/// Why the guests' extras cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum ExtrasError {
    /// The management network.
    #[error(transparent)]
    Net(#[from] NetError),
    /// Commands, the share or the configuration directories.
    #[error(transparent)]
    Run(#[from] RunError),
    /// Starting the hub.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// The hub did not come up.
    #[error("the management hub did not listen on {socket} within 10 s; its log:\n{log}")]
    HubDown {
        /// Its socket.
        socket: PathBuf,
        /// Its log.
        log: String,
    },
}

/// What the command line asks of the guests, checked.
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Every node's place on the management wire.
    pub addresses: Vec<Address>,
    /// `(node, command)` in the order given.
    pub runs: Vec<(String, String)>,
    /// The directory to share.
    pub share: Option<PathBuf>,
    /// `up --wait`: a guest with no commands powers off at once rather
    /// than waiting on its console for `exec` and `console`.
    pub wait: bool,
}

impl Extras {
    /// The commands of `node`, in order.
    pub fn commands(&self, node: &str) -> Vec<&str> {
        self.runs
            .iter()
            .filter(|(n, _)| n == node)
            .map(|(_, c)| c.as_str())
            .collect()
    }
}

/// Checks `--run` and `--share` and plans the addresses, before anything
/// starts (QEMU's option syntax takes no comma in a path).
pub fn check(
    nodes: &[NodePlan],
    runs: &[String],
    share: Option<&Path>,
    run_dir: &Path,
) -> Result<Extras, ExtrasError> {
    for p in std::iter::once(run_dir).chain(share) {
        if p.display().to_string().contains(',') {
            return Err(RunError::Comma(p.to_path_buf()).into());
        }
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let runs = runs
        .iter()
        .map(|r| guest_run::parse_run(&names, r))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(s) = share {
        if !s.is_dir() {
            return Err(RunError::ShareNotDir(s.to_path_buf()).into());
        }
    }
    Ok(Extras {
        addresses: mgmt_net::addresses(nodes)?,
        runs,
        share: share.map(Path::to_path_buf),
        wait: false,
    })
}

/// `p` (under `chroot`) as QEMU sees it from inside the chroot.
pub fn in_chroot(p: &Path, chroot: &Path) -> PathBuf {
    let abs = absolute(p);
    abs.strip_prefix(chroot)
        .map(|rest| Path::new("/").join(rest))
        .unwrap_or(abs)
}

/// Starts the hub (recorded in `state`), mounts the share, writes each
/// guest's configuration directory and gives each plan its QEMU
/// arguments and kernel command line.
pub fn prepare(
    extras: &Extras,
    state: &mut State,
    plans: &mut [GuestPlan],
    chroot: &Path,
    run_dir: &Path,
    bin_dir: &Path,
) -> Result<(), ExtrasError> {
    let socket = mgmt_net::hub_socket(run_dir);
    let args = vec!["--socket".to_owned(), socket.display().to_string()];
    let hub = launch::spawn(
        bin_dir,
        mgmt_net::HUB_EXE,
        mgmt_net::HUB_NAME,
        &args,
        run_dir,
    )?;
    state.processes.push(hub.started.clone());
    let save = |state: &State| {
        state.save(run_dir).map_err(|source| RunError::Io {
            what: "writing the state file".into(),
            source,
        })
    };
    save(state)?;
    if !mgmt_net::wait_listening(&socket, Duration::from_secs(10)) {
        return Err(ExtrasError::HubDown {
            socket,
            log: std::fs::read_to_string(&hub.started.log).unwrap_or_default(),
        });
    }
    let share = match &extras.share {
        Some(dir) => {
            let (host, mount) = guest_run::mount_share(dir, chroot, run_dir)?;
            state.mounts.extend(mount);
            save(state)?;
            Some(in_chroot(&host, chroot))
        }
        None => None,
    };
    let hosts = mgmt_net::hosts_file(&extras.addresses);
    let socket_in = in_chroot(&socket, chroot);
    for g in plans.iter_mut() {
        let Some(me) = extras.addresses.iter().find(|a| a.node == g.node) else {
            continue;
        };
        let commands = extras.commands(&g.node);
        let dir = guest_run::cfg_dir(run_dir, &g.node);
        guest_run::write_cfg(&dir, me, &hosts, &commands, share.is_some())?;
        g.qemu_args = mgmt_net::qemu_args(me, &socket_in);
        g.qemu_args.extend(guest_run::qemu_args(
            &in_chroot(&dir, chroot),
            share.as_deref(),
        )?);
        guest_channels::clear_sockets(run_dir, &g.node).map_err(|source| RunError::Io {
            what: format!("the sockets of the guest of {}", g.node),
            source,
        })?;
        let agent = guest_channels::agent_socket(run_dir, &g.node);
        g.qemu_args
            .extend(guest_channels::agent_qemu_args(&in_chroot(&agent, chroot)));
        g.console_socket = Some(guest_channels::console_socket(run_dir, &g.node));
        // A mode of the guest's own (`--append NODE=ibtca.mode=…`) wins.
        let own_mode = g
            .append
            .split_whitespace()
            .any(|w| w.starts_with("ibtca.mode="));
        let more = guest_run::kernel_args(!commands.is_empty(), extras.wait && !own_mode);
        g.append = format!("{} {more}", g.append).trim().to_owned();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, plan};

    #[test]
    fn runs_and_shares_are_checked_before_anything_starts() {
        let topo = parse(
            r#"{ "nodes": [ { "name": "a", "lid": 1 }, { "name": "b", "lid": 2 } ],
                 "links": [ { "a": "a", "b": "b" } ] }"#,
        )
        .unwrap();
        let run = Path::new("/tmp/r");
        let p = plan(&topo, run).unwrap();
        let runs = [
            "b=echo one".to_owned(),
            "a=x".to_owned(),
            "b=two".to_owned(),
        ];
        let tmp = std::env::temp_dir();
        let x = check(&p.nodes, &runs, Some(&tmp), run).unwrap();
        assert_eq!(x.commands("b"), ["echo one", "two"]);
        assert_eq!(x.commands("a"), ["x"]);
        assert_eq!(x.addresses.len(), 2);
        let bad = |runs: &[String], share: Option<&Path>, run_dir: &Path| {
            check(&p.nodes, runs, share, run_dir)
                .unwrap_err()
                .to_string()
        };
        assert!(bad(&["c=ls".into()], None, run).contains("NODE=COMMAND"));
        assert!(bad(&[], Some(Path::new("/nonexistent/dir")), run).contains("not a directory"));
        assert!(bad(&[], None, Path::new("/tmp/a,b")).contains("comma"));
    }
}
