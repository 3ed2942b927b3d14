//! DRDMA (seed 000) between device instances (two back to back, or three on
//! a switch), each driven through vfio-user by a simulated guest: guest
//! stores into a window range become an
//! RDMA WRITE into the other guest's memory; RDMA READ responses become
//! loads from a range. ARR bits, PMB mapping, packet counts and every refusal
//! are checked through the registers the driver reads.

use std::time::Duration;

use ibtca_device::drdma::DrdmaConfig;
use ibtca_device::link::FaultPlan;
use ibtca_device::regs::{self, *};
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::*;
use ibtca_tests::pair::{LinkedPair, PairOptions};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{remote, send_wqe};

const T: Duration = Duration::from_secs(20);
const W: u32 = ARR_TYPE_WRITE;
const P: u32 = ARR_PCI_VALID;
const B: u32 = ARR_BR_VALID;
const BUSY: u32 = ARR_BUSY;
const MTU_2048: u8 = 4;

fn pair_with(mtu: u8, drdma: DrdmaConfig) -> LinkedPair {
    let mut p = LinkedPair::start(PairOptions {
        drdma,
        ..Default::default()
    });
    p.connect(mtu);
    p
}

fn pair(mtu: u8) -> LinkedPair {
    pair_with(mtu, DrdmaConfig::default())
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// Compares byte vectors, reporting the first difference instead of both
/// vectors.
#[track_caller]
fn same(got: &[u8], want: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!(
            "{what}: first difference at byte {i}: got {:#04x}, want {:#04x}",
            got[i], want[i]
        );
    }
}

fn tx_packets(s: &ibtca_tests::TestServer) -> u64 {
    s.link.as_ref().expect("linked").stats().tx_packets
}

