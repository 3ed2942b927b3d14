//! Two gateways joined through an `ibtca-switch` (in process) carry four
//! VCs at once in both directions: AAL5 (UBR and CBR), AAL1 (rt-VBR) and
//! AAL0 (nrt-VBR). A cell source and sink on each ATM side, written here
//! (AAL5 trailer and CRC-32 checked bit by bit, AAL1 sequence numbers,
//! raw payloads), check that every message comes out of the other
//! gateway on its mapped VC, byte-exact and in order. One VC's remote QPN
//! is set at run time through the control socket.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{connect_atm, run_dir, tshark_fields};
use ibtca_agents::vl_config::VlConfig;
use ibtca_gateway::control;
use ibtca_gateway::map::VcMap;
use ibtca_gateway::service::{default_sl2vl, default_vl_weights, ServiceSl};
use ibtca_gateway::vc_conn::QpSettings;
use ibtca_gateway::{Gateway, GatewayConfig};
use ibtca_link::{FaultPlan, FaultRates, LinkEndpoint};
use ibtca_protocol::atm::aal1::{sar_header, Aal1Segmenter};
use ibtca_protocol::atm::aal5;
use ibtca_protocol::atm::cell::{hec, PTI_AUU};
use ibtca_protocol::atm::{Cell, CellHeader, Vc, CELL_LEN};
use ibtca_switch::{PortConfig, Switch, SwitchConfig};

const T: Duration = Duration::from_secs(60);

fn listen(p: &Path) -> LinkEndpoint {
    LinkEndpoint::Listen(p.to_path_buf())
}

fn connect(p: &Path) -> LinkEndpoint {
    LinkEndpoint::Connect(p.to_path_buf())
}

