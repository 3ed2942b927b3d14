//! Port state as the guest sees it: PORT_STATE follows the link, and every
//! change raises the asynchronous event vector with IBTCA_EVENT_PORT_CHANGE
//! in EVENT_CAUSE (write-1-to-clear), counted in PORT_EVENTS.

use std::time::Duration;

use ibtca_device::instance::InstanceConfig;
use ibtca_device::link::LinkEndpoint;
use ibtca_device::regs;
use ibtca_device::verbs::abi::{PortAttr, CMD_QUERY_PORT, PORT_PHYS_LINK_UP, PORT_PHYS_POLLING};
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::{wait_eventfd, TempDir, TestServer};

const T: Duration = Duration::from_secs(20);

#[test]
fn link_down_and_up_are_events_to_the_guest() {
    let p = LinkedPair::start(PairOptions::default());
    let (mut a, _b, (sa, sb), dir) = p.into_parts();
    let c = &mut a.g.client;
    assert_eq!(c.read32(0, regs::PORT_STATE), regs::PORT_ACTIVE);
    let base = c.read32(0, regs::PORT_EVENTS);
    assert!(base >= 1, "coming up was an event");
    // Route events to vector 1 (the harness's eventfd) and clear the cause
    // of the first link-up.
    c.write32(0, regs::EVENT_VECTOR, 1);
    assert_eq!(c.read32(0, regs::EVENT_VECTOR), 1);
    c.write32(0, regs::EVENT_CAUSE, regs::EVENT_PORT_CHANGE);
    assert_eq!(c.read32(0, regs::EVENT_CAUSE), 0);
    while wait_eventfd(&a.g.cq_irq, Duration::from_millis(1)).is_some() {}

    // The peer goes away: one event, port down.
    drop(sb);
    assert!(
        wait_eventfd(&a.g.cq_irq, T).is_some(),
        "no interrupt for the link going down"
    );
    let c = &mut a.g.client;
    assert_eq!(c.read32(0, regs::EVENT_CAUSE), regs::EVENT_PORT_CHANGE);
    assert_eq!(c.read32(0, regs::PORT_STATE), regs::PORT_DOWN);
    assert_eq!(c.read32(0, regs::PORT_EVENTS), base + 1);
    c.write32(0, regs::EVENT_CAUSE, regs::EVENT_PORT_CHANGE);
    // QUERY_PORT says so too: down, polling for a peer.
    let attr: PortAttr = a.g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(
        (u32::from(attr.state), attr.phys_state),
        (regs::PORT_DOWN, PORT_PHYS_POLLING)
    );

    // A new peer connects: one more event, port active.
    let cfg = InstanceConfig {
        lid: 2,
        link: Some(LinkEndpoint::Connect(dir.join("ab.link"))),
        ..InstanceConfig::default()
    };
    let _sb2 = TestServer::start_instance(TempDir::new("side"), cfg);
    assert!(
        wait_eventfd(&a.g.cq_irq, T).is_some(),
        "no interrupt for the link coming back"
    );
    let attr: PortAttr = a.g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(
        (u32::from(attr.state), attr.phys_state),
        (regs::PORT_ACTIVE, PORT_PHYS_LINK_UP)
    );
    let c = &mut a.g.client;
    assert_eq!(c.read32(0, regs::EVENT_CAUSE), regs::EVENT_PORT_CHANGE);
    assert_eq!(c.read32(0, regs::PORT_STATE), regs::PORT_ACTIVE);
    assert_eq!(c.read32(0, regs::PORT_EVENTS), base + 2);
    // A bad vector is refused and changes nothing.
    let errs = c.read32(0, regs::ERROR_COUNT);
    c.write32(0, regs::EVENT_VECTOR, 99);
    assert_eq!(c.read32(0, regs::EVENT_VECTOR), 1);
    assert_eq!(c.read32(0, regs::ERROR_COUNT), errs + 1);
    drop(sa);
}
