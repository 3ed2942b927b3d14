//! Switches' subnet management agents and directed routes from a test SM
//! (no VM). The fabric:
//!
//! ```text
//!  SM (LID 1) ── 1 sw1 2 ── 1 sw2 2 ── device (LID 5)
//!                               3 ── host A
//!                               4 ── host B (a second SM)
//! ```
//!
//! Directed routes through both switches and back, from either side;
//! SwitchInfo and its PortStateChange bit; LFT blocks that replace the
//! routes and move data packets; SL → VL and VL arbitration tables (the
//! high-priority table and VLHighLimit ordering a port's traffic); the
//! switch's PortInfo, its LID and M_Key.

use std::time::{Duration, Instant};

use ibtca_device::instance::{Instance, InstanceConfig};
use ibtca_device::link::{LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::mad::attr::{
    id, LftBlock, NodeInfo, NodeType, PortInfo, PortState, Sl2VlTable, SwitchInfo, VlArbBlock,
    VlArbEntry,
};
use ibtca_protocol::mad::{method, MadStatus, Smp, SmpRoute};
use ibtca_protocol::PacketView;
use ibtca_switch::{PortConfig, Switch, SwitchConfig};
use ibtca_tests::links::{send_retrying, start_link};
use ibtca_tests::sm_client::{data_packet, SmClient, WAIT};
use ibtca_tests::sm_nodes::SmSwitch;
use ibtca_tests::TempDir;

const SW1_GUID: u64 = 0x1200_0000_0000_f001;
const SW2_GUID: u64 = 0x1200_0000_0000_f002;
const DEV_GUID: u64 = 0x1200_0000_0000_0005;

struct Fabric {
    sm: SmClient,
    host_a: (
        ibtca_device::link::Link,
        std::sync::mpsc::Receiver<LinkEvent>,
    ),
    host_b: SmClient,
    sw1: Switch,
    sw2: Switch,
    _device: Instance,
    _dir: TempDir,
}

fn switch(name: &str, guid: u64, ports: Vec<PortConfig>) -> Switch {
    Switch::start(SwitchConfig {
        name: name.into(),
        guid,
        lid: 0,
        ports,
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .unwrap()
}

fn fabric(name: &str) -> Fabric {
    let dir = TempDir::new(name);
    let p = |n: &str| dir.join(n);
    let sw1 = switch(
        "sw1",
        SW1_GUID,
        vec![
            PortConfig::new(LinkEndpoint::Listen(p("sw1-1"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw1-2"))),
        ],
    );
    let sw2 = switch(
        "sw2",
        SW2_GUID,
        vec![
            PortConfig::new(LinkEndpoint::Connect(p("sw1-2"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw2-2"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw2-3"))),
            PortConfig::new(LinkEndpoint::Listen(p("sw2-4"))),
        ],
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
    let host_a = start_link(
        LinkEndpoint::Connect(p("sw2-3")),
        LocalPort {
            node_guid: 0xa,
            port: 1,
            lid: 0,
        },
        LinkConfig::default(),
    );
    assert!(matches!(
        host_a.1.recv_timeout(WAIT),
        Ok(LinkEvent::Up { .. })
    ));
    let host_b = SmClient::start(LinkEndpoint::Connect(p("sw2-4")), 2);
    let deadline = Instant::now() + WAIT;
    // Every switch port up on the switch's side too (a peer's Up comes
    // when it has the switch's Hello, maybe before the switch has its).
    while !((1..=2).all(|p| sw1.is_port_up(p)) && (1..=4).all(|p| sw2.is_port_up(p))) {
        assert!(Instant::now() < deadline, "the fabric never came up");
        std::thread::sleep(Duration::from_millis(5));
    }
    Fabric {
        sm,
        host_a,
        host_b,
        sw1,
        sw2,
        _device: device,
        _dir: dir,
    }
}

fn dr(method: u8, attr: u16, modifier: u32, path: &[u8]) -> Smp {
    Smp::directed(method, attr, modifier, path).unwrap()
}

fn with_data(mut smp: Smp, data: [u8; 64]) -> Smp {
    smp.data = data;
    smp
}

fn next_data(rx: &std::sync::mpsc::Receiver<LinkEvent>) -> (u8, u16, u8) {
    loop {
        match rx.recv_timeout(WAIT) {
            Ok(LinkEvent::Packet(p)) => {
                let v = PacketView::parse(&p).expect("a valid packet");
                return (v.lrh.vl, v.lrh.dlid, v.payload[0]);
            }
            Ok(_) => continue,
            Err(e) => panic!("no data packet: {e}"),
        }
    }
}

#[test]
fn directed_routes_through_two_switches_both_ways() {
    let mut f = fabric("sma-dr");
    // SM → sw1 → sw2 → the device, and its answer back.
    let r = f.sm.ask(dr(method::GET, id::NODE_INFO, 0, &[1, 2, 2]), 0);
    assert_eq!((r.status, r.direction, r.hop_ptr), (MadStatus::OK, true, 1));
    assert_eq!(
        &r.return_path[1..4],
        &[1, 1, 1],
        "in ports: sw1 1, sw2 1, device 1"
    );
    let n = NodeInfo::decode(&r.data);
    assert_eq!((n.node_type, n.node_guid), (NodeType::Ca, DEV_GUID));
    // Port 0 of each switch at the end of the path.
    for (path, guid, ports, in_port) in
        [(&[1u8][..], SW1_GUID, 2, 1), (&[1, 2][..], SW2_GUID, 4, 1)]
    {
        let r = f.sm.ask(dr(method::GET, id::NODE_INFO, 0, path), 0);
        let n = NodeInfo::decode(&r.data);
        assert_eq!(
            (n.node_type, n.node_guid, n.num_ports, n.local_port_num),
            (NodeType::Switch, guid, ports, in_port)
        );
    }
    // The other way: from host B through sw2 to sw1, and to the device.
    let r = f.host_b.ask(dr(method::GET, id::NODE_INFO, 0, &[1, 1]), 0);
    let n = NodeInfo::decode(&r.data);
    assert_eq!((n.node_guid, n.local_port_num), (SW1_GUID, 2));
    assert_eq!(&r.return_path[1..3], &[4, 2]);
    let r = f.host_b.ask(dr(method::GET, id::PORT_INFO, 1, &[1, 2]), 0);
    assert_eq!(PortInfo::decode(&r.data).lid, 5);
    // A path through a port sw1 does not have is dropped there: the next
    // answer is to the request after it.
    let mut lost = dr(method::GET, id::NODE_INFO, 0, &[1, 9, 2]);
    f.sm.send(&mut lost, 0);
    let r = f.sm.ask(dr(method::GET, id::NODE_DESCRIPTION, 0, &[1]), 0);
    assert_eq!(r.status, MadStatus::OK);
    assert!(f.sw1.sma_counts().1 >= 1, "sw1 counted the drop");
}

#[test]
fn switch_info_reports_and_clears_port_state_changes() {
    let mut f = fabric("sma-psc");
    let path = [1u8, 2];
    let info = SwitchInfo::decode(&f.sm.ask(dr(method::GET, id::SWITCH_INFO, 0, &path), 0).data);
    assert!(info.port_state_change, "ports came up");
    assert_eq!(info.linear_fdb_cap, 0xc000);
    let mut clear = info;
    clear.port_state_change = true;
    let r = f.sm.ask(
        with_data(dr(method::SET, id::SWITCH_INFO, 0, &path), clear.encode()),
        0,
    );
    assert!(
        !SwitchInfo::decode(&r.data).port_state_change,
        "writing 1 clears it"
    );
    f.sw2.port_down(3).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let r = f.sm.ask(dr(method::GET, id::SWITCH_INFO, 0, &path), 0);
        if SwitchInfo::decode(&r.data).port_state_change {
            break;
        }
        assert!(Instant::now() < deadline, "PortStateChange never set");
    }
    let p3 = PortInfo::decode(&f.sm.ask(dr(method::GET, id::PORT_INFO, 3, &path), 0).data);
    // LocalPortNum: the port the SMP came in by (sw2's port 1), not the
    // port asked about (IBA 14.2.5.6; OpenSM probes past port 3 only if
    // they differ).
    assert_eq!(
        (p3.port_state, p3.local_port_num),
        (PortState::Down as u8, 1)
    );
    let bad = f.sm.ask(dr(method::GET, id::PORT_INFO, 5, &path), 0);
    assert_eq!(bad.status, MadStatus::INVALID_ATTR_VALUE);
    let bad = f.sm.ask(dr(method::GET, 0x00ff, 0, &path), 0);
    assert_eq!(bad.status, MadStatus::UNSUPPORTED_METHOD_ATTR);
}

/// Block 0 of an LFT: LIDs given as (LID, port), the rest unrouted.
fn lft(routes: &[(usize, u8)]) -> [u8; 64] {
    let mut b = [LftBlock::NO_ROUTE; 64];
    for (lid, port) in routes {
        b[*lid] = *port;
    }
    b
}

#[test]
fn an_lft_set_replaces_the_routes_and_moves_data() {
    let mut f = fabric("sma-lft");
    // Before: sw2 learned the device (5) from its Hello; sw1 knows nothing.
    assert_eq!(
        (f.sw2.lft().lookup(5), f.sw1.lft().lookup(5)),
        (Some(2), None)
    );
    let sw1 = [1u8];
    let sw2 = [1u8, 2];
    let set = |path: &[u8], routes: &[(usize, u8)]| {
        with_data(
            dr(method::SET, id::LINEAR_FORWARDING_TABLE, 0, path),
            lft(routes),
        )
    };
    let r = f.sm.ask(set(&sw1, &[(1, 1), (2, 2), (5, 2), (0x10, 2)]), 0);
    assert_eq!(r.status, MadStatus::OK);
    let r = f.sm.ask(set(&sw2, &[(1, 1), (2, 4), (5, 2), (0x10, 3)]), 0);
    assert_eq!(LftBlock::decode(&r.data).0[0x10], 3);
    assert_eq!(LftBlock::decode(&r.data).0[0x11], LftBlock::NO_ROUTE);
    let r =
        f.sm.ask(dr(method::GET, id::LINEAR_FORWARDING_TABLE, 0, &sw1), 0);
    assert_eq!(LftBlock::decode(&r.data).0[5], 2);

    // LID-routed SMPs now reach the device through both switches.
    let r =
        f.sm.ask(Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0), 5);
    assert_eq!(NodeInfo::decode(&r.data).node_guid, DEV_GUID);
    // Data to LID 0x10 goes to host A, then (the SM moves it) to host B.
    f.sm.link.send(data_packet(1, 0x10, 0, 1)).unwrap();
    assert_eq!(next_data(&f.host_a.1), (0, 0x10, 1));
    f.sm.ask(set(&sw2, &[(1, 1), (2, 4), (5, 2), (0x10, 4)]), 0);
    f.sm.link.send(data_packet(1, 0x10, 0, 2)).unwrap();
    let got = f.host_b.try_next_packet().unwrap_or_else(|| {
        panic!(
            "host B got nothing: sw2 port 4 link {:?} up {}, host B link {:?}; sw1 {:?} lft {:?}; sw2 {:?} lft {:?}",
            f.sw2.link_stats(4),
            f.sw2.is_port_up(4),
            f.host_b.link.stats(),
            f.sw1.all_stats(),
            f.sw1.lft().entries(),
            f.sw2.all_stats(),
            f.sw2.lft().entries()
        )
    });
    assert_eq!(got[..], data_packet(1, 0x10, 0, 2)[..]);
    f.sm.ask(set(&sw2, &[(1, 1), (2, 4), (5, 2), (0x10, 3)]), 0);
    f.sm.link.send(data_packet(1, 0x10, 0, 3)).unwrap();
    assert_eq!(next_data(&f.host_a.1), (0, 0x10, 3), "A never saw packet 2");
    // An LFT block naming a port sw2 lacks is refused whole.
    let r = f.sm.ask(set(&sw2, &[(0x10, 9)]), 0);
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE);
    assert_eq!(f.sw2.lft().lookup(0x10), Some(3));
    // Block 768 would start past the unicast LIDs.
    let r =
        f.sm.ask(dr(method::GET, id::LINEAR_FORWARDING_TABLE, 768, &sw2), 0);
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE);
}

#[test]
fn sl_to_vl_and_vl_arbitration_tables_replace_the_configured_ones() {
    let mut f = fabric("sma-vl");
    let sw1 = [1u8];
    let sw2 = [1u8, 2];
    f.sm.ask(
        with_data(
            dr(method::SET, id::LINEAR_FORWARDING_TABLE, 0, &sw1),
            lft(&[(1, 1), (0x10, 2)]),
        ),
        0,
    );
    f.sm.ask(
        with_data(
            dr(method::SET, id::LINEAR_FORWARDING_TABLE, 0, &sw2),
            lft(&[(1, 1), (0x10, 3)]),
        ),
        0,
    );
    // Output port 3 of sw2 (input port 1 in the modifier).
    let modifier = (1 << 8) | 3;
    let r =
        f.sm.ask(dr(method::GET, id::SL_TO_VL_TABLE, modifier, &sw2), 0);
    assert_eq!(
        Sl2VlTable::decode(&r.data).0[2],
        2,
        "the configured identity"
    );
    f.sm.link.send(data_packet(1, 0x10, 2, 1)).unwrap();
    assert_eq!(next_data(&f.host_a.1), (2, 0x10, 1));
    let mut table = [0u8; 16];
    table[2] = 7;
    table[15] = 15;
    let r = f.sm.ask(
        with_data(
            dr(method::SET, id::SL_TO_VL_TABLE, modifier, &sw2),
            Sl2VlTable(table).encode(),
        ),
        0,
    );
    assert_eq!(
        (r.status, Sl2VlTable::decode(&r.data).0),
        (MadStatus::OK, table)
    );
    f.sm.link.send(data_packet(1, 0x10, 2, 2)).unwrap();
    assert_eq!(
        next_data(&f.host_a.1),
        (7, 0x10, 2),
        "SL2 now leaves on VL7"
    );
    let mut bad = table;
    bad[3] = 15;
    let r = f.sm.ask(
        with_data(
            dr(method::SET, id::SL_TO_VL_TABLE, modifier, &sw2),
            Sl2VlTable(bad).encode(),
        ),
        0,
    );
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE, "only SL15 on VL15");

    // VLArbitrationTable: low-priority block 1 of port 3.
    let arb_mod = (1 << 16) | 3;
    let r =
        f.sm.ask(dr(method::GET, id::VL_ARB_TABLE, arb_mod, &sw2), 0);
    assert_eq!(
        VlArbBlock::decode(&r.data).0[7],
        VlArbEntry { vl: 7, weight: 1 }
    );
    let mut entries = [VlArbEntry::default(); 32];
    entries[0] = VlArbEntry { vl: 7, weight: 9 };
    entries[1] = VlArbEntry { vl: 0, weight: 2 };
    let r = f.sm.ask(
        with_data(
            dr(method::SET, id::VL_ARB_TABLE, arb_mod, &sw2),
            VlArbBlock(entries).encode(),
        ),
        0,
    );
    assert_eq!(
        (r.status, VlArbBlock::decode(&r.data).0),
        (MadStatus::OK, entries)
    );
    f.sm.link.send(data_packet(1, 0x10, 2, 3)).unwrap();
    assert_eq!(next_data(&f.host_a.1), (7, 0x10, 3), "VL7 still served");
    let r =
        f.sm.ask(dr(method::GET, id::VL_ARB_TABLE, (5 << 16) | 3, &sw2), 0);
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE);
}

/// A switch whose port 3 has a raw peer (LID 3) that grants credits only
/// when told, a sender on port 2 (LID 2) and the test SM on port 1.
struct ArbSwitch {
    sw: Switch,
    sm: SmClient,
    sender: ibtca_device::link::Link,
    _events: std::sync::mpsc::Receiver<LinkEvent>,
    receiver: ibtca_tests::raw_port::RawPort,
    dir: TempDir,
}

fn arb_switch(name: &str) -> ArbSwitch {
    use ibtca_tests::raw_port::RawPort;
    let dir = TempDir::new(name);
    let p = |n: &str| dir.join(n);
    let sw = switch(
        "sw",
        SW1_GUID,
        ["p1", "p2", "p3"]
            .iter()
            .map(|n| PortConfig::new(LinkEndpoint::Listen(p(n))))
            .collect(),
    );
    let sm = SmClient::start(LinkEndpoint::Connect(p("p1")), 1);
    let (sender, events) = start_link(
        LinkEndpoint::Connect(p("p2")),
        LocalPort {
            node_guid: 0xa,
            port: 1,
            lid: 2,
        },
        LinkConfig::default(),
    );
    assert!(matches!(
        events.recv_timeout(WAIT),
        Ok(LinkEvent::Up { .. })
    ));
    let receiver = RawPort::connect(&p("p3"), 3, WAIT);
    let deadline = Instant::now() + WAIT;
    while sw.lft().lookup(3) != Some(3) {
        assert!(Instant::now() < deadline, "LID 3 learned on port 3");
        std::thread::sleep(Duration::from_millis(5));
    }
    ArbSwitch {
        sw,
        sm,
        sender,
        _events: events,
        receiver,
        dir,
    }
}

/// Sets VLArbitrationTable block `block` of port 3 (the SM's first hop).
fn set_arb(sm: &mut SmClient, block: u32, entries: [VlArbEntry; 32]) {
    let r = sm.ask(
        with_data(
            dr(method::SET, id::VL_ARB_TABLE, (block << 16) | 3, &[1]),
            VlArbBlock(entries).encode(),
        ),
        0,
    );
    assert_eq!(
        (r.status, VlArbBlock::decode(&r.data).0),
        (MadStatus::OK, entries)
    );
}

/// Sends `sls` (one packet each, 1 KiB of payload, numbered per SL) from
/// port 2 to port 3, waits until all of them wait at port 3, grants
/// credits on VLs 0–3 at once and returns the VLs in the order port 3
/// sent them.
fn egress_order(f: &mut ArbSwitch, sls: &[u8], what: &str) -> Vec<u8> {
    use ibtca_tests::raw_port::sized_raw_packet;
    let before = f.sw.all_stats()[1].rx_packets;
    let mut numbers = [0u16; 4];
    for &sl in sls {
        let i = numbers[usize::from(sl)];
        numbers[usize::from(sl)] += 1;
        send_retrying(&f.sender, &format!("SL{sl} packet {i}"), || {
            sized_raw_packet(sl, 3, i, 1024)
        });
    }
    let deadline = Instant::now() + WAIT;
    while f.sw.all_stats()[1].rx_packets < before + sls.len() as u64 {
        assert!(Instant::now() < deadline, "{:?}", f.sw.all_stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    f.receiver.grant(&[0, 1, 2, 3], 32);
    let order: Vec<(u8, u8)> = (0..sls.len())
        .map(|_| {
            let p = f.receiver.packet();
            let v = PacketView::parse(&p).expect("a valid packet");
            (v.lrh.vl, v.payload[1])
        })
        .collect();
    for vl in 0..4u8 {
        let got: Vec<u8> = order.iter().filter(|e| e.0 == vl).map(|e| e.1).collect();
        let n = sls.iter().filter(|s| **s == vl).count() as u8;
        assert_eq!(got, (0..n).collect::<Vec<u8>>(), "{what}: VL{vl} in order");
    }
    order.iter().map(|e| e.0).collect()
}

/// The low-priority VLArbitrationTable, set by SMP, drives a switch port's
/// link in IBA's 64-byte units: VL0 2 KiB a turn, VL1 1 KiB, VL2 in two
/// entries of 1 unit. Packets of 1 KiB of payload (1050 bytes, 17 units)
/// wait at the port until its peer grants credits on every VL at once.
#[test]
fn the_low_priority_table_shares_a_ports_bytes_in_64_byte_units() {
    let mut f = arb_switch("sma-vl-low");
    let low = [(0, 32), (1, 16), (2, 1), (3, 0), (2, 1)];
    let mut entries = [VlArbEntry::default(); 32];
    for (e, &(vl, weight)) in entries.iter_mut().zip(&low) {
        *e = VlArbEntry { vl, weight };
    }
    set_arb(&mut f.sm, 1, entries);
    let sls = [[0u8; 6].as_slice(), &[1; 3], &[2; 6]].concat();
    let vls = egress_order(&mut f, &sls, "low table");
    // A turn: VL0 two packets (17 + 17 of 32 units: the second starts with
    // 15 left and goes whole), VL1 one (17 of 16), VL2 one per entry; the
    // weight 0 entry (VL3) is skipped.
    assert_eq!(vls, [0, 0, 1, 2, 2, 0, 0, 1, 2, 2, 0, 0, 1, 2, 2]);
    drop(f.dir);
}

/// The high-priority VLArbitrationTable and VLHighLimit, set by SMP, drive
/// a switch port's link: VL1 in the high table (weight 255), VL0 alone in
/// the low one, VLHighLimit 1 (4 KiB). Thirteen packets of ~1 KiB wait at
/// the port (three on VL0, ten on VL1) until its peer grants credits on
/// both VLs at once; the port then sends four VL1 packets (4 KiB) before
/// each VL0 one.
#[test]
fn the_high_priority_table_and_its_limit_order_a_ports_traffic() {
    use ibtca_tests::raw_port::{sized_raw_packet, RawPort};
    let ArbSwitch {
        sw,
        mut sm,
        sender,
        _events: _e,
        mut receiver,
        dir,
    } = arb_switch("sma-vl-high");
    let p = |n: &str| dir.join(n);
    let path = [1u8];
    let mut low = [VlArbEntry::default(); 32];
    low[0] = VlArbEntry { vl: 0, weight: 1 };
    set_arb(&mut sm, 1, low);
    let mut high = [VlArbEntry::default(); 32];
    high[0] = VlArbEntry { vl: 1, weight: 255 };
    set_arb(&mut sm, 3, high);
    let r = sm.ask(dr(method::GET, id::VL_ARB_TABLE, (3 << 16) | 3, &path), 0);
    assert_eq!(VlArbBlock::decode(&r.data).0, high, "block 3 reads back");

    let mut info = PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 3, &path), 0).data);
    assert_eq!(info.vl_high_limit, 0);
    info.vl_high_limit = 1;
    info.port_state = PortState::NoChange as u8;
    let r = sm.ask(
        with_data(dr(method::SET, id::PORT_INFO, 3, &path), info.encode()),
        0,
    );
    assert_eq!(
        (r.status, PortInfo::decode(&r.data).vl_high_limit),
        (MadStatus::OK, 1)
    );

    // 1 KiB of payload: four packets pass 4 KiB, three do not.
    let packet = |sl: u8, i: u16| sized_raw_packet(sl, 3, i, 1024);
    let mut received = 0;
    let mut expect_order = |receiver: &mut RawPort, what: &str| {
        for i in 0..3 {
            send_retrying(&sender, &format!("VL0 packet {i}"), || packet(0, i));
        }
        for i in 0..10 {
            send_retrying(&sender, &format!("VL1 packet {i}"), || packet(1, i));
        }
        received += 13;
        let deadline = Instant::now() + WAIT;
        while sw.all_stats()[1].rx_packets < received {
            assert!(Instant::now() < deadline, "{:?}", sw.all_stats());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            sw.link_stats(3).map(|l| l.tx_packets),
            Some(0),
            "{what}: no credit yet"
        );
        receiver.grant(&[0, 1], 20);
        let order: Vec<(u8, u8)> = (0..13)
            .map(|_| {
                let p = receiver.packet();
                let v = PacketView::parse(&p).expect("a valid packet");
                (v.lrh.vl, v.payload[1])
            })
            .collect();
        let vls: Vec<u8> = order.iter().map(|e| e.0).collect();
        assert_eq!(
            vls,
            [1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 0],
            "{what}: VL1 first, one VL0 packet after each 4 KiB of it: {order:?}"
        );
        let numbers =
            |vl: u8| -> Vec<u8> { order.iter().filter(|e| e.0 == vl).map(|e| e.1).collect() };
        assert_eq!(numbers(0), [0, 1, 2], "{what}: each VL in order");
        assert_eq!(numbers(1), (0..10).collect::<Vec<u8>>());
    };
    expect_order(&mut receiver, "first link");
    // The port's link restarted: the new link arbitrates by the SM's
    // tables too.
    drop(receiver);
    sw.port_down(3).unwrap();
    sw.port_up(3).unwrap();
    let mut receiver = RawPort::connect(&p("p3"), 3, WAIT);
    let deadline = Instant::now() + WAIT;
    while !sw.is_port_up(3) {
        assert!(Instant::now() < deadline, "port 3 up again");
        std::thread::sleep(Duration::from_millis(5));
    }
    expect_order(&mut receiver, "restarted link");
    drop(sender);
}

