//! Per-VL credit flow control between two links.

use super::*;
use crate::{FaultPlan, FlowControl, LinkEvent, PacketBatch};

fn vl_packet(vl: u8, i: u8) -> Vec<u8> {
    vec![vl << 4, i, 0xab, 0xcd]
}

#[test]
fn a_vl_without_credit_stalls_alone() {
    // B has a 4-packet buffer per VL and frees it only when told.
    let (a, b) = pair_lending("credits", 4);
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
    const FULL: u32 = crate::vl::DEFAULT_CREDITS as u32;
    let (a, b, _path) = pair("credit-reconnect");
    wait_until("grants", || {
        a.link.credits()[0] == FULL && b.link.credits()[0] == FULL
    });
    a.send_all((0..3).map(|i| vl_packet(0, i)));
    b.packets(3);
    // B's receive side returns credits half a buffer at a time.
    wait_until("A spent 3 credits", || a.link.credits()[0] == FULL - 3);
    drop(b);
    a.expect_down();
    let b = start(LinkEndpoint::Connect(_path.clone()), port(2));
    a.expect_up();
    b.expect_up();
    wait_until("fresh grant", || a.link.credits()[0] == FULL);
}

/// Packets corrupted at their first byte (the LRH's VL and LVer) still
/// return their credits on the VL the sender charged: a receiver that read
/// another VL there returned the credit on it, and the sender's VL lost it
/// for good (the soak's switch, after ~10 minutes at 1 % corrupt, had no
/// VL0 credit left and stopped forwarding). With 8 credits, 24 such
/// packets go through only if every credit comes back.
#[test]
fn packets_corrupted_at_their_first_byte_return_their_credits() {
    let path = socket_path("corrupt-vl");
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let b_config = LinkConfig {
        flow_control: Some(FlowControl {
            credits: 8,
            ..FlowControl::default()
        }),
        ..LinkConfig::default()
    };
    let b = start_with(LinkEndpoint::Connect(path), port(2), b_config);
    a.expect_up();
    b.expect_up();
    wait_until("A holds B's grant", || a.link.credits()[0] == 8);
    let plan = (0..24).fold(FaultPlan::default(), |p, i| p.corrupt(i, 0));
    a.link.set_faults(plan);
    let mut got = Vec::new();
    for i in 0..24 {
        a.send_all([vl_packet(0, i)]);
        got.extend(b.packets(1));
    }
    let vls: Vec<u8> = got.iter().map(|p| p[0] >> 4).collect();
    assert_eq!(vls, [0; 24], "the VL nibble is kept");
    let order: Vec<u8> = got.iter().map(|p| p[1]).collect();
    assert_eq!(order, (0..24).collect::<Vec<u8>>());
    assert_eq!(a.link.stats().fault_corrupted, 24);
}

/// A link started batched whose sink keeps every batch (a stalled
/// consumer): the receive buffers stay held until the test drops them.
fn start_holding(
    endpoint: LinkEndpoint,
    local: crate::LocalPort,
    credits: u16,
) -> (Link, std::sync::mpsc::Receiver<crate::LinkRx>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let config = LinkConfig {
        flow_control: Some(FlowControl {
            credits,
            ..FlowControl::default()
        }),
        ..LinkConfig::default()
    };
    let link = Link::start_batched(endpoint, local, config, move |ev| {
        let _ = tx.send(ev);
    })
    .expect("start batched link");
    (link, rx)
}

/// Takes the batches the sink got so far; panics on a `Down`.
fn held_batches(rx: &std::sync::mpsc::Receiver<crate::LinkRx>) -> Vec<PacketBatch> {
    use crate::LinkRx;
    rx.try_iter()
        .filter_map(|ev| match ev {
            LinkRx::Packets(b) => Some(b),
            LinkRx::Event(LinkEvent::Up { .. }) => None,
            LinkRx::Event(other) => panic!("unexpected {other:?}"),
        })
        .collect()
}

fn packets_in(batches: &[PacketBatch]) -> Vec<Vec<u8>> {
    batches.iter().flat_map(PacketBatch::to_vecs).collect()
}

#[test]
fn credits_come_back_only_when_the_consumer_drops_the_batch() {
    let path = socket_path("stalled-consumer");
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    // B's consumer never looks at its packets: 8 buffers per VL.
    let (b, b_rx) = start_holding(LinkEndpoint::Connect(path), port(2), 8);
    a.expect_up();
    wait_until("A holds B's grant", || a.link.credits()[0] == 8);
    a.send_all((0..40).map(|i| vl_packet(0, i)));
    wait_until("A stalls on VL0", || {
        a.link.stats().credit_stalls > 0 && a.link.credits()[0] == 0
    });
    let mut held = Vec::new();
    wait_until("B's sink has 8 packets", || {
        held.extend(held_batches(&b_rx));
        packets_in(&held).len() >= 8
    });
    // However long the consumer sits on them, no more than the buffer.
    std::thread::sleep(Duration::from_millis(100));
    held.extend(held_batches(&b_rx));
    let got = packets_in(&held);
    assert_eq!(got.len(), 8, "B holds exactly its receive buffer");
    assert_eq!(a.link.credits()[0], 0, "no credit came back while held");
    let s = b.stats();
    assert_eq!(s.rx_credit_overruns, 0);
    // The consumer catches up one batch at a time: the rest follows, in
    // order, never more than the buffer waiting.
    let mut order: Vec<u8> = got.iter().map(|p| p[1]).collect();
    drop(held);
    while order.len() < 40 {
        let mut batches = Vec::new();
        wait_until("more packets", || {
            batches.extend(held_batches(&b_rx));
            !batches.is_empty()
        });
        let more = packets_in(&batches);
        assert!(more.len() <= 8, "{} packets beyond the buffer", more.len());
        order.extend(more.iter().map(|p| p[1]));
    }
    assert_eq!(order, (0..40).collect::<Vec<u8>>());
    assert_eq!(b.stats().rx_credit_overruns, 0);
}

