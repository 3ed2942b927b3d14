//! Link tests over real Unix sockets in the temp directory. Every wait polls
//! with a generous deadline; no test relies on a fixed sleep being enough.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::{Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};

mod batches;
mod connect;
mod credits;
mod faults;
mod in_place;
mod pipe;
mod queue;
mod rings;
mod robust;
mod tcp;

/// A link socket on the same connection as the raw stream `s`.
fn as_link(s: &std::os::unix::net::UnixStream) -> crate::socket::LinkSocket {
    crate::socket::LinkSocket::unix(s.try_clone().unwrap())
}

/// Upper bound for anything a test waits for.
const PATIENCE: Duration = Duration::from_secs(10);

/// A socket path no other test uses.
fn socket_path(name: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("ibtca-link-{}-{n}-{name}.sock", std::process::id()))
}

fn port(n: u8) -> LocalPort {
    LocalPort {
        node_guid: 0x1200_0000_0000_0000 | u64::from(n),
        port: 1,
        lid: u16::from(n) * 0x10,
    }
}

/// A running link and the receiving end of its events.
struct Peer {
    link: Link,
    events: Receiver<LinkEvent>,
}

fn start(endpoint: LinkEndpoint, local: LocalPort) -> Peer {
    start_with(endpoint, local, LinkConfig::default())
}

fn start_with(endpoint: LinkEndpoint, local: LocalPort, config: LinkConfig) -> Peer {
    let (tx, events) = mpsc::channel();
    let link = Link::start_with(endpoint, local, config, move |ev| {
        let _ = tx.send(ev);
    })
    .expect("start link");
    Peer { link, events }
}

/// Links on a fresh path, both up: A with the default config, B granting
/// `credits` buffers per VL that it frees only when told
/// (`Link::return_credits`).
fn pair_lending(name: &str, credits: u16) -> (Peer, Peer) {
    let path = socket_path(name);
    let b_config = LinkConfig {
        flow_control: Some(super::FlowControl {
            credits,
            auto_return: false,
            ..super::FlowControl::default()
        }),
        ..LinkConfig::default()
    };
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let b = start_with(LinkEndpoint::Connect(path), port(2), b_config);
    a.expect_up();
    b.expect_up();
    (a, b)
}

/// Listen and connect links on a fresh path, both up.
fn pair(name: &str) -> (Peer, Peer, PathBuf) {
    let path = socket_path(name);
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let b = start(LinkEndpoint::Connect(path.clone()), port(2));
    assert_eq!(a.expect_up(), port(2));
    assert_eq!(b.expect_up(), port(1));
    (a, b, path)
}

impl Peer {
    fn next(&self) -> LinkEvent {
        match self.events.recv_timeout(PATIENCE) {
            Ok(ev) => ev,
            Err(RecvTimeoutError::Timeout) => panic!("no link event within {PATIENCE:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("link thread gone"),
        }
    }

    fn expect_up(&self) -> LocalPort {
        match self.next() {
            LinkEvent::Up { peer } => peer,
            other => panic!("expected Up, got {other:?}"),
        }
    }

    fn expect_down(&self) -> String {
        match self.next() {
            LinkEvent::Down { reason } => reason,
            other => panic!("expected Down, got {other:?}"),
        }
    }

    /// The next `n` events, which must all be packets.
    fn packets(&self, n: usize) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| match self.next() {
                LinkEvent::Packet(p) => p,
                other => panic!("expected packet {i} of {n}, got {other:?}"),
            })
            .collect()
    }

    fn send_all(&self, packets: impl IntoIterator<Item = Vec<u8>>) {
        send_all(&self.link, packets);
    }
}

/// Sends, retrying while the queue is full (the writer drains it).
fn send_all(link: &Link, packets: impl IntoIterator<Item = Vec<u8>>) {
    for p in packets {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match link.send(p.clone()) {
                Ok(()) => break,
                Err(super::LinkError::QueueFull) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => panic!("send: {e}"),
            }
        }
    }
}

/// Polls `cond` until it holds; panics after [`PATIENCE`].
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs `test` on a thread and fails if it takes longer than
/// [`PATIENCE`] (for tests that block in calls without a timeout of their
/// own, so a lost wake-up fails instead of hanging the run).
fn bounded(test: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    match finished.recv_timeout(PATIENCE) {
        Ok(()) => runner.join().unwrap(),
        // The test panicked: report its panic.
        Err(RecvTimeoutError::Disconnected) => {
            if let Err(panic) = runner.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(RecvTimeoutError::Timeout) => panic!("test still blocked after {PATIENCE:?}"),
    }
}

/// Packet `i` of a test stream: its index and a length that varies.
fn numbered(i: u32) -> Vec<u8> {
    let len = 4 + (i as usize * 37) % 4096;
    let mut p: Vec<u8> = (0..len).map(|j| (j as u32 ^ i) as u8).collect();
    p[..4].copy_from_slice(&i.to_be_bytes());
    p
}
