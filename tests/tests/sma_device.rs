//! A device's subnet management agent from a test SM on its link (no VM):
//! a managed port brought up Init → Armed → Active with the LID the SM
//! gives (BAR0 shows both), every attribute's Get and Set, the status of
//! bad requests, M_Key protection.

use std::time::{Duration, Instant};

use ibtca_device::instance::InstanceConfig;
use ibtca_device::regs;
use ibtca_protocol::mad::attr::{
    id, GuidInfo, NodeDescription, NodeInfo, NodeType, PKeyTable, PortInfo, PortState,
};
use ibtca_protocol::mad::{method, MadStatus, Smp, SmpRoute};
use ibtca_tests::sm_client::SmClient;
use ibtca_tests::sm_nodes::{sm_device, sm_device_server, SM_LID};
use ibtca_tests::{Client, TempDir, TestServer};

const NODE_GUID: u64 = 0x1200_0000_0000_0707;

fn wait_reg(c: &mut Client, reg: u64, want: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while c.read32(0, reg) != want {
        assert!(
            Instant::now() < deadline,
            "BAR0 {reg:#x} never became {want}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A directed-route request to the device at the SM's first hop.
fn dr(method: u8, attr: u16, modifier: u32) -> Smp {
    Smp::directed(method, attr, modifier, &[1]).unwrap()
}

fn lid_routed(method: u8, attr: u16, modifier: u32) -> Smp {
    Smp::new(SmpRoute::Lid, method, attr, modifier)
}

/// The managed device the SM talks to, behind a vfio-user server.
fn managed_device(dir: TempDir) -> (TestServer, SmClient) {
    let cfg = InstanceConfig {
        lid: 7,
        sm_managed: true,
        node_description: "n7 ibtca".into(),
        node_guid: NODE_GUID,
        port_guid: NODE_GUID + 1,
        ..InstanceConfig::default()
    };
    sm_device_server(dir, cfg)
}

#[test]
fn a_test_sm_brings_a_managed_port_up_with_its_lid() {
    let (server, mut sm) = managed_device(TempDir::new("sma-dev"));
    let mut c = server.client();
    wait_reg(&mut c, regs::PORT_STATE, regs::PORT_INIT);
    assert_eq!(c.read32(0, regs::PORT_LID), 0, "no LID before the SM's");

    let r = sm.ask(dr(method::GET, id::NODE_INFO, 0), 0);
    assert!(r.direction, "a directed answer comes back with the D bit");
    assert_eq!(
        (r.status, r.hop_ptr, r.return_path[1]),
        (MadStatus::OK, 1, 1)
    );
    let n = NodeInfo::decode(&r.data);
    assert_eq!(
        (n.node_type, n.num_ports, n.local_port_num),
        (NodeType::Ca, 1, 1)
    );
    assert_eq!((n.node_guid, n.port_guid), (NODE_GUID, NODE_GUID + 1));
    let r = sm.ask(dr(method::GET, id::NODE_DESCRIPTION, 0), 0);
    assert_eq!(NodeDescription::decode(&r.data).0, "n7 ibtca");

    let mut p = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 1), 0).data);
    assert_eq!(
        (p.lid, p.port_state, p.phys_state),
        (0, PortState::Init as u8, 5)
    );
    p.lid = 0x21;
    p.master_sm_lid = SM_LID;
    p.port_state = PortState::Armed as u8;
    let mut set = dr(method::SET, id::PORT_INFO, 1);
    set.data = p.encode();
    let r = sm.ask(set.clone(), 0);
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(PortInfo::decode(&r.data).lid, 0x21);
    wait_reg(&mut c, regs::PORT_STATE, regs::PORT_ARMED);
    assert_eq!(c.read32(0, regs::PORT_LID), 0x21, "BAR0 shows the SM's LID");

    // From now on LID-routed, to the LID the SM gave.
    p.port_state = PortState::Active as u8;
    let mut set = lid_routed(method::SET, id::PORT_INFO, 1);
    set.data = p.encode();
    sm.send(&mut set, 0x21);
    let (r, vl, slid, dlid) = sm.next_smp();
    assert_eq!((vl, slid, dlid), (15, 0x21, SM_LID));
    assert_eq!((r.status, r.method), (MadStatus::OK, method::GET_RESP));
    wait_reg(&mut c, regs::PORT_STATE, regs::PORT_ACTIVE);
    let got = PortInfo::decode(&sm.ask(lid_routed(method::GET, id::PORT_INFO, 0), 0x21).data);
    assert_eq!(
        (got.port_state, got.master_sm_lid),
        (PortState::Active as u8, SM_LID)
    );
}

