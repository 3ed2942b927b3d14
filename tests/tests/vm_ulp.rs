//! Full stack, the upper-layer protocols between two guests: one
//! `ibtca-fabric up --guests --share DIR --run ... --wait` boots a target
//! guest (n1) and a host guest (n2), and every check shares that one boot:
//!
//! - `rping -V`: ten ping-pongs over an RDMA connection made by rdma_cm,
//!   each one's data verified by the client;
//! - `ucmatose`: rdma_cm connection set-up, sends both ways, disconnect;
//! - NVMe over Fabrics: an nvmet-rdma target on n1 with a memory-backed
//!   null_blk namespace (1) and a file in tmpfs (2); n2 runs `nvme
//!   discover`, `nvme connect`, fio random and sequential writes each read
//!   back with `--verify=crc32c` on both namespaces, `nvme disconnect`,
//!   connects again and re-reads what it wrote (fio `--verify_only`): the
//!   bytes survived on the target.
//!
//! The guests' commands come from scripts/ulp-guest.sh (as
//! scripts/demo-storage.sh's do), OpenSM in n1 brings the IB subnet up,
//! and the RDMA device and the addresses are a parameter ([`Transport`]):
//! today `rxe`, soft-RoCE (rxe0 on the management NIC eth0, the issue's
//! baseline); the ibtca variant (ibtca0, IPoIB addresses on ib0) is one
//! more test calling `ulps_between_two_guests("ibtca")` once IPoIB runs
//! (docs/ulp.md). Guests wait on events: the listener in `rdma resource
//! show cm_id`, files in the share, block devices appearing; never a fixed
//! sleep.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use ibtca_tests::launcher::{fabric, text, Down};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

/// How the ULPs reach the other guest: scripts/ulp-guest.sh's transport
/// (`ulp_transport NAME`: the RDMA device, the IP addresses rdma_cm
/// resolves, the commands that bring them up), as that library says.
struct Transport<'a> {
    repo: &'a Path,
    /// `rxe` (rxe0 over eth0, 10.77.0.N) or `ibtca` (ibtca0, IPoIB on ib0).
    name: &'static str,
}

impl Transport<'_> {
    /// The output of scripts/ulp-guest.sh's `CALL...` after `ulp_transport`.
    fn lib(&self, call: &[&str]) -> String {
        let out = Command::new("bash")
            .arg("-c")
            .arg(". scripts/ulp-guest.sh && ulp_transport \"$0\" && \"$@\"")
            .arg(self.name)
            .args(call)
            .current_dir(self.repo)
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "ulp-guest.sh {call:?}: {}",
            text(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// The RDMA device and the addresses of n1 and n2.
    fn device_and_addresses(&self) -> (String, [String; 2]) {
        let said = self.lib(&["eval", "echo $ULP_DEV ${ULP_ADDR[*]}"]);
        let w: Vec<&str> = said.split_whitespace().collect();
        assert_eq!(w.len(), 3, "{said}");
        (w[0].to_owned(), [w[1].to_owned(), w[2].to_owned()])
    }
}

/// One fio job with crc32c verification on namespace `ns` (`ns1`, `ns2`:
/// the host's shell variables), its output tagged `FIO-TAG `, then its exit
/// status as `FIO-TAG-RC N`.
fn fio(tag: &str, ns: &str, args: &str) -> String {
    format!(
        "fio --name={tag} --filename=${ns} --ioengine=libaio --direct=1 --size=16M \
         --verify=crc32c --verify_fatal=1 --verify_state_save=0 {args} 2>&1 | \
         sed 's/^/FIO-{tag} /'; s=$?; echo \"FIO-{tag}-RC $s\"; [ $s = 0 ] || rc=$s\n"
    )
}

/// fio random and sequential writes, each read back and verified, on both
/// namespaces; then disconnect, connect again and verify it all again
/// (`--verify_only`: read and check, write nothing).
fn host_body() -> String {
    let jobs = |extra: &str| {
        [
            fio(
                "rand1",
                "ns1",
                &format!("--rw=randwrite --bs=4k --iodepth=16{extra}"),
            ),
            fio(
                "seq1",
                "ns1",
                &format!("--rw=write --bs=128k --iodepth=4 --offset=32M{extra}"),
            ),
            fio(
                "rand2",
                "ns2",
                &format!("--rw=randwrite --bs=4k --iodepth=16{extra}"),
            ),
            fio(
                "seq2",
                "ns2",
                &format!("--rw=write --bs=128k --iodepth=4 --offset=32M{extra}"),
            ),
        ]
        .concat()
    };
    format!(
        "{}nvmf_down || exit 1\necho ULP-RECONNECT\nnvmf_up || exit 1\n{}echo ULP-HOST-DONE",
        jobs(""),
        jobs(" --verify_only")
    )
}

/// The lines of `console` starting with `prefix`.
fn lines<'a>(console: &'a str, prefix: &str) -> Vec<&'a str> {
    console.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// Boots n1 and n2 with transport `name` and checks rping, ucmatose and
