//! Device instances joined through `ibtca_switch` switches, each
//! driven through vfio-user by a simulated guest: forwarding by LID across
//! one and two switches, drops by reason, faults on switch links, and a
//! node whose link dies while the rest of the fabric keeps working.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ibtca_device::link::{FaultPlan, FaultRates};
use ibtca_device::verbs::abi::*;
use ibtca_tests::fabric::{Fabric, FabricOptions, Node};
use ibtca_tests::qp_retry::Retry;
use ibtca_tests::sim_guest::{recv_wqe, remote, send_wqe};

const T: Duration = Duration::from_secs(30);

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29).wrapping_add(seed))
        .collect()
}

/// Asserts two byte strings are equal; reports the first difference only.
#[track_caller]
fn same(got: &[u8], want: &[u8], what: &str) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{what}: first difference at byte {i} of {}: {:?} != {:?}",
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

/// Polls `node`'s CQ until `count` completions arrived; by wr_id.
fn completions(node: &mut Node, count: usize, timeout: Duration) -> HashMap<u64, Cqe> {
    let mut got = HashMap::new();
    let deadline = Instant::now() + timeout;
    while got.len() < count {
        let left = deadline.saturating_duration_since(Instant::now());
        let c = node
            .g
            .poll_cq(&mut node.cq, left)
            .unwrap_or_else(|| panic!("LID {}: {} of {count} completions", node.lid, got.len()));
        let old = got.insert(c.wr_id.to_native(), c);
        assert!(
            old.is_none(),
            "LID {}: duplicate completion {c:?}",
            node.lid
        );
    }
    got
}

/// Where in each buffer things go: writes from node `i` at `i * 64 KiB`,
/// receives from node `i` at `512 KiB + i * 32 KiB`, sources from `768 KiB`.
const WRITE_SLOT: u64 = 0x1_0000;
const RECV_BASE: u64 = 0x8_0000;
const RECV_SLOT: u64 = 0x8000;
const SRC_BASE: u64 = 0xc_0000;
const SRC_SLOT: u64 = 0x8000;

/// Every node RDMA-WRITEs `wlen` bytes and SENDs `slen` bytes to every
/// other node; checks every completion and every byte.
fn all_to_all(f: &mut Fabric, wlen: usize, slen: usize, rounds: u64) {
    assert!(wlen <= SRC_SLOT as usize / 2 && slen <= SRC_SLOT as usize / 2);
    let n = f.nodes.len();
    for round in 0..rounds {
        // Receives first, one per peer.
        for j in 0..n {
            for i in 0..n {
                if i == j {
                    continue;
                }
                let peer = f.nodes[i].lid;
                let node = &mut f.nodes[j];
                let at = node.buf + RECV_BASE + i as u64 * RECV_SLOT;
                let r = recv_wqe(recv_id(round, i), at, RECV_SLOT as u32, node.lkey);
                let mut qp = node.qps[&peer];
                node.g.post_recv(&mut qp, &r);
                node.qps.insert(peer, qp);
            }
        }
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                let (a, b) = f.two(i, j);
                let seed = (round as u8).wrapping_mul(16) ^ (i * 4 + j) as u8;
                let wdata = pattern(wlen, seed);
                let sdata = pattern(slen, !seed);
                let src = a.buf + SRC_BASE + j as u64 * SRC_SLOT;
                a.g.write(src, &wdata);
                a.g.write(src + SRC_SLOT / 2, &sdata);
                let mut qp = a.qps[&b.lid];
                let w = remote(
                    send_wqe(WR_RDMA_WRITE, write_id(round, j), src, wlen as u32, a.lkey),
                    b.buf + i as u64 * WRITE_SLOT,
                    b.rkey,
                );
                a.g.post_send(&mut qp, &w);
                let s = send_wqe(
                    WR_SEND,
                    send_id(round, j),
                    src + SRC_SLOT / 2,
                    slen as u32,
                    a.lkey,
                );
                a.g.post_send(&mut qp, &s);
                a.qps.insert(b.lid, qp);
            }
        }
        // Each node: 2 send completions and 1 receive per peer.
        for j in 0..n {
            let node = &mut f.nodes[j];
            let got = completions(node, 3 * (n - 1), T);
            for (id, c) in &got {
                assert_eq!(c.status, WC_SUCCESS, "LID {} wr {id:#x}: {c:?}", node.lid);
            }
            for i in 0..n {
                if i == j {
                    continue;
                }
                let seed = (round as u8).wrapping_mul(16) ^ (i * 4 + j) as u8;
                let rc = &got[&recv_id(round, i)];
                assert_eq!(rc.byte_len.to_native() as usize, slen);
                same(
                    &node
                        .g
                        .read(node.buf + RECV_BASE + i as u64 * RECV_SLOT, slen),
                    &pattern(slen, !seed),
                    &format!("SEND from LID {} to LID {}", i + 1, j + 1),
                );
                same(
                    &node.g.read(node.buf + i as u64 * WRITE_SLOT, wlen),
                    &pattern(wlen, seed),
                    &format!("WRITE from LID {} to LID {}", i + 1, j + 1),
                );
                assert!(got.contains_key(&write_id(round, i)));
                assert!(got.contains_key(&send_id(round, i)));
            }
        }
    }
}

