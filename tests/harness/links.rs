//! Bare links for the link-layer tests: a `link::Link` whose events go to a
//! channel the test reads, optionally with receive buffers that come back
//! only when the test returns them.

use std::sync::mpsc::{self, Receiver};

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
