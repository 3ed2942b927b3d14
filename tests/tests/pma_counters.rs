//! Performance management agents and P_Key enforcement from a test
//! SM/PM client on a link (no VM): a device's and a switch's PortCounters
//! move with exactly the traffic sent and reset by CounterSelect; a packet
//! with a P_Key the device's table does not hold is dropped and counted
//! (PortRcvConstraintErrors, PortInfo P_KeyViolations), also after the SM
//! replaced the table.

use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_protocol::mad::attr::{id, PKeyTable, PortInfo};
use ibtca_protocol::mad::pma::{
    pma_cap, pma_id, ClassPortInfo, PmaMad, PortCounters, PortCountersExt,
};
use ibtca_protocol::mad::{method, MadStatus, Smp};
use ibtca_tests::sm_client::{
    data_packet, data_packet_with_pkey, port_counters_mad as counters_req, SmClient,
};
use ibtca_tests::sm_nodes::{sm_device, SmSwitch, SM_LID};
use ibtca_tests::TempDir;

const DEV_LID: u16 = 7;
const SW_LID: u16 = 9;
const SW_GUID: u64 = 0x1200_0000_0000_f001;
const DEFAULT_PKEY: u16 = 0xffff;

/// Bytes of one PM MAD packet (a request and its answer are the same size).
fn pma_packet_len() -> u32 {
    let to = ibtca_protocol::mad::pma::GmpAddress {
        slid: 1,
        dlid: 2,
        sl: 0,
        pkey: DEFAULT_PKEY,
        dest_qp: 1,
    };
    let mad = PmaMad::new(method::GET, pma_id::PORT_COUNTERS, 0);
    ibtca_protocol::mad::pma::gmp_packet(&mad, &to)
        .build()
        .unwrap()
        .len() as u32
}

fn device(dir: &TempDir) -> (Instance, SmClient) {
    sm_device(
        dir,
        InstanceConfig {
            lid: DEV_LID,
            node_guid: 0x1200_0000_0000_0707,
            port_guid: 0x1200_0000_0000_0708,
            ..InstanceConfig::default()
        },
    )
}

#[test]
fn a_devices_port_counters_move_with_traffic_and_reset() {
    let dir = TempDir::new("pma-dev");
    let (_dev, mut sm) = device(&dir);
    let (r, slid) = sm.ask_pma(
        PmaMad::new(method::GET, pma_id::CLASS_PORT_INFO, 0),
        DEV_LID,
        DEFAULT_PKEY,
    );
    assert_eq!(slid, DEV_LID, "answered from the device's LID");
    assert_eq!(
        ClassPortInfo::decode(&r.data).capability_mask,
        pma_cap::EXT_WIDTH,
        "extended counters, one port (no AllPortSelect)"
    );
    let mad_len = pma_packet_len();
    // Reset everything: the answer already shows zeros.
    let (r, _) = sm.ask_pma(counters_req(method::SET, 1, 0xffff), DEV_LID, DEFAULT_PKEY);
    assert_eq!(r.header.status, 0);
    let z = PortCounters::decode(&r.data);
    assert_eq!(
        (z.rcv_pkts, z.xmit_pkts, z.rcv_data, z.xmit_data),
        (0, 0, 0, 0)
    );
    let data = data_packet(SM_LID, DEV_LID, 0, 1);
    for i in 0..10 {
        sm.link.send(data_packet(SM_LID, DEV_LID, 0, i)).unwrap();
    }
    let c1 = sm.port_counters(DEV_LID, 1, DEFAULT_PKEY);
    // Ten data packets and this Get in; the answer to the Set out. Data
    // counts words (bytes / 4) since the reset.
    assert_eq!(c1.rcv_pkts, 11);
    assert_eq!(c1.rcv_data, (10 * data.len() as u32 + mad_len) / 4);
    assert_eq!((c1.xmit_pkts, c1.xmit_data), (1, mad_len / 4));
    assert_eq!(c1.rcv_constraint_errors, 0);

    // Reset everything: the answer already shows zeros.
    let (r, _) = sm.ask_pma(counters_req(method::SET, 1, 0xffff), DEV_LID, DEFAULT_PKEY);
    assert_eq!(r.header.status, 0);
    let z = PortCounters::decode(&r.data);
    assert_eq!(
        (z.rcv_pkts, z.xmit_pkts, z.rcv_data, z.xmit_data),
        (0, 0, 0, 0)
    );
    let c2 = sm.port_counters(DEV_LID, 1, DEFAULT_PKEY);
    assert_eq!(
        (c2.rcv_pkts, c2.xmit_pkts, c2.rcv_data, c2.xmit_data),
        (1, 1, mad_len / 4, mad_len / 4),
        "the Get itself in, the Set's answer out"
    );
    // PortCountersExtended counts from the same reset.
    let mut ext = PmaMad::new(method::GET, pma_id::PORT_COUNTERS_EXT, 0);
    ext.data = PortCountersExt {
        port_select: 1,
        ..PortCountersExt::default()
    }
    .encode();
    let (r, _) = sm.ask_pma(ext, DEV_LID, DEFAULT_PKEY);
    let e = PortCountersExt::decode(&r.data);
    assert_eq!(
        (
            e.rcv_pkts,
            e.xmit_pkts,
            e.unicast_rcv_pkts,
            e.multicast_rcv_pkts
        ),
        (2, 2, 2, 0)
    );
    // A port the device does not have.
    let (r, _) = sm.ask_pma(counters_req(method::GET, 2, 0), DEV_LID, DEFAULT_PKEY);
    assert_eq!(r.header.status, MadStatus::INVALID_ATTR_VALUE.0);
}

