//! One fabric on two "hosts": two network namespaces joined by a veth
//! pair that the test makes, the pair impaired (netem delay and loss, or
//! loss alone where the kernel has no netem). `ibtca-fabric up --host a`
//! in one namespace starts n1 and sw0, `--host b` in the other starts
//! n2; sw0 port 2 and n2 are joined over TCP. Simulated guests do RDMA
//! across the lossy TCP link and the bytes land; the TCP connection is
//! killed (`ss -K`), the link comes up again and traffic resumes; the
//! veth goes down silently, keepalives end the connection, and it comes
//! back once the veth is up. Needs root (CI runs as root).

use std::path::Path;
use std::time::Duration;

use ibtca_device::verbs::abi::*;
use ibtca_tests::console::wait_for;
use ibtca_tests::launcher::text;
use ibtca_tests::netns::TwoHosts;
use ibtca_tests::pair::{PairOptions, Side, ALL_ACCESS};
use ibtca_tests::sim_guest::{remote, send_wqe};
use ibtca_tests::TempDir;

const T: Duration = Duration::from_secs(60);
const PORT_BASE: u16 = 18700;
/// Writes across the lossy link before the test gives up on seeing a
/// packet dropped: with netem's 2 % random loss no drop in this many is
/// beyond belief, and nftables drops 2 in every 100 packets.
const MAX_WRITES: u64 = 400;
/// What a device logs when its link comes up or goes down.
const UP: &str = "ibtca_link::session: link up";
const DOWN: &str = "ibtca_link::session: link down";

fn topology(hosts: &TwoHosts) -> String {
    format!(
        r#"{{
  "hosts": {{"a": {{"address": "{}", "port_base": {PORT_BASE}}},
             "b": {{"address": "{}", "port_base": {PORT_BASE}}}}},
  "nodes": [{{"name": "n1", "lid": 1, "host": "a"}}, {{"name": "n2", "lid": 2, "host": "b"}}],
  "switches": [{{"name": "sw0", "ports": 2, "host": "a"}}],
  "links": [{{"a": "n1", "b": "sw0:1"}}, {{"a": "sw0:2", "b": "n2"}}]
}}"#,
        hosts.addr[0], hosts.addr[1]
    )
}

/// A guest of the device at `socket` with a buffer, a CQ and a QP.
fn side(socket: &Path) -> Side {
    let options = PairOptions {
        ram: 8 << 20,
        buf: 4 << 20,
        cq_log: 6,
        qp_log: 5,
        ..PairOptions::default()
    };
    Side::new(socket, &options, ALL_ACCESS)
}

/// An RDMA WRITE of `len` bytes (seeded by `seed`) from `a` to `b` at
/// `offset`: completes, and the bytes are in `b`'s memory.
fn write_lands(a: &mut Side, b: &Side, len: usize, offset: u64, seed: u8, wr_id: u64) {
    let data: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect();
    a.g.write(a.buf, &data);
    let w = remote(
        send_wqe(WR_RDMA_WRITE, wr_id, a.buf, len as u32, a.lkey),
        b.buf + offset,
        b.rkey,
    );
    a.g.post_send(&mut a.qp, &w);
    let c = a.g.poll_cq(&mut a.cq, T).expect("write completion");
    assert_eq!((c.wr_id.to_native(), c.status), (wr_id, WC_SUCCESS));
    assert!(
        b.g.read(b.buf + offset, len) == data,
        "bytes of write {wr_id} in n2's memory"
    );
}

#[test]
fn two_hosts_over_a_lossy_tcp_link_and_a_reconnect() {
    let hosts = TwoHosts::new("ibtca", 201);
    let how = hosts.impair(5, 2);
    let dir = TempDir::new("cross-host");
    let file = dir.join("topology.json");
    std::fs::write(&file, topology(&hosts)).unwrap();
    let runs = [dir.join("run-a"), dir.join("run-b")];
    let _down = hosts.up_fabric(&file, &runs);
    let (n1_log, n2_log) = (runs[0].join("n1.log"), runs[1].join("n2.log"));
    // n2 reaches sw0 over TCP, at host a's address and port base + 1.
    let endpoint = format!("connect:tcp:{}:{}", hosts.addr[0], PORT_BASE + 1);
    wait_for(&n2_log, &endpoint, 1, T);
    assert!(!runs[0].join("n2.sock").exists() && !runs[1].join("n1.sock").exists());

    let mut a = side(&runs[0].join("n1.sock"));
    let mut b = side(&runs[1].join("n2.sock"));
    a.g.connect(&a.qp, 2, b.qp.qpn, MTU_4096, ALL_ACCESS);
    b.g.connect(&b.qp, 1, a.qp.qpn, MTU_4096, ALL_ACCESS);
    // Writes until the impairment has dropped something: TCP sends a
    // 256 KiB write as a few large segments, so eight writes may pass
    // without a loss.
    let mut k = 0u64;
    while k < 8 || hosts.dropped(how) == 0 {
        assert!(
            k < MAX_WRITES,
            "the loss ({how:?}) dropped nothing in {k} writes"
        );
        write_lands(&mut a, &b, 256 * 1024, (k % 64) * 4096, k as u8, k);
        k += 1;
    }

    // Kill the TCP connection from host b: both ends see it go, n2
    // reconnects, and traffic resumes.
    let ss = hosts.exec(1, "ss", &["-K", "dst", &hosts.addr[0]]);
    assert!(ss.status.success(), "ss -K: {}", text(&ss));
    wait_for(&n2_log, DOWN, 1, T);
    wait_for(&n2_log, UP, 2, T);
    write_lands(&mut a, &b, 1 << 20, 2 << 20, 99, 1000);

    // The wire goes dead without a word (host a's end of the veth down:
    // no FIN, no RST): keepalives end the connection on both hosts, and
    // once the wire is back n2 connects again.
    hosts.exec_ok(0, "ip", &["link", "set", &hosts.dev[0], "down"]);
    wait_for(&n2_log, DOWN, 2, T);
    hosts.exec_ok(0, "ip", &["link", "set", &hosts.dev[0], "up"]);
    wait_for(&n2_log, UP, 3, T);
    write_lands(&mut a, &b, 64 * 1024, 3 << 20, 7, 1001);
    // The link inside host a never went down.
    assert_eq!(wait_for(&n1_log, UP, 1, T).matches(DOWN).count(), 0);
}
