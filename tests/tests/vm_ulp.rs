//! Full stack, the upper-layer protocols between two guests: one
//! `ibtca-fabric up --guests --share DIR --run ... --wait` boots a target
//! guest (n1) and a host guest (n2), and every check shares that one boot,
//! once over soft-RoCE (rxe0 on the management NIC eth0, the issue's
//! baseline) and once over ibtca (ibtca0, IPoIB addresses on ib0), the two
//! devices side by side in the same guests:
//!
//! - `rping -V`: ten ping-pongs over an RDMA connection made by rdma_cm,
//!   each one's data verified by the client;
//! - `ucmatose`: rdma_cm connection set-up, sends both ways, disconnect;
//! - `udaddy`: UD through rdma_cm (SIDR), datagrams both ways;
//! - `mckey`: a multicast group joined through rdma_cm (on ibtca through
//!   OpenSM's SA), ten datagrams from n2 received in n1;
//! - `rstream` and `riostream` (rsockets): 4 KiB transfers both ways with
//!   their data verification (`-T v`), the byte count they report;
//! - NVMe over Fabrics: an nvmet-rdma target on n1 with a memory-backed
//!   null_blk namespace (1) and a file in tmpfs (2), one port per
//!   transport; n2 runs `nvme discover`, `nvme connect`, fio random and
//!   sequential writes each read back with `--verify=crc32c` on both
//!   namespaces, `nvme disconnect`, connects again and re-reads what it
//!   wrote (fio `--verify_only`): the bytes survived on the target;
//! - over ibtca, the target dropped mid-I/O: while fio writes namespace 1,
//!   n1 removes its ibtca port from the subsystem (nvmet deletes the
//!   controllers connected through it and stops listening); n2's
//!   controller leaves "live", nvme-rdma's reconnects fail until the port
//!   returns, then fio's queued I/O completes and its verification, and a
//!   fresh connection's `--verify_only`, read back every block; n2's kernel
//!   logs no oops, warning or hung task;
//! - last, over ibtca, the target guest killed: n2 connects again
//!   (`ctrl_loss_tmo` 2 s) and, while fio writes namespace 1, the test
//!   SIGKILLs n1's QEMU; n2's controller leaves "live", its reconnects
//!   fail until it gives the controller up, fio's I/O fails (it does not
//!   hang), and afterwards n2's ibtca0 still answers (`ibv_devinfo`: port
//!   active) and its kernel logs no oops, warning or hung task; n1's
//!   device, left without its guest, logs the guest's death, still runs
//!   with its port Active and holds none of the dead guest's QPs
//!   (`ibtca-fabric inspect`), and `up` names n1 alone as the guest that
//!   failed.
//!
//! The guests' commands come from scripts/ulp-guest.sh (as
//! scripts/demo-storage.sh's do) and OpenSM in n1 brings the IB subnet up.
//! Guests wait on events: the listener in `rdma resource show cm_id`,
//! files in the share, block devices appearing, the controller's state;
//! never a fixed sleep.
//!
//! Needs the VM stack (scripts/setup-vm-stack.sh) and root: `scripts/test.sh`
//! runs it; plain `cargo test` lists it as ignored.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ibtca_tests::guest_boot::GuestBoot;
use ibtca_tests::launcher::{fabric, text};
use ibtca_tests::vm::VmStack;
use ibtca_tests::TempDir;

/// How the ULPs reach the other guest: scripts/ulp-guest.sh's transport
/// (`ulp_transport NAME`: the RDMA device, the IP addresses rdma_cm
/// resolves, the commands that bring them up), as that library says.
struct Transport<'a> {
    repo: &'a Path,
    /// `rxe` (rxe0 over eth0, 10.77.0.N) or `ibtca` (ibtca0, IPoIB on ib0).
    name: &'static str,
    /// What its tools' output lines start with: `RXE-RPING-CLIENT ...`.
    tag: &'static str,
    dev: String,
    /// n1's and n2's addresses.
    addr: [String; 2],
}

