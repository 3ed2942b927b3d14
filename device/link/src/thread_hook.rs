//! A process-wide hook each link thread calls as it starts, naming its
//! kind: the device, switch and gateway binaries install their seccomp
//! filter for the thread through it (`ibtca_device::sandbox`). Without a
//! hook (tests, other users of the crate) nothing is called.

use std::sync::OnceLock;

/// The kinds of thread a link runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkThread {
    /// `ibtca-link`: connects or accepts, runs each session's handshake,
    /// shared-ring set-up and reader, and starts its writer.
    Supervisor,
    /// `ibtca-link-tx`: writes one session's queued frames.
    Writer,
}

static HOOK: OnceLock<fn(LinkThread)> = OnceLock::new();

/// Sets the hook; false if one was set already (the first one stays).
pub fn set_thread_hook(hook: fn(LinkThread)) -> bool {
    HOOK.set(hook).is_ok()
}

/// Called by each link thread first thing.
pub(crate) fn thread_started(kind: LinkThread) {
    if let Some(hook) = HOOK.get() {
        hook(kind);
    }
}
