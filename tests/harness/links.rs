//! Bare links for the link-layer tests: a `link::Link` whose events go to a
//! channel the test reads, optionally with receive buffers that come back
//! only when the test returns them.

use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use ibtca_device::link::{FlowControl, Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};

/// Starts a link as `local` with `config`; its events arrive on the
/// returned channel.
pub fn start_link(
    endpoint: LinkEndpoint,
    local: LocalPort,
    config: LinkConfig,
) -> (Link, Receiver<LinkEvent>) {
    let (tx, rx) = mpsc::channel();
    let link = Link::start_with(endpoint, local, config, move |ev| {
        let _ = tx.send(ev);
    })
    .expect("start link");
    (link, rx)
}

/// Starts a receiver with `credits` buffers per VL that are freed only when
/// the test says (`Link::return_credits`): a VL whose packets the test
/// keeps runs out of credit at its sender.
pub fn start_holding_link(
    endpoint: LinkEndpoint,
    local: LocalPort,
    credits: u16,
) -> (Link, Receiver<LinkEvent>) {
    let config = LinkConfig {
        flow_control: Some(FlowControl {
            credits,
            auto_return: false,
            ..FlowControl::default()
        }),
        ..LinkConfig::default()
    };
    start_link(endpoint, local, config)
}

/// How long [`send_retrying`] lets a link refuse one packet before the
/// test fails: generous, the sends it waits for take milliseconds.
pub const SEND_DEADLINE: Duration = Duration::from_secs(60);

/// Queues the packet `packet` builds on `link`, building and offering it
/// again every millisecond while the link refuses it (a full send queue
/// while credits hold packets back); fails the test with the last error
/// and the link's counters if it is still refused after [`SEND_DEADLINE`],
/// instead of hanging.
pub fn send_retrying(link: &Link, what: &str, mut packet: impl FnMut() -> Vec<u8>) {
    let deadline = Instant::now() + SEND_DEADLINE;
    while let Err(e) = link.send(packet()) {
        assert!(
            Instant::now() < deadline,
            "{what}: the link still refuses it after {SEND_DEADLINE:?} ({e}): credits {:?}, {:?}",
            link.credits(),
            link.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}
