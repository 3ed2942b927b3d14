//! The agent against a fake node: counters since the baselines, resets by
//! CounterSelect, PortSelect checks, statuses.

use ibtca_protocol::mad::pma::{
    counter_select as sel, counter_select_ext as sel_ext, pma_cap, pma_id, ClassPortInfo, PmaMad,
    PortCounters, PortCountersExt,
};
use ibtca_protocol::mad::{method, MadStatus};

use super::{CaPort, Pma, PortSource, PortTotals};

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

/// A node with `ports` (AllPortSelect if `all`) and the agent answering
/// for it.
struct Agent {
    node: Node,
    pma: Pma,
}

impl Agent {
    fn new(ports: Vec<PortTotals>, all: bool) -> Self {
        Agent {
            node: Node { ports, all },
            pma: Pma::default(),
        }
    }

    /// The answer to `m` of `attr` with `data`, checked to be a GetResp
    /// to the request.
    fn ask(&mut self, m: u8, attr: u16, data: [u8; 192]) -> PmaMad {
        let mut req = PmaMad::new(m, attr, 0);
        req.header.tid = 7;
        req.data = data;
        let r = self.pma.answer(&self.node, req).expect("an answer");
        assert_eq!((r.header.method, r.header.tid), (method::GET_RESP, 7));
        r
    }

    /// The answer to PortCounters `m` of `port` with CounterSelect `mask`.
    fn counters(&mut self, m: u8, port: u8, mask: u16) -> PmaMad {
        let data = PortCounters {
            port_select: port,
            counter_select: mask,
            ..PortCounters::default()
        }
        .encode();
        self.ask(m, pma_id::PORT_COUNTERS, data)
    }

    /// The answer to PortCountersExtended `m` of `port` with
    /// CounterSelect `mask`, decoded.
    fn counters_ext(&mut self, m: u8, port: u8, mask: u16) -> PortCountersExt {
        let data = PortCountersExt {
            port_select: port,
            counter_select: mask,
            ..PortCountersExt::default()
        }
        .encode();
        PortCountersExt::decode(&self.ask(m, pma_id::PORT_COUNTERS_EXT, data).data)
    }
}

#[test]
fn port_counters_report_totals_in_words_and_saturate() {
    let mut agent = Agent::new(vec![totals(4000, 10)], false);
    let r = agent.counters(method::GET, 1, 0);
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
    let r = agent.counters(method::GET, 2, 0);
    assert_eq!(r.header.status, MadStatus::INVALID_ATTR_VALUE.0);
    let r = agent.counters(method::GET, 0xff, 0);
    assert_eq!(
        r.header.status,
        MadStatus::INVALID_ATTR_VALUE.0,
        "no AllPortSelect on this node"
    );
}

#[test]
fn a_set_resets_exactly_the_selected_counters() {
    let mut agent = Agent::new(vec![totals(4000, 10)], false);
    let r = agent.counters(method::SET, 1, sel::XMIT_DATA | sel::RCV_PKTS);
    let c = PortCounters::decode(&r.data);
    assert_eq!(
        (c.xmit_data, c.rcv_data, c.xmit_pkts, c.rcv_pkts),
        (0, 2000, 10, 0)
    );
    agent.node.ports[0] = totals(8000, 11);
    let c = PortCounters::decode(&agent.counters(method::GET, 1, 0).data);
    assert_eq!(
        (c.xmit_data, c.rcv_data, c.xmit_pkts, c.rcv_pkts),
        (1000, 4000, 11, 2)
    );
    // The extended counters share the baselines.
    let e = agent.counters_ext(method::SET, 1, sel_ext::RCV_DATA);
    assert_eq!((e.xmit_data, e.rcv_data, e.rcv_pkts), (1000, 0, 2));
    assert_eq!((e.unicast_rcv_pkts, e.multicast_rcv_pkts), (1, 1));
}

#[test]
fn all_ports_sum_and_class_port_info_says_so() {
    let mut agent = Agent::new(vec![totals(400, 1), totals(800, 2)], true);
    let r = agent.ask(method::GET, pma_id::CLASS_PORT_INFO, [0; 192]);
    let info = ClassPortInfo::decode(&r.data);
    assert_eq!(
        info.capability_mask,
        pma_cap::EXT_WIDTH | pma_cap::ALL_PORT_SELECT
    );
    let e = agent.counters_ext(method::GET, 0xff, 0);
    assert_eq!((e.port_select, e.xmit_data, e.xmit_pkts), (0xff, 300, 3));
}

#[test]
fn bad_methods_attributes_and_versions_get_statuses_and_responses_nothing() {
    let mut agent = Agent::new(vec![PortTotals::default()], false);
    let r = agent.ask(method::SET, pma_id::CLASS_PORT_INFO, [0; 192]);
    assert_eq!(r.header.status, MadStatus::UNSUPPORTED_METHOD_ATTR.0);
    let r = agent.ask(method::GET, 0x0099, [0; 192]);
    assert_eq!(r.header.status, MadStatus::UNSUPPORTED_METHOD_ATTR.0);
    let r = agent.ask(method::SEND, pma_id::PORT_COUNTERS, [0; 192]);
    assert_eq!(r.header.status, MadStatus::UNSUPPORTED_METHOD.0);
    let mut old = PmaMad::new(method::GET, pma_id::PORT_COUNTERS, 0);
    old.header.class_version = 2;
    let r = agent.pma.answer(&agent.node, old).unwrap();
    assert_eq!(r.header.status, MadStatus::BAD_VERSION.0);
    let resp = PmaMad::new(method::GET_RESP, pma_id::PORT_COUNTERS, 0);
    assert!(agent.pma.answer(&agent.node, resp).is_none());
}

/// A CA's PMA (`CaPort`): PortSelect 0 (`perfquery LID` without a port)
/// and 1 both name the one port, with one baseline; any other port and
/// 0xFF (no AllPortSelect) are invalid.
#[test]
fn a_ca_reads_port_select_0_as_its_port() {
    let mut pma = Pma::default();
    let port = CaPort(totals(4000, 10));
    let ask = |pma: &mut Pma, m: u8, select: u8, mask: u16| {
        let mut req = PmaMad::new(m, pma_id::PORT_COUNTERS, 0);
        req.data = PortCounters {
            port_select: select,
            counter_select: mask,
            ..PortCounters::default()
        }
        .encode();
        pma.answer(&port, req).expect("an answer")
    };
    let r = ask(&mut pma, method::GET, 0, 0);
    assert_eq!(r.header.status, 0, "PortSelect 0 at a CA");
    let c = PortCounters::decode(&r.data);
    assert_eq!((c.port_select, c.xmit_data, c.rcv_pkts), (0, 1000, 20));
    // A reset through PortSelect 0 is the port's reset.
    ask(&mut pma, method::SET, 0, sel::XMIT_DATA);
    let c = PortCounters::decode(&ask(&mut pma, method::GET, 1, 0).data);
    assert_eq!((c.port_select, c.xmit_data, c.rcv_pkts), (1, 0, 20));
    for select in [2, 0xfe, 0xff] {
        let r = ask(&mut pma, method::GET, select, 0);
        assert_eq!(r.header.status, MadStatus::INVALID_ATTR_VALUE.0, "{select}");
    }
    let info = PmaMad::new(method::GET, pma_id::CLASS_PORT_INFO, 0);
    let info = ClassPortInfo::decode(&pma.answer(&port, info).unwrap().data);
    assert_eq!(info.capability_mask & pma_cap::ALL_PORT_SELECT, 0);
}
