//! Seed 003's VC map on the wire.
//!
//! Service class → SL: a gateway with one VC per
//! service class (CBR, rt-VBR, nrt-VBR, UBR) carries a cell of each to a
//! second gateway through an `ibtca-switch`. The switch port's capture of
//! the first gateway's link, decoded by tshark, shows every packet of each
//! VC's QP on the SL its class maps to and on the VL the gateway's SL → VL
//! table gives that SL: once with the default `service_sl` and table, once
//! with a configured one (`cbr=4,rt-vbr=5,nrt-vbr=6,ubr=7`, SL4..SL7 on
//! VL3, VL0, VL2, VL1).
//!
//! VPI/VCI ranges: an entry `"vpi": [0, 1], "vci": [32, 63]` carries cells
//! on VCs inside its ranges to its QP (they come out of the peer gateway
//! on its VC), and cells on VCs just outside are dropped and counted.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use common::{connect_atm, run_dir, tshark_fields};
use ibtca_agents::vl_config::VlConfig;
use ibtca_gateway::counters::Counters;
use ibtca_gateway::map::VcMap;
use ibtca_gateway::service::{default_sl2vl, default_vl_weights, ServiceSl};
use ibtca_gateway::vc_conn::QpSettings;
use ibtca_gateway::{Gateway, GatewayConfig};
use ibtca_link::LinkEndpoint;
use ibtca_protocol::atm::{Cell, CellHeader, Vc, CELL_LEN};
use ibtca_switch::{PortConfig, Switch, SwitchConfig};

const T: Duration = Duration::from_secs(60);
const LID_A: u16 = 10;
const LID_B: u16 = 20;

/// The VCs, one per class: (class, VCI, A's QPN, B's QPN).
const VCS: [(&str, u16, u32, u32); 4] = [
    ("cbr", 32, 16, 116),
    ("rt-vbr", 33, 17, 117),
    ("nrt-vbr", 34, 18, 118),
    ("ubr", 35, 19, 119),
];

/// One map entry: raw cells (AAL0) on `vpi`/`vci` (a number or a
/// `[first, last]` range), its QP joined to the peer's.
fn entry(vpi: &str, vci: &str, class: &str, local: u32, peer_lid: u16, remote: u32) -> String {
    format!(
        r#"{{"vpi": {vpi}, "vci": {vci}, "aal": 0, "service": "{class}",
            "ib": {{"qp": "rc", "local_qpn": {local}, "remote_lid": {peer_lid},
                    "remote_qpn": {remote}}}}}"#
    )
}

/// The map of one side of the class test: every VC of [`VCS`].
fn class_map(peer_lid: u16, a_side: bool) -> Vec<String> {
    VCS.iter()
        .map(|(class, vci, qa, qb)| {
            let (local, remote) = if a_side { (qa, qb) } else { (qb, qa) };
            entry("0", &vci.to_string(), class, *local, peer_lid, *remote)
        })
        .collect()
}