impl<'a> Transport<'a> {
    fn new(repo: &'a Path, name: &'static str, tag: &'static str) -> Self {
        let mut t = Transport {
            repo,
            name,
            tag,
            dev: String::new(),
            addr: Default::default(),
        };
        let said = t.lib(&["eval", "echo $ULP_DEV ${ULP_ADDR[*]}"]);
        let w: Vec<&str> = said.split_whitespace().collect();
        assert_eq!(w.len(), 3, "{said}");
        t.dev = w[0].to_owned();
        t.addr = [w[1].to_owned(), w[2].to_owned()];
        t
    }

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

    /// `TAG-TOOL`: the name of one tool's run over this transport.
    fn name_of(&self, tool: &str) -> String {
        format!("{}-{tool}", self.tag)
    }

    /// The rdma_cm and rsockets tools' commands: (n1's, n2's), in order.
    /// Each pair is (tool, n1's call, n2's call), a call being
    /// scripts/ulp-guest.sh's function and its arguments after the name.
    fn tools(&self) -> (Vec<String>, Vec<String>) {
        let (a, b) = (&self.addr[0], &self.addr[1]);
        // The group: 10.X.0.1 becomes 239.X.0.1.
        let group = a.replacen("10.", "239.", 1);
        let rs = "-T v -T b -S 4096 -C 16 -I 4";
        let pairs: [(&str, [String; 3], [String; 3]); 6] = [
            (
                "RPING",
                sv(
                    "ulp_server",
                    "7174",
                    format!("rping -s -a {a} -V -C 10 -S 64"),
                ),
                sv(
                    "ulp_client",
                    format!("rping -c -a {a} -I {b} -V -v -C 10 -S 64"),
                    "",
                ),
            ),
            (
                "UCMATOSE",
                sv("ulp_server", "7471", format!("ucmatose -b {a}")),
                sv("ulp_client", format!("ucmatose -s {a} -b {b}"), ""),
            ),
            (
                "UDADDY",
                sv("ulp_server", "7174", format!("udaddy -b {a}")),
                sv("ulp_client", format!("udaddy -s {a} -b {b}"), ""),
            ),
            (
                // The receiver has nothing to announce, so the sender runs
                // again (at most 30 times) until the receiver has its ten.
                "MCKEY",
                sv(
                    "ulp_receiver",
                    format!("timeout 600 mckey -m {group} -b {a} -C 10"),
                    "",
                ),
                sv(
                    "ulp_sender",
                    format!("mckey -m {group} -b {b} -s -C 10"),
                    "30",
                ),
            ),
            (
                "RSTREAM",
                sv("ulp_server", "7472", format!("rstream -b {a} -p 7472 {rs}")),
                sv(
                    "ulp_client",
                    format!("rstream -s {a} -b {b} -p 7472 {rs}"),
                    "",
                ),
            ),
            (
                // riostream's client binds no source address.
                "RIOSTREAM",
                sv(
                    "ulp_server",
                    "7473",
                    format!("riostream -b {a} -p 7473 {rs}"),
                ),
                sv("ulp_client", format!("riostream -s {a} -p 7473 {rs}"), ""),
            ),
        ];
        let (mut n1, mut n2) = (Vec::new(), Vec::new());
        for (tool, server, client) in pairs {
            let name = self.name_of(tool);
            let call = |v: &[String; 3]| {
                let mut c = vec![v[0].as_str(), name.as_str()];
                c.extend(v[1..].iter().map(String::as_str).filter(|x| !x.is_empty()));
                self.lib(&c)
            };
            n1.push(call(&server));
            n2.push(call(&client));
        }
        (n1, n2)
    }
}

/// A library call: function and up to two arguments ("" for none).
fn sv(f: &str, x: impl Into<String>, y: impl Into<String>) -> [String; 3] {
    [f.to_owned(), x.into(), y.into()]
}

