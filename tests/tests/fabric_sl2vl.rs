//! Service levels and virtual lanes end to end, without VMs: `ibtca-fabric
//! up` passes each port's SL → VL table and VL weights from the topology
//! file to the device and switch processes; a QP's SL (MODIFY_QP path
//! attribute) is the LRH SL of what it sends; each egress port maps it to a
//! VL through its own table (the switch re-maps per output port), which
//! tshark reads back from captures on both sides of the switch. And a VL
//! whose receiver returns no credit stalls alone: the other SL's RDMA WRITE
//! still goes through. Each switch port arbitrates its VLs by its own
//! weights.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use ibtca_device::link::{LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_device::verbs::abi::*;
use ibtca_protocol::PacketView;
use ibtca_tests::capture::{num, tshark, SL, VL};
use ibtca_tests::launcher::{up_json, up_refused};
use ibtca_tests::links::{send_retrying, start_holding_link, start_link};
use ibtca_tests::pair::ALL_ACCESS;
use ibtca_tests::raw_port::{raw_packet, RawPort};
use ibtca_tests::sim_guest::{remote, send_wqe, Cq, Qp, SimGuest};
use ibtca_tests::{workspace_bin, TempDir};

const T: Duration = Duration::from_secs(20);
/// IBTCA_MTU_1024 (IBA encoding: 256 << (code - 1)).
const MTU_1024: u8 = 3;

/// SL n on VL n modulo 2 (`swap`: on VL 1 - n modulo 2); SL15 on VL15.
fn table(swap: bool) -> String {
    let t: Vec<String> = (0..16u8)
        .map(|sl| match sl {
            15 => "15".to_owned(),
            _ => ((sl + u8::from(swap)) % 2).to_string(),
        })
        .collect();
    format!("[{}]", t.join(","))
}

/// One side's objects: a buffer, its keys, a CQ and one QP per SL.
struct Side {
    buf: u64,
    lkey: u32,
    rkey: u32,
    cq: Cq,
    qps: Vec<Qp>,
}

fn side(g: &mut SimGuest, qps: usize) -> Side {
    let pd = g.create_pd();
    let buf = g.alloc(1 << 20, 4096);
    let (lkey, rkey) = g.reg_mr(pd, buf, 1 << 20, ALL_ACCESS);
    let cq = g.create_cq(6);
    let qps = (0..qps).map(|_| g.create_qp(pd, &cq, &cq, 4)).collect();
    Side {
        buf,
        lkey,
        rkey,
        cq,
        qps,
    }
}

