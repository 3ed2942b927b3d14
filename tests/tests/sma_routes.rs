//! Forwarding by what the SM sets, from a test SM on a link (no VM):
//! MulticastForwardingTable blocks forward a multicast LID to exactly the
//! ports of its mask (never back out of the input port); directed-route
//! SMPs with a LID-routed first part (DrSLID) and with a LID-routed last
//! part (DrDLID) through two switches to a device and back.
//!
//! ```text
//!  SM (LID 1) ── 1 sw1 (LID 0x30) 2 ── 1 sw2 (LID 0x31) 2 ── device (LID 5)
//! ```

use std::time::{Duration, Instant};

use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_device::link::{LinkConfig, LinkEndpoint};
use ibtca_protocol::mad::attr::{id, MftBlock, NodeInfo, NodeType, SwitchInfo};
use ibtca_protocol::mad::{method, MadStatus, Smp};
use ibtca_protocol::PacketView;
use ibtca_switch::{PortConfig, Switch, SwitchConfig};
use ibtca_tests::sm_client::{data_packet, SmClient};
use ibtca_tests::TempDir;

const WAIT: Duration = Duration::from_secs(20);

fn switch(
    name: &str,
    guid: u64,
    lid: u16,
    ports: Vec<PortConfig>,
    routes: Vec<(u16, u8)>,
) -> Switch {
    Switch::start(SwitchConfig {
        name: name.into(),
        guid,
        lid,
        ports,
        routes,
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .unwrap()
}

fn tag_of(p: &[u8]) -> (u16, u8) {
    let v = PacketView::parse(p).expect("a valid packet");
    (v.lrh.dlid, v.payload[0])
}

#[test]
fn an_mft_set_forwards_a_multicast_lid_to_exactly_its_ports() {
    let dir = TempDir::new("sma-mft");
    let ports = (1..=4)
        .map(|i| PortConfig::new(LinkEndpoint::Listen(dir.join(&format!("p{i}")))))
        .collect();
    let sw = switch("sw", 0x1200_0000_0000_f001, 0, ports, Vec::new());
    let mut sm = SmClient::start(LinkEndpoint::Connect(dir.join("p1")), 1);
    let hosts: Vec<SmClient> = (2..=4)
        .map(|i| SmClient::start(LinkEndpoint::Connect(dir.join(&format!("p{i}"))), i))
        .collect();
    let deadline = Instant::now() + WAIT;
    while !(1..=4).all(|p| sw.lft().lookup(u16::from(p)) == Some(p)) {
        assert!(Instant::now() < deadline, "routes never learned");
        std::thread::sleep(Duration::from_millis(5));
    }
    const MLID: u16 = 0xc005;
    // Before any MFT Set a multicast packet goes nowhere.
    sm.link.send(data_packet(1, MLID, 0, 1)).unwrap();
    // (VL15 overtakes data on the link: wait for the drop before the Set.)
    while sw.port_stats(1).unwrap().drop_unknown_lid == 0 {
        assert!(Instant::now() < deadline + WAIT, "packet 1 never dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Ports 1 (the sender's), 2 and 4: block 0, position 0.
    let mut masks = [0u16; 32];
    masks[5] = (1 << 1) | (1 << 2) | (1 << 4);
    let mut set = Smp::directed(method::SET, id::MULTICAST_FORWARDING_TABLE, 0, &[1]).unwrap();
    set.data = MftBlock(masks).encode();
    let r = sm.ask(set, 0);
    assert_eq!(
        (r.status, MftBlock::decode(&r.data).0[5]),
        (MadStatus::OK, masks[5])
    );
    let info = sm.ask(
        Smp::directed(method::GET, id::SWITCH_INFO, 0, &[1]).unwrap(),
        0,
    );
    assert_eq!(SwitchInfo::decode(&info.data).multicast_fdb_top, MLID);
    assert_eq!(sw.mft().ports(MLID), [1, 2, 4]);

    sm.link.send(data_packet(1, MLID, 0, 2)).unwrap();
    assert_eq!(tag_of(&hosts[0].next_packet()), (MLID, 2), "port 2");
    assert_eq!(tag_of(&hosts[2].next_packet()), (MLID, 2), "port 4");
    // Port 3 is not in the mask: the next packet it gets is a unicast one
    // sent after the multicast (same output queue, so it would have come
    // second).
    sm.link.send(data_packet(1, 3, 0, 3)).unwrap();
    assert_eq!(
        tag_of(&hosts[1].next_packet()),
        (3, 3),
        "port 3 got no copy"
    );
    // Nor does the sender's port get its packet back.
    hosts[0].link.send(data_packet(2, 1, 0, 4)).unwrap();
    assert_eq!(tag_of(&sm.next_packet()), (1, 4), "port 1 got no copy");
    // From port 2 the set is ports 1 and 4.
    hosts[0].link.send(data_packet(2, MLID, 0, 5)).unwrap();
    assert_eq!(tag_of(&sm.next_packet()), (MLID, 5));
    assert_eq!(tag_of(&hosts[2].next_packet()), (MLID, 5));
    // A port counts a copy after writing it to the link: the peer can hold
    // the packet before the counter moves, so wait for the counts to settle.
    let counts = || {
        let s1 = sw.port_stats(1).unwrap();
        (
            s1.rx_multicast,
            s1.tx_multicast,
            s1.drop_unknown_lid,
            sw.port_stats(4).unwrap().tx_multicast,
            sw.port_stats(3).unwrap().tx_multicast,
        )
    };
    // (rx and tx multicast at port 1, the drop before the Set, port 4's
    // copies, port 3's copies)
    let want = (2, 1, 1, 2, 0);
    while counts() != want && Instant::now() < deadline + WAIT {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(counts(), want);
}

struct Line {
    sm: SmClient,
    _sw1: Switch,
    _sw2: Switch,
    _device: Instance,
    _dir: TempDir,
}

const DEV_GUID: u64 = 0x1200_0000_0000_0005;

fn line(name: &str) -> Line {
    let dir = TempDir::new(name);
    let p = |n: &str| dir.join(n);
    let sw1 = switch(
        "sw1",
        0x1200_0000_0000_f001,
        0x30,
        vec![
            PortConfig::new(LinkEndpoint::Listen(p("sw1-1"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw1-2"))),
        ],
        vec![(5, 2), (0x31, 2)],
    );
    let sw2 = switch(
        "sw2",
        0x1200_0000_0000_f002,
        0x31,
        vec![
            PortConfig::new(LinkEndpoint::Connect(p("sw1-2"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw2-2"))),
        ],
        vec![(1, 1), (0x30, 1)],
    );
    let device = Instance::start(&InstanceConfig {
        lid: 5,
        node_guid: DEV_GUID,
        port_guid: DEV_GUID,
        link: Some(LinkEndpoint::Connect(p("sw2-2"))),
        ..InstanceConfig::default()
    })
    .unwrap();
    let sm = SmClient::start(LinkEndpoint::Connect(p("sw1-1")), 1);
    let deadline = Instant::now() + WAIT;
    while !(sw1.is_port_up(2) && sw2.is_port_up(2) && sw1.lft().lookup(1) == Some(1)) {
        assert!(Instant::now() < deadline, "the line never came up");
        std::thread::sleep(Duration::from_millis(5));
    }
    Line {
        sm,
        _sw1: sw1,
        _sw2: sw2,
        _device: device,
        _dir: dir,
    }
}

#[test]
fn a_directed_route_with_a_lid_routed_first_part() {
    let mut l = line("sma-drslid");
    // By LID to sw1, then sw1 port 2, sw2 port 2: the device.
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[2, 2]).unwrap();
    l.sm.send_from_lid(&mut smp, 0x30);
    let (r, vl, slid, dlid) = l.sm.next_smp();
    assert_eq!((vl, slid, dlid), (15, 0x30, 1), "LID-routed back from sw1");
    assert_eq!(r.tid, smp.tid);
    assert_eq!((r.status, r.direction, r.hop_ptr), (MadStatus::OK, true, 0));
    assert_eq!((r.dr_slid, &r.return_path[1..3]), (1, &[1u8, 1][..]));
    let n = NodeInfo::decode(&r.data);
    assert_eq!((n.node_type, n.node_guid), (NodeType::Ca, DEV_GUID));
    // To sw2 itself (a switch at the end of the directed part).
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[2]).unwrap();
    l.sm.send_from_lid(&mut smp, 0x30);
    let (r, _, _, _) = l.sm.next_smp();
    assert_eq!(NodeInfo::decode(&r.data).node_type, NodeType::Switch);
    assert_eq!(NodeInfo::decode(&r.data).node_guid, 0x1200_0000_0000_f002);
}

#[test]
fn a_directed_route_with_a_lid_routed_last_part() {
    let mut l = line("sma-drdlid");
    // Directed to sw1, then by LID to the device (LID 5) through sw2.
    let mut smp = Smp::directed(method::GET, id::NODE_INFO, 0, &[1]).unwrap();
    smp.dr_dlid = 5;
    let r = l.sm.ask(smp, 0);
    assert_eq!((r.status, r.direction, r.hop_ptr), (MadStatus::OK, true, 1));
    assert_eq!(r.dr_dlid, 5);
    let n = NodeInfo::decode(&r.data);
    assert_eq!((n.node_type, n.node_guid), (NodeType::Ca, DEV_GUID));
    // Both parts LID-routed around one directed hop (sw1 → sw2), to sw2's
    // neighbour by LID.
    let mut smp = Smp::directed(method::GET, id::PORT_INFO, 1, &[2]).unwrap();
    smp.dr_dlid = 5;
    l.sm.send_from_lid(&mut smp, 0x30);
    let (r, _, slid, _) = l.sm.next_smp();
    assert_eq!((r.tid, r.status, slid), (smp.tid, MadStatus::OK, 0x30));
    assert_eq!(ibtca_protocol::mad::attr::PortInfo::decode(&r.data).lid, 5);
}
