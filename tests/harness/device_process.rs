//! The `ibtca-device` binary as a child process of a test.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::workspace_bin;

/// A running `ibtca-device` process, killed when dropped.
pub struct Device {
    /// The process.
    pub child: Child,
}

impl Device {
    /// Starts `ibtca-device --socket SOCKET`, its log discarded, and waits
    /// until it accepts.
    pub fn start(socket: &std::path::Path) -> Self {
        Self::start_with(socket, &[])
    }

    /// Like [`Device::start`], with more arguments.
    pub fn start_with(socket: &std::path::Path, extra: &[&str]) -> Self {
        Self::start_logging(socket, extra, Stdio::null())
    }

    /// Like [`Device::start_with`], its log (stderr) going to `log`.
    pub fn start_logging(socket: &std::path::Path, extra: &[&str], log: impl Into<Stdio>) -> Self {
        Self::spawn(Self::command(socket, extra, log), socket)
    }

    /// The command line [`Device::start_logging`] runs.
    pub fn command(socket: &std::path::Path, extra: &[&str], log: impl Into<Stdio>) -> Command {
        let mut command = Command::new(workspace_bin("ibtca-device"));
        command
            .arg("--socket")
            .arg(socket)
            .args(extra)
            .env_remove("RUST_LOG")
            .stderr(log);
        command
    }

    /// Like [`Device::start_logging`], with `limit` (an `RLIMIT_*`) set to
    /// `max`, as some resource of the machine might refuse: with
    /// `RLIMIT_FSIZE`, growing a file (a memfd too) past `max` bytes fails
    /// with `EFBIG` (`SIGXFSZ` is ignored); with `RLIMIT_AS`, a mapping
    /// past `max` bytes of address space fails with `ENOMEM`.
    pub fn start_limited(
        socket: &std::path::Path,
        extra: &[&str],
        log: impl Into<Stdio>,
        limit: libc::__rlimit_resource_t,
        max: u64,
    ) -> Self {
        use std::os::unix::process::CommandExt;
        let mut command = Self::command(socket, extra, log);
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only setrlimit(2) and signal(2), both async-signal-safe;
        // it touches no memory but its own stack. An ignored signal stays
        // ignored across exec.
        unsafe {
            command.pre_exec(move || {
                let value = libc::rlimit {
                    rlim_cur: max,
                    rlim_max: max,
                };
                if libc::setrlimit(limit, &value) != 0
                    || libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Self::spawn(command, socket)
    }

    /// Runs `command` and waits until the device accepts on `socket`.
    pub fn spawn(mut command: Command, socket: &std::path::Path) -> Self {
        let child = command.spawn().unwrap();
        // A hang guard: a device listens milliseconds after it starts.
        let deadline = Instant::now() + Duration::from_secs(30);
        // Wait until it accepts: the path may already exist (stale socket).
        while std::os::unix::net::UnixStream::connect(socket).is_err() {
            assert!(
                Instant::now() < deadline,
                "server never accepted on {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Device { child }
    }

    /// Sends `sig` to the process.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.child.id() as i32, sig) };
        assert_eq!(rc, 0);
    }

    /// Its exit status, if it exits within `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Device {
    /// The process's anonymous resident memory (`RssAnon`, KiB): what the
    /// device allocated itself, not the guest memory it maps.
    pub fn rss_anon_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssAnon in /proc/PID/status")
    }
}
