//! Full stack, IPoIB between two guests under OpenSM: n1 and n2 on switch
//! `sw0`, OpenSM in n1's guest. Once the subnet is up each guest loads the
//! guest kernel's own `ib_ipoib` (`ibtca-load-modules ipoib`), brings
//! `ib0` up with an IPv4 address and waits for its carrier (IPoIB turns it
//! on once its QP is attached to the broadcast group it joined through the
//! SA). Then, on that one boot:
//!
//! - `ib0` is in datagram mode with the MTU of the broadcast group OpenSM
//!   made (`saquery -g`) less IPoIB's 4-byte header: 2044, as OpenSM's
//!   default partition gives the group an IB MTU of 2048 (the port's is
//!   4096: `vm_partition` sets the default partition's `mtu=5` and checks
//!   4092);
//! - `ping -c 3` each way: ARP through the broadcast group (a multicast
//!   datagram the switch forwards by the MFT OpenSM set), the replies
//!   unicast; the ARP entry holds the peer's port GUID;
//! - `ping6` of the peer's link-local address (IPv6 neighbour discovery
//!   through the solicited-node multicast groups).
//!
//! - `iperf3 -R` over ib0 in datagram mode, n1's client receiving what
//!   n2's server sends: its JSON report (written to the share) has no
//!   error, and the receiver counted every byte asked for and no more than
//!   the sender sent (with `-R` the receiver ends the test once it has the
//!   bytes; see [`iperf_complete`]);
//! - connected mode: both guests `echo connected > .../ib0/mode`; the MTU
//!   becomes what the SRQ's receive SGEs hold (IPoIB's
//!   `max_srq_sge * 4096 - 16`): 65520, its largest, as the SRQ's receive
//!   WQEs take IPoIB's 16 SGEs; a ping of a full-MTU datagram (65492 bytes
//!   of ICMP data: one IPoIB packet, far past what a UD QP carries) goes
//!   each way over the RC QPs the IB CM connected (REQ/REP/RTU
//!   on QP1; `rdma resource show qp` lists them, ipoib's passive QP
//!   reaches RTS: no `failed to modify QP` in dmesg), every RC QP is on
//!   IPoIB's SRQ (`rdma resource show srq` lists them as its QPs), and
//!   `iperf3` runs again over them.
//!
//! The guests step through the phases together by markers in the share,
//! so neither powers off (or changes mode) while the other still uses it.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use ibtca_tests::console::{client, every_echo_answered, tagged, tagged_lines};
use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

const TOPOLOGY: &str = r#"{
  "sm": "n1",
  "sm_options": ["--sweep", "10"],
  "nodes": [
    { "name": "n1", "lid": 1, "node_guid": "0x1200000000000701" },
    { "name": "n2", "lid": 2, "node_guid": "0x1200000000000702" }
  ],
  "switches": [ { "name": "sw0", "ports": 2 } ],
  "links": [ { "a": "n1", "b": "sw0:1" }, { "a": "n2", "b": "sw0:2" } ],
  "guest": { "mem": "512M" }
}"#;

const OPENSM_LOG: &str = "/ibtca/opensm.log";
const PORT_STATE: &str = "/sys/class/infiniband/ibtca0/ports/1/state";
/// A guest's IPv4 address on ib0.
fn addr(n: u8) -> String {
    format!("10.11.0.{n}")
}

/// The link-local IPv6 address of the IPoIB interface on the port with
/// `port_guid` (RFC 4391: the interface ID is the GUID with the
/// universal/local bit set).
fn link_local(port_guid: u64) -> String {
    let id = port_guid | (2 << 56);
    let g: Vec<String> = (0..4)
        .map(|i| format!("{:x}", (id >> (48 - 16 * i)) & 0xffff))
        .collect();
    format!("fe80::{}", g.join(":"))
}

