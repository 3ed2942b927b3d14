//! Links whose ends write into shared rings (`pipe.rs`): whole links in
//! every mix of ends, and raw peers that take a ring or misuse one.

use std::io::{IoSlice, Write};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use ibtca_protocol::link::{Frame, FrameDecoder, FEATURE_SHARED_RING, LINK_PROTOCOL_VERSION};

use super::pipe::{offered_counting, read_offer};
use super::robust::{assert_dropped, hello_bytes_with, raw_client};
use super::*;
use crate::pipe::{self, RingRx};
use crate::stats::Counters;
use crate::{MAX_BODY, SHARED_RING};

fn with_ring(shared_ring: u64) -> LinkConfig {
    LinkConfig {
        shared_ring,
        ..LinkConfig::default()
    }
}

/// A listening link with `config` and a raw peer that said `Hello`
/// announcing shared rings; the link is up.
fn ring_taker(name: &str, config: LinkConfig) -> (Peer, std::os::unix::net::UnixStream) {
    let path = socket_path(name);
    let a = start_with(LinkEndpoint::Listen(path.clone()), port(1), config);
    let mut s = raw_client(&path);
    s.write_all(&hello_bytes_with(
        LINK_PROTOCOL_VERSION,
        FEATURE_SHARED_RING,
    ))
    .unwrap();
    assert_eq!(a.expect_up(), port(9));
    (a, s)
}

#[test]
fn streams_go_through_rings_exactly_when_both_ends_take_them() {
    // A 4 KiB ring is smaller than the longest packets here: frames are
    // written and read in pieces, and each side waits for room often.
    for (a_ring, b_ring) in [(4096, 4096), (SHARED_RING, 0), (0, SHARED_RING), (0, 0)] {
        let path = socket_path("rings");
        let a = start_with(
            LinkEndpoint::Listen(path.clone()),
            port(1),
            with_ring(a_ring),
        );
        let b = start_with(LinkEndpoint::Connect(path), port(2), with_ring(b_ring));
        assert_eq!(a.expect_up(), port(2));
        assert_eq!(b.expect_up(), port(1));
        const N: u32 = 1500;
        a.send_all((0..N).map(numbered));
        b.send_all((0..N).map(|i| numbered(N - i)));
        assert!(
            b.packets(N as usize).into_iter().eq((0..N).map(numbered)),
            "A→B with rings {a_ring}/{b_ring}"
        );
        assert!(
            a.packets(N as usize)
                .into_iter()
                .eq((0..N).map(|i| numbered(N - i))),
            "B→A with rings {a_ring}/{b_ring}"
        );
        let rings = u64::from(a_ring > 0 && b_ring > 0);
        for (name, s) in [("A", a.link.stats()), ("B", b.link.stats())] {
            assert_eq!(
                (s.tx_rings, s.rx_rings),
                (rings, rings),
                "{name} with rings {a_ring}/{b_ring}"
            );
            assert_eq!(s.rx_bad_frames, 0);
        }
    }
}

#[test]
fn a_raw_peer_that_takes_the_ring_reads_the_links_frames_from_it() {
    let (a, mut s) = ring_taker("raw-ring", LinkConfig::default());
    // The link's only frame after its Hello on the socket: the offer.
    let (capacity, fds) = read_offer(&as_link(&s));
    assert_eq!(capacity, SHARED_RING);
    let frames = ring_frames(
        pipe::accept(capacity, fds, crate::RX_SPIN, Default::default()).unwrap(),
        &s,
    );
    // Credit for one packet on VL 0, then one packet.
    s.write_all(&Frame::Credit { vl: 0, credits: 1 }.to_bytes().unwrap())
        .unwrap();
    a.send_all([vec![7; 300]]);
    let packet = loop {
        match frames.recv_timeout(PATIENCE).expect("a packet in the ring") {
            Frame::Packet(p) => break p,
            Frame::Credit { .. } => {}
            other => panic!("unexpected frame in the ring: {other:?}"),
        }
    };
    assert_eq!(packet, vec![7; 300]);
    assert_eq!((a.link.stats().tx_rings, a.link.stats().rx_rings), (1, 0));

    // A RingOffer without its files: the peer is dropped.
    s.write_all(&Frame::RingOffer { capacity: 4096 }.to_bytes().unwrap())
        .unwrap();
    let reason = a.expect_down();
    assert!(reason.contains("RingOffer"), "{reason}");
    assert_eq!(a.link.stats().rx_bad_frames, 1);
    // The ring's reader sees the hang-up once it is drained.
    loop {
        match frames.recv_timeout(PATIENCE) {
            Ok(_) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(e) => panic!("the ring reader saw no hang-up: {e}"),
        }
    }
    assert_dropped(s);
}

