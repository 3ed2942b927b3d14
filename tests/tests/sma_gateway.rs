//! A gateway node answers the SM like a device (no VM): its agent is the
//! device's (`ibtca_device::sma::DeviceSma`) on the gateway's IB port.
//!
//! ```text
//!  SM (LID 1) ── 1 sw 2 ── gateway (LID 10)
//!                   3 ── peer (LID 2): the gateway's RC peer
//! ```
//!
//! Directed-route SMPs through the switch read NodeInfo, NodeDescription,
//! PortInfo, P_KeyTable and GUIDInfo; a PortInfo Set of the LID becomes
//! the source LID of the gateway's SENDs and the LID its ACKs must come
//! to; a managed gateway sends and takes no data until the SM makes its
//! port Active. Its PMA (the device's) answers PM MADs to QP1 from the
//! port's counters, which move with exactly the traffic it carried.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use ibtca_device::link::{Link, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_device::vl_config::VlConfig;
use ibtca_gateway::map::VcMap;
use ibtca_gateway::service::{default_sl2vl, default_vl_weights, ServiceSl};
use ibtca_gateway::sma::SmaSettings;
use ibtca_gateway::vc_conn::QpSettings;
use ibtca_gateway::{Gateway, GatewayConfig};
use ibtca_protocol::atm::{aal5, Cell, Vc};
use ibtca_protocol::headers::Aeth;
use ibtca_protocol::mad::attr::{
    id, GuidInfo, LftBlock, NodeDescription, NodeInfo, NodeType, PKeyTable, PortInfo, PortState,
};
use ibtca_protocol::mad::{method, MadStatus, Smp};
use ibtca_protocol::{Opcode, Packet, PacketView};
use ibtca_switch::{PortConfig, Switch, SwitchConfig};
use ibtca_tests::links::start_link;
use ibtca_tests::sm_client::{SmClient, WAIT};
use ibtca_tests::TempDir;

const GW_GUID: u64 = 0x1200_0000_00fd_000a;
const VC: Vc = Vc { vpi: 0, vci: 32 };
const GW_QPN: u32 = 16;
const PEER_QPN: u32 = 116;
const PEER_LID: u16 = 2;
/// The gateway's port seen from the SM: SM port 1, switch port 2.
const GW_PATH: [u8; 2] = [1, 2];

struct Fabric {
    sm: SmClient,
    peer: (Link, Receiver<LinkEvent>),
    gw: Gateway,
    atm: UnixStream,
    sw: Switch,
    _dir: TempDir,
}

