//! Packets built straight into the shared ring (`Link::send_in_place`):
//! they arrive byte for byte and in order with queued ones, an abandoned
//! build sends nothing, and nothing is built past what must go first.

use super::*;
use crate::FaultPlan;
use ibtca_protocol::encoded;

/// Builds a copy of `packet` in place, if the link can take it so now.
fn in_place(link: &Link, packet: &[u8]) -> Option<bool> {
    link.send_in_place(packet.len(), encoded::vl(packet).unwrap_or(0), &mut |out| {
        out.copy_from_slice(packet);
        true
    })
}

/// Right after `Up` (or a wake-up of its own) the writer thread may still
/// be on its way to sleep: waits until `packet` can be built in place.
fn first_in_place(link: &Link, packet: &[u8]) {
    wait_until("the link builds a packet in place", || {
        in_place(link, packet) == Some(true)
    });
}

#[test]
fn packets_built_in_place_arrive_intact_and_in_order_with_queued_ones() {
    let (a, b, _) = pair("in-place");
    first_in_place(&a.link, &numbered(0));
    // Given up half way: not a byte of it is sent.
    let abandoned = a.link.send_in_place(100, 0, &mut |out| {
        out.fill(0xee);
        false
    });
    assert_eq!(abandoned, Some(false));
    const N: u32 = 600;
    let mut built = 1;
    for i in 1..N {
        let p = numbered(i);
        // Every fifth goes through the queue; the next ones must not pass
        // it (it is written at once, the writer being idle).
        if i % 5 == 0 {
            a.send_all([p]);
            continue;
        }
        match in_place(&a.link, &p) {
            Some(true) => built += 1,
            Some(false) => unreachable!("the build never gives up"),
            // Out of credit or room for now: queued like any packet.
            None => a.send_all([p]),
        }
    }
    a.link.publish();
    assert!(
        b.packets(N as usize).into_iter().eq((0..N).map(numbered)),
        "every packet once, in order, byte for byte"
    );
    let s = a.link.stats();
    assert_eq!((s.tx_packets, s.tx_built_in_place), (u64::from(N), built));
    assert!(built > 1);
}

#[test]
fn nothing_is_built_in_place_without_a_ring_credit_or_a_clear_queue() {
    // No ring: A writes its frames to the socket.
    let path = socket_path("in-place-socket");
    let no_ring = LinkConfig {
        shared_ring: 0,
        ..LinkConfig::default()
    };
    let a = start_with(LinkEndpoint::Listen(path.clone()), port(1), no_ring);
    let b = start(LinkEndpoint::Connect(path), port(2));
    a.expect_up();
    b.expect_up();
    a.send_all([numbered(1)]);
    assert_eq!(b.packets(1), [numbered(1)]);
    assert_eq!(in_place(&a.link, &numbered(2)), None);

    // A ring, and B grants 3 buffers, freed only when told.
    let (a, b) = pair_lending("in-place-credits", 3);
    wait_until("A holds B's grant", || a.link.credits()[0] == 3);
    first_in_place(&a.link, &numbered(0));
    assert_eq!(in_place(&a.link, &numbered(1)), Some(true));
    assert_eq!(in_place(&a.link, &numbered(2)), Some(true));
    // Out of credit: not built; queued, it waits for the credit.
    assert_eq!(in_place(&a.link, &numbered(3)), None);
    a.send_all([numbered(3)]);
    // Something is queued ahead: nothing is built until it has gone.
    assert_eq!(in_place(&a.link, &numbered(4)), None);
    a.link.publish();
    assert_eq!(b.packets(3), [numbered(0), numbered(1), numbered(2)]);
    b.link.return_credits(0, 1);
    assert_eq!(b.packets(1), [numbered(3)]);
    b.link.return_credits(0, 3);
    first_in_place(&a.link, &numbered(4));
    // A fault plan sees every packet: none is built in place under one.
    a.link.set_faults(FaultPlan {
        drop: [1000].into(),
        ..FaultPlan::default()
    });
    assert_eq!(in_place(&a.link, &numbered(5)), None);
    a.link.publish();
    assert_eq!(b.packets(1), [numbered(4)]);
}

/// Packet `i` of `len` bytes (`len` ≥ 4), its first bytes its index.
fn sized(i: u32, len: usize) -> Vec<u8> {
    let mut p = numbered(i);
    p.resize(len, i as u8);
    p
}

/// Bytes of a packet whose frame is 4096 bytes long.
const FRAME_4K_BODY: usize = 4096 - ibtca_protocol::link::FRAME_HEADER_LEN;

#[test]
fn a_sleeping_reader_gets_a_burst_built_in_place_when_it_ends_or_grows_long() {
    use crate::pipe::{IN_PLACE_BATCH, WAKE_BATCH};
    let (a, b, _) = pair("in-place-wake");
    let packet = |i| sized(i, FRAME_4K_BODY);
    first_in_place(&a.link, &packet(0));
    a.link.publish();
    assert_eq!(b.packets(1), [packet(0)]);

    // The last of these publishes all of them mid-burst (without waking
    // B's reader); the burst's end, with nothing left to publish, must
    // still wake it.
    let per_publish = (IN_PLACE_BATCH / 4096) as u32;
    for i in 1..=per_publish {
        first_in_place(&a.link, &packet(i));
    }
    a.link.publish();
    assert!(b
        .packets(per_publish as usize)
        .into_iter()
        .eq((1..=per_publish).map(packet)));

    // A long burst reaches the reader every WAKE_BATCH bytes, before it
    // ends.
    let per_wake = (WAKE_BATCH / 4096) as u32;
    let first = per_publish + 1;
    let last = first + per_wake + per_publish;
    for i in first..last {
        first_in_place(&a.link, &packet(i));
    }
    assert!(b
        .packets(per_wake as usize)
        .into_iter()
        .eq((first..first + per_wake).map(packet)));
    a.link.publish();
    assert!(b
        .packets(per_publish as usize)
        .into_iter()
        .eq((first + per_wake..last).map(packet)));
}
