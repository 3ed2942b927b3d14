//! Per-VL credit flow control between two links.

use super::*;
use crate::link::{FlowControl, LinkEvent};

fn vl_packet(vl: u8, i: u8) -> Vec<u8> {
    vec![vl << 4, i, 0xab, 0xcd]
}

#[test]
fn a_vl_without_credit_stalls_alone() {
    let path = socket_path("credits");
    // B has a 4-packet buffer per VL and frees it only when told.
    let b_config = LinkConfig {
        flow_control: Some(FlowControl {
            credits: 4,
            auto_return: false,
            ..FlowControl::default()
        }),
        ..LinkConfig::default()
    };
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let b = start_with(LinkEndpoint::Connect(path), port(2), b_config);
    a.expect_up();
    b.expect_up();
    wait_until("A holds B's grant", || a.link.credits()[..2] == [4, 4]);
    for i in 0..10 {
        a.send_all([vl_packet(1, i), vl_packet(0, i)]);
    }
    // B frees each VL0 buffer at once, no VL1 buffer.
    let (mut vl0, mut vl1) = (Vec::new(), Vec::new());
    while vl0.len() < 10 {
        match b.next() {
            LinkEvent::Packet(p) if p[0] >> 4 == 0 => {
                vl0.push(p[1]);
                b.link.return_credits(0, 1);
            }
            LinkEvent::Packet(p) => vl1.push(p[1]),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(vl0, (0..10).collect::<Vec<u8>>(), "VL0 flowed, in order");
    while vl1.len() < 4 {
        match b.next() {
            LinkEvent::Packet(p) => vl1.push(p[1]),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(vl1, [0, 1, 2, 3], "VL1 sent what B could buffer");
    wait_until("A stalls on VL1", || a.link.stats().credit_stalls > 0);
    assert_eq!(a.link.credits()[1], 0);
    assert!(
        b.events.recv_timeout(Duration::from_millis(200)).is_err(),
        "nothing beyond B's buffer"
    );
    // B frees its VL1 buffers: the rest follows, once each, in order.
    b.link.return_credits(1, 4);
    for p in b.packets(4) {
        vl1.push(p[1]);
        b.link.return_credits(1, 1);
    }
    for p in b.packets(2) {
        vl1.push(p[1]);
    }
    assert_eq!(vl1, (0..10).collect::<Vec<u8>>());
    let s = b.link.stats();
    assert!(s.credit_frames_tx > 0 && a.link.stats().credit_frames_rx > 0);
}

#[test]
fn a_new_connection_starts_from_a_fresh_grant() {
    let (a, b, _path) = pair("credit-reconnect");
    wait_until("grants", || {
        a.link.credits()[0] == 256 && b.link.credits()[0] == 256
    });
    a.send_all((0..3).map(|i| vl_packet(0, i)));
    b.packets(3);
    // B's receive side returns credits half a buffer at a time.
    wait_until("A spent 3 credits", || a.link.credits()[0] == 253);
    drop(b);
    a.expect_down();
    let b = start(LinkEndpoint::Connect(_path.clone()), port(2));
    a.expect_up();
    b.expect_up();
    wait_until("fresh grant", || a.link.credits()[0] == 256);
}
