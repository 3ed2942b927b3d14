//! What a running link's threads share: the handle ([`super::Link`]), the
//! supervisor that runs each connection's session, and the session's
//! writer.

use super::socket::LinkSocket;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use vmm_sys_util::eventfd::EventFd;

use super::queue::TxQueue;
use super::stats::Counters;
use super::{LinkConfig, LinkRx, LocalPort};

/// The caller's event sink, called on the supervisor thread.
pub(super) type Sink = Box<dyn FnMut(LinkRx) + Send>;

/// Stop request and the connection to cut when it comes.
#[derive(Debug, Default)]
pub(super) struct Control {
    pub stopping: bool,
    pub active: Option<LinkSocket>,
}

/// State shared by the handle, the supervisor and the writer.
#[derive(Debug)]
pub(super) struct Shared {
    pub local: LocalPort,
    pub config: LinkConfig,
    pub queue: TxQueue,
    /// Shared with the connection's ring ends, which count wake-ups.
    pub counters: Arc<Counters>,
    pub control: Mutex<Control>,
    /// Written once on stop; wakes the listen side's epoll.
    pub stop_fd: EventFd,
    /// This process could not map a ring the peer offered (not the peer's
    /// fault: memory limits): later connections announce no shared rings,
    /// so the peer writes to the socket instead of offering again.
    pub rx_rings_refused: AtomicBool,
}

impl Shared {
    pub fn control(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn is_stopping(&self) -> bool {
        self.control().stopping
    }
}
