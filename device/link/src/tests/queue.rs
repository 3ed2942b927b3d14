//! The send queue on its own, without threads.

use crate::queue::{Batch, TxQueue, BATCH_BYTES, BATCH_PACKETS};
use crate::stats::Counters;
use crate::{LinkError, MAX_BODY};

#[test]
fn refuses_while_down_and_when_full() {
    let counters = Counters::default();
    let q = TxQueue::new(2);
    assert_eq!(q.send(vec![1], &counters), Err(LinkError::Down));
    q.open(None);
    assert!(q.is_up());
    assert_eq!(q.send(vec![1], &counters), Ok(()));
    assert_eq!(q.send(vec![2], &counters), Ok(()));
    assert_eq!(q.send(vec![3], &counters), Err(LinkError::QueueFull));
    q.close(&counters);
    assert!(!q.is_up());
    let s = counters.snapshot();
    // One refused while down, two still queued at close.
    assert_eq!((s.tx_dropped_down, s.tx_dropped_full), (3, 1));
}

#[test]
fn batches_are_bounded_by_count_and_bytes() {
    let counters = Counters::default();
    let q = TxQueue::new(4096);
    q.open(None);
    let mut batch = Batch::default();
    for i in 0..BATCH_PACKETS + 10 {
        q.send(vec![i as u8; 8], &counters).unwrap();
    }
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.packets, BATCH_PACKETS);
    let packets = batch.decode();
    assert_eq!(packets.len(), BATCH_PACKETS);
    assert_eq!(packets.first(), Some(&vec![0; 8]));
    assert_eq!(packets.last(), Some(&vec![255; 8]));
    batch.clear();
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.packets, 10);
    assert_eq!(batch.decode().first(), Some(&vec![0; 8]), "packet 256");
    batch.clear();

    for _ in 0..10 {
        q.send(vec![0; MAX_BODY], &counters).unwrap();
    }
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.packets, BATCH_BYTES.div_ceil(MAX_BODY));
    assert_eq!(batch.decode().len(), batch.packets);
    batch.clear();
    q.close(&counters);
    assert!(!q.take_batch(&mut batch), "the writer exits after close");
}