fn fabric(name: &str, managed: bool) -> Fabric {
    let dir = TempDir::new(name);
    let p = |n: &str| dir.join(n);
    let sw = Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: 0x1200_0000_00ff_0001,
        lid: 0,
        ports: ["sw-1", "sw-2", "sw-3"]
            .iter()
            .map(|n| PortConfig::new(LinkEndpoint::Listen(p(n))))
            .collect(),
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: managed,
    })
    .unwrap();
    let map = format!(
        r#"{{"vcs": [{{"vpi": {}, "vci": {}, "aal": 5, "service": "ubr",
            "ib": {{"qp": "rc", "local_qpn": {GW_QPN}, "remote_lid": {PEER_LID},
                    "remote_qpn": {PEER_QPN}}}}}]}}"#,
        VC.vpi, VC.vci
    );
    let gw = Gateway::start(&GatewayConfig {
        link: LinkEndpoint::Connect(p("sw-2")),
        atm: LinkEndpoint::Listen(p("atm")),
        map: VcMap::from_json(&map).expect("the map is good"),
        service_sl: ServiceSl::default(),
        vl: VlConfig {
            sl2vl: default_sl2vl(),
            weights: default_vl_weights(),
        },
        node_guid: GW_GUID,
        qp: QpSettings {
            lid: 10,
            mtu: 1024,
            // Seven tries a second apart: time for the SM's SMPs.
            ack_timeout: Some(Duration::from_secs(1)),
            retry_cnt: 7,
            backlog: 64,
        },
        reassembly_timeout: Duration::from_secs(5),
        queue_cells: 1024,
        link_ring: 0,
        capture: None,
        sma: SmaSettings {
            description: "ibtca gateway atm0".into(),
            managed,
        },
    })
    .expect("the gateway starts");
    let sm = SmClient::start(LinkEndpoint::Connect(p("sw-1")), 1);
    let peer = start_link(
        LinkEndpoint::Connect(p("sw-3")),
        LocalPort {
            node_guid: 0x1200_0000_0000_0002,
            port: 1,
            lid: PEER_LID,
        },
        LinkConfig::default(),
    );
    assert!(matches!(
        peer.1.recv_timeout(WAIT),
        Ok(LinkEvent::Up { .. })
    ));
    let deadline = Instant::now() + WAIT;
    while !(1..=3).all(|n| sw.is_port_up(n)) {
        assert!(
            Instant::now() < deadline,
            "the switch's ports never came up"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let atm = connect(&p("atm"));
    Fabric {
        sm,
        peer,
        gw,
        atm,
        sw,
        _dir: dir,
    }
}

fn connect(path: &Path) -> UnixStream {
    let deadline = Instant::now() + WAIT;
    loop {
        match UnixStream::connect(path) {
            Ok(s) => return s,
            Err(e) => {
                assert!(Instant::now() < deadline, "{}: {e}", path.display());
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn dr(method: u8, attr: u16, modifier: u32, path: &[u8]) -> Smp {
    Smp::directed(method, attr, modifier, path).unwrap()
}

fn set(attr: u16, modifier: u32, path: &[u8], data: [u8; 64]) -> Smp {
    let mut smp = dr(method::SET, attr, modifier, path);
    smp.data = data;
    smp
}

/// Sends one AAL5 frame into the gateway's ATM port.
fn atm_frame(atm: &mut UnixStream, frame: &[u8]) {
    let mut cells: Vec<Cell> = Vec::new();
    aal5::segment(VC, frame, 0, &mut cells).unwrap();
    let bytes: Vec<u8> = cells.iter().flat_map(|c| c.bytes).collect();
    atm.write_all(&bytes).unwrap();
}

/// The next SEND the peer gets carrying `frame`: its LRH SLID and PSN.
fn next_send(peer: &Receiver<LinkEvent>, frame: &[u8]) -> (u16, u32) {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match peer.recv_timeout(left) {
            Ok(LinkEvent::Packet(p)) => {
                let v = PacketView::parse(&p).expect("a valid packet");
                if v.bth.dest_qp == PEER_QPN && v.payload == frame {
                    assert_eq!(v.lrh.dlid, PEER_LID);
                    return (v.lrh.slid, v.bth.psn);
                }
            }
            Ok(_) => {}
            Err(e) => panic!("no SEND of the frame for the peer: {e}"),
        }
    }
}

/// The peer's ACK of `psn` to the gateway's QP at `dlid`.
fn ack(dlid: u16, psn: u32) -> Vec<u8> {
    let mut p = Packet::new(Opcode::RcAcknowledge);
    p.lrh.slid = PEER_LID;
    p.lrh.dlid = dlid;
    p.bth.dest_qp = GW_QPN;
    p.bth.psn = psn;
    p.ext.aeth = Some(Aeth::ack(ibtca_protocol::headers::CREDITS_INVALID, 1));
    p.build().unwrap()
}

/// Waits until the gateway counted `n` acknowledged SENDs.
fn wait_sent(gw: &Gateway, n: u64) {
    let deadline = Instant::now() + WAIT;
    while gw.counters().engine.messages_sent < n {
        assert!(Instant::now() < deadline, "{:?}", gw.counters().engine);
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_gateway_answers_directed_smps_through_a_switch() {
    let mut f = fabric("sma-gw", false);
    let r = f.sm.ask(dr(method::GET, id::NODE_INFO, 0, &GW_PATH), 0);
    assert_eq!((r.status, r.direction), (MadStatus::OK, true));
    assert_eq!(&r.return_path[1..3], &[1, 1], "in ports: sw 1, gateway 1");
    let n = NodeInfo::decode(&r.data);
    assert_eq!(
        (
            n.node_type,
            n.num_ports,
            n.node_guid,
            n.port_guid,
            n.local_port_num
        ),
        (NodeType::Ca, 1, GW_GUID, GW_GUID, 1)
    );
    let r =
        f.sm.ask(dr(method::GET, id::NODE_DESCRIPTION, 0, &GW_PATH), 0);
    assert_eq!(NodeDescription::decode(&r.data).0, "ibtca gateway atm0");
    let r = f.sm.ask(dr(method::GET, id::PORT_INFO, 1, &GW_PATH), 0);
    let pi = PortInfo::decode(&r.data);
    assert_eq!(
        (pi.lid, pi.port_state, pi.local_port_num),
        (10, PortState::Active as u8, 1),
        "unmanaged: Active with its configured LID"
    );
    let r = f.sm.ask(dr(method::GET, id::GUID_INFO, 0, &GW_PATH), 0);
    assert_eq!(GuidInfo::decode(&r.data).0[..2], [GW_GUID, 0]);
    let r = f.sm.ask(dr(method::GET, id::P_KEY_TABLE, 0, &GW_PATH), 0);
    assert_eq!(PKeyTable::decode(&r.data).0[..2], [0xffff, 0]);
    let mut keys = [0u16; 32];
    keys[..2].copy_from_slice(&[0xffff, 0x8001]);
    let r = f.sm.ask(
        set(id::P_KEY_TABLE, 0, &GW_PATH, PKeyTable(keys).encode()),
        0,
    );
    assert_eq!(
        (r.status, PKeyTable::decode(&r.data).0[1]),
        (MadStatus::OK, 0x8001)
    );
    // What a gateway is not: a switch.
    let r = f.sm.ask(dr(method::GET, id::SWITCH_INFO, 0, &GW_PATH), 0);
    assert_eq!(r.status, MadStatus::UNSUPPORTED_METHOD_ATTR);
    let c = f.gw.counters().engine;
    assert_eq!((c.sma.smps, c.sma.replies), (7, 7), "{c:?}");
    assert_eq!(c.ib_rx_no_qp, 0, "no SMP went to a VC's QP");
}

#[test]
fn a_lid_the_sm_sets_is_the_gateways_lid_for_its_traffic() {
    let mut f = fabric("sma-gw-lid", false);
    // Before: SENDs from LID 10, ACKed at 10.
    atm_frame(&mut f.atm, b"first frame");
    let (slid, psn) = next_send(&f.peer.1, b"first frame");
    assert_eq!(slid, 10);
    f.peer.0.send(ack(10, psn)).unwrap();
    wait_sent(&f.gw, 1);

    // The SM moves the gateway to LID 33 and routes 33 to it.
    let r = f.sm.ask(dr(method::GET, id::PORT_INFO, 1, &GW_PATH), 0);
    let mut pi = PortInfo::decode(&r.data);
    pi.lid = 33;
    pi.port_state = PortState::NoChange as u8;
    let r = f.sm.ask(set(id::PORT_INFO, 1, &GW_PATH, pi.encode()), 0);
    assert_eq!(
        (r.status, PortInfo::decode(&r.data).lid),
        (MadStatus::OK, 33)
    );
    let mut lft = [LftBlock::NO_ROUTE; 64];
    (lft[1], lft[2], lft[10], lft[33]) = (1, 3, 2, 2);
    let r = f.sm.ask(set(id::LINEAR_FORWARDING_TABLE, 0, &[1], lft), 0);
    assert_eq!(r.status, MadStatus::OK);

    atm_frame(&mut f.atm, b"second frame");
    let (slid, psn) = next_send(&f.peer.1, b"second frame");
    assert_eq!(slid, 33, "the SENDs come from the LID the SM set");
    // An ACK to the old LID reaches the gateway but is not its QP's: the
    // SEND comes again. One to the new LID is.
    f.peer.0.send(ack(10, psn)).unwrap();
    assert_eq!(next_send(&f.peer.1, b"second frame"), (33, psn));
    f.peer.0.send(ack(33, psn)).unwrap();
    wait_sent(&f.gw, 2);
    let r = f.sm.ask(
        Smp::new(
            ibtca_protocol::mad::SmpRoute::Lid,
            method::GET,
            id::NODE_INFO,
            0,
        ),
        33,
    );
    assert_eq!(
        NodeInfo::decode(&r.data).node_guid,
        GW_GUID,
        "LID-routed SMPs reach the gateway at its new LID"
    );
}

#[test]
fn a_managed_gateway_carries_data_only_once_the_sm_made_it_active() {
    let mut f = fabric("sma-gw-managed", true);
    let get = |sm: &mut SmClient| {
        PortInfo::decode(&sm.ask(dr(method::GET, id::PORT_INFO, 1, &GW_PATH), 0).data)
    };
    let pi = get(&mut f.sm);
    assert_eq!(
        (pi.lid, pi.port_state),
        (0, PortState::Init as u8),
        "managed: Init and no LID until the SM"
    );
    atm_frame(&mut f.atm, b"too early");
    let deadline = Instant::now() + WAIT;
    while f.gw.counters().engine.ib_tx_port_inactive == 0 {
        assert!(Instant::now() < deadline, "nothing held back");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut pi = get(&mut f.sm);
    pi.lid = 10;
    for state in [PortState::Armed, PortState::Active] {
        pi.port_state = state as u8;
        let r = f.sm.ask(set(id::PORT_INFO, 1, &GW_PATH, pi.encode()), 0);
        assert_eq!(r.status, MadStatus::OK);
        assert_eq!(PortInfo::decode(&r.data).port_state, state as u8);
    }
    // The switch carries it once the SM set its ports and routes too.
    for port in 1..=3u32 {
        let r = f.sm.ask(dr(method::GET, id::PORT_INFO, port, &[1]), 0);
        let mut sp = PortInfo::decode(&r.data);
        for state in [PortState::Armed, PortState::Active] {
            sp.port_state = state as u8;
            let r = f.sm.ask(set(id::PORT_INFO, port, &[1], sp.encode()), 0);
            assert_eq!(r.status, MadStatus::OK, "switch port {port}");
        }
    }
    let mut lft = [LftBlock::NO_ROUTE; 64];
    (lft[1], lft[2], lft[10]) = (1, 3, 2);
    let r = f.sm.ask(set(id::LINEAR_FORWARDING_TABLE, 0, &[1], lft), 0);
    assert_eq!(r.status, MadStatus::OK);
    // The RC transport sends the held frame again, now from LID 10.
    let (slid, psn) = next_send(&f.peer.1, b"too early");
    assert_eq!(slid, 10);
    f.peer.0.send(ack(10, psn)).unwrap();
    wait_sent(&f.gw, 1);
}

/// FilterRawInbound/Outbound (PortInfo's enforcement nibble, bits 1 and
/// 0) do not apply: ibtca carries no raw packets (LNH Raw or IPv6 non-IBA
/// are dropped as malformed at every switch port, whatever the bits), the
/// switch reports FilterRawInboundCap/OutboundCap 0 in SwitchInfo, and a
/// PortInfo Set with the bits succeeds and leaves them 0 (the partition
/// enforcement bits of a switch port are kept; a CA port has none).
#[test]
fn filter_raw_bits_do_not_apply_and_raw_packets_go_nowhere() {
    use ibtca_protocol::headers::{Lnh, Lrh};
    use ibtca_protocol::mad::attr::SwitchInfo;
    const FILTER_RAW: u8 = 0b0011;
    const PARTITION: u8 = 0b1100;
    let mut f = fabric("sma-gw-raw", false);
    let r = f.sm.ask(dr(method::GET, id::SWITCH_INFO, 0, &[1]), 0);
    let caps = SwitchInfo::decode(&r.data).flags;
    assert_eq!(
        caps & 0x30,
        0,
        "FilterRawInboundCap, OutboundCap: {caps:#x}"
    );
    let r = f.sm.ask(dr(method::GET, id::PORT_INFO, 3, &[1]), 0);
    let mut pi = PortInfo::decode(&r.data);
    pi.enforcement = PARTITION | FILTER_RAW;
    pi.port_state = PortState::NoChange as u8;
    let r = f.sm.ask(set(id::PORT_INFO, 3, &[1], pi.encode()), 0);
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(
        PortInfo::decode(&r.data).enforcement,
        PARTITION,
        "switch port"
    );
    let r = f.sm.ask(dr(method::GET, id::PORT_INFO, 1, &GW_PATH), 0);
    let mut pi = PortInfo::decode(&r.data);
    pi.enforcement = PARTITION | FILTER_RAW;
    pi.port_state = PortState::NoChange as u8;
    let r = f.sm.ask(set(id::PORT_INFO, 1, &GW_PATH, pi.encode()), 0);
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(PortInfo::decode(&r.data).enforcement, 0, "a CA port");
    // A raw packet from the peer to the gateway's LID stops at the switch.
    let before = f.sw.port_stats(3).unwrap().drop_malformed;
    let gw_before = f.gw.counters().engine.ib_rx_packets;
    for lnh in [Lnh::Raw, Lnh::IpNonIba] {
        let lrh = Lrh {
            vl: 0,
            lver: 0,
            sl: 0,
            lnh,
            dlid: 10,
            pkt_len: 6,
            slid: PEER_LID,
        };
        let mut raw = Vec::new();
        lrh.write(&mut raw);
        raw.extend_from_slice(&[0x5a; 18]);
        f.peer.0.send(raw).unwrap();
    }
    let deadline = Instant::now() + WAIT;
    while f.sw.port_stats(3).unwrap().drop_malformed < before + 2 {
        assert!(
            Instant::now() < deadline,
            "the raw packets were not dropped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = f.gw.counters().engine;
    assert_eq!(
        (c.ib_rx_packets, c.ib_rx_malformed),
        (gw_before, 0),
        "{c:?}"
    );
}

/// `perfquery` to a gateway: the device's PMA on its port answers
/// ClassPortInfo and PortCounters from the port's counters (reset by a
/// Set, then exactly the packets and bytes that crossed), refuses a port
/// it does not have, and its answers come from the gateway's LID.
#[test]
fn a_gateway_answers_perfquery_from_its_port_counters() {
    use ibtca_protocol::mad::pma::{
        gmp_packet, pma_cap, pma_id, ClassPortInfo, GmpAddress, PmaMad, PortCounters,
    };
    use ibtca_tests::sm_client::port_counters_mad;
    const PKEY: u16 = 0xffff;
    let mut f = fabric("pma-gw", false);
    let (r, slid) = f.sm.ask_pma(
        PmaMad::new(method::GET, pma_id::CLASS_PORT_INFO, 0),
        10,
        PKEY,
    );
    assert_eq!((r.header.status, slid), (0, 10), "from the gateway's LID");
    assert_eq!(
        ClassPortInfo::decode(&r.data).capability_mask,
        pma_cap::EXT_WIDTH,
        "one port: no AllPortSelect"
    );
    let (r, _) = f.sm.ask_pma(port_counters_mad(method::GET, 2, 0), 10, PKEY);
    assert_eq!(
        r.header.status,
        MadStatus::INVALID_ATTR_VALUE.0,
        "no port 2"
    );

    let (r, _) =
        f.sm.ask_pma(port_counters_mad(method::SET, 1, 0xffff), 10, PKEY);
    assert_eq!(r.header.status, 0);
    let z = PortCounters::decode(&r.data);
    assert_eq!(
        (z.xmit_pkts, z.rcv_pkts, z.xmit_data, z.rcv_data),
        (0, 0, 0, 0)
    );
    // One SEND out (AAL5 frame), its ACK in.
    atm_frame(&mut f.atm, b"a frame the PMA counts");
    let (send_len, psn) = {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match f.peer.1.recv_timeout(left) {
                Ok(LinkEvent::Packet(p)) => {
                    let v = PacketView::parse(&p).expect("a valid packet");
                    if v.bth.dest_qp == PEER_QPN {
                        break (p.len() as u32, v.bth.psn);
                    }
                }
                Ok(_) => {}
                Err(e) => panic!("no SEND for the peer: {e}"),
            }
        }
    };
    let ack = ack(10, psn);
    f.peer.0.send(ack.clone()).unwrap();
    wait_sent(&f.gw, 1);
    let to = GmpAddress {
        slid: 1,
        dlid: 10,
        sl: 0,
        pkey: PKEY,
        dest_qp: 1,
    };
    let mad = PmaMad::new(method::GET, pma_id::PORT_COUNTERS, 0);
    let mad_len = gmp_packet(&mad, &to).build().unwrap().len() as u32;
    let c = f.sm.port_counters(10, 1, PKEY);
    // Out: the Set's answer and the SEND; in: the ACK and this Get.
    assert_eq!((c.xmit_pkts, c.rcv_pkts), (2, 2), "{c:?}");
    assert_eq!(c.xmit_data, (mad_len + send_len) / 4);
    assert_eq!(c.rcv_data, (ack.len() as u32 + mad_len) / 4);
    assert_eq!((c.rcv_errors, c.xmit_discards), (0, 0));
    let e = f.gw.counters().engine;
    assert_eq!((e.pm_answers, e.ib_rx_no_qp), (4, 0), "{e:?}");
}

/// A gateway's VLArbitrationTable is its port's like a device's: the
/// configured weights (64-byte units) are the low-priority table, and a
/// Set of a block reads back.
#[test]
fn a_gateways_vl_arbitration_table_starts_as_its_weights() {
    use ibtca_protocol::mad::attr::{VlArbBlock, VlArbEntry};
    let mut f = fabric("sma-gw-vlarb", false);
    let r =
        f.sm.ask(dr(method::GET, id::VL_ARB_TABLE, 1 << 16, &GW_PATH), 0);
    let low = VlArbBlock::decode(&r.data).0;
    let weights: Vec<(u8, u8)> = low[..5].iter().map(|e| (e.vl, e.weight)).collect();
    assert_eq!(
        (r.status, weights),
        (
            MadStatus::OK,
            vec![(0, 16), (1, 128), (2, 64), (3, 32), (0, 0)]
        ),
        "default_vl_weights"
    );
    let mut high = [VlArbEntry::default(); 32];
    high[0] = VlArbEntry { vl: 1, weight: 255 };
    let r = f.sm.ask(
        set(
            id::VL_ARB_TABLE,
            (3 << 16) | 1,
            &GW_PATH,
            VlArbBlock(high).encode(),
        ),
        0,
    );
    assert_eq!(
        (r.status, VlArbBlock::decode(&r.data).0),
        (MadStatus::OK, high)
    );
    let r =
        f.sm.ask(dr(method::GET, id::VL_ARB_TABLE, 4 << 16, &GW_PATH), 0);
    assert_eq!(VlArbBlock::decode(&r.data).0, [VlArbEntry::default(); 32]);
    let r =
        f.sm.ask(dr(method::GET, id::VL_ARB_TABLE, 5 << 16, &GW_PATH), 0);
    assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE);
}