fn write_id(round: u64, peer: usize) -> u64 {
    0x1_0000 + round * 0x100 + peer as u64
}
fn send_id(round: u64, peer: usize) -> u64 {
    0x2_0000 + round * 0x100 + peer as u64
}
fn recv_id(round: u64, peer: usize) -> u64 {
    0x3_0000 + round * 0x100 + peer as u64
}

#[test]
fn four_nodes_on_one_switch_write_and_send_all_to_all() {
    let mut f = Fabric::star(4, FabricOptions::default());
    all_to_all(&mut f, 16_000, 3000, 2);
    let sw = &f.switches[0];
    for (lid, route) in sw.lft().entries() {
        assert_eq!(u16::from(route.port), lid, "learned from the Hello");
    }
    assert_eq!(sw.lft().entries().len(), 4);
    for p in 1..=4u8 {
        let s = sw.port_stats(p).unwrap();
        assert!(s.rx_packets > 0 && s.tx_packets > 0, "port {p}: {s:?}");
        assert_eq!(s.drops(), 0, "port {p}: {s:?}");
        assert_eq!(sw.peer(p).map(|x| x.lid), Some(u16::from(p)));
    }
}

#[test]
fn two_switches_in_a_line_forward_by_explicit_routes() {
    let mut f = Fabric::line(2, 2, FabricOptions::default());
    all_to_all(&mut f, 10_000, 500, 1);
    // The inter-switch port is port 3 on both: traffic crossed it both ways.
    for sw in &f.switches {
        let s = sw.port_stats(3).unwrap();
        assert!(s.rx_packets > 0 && s.tx_packets > 0, "{sw:?}: {s:?}");
        assert_eq!(sw.all_stats().iter().map(|s| s.drops()).sum::<u64>(), 0);
    }
}

#[test]
fn packets_to_an_unknown_lid_are_dropped_and_counted() {
    let mut f = Fabric::star(
        2,
        FabricOptions {
            all_to_all: false,
            retry: Retry::PROMPT,
            ..Default::default()
        },
    );
    let n = &mut f.nodes[0];
    let mut qp = n.g.create_qp(n.pd, &n.cq, &n.cq, 4);
    n.g.connect(&qp, 77, 0x55, MTU_4096, ALL_ACCESS_BITS);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, n.buf, 64, n.lkey),
        0x1000,
        0x1234,
    );
    n.g.post_send(&mut qp, &w);
    let c = n.g.poll_cq(&mut n.cq, T).expect("an error completion");
    assert_eq!((c.wr_id.to_native(), c.status), (1, WC_RETRY_EXC_ERR));
    let s = f.switches[0].port_stats(1).unwrap();
    assert!(
        s.drop_unknown_lid >= 8,
        "the first try and 7 retries: {s:?}"
    );
    assert_eq!(f.switches[0].port_stats(2).unwrap().rx_packets, 0);
}

/// The default options, with QPs that give up soon ([`Retry::PROMPT`]).
fn prompt() -> FabricOptions {
    FabricOptions {
        retry: Retry::PROMPT,
        ..Default::default()
    }
}

const ALL_ACCESS_BITS: u32 =
    ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;