/// The port GUID as it appears in an IPoIB hardware address
/// (`..:12:00:00:00:00:00:07:02` in `ip neigh`).
fn guid_bytes(port_guid: u64) -> String {
    port_guid
        .to_be_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// ib0's MTU in connected mode: the receive buffer of one SRQ receive,
/// `max_srq_sge` pages, less 16 bytes (ipoib_cm.c). IPoIB asks for at most
/// 16 (its 65524-byte buffer's pages), which the device's 512-byte SRQ
/// WQEs hold: 65520, IPoIB's largest.
const CONNECTED_MTU: usize = 16 * 4096 - 16;

/// Bytes each `iperf3` run moves (`-n`: a byte count, not a time).
const IPERF_BYTES: u64 = 4 << 20;

/// The `iperf3` client command of n1 towards `peer`, its JSON report
/// written to the share as `iperf-{mode}.json`. Reversed (`-R`): `peer`'s
/// server sends and n1 receives, so the receiver counts the `-n` bytes
/// before the test ends.
fn iperf(mode: &str, peer: u8) -> String {
    format!(
        "iperf3 -c {} -n {IPERF_BYTES} -R -J > /share/iperf-{mode}.json",
        addr(peer)
    )
}

/// Guest `n` marks that it reached `step` and waits for its peer's mark.
fn barrier(n: u8, peer: u8, step: &str) -> String {
    format!("touch /share/{step}-{n}; until [ -e /share/{step}-{peer} ]; do sleep 1; done")
}

/// The bytes an `iperf3 -J` report says were sent and received, or why
/// it is not a clean run.
fn iperf_bytes(json: &str) -> Result<(u64, u64), String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(e) = v.get("error") {
        return Err(format!("iperf3 error: {e}"));
    }
    let sum = |k: &str| {
        v["end"][k]["bytes"]
            .as_u64()
            .ok_or(format!("no end.{k}.bytes"))
    };
    Ok((sum("sum_sent")?, sum("sum_received")?))
}

/// Whether a reversed `iperf3 -n IPERF_BYTES` run moved its bytes: the
/// receiver (the client) counted at least `IPERF_BYTES`, and the sender
/// (the server) sent at least that. iperf3 does not make the two equal:
/// the client ends the test once its count reaches `-n` while the server's
/// sending thread may be a buffer further on, and the server closes its
/// data sockets on TEST_END without reading what is still in flight (which
/// is why the forward direction, where the sender ends the test, may count
/// fewer received than sent).
fn iperf_complete(sent: u64, received: u64) -> Result<(), String> {
    if received < IPERF_BYTES {
        return Err(format!(
            "the receiver counted {received} bytes of the {IPERF_BYTES} asked for"
        ));
    }
    if received > sent {
        return Err(format!(
            "the receiver counted {received} bytes, the sender sent {sent}"
        ));
    }
    Ok(())
}

/// The QP numbers in an `rdma resource show` line after `lqpn`: one
/// number (a QP's line) or a comma list of numbers and ranges `A-B` (an
/// SRQ's line: the QPs that receive on it).
fn lqpns(line: &str) -> Vec<u32> {
    let mut w = line.split_whitespace();
    let Some(list) = w.by_ref().find(|t| *t == "lqpn").and(w.next()) else {
        return Vec::new();
    };
    let mut qpns = Vec::new();
    for part in list.split(',') {
        let bounds: Vec<Option<u32>> = part.split('-').map(|n| n.parse().ok()).collect();
        match bounds[..] {
            [Some(a)] => qpns.push(a),
            [Some(a), Some(b)] => qpns.extend(a..=b),
            _ => {}
        }
    }
    qpns
}

/// IPoIB's IPv4 broadcast group in the default partition, as saquery
/// prints it.
const BROADCAST_MGID: &str = "ff12:401b:ffff::ffff:ffff";