fn map(entries: &[String]) -> VcMap {
    VcMap::from_json(&format!(r#"{{"vcs": [{}]}}"#, entries.join(","))).expect("the map is good")
}

fn gateway(
    lid: u16,
    map: VcMap,
    link: &Path,
    atm: &Path,
    service_sl: ServiceSl,
    sl2vl: [u8; 16],
) -> Gateway {
    Gateway::start(&GatewayConfig {
        link: LinkEndpoint::Connect(link.to_path_buf()),
        atm: LinkEndpoint::Listen(atm.to_path_buf()),
        map,
        service_sl,
        vl: VlConfig {
            sl2vl,
            weights: default_vl_weights(),
        },
        node_guid: 0x1200_0000_00fd_0000 + u64::from(lid),
        qp: QpSettings {
            lid,
            mtu: 1024,
            ack_timeout: Some(Duration::from_millis(67)),
            retry_cnt: 7,
            backlog: 1024,
        },
        reassembly_timeout: Duration::from_secs(5),
        queue_cells: 1 << 12,
        link_ring: ibtca_link::SHARED_RING,
        capture: None,
        sma: Default::default(),
    })
    .expect("gateway starts")
}

/// A run of A → switch → B.
struct Run {
    /// The VCs of the cells that came out of B's ATM port, sorted.
    out_of_b: Vec<Vc>,
    /// A's counters at its stop.
    a: Counters,
    /// (destination QPN, SL, VL) of every packet A sent, from the switch
    /// port's capture.
    captured: Vec<(u32, u8, u8)>,
}

/// Runs A (`map_a`, its `service_sl` and SL → VL table) → switch → B
/// (`map_b`, defaults): `cells` into A's ATM port, until `want` cells came
/// out of B's.
fn carry_and_capture(
    name: &str,
    (map_a, service_sl, sl2vl): (VcMap, ServiceSl, [u8; 16]),
    map_b: VcMap,
    cells: &[Vc],
    want: usize,
) -> Run {
    let dir = run_dir(name);
    let (p1, p2) = (dir.join("sw-p1"), dir.join("sw-p2"));
    let pcap = dir.join("sw-p1.pcap");
    let switch = Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: 0x1200_0000_00ff_0000,
        lid: 0,
        ports: vec![
            PortConfig {
                capture: Some(pcap.clone()),
                ..PortConfig::new(LinkEndpoint::Listen(p1.clone()))
            },
            PortConfig::new(LinkEndpoint::Listen(p2.clone())),
        ],
        routes: Vec::new(),
        link: Default::default(),
        sm_managed: false,
    })
    .expect("switch starts");
    let (atm_a, atm_b) = (dir.join("atm-a"), dir.join("atm-b"));
    let ga = gateway(LID_A, map_a, &p1, &atm_a, service_sl, sl2vl);
    let gb = gateway(
        LID_B,
        map_b,
        &p2,
        &atm_b,
        ServiceSl::default(),
        default_sl2vl(),
    );

    let mut sink = connect_atm(&atm_b);
    let mut source = connect_atm(&atm_a);
    for (k, vc) in cells.iter().enumerate() {
        let cell = Cell::new(&CellHeader::user(*vc, 0), &[k as u8; 48]);
        source.write_all(&cell.bytes).unwrap();
    }
    sink.set_read_timeout(Some(T)).unwrap();
    let mut out_of_b = Vec::new();
    let mut buf = [0u8; CELL_LEN];
    while out_of_b.len() < want {
        sink.read_exact(&mut buf).expect("a cell out of B in time");
        out_of_b.push(Cell::from_slice(&buf).unwrap().header().vc());
    }
    out_of_b.sort_unstable();
    let a = ga.stop();
    gb.stop();
    switch.stop();

    let captured = tshark(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
    Run {
        out_of_b,
        a,
        captured,
    }
}

/// The class test's run: one cell on each VC of [`VCS`], each of which
/// comes out of B on its VC (it crossed the link).
fn carry_classes(name: &str, service_sl: ServiceSl, sl2vl: [u8; 16]) -> Vec<(u32, u8, u8)> {
    let vcs: Vec<Vc> = VCS.iter().map(|v| Vc { vpi: 0, vci: v.1 }).collect();
    let run = carry_and_capture(
        name,
        (map(&class_map(LID_B, true)), service_sl, sl2vl),
        map(&class_map(LID_A, false)),
        &vcs,
        VCS.len(),
    );
    assert_eq!(run.out_of_b, vcs, "each VC's cell through B");
    run.captured
}

/// (DestQP, SL, VL) of each packet LID A sent, as tshark decodes the pcap.
fn tshark(pcap: &Path) -> Vec<(u32, u8, u8)> {
    let out = tshark_fields(
        pcap,
        &[
            "--disable-protocol",
            "rpcordma",
            "-e",
            "infiniband.lrh.slid",
            "-e",
            "infiniband.bth.destqp",
            "-e",
            "infiniband.lrh.sl",
            "-e",
            "infiniband.lrh.vl",
        ],
    );
    let num = |s: &str| match s.trim().strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.trim().parse().ok(),
    };
    out.lines()
        .filter_map(|l| {
            let f: Vec<Option<u64>> = l.split('\t').map(num).collect();
            match f[..] {
                [Some(slid), Some(qp), Some(sl), Some(vl)] if slid == u64::from(LID_A) => {
                    Some((qp as u32, sl as u8, vl as u8))
                }
                _ => None,
            }
        })
        .collect()
}