#[test]
fn two_sls_leave_on_the_vls_each_port_maps_them_to() {
    let dir = TempDir::new("sl2vl");
    // a's port and sw:1 map SL n → VL n mod 2; sw:2 (towards b) swaps.
    let two = |swap| {
        format!(
            r#"{{"data_vls": 2, "sl2vl": {}, "weights": [2, 1]}}"#,
            table(swap)
        )
    };
    let topo = format!(
        r#"{{ "nodes": [ {{"name": "a", "lid": 1, "vl": {a}}}, {{"name": "b", "lid": 2, "vl": {a}}} ],
             "switches": [ {{"name": "sw", "ports": 2, "vl": {{"data_vls": 2}}, "ports_vl": {{"2": {swapped}}}}} ],
             "links": [ {{"a": "a", "b": "sw:1", "capture": "p1.pcap"}},
                        {{"a": "b", "b": "sw:2", "capture": "p2.pcap"}} ] }}"#,
        a = two(false),
        swapped = two(true)
    );
    let fab = up_json(&topo, &dir);
    let run = fab.run.clone();
    let args = std::fs::read_to_string(run.join("sw.log")).unwrap_or_default();
    let mut a = SimGuest::new(&run.join("a.sock"), 4 << 20);
    let mut b = SimGuest::new(&run.join("b.sock"), 4 << 20);
    let (mut x, y) = (side(&mut a, 2), side(&mut b, 2));
    for sl in 0..2u8 {
        let i = usize::from(sl);
        a.connect_on_sl(&x.qps[i], 2, y.qps[i].qpn, MTU_1024, ALL_ACCESS, sl);
        b.connect_on_sl(&y.qps[i], 1, x.qps[i].qpn, MTU_1024, ALL_ACCESS, sl);
    }
    // One 3000-byte RDMA WRITE per SL (FIRST, MIDDLE, LAST at MTU 1024).
    for sl in 0..2u8 {
        let i = usize::from(sl);
        let data: Vec<u8> = (0..3000u32)
            .map(|n| (n * 3 + u32::from(sl)) as u8)
            .collect();
        let at = 0x1000 * u64::from(sl);
        a.write(x.buf + at, &data);
        let w = remote(
            send_wqe(WR_RDMA_WRITE, u64::from(sl), x.buf + at, 3000, x.lkey),
            y.buf + at,
            y.rkey,
        );
        a.post_send(&mut x.qps[i], &w);
        let c = a.poll_cq(&mut x.cq, T).expect("write completion");
        assert_eq!((c.wr_id.to_native(), c.status), (u64::from(sl), WC_SUCCESS));
        assert_eq!(b.read(y.buf + at, 3000), data, "SL{sl}'s bytes landed");
    }
    drop(a);
    drop(b);
    drop(fab);

    // (capture, SLID, DLID, destination QP) → (SL, VL) of each packet.
    let expect =
        |pcap: &str, slid: u64, qp_of: &dyn Fn(usize) -> u32, vl_of: &dyn Fn(u64) -> u64| {
            let rows = tshark(&run.join(pcap));
            for sl in 0..2usize {
                let qpn = u64::from(qp_of(sl));
                let mine: Vec<_> = rows
                    .iter()
                    .filter(|r| num(&r[6]) == Some(slid) && num(&r[2]) == Some(qpn))
                    .collect();
                assert!(
                    !mine.is_empty(),
                    "{pcap}: packets from LID {slid} to QP {qpn:#x} in {rows:?}\n{args}"
                );
                for r in mine {
                    assert_eq!(num(&r[SL]), Some(sl as u64), "{pcap}: SL of {r:?}");
                    assert_eq!(num(&r[VL]), Some(vl_of(sl as u64)), "{pcap}: VL of {r:?}");
                }
            }
            rows
        };
    let same = |sl: u64| sl;
    let swapped = |sl: u64| 1 - sl;
    let (yq, xq) = (
        y.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(),
        x.qps.iter().map(|q| q.qpn).collect::<Vec<_>>(),
    );
    // a → sw (a's table), sw → b (sw:2's swapped table).
    let p1 = expect("p1.pcap", 1, &|i| yq[i], &same);
    expect("p2.pcap", 1, &|i| yq[i], &swapped);
    // ACKs: b → sw (b's table), sw → a (sw:1's table).
    expect("p2.pcap", 2, &|i| xq[i], &same);
    expect("p1.pcap", 2, &|i| xq[i], &same);
    let writes = p1
        .iter()
        .filter(|r| matches!(num(&r[0]), Some(0x06..=0x08)))
        .count();
    assert!(writes >= 6, "FIRST, MIDDLE, LAST per SL: {p1:?}");
}

#[test]
fn a_bad_vl_table_starts_nothing() {
    let dir = TempDir::new("sl2vl-bad");
    let err = up_refused(
        &dir,
        r#"{"nodes": [{"name": "a", "lid": 1, "vl": {"data_vls": 2, "sl2vl": [0,1,2,0,0,0,0,0,0,0,0,0,0,0,0,15]}}]}"#,
    );
    assert!(err.contains("a: SL2 → VL2"), "{err}");
    // The binaries check their options the same way.
    let dev = Command::new(workspace_bin("ibtca-device"))
        .args(["--socket", &dir.join("x.sock").display().to_string()])
        .args([
            "--vl-weights",
            "1,1",
            "--sl2vl",
            "0,1,2,0,0,0,0,0,0,0,0,0,0,0,0,15",
        ])
        .output()
        .unwrap();
    assert!(!dev.status.success());
    assert!(
        String::from_utf8_lossy(&dev.stderr).contains("SL2 → VL2"),
        "{}",
        String::from_utf8_lossy(&dev.stderr)
    );
    let sw = Command::new(workspace_bin("ibtca-switch"))
        .args(["--port", &format!("listen:{}", dir.join("p").display())])
        .args(["--vl-weights", "1=1,0"])
        .output()
        .unwrap();
    assert!(!sw.status.success());
    assert!(
        String::from_utf8_lossy(&sw.stderr)
            .contains("port 1: --sl2vl/--vl-weights: SL1 → VL1, whose weight is 0"),
        "{}",
        String::from_utf8_lossy(&sw.stderr)
    );
}