#[test]
fn a_corrupted_packet_is_dropped_by_the_switch_and_rc_recovers() {
    let mut f = Fabric::star(2, FabricOptions::default());
    // Node 1's link flips one byte of the 3rd packet it sends, inside the
    // payload: only the CRCs can tell.
    let link = f.nodes[0].server.as_ref().unwrap().link.clone().unwrap();
    link.set_faults(FaultPlan::default().corrupt(2, 100));
    let (a, b) = f.two(0, 1);
    let data = pattern(8 * 4096, 5);
    a.g.write(a.buf, &data);
    let mut qp = a.qps[&2];
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 9, a.buf, data.len() as u32, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(&mut qp, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("write completion");
    assert_eq!((c.wr_id.to_native(), c.status), (9, WC_SUCCESS));
    same(&b.g.read(b.buf, data.len()), &data, "B's memory");
    let s = f.switches[0].port_stats(1).unwrap();
    assert_eq!(s.drop_crc_error, 1, "{s:?}");
    assert_eq!(link.stats().fault_corrupted, 1);
}

#[test]
fn every_message_arrives_once_under_faults_on_switch_links() {
    let mut f = Fabric::line(
        1,
        1,
        FabricOptions {
            mtu: MTU_256 + 1,     // 512 bytes: several packets per message
            retry: Retry::PROMPT, // lost packets resent soon
            ..Default::default()
        },
    );
    for (s, sw) in f.switches.iter().enumerate() {
        for p in 1..=2u8 {
            let rates = FaultRates {
                drop: 10,
                duplicate: 10,
                reorder: 10,
                corrupt: 10,
                seed: 100 + s as u64 * 10 + u64::from(p),
            };
            sw.set_faults(p, FaultPlan::default().with_rates(rates))
                .unwrap();
        }
    }
    all_to_all(&mut f, 5000, 1500, 30);
    let links: Vec<_> = f
        .switches
        .iter()
        .flat_map(|sw| (1..=2u8).map(|p| sw.link_stats(p).unwrap()))
        .collect();
    let sum = |k: fn(&ibtca_device::link::LinkStats) -> u64| links.iter().map(k).sum::<u64>();
    let kinds = [
        sum(|s| s.fault_dropped),
        sum(|s| s.fault_duplicated),
        sum(|s| s.fault_reordered),
        sum(|s| s.fault_corrupted),
    ];
    assert!(
        kinds.iter().all(|k| *k > 0),
        "every kind of fault: {kinds:?}"
    );
    let injected: u64 = kinds.iter().sum();
    // Corruption on the inter-switch link is caught by the next switch.
    let crc: u64 = f
        .switches
        .iter()
        .map(|sw| sw.port_stats(2).unwrap().drop_crc_error)
        .sum();
    eprintln!("faults injected: {kinds:?}, CRC drops at switches: {crc}");
    assert!(crc > 0, "{injected} faults, none caught by a switch");
}

#[test]
fn a_dead_node_fails_only_its_own_qps() {
    let mut f = Fabric::star(3, prompt());
    all_to_all(&mut f, 4096, 100, 1);
    // LID 3's link dies at the switch.
    f.switches[0].port_down(3).unwrap();
    let (buf3, rkey3) = (f.nodes[2].buf, f.nodes[2].rkey);
    let data = pattern(4096, 1);
    let write = |a: &mut Node, id: u64, to: u64, rkey: u32| {
        remote(
            send_wqe(WR_RDMA_WRITE, id, a.buf + SRC_BASE, 4096, a.lkey),
            to,
            rkey,
        )
    };
    for (i, j) in [(0usize, 1usize), (1, 0)] {
        let (a, b) = f.two(i, j);
        a.g.write(a.buf + SRC_BASE, &data);
        let w = write(a, 3, buf3, rkey3);
        a.g.post_send(a.qps.get_mut(&3).unwrap(), &w);
        let w = write(a, 100, b.buf + 0x2_0000, b.rkey);
        a.g.post_send(a.qps.get_mut(&b.lid).unwrap(), &w);
    }
    for i in 0..2usize {
        let n = &mut f.nodes[i];
        let got = completions(n, 2, Duration::from_secs(60));
        assert_eq!(got[&100].status, WC_SUCCESS, "LID {}: live peer", n.lid);
        assert_eq!(got[&3].status, WC_RETRY_EXC_ERR, "LID {}: dead peer", n.lid);
    }
    // The live pair goes on working after the failures.
    for (i, j) in [(0usize, 1usize), (1, 0)] {
        let (a, b) = f.two(i, j);
        same(&b.g.read(b.buf + 0x2_0000, 4096), &data, "first write");
        let fresh = pattern(4096, 2 + i as u8);
        a.g.write(a.buf + SRC_BASE, &fresh);
        let w = write(a, 200, b.buf + 0x3_0000, b.rkey);
        a.g.post_send(a.qps.get_mut(&b.lid).unwrap(), &w);
        let c = a.g.poll_cq(&mut a.cq, T).expect("write after the failure");
        assert_eq!((c.wr_id.to_native(), c.status), (200, WC_SUCCESS));
        same(&b.g.read(b.buf + 0x3_0000, 4096), &fresh, "later write");
    }
    let s = f.switches[0].port_stats(3).unwrap();
    assert!(s.drop_link_down > 0, "{s:?}");
    assert!(!f.switches[0].is_port_up(3));
}

#[test]
fn a_delayed_port_holds_packets_back_in_order() {
    let mut f = Fabric::star(2, FabricOptions::default());
    let delay = Duration::from_millis(30);
    // What the switch sends to LID 2 waits 30 ms.
    f.switches[0].set_delay(2, delay).unwrap();
    let (a, b) = f.two(0, 1);
    let data = pattern(20_000, 11);
    a.g.write(a.buf, &data);
    let start = Instant::now();
    let w = remote(
        send_wqe(WR_RDMA_WRITE, 1, a.buf, data.len() as u32, a.lkey),
        b.buf,
        b.rkey,
    );
    a.g.post_send(a.qps.get_mut(&2).unwrap(), &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("write completion");
    let took = start.elapsed();
    assert_eq!((c.wr_id.to_native(), c.status), (1, WC_SUCCESS));
    same(&b.g.read(b.buf, data.len()), &data, "delayed write");
    assert!(took >= delay, "completed after {took:?}, before the delay");
    // A port counts a packet after handing it to its link, so B may have
    // acknowledged the last one before port 2 counted it: wait for it.
    let deadline = Instant::now() + T;
    let s = loop {
        let s = f.switches[0].port_stats(2).unwrap();
        if s.tx_packets >= 5 {
            break s;
        }
        assert!(Instant::now() < deadline, "20 000 bytes at MTU 4096: {s:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(s.drops(), 0, "{s:?}");
    f.switches[0].set_delay(2, Duration::ZERO).unwrap();
}

#[test]
fn the_control_commands_change_a_running_switch() {
    use ibtca_switch::control::execute;
    let mut f = Fabric::star(2, prompt());
    let sw = &f.switches[0];
    let stats = execute(sw, "stats");
    let json: serde_json::Value = serde_json::from_str(stats.strip_prefix("ok ").unwrap()).unwrap();
    assert_eq!(json[1]["peer_lid"], 2);
    assert!(execute(sw, "bogus").starts_with("error unknown command"));
    assert!(execute(sw, "faults 9 drop:1").starts_with("error"));
    assert!(execute(sw, "faults 2 corrupt:2000").starts_with("error"));
    assert_eq!(execute(sw, "faults 2 corrupt:1000"), "ok port 2 faults set");
    // Everything to LID 2 is corrupted now: the write cannot get through.
    let (a, b) = f.two(0, 1);
    let w = remote(send_wqe(WR_RDMA_WRITE, 1, a.buf, 64, a.lkey), b.buf, b.rkey);
    a.g.post_send(a.qps.get_mut(&2).unwrap(), &w);
    let c =
        a.g.poll_cq(&mut a.cq, Duration::from_secs(60))
            .expect("an error completion");
    assert_eq!((c.wr_id.to_native(), c.status), (1, WC_RETRY_EXC_ERR));
    let sw = &f.switches[0];
    assert!(sw.link_stats(2).unwrap().fault_corrupted >= 8);
    assert_eq!(execute(sw, "faults 2 none"), "ok port 2 faults set");
    assert_eq!(execute(sw, "delay 2 100"), "ok port 2 delay 100 us");
    assert_eq!(execute(sw, "down 2"), "ok port 2 down");
    assert!(!sw.is_port_up(2));
    assert_eq!(execute(sw, "up 2"), "ok port 2 up");
}
