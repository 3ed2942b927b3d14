//! Two links: Hello, traffic, start order, peer loss and return.

use std::time::Duration;

use super::*;
use crate::LinkError;

#[test]
fn hello_exchange_reports_peer_identity() {
    let (a, b, path) = pair("hello");
    assert!(a.link.is_up() && b.link.is_up());
    assert_eq!(a.link.stats().connections, 1);
    assert_eq!(b.link.stats().reconnects, 0);
    assert_eq!(a.link.local(), port(1));
    assert_eq!(b.link.endpoint(), &LinkEndpoint::Connect(path.clone()));
    a.link.stop();
    assert!(!path.exists(), "stop removes the listen socket");
    b.expect_down();
}

#[test]
fn thousand_packets_each_way_in_order() {
    let (a, b, _path) = pair("traffic");
    let sent: Vec<Vec<u8>> = (0..1000).map(numbered).collect();
    let a_to_b = std::thread::scope(|s| {
        let (la, lb) = (&a.link, &b.link);
        s.spawn(|| send_all(la, sent.iter().cloned()));
        s.spawn(|| send_all(lb, sent.iter().rev().cloned()));
        (b.packets(1000), a.packets(1000))
    });
    assert!(a_to_b.0 == sent, "a → b differs");
    let b_to_a: Vec<Vec<u8>> = sent.iter().rev().cloned().collect();
    assert!(a_to_b.1 == b_to_a, "b → a differs");
    let bytes: u64 = sent.iter().map(|p| p.len() as u64).sum();
    for peer in [&a, &b] {
        // The writer counts after its write returns, maybe after delivery.
        wait_until("tx count", || peer.link.stats().tx_packets == 1000);
        let s = peer.link.stats();
        assert_eq!((s.tx_packets, s.rx_packets), (1000, 1000));
        assert_eq!((s.tx_bytes, s.rx_bytes), (bytes, bytes));
        assert!(s.tx_writes >= 1 && s.tx_writes <= 1000, "{s:?}");
        assert_eq!(s.tx_dropped_down + s.tx_dropped_full + s.rx_bad_frames, 0);
    }
}

#[test]
fn connect_before_listen_still_connects() {
    let path = socket_path("early");
    let b = start(LinkEndpoint::Connect(path.clone()), port(2));
    // Let it fail a few times first; correctness does not depend on this.
    std::thread::sleep(Duration::from_millis(120));
    assert!(!b.link.is_up());
    let a = start(LinkEndpoint::Listen(path), port(1));
    assert_eq!(b.expect_up(), port(1));
    assert_eq!(a.expect_up(), port(2));
    b.send_all([vec![7; 64]]);
    assert_eq!(a.packets(1), vec![vec![7; 64]]);
}

#[test]
fn connect_side_restart_brings_link_back() {
    let (a, b, path) = pair("restart-connect");
    b.link.stop();
    // Told by the socket's end, the only way a link learns of a peer
    // that went away (no timer to wait out).
    let reason = a.expect_down();
    assert!(reason.contains("closed"), "{reason}");
    assert!(!a.link.is_up());

    let b = start(LinkEndpoint::Connect(path), port(3));
    assert_eq!(a.expect_up(), port(3));
    assert_eq!(b.expect_up(), port(1));
    a.send_all([vec![1; 100]]);
    b.send_all([vec![2; 200]]);
    assert_eq!(b.packets(1), vec![vec![1; 100]]);
    assert_eq!(a.packets(1), vec![vec![2; 200]]);
    assert_eq!(a.link.stats().reconnects, 1);
}

#[test]
fn listen_side_restart_brings_link_back() {
    let (a, b, path) = pair("restart-listen");
    a.link.stop();
    let reason = b.expect_down();
    assert!(reason.contains("closed"), "{reason}");

    let a = start(LinkEndpoint::Listen(path), port(4));
    assert_eq!(b.expect_up(), port(4));
    assert_eq!(a.expect_up(), port(2));
    b.send_all([vec![3; 30]]);
    assert_eq!(a.packets(1), vec![vec![3; 30]]);
    assert_eq!(b.link.stats().reconnects, 1);
}

#[test]
fn send_while_down_is_dropped_without_blocking() {
    let b = start(LinkEndpoint::Connect(socket_path("nobody")), port(2));
    // On another thread: a send that blocked would never return (nobody
    // listens), so the wait fails at the hang guard instead of hanging.
    let (done, sends) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let results: Vec<_> = (0..100).map(|_| b.link.send(vec![0; 64])).collect();
        let _ = done.send((results, b));
    });
    let (results, b) = sends
        .recv_timeout(PATIENCE)
        .expect("100 sends on a down link returned (hang guard)");
    assert!(
        results.iter().all(|r| *r == Err(LinkError::Down)),
        "{results:?}"
    );
    let s = b.link.stats();
    assert_eq!((s.tx_dropped_down, s.tx_packets), (100, 0));
    assert_eq!(
        b.link.send(vec![0; crate::MAX_BODY + 1]),
        Err(LinkError::TooLarge {
            len: crate::MAX_BODY + 1,
            max: crate::MAX_BODY
        })
    );
    assert_eq!(b.link.stats().tx_dropped_oversize, 1);
}

#[test]
fn drop_stops_the_link() {
    let (a, b, path) = pair("drop");
    drop(a);
    assert!(!path.exists());
    b.expect_down();
    assert!(!b.link.is_up());
}

#[test]
fn link_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Link>();
    check::<crate::LinkStats>();
}

#[test]
fn bulk_reads_hand_their_buffer_over_and_packets_arrive_intact() {
    // Bursts of 4 KiB packets fill reads well past the hand-over threshold
    // (the receive buffer itself goes to the sink and comes back through
    // the pool); small packets in between are copied. Every byte arrives,
    // in order, over many reads and buffer swaps.
    let (a, b, _path) = pair("handover");
    let packet = |i: u32, len: usize| -> Vec<u8> {
        let mut p: Vec<u8> = (0..len as u32)
            .map(|k| (k ^ i.wrapping_mul(97)) as u8)
            .collect();
        p[..4].copy_from_slice(&i.to_be_bytes());
        p[0] &= 0x0f; // VL 0
        p
    };
    let mut sent = Vec::new();
    for round in 0..20u32 {
        let burst: Vec<Vec<u8>> = (0..24)
            .map(|k| packet(round * 100 + k, if k % 5 == 4 { 40 } else { 4096 }))
            .collect();
        sent.extend(burst.iter().cloned());
        assert_eq!(a.link.send_batch(burst), 0);
        // Keep within the peer's credits (256 per VL).
        let got = b.packets(24);
        let want = &sent[sent.len() - 24..];
        assert!(got == want, "round {round}: packets differ");
    }
}