/// Device `a` (LID 1) behind the switch sends an RDMA WRITE on SL1 (VL1),
/// then one on SL0 (VL0), to LID 2: the test's own port on the switch's
/// unlinked port 2, with 8 receive buffers per VL, freeing VL0's only.
/// VL0's WRITE arrives whole while VL1 stays at its 8 packets; once VL1's
/// buffers are freed, VL1 moves again.
#[test]
fn a_vl_without_credit_stalls_alone_from_device_to_receiver() {
    let dir = TempDir::new("sl2vl-stall");
    let two = format!(r#"{{"data_vls": 2, "sl2vl": {}}}"#, table(false));
    let topo = format!(
        r#"{{ "nodes": [ {{"name": "a", "lid": 1, "vl": {two}}} ],
             "switches": [ {{"name": "sw", "ports": 2, "vl": {two}}} ],
             "links": [ {{"a": "a", "b": "sw:1"}} ] }}"#
    );
    let fab = up_json(&topo, &dir);
    let run = fab.run.clone();
    let local = LocalPort {
        node_guid: 0x1200_0000_0000_0002,
        port: 1,
        lid: 2,
    };
    let (receiver, rx) = start_holding_link(
        LinkEndpoint::Connect(run.join("links/sw-p2.unused")),
        local,
        8,
    );
    assert!(matches!(rx.recv_timeout(T), Ok(LinkEvent::Up { .. })));

    let mut a = SimGuest::new(&run.join("a.sock"), 4 << 20);
    let mut x = side(&mut a, 2);
    const PACKETS: u32 = 32; // per WRITE, at MTU 1024
    for sl in [1u8, 0] {
        let i = usize::from(sl);
        a.connect_on_sl(
            &x.qps[i],
            2,
            0x500 + u32::from(sl),
            MTU_1024,
            ALL_ACCESS,
            sl,
        );
        let w = remote(
            send_wqe(WR_RDMA_WRITE, u64::from(sl), x.buf, PACKETS * 1024, x.lkey),
            0x1_0000,
            0x1234,
        );
        a.post_send(&mut x.qps[i], &w);
    }
    // (destination QP, PSN) of each first-time packet per VL.
    let mut got: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    let take = |got: &mut [Vec<u32>; 2], p: &[u8]| {
        let v = PacketView::parse(p).expect("a valid packet");
        let vl = usize::from(v.lrh.vl);
        assert!(vl < 2, "data VLs 0 and 1 only: {:?}", v.lrh);
        assert_eq!(v.lrh.vl, v.lrh.sl, "SL n on VL n (mod 2)");
        assert_eq!(v.bth.dest_qp, 0x500 + vl as u32, "SL{vl}'s QP");
        if !got[vl].contains(&v.bth.psn) {
            got[vl].push(v.bth.psn);
        }
        if vl == 0 {
            receiver.return_credits(0, 1);
        }
    };
    let deadline = Instant::now() + T;
    while got[0].len() < PACKETS as usize {
        assert!(
            Instant::now() < deadline,
            "VL0 stopped at {} of {PACKETS} packets while VL1 is stalled (VL1 got {})",
            got[0].len(),
            got[1].len()
        );
        if let Ok(LinkEvent::Packet(p)) = rx.recv_timeout(Duration::from_millis(100)) {
            take(&mut got, &p);
        }
    }
    let psns: Vec<u32> = (100..100 + PACKETS).collect();
    let mut vl0 = got[0].clone();
    vl0.sort_unstable();
    assert_eq!(vl0, psns, "SL0's whole WRITE arrived");
    assert!(
        got[1].len() <= 8,
        "VL1 holds at its 8 credits: {:?}",
        got[1]
    );
    // Free VL1's buffers: it moves again.
    let before = got[1].len();
    receiver.return_credits(1, 8);
    let deadline = Instant::now() + T;
    while got[1].len() <= before {
        assert!(Instant::now() < deadline, "VL1 never resumed");
        if let Ok(LinkEvent::Packet(p)) = rx.recv_timeout(Duration::from_millis(100)) {
            take(&mut got, &p);
            if p.first().is_some_and(|b| b >> 4 == 1) {
                receiver.return_credits(1, 1);
            }
        }
    }
    drop(a);
}