#[test]
fn bad_requests_get_their_status_and_tables_round_trip() {
    let (_server, mut sm) = managed_device(TempDir::new("sma-dev-bad"));
    for (smp, status) in [
        (
            dr(method::GET, 0x00ff, 0),
            MadStatus::UNSUPPORTED_METHOD_ATTR,
        ),
        (
            dr(method::GET, id::LINEAR_FORWARDING_TABLE, 0),
            MadStatus::UNSUPPORTED_METHOD_ATTR,
        ),
        (
            dr(method::SET, id::NODE_DESCRIPTION, 0),
            MadStatus::UNSUPPORTED_METHOD_ATTR,
        ),
        (
            dr(method::GET, id::PORT_INFO, 2),
            MadStatus::INVALID_ATTR_VALUE,
        ),
        (
            dr(method::GET, id::P_KEY_TABLE, 9),
            MadStatus::INVALID_ATTR_VALUE,
        ),
        (
            dr(method::SEND, id::NODE_INFO, 0),
            MadStatus::UNSUPPORTED_METHOD,
        ),
    ] {
        let what = (smp.method, smp.attr_id, smp.attr_mod);
        assert_eq!(sm.ask(smp, 0).status, status, "{what:x?}");
    }
    // Init → Active skips Armed: refused, nothing changed.
    let mut p = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 1), 0).data);
    p.port_state = PortState::Active as u8;
    p.lid = 0x30;
    let mut set = dr(method::SET, id::PORT_INFO, 1);
    set.data = p.encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::INVALID_ATTR_VALUE);
    let now = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 1), 0).data);
    assert_eq!((now.lid, now.port_state), (0, PortState::Init as u8));

    let mut keys = [0u16; 32];
    keys[0] = 0xffff;
    keys[1] = 0x8005;
    let mut set = dr(method::SET, id::P_KEY_TABLE, 0);
    set.data = PKeyTable(keys).encode();
    assert_eq!(PKeyTable::decode(&sm.ask(set, 0).data).0, keys);
    assert_eq!(
        PKeyTable::decode(&sm.ask(dr(method::GET, id::P_KEY_TABLE, 0), 0).data).0,
        keys
    );
    let g = GuidInfo::decode(&sm.ask(dr(method::GET, id::GUID_INFO, 0), 0).data);
    assert_eq!(g.0[0], NODE_GUID + 1);
}

#[test]
fn a_wrong_m_key_gets_no_answer_and_is_counted() {
    const KEY: u64 = 0x0bad_cafe_0000_0001;
    let (_server, mut sm) = managed_device(TempDir::new("sma-dev-mkey"));
    let mut p = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 1), 0).data);
    p.m_key = KEY;
    p.m_key_protect = 2;
    let mut set = dr(method::SET, id::PORT_INFO, 1);
    set.data = p.encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::OK);

    // Level 2: a Get with the wrong key is not answered: the next answer
    // the SM receives is the one to the request with the right key.
    let mut wrong = dr(method::GET, id::NODE_INFO, 0);
    wrong.m_key = KEY ^ 1;
    sm.send(&mut wrong, 0);
    let mut right = dr(method::GET, id::PORT_INFO, 1);
    right.m_key = KEY;
    let r = sm.ask(right, 0);
    let info = PortInfo::decode(&r.data);
    assert_eq!((info.m_key, info.m_key_protect), (KEY, 2));
    assert_eq!(info.m_key_violations, 1);
    // A Set with no key changes nothing.
    let mut q = info;
    q.lid = 0x44;
    q.m_key = 0;
    let mut set = dr(method::SET, id::PORT_INFO, 1);
    set.data = q.encode();
    sm.send(&mut set, 0);
    let mut right = dr(method::GET, id::PORT_INFO, 1);
    right.m_key = KEY;
    let info = PortInfo::decode(&sm.ask(right, 0).data);
    assert_eq!((info.lid, info.m_key_violations), (0, 2));
}

/// An RC SEND to QP 5 from LID `slid` to `dlid`.
fn data_to_qp5(slid: u16, dlid: u16) -> Vec<u8> {
    let mut p = ibtca_protocol::Packet::new(ibtca_protocol::Opcode::RcSendOnly);
    p.lrh.slid = slid;
    p.lrh.dlid = dlid;
    p.bth.dest_qp = 5;
    p.payload = vec![1; 16];
    p.build().unwrap()
}

/// Sends `packet` and waits until the link has written it, so that what
/// the SM sends next comes after it in the stream.
fn send_written(sm: &SmClient, packet: Vec<u8>) {
    let before = sm.link.stats().tx_packets;
    sm.link.send(packet).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while sm.link.stats().tx_packets == before {
        assert!(Instant::now() < deadline, "the packet was never written");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_port_in_init_drops_data_and_an_armed_one_takes_it() {
    let dir = TempDir::new("sma-dev-init");
    let cfg = InstanceConfig {
        sm_managed: true,
        ..InstanceConfig::default()
    };
    let (instance, mut sm) = sm_device(&dir, cfg);
    let mut p = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 1), 0).data);
    assert_eq!(p.port_state, PortState::Init as u8);
    send_written(&sm, data_to_qp5(SM_LID, 0));
    p.lid = 3;
    p.port_state = PortState::Armed as u8;
    let mut set = dr(method::SET, id::PORT_INFO, 1);
    set.data = p.encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::OK);
    send_written(&sm, data_to_qp5(SM_LID, 3));
    // Answered after the second data packet: the engine has handled it.
    sm.ask(dr(method::GET, id::NODE_INFO, 0), 0);
    let stats = instance.stop();
    assert_eq!(stats.rx_port_init, 1, "the packet while in Init");
    assert_eq!(
        stats.rx_no_qp, 1,
        "the packet once Armed reached the QP lookup"
    );
}
