//! The system calls the device, switch, gateway, hive and simport threads
//! make after start-up, in groups a role is made of (`roles`). Found by
//! `strace -f` of the binaries under the no-VM tests and QEMU guests
//! (docs/sandbox.md says how to redo it). Where an argument says what a
//! call can do, it is checked: no executable memory, Unix sockets only,
//! the `ioctl`s, `fcntl`s and `prctl`s named here only.

use libc::*;

use super::rules::{any, when, Allow, Cond};

const NO_EXEC: &[Cond] = &[Cond::Clear(2, PROT_EXEC as u64)];

/// Every thread: memory (never executable), locks, time, logging to
/// stderr, closing descriptors (std checks one is open first), hash seeds,
/// leaving (a thread's exit, the process's, a panic's unwinding), the
/// SIGTERM/SIGINT handler, which runs on whichever thread the signal finds
/// and sends a byte on signal-hook's socket, and the `SIGBUS` guard of
/// client memory (`fault_guard`), installed by the first mapping it guards
/// and put back by a fault outside guarded memory, in whichever thread;
/// and resuming what a handler interrupted.
pub const BASE: &[Allow] = &[
    any(SYS_brk),
    when(SYS_mmap, &[NO_EXEC]),
    when(SYS_mprotect, &[NO_EXEC]),
    any(SYS_munmap),
    any(SYS_mremap),
    any(SYS_madvise),
    any(SYS_futex),
    any(SYS_sched_yield),
    any(SYS_nanosleep),
    any(SYS_clock_nanosleep),
    any(SYS_clock_gettime),
    any(SYS_write),
    any(SYS_writev),
    any(SYS_close),
    when(SYS_fcntl, &[&[Cond::Eq(1, F_GETFD as u64)]]),
    any(SYS_sendto),
    any(SYS_getrandom),
    any(SYS_getpid),
    any(SYS_gettid),
    when(SYS_rt_sigaction, &[&[Cond::Eq(0, SIGBUS as u64)]]),
    any(SYS_rt_sigprocmask),
    any(SYS_rt_sigreturn),
    // A sleep or wait a signal handler interrupted resumes through it
    // (signal-hook's handler, the SIGBUS guard, a tracer attaching).
    any(SYS_restart_syscall),
    any(SYS_sigaltstack),
    any(SYS_exit),
    any(SYS_exit_group),
];

/// Starting threads (std's `thread::Builder`): the new thread runs under
/// its parent's filter until it installs its own, so this covers what it
/// does first (robust futex list, rseq, its name, its filter).
pub const SPAWN: &[Allow] = &[
    any(SYS_clone3),
    when(SYS_clone, &[&[Cond::Set(0, CLONE_THREAD as u64)]]),
    any(SYS_set_robust_list),
    any(SYS_rseq),
    any(SYS_sched_getaffinity),
    when(
        SYS_prctl,
        &[
            &[Cond::Eq(0, PR_SET_NAME as u64)],
            &[Cond::Eq(0, PR_SET_NO_NEW_PRIVS as u64)],
        ],
    ),
    when(
        SYS_seccomp,
        &[&[Cond::Eq(0, SECCOMP_SET_MODE_FILTER as u64)]],
    ),
];

/// Reading, polling and waking: eventfds, pipes and sockets already open.
pub const WAIT_IO: &[Allow] = &[
    any(SYS_read),
    any(SYS_readv),
    any(SYS_poll),
    any(SYS_ppoll),
    any(SYS_epoll_wait),
    any(SYS_epoll_pwait),
];

/// Sending on a connected Unix socket (link frames, control replies,
/// ATM cells, a turn's MADs to a host port's client in one `sendmmsg`),
/// and receiving (a host port's client's MADs in one `recvmmsg`).
pub const SOCKET_IO: &[Allow] = &[
    any(SYS_sendmsg),
    any(SYS_sendmmsg),
    any(SYS_recvmsg),
    any(SYS_recvmmsg),
    any(SYS_recvfrom),
    any(SYS_shutdown),
];

/// Opening Unix stream connections: connecting, accepting, and setting up
/// the descriptor (blocking mode, buffer size, timeouts, duplicates).
pub const UNIX_CONNECT: &[Allow] = &[
    when(SYS_socket, &[&[Cond::Eq(0, AF_UNIX as u64)]]),
    any(SYS_connect),
    any(SYS_accept4),
    any(SYS_getsockopt),
    any(SYS_setsockopt),
    any(SYS_getsockname),
    any(SYS_getpeername),
    when(
        SYS_ioctl,
        &[&[Cond::Eq(1, FIONBIO)], &[Cond::Eq(1, FIOCLEX)]],
    ),
    when(
        SYS_fcntl,
        &[
            &[Cond::Eq(1, F_GETFL as u64)],
            &[Cond::Eq(1, F_SETFL as u64)],
            &[Cond::Eq(1, F_GETFD as u64)],
            &[Cond::Eq(1, F_SETFD as u64)],
            &[Cond::Eq(1, F_DUPFD_CLOEXEC as u64)],
        ],
    ),
    any(SYS_epoll_create1),
    any(SYS_epoll_ctl),
    any(SYS_eventfd2),
];

/// Opening TCP stream sockets (a link between hosts, `tcp:HOST:PORT`):
/// `socket(AF_INET or AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0)` only, no
/// datagram or raw sockets. Connecting, accepting and the socket options
/// are [`UNIX_CONNECT`]'s calls; binding is [`UNIX_LISTEN`]'s.
pub const TCP_CONNECT: &[Allow] = &[when(
    SYS_socket,
    &[
        &[
            Cond::Eq(0, AF_INET as u64),
            Cond::Eq(1, (SOCK_STREAM | SOCK_CLOEXEC) as u64),
        ],
        &[
            Cond::Eq(0, AF_INET6 as u64),
            Cond::Eq(1, (SOCK_STREAM | SOCK_CLOEXEC) as u64),
        ],
    ],
)];

/// Binding listening Unix sockets and removing their files (a link or
/// control socket that a thread starts, stops or replaces).
pub const UNIX_LISTEN: &[Allow] = &[
    any(SYS_bind),
    any(SYS_listen),
    any(SYS_unlink),
    any(SYS_unlinkat),
    any(SYS_newfstatat),
    any(SYS_statx),
    any(SYS_lstat),
    any(SYS_stat),
];

/// Shared memory: the link's rings (made, sized, sealed and passed to the
/// peer) and the client's guest memory (mapped from the descriptors it
/// sends).
pub const SHARED_MEMORY: &[Allow] = &[
    any(SYS_memfd_create),
    any(SYS_ftruncate),
    any(SYS_fstat),
    any(SYS_statx),
    any(SYS_newfstatat),
    // What a descriptor the peer sent is: /proc/self/fd/N's link text
    // ("anon_inode:[eventfd]").
    any(SYS_readlink),
    when(
        SYS_fcntl,
        &[
            &[Cond::Eq(1, F_ADD_SEALS as u64)],
            &[Cond::Eq(1, F_GET_SEALS as u64)],
        ],
    ),
];

/// Writing files by name: the switch's status file (written beside and
/// renamed over) and capture files.
pub const WRITE_FILES: &[Allow] = &[
    when(SYS_openat, &[&[Cond::Set(2, O_WRONLY as u64)]]),
    any(SYS_rename),
    any(SYS_renameat),
    any(SYS_fsync),
];