/// Asserts that B's QP of every class got at least one packet from A and
/// all of them on (SL, VL) `want[class]`.
fn assert_on_wire(rows: &[(u32, u8, u8)], want: [(u8, u8); 4]) {
    for ((class, vci, _, qpn_b), (sl, vl)) in VCS.iter().zip(want) {
        let packets: Vec<(u8, u8)> = rows
            .iter()
            .filter(|(qp, ..)| qp == qpn_b)
            .map(|&(_, sl, vl)| (sl, vl))
            .collect();
        assert!(
            !packets.is_empty(),
            "{class} (VC 0/{vci}): no packet to QP {qpn_b} captured: {rows:?}"
        );
        assert!(
            packets.iter().all(|p| *p == (sl, vl)),
            "{class} (VC 0/{vci}): want SL{sl} VL{vl}, captured (SL, VL) {packets:?}"
        );
    }
    assert_eq!(
        rows.iter()
            .filter(|(qp, ..)| !VCS.iter().any(|v| v.3 == *qp))
            .count(),
        0,
        "only the VCs' QPs: {rows:?}"
    );
}

#[test]
fn each_service_class_leaves_on_its_default_sl_and_vl() {
    let rows = carry_classes("sl-default", ServiceSl::default(), default_sl2vl());
    // CBR SL1 VL1, rt-VBR SL2 VL2, nrt-VBR SL3 VL3, UBR SL0 VL0.
    assert_on_wire(&rows, [(1, 1), (2, 2), (3, 3), (0, 0)]);
}

#[test]
fn each_service_class_leaves_on_its_configured_sl_and_vl() {
    let mut sl2vl = default_sl2vl();
    sl2vl[4..8].copy_from_slice(&[3, 0, 2, 1]);
    let service_sl: ServiceSl = "cbr=4,rt-vbr=5,nrt-vbr=6,ubr=7".parse().unwrap();
    let rows = carry_classes("sl-configured", service_sl, sl2vl);
    assert_on_wire(&rows, [(4, 3), (5, 0), (6, 2), (7, 1)]);
}

#[test]
fn cells_inside_a_vc_range_are_carried_and_outside_dropped_and_counted() {
    let a = [entry("[0, 1]", "[32, 63]", "cbr", 16, LID_B, 116)];
    let b = [entry("5", "100", "cbr", 116, LID_A, 16)];
    let vc = |vpi, vci| Vc { vpi, vci };
    // Outside first: the port reads in order, so they are counted by the
    // time the inside ones come out of B.
    let outside = [vc(0, 64), vc(2, 32), vc(0, 31), vc(1, 64)];
    let inside = [vc(0, 32), vc(0, 63), vc(1, 32), vc(1, 63), vc(0, 40)];
    let cells: Vec<Vc> = outside.iter().chain(&inside).copied().collect();
    let ranges = (map(&a), ServiceSl::default(), default_sl2vl());
    let run = carry_and_capture("ranges", ranges, map(&b), &cells, inside.len());
    assert_eq!(run.out_of_b, [vc(5, 100); 5], "every inside cell on B's VC");
    assert_eq!(run.a.atm_rx.unknown_vc, outside.len() as u64, "{:?}", run.a);
    assert_eq!(run.a.engine.messages_to_ib, inside.len() as u64);
    // On the wire: CBR's SL1 on VL1, to B's QP.
    assert!(
        run.captured.len() >= inside.len() && run.captured.iter().all(|p| *p == (116, 1, 1)),
        "{:?}",
        run.captured
    );
}