/// Seed T1/T2: 4096 bytes stored into range 2 go out as RDMA WRITE FIRST +
/// LAST at MTU 2048, land in B, complete after B's ACK, and the ARR goes
/// PCI V → BR V → free.
#[test]
fn drdma_write_at_mtu_2048_is_two_packets_into_the_peer() {
    let mut p = pair(MTU_2048);
    let data = pattern(4096, 3);
    let raddr = p.b.buf + 8192;
    submit(&mut p.a.g, 2, true, 4096, None);
    assert_eq!(arr_bits(&mut p.a.g, 2), W | P | BUSY, "Type=WRITE, PCI V");
    assert_eq!(arr_reg(&mut p.a.g, 2, ARR_TTL), 4096);
    let w = direct_wqe(WR_DRDMA_WRITE, 77, 2, 4096, raddr, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    let tx0 = tx_packets(&p.sa);
    // All but the last 8 bytes: still filling, nothing sent.
    store_mixed(&mut p.a.g, 2, &data[..4088], 11);
    assert_eq!(arr_reg(&mut p.a.g, 2, ARR_WBC), 4088);
    assert_eq!(arr_bits(&mut p.a.g, 2), W | P | BUSY);
    assert!(p.a.g.try_poll_cq(&mut p.a.cq).is_none());
    assert_eq!(tx_packets(&p.sa), tx0, "nothing leaves before WBC == TTL");
    store_burst(&mut p.a.g, 2, 4088, &data[4088..]);
    let c =
        p.a.g
            .poll_cq(&mut p.a.cq, T)
            .expect("DRDMA WRITE completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (77, WC_SUCCESS, WC_DRDMA_WRITE)
    );
    same(&p.b.g.read(raddr, 4096), &data, "bytes in B's memory");
    assert_eq!(p.b.g.read(raddr - 16, 16), vec![0; 16], "nothing before");
    assert_eq!(p.b.g.read(raddr + 4096, 16), vec![0; 16], "nothing after");
    assert_eq!(tx_packets(&p.sa) - tx0, 2, "FIRST + LAST at MTU 2048");
    assert_eq!(arr_bits(&mut p.a.g, 2), 0, "free after the completion");
    assert_eq!(errors(&mut p.a.g).0, 0);
}

/// Waits until A's window has taken `n` read responses in all.
fn wait_responses(p: &LinkedPair, n: u64) {
    let drdma = p.sa.drdma.as_ref().expect("A's window");
    let deadline = std::time::Instant::now() + T;
    while drdma.stats().responses < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {n} read responses reached A's window",
            drdma.stats().responses
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Seed T3 and Fig 22a: a 4096-byte DRDMA READ at MTU 256 takes 16
/// responses; each lands in the PMB only after the previous one was
/// loaded; loads return B's bytes; the completion is written only once the
/// guest has loaded the last byte, not when the last response arrives.
#[test]
fn drdma_read_of_16_responses_refills_the_range_one_by_one() {
    let mut p = pair(MTU_256);
    let data = pattern(4096, 9);
    let raddr = p.b.buf + 4096 * 3;
    p.b.g.write(raddr, &data);
    submit(&mut p.a.g, 5, false, 4096, None);
    assert_eq!(arr_bits(&mut p.a.g, 5), B | BUSY, "Type=READ, BR V");
    let tx0 = tx_packets(p.sb.as_ref().unwrap());
    let w = direct_wqe(WR_DRDMA_READ, 5, 5, 4096, raddr, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    wait_responses(&p, 16);
    assert_eq!(tx_packets(p.sb.as_ref().unwrap()) - tx0, 16, "16 responses");
    let mut got = Vec::new();
    for k in 0..16u32 {
        assert_eq!(arr_bits(&mut p.a.g, 5), P | BUSY, "response {k} shown");
        assert_eq!(arr_reg(&mut p.a.g, 5, ARR_RRPL), 256);
        assert_eq!(arr_reg(&mut p.a.g, 5, ARR_RESP_OFFSET), k * 256);
        let len = if k == 15 { 255 } else { 256 };
        got.extend(load_mixed_at(&mut p, 5, u64::from(k) * 256, len, k));
        assert!(
            p.a.g.try_poll_cq(&mut p.a.cq).is_none(),
            "no completion while bytes of the range are not loaded (response {k})"
        );
    }
    assert_eq!(arr_bits(&mut p.a.g, 5), P | BUSY, "one byte left");
    got.extend(load(&mut p.a.g, 5, 4095, 1));
    let c =
        p.a.g
            .poll_cq(&mut p.a.cq, T)
            .expect("DRDMA READ completion after the last load");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (5, WC_SUCCESS, WC_DRDMA_READ)
    );
    same(&got, &data, "loads return B's bytes");
    assert_eq!(arr_bits(&mut p.a.g, 5), 0, "free after the last byte");
    assert_eq!(errors(&mut p.a.g).0, 0);
}

/// Send-queue order holds around the wait for the drain: an RDMA WRITE
/// posted behind a DRDMA READ is executed by the peer at once, but both
/// complete, in order, only once the READ's range is drained.
#[test]
fn work_behind_a_drdma_read_completes_after_its_drain() {
    let mut p = pair(MTU_4096);
    let data = pattern(1000, 4);
    p.b.g.write(p.b.buf, &data);
    let wdata = pattern(64, 8);
    p.a.g.write(p.a.buf, &wdata);
    submit(&mut p.a.g, 2, false, 1000, None);
    let r = direct_wqe(WR_DRDMA_READ, 1, 2, 1000, p.b.buf, p.b.rkey);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 2, p.a.buf, 64, p.a.lkey),
        p.b.buf + 8192,
        p.b.rkey,
    );
    p.a.g.post_send_batch(&mut p.a.qp, &[r, w]);
    wait_responses(&p, 1);
    let deadline = std::time::Instant::now() + T;
    while p.b.g.read(p.b.buf + 8192, 64) != wdata {
        assert!(std::time::Instant::now() < deadline, "the WRITE landed");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        p.a.g.try_poll_cq(&mut p.a.cq).is_none(),
        "neither completes before the READ's range is drained"
    );
    same(&load(&mut p.a.g, 2, 0, 1000), &data, "DRDMA READ bytes");
    for (id, op) in [(1, WC_DRDMA_READ), (2, WC_RDMA_WRITE)] {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("completion");
        assert_eq!(
            (c.wr_id.to_native(), c.status, c.opcode),
            (id, WC_SUCCESS, op)
        );
    }
    assert_eq!(arr_bits(&mut p.a.g, 2), 0, "free");
}

