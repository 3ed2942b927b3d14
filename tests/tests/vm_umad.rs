//! Full stack, QP0 into the guest: two guests on one ibtca link, each with
//! `ib_umad` loaded, run unmodified infiniband-diags through libibumad and
//! the kernel's MAD layer on `ibtca0`:
//!
//! - `smpquery -D nodeinfo 0`: a directed-route SMP of no hops, which the
//!   MAD layer hands to the driver's `process_mad`, which hands it to the
//!   device's own agent (SMA_MAD): the NodeInfo of the guest's own device;
//! - `smpquery -D nodeinfo 0,1`: one hop out of port 1, on the wire from
//!   the guest's QP0 on VL15, answered by the other device's agent; the
//!   answer reaches the guest's QP0 (the device's agent leaves responses
//!   for the SM);
//! - `smpquery nodeinfo 2` (LID-routed to the other device) the same way.
//!
//! Each output's NodeGuid is compared with the topology file's. Then the
//! IsSM capability bit: `smpquery -D portinfo 0` shows it only while a
//! process holds `/dev/infiniband/issm0` open (ib_umad's `modify_port`,
//! which the driver passes to the device's agent: SET_PORT_CAPS), as
//! OpenSM does.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use ibtca_tests::console::{tagged, tagged_lines};
use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;

const TOPOLOGY: &str = r#"{
  "nodes": [
    { "name": "n1", "lid": 1, "node_guid": "0x1200000000220001" },
    { "name": "n2", "lid": 2, "node_guid": "0x1200000000220002" }
  ],
  "links": [ { "a": "n1", "b": "n2" } ],
  "guest": { "mem": "512M" }
}"#;

/// The CapMask smpquery portinfo printed (`CapMask:.....0x...`).
fn cap_mask(lines: &[&str]) -> Option<u32> {
    let l = lines.iter().find(|l| l.starts_with("CapMask:"))?;
    let hex = l.rsplit("0x").next()?;
    u32::from_str_radix(hex.trim(), 16).ok()
}

/// The node GUID smpquery printed (`Guid:.....0x...`).
fn node_guid(lines: &[&str]) -> Option<u64> {
    let l = lines.iter().find(|l| l.starts_with("Guid:"))?;
    let hex = l.rsplit("0x").next()?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn smpquery_reads_node_info_through_umad() {
    let stack = VmStack::get();
    let dir = stack.scratch("umad");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let topo = dir.join("two.json");
    std::fs::write(&topo, TOPOLOGY).unwrap();

    let checks = [
        (
            "SELF-DR",
            "smpquery -C ibtca0 -D nodeinfo 0",
            0x1200_0000_0022_0001,
        ),
        (
            "PEER-DR",
            "smpquery -C ibtca0 -D nodeinfo 0,1",
            0x1200_0000_0022_0002,
        ),
        (
            "PEER-LID",
            "smpquery -C ibtca0 nodeinfo 2",
            0x1200_0000_0022_0002,
        ),
    ];
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(["--guest-timeout", "900", "--wait"].map(String::from));
    args.push("--run".into());
    args.push("n1=ibtca-load-modules umad".into());
    for (tag, cmd, _) in checks {
        args.push("--run".into());
        args.push(format!("n1={}", tagged(tag, cmd)));
    }
    let portinfo = "smpquery -C ibtca0 -D portinfo 0";
    for (tag, cmd) in [
        ("NO-SM", portinfo.to_string()),
        (
            "IS-SM",
            format!("sh -c 'exec 3</dev/infiniband/issm0; {portinfo}'"),
        ),
        ("SM-GONE", portinfo.to_string()),
    ] {
        args.push("--run".into());
        args.push(format!("n1={}", tagged(tag, &cmd)));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fabric(&argv);
    let said = text(&out);
    let c1 = std::fs::read_to_string(run.join("n1.console")).unwrap_or_default();
    let all = format!("{said}\n==> n1:\n{c1}");
    for (tag, cmd, guid) in checks {
        let l = tagged_lines(&c1, tag);
        assert!(l.contains(&"exit=0"), "{cmd}: {l:?}\n{all}");
        assert_eq!(node_guid(&l), Some(guid), "{cmd}: {l:?}\n{all}");
        eprintln!("{cmd}: NodeGuid {guid:#x}");
    }
    const IS_SM: u32 = 1 << 1;
    let caps = |tag| cap_mask(&tagged_lines(&c1, tag));
    let (before, held, after) = (caps("NO-SM"), caps("IS-SM"), caps("SM-GONE"));
    assert!(
        before.is_some_and(|c| c & IS_SM == 0)
            && held.is_some_and(|c| c & IS_SM != 0)
            && after == before,
        "IsSM only while issm0 is open: {before:x?} {held:x?} {after:x?}\n{all}"
    );
    assert!(out.status.success(), "every command passes:\n{all}");
    let out = fabric(&["down", "--run-dir", &run_s]);
    assert!(out.status.success(), "{}", text(&out));
    drop(down);
}
