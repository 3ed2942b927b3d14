//! One gateway's ATM port against bad input: header errors corrected or
//! dropped, OAM/RM and idle cells, unknown VCs, AAL5 frames with a bad
//! CRC or length, AAL1 cells lost; each counted by its reason, and the
//! port still serving a good frame afterwards. No IB peer: the good
//! frames of a VC without a remote QPN are counted as such.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ibtca_agents::vl_config::VlConfig;
use ibtca_gateway::map::VcMap;
use ibtca_gateway::service::{default_sl2vl, default_vl_weights, ServiceSl};
use ibtca_gateway::vc_conn::QpSettings;
use ibtca_gateway::{Gateway, GatewayConfig};
use ibtca_link::LinkEndpoint;
use ibtca_protocol::atm::aal1::Aal1Segmenter;
use ibtca_protocol::atm::aal5;
use ibtca_protocol::atm::{Cell, CellHeader, Vc};

const T: Duration = Duration::from_secs(30);
const V5: Vc = Vc { vpi: 0, vci: 32 };
const V1: Vc = Vc { vpi: 0, vci: 33 };

#[test]
fn bad_cells_and_frames_are_counted_by_reason() {
    let dir: PathBuf = std::env::temp_dir().join(format!("ibtca-gw-errors-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let map = VcMap::from_json(
        r#"{"vcs": [
        {"vpi": 0, "vci": 32, "aal": 5, "service": "ubr", "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2}},
        {"vpi": 0, "vci": 33, "aal": 1, "blocks": 1, "service": "cbr", "ib": {"qp": "rc", "local_qpn": 17, "remote_lid": 2}}
    ]}"#,
    )
    .unwrap();
    let atm = dir.join("atm");
    let gw = Gateway::start(&GatewayConfig {
        link: LinkEndpoint::Connect(dir.join("nobody")),
        atm: LinkEndpoint::Listen(atm.clone()),
        map,
        service_sl: ServiceSl::default(),
        vl: VlConfig {
            sl2vl: default_sl2vl(),
            weights: default_vl_weights(),
        },
        node_guid: 0x1200_0000_00fd_0001,
        qp: QpSettings {
            lid: 1,
            mtu: 1024,
            ack_timeout: None,
            retry_cnt: 7,
            backlog: 16,
        },
        reassembly_timeout: Duration::from_secs(5),
        queue_cells: 1024,
        link_ring: 0,
        capture: None,
        sma: Default::default(),
    })
    .unwrap();

    let mut cells = Vec::new();
    let frame: Vec<u8> = (0..100u8).collect();
    // A good frame whose first cell has a single-bit header error, the
    // next a double one (the frame then fails its CRC: a cell is missing).
    let mut good = Vec::new();
    aal5::segment(V5, &frame, 0, &mut good).unwrap();
    let mut one = good.clone();
    one[0].bytes[2] ^= 0x10;
    cells.extend(one);
    let mut two = good.clone();
    two[0].bytes[1] ^= 0x01;
    two[0].bytes[3] ^= 0x40;
    cells.extend(two);
    // A frame with a flipped payload bit, one whose length field says
    // more than it carries.
    let mut crc = good.clone();
    crc[1].bytes[9] ^= 4;
    cells.extend(crc);
    let mut pdu: Vec<u8> = vec![7; 40];
    pdu.extend_from_slice(&[0, 0, 0, 200]);
    let c = ibtca_protocol::atm::crc32::crc32(&pdu);
    pdu.extend_from_slice(&c.to_be_bytes());
    cells.push(Cell::new(
        &CellHeader::user(V5, 1),
        pdu.as_slice().try_into().unwrap(),
    ));
    // OAM (F5 end-to-end), F4 OAM, idle, an unknown VC.
    cells.push(Cell::new(&CellHeader::user(V5, 5), &[0; 48]));
    cells.push(Cell::new(
        &CellHeader::user(Vc { vpi: 0, vci: 3 }, 0),
        &[0; 48],
    ));
    cells.push(Cell::new(&CellHeader::default(), &[0; 48]));
    cells.push(Cell::new(
        &CellHeader::user(Vc { vpi: 9, vci: 99 }, 0),
        &[0; 48],
    ));
    // AAL1: cells 0, 1, (2 and 3 lost), 4.
    let mut aal1 = Vec::new();
    Aal1Segmenter::new()
        .segment(V1, &[5; 47 * 5], &mut aal1)
        .unwrap();
    cells.extend([aal1[0], aal1[1], aal1[4]]);
    // A good frame last.
    cells.extend(good);

    let mut s = UnixStream::connect(&atm).expect("the ATM port listens once started");
    let bytes: Vec<u8> = cells.iter().flat_map(|c| c.bytes).collect();
    s.write_all(&bytes).unwrap();
    let deadline = Instant::now() + T;
    let stats = loop {
        let c = gw.counters();
        if c.atm_rx.cells == cells.len() as u64 {
            break c.to_json();
        }
        assert!(
            Instant::now() < deadline,
            "{} of {} cells counted",
            c.atm_rx.cells,
            cells.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let expect = [
        ("hec_corrected", 1),
        ("hec_dropped", 1),
        ("aal5_crc_errors", 2),
        ("aal5_length_errors", 1),
        ("oam_rm_cells", 2),
        ("idle_cells", 1),
        ("unknown_vc", 1),
        ("aal1_lost_cells", 2),
        // Two good frames and five AAL1 messages (filler included).
        ("atm_messages_in", 7),
    ];
    for (name, want) in expect {
        assert_eq!(stats[name], want, "{name} in {stats}");
    }
    // The messages are counted once more by the engine, which has no QP.
    let deadline = Instant::now() + T;
    while gw.counters().engine.dropped_no_qp < 7 {
        assert!(
            Instant::now() < deadline,
            "dropped_no_qp: {}",
            gw.counters().to_json()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let end = gw.stop();
    assert_eq!(end.engine.messages_to_ib, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cell source faster than the engine: with the engine stalled, the ATM
/// port hands over at most the hand-off's bound of messages and drops
/// (and counts) the rest, instead of queueing them without bound.
#[test]
fn a_stalled_engine_bounds_what_the_atm_port_hands_over() {
    use ibtca_gateway::atm_port::AtmPort;
    use ibtca_gateway::handoff::HandOff;
    use ibtca_gateway::qp_thread::Event;
    use ibtca_gateway::scheduler::CellScheduler;
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let dir: PathBuf =
        std::env::temp_dir().join(format!("ibtca-gw-overrun-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let map = VcMap::from_json(
        r#"{"vcs": [{"vpi": 0, "vci": 40, "aal": 0, "service": "ubr", "ib": {"qp": "rc", "local_qpn": 16, "remote_lid": 2}}]}"#,
    )
    .unwrap();
    let atm = dir.join("atm");
    let (tx, stalled) = std::sync::mpsc::channel();
    let handoff = Arc::new(HandOff::new(100));
    let port = AtmPort::start(
        LinkEndpoint::Listen(atm.clone()),
        &map,
        Duration::from_secs(1),
        Arc::new(CellScheduler::new(16)),
        tx,
        handoff.clone(),
        None,
    )
    .unwrap();
    let cell = Cell::new(&CellHeader::user(Vc { vpi: 0, vci: 40 }, 0), &[1; 48]);
    let bytes: Vec<u8> = (0..1000).flat_map(|_| cell.bytes).collect();
    UnixStream::connect(&atm)
        .unwrap()
        .write_all(&bytes)
        .unwrap();
    let deadline = Instant::now() + T;
    while port.counters.rx.lock().unwrap().cells < 1000 {
        assert!(Instant::now() < deadline, "cells counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    let handed: usize = stalled
        .try_iter()
        .map(|ev| match ev {
            Event::Atm(d) => d.len(),
            _ => 0,
        })
        .sum();
    let dropped = port.counters.overrun_dropped.load(Ordering::Relaxed);
    assert_eq!(handed, 100, "the bound's worth handed over");
    assert_eq!(
        handed as u64 + dropped,
        1000,
        "every message handed over or counted"
    );
    assert_eq!(handoff.pending(), handed);
    port.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