fn load_mixed_at(p: &mut LinkedPair, arr: u32, off: u64, len: u64, seed: u32) -> Vec<u8> {
    let mut rng = ibtca_tests::XorShift(u64::from(seed) * 7 + 1);
    let mut out = Vec::new();
    for (o, size) in mixed_accesses(len, &mut rng) {
        out.extend(load(&mut p.a.g, arr, off + o, size as u32));
    }
    out
}

/// A load that comes before its data is held until the data arrives (the
/// seed's PCI retry): the READ request is dropped on the link, so the data
/// comes only after the ACK timeout (PROMPT's 268 ms) resends it. The
/// load may wait 30 s for it: a hang guard, not a measurement.
#[test]
fn early_load_waits_for_its_data() {
    let mut p = LinkedPair::start(PairOptions {
        retry: Retry::PROMPT,
        ..Default::default()
    });
    p.connect(MTU_4096);
    let data = pattern(4096, 1);
    p.b.g.write(p.b.buf, &data);
    p.a.g.client.write32(0, DRDMA_LOAD_TIMEOUT_US, 30_000_000);
    submit(&mut p.a.g, 0, false, 4096, None);
    let link = p.sa.link.clone().unwrap();
    link.set_faults(FaultPlan::default().drop(0));
    p.a.g.post_send(
        &mut p.a.qp,
        &direct_wqe(WR_DRDMA_READ, 1, 0, 4096, p.b.buf, p.b.rkey),
    );
    let got = load(&mut p.a.g, 0, 0, 4096);
    same(&got, &data, "early load");
    assert_eq!(link.stats().fault_dropped, 1, "the request was dropped");
    let stats = p.sa.drdma.as_ref().unwrap().stats();
    assert_eq!(stats.loads_waited, 1, "the load was held");
    assert_eq!(errors(&mut p.a.g).0, 0);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_READ));
}

/// A load whose data never comes returns all-ones after
/// DRDMA_LOAD_TIMEOUT_US and records the timeout.
#[test]
fn load_without_data_times_out_with_all_ones() {
    let mut p = pair(MTU_4096);
    p.a.g.client.write32(0, DRDMA_LOAD_TIMEOUT_US, 50_000);
    submit(&mut p.a.g, 7, false, 64, None);
    assert_eq!(load(&mut p.a.g, 7, 0, 8), vec![0xff; 8]);
    assert_eq!(
        errors(&mut p.a.g),
        (1, last_error(DRDMA_ERR_LOAD_TIMEOUT, 7))
    );
    assert_eq!(arr_bits(&mut p.a.g, 7), B | BUSY, "still awaiting its data");
}

