//! What the guest of a subnet-managed port sees of its SM and of the
//! managers it runs itself (no VM; found running OpenSM and
//! infiniband-diags in guests):
//!
//! - QUERY_PORT reports the SM's LID and the LMC the SM set in PortInfo
//!   (`ibstat`'s "SM lid", and where `saquery` and `sminfo` send their
//!   MADs), and entry 0 of the P_Key table the SM set;
//! - the answer to a PM request that the guest's own QP1 sent (`perfquery`)
//!   reaches that QP1, instead of being taken by the device's own
//!   performance management agent as one more PM MAD;
//! - a LID the SM gives an Active port is a port event (EVENT_CAUSE's
//!   PORT_CHANGE, the new LID in PORT_LID: the guest driver's
//!   `IB_EVENT_LID_CHANGE`), the same LID again none.

use std::time::{Duration, Instant};

use ibtca_device::instance::InstanceConfig;
use ibtca_device::regs;
use ibtca_device::verbs::abi::*;
use ibtca_protocol::mad::attr::{id, PKeyTable, PortInfo, PortState};
use ibtca_protocol::mad::pma::{pma_id, PmaMad, PortCounters};
use ibtca_protocol::mad::{method, MadStatus, Smp, MAD_LEN};
use ibtca_tests::datagram::ud_send_wqe;
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::sim_guest::{recv_wqe, SimGuest};
use ibtca_tests::sm_client::SmClient;
use ibtca_tests::sm_nodes::{sm_device_server, SM_LID};
use ibtca_tests::{TempDir, TestServer};

const T: Duration = Duration::from_secs(20);

/// A managed device of `cfg` behind a vfio-user server, the test SM on
/// its link and a simulated guest on the server, once the port is Init.
fn managed_device(tag: &str, cfg: InstanceConfig) -> (TestServer, SmClient, SimGuest) {
    let cfg = InstanceConfig {
        lid: 7,
        sm_managed: true,
        ..cfg
    };
    let (server, sm) = sm_device_server(TempDir::new(tag), cfg);
    let mut g = SimGuest::new(&server.socket, 4 << 20);
    let deadline = Instant::now() + T;
    while g.client.read32(0, regs::PORT_STATE) != regs::PORT_INIT {
        assert!(Instant::now() < deadline, "the port never reached Init");
        std::thread::sleep(Duration::from_millis(5));
    }
    (server, sm, g)
}

/// Sets PortInfo's LID, LMC and state through `sm`, as OpenSM does.
fn set_port(sm: &mut SmClient, lid: u16, lmc: u8, state: PortState) {
    let get = Smp::directed(method::GET, id::PORT_INFO, 1, &[1]).unwrap();
    let mut p = PortInfo::decode(&sm.ask(get, 0).data);
    (p.lid, p.master_sm_lid, p.lmc) = (lid, SM_LID, lmc);
    p.port_state = state as u8;
    let mut set = Smp::directed(method::SET, id::PORT_INFO, 1, &[1]).unwrap();
    set.data = p.encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::OK);
}

#[test]
fn query_port_reports_the_sm_lid_and_lmc_the_sm_set() {
    let cfg = InstanceConfig {
        node_guid: 0x1200_0000_0000_0909,
        port_guid: 0x1200_0000_0000_0909,
        ..InstanceConfig::default()
    };
    let (_server, mut sm, mut g) = managed_device("sm-view", cfg);
    let before: PortAttr = g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(
        (before.lid.to_native(), before.sm_lid.to_native()),
        (0, 0),
        "no SM yet"
    );

    set_port(&mut sm, 0x31, 2, PortState::Armed);

    let after: PortAttr = g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(
        (
            after.lid.to_native(),
            after.sm_lid.to_native(),
            after.lmc,
            after.state
        ),
        (0x31, SM_LID, 2, regs::PORT_ARMED as u8)
    );
}

