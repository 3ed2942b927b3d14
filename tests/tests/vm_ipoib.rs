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
//!   4096, which would give 4092);
//! - `ping -c 3` each way: ARP through the broadcast group (a multicast
//!   datagram the switch forwards by the MFT OpenSM set), the replies
//!   unicast; the ARP entry holds the peer's port GUID;
//! - `ping6` of the peer's link-local address (IPv6 neighbour discovery
//!   through the solicited-node multicast groups).
//!
//! Each guest then waits for the other's marker in the share, so neither
//! powers off while the other still pings it.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use ibtca_tests::console::{client, tagged, tagged_lines};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

const TOPOLOGY: &str = r#"{
  "sm": "n1",
  "sm_options": ["--sweep", "10"],
  "nodes": [
    { "name": "n1", "lid": 1, "node_guid": "0x0200000000000701" },
    { "name": "n2", "lid": 2, "node_guid": "0x0200000000000702" }
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
/// (`..:02:00:00:00:00:00:07:02` in `ip neigh`).
fn guid_bytes(port_guid: u64) -> String {
    port_guid
        .to_be_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
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
    vec![
        wait_up,
        tagged("LOAD", "ibtca-load-modules ipoib"),
        "until [ -e /sys/class/net/ib0 ]; do sleep 1; done".to_owned(),
        format!("ip link set ib0 up && ip addr add {}/24 dev ib0", addr(n)),
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
        client("PING4", &format!("ping -c 3 -W 5 {}", addr(peer)), 300),
        tagged("NEIGH", &format!("ip neigh show {} dev ib0", addr(peer))),
        client(
            "PING6",
            &format!("ping6 -c 3 -W 5 -I ib0 {}", link_local(peer_guid)),
            120,
        ),
        // Neither guest powers off (taking its ib0 away) before the other
        // has finished pinging it.
        format!("touch /share/done-{n}; until [ -e /share/done-{peer} ]; do sleep 1; done"),
    ]
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
    assert_eq!(link_local(0x0200_0000_0000_0702), "fe80::200:0:0:702");
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn ipoib_datagram_mode_pings_both_ways_under_opensm() {
    let stack = VmStack::get();
    let dir = stack.scratch("vm-ipoib");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let _down = Down(run.clone());
    let topo = dir.join("ipoib.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();
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
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(["--guest-timeout", "1200", "--wait"].map(String::from));
    args.extend(["--share".to_owned(), share.0.display().to_string()]);
    for (node, cmds) in [("n1", commands(1, 2, g2)), ("n2", commands(2, 1, g1))] {
        for c in cmds {
            args.extend(["--run".to_owned(), format!("{node}={c}")]);
        }
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fabric(&argv);
    let said = text(&out);
    let console =
        |n: &str| std::fs::read_to_string(run.join(format!("{n}.console"))).unwrap_or_default();
    let (c1, c2) = (console("n1"), console("n2"));
    ibtca_tests::retries::report_console("n1", &c1);
    ibtca_tests::retries::report_console("n2", &c2);
    let all = format!("{said}\n==> n1:\n{c1}\n==> n2:\n{c2}");
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
    }
}