/// Seed T4: refused stores and loads write nothing, read all-ones, count an
/// error with its code and range, and never disturb another range that is
/// being filled at the same time.
#[test]
fn refusals_count_and_leave_other_ranges_alone() {
    let mut p = pair_with(
        MTU_4096,
        DrdmaConfig {
            ranges: 20,
            ..Default::default()
        },
    );
    let g = &mut p.a.g;
    let data = pattern(1024, 5);
    // Range 3 is filling while the refusals happen.
    submit(g, 3, true, 1024, None);
    store_burst(g, 3, 0, &data[..512]);
    let mut n = 0;
    let mut refused = |g: &mut ibtca_tests::sim_guest::SimGuest, code: u32, arr: u32| {
        n += 1;
        assert_eq!(errors(g), (n, last_error(code, arr)), "refusal {n}");
    };
    // Store to / load from a free range.
    store_burst(g, 4, 0, &[1, 2, 3, 4]);
    refused(g, DRDMA_ERR_UNALLOCATED, 4);
    assert_eq!(load(g, 4, 0, 4), vec![0xff; 4]);
    refused(g, DRDMA_ERR_UNALLOCATED, 4);
    // Beyond the 20 ranges (still inside the 128 KiB BAR).
    store_burst(g, 25, 0, &[1]);
    refused(g, DRDMA_ERR_UNALLOCATED, 0xffff);
    // Past the Total Transfer Length.
    submit(g, 6, true, 100, None);
    store_burst(g, 6, 96, &[9; 8]);
    refused(g, DRDMA_ERR_PAST_LENGTH, 6);
    assert_eq!(arr_reg(g, 6, ARR_WBC), 0, "counted nothing");
    // A load from a WRITE range; a store into a READ range.
    assert_eq!(load(g, 6, 0, 4), vec![0xff; 4]);
    refused(g, DRDMA_ERR_STATE, 6);
    submit(g, 8, false, 256, None);
    store_burst(g, 8, 0, &[1; 8]);
    refused(g, DRDMA_ERR_STATE, 8);
    // Submit on a busy ARR, of length 0 or above the range, past the ranges.
    submit(g, 3, false, 64, None);
    refused(g, DRDMA_ERR_BUSY, 3);
    submit(g, 9, true, 0, None);
    refused(g, DRDMA_ERR_BAD_REQUEST, 9);
    submit(g, 9, true, 4097, None);
    refused(g, DRDMA_ERR_BAD_REQUEST, 9);
    submit(g, 20, true, 64, None);
    refused(g, DRDMA_ERR_BAD_REQUEST, 20);
    // A PMB that is taken, or not dedicated to DRDMA.
    let taken = arr_pmb(g, 3);
    submit(g, 9, true, 64, Some(taken));
    refused(g, DRDMA_ERR_NO_PMB, 9);
    submit(g, 9, true, 64, Some(60));
    refused(g, DRDMA_ERR_NO_PMB, 9);
    assert_eq!(arr_bits(g, 9), 0, "nothing allocated");
    // A commit on a trapped WRITE range: past the length, then within it
    // but of bytes never stored (drdma_isolation.rs has the rest).
    g.client.write32(0, DRDMA_COMMIT, 6 | (200 << 16));
    refused(g, DRDMA_ERR_PAST_LENGTH, 6);
    g.client.write32(0, DRDMA_COMMIT, 6 | (50 << 16));
    refused(g, DRDMA_ERR_UNSTORED, 6);
    // Range 3 is intact: finish it and send it.
    assert_eq!(arr_reg(g, 3, ARR_WBC), 512);
    store_burst(g, 3, 512, &data[512..]);
    let raddr = p.b.buf + 100;
    let w = direct_wqe(WR_DRDMA_WRITE, 3, 3, 1024, raddr, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_WRITE));
    same(&p.b.g.read(raddr, 1024), &data, "range 3");
}

/// Seed Figure 19b: ranges mapped to PMBs in any order (31 → 1, 2 → 31,
/// 1 → 0, 0 → 2), filled with interleaved stores, all correct.
#[test]
fn random_range_to_pmb_mapping() {
    let mut p = pair(MTU_2048);
    let map = [(31u32, 1u32), (2, 31), (1, 0), (0, 2)];
    for (arr, pmb) in map {
        submit(&mut p.a.g, arr, true, 4096, Some(pmb));
        assert_eq!(arr_pmb(&mut p.a.g, arr), pmb, "range {arr}");
    }
    let datas: Vec<Vec<u8>> = map.iter().map(|(a, _)| pattern(4096, *a as u8)).collect();
    // Interleave: 64 bytes of each range in turn.
    for chunk in 0..64 {
        for (i, (arr, _)) in map.iter().enumerate() {
            let off = chunk * 64;
            store_burst(&mut p.a.g, *arr, off as u64, &datas[i][off..off + 64]);
        }
    }
    for (i, (arr, _)) in map.iter().enumerate() {
        assert_eq!(arr_bits(&mut p.a.g, *arr), W | B | BUSY, "range {arr} full");
        let raddr = p.b.buf + 4096 * i as u64;
        let w = direct_wqe(WR_DRDMA_WRITE, i as u64, *arr, 4096, raddr, p.b.rkey);
        p.a.g.post_send(&mut p.a.qp, &w);
    }
    for _ in 0..map.len() {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
        assert_eq!(c.status, WC_SUCCESS);
    }
    for (i, d) in datas.iter().enumerate() {
        same(
            &p.b.g.read(p.b.buf + 4096 * i as u64, 4096),
            d,
            &format!("range {i}"),
        );
    }
}