#[test]
fn a_switch_takes_the_sm_lid_and_guards_it_with_its_m_key() {
    const KEY: u64 = 0x5eed;
    let mut f = fabric("sma-sw-port0");
    let sw1 = [1u8];
    let mut p0 = PortInfo::decode(&f.sm.ask(dr(method::GET, id::PORT_INFO, 0, &sw1), 0).data);
    p0.lid = 0x30;
    p0.master_sm_lid = 1;
    p0.m_key = KEY;
    p0.m_key_protect = 2;
    p0.port_state = PortState::NoChange as u8;
    let r = f.sm.ask(
        with_data(dr(method::SET, id::PORT_INFO, 0, &sw1), p0.encode()),
        0,
    );
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(f.sw1.lid(), 0x30);
    // LID-routed to the switch: sw1 answers through its route to the SM.
    f.sm.ask(
        with_data(
            {
                let mut s = dr(method::SET, id::LINEAR_FORWARDING_TABLE, 0, &sw1);
                s.m_key = KEY;
                s
            },
            lft(&[(1, 1), (0x30, 0)]),
        ),
        0,
    );
    let mut get = Smp::new(SmpRoute::Lid, method::GET, id::NODE_INFO, 0);
    get.m_key = KEY;
    let r = f.sm.ask(get, 0x30);
    assert_eq!(NodeInfo::decode(&r.data).node_guid, SW1_GUID);
    // No key: no answer; the next one is to the keyed request.
    let mut wrong = dr(method::GET, id::SWITCH_INFO, 0, &sw1);
    f.sm.send(&mut wrong, 0);
    let mut right = dr(method::GET, id::PORT_INFO, 0, &sw1);
    right.m_key = KEY;
    let info = PortInfo::decode(&f.sm.ask(right, 0).data);
    assert_eq!(
        (info.lid, info.m_key, info.m_key_violations),
        (0x30, KEY, 1)
    );
    assert_eq!(f.sw1.sma_counts().2, 1);
}