/// QUERY_PORT's P_Key is entry 0 of the port's P_Key table: the
/// default full-member key until the SM writes another there.
#[test]
fn query_port_reports_the_p_key_at_entry_0_of_the_table() {
    let (_server, mut sm, mut g) = managed_device("sm-pkey", InstanceConfig::default());
    let before: PortAttr = g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(before.pkey.to_native(), 0xffff);
    let mut keys = [0u16; 32];
    (keys[0], keys[1]) = (0x7fff, 0x8005);
    let mut set = Smp::directed(method::SET, id::P_KEY_TABLE, 0, &[1]).unwrap();
    set.data = PKeyTable(keys).encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::OK);
    let after: PortAttr = g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(after.pkey.to_native(), 0x7fff);
}

#[test]
fn a_new_lid_on_an_active_port_is_a_port_event() {
    let (_server, mut sm, mut g) = managed_device("sm-lid-event", InstanceConfig::default());
    set_port(&mut sm, 0x21, 0, PortState::Armed);
    set_port(&mut sm, 0x21, 0, PortState::Active);
    let cause = |g: &mut SimGuest| g.client.read32(0, regs::EVENT_CAUSE);
    assert_eq!(g.client.read32(0, regs::PORT_STATE), regs::PORT_ACTIVE);
    g.client
        .write32(0, regs::EVENT_CAUSE, regs::EVENT_PORT_CHANGE);
    assert_eq!(cause(&mut g) & regs::EVENT_PORT_CHANGE, 0);

    // The same LID again: nothing changed, no event.
    set_port(&mut sm, 0x21, 0, PortState::NoChange);
    assert_eq!(cause(&mut g) & regs::EVENT_PORT_CHANGE, 0, "no change");

    set_port(&mut sm, 0x44, 0, PortState::NoChange);
    assert_eq!(
        (
            cause(&mut g) & regs::EVENT_PORT_CHANGE,
            g.client.read32(0, regs::PORT_LID),
            g.client.read32(0, regs::PORT_STATE)
        ),
        (regs::EVENT_PORT_CHANGE, 0x44, regs::PORT_ACTIVE)
    );
    let attr: PortAttr = g.query(CMD_QUERY_PORT).unwrap();
    assert_eq!(attr.lid.to_native(), 0x44);
}

#[test]
fn a_pm_answer_to_the_guests_own_request_reaches_its_qp1() {
    let mut p = LinkedPair::start(PairOptions::default());
    let a = &mut p.a;
    let mut gsi = a.g.create_datagram_qp(a.pd, &a.cq, 6, QPT_GSI).unwrap();
    a.g.datagram_ready(&gsi, GSI_QKEY).unwrap();
    // A PortCounters Get from A's QP1 (as perfquery sends it) to B's LID.
    let mut req = PmaMad::new(method::GET, pma_id::PORT_COUNTERS, 0);
    req.header.tid = 0x5eed;
    req.data = PortCounters {
        port_select: 1,
        ..PortCounters::default()
    }
    .encode();
    a.g.write(a.buf + 4096, &req.to_bytes());
    let r = recv_wqe(3, a.buf, 40 + MAD_LEN as u32, a.lkey);
    a.g.post_recv(&mut gsi, &r);
    a.g.client.read32(0, regs::MAGIC);
    let w = ud_send_wqe(1, (a.buf + 4096, MAD_LEN as u32, a.lkey), 2, 1, GSI_QKEY);
    a.g.post_ud_send(&mut gsi, &w);
    let mut got = [
        a.g.poll_cq(&mut a.cq, T).expect("the send completes"),
        a.g.poll_cq(&mut a.cq, T)
            .expect("B's answer reaches A's QP1, not A's agent"),
    ];
    got.sort_by_key(|c| c.opcode);
    assert_eq!((got[0].opcode, got[0].status), (WC_SEND, WC_SUCCESS));
    let c = got[1];
    assert_eq!((c.wr_id.to_native(), c.status), (3, WC_SUCCESS));
    assert_eq!((c.src_qp.to_native(), c.slid.to_native()), (1, 2));
    let answer = PmaMad::parse(&a.g.read(a.buf + 40, MAD_LEN)).unwrap();
    assert_eq!(
        (
            answer.header.method,
            answer.header.status,
            answer.header.tid
        ),
        (method::GET_RESP, 0, 0x5eed)
    );
    assert_eq!(PortCounters::decode(&answer.data).port_select, 1);
}
