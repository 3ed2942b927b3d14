//! What the reader hands a batched sink: the packets of each read, with
//! their CRCs when the config asks for them (`LinkConfig::rx_crcs`).

use ibtca_protocol::packet::ReceivedCrcs;
use ibtca_protocol::{Opcode, Packet, PacketView};

use super::*;
use crate::{LinkRx, PacketBatch};

/// A valid SEND packet with `len` payload bytes, PSN `psn`.
fn send_packet(psn: u32, len: usize) -> Vec<u8> {
    let mut p = Packet::new(Opcode::RcSendOnly);
    p.lrh.dlid = 0x20;
    p.lrh.slid = 0x10;
    p.bth.dest_qp = 5;
    p.bth.psn = psn;
    p.payload = vec![psn as u8; len];
    p.build().expect("build")
}

/// Sends `packets` from a plain link to one with a batched sink and the
/// given `rx_crcs`; returns the batches it got.
fn receive_batches(name: &str, rx_crcs: bool, packets: &[Vec<u8>]) -> Vec<PacketBatch> {
    let path = socket_path(name);
    let a = start(LinkEndpoint::Listen(path.clone()), port(1));
    let (tx, rx) = mpsc::channel();
    // On the socket: packets in a ring are not copied by the reader,
    // so it computes no CRCs for them (`in_ring` below).
    let config = LinkConfig {
        rx_crcs,
        shared_ring: 0,
        ..LinkConfig::default()
    };
    let _b = Link::start_batched(LinkEndpoint::Connect(path), port(2), config, move |ev| {
        let _ = tx.send(ev);
    })
    .expect("start batched link");
    a.expect_up();
    a.send_all(packets.iter().cloned());
    let mut batches = Vec::new();
    let mut got = 0;
    let deadline = Instant::now() + PATIENCE;
    while got < packets.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(LinkRx::Packets(b)) => {
                got += b.len();
                batches.push(b);
            }
            Ok(LinkRx::Event(_)) => {}
            Err(e) => panic!("{got} of {} packets arrived: {e}", packets.len()),
        }
    }
    batches
}

#[test]
fn the_reader_hands_over_each_packets_crcs_when_asked() {
    // Bulk packets (handed over in the receive buffer) and a corrupt one
    // in the middle: the CRCs are of the bytes as received, so the
    // engine's check still catches it.
    let mut packets: Vec<Vec<u8>> = (0..40).map(|psn| send_packet(psn, 4096)).collect();
    let last = packets[7].len() - 40;
    packets[7][last] ^= 0x10;
    let batches = receive_batches("rx-crcs", true, &packets);
    let mut seen = 0;
    for batch in &batches {
        assert!(!batch.in_ring());
        batch.for_each(|bytes, crcs| {
            assert_eq!(bytes, &packets[seen][..], "packet {seen} in order, intact");
            assert_eq!(
                crcs,
                Some(&ReceivedCrcs::of(bytes)),
                "packet {seen}'s own CRCs"
            );
            let parsed = PacketView::parse_with(bytes, crcs.unwrap());
            assert_eq!(parsed.is_err(), seen == 7, "packet {seen}: {parsed:?}");
            seen += 1;
        });
    }
    assert_eq!(seen, packets.len());

    // Not asked: nothing is computed.
    let batches = receive_batches("no-rx-crcs", false, &packets[..4]);
    for b in &batches {
        b.for_each(|_, crcs| assert!(crcs.is_none()));
    }
}

#[test]
fn packets_in_the_peers_ring_are_handed_over_where_they_lie_and_come_out_intact() {
    // The smallest ring that holds the longest frame whole (128 KiB), and
    // some 700 KiB of packets of every length up to a 4 KiB MTU's: the
    // stream wraps the ring five times, with frames across the wrap, and
    // the sender waits for room the sink frees by dropping its batches.
    let path = socket_path("in-ring");
    let a = start_with(
        LinkEndpoint::Listen(path.clone()),
        port(1),
        LinkConfig {
            shared_ring: 128 * 1024,
            ..LinkConfig::default()
        },
    );
    let (tx, rx) = mpsc::channel();
    let b = Link::start_batched(
        LinkEndpoint::Connect(path),
        port(2),
        LinkConfig::default(),
        move |ev| {
            if let LinkRx::Packets(batch) = ev {
                // Copied out, and the batch (with its part of the ring)
                // dropped right away, as the engine does.
                let _ = tx.send((batch.in_ring(), batch.to_vecs()));
            }
        },
    )
    .expect("start batched link");
    a.expect_up();
    let packets: Vec<Vec<u8>> = (0..300u32)
        .map(|i| send_packet(i, (i as usize * 997) % 4097))
        .collect();
    a.send_all(packets.iter().cloned());
    let mut got = Vec::new();
    let mut in_ring = 0;
    while got.len() < packets.len() {
        let (ring, batch) = rx
            .recv_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("{} of {} packets: {e}", got.len(), packets.len()));
        in_ring += usize::from(ring);
        got.extend(batch);
    }
    assert!(got == packets, "every packet once, in order, intact");
    assert!(in_ring > 0, "batches were handed over in the ring");
    let stats = b.stats();
    assert_eq!((stats.rx_rings, stats.rx_bad_frames), (1, 0));
    // Each intact packet still parses (CRCs of the copy, not the ring).
    assert!(got.iter().all(|p| PacketView::parse(p).is_ok()));
}