/// Seed T5 (one remote node): all 32 ranges in flight at once, filled by
/// round-robin bursts, each to its own remote address; then every range is
/// reused for a READ of a different address, and again for a WRITE.
#[test]
fn all_32_ranges_in_flight_and_reused() {
    let mut p = LinkedPair::start(PairOptions {
        qp_log: 7,
        ..Default::default()
    });
    p.connect(3); // MTU 1024
    let datas: Vec<Vec<u8>> = (0..32).map(|a| pattern(4096, 100 + a as u8)).collect();
    for arr in 0..32 {
        submit(&mut p.a.g, arr, true, 4096, None);
        let raddr = p.b.buf + 4096 * u64::from(arr);
        let w = direct_wqe(WR_DRDMA_WRITE, u64::from(arr), arr, 4096, raddr, p.b.rkey);
        p.a.g.post_send(&mut p.a.qp, &w);
    }
    for chunk in 0..16 {
        for arr in 0..32u32 {
            let off = chunk * 256;
            let d = &datas[arr as usize][off..off + 256];
            store_burst(&mut p.a.g, arr, off as u64, d);
        }
    }
    let mut ids: Vec<u64> = (0..32)
        .map(|_| p.a.g.poll_cq(&mut p.a.cq, T).expect("completion"))
        .map(|c| {
            assert_eq!(c.status, WC_SUCCESS);
            c.wr_id.to_native()
        })
        .collect();
    assert_eq!(ids, (0..32).collect::<Vec<_>>(), "completions in SQ order");
    for arr in 0..32u32 {
        let got = p.b.g.read(p.b.buf + 4096 * u64::from(arr), 4096);
        same(&got, &datas[arr as usize], &format!("range {arr}"));
    }
    // Reuse every range to read a different (shifted) remote address.
    for arr in 0..32u32 {
        submit(&mut p.a.g, arr, false, 4096, None);
        let raddr = p.b.buf + 4096 * u64::from((arr + 1) % 32);
        let w = direct_wqe(
            WR_DRDMA_READ,
            100 + u64::from(arr),
            arr,
            4096,
            raddr,
            p.b.rkey,
        );
        p.a.g.post_send(&mut p.a.qp, &w);
    }
    for arr in 0..32u32 {
        let got = load(&mut p.a.g, arr, 0, 4096);
        same(
            &got,
            &datas[((arr + 1) % 32) as usize],
            &format!("read {arr}"),
        );
    }
    ids.clear();
    for _ in 0..32 {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("read completion");
        assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_READ));
        ids.push(c.wr_id.to_native());
    }
    assert_eq!(ids, (100..132).collect::<Vec<_>>());
    for arr in 0..32u32 {
        assert_eq!(arr_bits(&mut p.a.g, arr), 0, "range {arr} free");
    }
    assert_eq!(errors(&mut p.a.g).0, 0);
}

/// A DRDMA WRITE with a bad R_Key fails with a remote access error, writes
/// nothing, and frees its range with the FAILED bit; the range works again.
#[test]
fn bad_rkey_fails_and_frees_the_range() {
    let mut p = pair(MTU_4096);
    submit(&mut p.a.g, 1, true, 512, None);
    let w = direct_wqe(WR_DRDMA_WRITE, 1, 1, 512, p.b.buf, p.b.rkey ^ 0x100);
    p.a.g.post_send(&mut p.a.qp, &w);
    store_burst(&mut p.a.g, 1, 0, &[0xab; 512]);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!((c.status, c.opcode), (WC_REM_ACCESS_ERR, WC_DRDMA_WRITE));
    assert_eq!(p.b.g.read(p.b.buf, 512), vec![0; 512], "B unchanged");
    assert_eq!(arr_bits(&mut p.a.g, 1), ARR_FAILED, "free, marked failed");
}

