//! The processes `up` starts (devices, switches, the hive, the management
//! hub, guests) outlive it, so they must hold none of its caller's
//! descriptors: a lock file a test runner holds with flock(1), a pipe a
//! script reads to its end. A leftover fabric that inherited such a
//! descriptor keeps the lock taken, or the pipe open, long after the
//! caller is gone. Every descriptor but stdin, stdout and stderr is closed
//! when such a process starts.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Highest descriptor the fallback marks when close_range(2) is missing.
const FALLBACK_MAX_FD: i32 = 4096;

/// Makes `cmd`'s process start with descriptors 0, 1 and 2 only: every
/// other one is marked close-on-exec in the child before it runs the
/// program (marked, not closed, so that the standard library's own
/// close-on-exec pipe still reports a failed exec).
pub(crate) fn only_standard_fds(cmd: &mut Command) -> &mut Command {
    // SAFETY: the closure runs in the forked child before exec. It calls
    // only close_range(2) and fcntl(2), which are async-signal-safe, and
    // neither allocates nor touches any lock or memory shared with the
    // parent.
    unsafe {
        cmd.pre_exec(|| {
            let marked = libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
            if marked != 0 {
                for fd in 3..FALLBACK_MAX_FD {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
            }
            Ok(())
        })
    }
}
