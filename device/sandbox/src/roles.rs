//! The thread roles of the device, switch, gateway, hive and simport
//! processes, and the system-call groups each is allowed (docs/sandbox.md
//! says why). A role's filter is the union of its groups; adding a group
//! to a role is adding it to the role's line in [`Role::groups`].
//!
//! A thread inherits the filter of the thread that started it and adds its
//! own; both must allow a call. So a role that starts threads allows what
//! its children do before and after they install their filter (`SPAWN`),
//! and everything they do later too (`ibtca-link` is started by the switch's
//! control thread, and starts its writers).

use super::groups::*;
use super::rules::Allow;

/// What a thread does after start-up, and so which calls it may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `ibtca-device`'s main thread once it serves: accepts QEMU, maps the
    /// guest memory it sends, answers its messages.
    VfioServer,
    /// `ibtca-engine`: a device's verbs and transport engine.
    Engine,
    /// `ibtca-link`: a link's connect/accept loop and session reader.
    Link,
    /// `ibtca-link-tx`: a link session's writer.
    LinkWriter,
    /// `ibtca-signals`: waits for SIGTERM/SIGINT and asks the rest to stop.
    Signals,
    /// A control socket's thread (`control_socket::LineServer`): accepts
    /// and serves one connection at a time; commands that only read state.
    Control,
    /// `ibtca-sw-control`: [`Role::Control`], plus the `up`/`down` commands,
    /// which start and stop a port's link (and so its threads).
    SwitchControl,
    /// `ibtca-switch`'s main thread: the status file, stats, shutdown.
    SwitchMain,
    /// `ibtca-sw-trap`: sends the switch's traps.
    SwitchTraps,
    /// `ibtca-sw-delay`: a port's delay line.
    SwitchDelay,
    /// `ibtca-gateway`'s main thread: signals, shutdown.
    GatewayMain,
    /// `ibtca-gw-engine`: the gateway's IB side.
    GatewayEngine,
    /// `ibtca-gw-atm`: the ATM port's accept/connect loop and reader.
    AtmPort,
    /// `ibtca-gw-atm-tx`: the ATM port's cell writer.
    AtmWriter,
    /// `ibtca-gw-stats`: logs the gateway's counters now and then.
    GatewayStats,
    /// `ibtca-hive`'s one thread once its nodes are built: the event loop
    /// that carries every hosted node's wires, accepts and connects
    /// outside peers, writes the status file.
    Hive,
    /// `ibtca-simport`'s main thread once the port is started: serves
    /// ibsim's clients (connects a slot to a client's socket, replies) and
    /// the link; at exit stops the link.
    SimportMain,
    /// `ibtca-sim-rx`: reads the clients' datagrams.
    SimportReader,
    /// `ibtca-sim-fwd`: hands the reader's datagrams to the main loop.
    SimportForward,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 19] = [
        Role::VfioServer,
        Role::Engine,
        Role::Link,
        Role::LinkWriter,
        Role::Signals,
        Role::Control,
        Role::SwitchControl,
        Role::SwitchMain,
        Role::SwitchTraps,
        Role::SwitchDelay,
        Role::GatewayMain,
        Role::GatewayEngine,
        Role::AtmPort,
        Role::AtmWriter,
        Role::GatewayStats,
        Role::Hive,
        Role::SimportMain,
        Role::SimportReader,
        Role::SimportForward,
    ];

    /// The role's name (in the forbidden-call line and `--seccomp-selftest`).
    pub fn name(self) -> &'static str {
        match self {
            Role::VfioServer => "vfio-user-server",
            Role::Engine => "engine",
            Role::Link => "link",
            Role::LinkWriter => "link-writer",
            Role::Signals => "signals",
            Role::Control => "control",
            Role::SwitchControl => "switch-control",
            Role::SwitchMain => "switch-main",
            Role::SwitchTraps => "switch-traps",
            Role::SwitchDelay => "switch-delay",
            Role::GatewayMain => "gateway-main",
            Role::GatewayEngine => "gateway-engine",
            Role::AtmPort => "atm-port",
            Role::AtmWriter => "atm-writer",
            Role::GatewayStats => "gateway-stats",
            Role::Hive => "hive",
            Role::SimportMain => "simport-main",
            Role::SimportReader => "simport-reader",
            Role::SimportForward => "simport-forward",
        }
    }

    /// The role named `name`.
    pub fn from_name(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == name)
    }

    /// The groups of calls the role allows.
    pub fn groups(self) -> &'static [&'static [Allow]] {
        match self {
            Role::VfioServer => &[
                BASE,
                WAIT_IO,
                SOCKET_IO,
                UNIX_CONNECT,
                UNIX_LISTEN,
                SHARED_MEMORY,
            ],
            Role::Engine => &[BASE, WAIT_IO, SOCKET_IO],
            Role::Link => &[
                BASE,
                SPAWN,
                WAIT_IO,
                SOCKET_IO,
                UNIX_CONNECT,
                TCP_CONNECT,
                SHARED_MEMORY,
            ],
            Role::LinkWriter => &[BASE, WAIT_IO, SOCKET_IO],
            Role::Signals => &[BASE, WAIT_IO, SOCKET_IO],
            Role::Control => &[BASE, WAIT_IO, SOCKET_IO, UNIX_CONNECT],
            Role::SwitchControl => &[
                BASE,
                SPAWN,
                WAIT_IO,
                SOCKET_IO,
                UNIX_CONNECT,
                TCP_CONNECT,
                UNIX_LISTEN,
                SHARED_MEMORY,
            ],
            Role::SwitchMain | Role::Hive => &[
                BASE,
                WAIT_IO,
                SOCKET_IO,
                UNIX_CONNECT,
                UNIX_LISTEN,
                WRITE_FILES,
            ],
            Role::SwitchTraps => &[BASE, WAIT_IO, SOCKET_IO],
            Role::SwitchDelay => &[BASE, WAIT_IO, SOCKET_IO],
            Role::GatewayMain => &[BASE, WAIT_IO, SOCKET_IO, UNIX_CONNECT, UNIX_LISTEN],
            Role::GatewayEngine => &[BASE, WAIT_IO, SOCKET_IO],
            Role::AtmPort => &[BASE, SPAWN, WAIT_IO, SOCKET_IO, UNIX_CONNECT, UNIX_LISTEN],
            Role::AtmWriter => &[BASE, WAIT_IO, SOCKET_IO],
            Role::GatewayStats => &[BASE],
            Role::SimportMain => &[BASE, WAIT_IO, SOCKET_IO, UNIX_CONNECT, UNIX_LISTEN],
            Role::SimportReader => &[BASE, WAIT_IO, SOCKET_IO],
            Role::SimportForward => &[BASE],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::rules::{compile, merge, Cond};
    use super::*;

    #[test]
    fn every_role_compiles_and_has_a_unique_name() {
        for role in Role::ALL {
            compile(role.groups()).unwrap();
            assert_eq!(Role::from_name(role.name()), Some(role));
        }
    }

    /// What no thread does after start-up: run programs, trace or read
    /// other processes, open files for reading, make memory executable,
    /// load kernel code, or use sockets other than Unix ones (and TCP
    /// streams for links).
    #[test]
    fn no_role_runs_programs_traces_or_makes_executable_memory() {
        for role in Role::ALL {
            let calls = merge(role.groups());
            for nr in [
                libc::SYS_execve,
                libc::SYS_execveat,
                libc::SYS_fork,
                libc::SYS_vfork,
                libc::SYS_ptrace,
                libc::SYS_process_vm_readv,
                libc::SYS_process_vm_writev,
                libc::SYS_open,
                libc::SYS_bpf,
                libc::SYS_init_module,
                libc::SYS_kill,
                libc::SYS_io_uring_setup,
            ] {
                assert!(!calls.contains_key(&nr), "{} allows {nr}", role.name());
            }
            // Every way the role may make `nr` has `cond`.
            let always = |nr: i64, cond: Cond, what: &str| {
                if let Some(alternatives) = calls.get(&nr) {
                    let alternatives = alternatives.as_ref().expect("conditional");
                    assert!(
                        alternatives.iter().all(|c| c.contains(&cond)),
                        "{} allows {what}",
                        role.name()
                    );
                }
            };
            let exec = Cond::Clear(2, u64::try_from(libc::PROT_EXEC).unwrap());
            always(libc::SYS_mmap, exec, "executable memory");
            always(libc::SYS_mprotect, exec, "executable memory");
            // Unix sockets; TCP streams only for the threads that make
            // links (between hosts), and never datagram or raw sockets.
            let unix = Cond::Eq(0, u64::try_from(libc::AF_UNIX).unwrap());
            let stream = Cond::Eq(
                1,
                u64::try_from(libc::SOCK_STREAM | libc::SOCK_CLOEXEC).unwrap(),
            );
            if let Some(Some(alternatives)) = calls.get(&libc::SYS_socket) {
                let links = matches!(role, Role::Link | Role::SwitchControl);
                for c in alternatives {
                    assert!(
                        c.contains(&unix) || (links && c.contains(&stream)),
                        "{} allows sockets other than Unix ones and link TCP streams",
                        role.name()
                    );
                }
            }
            let write_only = Cond::Set(2, u64::try_from(libc::O_WRONLY).unwrap());
            always(libc::SYS_openat, write_only, "opening files to read");
            assert!(calls.contains_key(&libc::SYS_mmap), "{}", role.name());
        }
    }
}
