//! The send queue on its own, without threads.

use std::collections::VecDeque;

use crate::link::queue::{TxQueue, BATCH_BYTES, BATCH_PACKETS};
use crate::link::stats::Counters;
use crate::link::{LinkError, MAX_BODY};

#[test]
fn refuses_while_down_and_when_full() {
    let counters = Counters::default();
    let q = TxQueue::new(2);
    assert_eq!(q.send(vec![1], &counters), Err(LinkError::Down));
    q.open();
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
    q.open();
    let mut batch = VecDeque::new();
    for i in 0..BATCH_PACKETS + 10 {
        q.send(vec![i as u8; 8], &counters).unwrap();
    }
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.len(), BATCH_PACKETS);
    assert_eq!(batch.front(), Some(&vec![0; 8]));
    batch.clear();
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.len(), 10);
    batch.clear();

    for _ in 0..10 {
        q.send(vec![0; MAX_BODY], &counters).unwrap();
    }
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.len(), BATCH_BYTES.div_ceil(MAX_BODY));
    batch.clear();
    q.close(&counters);
    assert!(!q.take_batch(&mut batch), "the writer exits after close");
}