/// A DRDMA WRITE naming a range submitted for READ cannot take its bytes:
/// local protection error; the READ range is untouched.
#[test]
fn direct_wqe_on_a_range_of_the_other_type_fails_locally() {
    let mut p = pair(MTU_4096);
    submit(&mut p.a.g, 4, false, 256, None);
    let w = direct_wqe(WR_DRDMA_WRITE, 4, 4, 256, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!((c.status, c.opcode), (WC_LOC_PROT_ERR, WC_DRDMA_WRITE));
    assert_eq!(arr_bits(&mut p.a.g, 4), B | BUSY, "READ range untouched");
    assert_eq!(p.b.g.read(p.b.buf, 256), vec![0; 256]);
    let _ = regs::DRDMA_MODE;
}

/// The mapped window: the region info offers the PMB pages as a sparse mmap
/// area with their file; stores into the mapping plus DRDMA_COMMIT become an
/// RDMA WRITE, and read responses appear in the mapping one at a time.
#[test]
fn mapped_window_write_and_read() {
    use vm_memory::{Bytes, GuestAddress};
    let mut p = pair_with(
        3, // MTU 1024
        DrdmaConfig {
            mapped: true,
            ..Default::default()
        },
    );
    let g = &mut p.a.g;
    assert_eq!(g.client.read32(0, DRDMA_MODE), DRDMA_MODE_MAPPED);
    // A 32-byte buffer learns the size it needs; no file yet.
    let (r, f) = g.client.region_info_fd(WINDOW, 32);
    let le32 = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let le64 = |b: &[u8], at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    assert!(f.is_none());
    assert_eq!(le32(&r, 0), 64, "argsz needed: info + one-area capability");
    assert_eq!(
        le32(&r, 12),
        32,
        "cap_offset already valid (QEMU checks it)"
    );
    assert_eq!(le32(&r, 4), 0xf, "READ|WRITE|MMAP|CAPS");
    let (r, f) = g.client.region_info_fd(WINDOW, 64);
    let file = f.expect("the PMB file comes with the full reply");
    assert_eq!(le32(&r, 12), 32, "cap_offset");
    assert_eq!(u16::from_le_bytes([r[32], r[33]]), 1, "SPARSE_MMAP");
    assert_eq!(le32(&r, 40), 1, "one area");
    assert_eq!((le64(&r, 48), le64(&r, 56)), (0, 32 * 4096));
    drop(file);
    let window = map_window(&mut p.a.g).expect("mappable window");
    // WRITE through range 3: stores go to memory, the commit counts them.
    let data = pattern(4096, 42);
    submit_flushed(&mut p.a.g, 3, true, 4096, None);
    let w = direct_wqe(WR_DRDMA_WRITE, 3, 3, 4096, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    window
        .write_slice(&data[..1000], GuestAddress(3 * 4096))
        .unwrap();
    p.a.g.client.write32(0, DRDMA_COMMIT, 3 | (1000 << 16));
    assert_eq!(arr_reg(&mut p.a.g, 3, ARR_WBC), 1000);
    window
        .write_slice(&data[1000..], GuestAddress(3 * 4096 + 1000))
        .unwrap();
    p.a.g.client.write32(0, DRDMA_COMMIT, 3 | (3096 << 16));
    let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_WRITE));
    same(&p.b.g.read(p.b.buf, 4096), &data, "mapped write");

    // READ into range 4: 4 responses at MTU 1024, each read from the mapping
    // where RESP_OFFSET/RRPL say, then committed.
    let rdata = pattern(4096, 77);
    p.b.g.write(p.b.buf + 8192, &rdata);
    submit(&mut p.a.g, 4, false, 4096, None);
    let w = direct_wqe(WR_DRDMA_READ, 4, 4, 4096, p.b.buf + 8192, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    wait_responses(&p, 4);
    let mut got = vec![0u8; 4096];
    for k in 0..4u32 {
        assert_eq!(arr_bits(&mut p.a.g, 4), P | BUSY, "response {k} shown");
        let off = arr_reg(&mut p.a.g, 4, ARR_RESP_OFFSET);
        let len = arr_reg(&mut p.a.g, 4, ARR_RRPL);
        assert_eq!((off, len), (k * 1024, 1024));
        let s = &mut got[off as usize..(off + len) as usize];
        window
            .read_slice(s, GuestAddress(4 * 4096 + u64::from(off)))
            .unwrap();
        // The mapped window: the driver's commit of the loaded count is
        // what the device sees of the loads.
        let last = if k == 3 { 1 } else { 0 };
        p.a.g
            .client
            .write32(0, DRDMA_COMMIT, 4 | ((len - last) << 16));
        assert!(
            p.a.g.try_poll_cq(&mut p.a.cq).is_none(),
            "no completion before the last byte is committed (response {k})"
        );
    }
    p.a.g.client.write32(0, DRDMA_COMMIT, 4 | (1 << 16));
    let c =
        p.a.g
            .poll_cq(&mut p.a.cq, T)
            .expect("completion after the commit");
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_READ));
    same(&got, &rdata, "mapped read");
    assert_eq!(arr_bits(&mut p.a.g, 4), 0, "free");
    assert_eq!(errors(&mut p.a.g).0, 0);
}