#[test]
fn a_batch_is_written_directly_while_the_writer_sleeps() {
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    use ibtca_protocol::link::{Frame, FrameDecoder};

    let counters = Arc::new(Counters::default());
    let q = Arc::new(TxQueue::new(4096));
    let (ours, mut peer) = UnixStream::pair().unwrap();
    let pipe = Arc::new(crate::pipe::TxPipe::Socket(
        crate::socket::LinkSocket::unix(ours),
    ));
    q.open(Some(pipe.clone()));
    // A writer that sleeps in `take_batch`.
    let writer = {
        let (q, counters) = (q.clone(), counters.clone());
        std::thread::spawn(move || crate::queue::run_writer(&q, pipe, &counters))
    };
    while counters.snapshot().tx_writes == 0 {
        // Until the writer sleeps, a batch goes through it instead.
        q.send_batch([vec![0xee; 4]], &counters);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let before = counters.snapshot();
    let refused = q.send_batch((0..300u32).map(|i| i.to_be_bytes().to_vec()), &counters);
    assert_eq!(refused, 0);
    let after = counters.snapshot();
    assert_eq!(after.tx_packets - before.tx_packets, 300, "written at once");
    // The peer reads everything in order: the warm-up packets, then 0..300.
    let mut decoder = FrameDecoder::new(MAX_BODY);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < after.tx_packets as usize {
        let n = peer.read(&mut buf).unwrap();
        for f in decoder.feed(&buf[..n]) {
            let Ok(Frame::Packet(p)) = f else {
                panic!("{f:?}")
            };
            got.push(p);
        }
    }
    let numbered: Vec<Vec<u8>> = got.into_iter().filter(|p| p != &[0xee; 4]).collect();
    let want: Vec<Vec<u8>> = (0..300u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(numbered, want);
    // The framed packets' buffers come back, emptied, as far as asked.
    let mut spare = vec![Vec::new()];
    q.reclaim(&mut spare, 200);
    assert_eq!(spare.len(), 200);
    assert!(spare[1..].iter().all(|b| b.is_empty() && b.capacity() >= 4));
    q.reclaim(&mut spare, 100);
    assert_eq!(spare.len(), 200, "already past the limit");
    q.close(&counters);
    writer.join().unwrap();
}

/// A queue with flow control and a running writer on one end of a socket
/// pair; the other end, read with a decoder.
struct Wired {
    q: std::sync::Arc<TxQueue>,
    counters: std::sync::Arc<Counters>,
    peer: std::os::unix::net::UnixStream,
    decoder: ibtca_protocol::link::FrameDecoder,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Wired {
    fn new(flow: crate::FlowControl, on_done: Option<crate::DoneFn>) -> Self {
        use std::os::unix::net::UnixStream;
        use std::sync::Arc;
        let counters = Arc::new(Counters::default());
        let q = Arc::new(TxQueue::with(4096, Some(flow), on_done));
        let (ours, peer) = UnixStream::pair().unwrap();
        peer.set_read_timeout(Some(std::time::Duration::from_millis(200)))
            .unwrap();
        let pipe = Arc::new(crate::pipe::TxPipe::Socket(
            crate::socket::LinkSocket::unix(ours),
        ));
        q.open(Some(pipe.clone()));
        let writer = {
            let (q, counters) = (q.clone(), counters.clone());
            std::thread::spawn(move || crate::queue::run_writer(&q, pipe, &counters))
        };
        Wired {
            q,
            counters,
            peer,
            decoder: ibtca_protocol::link::FrameDecoder::new(MAX_BODY),
            writer: Some(writer),
        }
    }

    fn wait_asleep(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.q.writer_sleeps() {
            assert!(std::time::Instant::now() < deadline, "writer never slept");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Frames the peer can read now (until 200 ms of silence).
    fn read(&mut self) -> Vec<ibtca_protocol::link::Frame> {
        use std::io::Read;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = self.peer.read(&mut buf) {
            assert!(n > 0, "writer closed");
            got.extend(self.decoder.feed(&buf[..n]).map(Result::unwrap));
        }
        got
    }
}

impl Drop for Wired {
    fn drop(&mut self) {
        self.q.close(&self.counters);
        if let Some(w) = self.writer.take() {
            w.join().unwrap();
        }
    }
}

fn grant(vl: usize, n: u32) -> [u32; crate::NUM_VLS] {
    let mut g = [0; crate::NUM_VLS];
    g[vl] = n;
    g
}

/// Packet bodies of `frames`, as (VL, number).
fn packets(frames: &[ibtca_protocol::link::Frame]) -> Vec<(u8, u8)> {
    frames
        .iter()
        .filter_map(|f| match f {
            ibtca_protocol::link::Frame::Packet(p) => Some((p[0] >> 4, p[1])),
            _ => None,
        })
        .collect()
}

#[test]
fn direct_writes_stay_within_credits_in_arbitration_order() {
    use ibtca_protocol::link::Frame;
    let flow = crate::FlowControl {
        credits: 8,
        ..Default::default()
    };
    let mut w = Wired::new(flow, None);
    w.wait_asleep();
    // The whole receive buffer is granted to the peer first, VL15 (outside
    // flow control) not.
    let first = w.read();
    assert_eq!(first.len(), crate::NUM_VLS - 1);
    assert!(first.iter().all(|f| matches!(
        f,
        Frame::Credit {
            vl: 0..=14,
            credits: 8
        }
    )));
    // Credits: VL0 2, VL1 none; VL15 needs none.
    w.q.add_credits(&grant(0, 2), &w.counters);
    w.wait_asleep();
    let burst = [(0, 0), (1, 0), (0, 1), (15, 0), (0, 2), (15, 1)];
    let refused =
        w.q.send_batch(burst.map(|(vl, n)| vec![vl << 4, n]), &w.counters);
    assert_eq!(refused, 0);
    let s = w.counters.snapshot();
    assert_eq!(
        s.tx_packets, 4,
        "written at once, only what the credits allow (VL15 needs none)"
    );
    assert_eq!(packets(&w.read()), [(15, 0), (15, 1), (0, 0), (0, 1)]);
    assert_eq!(w.q.credits()[..2], [0, 0]);
    // A grant lets the stalled VLs go, each in order; still no writer
    // needed.
    w.wait_asleep();
    let mut more = grant(1, 1);
    more[0] = 1;
    w.q.add_credits(&more, &w.counters);
    assert_eq!(w.counters.snapshot().tx_packets, 6);
    // VL0 used VL1's turn while VL1 stalled; now VL1 has its turn first.
    assert_eq!(packets(&w.read()), [(1, 0), (0, 2)]);
}

#[test]
fn tagged_packets_written_directly_are_reported_by_the_writer() {
    use std::sync::{mpsc, Arc, Mutex};
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    let on_done: crate::DoneFn = Arc::new(move |tag| {
        let _ = tx.lock().unwrap().send(tag);
    });
    let mut w = Wired::new(crate::FlowControl::default(), Some(on_done));
    w.wait_asleep();
    w.read();
    // No credit yet: the tagged packets wait.
    for n in 0..3u8 {
        w.q.send_tagged(vec![2 << 4, n], Some(u64::from(n) + 100), &w.counters)
            .unwrap();
    }
    w.wait_asleep();
    assert!(rx.try_recv().is_err(), "nothing sent, nothing done");
    assert!(w.counters.snapshot().credit_stalls > 0);
    w.q.add_credits(&grant(2, 3), &w.counters);
    assert_eq!(w.counters.snapshot().tx_packets, 3, "written directly");
    let done: Vec<u64> = (0..3)
        .map(|_| rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap())
        .collect();
    assert_eq!(done, [100, 101, 102]);
    assert_eq!(packets(&w.read()), [(2, 0), (2, 1), (2, 2)]);
}

#[test]
fn returned_credits_are_written_directly() {
    use ibtca_protocol::link::Frame;
    let flow = crate::FlowControl {
        credits: 8,
        ..Default::default()
    };
    let mut w = Wired::new(flow, None);
    w.wait_asleep();
    w.read();
    let before = w.counters.snapshot().credit_frames_tx;
    // Below half the buffer: owed, not sent.
    w.q.return_credits(3, 3, &w.counters);
    assert_eq!(w.counters.snapshot().credit_frames_tx, before);
    w.q.return_credits(3, 1, &w.counters);
    assert_eq!(w.counters.snapshot().credit_frames_tx, before + 1);
    assert_eq!(w.read(), [Frame::Credit { vl: 3, credits: 4 }]);
}
