//! Misbehaving peers and socket-path conflicts, with raw sockets.

use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use ibtca_protocol::link::{
    Frame, Hello, LinkState, FEATURE_SHARED_RING, FRAME_HEADER_LEN, LINK_PROTOCOL_VERSION,
};

use super::*;
use crate::{LinkError, MAX_BODY};

/// Connects a raw client and reads the link's Hello.
pub(super) fn raw_client(path: &std::path::Path) -> UnixStream {
    let mut s = UnixStream::connect(path).expect("connect raw client");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut hello = [0u8; FRAME_HEADER_LEN + 14];
    s.read_exact(&mut hello).expect("read Hello");
    let (frame, used) = Frame::decode(&hello, MAX_BODY).unwrap();
    assert_eq!(used, hello.len());
    let Frame::Hello(got) = frame else {
        panic!("not a Hello: {frame:?}");
    };
    assert_eq!(
        got,
        Hello {
            version: LINK_PROTOCOL_VERSION,
            node_guid: port(1).node_guid,
            port: port(1).port,
            lid: port(1).lid,
            // Rings or not, as the link was configured.
            features: got.features & FEATURE_SHARED_RING,
        }
    );
    s
}

fn hello_bytes(version: u16) -> Vec<u8> {
    hello_bytes_with(version, 0)
}

/// A `Hello` of port 9 announcing `features`.
pub(super) fn hello_bytes_with(version: u16, features: u8) -> Vec<u8> {
    let p = port(9);
    Frame::Hello(Hello {
        version,
        node_guid: p.node_guid,
        port: p.port,
        lid: p.lid,
        features,
    })
    .to_bytes()
    .unwrap()
}

/// The raw client's socket reaches end of stream (the link dropped it).
pub(super) fn assert_dropped(mut s: UnixStream) {
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
            Err(e) => panic!("raw client not dropped: {e}"),
        }
    }
}

/// After each bad client, the real peer still gets through.
#[test]
fn bad_first_frames_are_dropped_and_listener_goes_on() {
    let path = socket_path("garbage");
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let bad: [(&str, Vec<u8>); 4] = [
        ("garbage", vec![0xff; 32]),
        (
            "packet first",
            Frame::Packet(vec![1, 2, 3]).to_bytes().unwrap(),
        ),
        (
            "link state first",
            Frame::LinkState(LinkState::Up).to_bytes().unwrap(),
        ),
        ("wrong version", hello_bytes(LINK_PROTOCOL_VERSION + 1)),
    ];
    for (i, (what, bytes)) in bad.iter().enumerate() {
        let mut s = raw_client(&path);
        s.write_all(bytes).unwrap();
        assert_dropped(s);
        wait_until(what, || a.link.stats().hello_rejected == i as u64 + 1);
    }
    assert!(a.events.try_recv().is_err(), "no event for rejected peers");

    let b = start(LinkEndpoint::Connect(path), port(2));
    assert_eq!(a.expect_up(), port(2));
    b.expect_up();
    b.send_all([vec![5; 10]]);
    assert_eq!(a.packets(1), vec![vec![5; 10]]);
    assert_eq!(a.link.stats().rx_bad_frames, 0);
}

#[test]
fn silent_client_times_out() {
    let path = socket_path("silent");
    let config = LinkConfig {
        hello_timeout: Duration::from_millis(200),
        ..LinkConfig::default()
    };
    let a = start_with(LinkEndpoint::Listen(path.clone()), port(1), config);
    let s = raw_client(&path);
    assert_dropped(s);
    wait_until("rejection count", || a.link.stats().hello_rejected == 1);
    let _b = start(LinkEndpoint::Connect(path), port(2));
    assert_eq!(a.expect_up(), port(2));
}

#[test]
fn oversized_frame_after_up_drops_the_peer() {
    let path = socket_path("oversize");
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let mut s = raw_client(&path);
    s.write_all(&hello_bytes(LINK_PROTOCOL_VERSION)).unwrap();
    assert_eq!(a.expect_up(), port(9));
    let mut frames = Frame::Packet(vec![9; 20]).to_bytes().unwrap();
    frames.extend_from_slice(&((MAX_BODY + 1) as u32).to_be_bytes());
    frames.push(2); // Packet
    s.write_all(&frames).unwrap();
    assert_eq!(a.packets(1), vec![vec![9; 20]]);
    let reason = a.expect_down();
    assert!(reason.contains("exceeds"), "{reason}");
    assert_eq!(a.link.stats().rx_bad_frames, 1);
    assert_dropped(s);

    let _b = start(LinkEndpoint::Connect(path), port(2));
    assert_eq!(a.expect_up(), port(2));
}

#[test]
fn live_socket_is_refused_and_stale_one_replaced() {
    let path = socket_path("live");
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let err = Link::start(LinkEndpoint::Listen(path.clone()), port(2), |_| {}).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AddrInUse, "{err}");
    assert!(path.exists(), "the live socket stays");
    drop(a);

    // A socket file nobody listens on.
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let _b = start(LinkEndpoint::Connect(path.clone()), port(2));
    assert_eq!(a.expect_up(), port(2));
    drop(a);

    // Not a socket at all.
    std::fs::write(&path, b"x").unwrap();
    let err = Link::start(LinkEndpoint::Listen(path.clone()), port(1), |_| {}).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::AlreadyExists, "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn full_queue_drops_and_counts() {
    let path = socket_path("full");
    let config = LinkConfig {
        queue_capacity: 4,
        ..LinkConfig::default()
    };
    let a = start_with(LinkEndpoint::Listen(path.clone()), port(1), config);
    // A peer that says Hello and then never reads.
    let s = raw_client(&path);
    (&s).write_all(&hello_bytes(LINK_PROTOCOL_VERSION)).unwrap();
    a.expect_up();
    let mut sent = 0u64;
    let full = loop {
        match a.link.send(vec![0; MAX_BODY]) {
            Ok(()) => sent += 1,
            Err(LinkError::QueueFull) => break true,
            Err(e) => panic!("send: {e}"),
        }
        if sent > 100_000 {
            break false;
        }
    };
    assert!(full, "queue never filled");
    assert_eq!(a.link.stats().tx_dropped_full, 1);
    drop(s);
    let reason = a.expect_down();
    assert!(!reason.is_empty());
}
