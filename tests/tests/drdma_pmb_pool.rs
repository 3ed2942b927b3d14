//! The PMB pool (seed 000, Fig 4 and Fig 17) between two devices: the
//! driver's DRDMA_PMB_DEDICATED register bounds how many direct transfers
//! run at once, and a submit that finds no dedicated PMB free falls back,
//! as the seed's CPU does, to a double-buffered transfer through guest
//! memory with an ordinary RDMA WRITE or READ
//! (`ibtca_tests::drdma::submit_or_bounce`). Every path is checked by the
//! bytes that land, the completions' opcodes and the window's registers.

use std::time::Duration;

use ibtca_device::drdma::DrdmaConfig;
use ibtca_device::regs::*;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::*;
use ibtca_tests::pair::{LinkedPair, PairOptions};

const T: Duration = Duration::from_secs(20);
const MTU_2048: u8 = 4;

fn pair(mapped: bool) -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions {
        drdma: DrdmaConfig {
            mapped,
            ..Default::default()
        },
        ..Default::default()
    });
    p.connect(MTU_2048);
    p
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed) ^ (i >> 7) as u8)
        .collect()
}

fn dedicated(p: &mut LinkedPair) -> u32 {
    p.a.g.client.read32(0, DRDMA_PMB_DEDICATED)
}

fn dedicate(p: &mut LinkedPair, n: u32) {
    p.a.g.client.write32(0, DRDMA_PMB_DEDICATED, n);
}

/// DRDMA_PMB_DEDICATED: written while every range is free it sets how
/// many PMBs direct transfers may hold (1..=DRDMA_PMBS); PMBs beyond it
/// cannot be named or taken; a write while a range is busy, or in the
/// mapped window (range n is PMB n for good), is refused and changes
/// nothing.
#[test]
fn dedication_register_bounds_the_direct_transfers() {
    let mut p = pair(false);
    let pmbs = p.a.g.client.read32(0, DRDMA_PMBS);
    assert_eq!((pmbs, dedicated(&mut p)), (64, 32), "the defaults");
    dedicate(&mut p, 2);
    assert_eq!(dedicated(&mut p), 2);
    submit(&mut p.a.g, 0, true, 64, None);
    submit(&mut p.a.g, 1, false, 64, None);
    let held = [arr_pmb(&mut p.a.g, 0), arr_pmb(&mut p.a.g, 1)];
    assert!(
        held.contains(&0) && held.contains(&1),
        "PMBs 0 and 1: {held:?}"
    );
    submit(&mut p.a.g, 2, true, 64, None);
    assert_eq!(arr_bits(&mut p.a.g, 2), 0, "no PMB: range 2 stays free");
    assert_eq!(errors(&mut p.a.g), (1, last_error(DRDMA_ERR_NO_PMB, 2)));
    // A busy range: the dedication cannot change under it.
    dedicate(&mut p, 8);
    assert_eq!(errors(&mut p.a.g), (2, last_error(DRDMA_ERR_BUSY, 0xffff)));
    assert_eq!(dedicated(&mut p), 2, "unchanged");
    // Finish both: range 0 by its WRITE, range 1 by its READ's loads.
    let data = pattern(64, 1);
    p.b.g.write(p.b.buf + 4096, &pattern(64, 2));
    let w = direct_wqe(WR_DRDMA_WRITE, 1, 0, 64, p.b.buf, p.b.rkey);
    let r = direct_wqe(WR_DRDMA_READ, 2, 1, 64, p.b.buf + 4096, p.b.rkey);
    p.a.g.post_send_batch(&mut p.a.qp, &[w, r]);
    store_burst(&mut p.a.g, 0, 0, &data);
    assert_eq!(load(&mut p.a.g, 1, 0, 64), pattern(64, 2));
    for id in [1, 2] {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("completion");
        assert_eq!((c.wr_id.to_native(), c.status), (id, WC_SUCCESS));
    }
    assert_eq!(p.b.g.read(p.b.buf, 64), data);
    // Every range free: the register takes new values, clamped.
    dedicate(&mut p, 1000);
    assert_eq!(dedicated(&mut p), 64, "at most DRDMA_PMBS");
    submit(&mut p.a.g, 2, true, 64, Some(63));
    assert_eq!(arr_pmb(&mut p.a.g, 2), 63, "PMB 63 is dedicated now");
    assert_eq!(errors(&mut p.a.g).0, 2, "no new refusal");
    // The mapped window refuses the register.
    let mut m = pair(true);
    dedicate(&mut m, 4);
    assert_eq!(dedicated(&mut m), 32, "mapped: one PMB per range, fixed");
    assert_eq!(errors(&mut m.a.g), (1, last_error(DRDMA_ERR_BUSY, 0xffff)));
}

