//! A device port's VLArbitrationTable from a test SM on its link (no VM):
//! the configured weights read back as the low-priority table, Sets of the
//! low- and high-priority blocks and PortInfo VLHighLimit replace the
//! device's own egress arbitration, bad blocks and ports are refused. The
//! link's peer is a raw port that grants credits only when told, so the
//! test sees the exact order in which the device's datagrams on three VLs
//! leave.

use std::time::Duration;

use ibtca_device::instance::InstanceConfig;
use ibtca_device::link::LinkEndpoint;
use ibtca_device::verbs::abi::*;
use ibtca_device::vl_config::{parse_sl2vl, VlConfig};
use ibtca_protocol::mad::attr::{id, PortInfo, PortState, VlArbBlock, VlArbEntry};
use ibtca_protocol::mad::{
    directed, method, smp_of_packet, smp_packet, MadStatus, Smp, PERMISSIVE_LID,
};
use ibtca_protocol::PacketView;
use ibtca_tests::datagram::ud_send_wqe;
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::raw_port::RawPort;
use ibtca_tests::{TempDir, TestServer};

const T: Duration = Duration::from_secs(20);
const DEVICE_LID: u16 = 2;
const PEER_LID: u16 = 1;
const QKEY: u32 = 0x1111;
/// UD payload: packets of 8 (LRH) + 12 (BTH) + 8 (DETH) + 1000 + 4 (ICRC)
/// + 2 (VCRC) = 1034 bytes, 17 units of 64 bytes.
const PAYLOAD: u32 = 1000;
const PACKET_LEN: usize = 1034;

/// Sends a directed SMP of one hop (the device) and returns its answer.
fn ask(port: &mut RawPort, tid: &mut u64, m: u8, attr: u16, modifier: u32, data: [u8; 64]) -> Smp {
    let mut smp = Smp::directed(m, attr, modifier, &[1]).unwrap();
    smp.data = data;
    *tid += 1;
    smp.tid = *tid;
    directed::begin(&mut smp).unwrap();
    port.send(
        smp_packet(&smp, PERMISSIVE_LID, PERMISSIVE_LID)
            .build()
            .unwrap(),
    );
    let p = port.packet();
    let view = PacketView::parse(&p).expect("a valid packet");
    assert_eq!(view.lrh.vl, 15, "the answer comes first, on VL15");
    let reply = smp_of_packet(&view).expect("an SMP");
    assert_eq!(reply.tid, smp.tid, "the answer to the request just sent");
    reply
}

fn block(entries: &[(u8, u8)]) -> [VlArbEntry; 32] {
    let mut b = [VlArbEntry::default(); 32];
    for (e, &(vl, weight)) in b.iter_mut().zip(entries) {
        *e = VlArbEntry { vl, weight };
    }
    b
}

