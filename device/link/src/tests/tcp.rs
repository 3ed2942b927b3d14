//! Links over TCP on the loopback interface: the same Hello, frames and
//! credits as over a Unix socket, no shared rings, hostile peers dropped,
//! and a reconnect after the connection goes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use ibtca_protocol::link::{Frame, FEATURE_SHARED_RING, FRAME_HEADER_LEN, LINK_PROTOCOL_VERSION};

use super::robust::hello_bytes_with;
use super::*;
use crate::{TcpAddress, MAX_BODY};

fn loopback_any_port() -> LinkEndpoint {
    LinkEndpoint::ListenTcp(TcpAddress::new("127.0.0.1", 0))
}

fn connect_to(addr: SocketAddr) -> LinkEndpoint {
    LinkEndpoint::ConnectTcp(TcpAddress::new(addr.ip().to_string(), addr.port()))
}

/// A listening TCP link on a port the system chose, and its address.
fn listener() -> (Peer, SocketAddr) {
    let a = start(loopback_any_port(), port(1));
    let addr = a.link.tcp_listen_address().expect("a bound TCP address");
    assert_ne!(addr.port(), 0);
    (a, addr)
}

#[test]
fn a_tcp_link_carries_packets_both_ways_without_rings() {
    let (a, addr) = listener();
    let b = start(connect_to(addr), port(2));
    assert_eq!(a.expect_up(), port(2));
    assert_eq!(b.expect_up(), port(1));
    // More than one VL's default credits: flow control has to return them.
    let n = 3000;
    a.send_all((0..n).map(numbered));
    for (i, p) in b.packets(n as usize).into_iter().enumerate() {
        assert_eq!(p, numbered(i as u32), "packet {i} in order and intact");
    }
    b.send_all([numbered(7)]);
    assert_eq!(a.packets(1), vec![numbered(7)]);
    for s in [a.link.stats(), b.link.stats()] {
        // Both ends have rings on (the default), but files cannot cross
        // TCP: neither offers nor takes one.
        assert_eq!((s.tx_rings, s.rx_rings), (0, 0), "{s:?}");
        assert!(s.credit_frames_rx > 0, "credits came back: {s:?}");
    }
}

#[test]
fn a_tcp_link_reconnects_after_its_peer_goes() {
    let (a, addr) = listener();
    let b = start(connect_to(addr), port(2));
    a.expect_up();
    b.expect_up();
    b.link.stop();
    assert!(!a.expect_down().is_empty());
    let b = start(connect_to(addr), port(3));
    assert_eq!(a.expect_up(), port(3));
    b.expect_up();
    b.send_all([numbered(1)]);
    assert_eq!(a.packets(1), vec![numbered(1)]);
}

#[test]
fn the_connect_side_retries_until_the_tcp_listener_is_there() {
    // A port nobody listens on yet: bind it, note it, let it go.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let b = start(connect_to(addr), port(2));
    let a = start(
        LinkEndpoint::ListenTcp(TcpAddress::new("127.0.0.1", addr.port())),
        port(1),
    );
    assert_eq!(b.expect_up(), port(1));
    assert_eq!(a.expect_up(), port(2));
}

/// Connects a raw TCP client and reads the link's Hello; returns the
/// client and the Hello's features.
fn raw_tcp_client(addr: SocketAddr) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(addr).expect("connect raw client");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut hello = [0u8; FRAME_HEADER_LEN + 14];
    s.read_exact(&mut hello).expect("read Hello");
    let Ok((Frame::Hello(h), _)) = Frame::decode(&hello, MAX_BODY) else {
        panic!("not a Hello: {hello:?}");
    };
    (s, h.features)
}

/// The raw client sees the end of its stream (the link dropped it).
fn assert_dropped(mut s: TcpStream) {
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return,
            Err(e) => panic!("expected the link to drop the client, got {e}"),
        }
    }
}

#[test]
fn garbage_and_ring_offers_over_tcp_drop_the_peer_not_the_link() {
    let (a, addr) = listener();
    // Bytes that are no frame.
    let (mut s, features) = raw_tcp_client(addr);
    assert_eq!(
        features & FEATURE_SHARED_RING,
        0,
        "no rings announced on TCP"
    );
    s.write_all(&[0xff; 64]).unwrap();
    assert_dropped(s);
    wait_until("the Hello rejected", || a.link.stats().hello_rejected == 1);
    // A good Hello that claims rings, then a RingOffer: files cannot come
    // over TCP, and the link announced no rings.
    let (mut s, _) = raw_tcp_client(addr);
    s.write_all(&hello_bytes_with(
        LINK_PROTOCOL_VERSION,
        FEATURE_SHARED_RING,
    ))
    .unwrap();
    assert_eq!(a.expect_up(), port(9));
    s.write_all(&Frame::RingOffer { capacity: 1 << 20 }.to_bytes().unwrap())
        .unwrap();
    assert_dropped(s);
    a.expect_down();
    assert_eq!(a.link.stats().rx_bad_frames, 1);
    // The link still serves a good peer.
    let b = start(connect_to(addr), port(2));
    assert_eq!(a.expect_up(), port(2));
    b.expect_up();
}