/// How much each fio job writes, and how fio's summary line says it: 4 MiB
/// (1,024 random 4 KiB writes at queue depth 16, then as many verified
/// reads), over either transport; soft-RoCE's random writes run at a few
/// hundred KiB/s under TCG.
const FIO_SIZE: (&str, &[&str]) = ("4M", &["io=4096KiB", "io=4.00MiB"]);

/// The job the target drops under writes 16 MiB, so that it still runs
/// when the controller has left "live".
const OUTAGE_FIO_SIZE: (&str, &[&str]) = ("16M", &["io=16.0MiB"]);

/// One fio job of `size` with crc32c verification on namespace `ns`
/// (`ns1`, `ns2`: the host's shell variables), its output tagged
/// `FIO-TAG `, then its exit status as `FIO-TAG-RC N`.
fn fio(tag: &str, ns: &str, size: &str, args: &str) -> String {
    format!(
        "fio --name={tag} --filename=${ns} --ioengine=libaio --direct=1 --size={size} \
         --verify=crc32c --verify_fatal=1 --verify_state_save=0 {args} 2>&1 | \
         sed 's/^/FIO-{tag} /'; s=$?; echo \"FIO-{tag}-RC $s\"; [ $s = 0 ] || rc=$s\n"
    )
}

/// The fio job the target drops under: 16 MiB of random 4 KiB writes on
/// namespace 1 past the other jobs' ranges, then read back and verified.
fn outage_fio(extra: &str) -> String {
    fio(
        "kill1",
        "ns1",
        OUTAGE_FIO_SIZE.0,
        &format!("--rw=randwrite --bs=4k --iodepth=16 --offset=48M{extra}"),
    )
}

/// n2's fio when n1 is killed: 4 KiB random writes on namespace 1 (past
/// the other jobs' ranges) until an I/O fails; its output tagged
/// `FIO-killed `, its status as `FIO-killed-RC N` (a failure expected).
const KILLED_FIO: &str = "fio --name=killed --filename=$ns1 --ioengine=libaio --direct=1 \
     --size=16M --offset=48M --rw=randwrite --bs=4k --iodepth=16 --time_based --runtime=600 \
     2>&1 | sed 's/^/FIO-killed /'; echo \"FIO-killed-RC $?\"";

/// SIGKILLs the QEMU of `node`'s guest in the fabric of `run` and waits
/// until it is gone: the guest dies outright, its device runs on.
fn kill_guest(run: &Path, node: &str) {
    let state = ibtca_fabric::state::State::load(run)
        .expect("the fabric's state")
        .expect("a fabric in the run directory");
    let guest = state
        .processes
        .iter()
        .find(|p| p.guest && p.name == format!("{node} (guest)"))
        .unwrap_or_else(|| panic!("no guest {node}: {state:?}"));
    let qemu = ibtca_fabric::guests::descendants(guest.pid)
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.starts_with("qemu-system"))
        })
        .unwrap_or_else(|| panic!("no QEMU under {node}'s run-vm.sh ({})", guest.pid));
    let st = Command::new("kill")
        .args(["-KILL", &qemu.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "kill -KILL {qemu}");
    // Gone, or a zombie until run-vm.sh reaps it.
    let stat = format!("/proc/{qemu}/stat");
    while std::fs::read_to_string(&stat).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    }) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// fio random and sequential writes, each read back and verified, on both
