//! PMB isolation (docs/drdma-isolation.md): no byte of one DRDMA transfer
//! leaves in another, and nothing of one client's PMBs reaches the next
//! client. A hostile client drives BAR2 and the DRDMA registers directly
//! (not through the project's driver): it READs a peer's bytes through a
//! PMB, then reuses that PMB for a WRITE to a third node that it commits
//! without storing, or with one 8-byte store repeated 512 times; and a
//! client that connects after another has gone looks for the first one's
//! bytes in the window and tries to send them. The bytes that land at the
//! receiving node are what each test checks.

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use ibtca_device::drdma::{Drdma, DrdmaConfig};
use ibtca_device::instance::InstanceConfig;
use ibtca_device::regs::*;
use ibtca_device::verbs::abi::*;
use ibtca_tests::drdma::*;
use ibtca_tests::fabric::{Fabric, FabricOptions};
use ibtca_tests::pair::{LinkedPair, PairOptions, ALL_ACCESS};
use ibtca_tests::sim_guest::{Cq, SimGuest};
use ibtca_tests::{Client, TempDir, TestServer};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const T: Duration = Duration::from_secs(20);
const W: u32 = ARR_TYPE_WRITE;
const P: u32 = ARR_PCI_VALID;
const BUSY: u32 = ARR_BUSY;
const LEN: usize = 4096;
/// What the receiving node's buffer holds before a hostile WRITE.
const MARK: u8 = 0x5a;

fn window(mapped: bool) -> DrdmaConfig {
    DrdmaConfig {
        mapped,
        ..Default::default()
    }
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) | 1)
        .collect()
}

/// `got` is exactly `want`; on a difference, says whether the byte there is
/// one of `secret` (the bytes that must not leak).
#[track_caller]
fn landed(got: &[u8], want: &[u8], secret: &[u8], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        let leaked = got.iter().zip(secret).filter(|(a, b)| a == b).count();
        panic!(
            "{what}: byte {i} is {:#04x}, want {:#04x}; {leaked} of {} bytes \
             equal the earlier transfer's",
            got[i],
            want[i],
            got.len()
        );
    }
}

