//! The shared-ring pipes (`pipe.rs`) on a socket pair: the offer and its
//! files, waiting for data and for room, hang-ups, and offers a careful
//! reader must refuse.

use std::io::{ErrorKind, IoSlice, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;

use crate::socket::LinkSocket;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ibtca_protocol::link::{Frame, FRAME_HEADER_LEN};

use super::{bounded, PATIENCE};
use crate::pipe::{self, RingRx, RxPipe, TxPipe};
use crate::stats::Counters;

/// Two ends of a Unix stream connection.
fn socket_pair() -> (LinkSocket, LinkSocket) {
    let (a, b) = UnixStream::pair().unwrap();
    (LinkSocket::unix(a), LinkSocket::unix(b))
}

/// A ring offered on one end of a socket pair and accepted on the other
/// (the files read off the socket as a session reads them).
fn offered(capacity: u64) -> (Arc<TxPipe>, RingRx, LinkSocket, LinkSocket) {
    offered_counting(capacity, Arc::default())
}

/// [`offered`], both ends counting into `counters` (the writer its
/// wake-ups, the reader its sleeps).
pub(super) fn offered_counting(
    capacity: u64,
    counters: Arc<Counters>,
) -> (Arc<TxPipe>, RingRx, LinkSocket, LinkSocket) {
    let (ours, theirs) = socket_pair();
    theirs.set_read_timeout(Some(PATIENCE)).unwrap();
    let tx = pipe::offer(&ours, capacity, Arc::clone(&counters)).unwrap();
    let (capacity, fds) = read_offer(&theirs);
    let rx = pipe::accept(capacity, fds, crate::RX_SPIN, counters).unwrap();
    (Arc::new(tx), rx, ours, theirs)
}

/// Reads one `RingOffer` frame and its files off `socket`.
pub(super) fn read_offer(socket: &LinkSocket) -> (u64, Vec<OwnedFd>) {
    let mut input = RxPipe::default();
    let mut buf = [0u8; FRAME_HEADER_LEN + 8];
    let mut got = 0;
    while got < buf.len() {
        let n = input.recv(socket, &mut buf[got..]).unwrap();
        assert!(n > 0, "socket closed before the RingOffer");
        got += n;
    }
    let Ok((Frame::RingOffer { capacity }, _)) = Frame::decode(&buf, 64) else {
        panic!("not a RingOffer: {buf:?}");
    };
    (capacity, input.take_fds())
}

fn stream_byte(i: usize) -> u8 {
    (i % 253) as u8
}

#[test]
fn a_stream_larger_than_the_ring_arrives_intact_while_both_ends_wait_in_turn() {
    bounded(|| {
        let (tx, mut rx, _ours, theirs) = offered(4096);
        const TOTAL: usize = 3 << 20;
        let writer = thread::spawn(move || {
            let data: Vec<u8> = (0..TOTAL).map(stream_byte).collect();
            let mut at = 0;
            while at < TOTAL {
                // Uneven slices, some larger than the ring: `send` waits for room.
                let end = (at + 1 + at % 9000).min(TOTAL);
                let (a, b) = data[at..end].split_at((end - at) / 2);
                at += tx.send(&[IoSlice::new(a), IoSlice::new(b)]).unwrap();
            }
        });
        let mut out = vec![0u8; 6000];
        let mut got = 0;
        while got < TOTAL {
            // Slow down now and then so the writer finds the ring full.
            if got % 7 == 0 {
                thread::sleep(Duration::from_micros(200));
            }
            let n = rx.recv(&theirs, &mut out).unwrap();
            assert!(n > 0, "the writer is still there");
            for (i, b) in out[..n].iter().enumerate() {
                assert_eq!(*b, stream_byte(got + i), "byte {}", got + i);
            }
            got += n;
        }
        writer.join().unwrap();
    });
}

#[test]
fn a_sleeping_reader_is_woken_by_data_and_sees_the_hang_up_after_the_last_byte() {
    bounded(|| {
        let (tx, mut rx, ours, theirs) = offered(4096);
        let writer = thread::spawn(move || {
            // Long enough for the reader to be asleep on the eventfd.
            thread::sleep(Duration::from_millis(50));
            assert_eq!(tx.try_send(&[IoSlice::new(b"late")]).unwrap(), 4);
            thread::sleep(Duration::from_millis(50));
            assert_eq!(tx.try_send(&[IoSlice::new(b"last")]).unwrap(), 4);
            drop(tx);
            drop(ours);
        });
        let mut out = [0u8; 16];
        let n = rx.recv(&theirs, &mut out).unwrap();
        assert_eq!(&out[..n], b"late");
        writer.join().unwrap();
        // The writer is gone, but what it wrote first still comes out.
        let n = rx.recv(&theirs, &mut out).unwrap();
        assert_eq!(&out[..n], b"last");
        assert_eq!(rx.recv(&theirs, &mut out).unwrap(), 0, "then the end");
    });
}

#[test]
fn a_writer_waiting_for_room_fails_when_the_peer_goes_or_the_link_shuts_down() {
    bounded(|| {
        for peer_goes in [true, false] {
            let (tx, rx, ours, theirs) = offered(4096);
            // Fill the ring: nothing more fits, without waiting.
            assert_eq!(tx.try_send(&[IoSlice::new(&[1u8; 5000])]).unwrap(), 4096);
            let e = tx.try_send(&[IoSlice::new(&[2u8; 1])]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock);
            let waiting = {
                let tx = tx.clone();
                thread::spawn(move || tx.send(&[IoSlice::new(&[3u8; 100])]))
            };
            thread::sleep(Duration::from_millis(50));
            assert!(!waiting.is_finished(), "the writer waits for room");
            if peer_goes {
                drop(rx);
                drop(theirs);
            } else {
                // What `Session` does when the link stops.
                tx.shutdown();
            }
            let e = waiting.join().unwrap().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe, "peer goes: {peer_goes}");
            drop(ours);
        }
    });
}

