//! Virtual lanes through a switch: SL → VL on output, per-VL credits on
//! every link, and a VL whose receiver stops freeing buffers stalling alone
//! all the way back to the sender while another VL flows.

use std::time::{Duration, Instant};

use ibtca_device::link::{FlowControl, LinkConfig, LinkEndpoint, LinkEvent, LocalPort};
use ibtca_protocol::{Opcode, Packet, PacketView};
use ibtca_switch::{PortConfig, Switch, SwitchConfig};
use ibtca_tests::links::{send_retrying, start_holding_link, start_link};
use ibtca_tests::TempDir;

const T: Duration = Duration::from_secs(20);

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + T;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An RC SEND from LID 1 to LID 2 on service level `sl` (and VL `sl`, as
/// the sender's SL → VL table says), numbered `i`.
fn packet(sl: u8, i: u16) -> Vec<u8> {
    let mut p = Packet::new(Opcode::RcSendOnly);
    p.lrh.sl = sl;
    p.lrh.vl = sl;
    p.lrh.dlid = 2;
    p.lrh.slid = 1;
    p.payload = i.to_be_bytes().repeat(16);
    p.build().unwrap()
}

fn port(lid: u16) -> LocalPort {
    LocalPort {
        node_guid: 0x100 + u64::from(lid),
        port: 1,
        lid,
    }
}

#[test]
fn a_stalled_vl_pushes_back_through_the_switch_while_another_flows() {
    let dir = TempDir::new("credits");
    let (p1, p2) = (dir.join("p1"), dir.join("p2"));
    let sw = Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: 0xff00,
        lid: 0,
        ports: vec![
            PortConfig::new(LinkEndpoint::Listen(p1.clone())),
            PortConfig::new(LinkEndpoint::Listen(p2.clone())),
        ],
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .unwrap();
    // The sender (LID 1): default flow control.
    let (x, xrx) = start_link(LinkEndpoint::Connect(p1), port(1), LinkConfig::default());
    // The receiver (LID 2): 8 buffers per VL, freed only when the test says.
    let (y, yrx) = start_holding_link(LinkEndpoint::Connect(p2), port(2), 8);
    for rx in [&xrx, &yrx] {
        assert!(matches!(rx.recv_timeout(T), Ok(LinkEvent::Up { .. })));
    }
    wait_until("LID 2 learned", || sw.lft().lookup(2) == Some(2));
    wait_until("grants", || x.credits()[0] > 0 && x.credits()[1] > 0);

    // More than the switch's VL1 buffer for X plus Y's 8: X must stall.
    let n: u16 = 2 * FlowControl::default().credits;
    for i in 0..n {
        for sl in [1u8, 0] {
            send_retrying(&x, &format!("X's packet {i} on SL{sl}"), || packet(sl, i));
        }
    }
    // Y frees every VL0 buffer, none of VL1.
    let (mut vl0, mut vl1) = (Vec::new(), Vec::new());
    while vl0.len() < usize::from(n) {
        let Ok(LinkEvent::Packet(p)) = yrx.recv_timeout(T) else {
            panic!(
                "VL0 stopped after {} packets (VL1 {}): X credits {:?} {:?}, Y credits {:?} {:?}, switch {:?} {:?} {:?}",
                vl0.len(),
                vl1.len(),
                x.credits(),
                x.stats(),
                y.credits(),
                y.stats(),
                sw.all_stats(),
                sw.link_stats(1),
                sw.link_stats(2)
            );
        };
        let view = PacketView::parse(&p).expect("a valid packet, VCRC restamped");
        let i = u16::from_be_bytes([view.payload[0], view.payload[1]]);
        assert_eq!(view.lrh.vl, view.lrh.sl, "SL → VL identity on output");
        if view.lrh.vl == 0 {
            vl0.push(i);
            y.return_credits(0, 1);
        } else {
            vl1.push(i);
        }
    }
    assert_eq!(vl0, (0..n).collect::<Vec<_>>(), "VL0 flowed in order");
    wait_until("Y's VL1 buffer full", || {
        while let Ok(LinkEvent::Packet(p)) = yrx.try_recv() {
            vl1.push(u16::from_be_bytes([p[20], p[21]]));
        }
        vl1.len() == 8
    });
    // Back-pressure: the switch holds VL1 and returns no VL1 credit to X,
    // so X stalls on VL1 with its packets still queued.
    wait_until("X stalls on VL1", || {
        x.credits()[1] == 0 && x.stats().credit_stalls > 0
    });
    let s = sw.all_stats();
    assert_eq!(
        s.iter().map(|p| p.drops()).sum::<u64>(),
        0,
        "lossless: {s:?}"
    );
    assert!(
        s[0].rx_packets < u64::from(2 * n),
        "X's VL1 backlog waits at X, not in the switch"
    );
    // Y frees VL1: everything arrives, once, in order.
    y.return_credits(1, 8);
    while vl1.len() < usize::from(n) {
        let Ok(LinkEvent::Packet(p)) = yrx.recv_timeout(T) else {
            panic!("VL1 stopped after {} packets", vl1.len());
        };
        vl1.push(u16::from_be_bytes([p[20], p[21]]));
        y.return_credits(1, 1);
    }
    assert_eq!(vl1, (0..n).collect::<Vec<_>>(), "VL1 complete, in order");
    let s = sw.all_stats();
    assert_eq!(
        s.iter().map(|p| p.drops()).sum::<u64>(),
        0,
        "lossless: {s:?}"
    );
    drop(x);
    drop(y);
    drop(sw);
}

/// A raw peer on switch port 3 speaks the link protocol but ignores its
/// credits: it floods VL1 packets to LID 2, whose receiver frees none of
/// them. The switch passes on what credits allow, drops the rest at its
/// input (counted in the port's `rx_credit_overruns`, memory bounded by
/// its buffer) and keeps serving the other ports: VL0 from LID 1 to LID 2
/// still flows, in order.
#[test]
fn a_peer_that_ignores_credits_is_cut_off_and_the_switch_serves_the_others() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use ibtca_protocol::link::{Frame, Hello, LINK_PROTOCOL_VERSION};

    let dir = TempDir::new("credits-hostile");
    let (p1, p2, p3) = (dir.join("p1"), dir.join("p2"), dir.join("p3"));
    let sw = Switch::start(SwitchConfig {
        name: "sw".into(),
        guid: 0xff00,
        lid: 0,
        ports: [&p1, &p2, &p3]
            .into_iter()
            .map(|p| PortConfig::new(LinkEndpoint::Listen(p.clone())))
            .collect(),
        routes: Vec::new(),
        link: LinkConfig::default(),
        sm_managed: false,
    })
    .unwrap();
    let (x, xrx) = start_link(LinkEndpoint::Connect(p1), port(1), LinkConfig::default());
    // LID 2: 8 buffers per VL, frees VL0 only.
    let (y, yrx) = start_holding_link(LinkEndpoint::Connect(p2), port(2), 8);
    for rx in [&xrx, &yrx] {
        assert!(matches!(rx.recv_timeout(T), Ok(LinkEvent::Up { .. })));
    }
    // The hostile peer: Hello, then packets regardless of credits.
    let mut h = UnixStream::connect(&p3).unwrap();
    let hello = Frame::Hello(Hello {
        version: LINK_PROTOCOL_VERSION,
        node_guid: 0x666,
        port: 1,
        lid: 3,
        // A raw peer: its frames stay on the socket.
        features: 0,
    });
    h.write_all(&hello.to_bytes().unwrap()).unwrap();
    wait_until("LIDs learned", || {
        sw.lft().lookup(2) == Some(2) && sw.lft().lookup(3) == Some(3)
    });
    let buffer = u64::from(FlowControl::default().credits);
    let flood = 2 * buffer + 100;
    let mut bytes = Vec::new();
    for i in 0..flood {
        let mut p = Packet::new(Opcode::RcSendOnly);
        (p.lrh.sl, p.lrh.vl, p.lrh.dlid, p.lrh.slid) = (1, 1, 2, 3);
        p.payload = (i as u16).to_be_bytes().repeat(16);
        bytes.extend(Frame::Packet(p.build().unwrap()).to_bytes().unwrap());
    }
    h.write_all(&bytes).unwrap();
    // Y's VL1 buffer (8) and the switch's port-3 VL1 buffer fill; the rest
    // is dropped at the switch's input. (Those 8 free their port-3 buffers
    // once written to Y, maybe before the flood's end arrives.)
    wait_until("the flood read", || {
        sw.link_stats(3).map(|s| s.rx_packets) == Some(flood)
    });
    let overruns = sw.link_stats(3).unwrap().rx_credit_overruns;
    assert!(
        (flood - buffer - 8..=flood - buffer).contains(&overruns),
        "{overruns} overruns of {flood}"
    );
    assert!(sw.is_port_up(3));

    // The other ports are served: VL0 from X to Y flows in order.
    const N: u16 = 50;
    for i in 0..N {
        send_retrying(&x, &format!("X's packet {i} on SL0"), || packet(0, i));
    }
    let (mut vl0, mut vl1) = (Vec::new(), 0);
    while vl0.len() < usize::from(N) {
        let Ok(LinkEvent::Packet(p)) = yrx.recv_timeout(T) else {
            panic!("VL0 stopped after {} packets", vl0.len());
        };
        let view = PacketView::parse(&p).expect("a valid packet");
        if view.lrh.vl == 0 {
            vl0.push(u16::from_be_bytes([view.payload[0], view.payload[1]]));
            y.return_credits(0, 1);
        } else {
            vl1 += 1;
        }
    }
    assert_eq!(vl0, (0..N).collect::<Vec<_>>(), "VL0 complete, in order");
    while let Ok(LinkEvent::Packet(_)) = yrx.try_recv() {
        vl1 += 1;
    }
    assert_eq!(vl1, 8, "Y got no more VL1 than its buffer");
    assert_eq!(sw.link_stats(3).unwrap().rx_credit_overruns, overruns);
    drop(h);
    drop(x);
    drop(y);
    drop(sw);
}