/// VL15 through a switch whose output has no VL0 credits left: the
/// receiver holds every VL0 buffer it granted, data waits in the switch,
/// and a directed SMP through the switch still reaches the receiver.
#[test]
fn an_smp_passes_a_switch_whose_data_vls_have_no_credits() {
    use ibtca_tests::links::start_holding_link;
    let dir = TempDir::new("sma-vl15");
    let sw = switch(
        "sw",
        SW1_GUID,
        vec![
            PortConfig::new(LinkEndpoint::Listen(dir.join("p1"))),
            PortConfig::new(LinkEndpoint::Listen(dir.join("p2"))),
        ],
    );
    let mut sm = SmClient::start(LinkEndpoint::Connect(dir.join("p1")), 1);
    let y_port = LocalPort {
        node_guid: 0xb,
        port: 1,
        lid: 2,
    };
    let (y, yrx) = start_holding_link(LinkEndpoint::Connect(dir.join("p2")), y_port, 4);
    assert!(matches!(yrx.recv_timeout(WAIT), Ok(LinkEvent::Up { .. })));
    let deadline = Instant::now() + WAIT;
    while sw.lft().lookup(2) != Some(2) || !sw.is_port_up(1) {
        assert!(Instant::now() < deadline, "LID 2 never learned");
        std::thread::sleep(Duration::from_millis(5));
    }
    for i in 0..12 {
        sm.link.send(data_packet(1, 2, 0, i)).unwrap();
    }
    let mut data = 0;
    while data < 4 {
        if let Ok(LinkEvent::Packet(_)) = yrx.recv_timeout(WAIT) {
            data += 1;
        }
    }
    let deadline = Instant::now() + WAIT;
    while sw.link_stats(2).map_or(0, |s| s.credit_stalls) == 0 {
        assert!(Instant::now() < deadline, "the switch never stalled on VL0");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut smp = dr(method::GET, id::NODE_INFO, 0, &[1, 2]);
    sm.send(&mut smp, 0);
    let p = match yrx.recv_timeout(WAIT) {
        Ok(LinkEvent::Packet(p)) => p,
        other => panic!("the SMP did not pass: {other:?}"),
    };
    let view = PacketView::parse(&p).unwrap();
    assert_eq!((view.lrh.vl, view.bth.dest_qp), (15, 0));
    let got = ibtca_protocol::mad::smp_of_packet(&view).unwrap();
    assert_eq!((got.tid, got.hop_ptr, got.return_path[1]), (smp.tid, 2, 1));
    // The data waited behind the credits, not behind the SMP.
    y.return_credits(0, 4);
    let mut tags = Vec::new();
    while tags.len() < 4 {
        if let Ok(LinkEvent::Packet(p)) = yrx.recv_timeout(WAIT) {
            tags.push(PacketView::parse(&p).unwrap().payload[0]);
        }
    }
    assert_eq!(tags, [4, 5, 6, 7]);
}

/// A managed switch learns no routes and carries no data until the SM has
/// routed it and made its ports Active; SMPs pass all along.
#[test]
fn a_managed_switch_carries_data_only_through_ports_the_sm_activated() {
    let dir = TempDir::new("sma-managed");
    let SmSwitch {
        sw,
        mut sm,
        host: y,
    } = SmSwitch::start_managed(&dir, SW1_GUID, 9);
    assert_eq!(sw.lid(), 0, "no LID before the SM's");
    assert_eq!(sw.lft().lookup(2), None, "nothing learned from Hellos");
    let sw_path = [1u8];
    for port in [1u32, 2] {
        let r = sm.ask(dr(method::GET, id::PORT_INFO, port, &sw_path), 0);
        assert_eq!(PortInfo::decode(&r.data).port_state, PortState::Init as u8);
    }
    let r = sm.ask(
        with_data(
            dr(method::SET, id::LINEAR_FORWARDING_TABLE, 0, &sw_path),
            lft(&[(1, 1), (2, 2)]),
        ),
        0,
    );
    assert_eq!(r.status, MadStatus::OK);
    sm.link.send(data_packet(1, 2, 0, 1)).unwrap();
    let deadline = Instant::now() + WAIT;
    while sw.port_stats(1).unwrap().drop_port_inactive == 0 {
        assert!(Instant::now() < deadline, "the data packet was not dropped");
        std::thread::sleep(Duration::from_millis(5));
    }
    for state in [PortState::Armed, PortState::Active] {
        for port in [1u32, 2] {
            let r = sm.ask(dr(method::GET, id::PORT_INFO, port, &sw_path), 0);
            let mut p = PortInfo::decode(&r.data);
            p.port_state = state as u8;
            let r = sm.ask(
                with_data(dr(method::SET, id::PORT_INFO, port, &sw_path), p.encode()),
                0,
            );
            assert_eq!(r.status, MadStatus::OK, "port {port} to {state:?}");
        }
    }
    sm.link.send(data_packet(1, 2, 0, 2)).unwrap();
    let p = y.next_packet();
    assert_eq!(
        PacketView::parse(&p).unwrap().payload[0],
        2,
        "packet 1 was dropped"
    );
    let s = sw.port_stats(1).unwrap();
    assert_eq!(s.drop_port_inactive, 1);
}