/// One side's four VCs: (vc, aal, service, local QPN, remote QPN).
struct Side {
    lid: u16,
    vcs: [(Vc, u8, &'static str, u32, Option<u32>); 4],
}

const A: Side = Side {
    lid: 10,
    vcs: [
        (Vc { vpi: 0, vci: 32 }, 5, "ubr", 16, Some(116)),
        (Vc { vpi: 0, vci: 33 }, 5, "cbr", 17, Some(117)),
        (Vc { vpi: 1, vci: 40 }, 1, "rt-vbr", 18, Some(118)),
        (Vc { vpi: 2, vci: 50 }, 0, "nrt-vbr", 19, Some(119)),
    ],
};

/// B maps the same connections to other VPI/VCIs; its first VC's remote
/// QPN is left for the control socket.
const B: Side = Side {
    lid: 20,
    vcs: [
        (Vc { vpi: 5, vci: 100 }, 5, "ubr", 116, None),
        (Vc { vpi: 5, vci: 101 }, 5, "cbr", 117, Some(17)),
        (Vc { vpi: 6, vci: 200 }, 1, "rt-vbr", 118, Some(18)),
        (Vc { vpi: 7, vci: 300 }, 0, "nrt-vbr", 119, Some(19)),
    ],
};

const AAL1_BLOCKS: usize = 2;

fn map_json(side: &Side, peer: &Side) -> String {
    let vcs: Vec<String> = side
        .vcs
        .iter()
        .map(|(vc, aal, service, local, remote)| {
            let blocks = if *aal == 1 {
                format!(r#", "blocks": {AAL1_BLOCKS}"#)
            } else {
                String::new()
            };
            let remote = remote.map_or(String::new(), |r| format!(r#", "remote_qpn": {r}"#));
            format!(
                r#"{{"vpi": {}, "vci": {}, "aal": {aal}, "service": "{service}"{blocks},
                    "ib": {{"qp": "rc", "local_qpn": {local}, "remote_lid": {}{remote}}}}}"#,
                vc.vpi, vc.vci, peer.lid
            )
        })
        .collect();
    format!(r#"{{"vcs": [{}]}}"#, vcs.join(","))
}

fn gateway(
    side: &Side,
    peer: &Side,
    link: LinkEndpoint,
    atm: LinkEndpoint,
    capture: Option<PathBuf>,
) -> Gateway {
    let cfg = GatewayConfig {
        link,
        atm,
        map: VcMap::from_json(&map_json(side, peer)).expect("the map is good"),
        service_sl: ServiceSl::default(),
        vl: VlConfig {
            sl2vl: default_sl2vl(),
            weights: default_vl_weights(),
        },
        node_guid: 0x1200_0000_00fd_0000 + u64::from(side.lid),
        qp: QpSettings {
            lid: side.lid,
            mtu: 1024,
            ack_timeout: Some(Duration::from_millis(67)),
            retry_cnt: 7,
            backlog: 1024,
        },
        reassembly_timeout: Duration::from_secs(5),
        queue_cells: 1 << 16,
        link_ring: ibtca_link::SHARED_RING,
        capture,
        sma: Default::default(),
    };
    Gateway::start(&cfg).expect("gateway starts")
}

/// Messages a source sends on each of its VCs, by VC index.
fn messages(seed: u8) -> [Vec<Vec<u8>>; 4] {
    let bytes = |len: usize, k: usize| -> Vec<u8> {
        (0..len)
            .map(|i| {
                (i as u8)
                    .wrapping_mul(13)
                    .wrapping_add(seed)
                    .wrapping_add(k as u8)
            })
            .collect()
    };
    let aal5_lens = [1, 40, 41, 48, 1500, 9180, 64, 4096, 7, 3000];
    [
        aal5_lens
            .iter()
            .enumerate()
            .map(|(k, &l)| bytes(l, k))
            .collect(),
        aal5_lens
            .iter()
            .rev()
            .enumerate()
            .map(|(k, &l)| bytes(l, k + 50))
            .collect(),
        (0..12).map(|k| bytes(47 * AAL1_BLOCKS, k + 100)).collect(),
        (0..30).map(|k| bytes(48, k + 150)).collect(),
    ]
}

/// The source's cells for `side`, VCs interleaved cell by cell.
fn source_cells(side: &Side, msgs: &[Vec<Vec<u8>>; 4]) -> Vec<Cell> {
    let mut per_vc: Vec<Vec<Cell>> = Vec::new();
    for (i, (vc, aal, ..)) in side.vcs.iter().enumerate() {
        let mut cells = Vec::new();
        let mut aal1 = Aal1Segmenter::new();
        for m in &msgs[i] {
            match aal {
                5 => aal5::segment(*vc, m, 0, &mut cells).unwrap(),
                1 => aal1.segment(*vc, m, &mut cells).unwrap(),
                _ => cells.push(Cell::new(
                    &CellHeader::user(*vc, 0),
                    m.as_slice().try_into().unwrap(),
                )),
            }
        }
        per_vc.push(cells);
    }
    let longest = per_vc.iter().map(Vec::len).max().unwrap();
    (0..longest)
        .flat_map(|k| per_vc.iter().filter_map(move |c| c.get(k).copied()))
        .collect()
}

/// AAL5's CRC-32 bit by bit (I.363.5).
fn crc32_bitwise(bytes: &[u8]) -> u32 {
    let mut reg = u32::MAX;
    for &byte in bytes {
        for i in (0..8).rev() {
            let top = reg >> 31;
            reg <<= 1;
            if top ^ u32::from(byte >> i & 1) == 1 {
                reg ^= 0x04C1_1DB7;
            }
        }
    }
    !reg
}

/// The sink: sorts cells by VC and decodes each VC's AAL independently of
/// the library's receiver.
#[derive(Default)]
struct Sink {
    partial: HashMap<Vc, Vec<u8>>,
    /// Every cell's (VPI, VCI, PTI), in arrival order.
    headers: Vec<CellId>,
    got: HashMap<Vc, Vec<Vec<u8>>>,
    aal1_next: HashMap<Vc, u8>,
}

impl Sink {
    fn take(&mut self, side: &Side, cell: &[u8]) {
        let h: [u8; 4] = cell[..4].try_into().unwrap();
        assert_eq!(
            cell[4],
            hec(&h),
            "every cell out of the gateway has a good HEC"
        );
        let header = CellHeader::decode(&h);
        self.headers.push((header.vpi, header.vci, header.pti));
        let vc = header.vc();
        let aal = side
            .vcs
            .iter()
            .find(|v| v.0 == vc)
            .unwrap_or_else(|| panic!("a cell on unmapped VC {vc}"))
            .1;
        let payload = &cell[5..];
        match aal {
            5 => {
                let pdu = self.partial.entry(vc).or_default();
                pdu.extend_from_slice(payload);
                if header.pti & PTI_AUU != 0 {
                    let pdu = std::mem::take(pdu);
                    let t = &pdu[pdu.len() - 8..];
                    let len = usize::from(u16::from_be_bytes([t[2], t[3]]));
                    assert_eq!(
                        u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
                        crc32_bitwise(&pdu[..pdu.len() - 4])
                    );
                    assert!(
                        len <= pdu.len() - 8 && pdu.len() - 8 - len < 48,
                        "length field fits"
                    );
                    self.got.entry(vc).or_default().push(pdu[..len].to_vec());
                }
            }
            1 => {
                let next = self.aal1_next.entry(vc).or_insert(0);
                assert_eq!(
                    payload[0],
                    sar_header(false, *next),
                    "AAL1 SN in sequence on {vc}"
                );
                *next = (*next + 1) & 7;
                let pdu = self.partial.entry(vc).or_default();
                pdu.extend_from_slice(&payload[1..]);
                if pdu.len() == 47 * AAL1_BLOCKS {
                    let m = std::mem::take(pdu);
                    self.got.entry(vc).or_default().push(m);
                }
            }
            _ => self.got.entry(vc).or_default().push(payload.to_vec()),
        }
    }

    fn count(&self) -> usize {
        self.got.values().map(Vec::len).sum()
    }
}

/// Writes `cells` to `stream` and reads cells for `side` until `want`
/// messages have arrived.
fn exchange(
    mut stream: UnixStream,
    side: &'static Side,
    cells: Vec<Cell>,
    want: usize,
) -> std::thread::JoinHandle<Sink> {
    let mut writer = stream.try_clone().unwrap();
    std::thread::spawn(move || {
        for chunk in cells.chunks(100) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|c| c.bytes).collect();
            writer.write_all(&bytes).unwrap();
        }
    });
    std::thread::spawn(move || {
        stream.set_read_timeout(Some(T)).unwrap();
        let mut sink = Sink::default();
        let mut buf = [0u8; CELL_LEN];
        let deadline = Instant::now() + T;
        while sink.count() < want {
            assert!(
                Instant::now() < deadline,
                "{} of {want} messages",
                sink.count()
            );
            stream
                .read_exact(&mut buf)
                .unwrap_or_else(|e| panic!("after {} of {want} messages: {e}", sink.count()));
            sink.take(side, &buf);
        }
        sink
    })
}

/// The two-port switch between the gateways (LIDs learned from Hellos).
fn start_switch(ports: Vec<PortConfig>) -> Switch {
    Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: 0x1200_0000_00ff_0000,
        lid: 0,
        ports,
        routes: Vec::new(),
        link: Default::default(),
        sm_managed: false,
    })
    .expect("switch starts")
}