/// The IB MTU in bytes of the broadcast group in `saquery -g`'s output
/// (its `Mtu` field: selector in bits 7:6, IBA MTU code in bits 5:0).
fn broadcast_group_mtu(saquery: &[&str]) -> Option<usize> {
    let at = saquery.iter().position(|l| l.contains(BROADCAST_MGID))?;
    let line = saquery[at..]
        .iter()
        .find(|l| l.trim_start().to_ascii_lowercase().starts_with("mtu"))?;
    let hex = line.rsplit('.').next()?.trim().trim_start_matches("0x");
    let code = u32::from_str_radix(hex, 16).ok()? & 0x3f;
    (1..=5).contains(&code).then(|| 256 << (code - 1))
}

/// The commands of guest `n` (1 or 2), whose peer is `peer` (its port
/// GUID `peer_guid`).
fn commands(n: u8, peer: u8, peer_guid: u64) -> Vec<String> {
    let wait_up = if n == 1 {
        format!("until grep -q 'SUBNET UP' {OPENSM_LOG}; do sleep 1; done")
    } else {
        format!("until grep -q ACTIVE {PORT_STATE}; do sleep 1; done")
    };
    let mut cmds = vec![
        wait_up,
        tagged("LOAD", "ibtca-load-modules ipoib"),
        "until [ -e /sys/class/net/ib0 ]; do sleep 1; done".to_owned(),
        format!("ip link set ib0 up && ip addr add {}/24 dev ib0", addr(n)),
        // n2 serves iperf3 (a daemon: one test after another).
        if n == 2 {
            "iperf3 -s -D".to_owned()
        } else {
            "true".to_owned()
        },
        // Carrier: the QP is attached to the broadcast group.
        tagged(
            "CARRIER",
            "until [ \"$(cat /sys/class/net/ib0/carrier 2>/dev/null)\" = 1 ]; do sleep 1; done; \
             cat /sys/class/net/ib0/mode /sys/class/net/ib0/mtu",
        ),
        // The groups the SA knows (n1 only: the MTU check reads it once).
        if n == 1 {
            tagged("MCG", "saquery -g")
        } else {
            "true".to_owned()
        },
        // Until the peer's ib0 answers (it comes up on its own time).
        client(
            "PING4",
            &every_echo_answered(&format!("ping -c 3 -W 5 {}", addr(peer))),
            300,
        ),
        tagged("NEIGH", &format!("ip neigh show {} dev ib0", addr(peer))),
        client(
            "PING6",
            &every_echo_answered(&format!("ping6 -c 3 -W 5 -I ib0 {}", link_local(peer_guid))),
            120,
        ),
        barrier(n, peer, "datagram"),
    ];
    if n == 1 {
        cmds.push(iperf("datagram", peer));
    }
    cmds.extend([
        // n2 leaves datagram mode once n1's datagram iperf3 is done.
        barrier(n, peer, "iperf-datagram"),
        tagged(
            "CONNECTED",
            "echo connected > /sys/class/net/ib0/mode && \
             cat /sys/class/net/ib0/mode /sys/class/net/ib0/mtu",
        ),
        barrier(n, peer, "connected"),
        // A datagram of the full MTU, one IPoIB packet far past the UD
        // MTU: only an RC connection carries it.
        client(
            "PINGCM",
            &every_echo_answered(&format!(
                "ping -c 3 -W 5 -s $(( $(cat /sys/class/net/ib0/mtu) - 28 )) {}",
                addr(peer)
            )),
            120,
        ),
    ]);
    if n == 1 {
        cmds.push(iperf("connected", peer));
    }
    cmds.extend([
        tagged("RCQP", "rdma resource show qp"),
        // IPoIB's SRQ and the QPs on it (IPoIB is the only SRQ user here).
        tagged("SRQ", "rdma resource show srq"),
        tagged("DMESG", "dmesg | grep 'ib0:' || true"),
        // Neither guest powers off (taking its ib0 away) before the other
        // has finished with it.
        barrier(n, peer, "done"),
    ]);
    cmds
}

