//! A node with the test SM ([`SmClient`]) on a bare link into it: a
//! device instance with the SM on its port, or a two-port in-process
//! switch with the SM on port 1 and a plain host on port 2. The set-up of
//! the tests that manage or measure one node.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_device::link::{LinkConfig, LinkEndpoint};
use ibtca_switch::{PortConfig, Switch, SwitchConfig};

use crate::sm_client::SmClient;
use crate::{TempDir, TestServer};

/// The SM's LID (port 1).
pub const SM_LID: u16 = 1;
/// The host's LID (port 2).
pub const HOST_LID: u16 = 2;

/// Starts a device instance of `cfg` listening on a link in `dir`
/// (`cfg.link` is replaced) and connects the SM to it as LID [`SM_LID`].
pub fn sm_device(dir: &TempDir, cfg: InstanceConfig) -> (Instance, SmClient) {
    let (cfg, path) = listening(dir, cfg);
    let dev = Instance::start(&cfg).unwrap();
    (dev, SmClient::start(LinkEndpoint::Connect(path), SM_LID))
}

/// [`sm_device`] behind a vfio-user server, for tests that also read the
/// device's registers: the server owns `dir`.
pub fn sm_device_server(dir: TempDir, cfg: InstanceConfig) -> (TestServer, SmClient) {
    let (cfg, path) = listening(&dir, cfg);
    let server = TestServer::start_instance(dir, cfg);
    (server, SmClient::start(LinkEndpoint::Connect(path), SM_LID))
}

/// `cfg` listening on `dev.link` in `dir`, and that path.
fn listening(dir: &TempDir, cfg: InstanceConfig) -> (InstanceConfig, PathBuf) {
    let path = dir.join("dev.link");
    let cfg = InstanceConfig {
        link: Some(LinkEndpoint::Listen(path.clone())),
        ..cfg
    };
    (cfg, path)
}

/// The switch and the two links into it.
pub struct SmSwitch {
    /// The switch (LID `lid`, GUID `guid` of [`SmSwitch::start`]).
    pub sw: Switch,
    /// The test SM on port 1, LID [`SM_LID`].
    pub sm: SmClient,
    /// A host on port 2, LID [`HOST_LID`].
    pub host: SmClient,
}

impl SmSwitch {
    /// Starts the switch (not SM-managed: it learns routes from the
    /// traffic) with its ports' sockets in `dir`, connects the SM and the
    /// host, and waits until it routes to both.
    pub fn start(dir: &TempDir, guid: u64, lid: u16) -> Self {
        let this = Self::connect(dir, guid, lid, false);
        let lft = this.sw.lft();
        wait_until("routes never learned", || {
            lft.lookup(SM_LID) == Some(1) && lft.lookup(HOST_LID) == Some(2)
        });
        this
    }

    /// Starts an SM-managed switch (no LID, no routes, ports Init until
    /// the SM says otherwise) the same way, and waits until both its
    /// ports are up.
    pub fn start_managed(dir: &TempDir, guid: u64, lid: u16) -> Self {
        let this = Self::connect(dir, guid, lid, true);
        wait_until("ports never came up", || {
            this.sw.is_port_up(1) && this.sw.is_port_up(2)
        });
        this
    }

    fn connect(dir: &TempDir, guid: u64, lid: u16, sm_managed: bool) -> Self {
        let sw = Switch::start(SwitchConfig {
            name: "sw".into(),
            guid,
            lid,
            ports: vec![
                PortConfig::new(LinkEndpoint::Listen(dir.join("p1"))),
                PortConfig::new(LinkEndpoint::Listen(dir.join("p2"))),
            ],
            routes: Vec::new(),
            link: LinkConfig::default(),
            sm_managed,
        })
        .unwrap();
        let sm = SmClient::start(LinkEndpoint::Connect(dir.join("p1")), SM_LID);
        let host = SmClient::start(LinkEndpoint::Connect(dir.join("p2")), HOST_LID);
        SmSwitch { sw, sm, host }
    }
}

/// Polls `done` until it holds; panics with `what` after 20 s.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