fn port_info(sm: &mut SmClient) -> PortInfo {
    let r = sm.ask(
        Smp::directed(method::GET, id::PORT_INFO, 1, &[1]).unwrap(),
        0,
    );
    PortInfo::decode(&r.data)
}

#[test]
fn a_packet_with_a_foreign_p_key_is_dropped_and_counted() {
    let dir = TempDir::new("pma-pkey");
    let (dev, mut sm) = device(&dir);
    sm.link
        .send(data_packet_with_pkey(SM_LID, DEV_LID, 0, 1, 0x8001))
        .unwrap();
    let c = sm.port_counters(DEV_LID, 1, DEFAULT_PKEY);
    assert_eq!(c.rcv_constraint_errors, 1);
    assert_eq!(port_info(&mut sm).p_key_violations, 1);

    // The SM makes the port a full member of 0x0001 only.
    let mut keys = [0u16; 32];
    keys[0] = 0x8001;
    let mut set = Smp::directed(method::SET, id::P_KEY_TABLE, 0, &[1]).unwrap();
    set.data = PKeyTable(keys).encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::OK);
    // The default partition is now foreign; a limited member of 0x0001 is
    // let in by the full member.
    sm.link
        .send(data_packet_with_pkey(SM_LID, DEV_LID, 0, 2, DEFAULT_PKEY))
        .unwrap();
    sm.link
        .send(data_packet_with_pkey(SM_LID, DEV_LID, 0, 3, 0x0001))
        .unwrap();
    let c = sm.port_counters(DEV_LID, 1, 0x8001);
    assert_eq!(c.rcv_constraint_errors, 2);
    assert_eq!(port_info(&mut sm).p_key_violations, 2);
    // A PM MAD in the default partition is dropped too: the next answer is
    // to the request after it.
    let mut lost = counters_req(method::GET, 1, 0);
    sm.send_pma(&mut lost, DEV_LID, DEFAULT_PKEY);
    let c = sm.port_counters(DEV_LID, 1, 0x8001);
    assert_eq!(c.rcv_constraint_errors, 3);
    let stats = dev.stop();
    assert_eq!(stats.rx_bad_pkey, 3);
}

#[test]
fn a_switchs_port_counters_per_port_and_summed() {
    let dir = TempDir::new("pma-sw");
    let SmSwitch { sw, mut sm, host } = SmSwitch::start(&dir, SW_GUID, SW_LID);
    let (r, slid) = sm.ask_pma(
        PmaMad::new(method::GET, pma_id::CLASS_PORT_INFO, 0),
        SW_LID,
        DEFAULT_PKEY,
    );
    assert_eq!(slid, SW_LID);
    assert_eq!(
        ClassPortInfo::decode(&r.data).capability_mask,
        pma_cap::EXT_WIDTH | pma_cap::ALL_PORT_SELECT
    );
    let before = sm.port_counters(SW_LID, 2, DEFAULT_PKEY);
    let data = data_packet(SM_LID, 2, 0, 0);
    for i in 0..5 {
        sm.link.send(data_packet(SM_LID, 2, 0, i)).unwrap();
    }
    for _ in 0..5 {
        host.next_packet();
    }
    let after = sm.port_counters(SW_LID, 2, DEFAULT_PKEY);
    assert_eq!(after.xmit_pkts - before.xmit_pkts, 5);
    assert_eq!(
        after.xmit_data - before.xmit_data,
        5 * data.len() as u32 / 4
    );
    // No route for LID 0x55: a switch relay error on the input port.
    sm.link.send(data_packet(SM_LID, 0x55, 0, 9)).unwrap();
    let p1 = sm.port_counters(SW_LID, 1, DEFAULT_PKEY);
    assert_eq!(p1.rcv_switch_relay_errors, 1);
    let all = sm.port_counters(SW_LID, 0xff, DEFAULT_PKEY);
    let p2 = sm.port_counters(SW_LID, 2, DEFAULT_PKEY);
    assert_eq!(all.port_select, 0xff);
    assert_eq!(
        all.xmit_pkts,
        p1.xmit_pkts + 1 + p2.xmit_pkts,
        "every port's packets (port 1 sent one more answer since)"
    );
    // Reset port 2's transmit counters.
    let (r, _) = sm.ask_pma(
        counters_req(method::SET, 2, 0x1000 | 0x4000),
        SW_LID,
        DEFAULT_PKEY,
    );
    let z = PortCounters::decode(&r.data);
    assert_eq!((z.xmit_pkts, z.xmit_data), (0, 0));
    assert_eq!(z.rcv_pkts, p2.rcv_pkts, "not selected: kept");
    let s = sw.port_stats(2).unwrap();
    assert_eq!(s.tx_packets, 5, "the switch's own counters never go back");
}

