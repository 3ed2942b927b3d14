//! One VM test at a time: a test that boots guests holds a lock for as
//! long as it runs, shared by the test threads of this process (cargo
//! runs two at once on two CPUs) and by every other process on the
//! machine (another `cargo test`, another checkout) through an flock(2)
//! on one file. Guests under TCG are CPU-bound: two three-guest tests at
//! once on two CPUs only slow each other down until timers and timeouts
//! inside the guests fire.
//!
//! The lock is per thread and counted: a test that takes it again (a
//! helper that calls [`crate::vm::VmStack::get`] too) goes on, and the
//! guests a test boots from other threads run under the lock of the test
//! that started them.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

/// Who holds the lock in this process.
struct Holder {
    thread: ThreadId,
    /// How many guards of that thread are alive.
    depth: usize,
    /// The locked file: closing it releases the flock.
    _file: File,
}

static HOLDER: Mutex<Option<Holder>> = Mutex::new(None);
static RELEASED: Condvar = Condvar::new();

fn holder() -> MutexGuard<'static, Option<Holder>> {
    // A test that panicked while holding the mutex (never: no code here
    // panics with it held) leaves consistent data.
    HOLDER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The lock file: `IBTCA_VM_LOCK`, or `vm.lock` in the VM stack's cache.
/// Not `/tmp/ibtca-vm.lock`, which people hold around whole `cargo test`
/// runs (`flock /tmp/ibtca-vm.lock cargo test ...`): taking that one
/// here again would wait for ever.
pub fn lock_path(cache: &Path) -> PathBuf {
    std::env::var_os("IBTCA_VM_LOCK")
        .map(PathBuf::from)
        .unwrap_or_else(|| cache.join("vm.lock"))
}

/// Held while a test boots guests; released when dropped (the last
/// guard of the holding thread).
pub struct VmLock {
    /// Not `Send` (it is released on the thread that took it), but `Sync`
    /// (threads the test starts may share a reference to it).
    _thread_bound: std::marker::PhantomData<MutexGuard<'static, ()>>,
}

impl VmLock {
    /// Waits for the lock, saying so on stderr if another test or process
    /// holds it.
    pub fn acquire(path: &Path) -> VmLock {
        let me = std::thread::current().id();
        let mut h = holder();
        loop {
            match h.as_mut() {
                Some(held) if held.thread == me => {
                    held.depth += 1;
                    return VmLock::new();
                }
                Some(_) => {
                    eprintln!("vm lock: another test of this process boots guests; waiting");
                    h = RELEASED.wait(h).unwrap_or_else(|e| e.into_inner());
                }
                None => break,
            }
        }
        // Every other thread of this process waits on the mutex meanwhile.
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("vm lock {}: {e}", path.display()));
        if !flock(&file, libc::LOCK_EX | libc::LOCK_NB) {
            eprintln!(
                "vm lock: another process boots guests (holds {}); waiting",
                path.display()
            );
            assert!(flock(&file, libc::LOCK_EX), "flock {}", path.display());
        }
        *h = Some(Holder {
            thread: me,
            depth: 1,
            _file: file,
        });
        VmLock::new()
    }

    fn new() -> VmLock {
        VmLock {
            _thread_bound: std::marker::PhantomData,
        }
    }
}

/// flock(2) with `op`; false if it would block (`LOCK_NB`).
fn flock(file: &File, op: i32) -> bool {
    loop {
        // SAFETY: flock(2) on a descriptor `file` owns; no memory is
        // involved.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return true;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return false,
            e => panic!("flock: {e:?}"),
        }
    }
}

impl Drop for VmLock {
    fn drop(&mut self) {
        let mut h = holder();
        let held = h.as_mut().expect("a VmLock is held");
        held.depth -= 1;
        if held.depth == 0 {
            *h = None; // closes the file: the flock goes
            RELEASED.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_thread_takes_it_again_and_another_waits_for_the_last_release() {
        let dir = crate::TempDir::new("vm-lock");
        let path = dir.join("vm.lock");
        let outer = VmLock::acquire(&path);
        let inner = VmLock::acquire(&path); // the same thread: no wait
        let got = Arc::new(AtomicBool::new(false));
        let (started_tx, started) = std::sync::mpsc::channel();
        let other = {
            let (path, got) = (path.clone(), got.clone());
            std::thread::spawn(move || {
                started_tx.send(()).unwrap();
                let _l = VmLock::acquire(&path);
                got.store(true, Ordering::SeqCst);
            })
        };
        started.recv().unwrap();
        drop(inner);
        // Still held by `outer`: another process cannot take the flock.
        let probe = File::options().write(true).open(&path).unwrap();
        assert!(!flock(&probe, libc::LOCK_EX | libc::LOCK_NB));
        assert!(!got.load(Ordering::SeqCst));
        drop(outer);
        other.join().unwrap();
        assert!(got.load(Ordering::SeqCst));
        // All released: the file is free.
        assert!(flock(&probe, libc::LOCK_EX | libc::LOCK_NB));
    }
}