/// namespaces; `outage` (ulp_outage's shell) next; then disconnect, connect
/// again and verify it all again (`--verify_only`: read and check, write
/// nothing).
fn host_body(outage: Option<String>) -> String {
    let size = FIO_SIZE.0;
    let jobs = |extra: &str| {
        [
            fio(
                "rand1",
                "ns1",
                size,
                &format!("--rw=randwrite --bs=4k --iodepth=16{extra}"),
            ),
            fio(
                "seq1",
                "ns1",
                size,
                &format!("--rw=write --bs=128k --iodepth=4 --offset=32M{extra}"),
            ),
            fio(
                "rand2",
                "ns2",
                size,
                &format!("--rw=randwrite --bs=4k --iodepth=16{extra}"),
            ),
            fio(
                "seq2",
                "ns2",
                size,
                &format!("--rw=write --bs=128k --iodepth=4 --offset=32M{extra}"),
            ),
        ]
        .concat()
    };
    let reverify = if outage.is_some() {
        outage_fio(" --verify_only")
    } else {
        String::new()
    };
    format!(
        "{}{}nvmf_down || exit 1\necho ULP-RECONNECT\nnvmf_up || exit 1\n{}{reverify}echo ULP-HOST-DONE",
        jobs(""),
        outage.unwrap_or_default(),
        jobs(" --verify_only")
    )
}

/// The lines of `console` starting with `prefix`.
fn lines<'a>(console: &'a str, prefix: &str) -> Vec<&'a str> {
    console.lines().filter(|l| l.starts_with(prefix)).collect()
}