#[test]
fn the_broadcast_group_mtu_is_read_from_saquery() {
    let out = [
        "MCMemberRecord group dump:",
        "\t\tMGID....................ff12:401b:ffff::1",
        "\t\tMtu.....................0x85",
        "MCMemberRecord group dump:",
        "\t\tMGID....................ff12:401b:ffff::ffff:ffff",
        "\t\tMlid....................0xC000",
        "\t\tMtu.....................0x84",
    ];
    assert_eq!(broadcast_group_mtu(&out), Some(2048));
    assert_eq!(broadcast_group_mtu(&out[..3]), None);
    assert_eq!(link_local(0x1200_0000_0000_0702), "fe80::1200:0:0:702");
}

#[test]
fn an_iperf3_report_gives_its_bytes_or_its_error() {
    let ok =
        r#"{"start":{},"end":{"sum_sent":{"bytes":4194304},"sum_received":{"bytes":4194000}}}"#;
    assert_eq!(iperf_bytes(ok), Ok((4_194_304, 4_194_000)));
    let err = r#"{"start":{},"end":{},"error":"unable to connect to server"}"#;
    assert!(iperf_bytes(err).unwrap_err().contains("unable to connect"));
    assert!(iperf_bytes("").is_err());
    assert!(iperf_bytes(r#"{"end":{"sum_sent":{"bytes":1}}}"#).is_err());
    assert_eq!(iperf_complete(IPERF_BYTES, IPERF_BYTES), Ok(()));
    assert_eq!(iperf_complete(IPERF_BYTES + 131_072, IPERF_BYTES), Ok(()));
    assert!(iperf_complete(IPERF_BYTES, IPERF_BYTES - 1)
        .unwrap_err()
        .contains("asked for"));
    assert!(iperf_complete(IPERF_BYTES, IPERF_BYTES + 1)
        .unwrap_err()
        .contains("the sender sent"));
}

#[test]
fn the_qps_of_an_rdma_resource_line_are_read() {
    let srq = "dev ibtca0 srqn 1 type BASIC lqpn 5-7,9 pdn 2 cqn 3 comm [ib_ipoib] ";
    assert_eq!(lqpns(srq), [5, 6, 7, 9]);
    let qp = "link ibtca0/1 lqpn 12 rqpn 8 type RC state RTS rq-psn 1 sq-psn 2 comm [ib_ipoib]";
    assert_eq!(lqpns(qp), [12]);
    assert!(lqpns("dev ibtca0 srqn 1 type BASIC pdn 2").is_empty());
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn ipoib_datagram_and_connected_mode_ping_and_iperf3_under_opensm() {
    let stack = VmStack::get();
    let boot = GuestBoot::with_topology(&stack, "vm-ipoib", TOPOLOGY);
    let run = boot.run.clone();
    let plan = ibtca_fabric::plan(&ibtca_fabric::parse(TOPOLOGY).unwrap(), &run).unwrap();
    let guid = |name: &str| {
        plan.nodes
            .iter()
            .find(|x| x.name == name)
            .unwrap()
            .port_guid
    };
    let (g1, g2) = (guid("n1"), guid("n2"));

    let share = TempDir::new("ipoib-share");
    let (n1, n2) = (commands(1, 2, g2), commands(2, 1, g1));
    let Booted { out, said, .. } = boot.up(
        &[
            "--guest-timeout",
            "1200",
            "--share",
            &share.0.display().to_string(),
        ],
        &[("n1", &n1[..]), ("n2", &n2[..])],
    );
    let (c1, c2) = (boot.console("n1"), boot.console("n2"));
    ibtca_tests::retries::report_console("n1", &c1);
    ibtca_tests::retries::report_console("n2", &c2);
    let all = boot.all(&said, &["n1", "n2"]);
    assert!(out.status.success(), "every guest's commands pass:\n{all}");
    let mcg = tagged_lines(&c1, "MCG");
    let group_mtu = broadcast_group_mtu(&mcg).unwrap_or_else(|| {
        panic!(
            "no broadcast group in saquery -g:\n{}\n{all}",
            mcg.join("\n")
        )
    });
    assert_eq!(group_mtu, 2048, "OpenSM's default broadcast group MTU");
    let ib0_mtu = (group_mtu - 4).to_string();
    for (n, c, peer, peer_guid) in [("n1", &c1, 2, g2), ("n2", &c2, 1, g1)] {
        assert!(
            !c.contains("failed to attach to multicast group"),
            "{n}: IPoIB's attach failed:\n{all}"
        );
        assert_eq!(
            tagged_lines(c, "CARRIER")[..2],
            ["datagram", ib0_mtu.as_str()],
            "{n}: datagram mode, the broadcast group's MTU less 4:\n{all}"
        );
        let ping = tagged_lines(c, "PING4").join("\n");
        assert!(
            ping.contains("3 packets transmitted, 3 packets received"),
            "{n}: ping {}:\n{all}",
            addr(peer)
        );
        let neigh = tagged_lines(c, "NEIGH").join("\n");
        assert!(
            neigh.contains(&addr(peer)) && neigh.contains(&guid_bytes(peer_guid)),
            "{n}: ARP resolved the peer's IPoIB address ({}): {neigh}\n{all}",
            guid_bytes(peer_guid)
        );
        let ping6 = tagged_lines(c, "PING6").join("\n");
        assert!(
            ping6.contains("3 packets transmitted, 3 packets received"),
            "{n}: ping6 {}:\n{all}",
            link_local(peer_guid)
        );
        let cm_mtu = CONNECTED_MTU.to_string();
        assert_eq!(
            tagged_lines(c, "CONNECTED")[..2],
            ["connected", cm_mtu.as_str()],
            "{n}: connected mode at the SRQ receive's MTU:\n{all}"
        );
        let ping = tagged_lines(c, "PINGCM").join("\n");
        assert!(
            ping.contains(&format!("{} data bytes", CONNECTED_MTU - 28))
                && ping.contains("3 packets transmitted, 3 packets received"),
            "{n}: full-MTU ping {} in connected mode:\n{all}",
            addr(peer)
        );
        let qps = tagged_lines(c, "RCQP");
        assert!(
            qps.iter()
                .any(|l| l.contains("type RC") && l.contains("state RTS")),
            "{n}: an RC QP of connected mode in RTS:\n{}\n{all}",
            qps.join("\n")
        );
        // Connected mode receives on IPoIB's SRQ: every RC QP (the
        // passive side's and the active side's) is one of its QPs.
        let srq = tagged_lines(c, "SRQ");
        let on_srq: Vec<u32> = srq
            .iter()
            .filter(|l| l.contains("srqn "))
            .flat_map(|l| lqpns(l))
            .collect();
        let rc: Vec<u32> = qps
            .iter()
            .filter(|l| l.contains("type RC"))
            .flat_map(|l| lqpns(l))
            .collect();
        assert!(
            !rc.is_empty() && rc.iter().all(|q| on_srq.contains(q)),
            "{n}: the RC QPs {rc:?} receive on IPoIB's SRQ (its QPs: {on_srq:?}):\n{}\n{}\n{all}",
            qps.join("\n"),
            srq.join("\n")
        );
        let dmesg = tagged_lines(c, "DMESG").join("\n");
        assert!(
            !dmesg.contains("failed to modify QP"),
            "{n}: every connected-mode QP reached its state:\n{dmesg}\n{all}"
        );
    }
    for mode in ["datagram", "connected"] {
        let json =
            std::fs::read_to_string(share.0.join(format!("iperf-{mode}.json"))).unwrap_or_default();
        let (sent, received) = iperf_bytes(&json)
            .unwrap_or_else(|e| panic!("iperf3 in {mode} mode: {e}:\n{json}\n{all}"));
        if let Err(e) = iperf_complete(sent, received) {
            panic!("iperf3 in {mode} mode: {e}:\n{json}");
        }
        println!("iperf3 in {mode} mode: {sent} bytes sent, {received} received");
    }
}