/// The window's file is the device's own memory: a client that tries to
/// shrink it (which would make the device's next access to a PMB fault with
/// SIGBUS) is refused by the file's seals, and the window keeps working.
#[test]
fn a_client_cannot_shrink_the_window_file() {
    use vm_memory::{Bytes, GuestAddress};
    let mut p = pair_with(
        MTU_2048,
        DrdmaConfig {
            mapped: true,
            ..Default::default()
        },
    );
    let (_, f) = p.a.g.client.region_info_fd(WINDOW, 64);
    let file = f.expect("the PMB file comes with the full reply");
    let len = file.metadata().unwrap().len();
    let err = file
        .set_len(0)
        .expect_err("shrinking the PMB file is sealed");
    assert_eq!(err.raw_os_error(), Some(libc::EPERM));
    assert!(file.set_len(len + 4096).is_err(), "growing is sealed too");
    assert_eq!(file.metadata().unwrap().len(), len);
    // A DRDMA WRITE through range 0 still lands.
    let window = map_window(&mut p.a.g).expect("mappable window");
    let data = pattern(4096, 9);
    submit_flushed(&mut p.a.g, 0, true, 4096, None);
    let w = direct_wqe(WR_DRDMA_WRITE, 0, 0, 4096, p.b.buf, p.b.rkey);
    p.a.g.post_send(&mut p.a.qp, &w);
    window.write_slice(&data, GuestAddress(0)).unwrap();
    p.a.g.client.write32(0, DRDMA_COMMIT, 4096 << 16);
    let c = p.a.g.poll_cq(&mut p.a.cq, T).unwrap();
    assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_WRITE));
    same(
        &p.b.g.read(p.b.buf, 4096),
        &data,
        "write after the refused shrink",
    );
}

/// DRDMA_SUBMIT_MASK and DRDMA_COMMIT_MASK: eight ranges submitted with one
/// register write, filled through the mapping, committed with one more; a
/// READ range in the commit mask is refused alone.
#[test]
fn mask_registers_submit_and_commit_many_ranges() {
    use vm_memory::{Bytes, GuestAddress};
    let mut p = pair_with(
        MTU_2048,
        DrdmaConfig {
            mapped: true,
            ..Default::default()
        },
    );
    let window = map_window(&mut p.a.g).expect("mappable window");
    let mask = 0b1111_1111u32 << 8; // ranges 8..16
    submit_mask(&mut p.a.g, 0, mask, true, 4096, false);
    submit(&mut p.a.g, 20, false, 64, None);
    for arr in 8..16 {
        assert_eq!(arr_bits(&mut p.a.g, arr), W | P | BUSY, "range {arr}");
    }
    assert_eq!(arr_bits(&mut p.a.g, 7), 0, "outside the mask");
    let datas: Vec<Vec<u8>> = (8..16).map(|a| pattern(4096, a as u8)).collect();
    let wqes: Vec<_> = (8..16u32)
        .map(|arr| {
            let raddr = p.b.buf + 4096 * u64::from(arr);
            direct_wqe(WR_DRDMA_WRITE, u64::from(arr), arr, 4096, raddr, p.b.rkey)
        })
        .collect();
    p.a.g.post_send_batch(&mut p.a.qp, &wqes);
    for (i, arr) in (8..16u32).enumerate() {
        let at = GuestAddress(u64::from(arr) * 4096);
        window.write_slice(&datas[i], at).unwrap();
    }
    // Commit ranges 8..16 and READ range 20 (refused) in one write.
    commit_mask(&mut p.a.g, 8, 0xff | (1 << 12), false);
    assert_eq!(
        errors(&mut p.a.g),
        (1, last_error(DRDMA_ERR_STATE, 20)),
        "the READ range is refused"
    );
    for _ in 8..16 {
        let c = p.a.g.poll_cq(&mut p.a.cq, T).expect("completion");
        assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_WRITE));
    }
    for (i, arr) in (8..16u32).enumerate() {
        let got = p.b.g.read(p.b.buf + 4096 * u64::from(arr), 4096);
        same(&got, &datas[i], &format!("range {arr}"));
    }
    assert_eq!(arr_bits(&mut p.a.g, 20), B | BUSY, "READ range untouched");
}

