//! Client memory that can shrink under the device: a `SIGBUS` guard.
//!
//! The device maps the files its client shares as guest memory (`DMA_MAP`).
//! A memfd sealed against shrinking (QEMU's memfd backend seals by default)
//! can never fault, but a regular file (QEMU's `memory-backend-file` on
//! `/dev/shm` or hugetlbfs) cannot be sealed, and a client may truncate it
//! at any moment: the device's next load or store there would then raise
//! `SIGBUS` and kill it.
//!
//! Each such mapping is registered here ([`guard`]). A `SIGBUS` whose
//! address lies in a registered mapping replaces the whole mapping with
//! private zero pages (`MAP_FIXED`, the same address range, so the faulting
//! access completes harmlessly) and marks it poisoned; the DMA layer checks
//! [`Guarded::is_poisoned`] after each access and reports the access as
//! failed, so the guest gets an error and the device keeps serving. A
//! `SIGBUS` anywhere else goes to the handler that was there before (the
//! standard library's stack-overflow handler, or the default action).
//!
//! The handler is async-signal-safe: it reads atomics and calls `mmap`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Mappings that can be guarded at once (live maps plus retired ones a
/// snapshot still holds; [`crate::dma::MAX_DMA_MAPS`] bounds the live ones).
pub const MAX_GUARDED: usize = 2048;

struct Slot {
    /// Taken by a live [`Guarded`].
    used: AtomicBool,
    start: AtomicUsize,
    /// 0 while the slot is being filled or emptied.
    len: AtomicUsize,
    poisoned: AtomicBool,
}

impl Slot {
    const fn new() -> Self {
        Slot {
            used: AtomicBool::new(false),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }
}

static SLOTS: [Slot; MAX_GUARDED] = [const { Slot::new() }; MAX_GUARDED];

/// Mappings poisoned since the process started.
static POISONED: AtomicUsize = AtomicUsize::new(0);

/// The `SIGBUS` action that was installed before ours.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Why a mapping could not be guarded.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// Every slot is taken.
    #[error("more than {MAX_GUARDED} guarded mappings")]
    Full,
    /// sigaction failed.
    #[error("cannot install the SIGBUS handler: {0}")]
    Install(std::io::Error),
}

/// A registered mapping; dropping it unregisters the range. Drop it only
/// once nothing can access the mapping any more (before or after unmapping
/// it, not while it is in use).
#[derive(Debug)]
pub struct Guarded {
    slot: usize,
}

impl Guarded {
    /// True once a fault in the mapping has replaced it with zero pages.
    pub fn is_poisoned(&self) -> bool {
        SLOTS[self.slot].poisoned.load(Ordering::Acquire)
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let s = &SLOTS[self.slot];
        s.len.store(0, Ordering::Release);
        s.start.store(0, Ordering::Release);
        s.poisoned.store(false, Ordering::Release);
        s.used.store(false, Ordering::Release);
    }
}

/// Mappings poisoned so far: a cheap test before asking each mapping.
pub fn poisoned_count() -> usize {
    POISONED.load(Ordering::Acquire)
}

/// True when a poisoned mapping overlaps `len` bytes at host address
/// `addr` (scans the slots: call it after [`poisoned_count`] says there is
/// one).
pub fn poisoned_at(addr: *const u8, len: usize) -> bool {
    let (a, end) = (addr as usize, (addr as usize).saturating_add(len.max(1)));
    SLOTS.iter().any(|s| {
        let start = s.start.load(Ordering::Acquire);
        let slen = s.len.load(Ordering::Acquire);
        s.poisoned.load(Ordering::Acquire) && slen != 0 && a < start + slen && start < end
    })
}

/// Guards the mapping at `start` of `len` bytes (whole pages, as mmap made
/// them).
pub fn guard(start: *const u8, len: usize) -> Result<Guarded, GuardError> {
    install()?;
    for (i, s) in SLOTS.iter().enumerate() {
        if s.used
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.poisoned.store(false, Ordering::Release);
            s.start.store(start as usize, Ordering::Release);
            s.len.store(len, Ordering::Release);
            return Ok(Guarded { slot: i });
        }
    }
    Err(GuardError::Full)
}