/// A switch with two output ports of opposite VL weights ([1, 4] and
/// [4, 1] 64-byte units; each packet is one unit): each receiver grants nothing until 40 packets of each VL wait
/// at its port, then credits on both VLs at once; each port then sends
/// the VLs in the proportion of its own weights.
#[test]
fn each_switch_port_arbitrates_by_its_own_vl_weights() {
    use ibtca_device::vl_config::{parse_sl2vl, VlConfig};
    use ibtca_switch::{PortConfig, Switch, SwitchConfig};
    let dir = TempDir::new("vl-weights");
    let paths: Vec<PathBuf> = (1..=3).map(|p| dir.join(&format!("p{p}"))).collect();
    let table = parse_sl2vl("0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,15").unwrap();
    let ports = paths
        .iter()
        .zip([vec![1, 1], vec![1, 4], vec![4, 1]])
        .map(|(p, weights)| PortConfig {
            vl: VlConfig {
                sl2vl: table,
                weights,
            },
            ..PortConfig::new(LinkEndpoint::Listen(p.clone()))
        })
        .collect();
    let sw = Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: 0xff00,
        lid: 0,
        ports,
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .unwrap();
    let local = LocalPort {
        node_guid: 0x101,
        port: 1,
        lid: 1,
    };
    let (x, xrx) = start_link(
        LinkEndpoint::Connect(paths[0].clone()),
        local,
        LinkConfig::default(),
    );
    assert!(matches!(xrx.recv_timeout(T), Ok(LinkEvent::Up { .. })));
    let mut favours_vl1 = RawPort::connect(&paths[1], 2, T);
    let mut favours_vl0 = RawPort::connect(&paths[2], 3, T);
    let deadline = Instant::now() + T;
    while sw.lft().lookup(2) != Some(2) || sw.lft().lookup(3) != Some(3) {
        assert!(Instant::now() < deadline, "LIDs 2 and 3 learned");
        std::thread::sleep(Duration::from_millis(5));
    }
    const N: u16 = 40;
    for dlid in [2, 3] {
        for sl in [0u8, 1] {
            for i in 0..N {
                send_retrying(&x, &format!("packet {i} to LID {dlid} on SL{sl}"), || {
                    raw_packet(sl, dlid, i)
                });
            }
        }
    }
    // Everything waits in the switch: nothing may leave ports 2 and 3.
    let deadline = Instant::now() + T;
    while sw.all_stats()[0].rx_packets < u64::from(4 * N) {
        assert!(Instant::now() < deadline, "{:?}", sw.all_stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    let written = |port| sw.link_stats(port).map(|l| l.tx_packets);
    assert_eq!(
        (written(2), written(3)),
        (Some(0), Some(0)),
        "no credit yet"
    );
    for (port, rx, heavy) in [(2, &mut favours_vl1, 1u8), (3, &mut favours_vl0, 0)] {
        rx.grant(&[0, 1], N);
        let vls: Vec<u8> = (0..2 * N)
            .map(|_| ibtca_protocol::encoded::vl(&rx.packet()).unwrap_or(0))
            .collect();
        let first10 = vls[..10].iter().filter(|v| **v == heavy).count();
        assert!(
            first10 >= 7,
            "port {port}: VL{heavy} has weight 4 against 1: first sends {:?}",
            &vls[..10]
        );
        assert_eq!(
            vls.iter().filter(|v| **v == 0).count(),
            usize::from(N),
            "port {port}: every packet once"
        );
    }
    drop(x);
    drop(sw);
}