#[test]
fn bytes_on_the_socket_after_a_ring_offer_are_an_error() {
    bounded(|| {
        let (_tx, mut rx, ours, theirs) = offered(4096);
        (&ours).write_all(b"stray").unwrap();
        let e = rx.recv(&theirs, &mut [0u8; 16]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData);
    });
}

#[test]
fn offers_with_the_wrong_files_are_refused() {
    bounded(|| {
        // The peer's fault, every one of them, but for a mapping this
        // process cannot make.
        let accept = |capacity, fds: Vec<OwnedFd>| -> String {
            match pipe::accept(capacity, fds, crate::RX_SPIN, Default::default()) {
                Ok(_) => panic!("accepted"),
                Err(pipe::AcceptError::Peer(e)) => e,
                Err(pipe::AcceptError::Local(e)) => format!("local: {e}"),
            }
        };
        let files = || {
            let (ours, theirs) = socket_pair();
            pipe::offer(&ours, 4096, Default::default()).unwrap();
            read_offer(&theirs).1
        };
        // A good offer, but the frame claims another size.
        let e = accept(8192, files());
        assert!(e.contains("4096") && !e.starts_with("local"), "{e}");
        // Too few files.
        let mut two = files();
        two.pop();
        assert!(accept(4096, two).contains("files"));
        // The right sizes in a memfd whose size is not sealed, for the
        // control page and for the data.
        for part in [0, 1] {
            let mut unsealed = files();
            unsealed[part] = crate::memfd::create("ibtca-test", 4096).unwrap().into();
            assert!(accept(4096, unsealed).contains("sealed"), "file {part}");
        }
        // The control and the data swapped: the data file, sealed against
        // writes, cannot be mapped as the control page both ends write.
        let mut swapped = files();
        swapped.swap(0, 1);
        let e = accept(4096, swapped);
        assert!(e.starts_with("local: ") && e.contains("mmap"), "{e}");
        // A pipe where an eventfd belongs.
        for part in [2, 3] {
            let mut piped = files();
            let (r, _w) = std::io::pipe().unwrap();
            piped[part] = r.into();
            assert!(accept(4096, piped).contains("eventfd"), "file {part}");
        }
    });
}

#[test]
fn a_socket_that_brings_more_files_than_an_offer_is_an_error() {
    bounded(|| {
        use vmm_sys_util::sock_ctrl_msg::ScmSocket;
        let (ours, theirs) = socket_pair();
        let f: Vec<std::fs::File> = (0..5)
            .map(|_| crate::memfd::create("ibtca-test", 1).unwrap())
            .collect();
        let raw: Vec<_> = f.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
        // Two sends of files: the second pushes past what an offer holds.
        ours.send_with_fds(&[&b"ab"[..]], &raw[..2]).unwrap();
        ours.send_with_fds(&[&b"cd"[..]], &raw[2..]).unwrap();
        let mut input = RxPipe::default();
        let mut buf = [0u8; 8];
        let first = input.recv(&theirs, &mut buf);
        let second = first.and_then(|_| input.recv(&theirs, &mut buf));
        assert_eq!(second.unwrap_err().kind(), ErrorKind::InvalidData);
        assert!(input.take_fds().is_empty(), "the files are closed");
    });
}

#[test]
fn a_writer_out_of_room_wakes_a_reader_asleep_over_bytes_built_in_place() {
    bounded(|| {
        // Smaller than a wake-up's worth: filled in place, all of it is
        // published mid-burst without the reader being woken.
        const CAPACITY: u64 = pipe::WAKE_BATCH / 2;
        let (tx, mut rx, _ours, theirs) = offered(CAPACITY);
        let reader = thread::spawn(move || {
            let mut out = vec![0u8; 64 * 1024];
            let mut got = 0;
            while got <= CAPACITY as usize {
                let n = rx.recv(&theirs, &mut out).unwrap();
                assert!(n > 0, "the writer is still there");
                for (i, b) in out[..n].iter().enumerate() {
                    assert_eq!(*b, stream_byte(got + i), "byte {}", got + i);
                }
                got += n;
            }
            got
        });
        super::wait_until("the reader sleeps", || tx.reader_asleep());
        let TxPipe::Ring(ring) = &*tx else {
            unreachable!("offered a ring")
        };
        const PIECE: usize = 4096;
        for piece in 0..CAPACITY as usize / PIECE {
            let built = ring.build_in_place(PIECE, |out| {
                for (i, b) in out.iter_mut().enumerate() {
                    *b = stream_byte(piece * PIECE + i);
                }
                true
            });
            assert_eq!(built.unwrap(), Some(true), "piece {piece}");
        }
        // The ring is full: this waits for room, which only the reader
        // can make, so the writer must wake it first.
        let last = [stream_byte(CAPACITY as usize)];
        assert_eq!(tx.send(&[IoSlice::new(&last)]).unwrap(), 1);
        assert_eq!(reader.join().unwrap(), CAPACITY as usize + 1);
    });
}
