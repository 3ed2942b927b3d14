//! The send queue on its own, without threads.

use crate::link::queue::{Batch, TxQueue, BATCH_BYTES, BATCH_PACKETS};
use crate::link::stats::Counters;
use crate::link::{LinkError, MAX_BODY};

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
    q.open(Some(ours.try_clone().unwrap()));
    // A writer that sleeps in `take_batch`.
    let writer = {
        let (q, counters) = (q.clone(), counters.clone());
        std::thread::spawn(move || crate::link::queue::run_writer(&q, ours, &counters))
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
    q.close(&counters);
    writer.join().unwrap();
}