/// Sends `frame` on the raw socket.
fn raw_send(s: &mut std::os::unix::net::UnixStream, frame: ibtca_protocol::link::Frame) {
    use std::io::Write;
    s.write_all(&frame.to_bytes().unwrap()).expect("raw write");
}

#[test]
fn a_peer_that_ignores_credits_is_cut_off_and_counted() {
    use ibtca_protocol::link::{Frame, Hello, LINK_PROTOCOL_VERSION};
    let path = socket_path("hostile");
    let (b, b_rx) = start_holding(LinkEndpoint::Listen(path.clone()), port(2), 4);
    // A raw peer speaking the link protocol that reads none of B's credits.
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    raw_send(
        &mut s,
        Frame::Hello(Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: 9,
            port: 1,
            lid: 9,
            features: 0,
        }),
    );
    wait_until("B up", || b.is_up());
    for i in 0..50 {
        raw_send(&mut s, Frame::Packet(vl_packet(0, i)));
        raw_send(&mut s, Frame::Packet(vl_packet(3, i)));
    }
    wait_until("B read all 100 and counted the overruns", || {
        let s = b.stats();
        s.rx_packets == 100 && s.rx_credit_overruns == 2 * (50 - 4)
    });
    // B counts a read's packets and overruns before its sink gets the
    // packets it admitted.
    let mut held = Vec::new();
    wait_until("B's sink has a buffer's worth on each VL", || {
        held.extend(held_batches(&b_rx));
        packets_in(&held).len() >= 2 * 4
    });
    let got = packets_in(&held);
    let on = |vl: u8| -> Vec<u8> {
        got.iter()
            .filter(|p| p[0] >> 4 == vl)
            .map(|p| p[1])
            .collect()
    };
    assert_eq!(on(0), [0, 1, 2, 3], "VL0: what B had buffers for");
    assert_eq!(on(3), [0, 1, 2, 3], "VL3 likewise");
    // B goes on serving the peer within its credits once it frees them.
    held.clear();
    wait_until("B freed its buffers", || b.stats().credit_frames_tx > 1);
    raw_send(&mut s, Frame::Packet(vl_packet(0, 200)));
    wait_until("the packet within credit arrives", || {
        held.extend(held_batches(&b_rx));
        !held.is_empty()
    });
    assert_eq!(packets_in(&held), [vl_packet(0, 200)]);
    assert_eq!(b.stats().rx_credit_overruns, 2 * (50 - 4), "no more");
    assert!(b.is_up());
}

/// VL15 is outside flow control: with VL0 out of credits and nothing
/// freed, management packets still go (first), none are granted or
/// charged, and a receiver whose VL15 buffers are all held drops the rest.
#[test]
fn vl15_passes_while_the_data_vls_have_no_credits() {
    let (a, b) = pair_lending("vl15", 4);
    wait_until("A holds B's grant", || a.link.credits()[0] == 4);
    assert_eq!(a.link.credits()[15], 0, "no VL15 credits are granted");
    for i in 0..8 {
        a.send_all([vl_packet(0, i)]);
    }
    let first: Vec<u8> = b.packets(4).iter().map(|p| p[1]).collect();
    assert_eq!(first, [0, 1, 2, 3]);
    wait_until("A stalls on VL0", || a.link.stats().credit_stalls > 0);
    a.send_all((0..3).map(|i| vl_packet(15, 100 + i)));
    let mgmt = b.packets(3);
    assert!(mgmt.iter().all(|p| p[0] >> 4 == 15));
    assert_eq!(
        mgmt.iter().map(|p| p[1]).collect::<Vec<_>>(),
        [100, 101, 102]
    );
    assert_eq!(a.link.credits()[0], 0, "VL0 still waits");
    assert!(
        b.events.recv_timeout(Duration::from_millis(100)).is_err(),
        "no VL0 packet beyond the grant"
    );
    // B never freed the VL15 buffers: past VL15_BUFFERS they are dropped.
    let n = crate::VL15_BUFFERS as u8;
    a.send_all((3..n + 5).map(|i| vl_packet(15, i)));
    let held = b.packets(usize::from(n - 3));
    assert_eq!(held.last().map(|p| p[1]), Some(n - 1));
    wait_until("B dropped five", || b.link.stats().rx_vl15_dropped == 5);
    assert_eq!(b.link.stats().rx_credit_overruns, 0);
    // Freed VL15 buffers take more, and owe A no credit.
    let frames = b.link.stats().credit_frames_tx;
    b.link.return_credits(15, u32::from(n));
    a.send_all([vl_packet(15, 200)]);
    assert_eq!(b.packets(1)[0][1], 200);
    assert_eq!(b.link.stats().credit_frames_tx, frames);
    b.link.return_credits(0, 4);
    let rest: Vec<u8> = b.packets(4).iter().map(|p| p[1]).collect();
    assert_eq!(rest, [4, 5, 6, 7]);
}
