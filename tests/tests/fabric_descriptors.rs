//! The processes `ibtca-fabric up` leaves running hold none of its
//! caller's descriptors. A test runner that serialises VM tests with
//! flock(1) hands its lock file to everything it starts; a fabric left
//! behind that inherited it kept the lock taken for every later test.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ibtca_fabric::state::State;
use ibtca_tests::launcher::{config, Down, StandInStack};
use ibtca_tests::TempDir;

/// Opens `path` without close-on-exec (as flock(1) opens its lock file),
/// so every process this one starts inherits it.
fn open_inheritable(path: &Path) -> i32 {
    let c = CString::new(path.display().to_string()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path; open(2) borrows it only
    // for the call.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY) };
    assert!(fd >= 0, "open {}", path.display());
    fd
}

/// The files process `pid` has open.
fn open_files(pid: u32) -> Vec<PathBuf> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn started_processes_hold_none_of_the_callers_descriptors() {
    let dir = TempDir::new("fab-fds");
    let marker = dir.join("lock");
    std::fs::write(&marker, "").unwrap();
    let fd = open_inheritable(&marker);

    // The marker is inherited by what this process starts.
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let held = open_files(child.id()).contains(&marker);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(held, "a plain child inherits the marker");

    let stack = StandInStack::new(&dir);
    let run = stack.chroot.join("tmp/run");
    let _down = Down(run.clone());
    stack.up_guests(&config("two-nodes.json"), &run);
    let state = State::load(&run).unwrap().unwrap();
    let mut pids: Vec<(String, u32)> = state
        .processes
        .iter()
        .map(|p| (p.name.clone(), p.pid))
        .collect();
    // The guests' stand-in QEMU (a `sleep` run-vm.sh starts) too, once
    // it runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    for p in state
        .processes
        .iter()
        .filter(|p| p.name.ends_with("(guest)"))
    {
        let under = loop {
            let under = ibtca_fabric::guests::descendants(p.pid);
            if !under.is_empty() || Instant::now() > deadline {
                break under;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(!under.is_empty(), "{}'s stand-in QEMU", p.name);
        pids.extend(under.into_iter().map(|u| (format!("{} child", p.name), u)));
    }
    let names: Vec<&str> = pids.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["a", "b", "mgmt-hub", "a (guest)", "b (guest)"] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }
    for (name, pid) in &pids {
        let files = open_files(*pid);
        assert!(!files.is_empty(), "{name} ({pid}) has open files");
        assert!(
            !files.contains(&marker),
            "{name} ({pid}) holds the caller's {}: {files:?}",
            marker.display()
        );
    }
    // SAFETY: `fd` was opened above and is closed once.
    unsafe { libc::close(fd) };
}