#[test]
fn a_switch_port_enforcing_partitions_drops_and_counts() {
    use ibtca_protocol::mad::attr::SwitchInfo;
    let dir = TempDir::new("pma-part");
    let SmSwitch { sw, mut sm, host } = SmSwitch::start(&dir, SW_GUID, SW_LID);
    let dr = |m: u8, attr: u16, modifier: u32| Smp::directed(m, attr, modifier, &[1]).unwrap();
    let info = SwitchInfo::decode(&sm.ask(dr(method::GET, id::SWITCH_INFO, 0), 0).data);
    assert_eq!(info.partition_enforcement_cap, 64);
    // Port 2: a full member of 0x0001 only, enforcing outbound.
    let mut keys = [0u16; 32];
    keys[0] = 0x8001;
    let mut set = dr(method::SET, id::P_KEY_TABLE, 2 << 16);
    set.data = PKeyTable(keys).encode();
    assert_eq!(sm.ask(set, 0).status, MadStatus::OK);
    let p1 = sm.ask(dr(method::GET, id::P_KEY_TABLE, 1 << 16), 0);
    assert_eq!(
        PKeyTable::decode(&p1.data).0[0],
        DEFAULT_PKEY,
        "port 1 untouched"
    );
    let bad = sm.ask(dr(method::GET, id::P_KEY_TABLE, 3 << 16), 0);
    assert_eq!(bad.status, MadStatus::INVALID_ATTR_VALUE);
    let set_enforcement = |sm: &mut SmClient, port: u32, bits: u8| {
        let mut p = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, port), 0).data);
        p.enforcement = bits;
        p.port_state = 0; // no change
        let mut s = dr(method::SET, id::PORT_INFO, port);
        s.data = p.encode();
        let r = sm.ask(s, 0);
        assert_eq!(r.status, MadStatus::OK);
        PortInfo::decode(&r.data).enforcement
    };
    assert_eq!(set_enforcement(&mut sm, 2, 0x4), 0x4);
    sm.link
        .send(data_packet_with_pkey(SM_LID, 2, 0, 1, DEFAULT_PKEY))
        .unwrap();
    sm.link
        .send(data_packet_with_pkey(SM_LID, 2, 0, 2, 0x0001))
        .unwrap();
    let got = host.next_packet();
    assert_eq!(
        ibtca_protocol::PacketView::parse(&got).unwrap().payload[0],
        2,
        "the default partition stopped at port 2, the limited member passed"
    );
    let c = sm.port_counters(SW_LID, 2, DEFAULT_PKEY);
    assert_eq!((c.xmit_constraint_errors, c.rcv_constraint_errors), (1, 0));
    // Port 1 enforcing inbound with the default table: 0x8001 stops there.
    assert_eq!(set_enforcement(&mut sm, 1, 0x8), 0x8);
    sm.link
        .send(data_packet_with_pkey(SM_LID, 2, 0, 3, 0x8001))
        .unwrap();
    let c = sm.port_counters(SW_LID, 1, DEFAULT_PKEY);
    assert_eq!(c.rcv_constraint_errors, 1);
    let (s1, s2) = (sw.port_stats(1).unwrap(), sw.port_stats(2).unwrap());
    assert_eq!((s1.drop_pkey_inbound, s2.drop_pkey_outbound), (1, 1));
    assert_eq!(s2.tx_packets, 1, "only the limited member's packet left");
}