/// The lines of `console` from the line `from` up to the line `to` (or
/// the end).
fn section(console: &str, from: &str, to: Option<&str>) -> String {
    console
        .lines()
        .skip_while(|l| *l != from)
        .take_while(|l| Some(*l) != to)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Boots n1 and n2 once and checks every tool and NVMe-oF over both
/// transports, and the target dropped mid-I/O over ibtca.
#[test]
#[ignore = "boots QEMU guests; run by scripts/test.sh"]
fn rdma_cm_rsockets_and_nvme_of_over_soft_roce_and_ibtca() {
    let stack = VmStack::get();
    let rxe = Transport::new(stack.repo(), "rxe", "RXE");
    let ib = Transport::new(stack.repo(), "ibtca", "IBTCA");
    let mut boot = GuestBoot::new(&stack, "ulp");
    let run = boot.run.clone();
    rxe.lib(&["ulp_topology", &boot.topology.display().to_string()]);
    let share = TempDir::new("ulp-share");
    let mut n1 = vec![rxe.lib(&["ulp_setup", "1", "rxe", "ibtca"])];
    let mut n2 = vec![rxe.lib(&["ulp_setup", "2", "rxe", "ibtca"])];
    for t in [&rxe, &ib] {
        let (s, c) = t.tools();
        n1.extend(s);
        n2.extend(c);
    }
    n1.push(rxe.lib(&["ulp_target", "rxe", "ibtca"]));
    n2.push(rxe.lib(&["ulp_host", &host_body(None)]));
    let outage = ib.lib(&["ulp_outage", &outage_fio("")]);
    n2.push(ib.lib(&["ulp_host", &host_body(Some(outage))]));
    // The last step: n1 killed (nothing after it in either guest).
    n1.push(ib.lib(&["ulp_doomed"]));
    n2.push(ib.lib(&["ulp_killed", KILLED_FIO]));
    let args = boot.up_args(
        &[
            "--share",
            &share.0.display().to_string(),
            "--guest-timeout",
            "1500",
        ],
        &[("n1", &n1[..]), ("n2", &n2[..])],
    );
    let start = Instant::now();
    let up = std::thread::spawn(move || {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        fabric(&argv)
    });
    // n2 asks for n1's death once its fio is under way.
    let asked = share.0.join("target-kill");
    let mut killed_at = None;
    while !up.is_finished() {
        if asked.exists() {
            eprintln!("killing n1: {:.0} s", start.elapsed().as_secs_f64());
            killed_at = Some(start.elapsed());
            kill_guest(&run, "n1");
            std::fs::write(share.0.join("target-killed"), "").unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = up.join().unwrap();
    let said = text(&out);
    let (c1, c2) = (boot.console("n1"), boot.console("n2"));
    let all = boot.all(&said, &["n1", "n2"]);
    eprintln!("two guests: {:.0} s\n{said}", start.elapsed().as_secs_f64());
    if let Some(at) = killed_at {
        eprintln!(
            "from n1's death to n2's power-off: {:.0} s",
            (start.elapsed() - at).as_secs_f64()
        );
    }
    // n1 died of its kill; every command of n2 passed.
    assert!(killed_at.is_some(), "n2 never asked for n1's death:\n{all}");
    assert!(!out.status.success(), "{all}");
    assert!(said.contains("guest n2: commands passed"), "{all}");
    let failed = said
        .lines()
        .find(|l| l.contains("guests that failed: "))
        .unwrap_or_default();
    assert!(
        failed.contains("guests that failed: n1 (") && !failed.contains("n2"),
        "{failed}\n{all}"
    );
    assert!(!c1.contains("ULP-DOOMED survived"), "{all}");

    for t in [&rxe, &ib] {
        check_tools(t, &c1, &c2, &all);
        let host = section(
            &c2,
            &format!("ULP-HOST {}", t.name),
            Some(if t.name == "rxe" {
                "ULP-HOST ibtca"
            } else {
                "ULP-KILLED ibtca"
            }),
        );
        check_nvme_of(t, &host, &all);
    }
    check_outage(
        &c1,
        &section(&c2, "ULP-HOST ibtca", Some("ULP-KILLED ibtca")),
        &all,
    );
    check_killed(&run, &section(&c2, "ULP-KILLED ibtca", None), &all);

    // The file namespace holds fio's blocks in its first MiB, not zeros.
    let nonzero = lines(&c1, "ULP-NS2-NONZERO ");
    let n: u64 = nonzero
        .first()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(n > 0, "{nonzero:?}\n{all}");
    boot.down();
}

/// rping, ucmatose, udaddy, mckey, rstream and riostream over `t` did what
/// they say.
fn check_tools(t: &Transport, c1: &str, c2: &str, all: &str) {
    let dev = &t.dev;
    for (n, c) in [("n1", c1), ("n2", c2)] {
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
    let out = |c: &str, tool: &str, side: &str| {
        lines(c, &format!("{}-{side} ", t.name_of(tool))).join("\n")
    };

    // rping: ten verified ping-pongs ("-V" fails the client on a mismatch).
    let pings = lines(
        c2,
        &format!("{}-CLIENT ping data: rdma-ping-", t.name_of("RPING")),
    );
    assert_eq!(pings.len(), 10, "{dev}: {pings:?}\n{all}");

    // ucmatose and udaddy: both ends completed their transfers; mckey: the
    // receiver got its ten datagrams through the group, a sender run
    // joined it and sent.
    for tool in ["UCMATOSE", "UDADDY", "MCKEY"] {
        for (c, side) in [(c1, "SERVER"), (c2, "CLIENT")] {
            let said = out(c, tool, side);
            assert!(
                said.contains("data transfers complete") && said.contains("return status 0"),
                "{dev} {tool} {side}:\n{said}\n{all}"
            );
        }
    }
    assert!(
        out(c2, "MCKEY", "CLIENT").contains("mckey: joined dgid: "),
        "{dev}\n{all}"
    );

    // rstream and riostream: the custom test's line, 4 KiB x 16 transfers
    // x 4 iterations each way (512 KiB), each received buffer verified
    // (a mismatch ends the run before this line, with a failed status).
    for tool in ["RSTREAM", "RIOSTREAM"] {
        for (c, side) in [(c1, "SERVER"), (c2, "CLIENT")] {
            let said = out(c, tool, side);
            let result: Vec<Vec<&str>> = said
                .lines()
                .map(|l| l.split_whitespace().skip(1).take(5).collect())
                .filter(|w: &Vec<&str>| w.first() == Some(&"custom"))
                .collect();
            assert_eq!(
                result,
                [["custom", "4k", "16", "4", "512k"]],
                "{dev} {tool} {side}:\n{said}\n{all}"
            );
        }
    }
}

/// NVMe-oF over `t`, in `host` (n2's console from its `ulp_host` on): the
/// discovery log, both namespaces on both connections, every fio job.
fn check_nvme_of(t: &Transport, host: &str, all: &str) {
    let (dev, a) = (&t.dev, &t.addr[0]);
    // The discovery log names the subsystem on rdma at the target's
    // address; both namespaces appeared on both connections.
    let disc = lines(host, "ULP-DISCOVER ").join("\n");
    assert!(
        disc.contains("nqn.2026-11.io.ibtca:ulp")
            && disc.contains("trtype:  rdma")
            && disc.contains(&format!("traddr:  {a}")),
        "{dev} discovery log:\n{disc}\n{all}"
    );
    assert_eq!(lines(host, "ULP-NS ").len(), 2, "{dev}\n{all}");
    assert_eq!(lines(host, "ULP-RECONNECT").len(), 1, "{dev}\n{all}");
    assert_eq!(lines(host, "ULP-HOST-DONE").len(), 1, "{dev}\n{all}");
    // Every fio run exited 0 and read back what the job covers: its size
    // written and verified per job, then re-verified after the
    // reconnect (the two runs of each tag, in order).
    let mut tags = vec![("rand1", FIO_SIZE.1), ("seq1", FIO_SIZE.1)];
    tags.extend([("rand2", FIO_SIZE.1), ("seq2", FIO_SIZE.1)]);
    if t.name == "ibtca" {
        tags.push(("kill1", OUTAGE_FIO_SIZE.1));
    }
    for (tag, io) in tags {
        let rc = lines(host, &format!("FIO-{tag}-RC "));
        assert_eq!(
            rc,
            [format!("FIO-{tag}-RC 0"), format!("FIO-{tag}-RC 0")],
            "{dev}\n{all}"
        );
        let ran = lines(host, &format!("FIO-{tag} "));
        let reads = ran
            .iter()
            .filter(|l| l.contains("READ: bw=") && io.iter().any(|s| l.contains(s)))
            .count();
        let writes = ran
            .iter()
            .filter(|l| l.contains("WRITE: bw=") && io.iter().any(|s| l.contains(s)))
            .count();
        assert_eq!(
            (reads, writes),
            (2, 1),
            "{dev} fio {tag}: verified reads on both connections, writes on the first:\n{}\n{all}",
            ran.join("\n")
        );
        assert!(
            !ran.iter().any(|l| l.contains("verify: bad")),
            "{dev} fio {tag} found corrupt data:\n{all}"
        );
    }
    for tag in ["rand1", "seq1"] {
        for l in lines(host, &format!("FIO-{tag} "))
            .iter()
            .filter(|l| l.contains(": bw="))
        {
            eprintln!("{dev} {l}");
        }
    }
}

/// The target dropped mid-I/O over ibtca (`ulp_outage`): n1 removed the
/// port and restored it; n2 saw its controller leave "live" while fio ran,
/// a reconnect fail against the missing port, the controller live again,
/// and logged no kernel trouble. (fio's own result: check_nvme_of's
/// `kill1`.)
fn check_outage(c1: &str, host: &str, all: &str) {
    for what in ["DROPPED", "BACK"] {
        assert_eq!(
            lines(c1, &format!("ULP-TARGET-{what} port 10.78.0.1:4420")).len(),
            1,
            "{what}\n{all}"
        );
    }
    let said = lines(host, "ULP-OUTAGE ");
    let seen = |prefix: &str| said.iter().find(|l| l.starts_with(prefix)).copied();
    let lost = seen("ULP-OUTAGE controller ").unwrap_or_default();
    assert!(
        lost.ends_with(" fio running")
            && ["resetting", "connecting"]
                .iter()
                .any(|s| lost.contains(&format!("controller {s} "))),
        "the controller left live while fio ran: {said:?}\n{all}"
    );
    assert!(
        seen("ULP-OUTAGE reconnect ").is_some_and(|l| l.contains("Failed reconnect attempt")),
        "{said:?}\n{all}"
    );
    assert!(
        seen("ULP-OUTAGE back live ").is_some_and(|l| l.contains("Successfully reconnected")),
        "{said:?}\n{all}"
    );
    assert_eq!(
        seen("ULP-OUTAGE kernel-trouble "),
        Some("ULP-OUTAGE kernel-trouble 0"),
        "{said:?}\n{all}"
    );
}

/// The target guest killed mid-I/O (`ulp_killed`, in `host`, n2's console
/// from it on): fio ran when n1 died; n2's controller left "live", its
/// reconnects failed and it was removed; fio's I/O failed instead of
/// hanging; n2's ibtca0 still answers and its kernel logged no trouble;
/// n1's device logged its guest's death.
fn check_killed(run: &Path, host: &str, all: &str) {
    let said = lines(host, "ULP-KILLED ");
    let seen = |prefix: &str| said.iter().find(|l| l.starts_with(prefix)).copied();
    assert_eq!(
        seen("ULP-KILLED target dead"),
        Some("ULP-KILLED target dead, fio running"),
        "{said:?}\n{all}"
    );
    let state = seen("ULP-KILLED controller ").unwrap_or_default();
    assert!(
        state != "ULP-KILLED controller live" && !state.contains("gone"),
        "{said:?}\n{all}"
    );
    assert!(
        seen("ULP-KILLED controller gone").is_some(),
        "{said:?}\n{all}"
    );
    assert!(
        said.iter()
            .any(|l| l.starts_with("ULP-KILLED kernel: ") && l.contains("Failed reconnect attempt")),
        "{said:?}\n{all}"
    );
    // fio ended on a failed I/O.
    let rc = lines(host, "FIO-killed-RC ");
    assert!(rc.len() == 1 && rc[0] != "FIO-killed-RC 0", "{rc:?}\n{all}");
    let fio = lines(host, "FIO-killed ").join("\n");
    assert!(
        fio.contains("Input/output error") || fio.contains("err="),
        "{fio}\n{all}"
    );
    assert_eq!(
        seen("ULP-KILLED after "),
        Some("ULP-KILLED after port PORT_ACTIVE (4)"),
        "{said:?}\n{all}"
    );
    assert_eq!(
        seen("ULP-KILLED kernel-trouble "),
        Some("ULP-KILLED kernel-trouble 0"),
        "{said:?}\n{all}"
    );
    let n1 = std::fs::read_to_string(run.join("n1.log")).unwrap_or_default();
    assert!(n1.contains("client disconnected"), "n1's device:\n{n1}");
    check_orphaned_device(run, &n1);
}

/// n1's device after its guest's death (the fabric still runs: `up
/// --wait` leaves it to `down`): its process lives and answers on its
/// control socket, its port is still Active (OpenSM, which died with n1,
/// set it so), and it holds no QP: it dropped every object of the dead
/// guest when the guest's vfio-user connection closed (the server logs
/// "client disconnected" after that reset, so the log line already
/// checked orders this query after it).
fn check_orphaned_device(run: &Path, log: &str) {
    let out = fabric(&["inspect", "--run-dir", &run.display().to_string(), "--json"]);
    let said = text(&out);
    let inspect: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("inspect --json: {e}: {said}"));
    let n1 = inspect["processes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "n1"))
        .unwrap_or_else(|| panic!("no device n1 in {inspect}"));
    assert_eq!(n1["kind"], "device", "{n1}");
    assert_eq!(
        n1["alive"], true,
        "n1's device outlives its guest: {n1}\n{log}"
    );
    assert_eq!(n1["agent"]["port"]["state"], "Active", "{n1}\n{log}");
    assert_eq!(
        n1["agent"]["qps"]["count"], 0,
        "n1's device dropped its dead guest's QPs: {n1}\n{log}"
    );
}