#[test]
fn two_gateways_through_a_switch_carry_four_vcs_both_ways() {
    let dir = run_dir("two");
    let (p1, p2) = (dir.join("sw-p1"), dir.join("sw-p2"));
    let switch = start_switch(vec![
        PortConfig::new(listen(&p1)),
        PortConfig::new(listen(&p2)),
    ]);
    let (atm_a, atm_b) = (dir.join("atm-a"), dir.join("atm-b"));
    let pcap = dir.join("atm-a.pcap");
    let ga = gateway(&A, &B, connect(&p1), listen(&atm_a), Some(pcap.clone()));
    let gb = Arc::new(gateway(&B, &A, connect(&p2), listen(&atm_b), None));

    // B's first VC has no remote QPN yet: set it through the control socket.
    let control_path = dir.join("gb.control");
    let control = control::serve(gb.clone(), &control_path).unwrap();
    let request = |line: &str| ibtca_switch::control::request(&control_path, line).unwrap();
    assert_eq!(
        request("remote-qpn 5/100 16"),
        "ok VC 5/100: QP 116 to LID 10 QP 16"
    );
    assert_eq!(
        request("remote-qpn 9/99 16"),
        "error VC 9/99 is not in the map"
    );
    assert!(request("remote-qpn 5/100 1").starts_with("error remote QPN 1 is out of range"));
    assert!(request("bogus").starts_with("error unknown command `bogus`"));

    let (ma, mb) = (messages(1), messages(2));
    let total = |m: &[Vec<Vec<u8>>; 4]| m.iter().map(Vec::len).sum::<usize>();
    let sa = exchange(connect_atm(&atm_a), &A, source_cells(&A, &ma), total(&mb));
    let sb = exchange(connect_atm(&atm_b), &B, source_cells(&B, &mb), total(&ma));
    let (got_a, got_b) = (sa.join().expect("A's sink"), sb.join().expect("B's sink"));

    for (sink, side, sent) in [(&got_a, &A, &mb), (&got_b, &B, &ma)] {
        for (i, (vc, ..)) in side.vcs.iter().enumerate() {
            let got = sink.got.get(vc).map_or(&[][..], Vec::as_slice);
            assert_eq!(
                got.len(),
                sent[i].len(),
                "LID {} VC {vc}: messages",
                side.lid
            );
            for (k, (g, w)) in got.iter().zip(&sent[i]).enumerate() {
                assert!(
                    g == w,
                    "LID {} VC {vc} message {k}: {} bytes, want {}",
                    side.lid,
                    g.len(),
                    w.len()
                );
            }
        }
    }

    // The sinks having every message does not mean B has counted them:
    // B's ATM reader counts its cells after handing their messages on,
    // its writer counts cells after writing them, and the ACKs of B's
    // last SENDs cross the switch after A delivered them. Wait for those
    // counts.
    let cells_a = source_cells(&A, &ma).len() as u64;
    let cells_b = source_cells(&B, &mb).len() as u64;
    let deadline = Instant::now() + T;
    let stats: serde_json::Value = loop {
        let s: serde_json::Value =
            serde_json::from_str(request("stats").strip_prefix("ok ").unwrap()).unwrap();
        if s["cells_in"] == cells_b
            && s["cells_out"] == cells_a
            && s["messages_sent"] == total(&mb) as u64
        {
            break s;
        }
        assert!(Instant::now() < deadline, "B's counters: {s}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(stats["cells_in"], cells_b);
    assert_eq!(stats["cells_out"], cells_a);
    assert_eq!(stats["atm_messages_in"], total(&mb) as u64);
    assert_eq!(stats["messages_from_ib"], total(&ma) as u64);
    assert_eq!(stats["hec_dropped"], 0);
    assert_eq!(stats["unknown_vc"], 0);
    control.stop();
    let gb = Arc::try_unwrap(gb).ok().expect("the control server let go");
    let ca = ga.stop();
    let cb = gb.stop();
    assert_eq!(ca.engine.messages_to_ib, total(&ma) as u64);
    assert_eq!(
        cb.engine.messages_sent,
        total(&mb) as u64,
        "every SEND acknowledged"
    );
    assert_eq!(ca.engine.segment_errors + cb.engine.segment_errors, 0);
    switch.stop();

    // A's capture, as tshark decodes it: what the source sent (interface
    // 0) and what the sink got (interface 1), cell by cell.
    let sent: Vec<CellId> = source_cells(&A, &ma)
        .iter()
        .map(|c| c.header())
        .map(|h| (h.vpi, h.vci, h.pti))
        .collect();
    let (rx, tx) = tshark_atm(&pcap);
    assert_eq!(rx, sent, "cells in, as captured");
    assert_eq!(tx, got_a.headers, "cells out, as captured");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A cell's (VPI, VCI, PTI).
type CellId = (u8, u16, u8);

/// The cells in a capture, received and sent.
fn tshark_atm(pcap: &Path) -> (Vec<CellId>, Vec<CellId>) {
    let out = tshark_fields(
        pcap,
        &[
            "-e",
            "erf.flags.cap",
            "-e",
            "atm.vpi",
            "-e",
            "atm.vci",
            "-e",
            "atm.payload_type",
        ],
    );
    let (mut rx, mut tx) = (Vec::new(), Vec::new());
    for line in out.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let cell = (
            f[1].parse().unwrap(),
            f[2].parse().unwrap(),
            f[3].parse().unwrap(),
        );
        match f[0] {
            "0" => rx.push(cell),
            "1" => tx.push(cell),
            other => panic!("interface {other} in {line}"),
        }
    }
    (rx, tx)
}

/// Gateway B's ATM sink does not read while 100 UBR frames (19,200
/// cells) pile up in B's cell queue behind a full socket; then one CBR
/// frame arrives. Once the sink reads, the CBR frame's cells come out
/// before the UBR cells still queued: the saturated UBR connection does
/// not hold CBR back inside the gateway. Both arrive whole.
#[test]
fn cbr_overtakes_a_saturated_ubr_connection_inside_the_gateway() {
    let dir = run_dir("prio");
    let (p1, p2) = (dir.join("sw-p1"), dir.join("sw-p2"));
    let switch = start_switch(vec![
        PortConfig::new(listen(&p1)),
        PortConfig::new(listen(&p2)),
    ]);
    let (atm_a, atm_b) = (dir.join("atm-a"), dir.join("atm-b"));
    let ga = gateway(&A, &B, connect(&p1), listen(&atm_a), None);
    let gb = gateway(&B, &A, connect(&p2), listen(&atm_b), None);
    gb.set_remote_qpn(B.vcs[0].0, 16).unwrap();
    let mut src = connect_atm(&atm_a);
    let mut sink = connect_atm(&atm_b);
    let wait_for = |n: u64| {
        let deadline = Instant::now() + T;
        while gb.counters().engine.messages_from_ib < n {
            assert!(Instant::now() < deadline, "{}", gb.counters().to_json());
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    let (ubr_a, cbr_a) = (A.vcs[0].0, A.vcs[1].0);
    let (ubr_b, cbr_b) = (B.vcs[0].0, B.vcs[1].0);
    let ubr: Vec<Vec<u8>> = (0..100u8).map(|k| vec![k; 9180]).collect();
    let mut cells = Vec::new();
    for f in &ubr {
        aal5::segment(ubr_a, f, 0, &mut cells).unwrap();
    }
    src.write_all(&cells.iter().flat_map(|c| c.bytes).collect::<Vec<u8>>())
        .unwrap();
    wait_for(100);
    let cbr = vec![0xcb; 500];
    cells.clear();
    aal5::segment(cbr_a, &cbr, 0, &mut cells).unwrap();
    src.write_all(&cells.iter().flat_map(|c| c.bytes).collect::<Vec<u8>>())
        .unwrap();
    wait_for(101);

    let mut sink_state = Sink::default();
    let mut buf = [0u8; CELL_LEN];
    let mut ubr_cells_before_cbr = None;
    let mut ubr_cells = 0;
    sink.set_read_timeout(Some(T)).unwrap();
    while sink_state.count() < 101 {
        sink.read_exact(&mut buf).expect("cells out of B");
        sink_state.take(&B, &buf);
        if CellHeader::decode(&buf[..4].try_into().unwrap()).vc() == ubr_b {
            ubr_cells += 1;
        } else if sink_state.got.contains_key(&cbr_b) && ubr_cells_before_cbr.is_none() {
            ubr_cells_before_cbr = Some(ubr_cells);
        }
    }
    let before = ubr_cells_before_cbr.expect("the CBR frame came out");
    assert_eq!(ubr_cells, 100 * 192);
    assert!(
        before + 5000 < ubr_cells,
        "the CBR frame left after {before} of {ubr_cells} UBR cells: only those already in the socket may go first"
    );
    assert!(
        sink_state.got[&ubr_b] == ubr,
        "every UBR frame whole and in order"
    );
    assert!(sink_state.got[&cbr_b] == [cbr], "the CBR frame whole");
    let (ca, cb) = (ga.stop(), gb.stop());
    assert_eq!(
        (ca.engine.messages_to_ib, cb.engine.messages_from_ib),
        (101, 101)
    );
    assert_eq!(cb.queue_dropped_cells, 0);
    switch.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same four VCs both ways through a switch that drops, duplicates,
/// reorders and corrupts 2 % of what each port sends: the RC transport
/// under the gateways recovers, every message arrives byte-exact and in
/// order.
#[test]
fn four_vcs_survive_a_lossy_switch() {
    let dir = run_dir("lossy");
    let (p1, p2) = (dir.join("sw-p1"), dir.join("sw-p2"));
    let lossy = |p: &Path, seed: u64| {
        let mut port = PortConfig::new(listen(p));
        port.faults = FaultPlan::default().with_rates(FaultRates {
            drop: 20,
            duplicate: 20,
            reorder: 20,
            corrupt: 20,
            seed,
        });
        port
    };
    let switch = start_switch(vec![lossy(&p1, 7), lossy(&p2, 11)]);
    let (atm_a, atm_b) = (dir.join("atm-a"), dir.join("atm-b"));
    let ga = gateway(&A, &B, connect(&p1), listen(&atm_a), None);
    let gb = gateway(&B, &A, connect(&p2), listen(&atm_b), None);
    gb.set_remote_qpn(B.vcs[0].0, 16).unwrap();
    let (ma, mb) = (messages(3), messages(4));
    let total = |m: &[Vec<Vec<u8>>; 4]| m.iter().map(Vec::len).sum::<usize>();
    let sa = exchange(connect_atm(&atm_a), &A, source_cells(&A, &ma), total(&mb));
    let sb = exchange(connect_atm(&atm_b), &B, source_cells(&B, &mb), total(&ma));
    let (got_a, got_b) = (sa.join().expect("A's sink"), sb.join().expect("B's sink"));
    for (sink, side, sent) in [(&got_a, &A, &mb), (&got_b, &B, &ma)] {
        for (i, (vc, ..)) in side.vcs.iter().enumerate() {
            assert!(
                sink.got.get(vc) == Some(&sent[i]),
                "LID {} VC {vc}: every message, in order",
                side.lid
            );
        }
    }
    // The faults did happen, on both ports.
    for port in [1, 2] {
        let l = switch.link_stats(port).unwrap();
        let faults = l.fault_dropped + l.fault_duplicated + l.fault_reordered + l.fault_corrupted;
        assert!(faults > 0, "port {port}: {l:?}");
    }
    let (ca, cb) = (ga.stop(), gb.stop());
    assert_eq!(ca.engine.send_failures + cb.engine.send_failures, 0);
    switch.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