/// Waits until `drdma` has taken `n` read responses in all.
fn wait_responses(drdma: &Drdma, n: u64) {
    let deadline = Instant::now() + T;
    while drdma.stats().responses < n {
        assert!(
            Instant::now() < deadline,
            "{n} read responses: {:?}",
            drdma.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[track_caller]
fn completes(g: &mut SimGuest, cq: &mut Cq, wr_id: u64, opcode: u8) {
    let c = g.poll_cq(cq, T).expect("completion");
    assert_eq!(
        (c.wr_id.to_native(), c.status, c.opcode),
        (wr_id, WC_SUCCESS, opcode),
        "{}",
        wc_status_name(c.status)
    );
}

fn commit(g: &mut SimGuest, arr: u32, count: u32) {
    g.client.write32(0, DRDMA_COMMIT, arr | (count << 16));
}

/// Trapped window, three nodes: A READs B's bytes through PMB 7 (range 2),
/// then a WRITE to C on range 3 reuses PMB 7. A commit of the whole length
/// with no store, and DRDMA_COMMIT_MASK, are refused (UNSTORED, counted);
/// 8 bytes stored 512 times count 8; a commit of the rest is refused
/// again. Only once A has stored every byte does the WRITE go, and C holds
/// exactly A's stored bytes.
#[test]
fn trapped_window_sends_no_byte_of_an_earlier_read() {
    let mut f = Fabric::star(3, FabricOptions::default());
    let (lid_b, lid_c) = (f.nodes[1].lid, f.nodes[2].lid);
    let (rkey_b, rkey_c, buf) = (f.nodes[1].rkey, f.nodes[2].rkey, f.nodes[1].buf);
    let secret = pattern(0x10);
    f.nodes[1].g.write(buf, &secret);
    f.nodes[2].g.write(buf, &[MARK; LEN]);
    let a = &mut f.nodes[0];
    let mut qp_b = a.qps[&lid_b];
    let mut qp_c = a.qps[&lid_c];

    submit(&mut a.g, 2, false, LEN as u32, Some(7));
    let r = direct_wqe(WR_DRDMA_READ, 1, 2, LEN as u32, buf, rkey_b);
    a.g.post_send(&mut qp_b, &r);
    assert_eq!(load(&mut a.g, 2, 0, LEN as u32), secret, "A's READ of B");
    completes(&mut a.g, &mut a.cq, 1, WC_DRDMA_READ);

    let ctrl = submit_flushed(&mut a.g, 3, true, LEN as u32, Some(7));
    assert_eq!(
        ctrl,
        W | P | BUSY | (7 << ARR_PMB_SHIFT),
        "range 3 on PMB 7"
    );
    let w = direct_wqe(WR_DRDMA_WRITE, 2, 3, LEN as u32, buf, rkey_c);
    a.g.post_send(&mut qp_c, &w);
    commit(&mut a.g, 3, LEN as u32);
    assert_eq!(errors(&mut a.g), (1, last_error(DRDMA_ERR_UNSTORED, 3)));
    commit_mask(&mut a.g, 0, 1 << 3, false);
    assert_eq!(errors(&mut a.g), (2, last_error(DRDMA_ERR_UNSTORED, 3)));
    let own = pattern(0x80);
    for _ in 0..512 {
        store_burst(&mut a.g, 3, 0, &own[..8]);
    }
    assert_eq!(arr_reg(&mut a.g, 3, ARR_WBC), 8, "8 bytes, however often");
    commit(&mut a.g, 3, LEN as u32 - 8);
    assert_eq!(errors(&mut a.g), (3, last_error(DRDMA_ERR_UNSTORED, 3)));
    assert_eq!(arr_bits(&mut a.g, 3), W | P | BUSY, "still filling");
    assert!(a.g.try_poll_cq(&mut a.cq).is_none(), "the WRITE is held");

    store_mixed(&mut a.g, 3, &own, 5);
    completes(&mut a.g, &mut a.cq, 2, WC_DRDMA_WRITE);
    let got = f.nodes[2].g.read(buf, LEN);
    landed(&got, &own, &secret, "C after A's WRITE");
    assert_eq!(errors(&mut f.nodes[0].g).0, 3, "no other refusal");
}

/// Mapped window, three nodes: A READs B's bytes through range (= PMB) 7,
/// then reuses it for a WRITE to C committed with no store: C gets zeros.
/// After a second READ of B, a WRITE whose only stores are 8 bytes written
/// 512 times, committed for the whole length: C gets those 8 bytes and
/// zeros. None of B's bytes reaches C.
#[test]
fn mapped_window_sends_no_byte_of_an_earlier_read() {
    let mut f = Fabric::star(
        3,
        FabricOptions {
            drdma: window(true),
            ..Default::default()
        },
    );
    let (lid_b, lid_c) = (f.nodes[1].lid, f.nodes[2].lid);
    let (rkey_b, rkey_c, buf) = (f.nodes[1].rkey, f.nodes[2].rkey, f.nodes[1].buf);
    let secret = pattern(0x20);
    f.nodes[1].g.write(buf, &secret);
    f.nodes[2].g.write(buf, &[MARK; 2 * LEN]);
    let drdma = f.nodes[0].server.as_ref().unwrap().drdma.clone().unwrap();
    let a = &mut f.nodes[0];
    let mut qp_b = a.qps[&lid_b];
    let mut qp_c = a.qps[&lid_c];
    let map = map_window(&mut a.g).expect("mapped window");
    let page = GuestAddress(7 * LEN as u64);

    let own = pattern(0x90);
    let mut want = vec![0u8; 2 * LEN];
    want[LEN..LEN + 8].copy_from_slice(&own[..8]);
    for (k, overlapping) in [false, true].into_iter().enumerate() {
        let id = 10 * k as u64;
        // The READ of B, drained through the mapping and its commit.
        submit_flushed(&mut a.g, 7, false, LEN as u32, None);
        let r = direct_wqe(WR_DRDMA_READ, id + 1, 7, LEN as u32, buf, rkey_b);
        a.g.post_send(&mut qp_b, &r);
        wait_responses(&drdma, k as u64 + 1);
        let mut got = vec![0u8; LEN];
        map.read_slice(&mut got, page).unwrap();
        assert_eq!(got, secret, "A's READ of B");
        commit(&mut a.g, 7, LEN as u32);
        completes(&mut a.g, &mut a.cq, id + 1, WC_DRDMA_READ);
        // The WRITE to C on the same PMB.
        submit_flushed(&mut a.g, 7, true, LEN as u32, None);
        let to = buf + (k * LEN) as u64;
        let w = direct_wqe(WR_DRDMA_WRITE, id + 2, 7, LEN as u32, to, rkey_c);
        a.g.post_send(&mut qp_c, &w);
        if overlapping {
            for _ in 0..512 {
                map.write_slice(&own[..8], page).unwrap();
            }
        }
        commit(&mut a.g, 7, LEN as u32);
        completes(&mut a.g, &mut a.cq, id + 2, WC_DRDMA_WRITE);
    }
    let got = f.nodes[2].g.read(buf, 2 * LEN);
    let secrets = [secret.clone(), secret].concat();
    landed(
        &got,
        &want,
        &secrets,
        "C: commit-only, then overlapping stores",
    );
    assert_eq!(errors(&mut f.nodes[0].g).0, 0);
}

/// A device with a mapped window and no link: enough for what a client
/// sees in the window.
fn mapped_device() -> TestServer {
    TestServer::start_instance(
        TempDir::new("isolation"),
        InstanceConfig {
            drdma: window(true),
            ..InstanceConfig::default()
        },
    )
}

fn window_file(c: &mut Client) -> std::fs::File {
    c.region_info_fd(WINDOW, 64).1.expect("the PMB file")
}

/// A client of `s`, the window's PMB file it was given and the file's
/// length; the client has written 0xa5 over the whole file.
fn dirty_window(s: &TestServer) -> (Client, std::fs::File, usize) {
    let mut c = s.client();
    let file = window_file(&mut c);
    let len = file.metadata().unwrap().len() as usize;
    assert!(len >= 32 * LEN, "every range's page: {len}");
    file.write_all_at(&vec![0xa5; len], 0).unwrap();
    (c, file, len)
}

#[track_caller]
fn all_zero(file: &std::fs::File, what: &str) {
    let len = file.metadata().unwrap().len() as usize;
    let mut b = vec![0xffu8; len];
    file.read_exact_at(&mut b, 0).unwrap();
    if let Some(i) = b.iter().position(|&x| x != 0) {
        panic!("{what}: byte {i} of {len} is {:#04x}", b[i]);
    }
}

/// A client that goes away leaves nothing for the next one: the next client
/// sees only zeros in every page of the PMB file it is given, even when the
/// first client keeps its mapping of the old file and writes into it after
/// it has disconnected.
#[test]
fn the_next_client_sees_only_zeros_in_the_mapped_window() {
    let s = mapped_device();
    let (first, old, len) = dirty_window(&s);
    let _ = first.stream().shutdown(std::net::Shutdown::Both);
    // The device serves the next client once the first one's disconnect
    // has been handled.
    let mut next = s.client();
    old.write_all_at(&vec![0x3c; len], 0).unwrap();
    let new = window_file(&mut next);
    assert_eq!(new.metadata().unwrap().len() as usize, len);
    all_zero(&new, "the next client's window");
}

/// A device reset (BAR0 RESET) zeroes every PMB: after it, the same
/// client's mapping shows none of what was there before.
#[test]
fn a_device_reset_zeroes_the_mapped_window() {
    let s = mapped_device();
    let (mut c, file, _) = dirty_window(&s);
    c.write32(0, RESET, RESET_VALUE);
    let _ = c.read32(0, DRDMA_ERRORS); // the reset is done
    all_zero(&file, "the window after a device reset");
}

/// A client's DRDMA_PMB_DEDICATED setting is not the next client's: the
/// next one finds the share the device starts with (one PMB per range).
#[test]
fn the_next_client_finds_the_starting_dedicated_share() {
    let s = TestServer::start_instance(
        TempDir::new("isolation-dedicated"),
        InstanceConfig {
            drdma: window(false),
            ..InstanceConfig::default()
        },
    );
    let mut first = s.client();
    let start = first.read32(0, DRDMA_PMB_DEDICATED);
    assert_eq!(start, DrdmaConfig::default().ranges);
    first.write32(0, DRDMA_PMB_DEDICATED, 3);
    assert_eq!(first.read32(0, DRDMA_PMB_DEDICATED), 3);
    let _ = first.stream().shutdown(std::net::Shutdown::Both);
    let mut next = s.client();
    assert_eq!(next.read32(0, DRDMA_PMB_DEDICATED), start);
}

/// B's first client READs A's bytes through PMB 5 and WRITEs its own
/// through PMB 6, then goes away; the next client of B's device WRITEs
/// through both PMBs again without storing. Mapped: A gets zeros (and the
/// window showed zeros). Trapped: the commits are refused and nothing
/// goes until the client stores its own bytes, which are all A gets.
fn next_client_sends_none_of_the_first_clients_bytes(mapped: bool) {
    let mut p = LinkedPair::start(PairOptions {
        drdma: window(mapped),
        ..Default::default()
    });
    p.connect(MTU_4096);
    let drdma = p.sb.as_ref().unwrap().drdma.clone().unwrap();
    let secret_a = pattern(0x30);
    let secret_b = pattern(0x40);
    p.a.g.write(p.a.buf, &secret_a);
    let map = map_window(&mut p.b.g);
    assert_eq!(map.is_some(), mapped);

    // The first client: a READ through PMB 5, drained, a WRITE through 6.
    submit_flushed(&mut p.b.g, 5, false, LEN as u32, Some(5));
    let r = direct_wqe(WR_DRDMA_READ, 1, 5, LEN as u32, p.a.buf, p.a.rkey);
    p.b.g.post_send(&mut p.b.qp, &r);
    let got = match &map {
        Some(m) => drain_mapped(&mut p.b.g, m, &drdma, 5),
        None => load(&mut p.b.g, 5, 0, LEN as u32),
    };
    assert_eq!(got, secret_a, "the first client's READ");
    completes(&mut p.b.g, &mut p.b.cq, 1, WC_DRDMA_READ);
    submit_flushed(&mut p.b.g, 6, true, LEN as u32, Some(6));
    let to = p.a.buf + LEN as u64;
    let w = direct_wqe(WR_DRDMA_WRITE, 2, 6, LEN as u32, to, p.a.rkey);
    p.b.g.post_send(&mut p.b.qp, &w);
    match &map {
        Some(m) => {
            m.write_slice(&secret_b, GuestAddress(6 * LEN as u64))
                .unwrap();
            commit(&mut p.b.g, 6, LEN as u32);
        }
        None => store_mixed(&mut p.b.g, 6, &secret_b, 3),
    }
    completes(&mut p.b.g, &mut p.b.cq, 2, WC_DRDMA_WRITE);
    assert_eq!(p.a.g.read(to, LEN), secret_b, "the first client's WRITE");

    // The next client of B's device, and a new QP of A's to it.
    drop(map);
    p.restart_b_guest();
    let qa = p.a.g.create_qp(p.a.pd, &p.a.cq, &p.a.cq, 6);
    p.a.g.connect(&qa, 2, p.b.qp.qpn, MTU_4096, ALL_ACCESS);
    p.b.g.connect(&p.b.qp, 1, qa.qpn, MTU_4096, ALL_ACCESS);
    let target = p.a.buf + 2 * LEN as u64;
    p.a.g.write(target, &[MARK; 2 * LEN]);
    let map = map_window(&mut p.b.g);
    if let Some(m) = &map {
        let mut seen = vec![0xffu8; 32 * LEN];
        m.read_slice(&mut seen, GuestAddress(0)).unwrap();
        assert!(seen.iter().all(|&x| x == 0), "the next client's window");
    }
    let secrets = [secret_a.clone(), secret_b].concat();
    let own = pattern(0x50);
    for (i, arr) in [5u32, 6].into_iter().enumerate() {
        submit_flushed(&mut p.b.g, arr, true, LEN as u32, Some(arr));
        let to = target + (i * LEN) as u64;
        let w = direct_wqe(WR_DRDMA_WRITE, 10 + i as u64, arr, LEN as u32, to, p.a.rkey);
        p.b.g.post_send(&mut p.b.qp, &w);
        commit(&mut p.b.g, arr, LEN as u32);
        if !mapped {
            let n = i as u32 + 1;
            assert_eq!(errors(&mut p.b.g), (n, last_error(DRDMA_ERR_UNSTORED, arr)));
            store_burst(&mut p.b.g, arr, 0, &own);
        }
        completes(&mut p.b.g, &mut p.b.cq, 10 + i as u64, WC_DRDMA_WRITE);
    }
    let want = match mapped {
        true => vec![0u8; 2 * LEN],
        false => [own.clone(), own].concat(),
    };
    landed(
        &p.a.g.read(target, 2 * LEN),
        &want,
        &secrets,
        "A after the next client's WRITEs",
    );
}

/// Drains the device's first READ, `LEN` bytes in one response (MTU
/// 4096), from the mapping of range `arr`, and commits it.
fn drain_mapped(g: &mut SimGuest, map: &GuestMemoryMmap, drdma: &Drdma, arr: u32) -> Vec<u8> {
    wait_responses(drdma, 1);
    let mut got = vec![0u8; LEN];
    map.read_slice(&mut got, GuestAddress(u64::from(arr) * LEN as u64))
        .unwrap();
    commit(g, arr, LEN as u32);
    got
}

#[test]
fn next_client_sends_none_of_the_first_clients_bytes_trapped() {
    next_client_sends_none_of_the_first_clients_bytes(false);
}

#[test]
fn next_client_sends_none_of_the_first_clients_bytes_mapped() {
    next_client_sends_none_of_the_first_clients_bytes(true);
}