/// Reads frames from `rx` (the ring of the link at the other end of
/// `socket`) on a thread, until the link hangs up (the channel closes).
fn ring_frames(mut rx: RingRx, socket: &std::os::unix::net::UnixStream) -> mpsc::Receiver<Frame> {
    let socket = socket.try_clone().unwrap();
    let (tx, frames) = mpsc::channel();
    std::thread::spawn(move || {
        let mut decoder = FrameDecoder::new(MAX_BODY);
        let mut buf = vec![0u8; 4096];
        loop {
            let n = rx.recv(&as_link(&socket), &mut buf).unwrap();
            if n == 0 {
                return;
            }
            for frame in decoder.feed(&buf[..n]) {
                let _ = tx.send(frame.unwrap());
            }
        }
    });
    frames
}

#[test]
fn a_ring_offered_to_a_link_that_did_not_ask_for_one_drops_the_peer() {
    let (a, s) = ring_taker("unasked", with_ring(0));
    // A real offer, files and all, but the link announced no rings.
    let offered = pipe::offer(&as_link(&s), 4096, Default::default()).unwrap();
    let reason = a.expect_down();
    assert!(reason.contains("did not announce"), "{reason}");
    assert_eq!(a.link.stats().rx_bad_frames, 1);
    drop(offered);
    assert_dropped(s);
}

#[test]
fn a_peer_that_takes_no_ring_may_still_offer_its_own() {
    // Announcing rings says what one takes, not what one offers: a peer
    // that could not map our ring (and so announces none) still writes its
    // own frames through a ring it offers.
    let path = socket_path("offers-only");
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let mut s = raw_client(&path);
    s.write_all(&hello_bytes_with(LINK_PROTOCOL_VERSION, 0))
        .unwrap();
    assert_eq!(a.expect_up(), port(9));
    let offered = pipe::offer(&as_link(&s), 4096, Default::default()).unwrap();
    let frame = Frame::Packet(numbered(7)).to_bytes().unwrap();
    let mut at = 0;
    while at < frame.len() {
        at += offered
            .send(&[std::io::IoSlice::new(&frame[at..])])
            .unwrap();
    }
    assert_eq!(a.packets(1), [numbered(7)]);
    let stats = a.link.stats();
    assert_eq!((stats.rx_rings, stats.rx_bad_frames), (1, 0));
    // A did not offer to a peer that takes none.
    assert_eq!(stats.tx_rings, 0);
    drop(offered);
}

/// A link that takes rings and a raw peer that offered it one of
/// `capacity` bytes (the link's own offer to the peer is left unread).
fn ring_giver(name: &str, capacity: u64) -> (Peer, std::os::unix::net::UnixStream, pipe::TxPipe) {
    let (a, s) = ring_taker(name, LinkConfig::default());
    let offered = pipe::offer(&as_link(&s), capacity, Default::default()).unwrap();
    (a, s, offered)
}

/// Writes all of `bytes` into the ring (waiting for room as needed).
fn put(ring: &pipe::TxPipe, bytes: &[u8]) {
    let mut at = 0;
    while at < bytes.len() {
        at += ring.send(&[std::io::IoSlice::new(&bytes[at..])]).unwrap();
    }
}

/// The smallest ring the link walks in place (it holds the longest frame).
const WALKED: u64 = 128 * 1024;

#[test]
fn a_walked_ring_delivers_a_raw_peers_packets_and_a_bad_frame_in_it_drops_the_peer() {
    let (a, s, offered) = ring_giver("walked-bad-frame", WALKED);
    // 100 packets of ~4 KiB: the 128 KiB ring wraps three times.
    let packets: Vec<Vec<u8>> = (0..100)
        .map(|i| {
            let mut p = numbered(i);
            p.resize(4000 + i as usize, i as u8);
            p
        })
        .collect();
    for p in &packets {
        put(&offered, &Frame::Packet(p.clone()).to_bytes().unwrap());
    }
    assert!(a.packets(packets.len()) == packets, "in order, intact");
    // A frame of no known type: the peer is dropped, counted once.
    put(&offered, &[0, 0, 0, 1, 99, 0]);
    let reason = a.expect_down();
    assert!(reason.contains("bad frame"), "{reason}");
    let stats = a.link.stats();
    assert_eq!((stats.rx_rings, stats.rx_bad_frames), (1, 1));
    drop(offered);
    assert_dropped(s);
}

#[test]
fn a_peer_whose_walked_ring_claims_more_than_it_holds_is_dropped() {
    let (a, s, offered) = ring_giver("walked-corrupt", WALKED);
    put(&offered, &Frame::Packet(numbered(1)).to_bytes().unwrap());
    assert_eq!(a.packets(1), [numbered(1)]);
    // A head more than a ring ahead of what the link freed.
    offered.scribble_head(5 * WALKED);
    let reason = a.expect_down();
    assert!(reason.contains("indices"), "{reason}");
    assert_eq!(a.link.stats().rx_bad_frames, 1);
    drop(offered);
    assert_dropped(s);
}