/// Seed T5 across a switch: all 32 ranges of node A in flight at once, 16 to
/// node B and 16 to node C at the same (overlapping) remote addresses; then
/// every range is reused for the other node, for READs; no cross-talk.
#[test]
fn all_32_ranges_to_two_remote_nodes_through_a_switch() {
    use ibtca_tests::fabric::{Fabric, FabricOptions};
    let mut f = Fabric::star(
        3,
        FabricOptions {
            qp_log: 7,
            mtu: MTU_2048,
            ..Default::default()
        },
    );
    let (lid_b, lid_c) = (f.nodes[1].lid, f.nodes[2].lid);
    let (rkey_b, buf_b) = (f.nodes[1].rkey, f.nodes[1].buf);
    let (rkey_c, buf_c) = (f.nodes[2].rkey, f.nodes[2].buf);
    assert_eq!(buf_b, buf_c, "the remote address spaces overlap");
    // Ranges 0..16 go to B, 16..32 to C; range n writes remote offset
    // (n % 16) * 4 KiB, so B and C see the same addresses.
    let data = |arr: u32, node: u8| pattern(4096, (arr as u8) ^ (node << 6));
    let a = &mut f.nodes[0];
    let mut qp_b = a.qps[&lid_b];
    let mut qp_c = a.qps[&lid_c];
    for arr in 0..32u32 {
        submit(&mut a.g, arr, true, 4096, None);
        let raddr = buf_b + 4096 * u64::from(arr % 16);
        let (qp, rkey) = if arr < 16 {
            (&mut qp_b, rkey_b)
        } else {
            (&mut qp_c, rkey_c)
        };
        let w = direct_wqe(WR_DRDMA_WRITE, u64::from(arr), arr, 4096, raddr, rkey);
        a.g.post_send(qp, &w);
    }
    // Interleaved 512-byte bursts over all ranges.
    for chunk in 0..8 {
        for arr in 0..32u32 {
            let node = if arr < 16 { 1 } else { 2 };
            let off = chunk * 512;
            store_burst(&mut a.g, arr, off as u64, &data(arr, node)[off..off + 512]);
        }
    }
    for _ in 0..32 {
        let c = a.g.poll_cq(&mut a.cq, T).expect("completion");
        assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_WRITE));
    }
    for (node, first) in [(1usize, 0u32), (2, 16)] {
        for arr in first..first + 16 {
            let got = f.nodes[node]
                .g
                .read(buf_b + 4096 * u64::from(arr % 16), 4096);
            same(
                &got,
                &data(arr, node as u8),
                &format!("node {node} range {arr}"),
            );
        }
    }
    // Reuse: each range now READs back what the other node holds.
    let a = &mut f.nodes[0];
    for arr in 0..32u32 {
        submit(&mut a.g, arr, false, 4096, None);
        let raddr = buf_b + 4096 * u64::from(arr % 16);
        let (qp, rkey) = if arr < 16 {
            (&mut qp_c, rkey_c)
        } else {
            (&mut qp_b, rkey_b)
        };
        let w = direct_wqe(WR_DRDMA_READ, 100 + u64::from(arr), arr, 4096, raddr, rkey);
        a.g.post_send(qp, &w);
    }
    for arr in 0..32u32 {
        let got = load(&mut a.g, arr, 0, 4096);
        // Range n < 16 reads C's copy of range n + 16, and vice versa.
        let (src, node) = if arr < 16 {
            (arr + 16, 2)
        } else {
            (arr - 16, 1)
        };
        same(&got, &data(src, node), &format!("read range {arr}"));
    }
    for _ in 0..32 {
        let c = a.g.poll_cq(&mut a.cq, T).expect("read completion");
        assert_eq!((c.status, c.opcode), (WC_SUCCESS, WC_DRDMA_READ));
    }
    for arr in 0..32u32 {
        assert_eq!(arr_bits(&mut a.g, arr), 0, "range {arr} free");
    }
    assert_eq!(errors(&mut a.g).0, 0);
}
