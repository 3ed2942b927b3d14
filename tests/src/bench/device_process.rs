//! An `ibtca-device` process the benches start (`mmio`, the guest
//! benches): the release binary next to `ibtca-bench`, stopped with
//! SIGTERM when dropped.

use super::*;

/// An `ibtca-device` process, optionally under `taskset`.
///
/// `DeviceProcess` of the harness finds the binary with `workspace_bin`,
/// which assumes the caller is a test in `target/<profile>/deps`; this
/// binary lives in `target/<profile>`, next to `ibtca-device`.
pub(super) struct Device {
    child: Child,
}

impl Device {
    pub(super) fn start(
        bin: &Path,
        socket: &Path,
        cpus: Option<&str>,
        spin_us: u64,
        extra: &[&str],
    ) -> Self {
        let log = std::fs::File::create(socket.with_extension("log")).expect("device log");
        let mut cmd = match cpus {
            Some(c) => {
                let mut t = Command::new("taskset");
                t.arg("-c").arg(c).arg(bin);
                t
            }
            None => Command::new(bin),
        };
        let child = cmd
            .arg("--socket")
            .arg(socket)
            .arg("--spin-us")
            .arg(spin_us.to_string())
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start ibtca-device");
        let mut dev = Device { child };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            if let Some(st) = dev.child.try_wait().unwrap() {
                panic!("ibtca-device exited ({st}); log: {}", socket.display());
            }
            assert!(Instant::now() < deadline, "no socket {}", socket.display());
            std::thread::sleep(Duration::from_millis(10));
        }
        dev
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ibtca-device` next to this binary, or `None` (after saying so).
pub(super) fn device_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe.with_file_name("ibtca-device");
    if bin.exists() {
        return Some(bin);
    }
    ibtca_device::cli::print_error(
        NAME,
        format_args!(
            "{} is missing: build the server next to this binary first,\n    \
             cargo build --release --workspace\n\
             (and run the bench with --release too)",
            bin.display()
        ),
    );
    None
}