#[test]
fn a_device_port_s_vl_arbitration_table_orders_its_own_traffic() {
    let dir = TempDir::new("sma-dev-vlarb");
    let path = dir.join("dev.link");
    // Four data VLs, SL n on VL n for SL0..SL3, every weight 1.
    let cfg = InstanceConfig {
        lid: DEVICE_LID,
        node_guid: 0x1200_0000_0000_0b02,
        port_guid: 0x1200_0000_0000_0b02,
        link: Some(LinkEndpoint::Listen(path.clone())),
        vl: VlConfig {
            sl2vl: parse_sl2vl("0,1,2,3,0,0,0,0,0,0,0,0,0,0,0,15").unwrap(),
            weights: vec![1, 1, 1, 1],
        },
        ..InstanceConfig::default()
    };
    let server = TestServer::start_instance(dir, cfg);
    let mut port = RawPort::connect(&path, PEER_LID, T);
    let mut side = Side::new(&server.socket, &PairOptions::default(), ALL_ACCESS);
    side.wait_active();
    let mut tid = 0x77_0000;

    // The configured weights are the low-priority table, in 64-byte units.
    let r = ask(
        &mut port,
        &mut tid,
        method::GET,
        id::VL_ARB_TABLE,
        (1 << 16) | 1,
        [0; 64],
    );
    assert_eq!(r.status, MadStatus::OK);
    assert_eq!(
        VlArbBlock::decode(&r.data).0,
        block(&[(0, 1), (1, 1), (2, 1), (3, 1)])
    );
    // Blocks are 1..=4, the port 1 (or 0: the port it came in by).
    for bad in [(5 << 16) | 1, (1 << 16) | 2, 1] {
        let r = ask(
            &mut port,
            &mut tid,
            method::GET,
            id::VL_ARB_TABLE,
            bad,
            [0; 64],
        );
        assert_eq!(r.status, MadStatus::INVALID_ATTR_VALUE, "modifier {bad:#x}");
    }

    // Low: VL0 2 KiB a turn, VL1 1 KiB (a weight 0 entry between them is
    // skipped); high: VL3; VLHighLimit 1: 4 KiB of VL3 while a
    // low-priority packet waits, then one low-priority packet.
    let low = block(&[(0, 32), (2, 0), (1, 16)]);
    let high = block(&[(3, 255)]);
    for (b, entries) in [(1u32, low), (3, high)] {
        let r = ask(
            &mut port,
            &mut tid,
            method::SET,
            id::VL_ARB_TABLE,
            (b << 16) | 1,
            VlArbBlock(entries).encode(),
        );
        assert_eq!(
            (r.status, VlArbBlock::decode(&r.data).0),
            (MadStatus::OK, entries),
            "block {b}"
        );
    }
    let r = ask(
        &mut port,
        &mut tid,
        method::GET,
        id::VL_ARB_TABLE,
        3 << 16,
        [0; 64],
    );
    assert_eq!(VlArbBlock::decode(&r.data).0, high, "block 3 reads back");
    let r = ask(&mut port, &mut tid, method::GET, id::PORT_INFO, 1, [0; 64]);
    let mut info = PortInfo::decode(&r.data);
    assert_eq!(info.vl_high_limit, 0);
    info.vl_high_limit = 1;
    info.port_state = PortState::NoChange as u8;
    let r = ask(
        &mut port,
        &mut tid,
        method::SET,
        id::PORT_INFO,
        1,
        info.encode(),
    );
    assert_eq!(
        (r.status, PortInfo::decode(&r.data).vl_high_limit),
        (MadStatus::OK, 1)
    );

    // Sixteen datagrams wait at the device for credits: six on SL0, four
    // on SL1, six on SL3, in that order.
    let mut qp = side
        .g
        .create_datagram_qp(side.pd, &side.cq, 6, QPT_UD)
        .unwrap();
    side.g.datagram_ready(&qp, QKEY).unwrap();
    let sls = [[0u8; 6].as_slice(), &[1; 4], &[3; 6]].concat();
    for (i, sl) in sls.iter().enumerate() {
        let mut w = ud_send_wqe(
            i as u64,
            (side.buf, PAYLOAD, side.lkey),
            PEER_LID,
            0x40,
            QKEY,
        );
        w.sl = *sl;
        side.g.post_ud_send(&mut qp, &w);
    }
    for i in 0..sls.len() {
        side.expect_completion(i as u64, WC_SUCCESS, T);
    }
    // One more SMP answered: the device handed its link everything before.
    ask(&mut port, &mut tid, method::GET, id::NODE_INFO, 0, [0; 64]);

    port.grant(&[0, 1, 2, 3], 32);
    let got: Vec<(u8, usize)> = (0..sls.len())
        .map(|_| {
            let p = port.packet();
            (
                PacketView::parse(&p).expect("a valid packet").lrh.vl,
                p.len(),
            )
        })
        .collect();
    assert!(got.iter().all(|g| g.1 == PACKET_LEN), "{got:?}");
    let vls: Vec<u8> = got.iter().map(|g| g.0).collect();
    // Four VL3 packets (4136 bytes, past 4 KiB), one VL0, the last two
    // VL3; then the low table: VL0 two packets (17 + 17 units from 32: the
    // second starts with 15 left), VL1 one (17 from 16).
    assert_eq!(
        vls,
        [3, 3, 3, 3, 0, 3, 3, 0, 1, 0, 0, 1, 0, 0, 1, 1],
        "the device's egress order"
    );
}