#[test]
fn a_peer_that_hangs_up_mid_frame_in_its_walked_ring_is_seen_to_go() {
    let (a, s, offered) = ring_giver("walked-mid-frame", WALKED);
    let frame = Frame::Packet(numbered(3)).to_bytes().unwrap();
    put(&offered, &frame[..frame.len() / 2]);
    drop(offered);
    drop(s);
    let reason = a.expect_down();
    assert!(reason.contains("mid-frame"), "{reason}");
    assert_eq!(a.link.stats().rx_bad_frames, 0, "not a bad frame: gone");
}

fn count(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

#[test]
fn a_write_to_a_sleeping_reader_counts_one_wake_and_to_an_awake_one_none() {
    bounded(|| {
        let counters = Arc::<Counters>::default();
        let (tx, mut rx, _ours, theirs) = offered_counting(4096, Arc::clone(&counters));
        // The reader has not looked yet, so it is awake: the write wakes
        // nobody, and the reader finds the bytes without sleeping.
        assert_eq!(tx.try_send(&[IoSlice::new(b"one")]).unwrap(), 3);
        let mut out = [0u8; 8];
        assert_eq!(rx.recv(&theirs, &mut out).unwrap(), 3);
        assert_eq!(count(&counters.ring_wakes_tx), 0);
        assert_eq!(count(&counters.ring_sleeps_rx), 0);
        // On the empty ring it goes to sleep, counted once...
        let reader = std::thread::spawn(move || {
            let n = rx.recv(&theirs, &mut out).unwrap();
            out[..n].to_vec()
        });
        wait_until("the reader to sleep", || {
            count(&counters.ring_sleeps_rx) == 1
        });
        assert!(tx.reader_asleep());
        // ... and the next write wakes it, counted once.
        assert_eq!(tx.try_send(&[IoSlice::new(b"two")]).unwrap(), 3);
        assert_eq!(count(&counters.ring_wakes_tx), 1);
        assert_eq!(reader.join().unwrap(), b"two");
        // Awake again (nobody reads now, but the mark is cleared): a write
        // wakes nobody.
        assert!(!tx.reader_asleep());
        assert_eq!(tx.try_send(&[IoSlice::new(b"three")]).unwrap(), 5);
        assert_eq!(count(&counters.ring_wakes_tx), 1);
        assert_eq!(count(&counters.ring_sleeps_rx), 1);
    });
}

#[test]
fn a_link_counts_its_ring_readers_sleeps_and_its_wake_ups_of_the_peers_reader() {
    let (a, s) = ring_taker("counted", LinkConfig::default());
    // The raw peer reads the link's ring and offers its own (its ends
    // count into `peer`).
    let peer = Arc::<Counters>::default();
    let (capacity, fds) = read_offer(&as_link(&s));
    let rx = pipe::accept(capacity, fds, crate::RX_SPIN, Arc::clone(&peer)).unwrap();
    let frames = ring_frames(rx, &s);
    let offered = pipe::offer(&as_link(&s), WALKED, Arc::clone(&peer)).unwrap();

    // The link's reader sleeps on the peer's empty ring: in its stats. The
    // peer's next write wakes it, once; then it sleeps again.
    wait_until("the link's reader to sleep", || {
        a.link.stats().ring_sleeps_rx >= 1 && offered.reader_asleep()
    });
    let sleeps = a.link.stats().ring_sleeps_rx;
    put(
        &offered,
        &Frame::Credit { vl: 0, credits: 1 }.to_bytes().unwrap(),
    );
    assert_eq!(count(&peer.ring_wakes_tx), 1);
    wait_until("the link's reader to sleep again", || {
        a.link.stats().ring_sleeps_rx > sleeps
    });

    // The peer's reader sleeps on the link's ring; the link's next packet
    // (sent with the credit above) finds it asleep, or an earlier frame
    // after its mark did: either way the link counts a wake-up.
    wait_until("the peer's reader to sleep", || {
        count(&peer.ring_sleeps_rx) >= 1
    });
    a.send_all([vec![7; 300]]);
    loop {
        match frames.recv_timeout(PATIENCE).expect("a packet in the ring") {
            Frame::Packet(p) => break assert_eq!(p, vec![7; 300]),
            Frame::Credit { .. } => {}
            other => panic!("unexpected frame in the ring: {other:?}"),
        }
    }
    assert!(a.link.stats().ring_wakes_tx >= 1, "{:?}", a.link.stats());
    drop(offered);
    drop(s);
}