/// Seed Fig 17/18a: with one PMB dedicated, the first transfer of each
/// direction goes through the window and the others fall back to ordinary
/// RDMA WRITEs and READs through a bounce buffer in guest memory; every
/// byte arrives either way, and each completion says which path it took.
#[test]
fn no_free_pmb_falls_back_to_a_double_buffered_transfer() {
    let mut p = pair(false);
    dedicate(&mut p, 1);
    // Three 4 KiB I/O reads (DRDMA WRITEs to B), submitted at once.
    let bounce = |k: u64| (p.a.buf + 4096 * k, p.a.lkey);
    let paths: Vec<DrdmaPath> = (0..3u32)
        .map(|k| submit_or_bounce(&mut p.a.g, k, true, 4096, bounce(u64::from(k))))
        .collect();
    assert_eq!(paths[0], DrdmaPath::Direct(0));
    assert!(matches!(paths[1], DrdmaPath::Bounce { .. }));
    assert!(matches!(paths[2], DrdmaPath::Bounce { .. }));
    assert_eq!(errors(&mut p.a.g), (2, last_error(DRDMA_ERR_NO_PMB, 2)));
    let datas: Vec<Vec<u8>> = (0..3).map(|k| pattern(4096, 10 + k)).collect();
    let wqes: Vec<SendWqe> = paths
        .iter()
        .enumerate()
        .map(|(k, &path)| {
            let raddr = p.b.buf + 4096 * k as u64;
            path_wqe(path, true, k as u64, 4096, raddr, p.b.rkey)
        })
        .collect();
    // The bounce buffers are filled before their WQEs are posted (the
    // seed's CPU posts the conventional WRITE after the I/O landed); the
    // window range after, as a controller bursting into it would.
    for k in [1, 2] {
        path_store(&mut p.a.g, paths[k], &datas[k], k as u64);
    }
    p.a.g.post_send_batch(&mut p.a.qp, &wqes);
    path_store(&mut p.a.g, paths[0], &datas[0], 7);
    for (k, op) in [(0, WC_DRDMA_WRITE), (1, WC_RDMA_WRITE), (2, WC_RDMA_WRITE)] {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("WRITE completion");
        assert_eq!(
            (c.wr_id.to_native(), c.status, c.opcode),
            (k, WC_SUCCESS, op)
        );
        let got = p.b.g.read(p.b.buf + 4096 * k, 4096);
        assert!(got == datas[k as usize], "transfer {k}: B's bytes");
    }
    assert_eq!(arr_bits(&mut p.a.g, 0), 0, "the direct range is free again");

    // Three 4 KiB I/O writes (DRDMA READs from B): one direct, two bounced.
    let paths: Vec<DrdmaPath> = (0..3u32)
        .map(|k| submit_or_bounce(&mut p.a.g, k, false, 4096, bounce(4 + u64::from(k))))
        .collect();
    assert_eq!(paths[0], DrdmaPath::Direct(0));
    assert!(paths[1..]
        .iter()
        .all(|q| matches!(q, DrdmaPath::Bounce { .. })));
    assert_eq!(errors(&mut p.a.g).0, 4);
    let wqes: Vec<SendWqe> = paths
        .iter()
        .enumerate()
        .map(|(k, &path)| {
            let raddr = p.b.buf + 4096 * ((k as u64 + 1) % 3);
            path_wqe(path, false, 10 + k as u64, 4096, raddr, p.b.rkey)
        })
        .collect();
    p.a.g.post_send_batch(&mut p.a.qp, &wqes);
    let direct = path_load(&mut p.a.g, paths[0], 4096, 3);
    assert!(direct == datas[1], "the direct READ's loads");
    for (k, op) in [(0, WC_DRDMA_READ), (1, WC_RDMA_READ), (2, WC_RDMA_READ)] {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("READ completion");
        assert_eq!(
            (c.wr_id.to_native(), c.status, c.opcode),
            (10 + k, WC_SUCCESS, op)
        );
    }
    for k in [1usize, 2] {
        let got = path_load(&mut p.a.g, paths[k], 4096, 0);
        assert!(got == datas[(k + 1) % 3], "bounced READ {k}");
    }
    assert_eq!(arr_bits(&mut p.a.g, 0), 0);
}