/// NVMe-oF.
fn ulps_between_two_guests(name: &'static str) {
    let stack = VmStack::get();
    let t = Transport {
        repo: stack.repo(),
        name,
    };
    let (dev, addr) = t.device_and_addresses();
    let (a, b) = (&addr[0], &addr[1]);
    let dir = stack.scratch("ulp");
    let run = dir.join("run");
    let run_s = run.display().to_string();
    let down = Down(run.clone());
    let topo = dir.join("two.json");
    t.lib(&["ulp_topology", &topo.display().to_string()]);
    let share = TempDir::new("ulp-share");
    let n1 = [
        t.lib(&["ulp_setup", "1"]),
        t.lib(&[
            "ulp_server",
            "RPING",
            "7174",
            &format!("rping -s -a {a} -V -C 10 -S 64"),
        ]),
        t.lib(&[
            "ulp_server",
            "UCMATOSE",
            "7471",
            &format!("ucmatose -b {a}"),
        ]),
        t.lib(&["ulp_target"]),
    ];
    let n2 = [
        t.lib(&["ulp_setup", "2"]),
        t.lib(&[
            "ulp_client",
            "RPING",
            &format!("rping -c -a {a} -I {b} -V -v -C 10 -S 64"),
        ]),
        t.lib(&["ulp_client", "UCMATOSE", &format!("ucmatose -s {a} -b {b}")]),
        t.lib(&["ulp_host", &host_body()]),
    ];
    let mut args = stack.guests_up(&topo.display().to_string(), &run_s);
    args.extend(
        [
            "--share",
            &share.0.display().to_string(),
            "--guest-timeout",
            "1500",
            "--wait",
        ]
        .map(String::from),
    );
    for (node, cmds) in [("n1", n1), ("n2", n2)] {
        for c in cmds {
            args.push("--run".into());
            args.push(format!("{node}={c}"));
        }
    }
    let start = Instant::now();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = fabric(&argv);
    let said = text(&out);
    let console =
        |n: &str| std::fs::read_to_string(run.join(format!("{n}.console"))).unwrap_or_default();
    let (c1, c2) = (console("n1"), console("n2"));
    let all = format!("{said}\n==> n1:\n{c1}\n==> n2:\n{c2}");
    eprintln!("two guests: {:.0} s\n{said}", start.elapsed().as_secs_f64());
    assert!(out.status.success(), "every command passes:\n{all}");
    for (n, c) in [("n1", &c1), ("n2", &c2)] {
        assert!(
            // rxe's line goes on "state ACTIVE"; an IB port's names its
            // subnet prefix, LIDs and LMC first.
            lines(c, &format!("ULP-LINK {n} link {dev}/1 "))
                .iter()
                .filter(|l| l.contains(" state ACTIVE "))
                .count()
                == 1,
            "{dev} is up in {n}\n{all}"
        );
    }

    // rping: ten verified ping-pongs ("-V" fails the client on a mismatch).
    let pings = lines(&c2, "RPING-CLIENT ping data: rdma-ping-");
    assert_eq!(pings.len(), 10, "{pings:?}\n{all}");

    // ucmatose: both ends completed their transfers.
    for (c, side) in [(&c1, "SERVER"), (&c2, "CLIENT")] {
        let said = lines(c, &format!("UCMATOSE-{side} ")).join("\n");
        assert!(
            said.contains("data transfers complete") && said.contains("return status 0"),
            "ucmatose {side}:\n{said}\n{all}"
        );
    }

    // NVMe-oF: the discovery log names the subsystem on rdma at the
    // target's address; both namespaces appeared on both connections.
    let disc = lines(&c2, "ULP-DISCOVER ").join("\n");
    assert!(
        disc.contains("nqn.2026-11.io.ibtca:ulp")
            && disc.contains("trtype:  rdma")
            && disc.contains(&format!("traddr:  {a}")),
        "discovery log:\n{disc}\n{all}"
    );
    assert_eq!(lines(&c2, "ULP-NS ").len(), 2, "{all}");
    assert_eq!(lines(&c2, "ULP-RECONNECT").len(), 1, "{all}");
    assert_eq!(lines(&c2, "ULP-HOST-DONE").len(), 1, "{all}");
    // Every fio run exited 0 and read back what the job covers: 16 MiB
    // written and verified per job, then 16 MiB re-verified after the
    // reconnect (the two runs of each tag, in order).
    for tag in ["rand1", "seq1", "rand2", "seq2"] {
        let rc = lines(&c2, &format!("FIO-{tag}-RC "));
        assert_eq!(
            rc,
            [format!("FIO-{tag}-RC 0"), format!("FIO-{tag}-RC 0")],
            "{all}"
        );
        let ran = lines(&c2, &format!("FIO-{tag} "));
        let reads = ran
            .iter()
            .filter(|l| l.contains("READ: bw=") && l.contains("io=16.0MiB"))
            .count();
        let writes = ran
            .iter()
            .filter(|l| l.contains("WRITE: bw=") && l.contains("io=16.0MiB"))
            .count();
        assert_eq!(
            (reads, writes),
            (2, 1),
            "fio {tag}: verified reads on both connections, writes on the first:\n{}\n{all}",
            ran.join("\n")
        );
        assert!(
            !ran.iter().any(|l| l.contains("verify: bad")),
            "fio {tag} found corrupt data:\n{all}"
        );
    }
    // The file namespace holds fio's blocks in its first MiB, not zeros.
    let nonzero = lines(&c1, "ULP-NS2-NONZERO ");
    let n: u64 = nonzero
        .first()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(n > 0, "{nonzero:?}\n{all}");
    for tag in ["rand1", "seq1"] {
        for l in lines(&c2, &format!("FIO-{tag} "))
            .iter()
            .filter(|l| l.contains(": bw="))
        {
            eprintln!("{l}");
        }
    }
    drop(down);
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn rping_ucmatose_and_nvme_of_over_soft_roce() {
    ulps_between_two_guests("rxe");
}

#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn rping_ucmatose_and_nvme_of_over_ibtca_and_ipoib() {
    ulps_between_two_guests("ibtca");
}
