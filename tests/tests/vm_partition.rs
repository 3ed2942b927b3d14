//! Full stack, a partition under OpenSM: n1, n2 and n3 on switch `sw0`,
//! OpenSM in n1's guest with the topology's `sm_partitions`: the default
//! partition for all, partition 0x8001 for n1 and n2 (full members), not
//! n3. On that one boot:
//!
//! - each guest's P_Key table (`/sys/class/infiniband/ibtca0/ports/1/pkeys/N`,
//!   read by the guest driver from the device's table) holds 0xffff, and
//!   0x8001 exactly where the node is a member;
//! - each guest loads IPoIB and makes the child `ib0.8001` through
//!   `create_child`;
//! - `ib0` is in datagram mode at MTU 4092 on all three: the default
//!   partition's line gives `mtu=5`, so OpenSM makes its broadcast group
//!   at IB MTU 4096 (the ports' and switch ports' MTUCap), and IPoIB takes
//!   that less its 4-byte header; 0x8001's group keeps OpenSM's default
//!   2048, so a member's `ib0.8001` is at 2044 on the same boot;
//! - all three ping each other on `ib0` (the default partition), and each
//!   sends its next peer a 4092-byte IP packet (one 4096-byte datagram);
//! - n1 and n2 ping each other on `ib0.8001`;
//! - n3, once n1's `ib0.8001` has answered n2, cannot reach n1 over
//!   0x8001: its child has no carrier (IPoIB finds no 0x8001 in the
//!   port's table) and its ping fails.
//!
//! Guests wait on each other through markers in the share directory, and
//! none powers off before all three are done.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use ibtca_tests::console::{client, every_echo_answered, tagged, tagged_lines};
use ibtca_tests::guest_boot::{Booted, GuestBoot};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

/// The port GUID of node `n`.
fn port_guid(n: u8) -> String {
    format!("0x12000000000008{n:02x}")
}

/// The topology: three nodes on one switch, OpenSM on n1, 0x8001 for n1
/// and n2.
fn topology() -> String {
    let nodes: Vec<String> = (1..=3u8)
        .map(|n| {
            format!(
                r#"{{ "name": "n{n}", "lid": {n}, "port_guid": "{}" }}"#,
                port_guid(n)
            )
        })
        .collect();
    format!(
        r#"{{
  "sm": "n1",
  "sm_options": ["--sweep", "10"],
  "sm_partitions": [
    "Default=0x7fff, ipoib, mtu=5 : ALL=full ;",
    "P1=0x8001, ipoib : {g1}=full, {g2}=full ;"
  ],
  "nodes": [ {nodes} ],
  "switches": [ {{ "name": "sw0", "ports": 3 }} ],
  "links": [ {{ "a": "n1", "b": "sw0:1" }}, {{ "a": "n2", "b": "sw0:2" }},
             {{ "a": "n3", "b": "sw0:3" }} ],
  "guest": {{ "mem": "512M" }}
}}"#,
        g1 = port_guid(1),
        g2 = port_guid(2),
        nodes = nodes.join(",\n    "),
    )
}

const OPENSM_LOG: &str = "/ibtca/opensm.log";
const PORT: &str = "/sys/class/infiniband/ibtca0/ports/1";
const CHILD: &str = "/sys/class/net/ib0.8001";

/// ib0's MTU in datagram mode: the default partition's broadcast group is
/// at IB MTU 4096 (`mtu=5`), less IPoIB's 4-byte header.
const IB0_MTU: usize = 4096 - 4;

/// ib0.8001's MTU: 0x8001's line gives no `mtu`, so OpenSM makes its
/// broadcast group at its default, IB MTU 2048.
const P1_MTU: usize = 2048 - 4;

/// Guest `n`'s IPv4 address on ib0 (the default partition).
fn addr(n: u8) -> String {
    format!("10.11.0.{n}")
}

/// Guest `n`'s IPv4 address on ib0.8001.
fn child_addr(n: u8) -> String {
    format!("10.12.0.{n}")
}

/// Until `cond` holds, a second apart, at most `tries` times.
fn until(cond: &str, tries: u32) -> String {
    format!("i=0; until {cond}; do i=$((i+1)); [ $i -lt {tries} ] || break; sleep 1; done")
}

/// Until the share holds every marker of `markers`; a guest whose check
/// failed leaves `failed` there, and then this fails too.
fn wait_for(markers: &[String]) -> String {
    let all: Vec<String> = markers
        .iter()
        .map(|m| format!("[ -e /share/{m} ]"))
        .collect();
    format!(
        "until {}; do [ -e /share/failed ] && exit 1; sleep 1; done",
        all.join(" && ")
    )
}

