//! Fault injection: the injector alone, then end to end.

use super::*;
use crate::fault::FaultInjector;
use crate::queue::{Batch, TxQueue};
use crate::stats::Counters;
use crate::{FaultPlan, FaultRates};

fn plan() -> FaultPlan {
    FaultPlan::default()
        .drop(3)
        .duplicate(5)
        .swap_with_next(7)
        .corrupt(10, 0)
}

/// What a receiver must see when packets `numbered(0..20)` go through `plan()`.
fn expected() -> Vec<Vec<u8>> {
    let mut order: Vec<u32> = vec![0, 1, 2, 4, 5, 5, 6, 8, 7];
    order.extend(9..20);
    order
        .into_iter()
        .map(|i| {
            let mut p = numbered(i);
            if i == 10 {
                // Byte 0: the LVer nibble, not the VL.
                p[0] ^= 0x0f;
            }
            p
        })
        .collect()
}

fn run(injector: &mut FaultInjector, counters: &Counters, n: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..n {
        injector.apply(numbered(i), counters, |p| out.push(p));
    }
    out
}

#[test]
fn deterministic_rules() {
    let counters = Counters::default();
    let mut injector = FaultInjector::new(plan());
    assert!(run(&mut injector, &counters, 20) == expected());
    let s = counters.snapshot();
    assert_eq!(
        (
            s.fault_dropped,
            s.fault_duplicated,
            s.fault_reordered,
            s.fault_corrupted
        ),
        (1, 1, 1, 1)
    );
}

#[test]
fn corrupt_offset_wraps_and_empty_packets_survive() {
    let counters = Counters::default();
    let mut injector = FaultInjector::new(FaultPlan::default().corrupt(0, 5).corrupt(1, 0));
    let mut out = Vec::new();
    injector.apply(vec![0; 4], &counters, |p| out.push(p));
    injector.apply(Vec::new(), &counters, |p| out.push(p));
    assert_eq!(out, vec![vec![0, 0xff, 0, 0], vec![]]);
    assert_eq!(counters.snapshot().fault_corrupted, 1);
}

#[test]
fn random_rates_are_seeded_and_roughly_right() {
    let rates = FaultRates {
        drop: 100,
        duplicate: 100,
        reorder: 100,
        corrupt: 100,
        seed: 42,
    };
    let plan = FaultPlan::default().with_rates(rates);
    let (c1, c2) = (Counters::default(), Counters::default());
    let one = run(&mut FaultInjector::new(plan.clone()), &c1, 10_000);
    let two = run(&mut FaultInjector::new(plan), &c2, 10_000);
    assert!(one == two, "same seed, same faults");
    let s = c1.snapshot();
    for (what, n) in [
        ("dropped", s.fault_dropped),
        ("duplicated", s.fault_duplicated),
        ("reordered", s.fault_reordered),
        ("corrupted", s.fault_corrupted),
    ] {
        // About 10 % of the (non-dropped) packets.
        assert!((600..=1300).contains(&n), "{what}: {n}");
    }
    let other = FaultPlan::default().with_rates(FaultRates { seed: 43, ..rates });
    let three = run(&mut FaultInjector::new(other), &Counters::default(), 10_000);
    assert!(one != three, "another seed, other faults");

    let all = FaultPlan::default().with_rates(FaultRates {
        drop: 1000,
        ..FaultRates::default()
    });
    assert!(run(&mut FaultInjector::new(all), &Counters::default(), 100).is_empty());
}

#[test]
fn replacing_the_plan_releases_a_held_packet() {
    let counters = Counters::default();
    let q = TxQueue::new(16);
    q.open(None);
    q.set_faults(FaultPlan::default().swap_with_next(0), &counters);
    q.send(vec![1], &counters).unwrap();
    let mut batch = Batch::default();
    q.set_faults(FaultPlan::default(), &counters);
    assert!(q.take_batch(&mut batch));
    assert_eq!(batch.decode(), [vec![1]]);
}

#[test]
fn plan_applies_end_to_end() {
    let (a, b, _path) = pair("faults");
    b.link.set_faults(plan());
    b.send_all((0..20).map(numbered));
    let want = expected();
    let got = a.packets(want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "packet {i} differs");
    }
    // Nothing more: a marker sent without faults is next.
    b.link.set_faults(FaultPlan::default());
    b.send_all([vec![0xee; 3]]);
    assert_eq!(a.packets(1), vec![vec![0xee; 3]]);
    let s = b.link.stats();
    assert_eq!(
        (
            s.fault_dropped,
            s.fault_duplicated,
            s.fault_reordered,
            s.fault_corrupted
        ),
        (1, 1, 1, 1)
    );
    // The writer counts after its write returns, maybe after delivery.
    wait_until("tx count", || b.link.stats().tx_packets == 21);
}
