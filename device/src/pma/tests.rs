//! The agent against a fake node: counters since the baselines, resets by
//! CounterSelect, PortSelect checks, statuses.

use ibtca_protocol::mad::pma::{
    counter_select as sel, counter_select_ext as sel_ext, pma_cap, pma_id, ClassPortInfo, PmaMad,
    PortCounters, PortCountersExt,
};
use ibtca_protocol::mad::{method, MadStatus};

use super::{Pma, PortSource, PortTotals};

struct Node {
    ports: Vec<PortTotals>,
    all: bool,
}

impl PortSource for Node {
    fn has_port(&self, port: u8) -> bool {
        usize::from(port) < self.ports.len() + 1 && port >= 1
    }
    fn all_ports(&self) -> Vec<u8> {
        if self.all {
            (1..=self.ports.len() as u8).collect()
        } else {
            Vec::new()
        }
    }
    fn totals(&self, port: u8) -> PortTotals {
        self.ports[usize::from(port) - 1]
    }
}

fn totals(bytes: u64, pkts: u64) -> PortTotals {
    PortTotals {
        xmit_bytes: bytes,
        rcv_bytes: 2 * bytes,
        xmit_pkts: pkts,
        rcv_pkts: 2 * pkts,
        multicast_rcv_pkts: 1,
        rcv_constraint_errors: 3,
        vl15_dropped: 70_000,
        ..PortTotals::default()
    }
}

fn ask(pma: &mut Pma, node: &Node, m: u8, attr: u16, data: [u8; 192]) -> PmaMad {
    let mut req = PmaMad::new(m, attr, 0);
    req.header.tid = 7;
    req.data = data;
    let r = pma.answer(node, req).expect("an answer");
    assert_eq!((r.header.method, r.header.tid), (method::GET_RESP, 7));
    r
}

fn select(port: u8, mask: u16) -> [u8; 192] {
    PortCounters {
        port_select: port,
        counter_select: mask,
        ..PortCounters::default()
    }
    .encode()
}

#[test]
fn port_counters_report_totals_in_words_and_saturate() {
    let node = Node {
        ports: vec![totals(4000, 10)],
        all: false,
    };
    let mut pma = Pma::default();
    let r = ask(
        &mut pma,
        &node,
        method::GET,
        pma_id::PORT_COUNTERS,
        select(1, 0),
    );
    assert_eq!(r.header.status, 0);
    let c = PortCounters::decode(&r.data);
    assert_eq!(
        (
            c.port_select,
            c.xmit_data,
            c.rcv_data,
            c.xmit_pkts,
            c.rcv_pkts
        ),
        (1, 1000, 2000, 10, 20)
    );
    assert_eq!((c.rcv_constraint_errors, c.vl15_dropped), (3, u16::MAX));
    let r = ask(
        &mut pma,
        &node,
        method::GET,
        pma_id::PORT_COUNTERS,
        select(2, 0),
    );
    assert_eq!(r.header.status, MadStatus::INVALID_ATTR_VALUE.0);
    let r = ask(
        &mut pma,
        &node,
        method::GET,
        pma_id::PORT_COUNTERS,
        select(0xff, 0),
    );
    assert_eq!(
        r.header.status,
        MadStatus::INVALID_ATTR_VALUE.0,
        "no AllPortSelect on this node"
    );
}

#[test]
fn a_set_resets_exactly_the_selected_counters() {
    let mut node = Node {
        ports: vec![totals(4000, 10)],
        all: false,
    };
    let mut pma = Pma::default();
    let r = ask(
        &mut pma,
        &node,
        method::SET,
        pma_id::PORT_COUNTERS,
        select(1, sel::XMIT_DATA | sel::RCV_PKTS),
    );
    let c = PortCounters::decode(&r.data);
    assert_eq!(
        (c.xmit_data, c.rcv_data, c.xmit_pkts, c.rcv_pkts),
        (0, 2000, 10, 0)
    );
    node.ports[0] = totals(8000, 11);
    let c = PortCounters::decode(
        &ask(
            &mut pma,
            &node,
            method::GET,
            pma_id::PORT_COUNTERS,
            select(1, 0),
        )
        .data,
    );
    assert_eq!(
        (c.xmit_data, c.rcv_data, c.xmit_pkts, c.rcv_pkts),
        (1000, 4000, 11, 2)
    );
    // The extended counters share the baselines.
    let ext = PortCountersExt {
        port_select: 1,
        counter_select: sel_ext::RCV_DATA,
        ..PortCountersExt::default()
    };
    let r = ask(
        &mut pma,
        &node,
        method::SET,
        pma_id::PORT_COUNTERS_EXT,
        ext.encode(),
    );
    let e = PortCountersExt::decode(&r.data);
    assert_eq!((e.xmit_data, e.rcv_data, e.rcv_pkts), (1000, 0, 2));
    assert_eq!((e.unicast_rcv_pkts, e.multicast_rcv_pkts), (1, 1));
}

#[test]
fn all_ports_sum_and_class_port_info_says_so() {
    let node = Node {
        ports: vec![totals(400, 1), totals(800, 2)],
        all: true,
    };
    let mut pma = Pma::default();
    let r = ask(
        &mut pma,
        &node,
        method::GET,
        pma_id::CLASS_PORT_INFO,
        [0; 192],
    );
    let info = ClassPortInfo::decode(&r.data);
    assert_eq!(
        info.capability_mask,
        pma_cap::EXT_WIDTH | pma_cap::ALL_PORT_SELECT
    );
    let ext = PortCountersExt {
        port_select: 0xff,
        ..PortCountersExt::default()
    };
    let r = ask(
        &mut pma,
        &node,
        method::GET,
        pma_id::PORT_COUNTERS_EXT,
        ext.encode(),
    );
    let e = PortCountersExt::decode(&r.data);
    assert_eq!((e.port_select, e.xmit_data, e.xmit_pkts), (0xff, 300, 3));
}

#[test]
fn bad_methods_attributes_and_versions_get_statuses_and_responses_nothing() {
    let node = Node {
        ports: vec![PortTotals::default()],
        all: false,
    };
    let mut pma = Pma::default();
    let r = ask(
        &mut pma,
        &node,
        method::SET,
        pma_id::CLASS_PORT_INFO,
        [0; 192],
    );
    assert_eq!(r.header.status, MadStatus::UNSUPPORTED_METHOD_ATTR.0);
    let r = ask(&mut pma, &node, method::GET, 0x0099, [0; 192]);
    assert_eq!(r.header.status, MadStatus::UNSUPPORTED_METHOD_ATTR.0);
    let r = ask(
        &mut pma,
        &node,
        method::SEND,
        pma_id::PORT_COUNTERS,
        [0; 192],
    );
    assert_eq!(r.header.status, MadStatus::UNSUPPORTED_METHOD.0);
    let mut old = PmaMad::new(method::GET, pma_id::PORT_COUNTERS, 0);
    old.header.class_version = 2;
    let r = pma.answer(&node, old).unwrap();
    assert_eq!(r.header.status, MadStatus::BAD_VERSION.0);
    let resp = PmaMad::new(method::GET_RESP, pma_id::PORT_COUNTERS, 0);
    assert!(pma.answer(&node, resp).is_none());
}