/// `cmd`, leaving `failed` in the share if it fails.
fn or_fail(cmd: &str) -> String {
    format!("( {cmd} ) || {{ touch /share/failed; exit 1; }}")
}

/// The commands of guest `n`; `member` says whether it is in 0x8001.
fn commands(n: u8, member: bool) -> Vec<String> {
    let peers: Vec<u8> = (1..=3).filter(|p| *p != n).collect();
    let mut c = Vec::new();
    // The subnet is up once OpenSM says so (n1 tells the others).
    if n == 1 {
        c.push(format!(
            "until grep -q 'SUBNET UP' {OPENSM_LOG}; do sleep 1; done; touch /share/sm-up"
        ));
    } else {
        c.push(wait_for(&["sm-up".to_owned()]));
    }
    c.push(format!(
        "until grep -q ACTIVE {PORT}/state; do sleep 1; done"
    ));
    // A member waits for 0x8001 in its table (the driver rereads it on
    // IB_EVENT_PKEY_CHANGE); then every node lists its non-zero entries.
    if member {
        c.push(until(&format!("grep -qx 0x8001 {PORT}/pkeys/*"), 120));
    }
    c.push(tagged(
        "PKEYS",
        &format!(
            "ls {PORT}/pkeys | wc -l; for f in {PORT}/pkeys/*; do v=$(cat $f); \
             [ \"$v\" = 0x0000 ] || echo \"$(basename $f) $v\"; done"
        ),
    ));
    c.push(tagged("LOAD", "ibtca-load-modules ipoib"));
    c.push("until [ -e /sys/class/net/ib0 ]; do sleep 1; done".to_owned());
    c.push(format!(
        "ip link set ib0 up && ip addr add {}/24 dev ib0",
        addr(n)
    ));
    // IPoIB sets the MTU from the broadcast group before the carrier.
    c.push(tagged(
        "IB0_LINK",
        "until [ \"$(cat /sys/class/net/ib0/carrier 2>/dev/null)\" = 1 ]; do sleep 1; done; \
         cat /sys/class/net/ib0/carrier /sys/class/net/ib0/mode /sys/class/net/ib0/mtu",
    ));
    c.push(tagged(
        "CHILD",
        &format!(
            "echo 0x8001 > /sys/class/net/ib0/create_child && ip link set ib0.8001 up && \
             ip addr add {}/24 dev ib0.8001 && cat {CHILD}/pkey",
            child_addr(n)
        ),
    ));
    for p in &peers {
        c.push(client(
            &format!("PING{p}"),
            &every_echo_answered(&format!("ping -c 3 -W 5 -I ib0 {}", addr(*p))),
            300,
        ));
    }
    // One IP packet of the full MTU (20 + 8 header bytes), unfragmented
    // at the 4092 `IB0_LINK` shows: a 4096-byte datagram on the wire (at
    // 2044 the kernel would fragment it, so this alone does not show the
    // MTU).
    let next = n % 3 + 1;
    c.push(or_fail(&client(
        &format!("FULLMTU{next}"),
        &every_echo_answered(&format!(
            "ping -c 3 -W 5 -s {} -I ib0 {}",
            IB0_MTU - 28,
            addr(next)
        )),
        120,
    )));
    if member {
        let peer = if n == 1 { 2 } else { 1 };
        let carrier = format!("[ \"$(cat {CHILD}/carrier 2>/dev/null)\" = 1 ]");
        c.push(or_fail(&tagged(
            "CHILD_CARRIER",
            &format!("{}; cat {CHILD}/carrier; {carrier}", until(&carrier, 300)),
        )));
        c.push(tagged("P1_MTU", &format!("cat {CHILD}/mtu")));
        c.push(or_fail(&client(
            "P1PING",
            &every_echo_answered(&format!("ping -c 3 -W 5 -I ib0.8001 {}", child_addr(peer))),
            300,
        )));
        c.push(format!("touch /share/p1-{n}"));
    } else {
        // n1's ib0.8001 answered n2: 0x8001 works, for its members.
        c.push(wait_for(&["p1-1".to_owned(), "p1-2".to_owned()]));
        c.push(tagged(
            "N3_CHILD_CARRIER",
            &format!("cat {CHILD}/carrier 2>&1"),
        ));
        c.push(tagged(
            "N3_P1PING",
            &format!(
                "ping -c 3 -W 3 -I ib0.8001 {} 2>&1; echo status=$?",
                child_addr(1)
            ),
        ));
    }
    // Nobody powers off before all have finished pinging it.
    c.push(format!("touch /share/done-{n}"));
    c.push(wait_for(
        &(1..=3).map(|m| format!("done-{m}")).collect::<Vec<_>>(),
    ));
    c
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn partition_0x8001_reaches_its_members_only() {
    let stack = VmStack::get();
    let boot = GuestBoot::with_topology(&stack, "vm-partition", &topology());
    let run = boot.run.clone();

    let share = TempDir::new("partition-share");
    let cmds: Vec<Vec<String>> = (1..=3u8).map(|n| commands(n, n != 3)).collect();
    let Booted { out, said, .. } = boot.up(
        &[
            "--guest-timeout",
            "1500",
            "--share",
            &share.0.display().to_string(),
        ],
        &[
            ("n1", &cmds[0][..]),
            ("n2", &cmds[1][..]),
            ("n3", &cmds[2][..]),
        ],
    );
    let c: Vec<String> = ["n1", "n2", "n3"].iter().map(|n| boot.console(n)).collect();
    for (i, con) in c.iter().enumerate() {
        ibtca_tests::retries::report_console(&format!("n{}", i + 1), con);
    }
    let opensm_log = std::fs::read_to_string(run.join("n1.guest/opensm.log")).unwrap_or_default();
    let all = format!(
        "{said}\n==> n1:\n{}\n==> n2:\n{}\n==> n3:\n{}\n==> opensm.log:\n{opensm_log}",
        c[0], c[1], c[2]
    );
    assert!(out.status.success(), "every guest's commands pass:\n{all}");

    for (i, con) in c.iter().enumerate() {
        let n = i + 1;
        let member = n != 3;
        // The whole table: 64 entries, the default partition at 0, 0x8001
        // where the node is a member.
        let pkeys = tagged_lines(con, "PKEYS");
        assert_eq!(pkeys.first(), Some(&"64"), "n{n}: 64 entries:\n{all}");
        let set: Vec<&str> = pkeys[1..]
            .iter()
            .filter(|l| !l.starts_with("exit="))
            .copied()
            .collect();
        assert!(
            set.contains(&"0 0xffff"),
            "n{n}: 0xffff at 0: {set:?}\n{all}"
        );
        let has_p1 = set.iter().any(|l| l.ends_with(" 0x8001"));
        assert_eq!(has_p1, member, "n{n}: 0x8001 in its table: {set:?}\n{all}");
        assert_eq!(set.len(), 1 + usize::from(member), "n{n}: {set:?}\n{all}");
        assert_eq!(
            tagged_lines(con, "CHILD")[0],
            "0x8001",
            "n{n}: ib0.8001's P_Key:\n{all}"
        );
        let ib0_mtu = IB0_MTU.to_string();
        assert_eq!(
            tagged_lines(con, "IB0_LINK")[..3],
            ["1", "datagram", ib0_mtu.as_str()],
            "n{n}: ib0 up in datagram mode at the default partition's group MTU (4096) \
             less 4:\n{all}"
        );
        let next = n % 3 + 1;
        let full = tagged_lines(con, &format!("FULLMTU{next}")).join("\n");
        assert!(
            full.contains(&format!("{} data bytes", IB0_MTU - 28))
                && full.contains("3 packets transmitted, 3 packets received"),
            "n{n} -> n{next}: {IB0_MTU}-byte packets on ib0: {full}\n{all}"
        );
        for p in (1..=3).filter(|p| *p != n) {
            let ping = tagged_lines(con, &format!("PING{p}")).join("\n");
            assert!(
                ping.contains("3 packets transmitted, 3 packets received"),
                "n{n} -> n{p} on ib0: {ping}\n{all}"
            );
        }
        if member {
            assert_eq!(tagged_lines(con, "CHILD_CARRIER")[0], "1", "n{n}:\n{all}");
            assert_eq!(
                tagged_lines(con, "P1_MTU")[0],
                P1_MTU.to_string(),
                "n{n}: ib0.8001 at 0x8001's group MTU (2048) less 4:\n{all}"
            );
            let ping = tagged_lines(con, "P1PING").join("\n");
            assert!(
                ping.contains("3 packets transmitted, 3 packets received"),
                "n{n} on ib0.8001: {ping}\n{all}"
            );
        }
    }
    // n3 is no member: its child has no carrier, its ping reaches nobody.
    assert_eq!(
        tagged_lines(&c[2], "N3_CHILD_CARRIER")[0],
        "0",
        "n3's ib0.8001 carrier:\n{all}"
    );
    let ping = tagged_lines(&c[2], "N3_P1PING");
    assert!(
        ping.iter().any(|l| l.contains(" 0 packets received")) && ping.contains(&"status=1"),
        "n3 -> n1 over 0x8001 fails: {ping:?}\n{all}"
    );
}