fn install() -> Result<(), GuardError> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        // SAFETY: an all-zero sigaction is a valid value of the C struct
        // (no handler, empty mask, no flags); it is filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        // SA_ONSTACK: the standard library's stack-overflow handling runs on
        // the alternate stack, and so must anything it chains to.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: `action.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: as above; an all-zero sigaction to receive the old one.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to valid sigaction values; the handler
        // has the SA_SIGINFO signature.
        if unsafe { libc::sigaction(libc::SIGBUS, &action, &mut old) } != 0 {
            return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
        }
        let _ = PREVIOUS.set(old);
        Ok(())
    });
    r.map_err(|e| GuardError::Install(std::io::Error::from_raw_os_error(e)))
}

extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler;
    // si_addr is the faulting address for SIGBUS.
    let addr = unsafe { (*info).si_addr() } as usize;
    for s in SLOTS.iter() {
        let len = s.len.load(Ordering::Acquire);
        let start = s.start.load(Ordering::Acquire);
        if len == 0 || addr < start || addr - start >= len {
            continue;
        }
        // SAFETY: `start..start + len` is a mapping the device made of a
        // client's file and registered for exactly this: replacing it, at
        // the same addresses, with private zero pages. Nothing else lives
        // in that range while the slot is registered (it is unregistered
        // only when nothing can access the mapping any more).
        let p = unsafe {
            libc::mmap(
                start as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p as usize == start {
            s.poisoned.store(true, Ordering::Release);
            POISONED.fetch_add(1, Ordering::AcqRel);
            return;
        }
        break;
    }
    chain(sig, info, ctx);
}

/// Hands a `SIGBUS` that is not ours to the action installed before.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    match PREVIOUS.get() {
        Some(prev)
            if prev.sa_flags & libc::SA_SIGINFO != 0
                && prev.sa_sigaction != libc::SIG_DFL
                && prev.sa_sigaction != libc::SIG_IGN =>
        {
            // SAFETY: an SA_SIGINFO handler installed before ours has this
            // signature; it gets the arguments the kernel gave us.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(prev.sa_sigaction) };
            f(sig, info, ctx);
        }
        Some(prev) if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: a plain handler installed before ours has this
            // signature.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev.sa_sigaction) };
            f(sig);
        }
        _ => {
            // The default action: restore it and return; the access faults
            // again and the process dies of SIGBUS as it would have.
            // SAFETY: an all-zero sigaction with SIG_DFL (0) as its handler.
            let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
            dfl.sa_sigaction = libc::SIG_DFL;
            // SAFETY: a valid sigaction value; the old one is not wanted.
            unsafe { libc::sigaction(sig, &dfl, std::ptr::null_mut()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Maps `file` shared, `len` bytes.
    fn map(file: &std::fs::File, len: usize) -> *mut u8 {
        // SAFETY: a fresh shared mapping of a file we own; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    #[test]
    fn a_shrunk_file_poisons_its_mapping_instead_of_killing_the_process() {
        let file = crate::memfd::create("ibtca-test", 16384).unwrap();
        let p = map(&file, 16384);
        let g = guard(p, 16384).unwrap();
        // SAFETY: inside the mapping made above.
        unsafe { p.add(8192).write_volatile(7) };
        assert!(!g.is_poisoned());
        let before = poisoned_count();
        file.set_len(0).unwrap();
        // The next store faults; the guard turns the mapping into zeros.
        // SAFETY: inside the mapping, which the guard keeps valid.
        unsafe { p.add(12288).write_volatile(9) };
        assert!(g.is_poisoned());
        assert!(poisoned_count() > before);
        // SAFETY: pointer arithmetic inside the mapping, nothing accessed.
        assert!(poisoned_at(unsafe { p.add(100) }, 8));
        // SAFETY: as above: private zero pages now, readable everywhere.
        assert_eq!(unsafe { p.add(8192).read_volatile() }, 0);
        drop(g);
        // SAFETY: the range is ours (the guard's zero pages) and unused now.
        assert_eq!(unsafe { libc::munmap(p.cast(), 16384) }, 0);
    }
}
