//! Two network namespaces joined by a veth pair, made by the test itself
//! (root only): a stand-in for two hosts on one machine. Each namespace
//! has its end of the pair and an address on it; nothing is added to the
//! namespace the test runs in. Everything is deleted on drop.
//!
//! The link between them can be impaired: with `netem` where the kernel
//! has it (delay and loss), else loss alone by an nftables rule in
//! namespace `a` that drops a share of what it sends at random.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::launcher::{text, Down};
use crate::workspace_bin;

/// The two namespaces and the veth pair between them.
pub struct TwoHosts {
    /// Namespace names: host `a`, host `b`.
    pub ns: [String; 2],
    /// Veth ends: in `a`, in `b`.
    pub dev: [String; 2],
    /// Addresses: of `a`, of `b`.
    pub addr: [String; 2],
}

/// How the veth pair was impaired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impairment {
    /// `netem` delay and loss on both ends.
    Netem,
    /// The kernel has no `netem`: loss only, by nftables in `a`, and
    /// deterministic (the first packets of every hundred).
    LossOnly,
}

/// Runs `program args` and returns its output.
pub fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

/// Runs `program args` and panics with its output if it fails.
pub fn must(program: &str, args: &[&str]) {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether this process may make namespaces (root).
pub fn is_root() -> bool {
    // SAFETY: geteuid takes no arguments and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

impl TwoHosts {
    /// Makes namespaces `<tag>a-<pid>` and `<tag>b-<pid>` joined by a veth
    /// pair, `10.<net>.0.1/24` in `a` and `10.<net>.0.2/24` in `b`.
    pub fn new(tag: &str, net: u8) -> TwoHosts {
        assert!(
            is_root(),
            "this test makes network namespaces and a veth pair: run it as root (CI does)"
        );
        let pid = std::process::id();
        let hosts = TwoHosts {
            ns: [format!("{tag}a-{pid}"), format!("{tag}b-{pid}")],
            // Interface names: at most 15 bytes.
            dev: [
                format!("ib{}a", pid % 1_000_000),
                format!("ib{}b", pid % 1_000_000),
            ],
            addr: [format!("10.{net}.0.1"), format!("10.{net}.0.2")],
        };
        for ns in &hosts.ns {
            must("ip", &["netns", "add", ns]);
        }
        let [da, db] = &hosts.dev;
        must(
            "ip",
            &["link", "add", da, "type", "veth", "peer", "name", db],
        );
        for i in 0..2 {
            let (ns, dev, addr) = (&hosts.ns[i], &hosts.dev[i], &hosts.addr[i]);
            must("ip", &["link", "set", dev, "netns", ns]);
            hosts.exec_ok(i, "ip", &["addr", "add", &format!("{addr}/24"), "dev", dev]);
            hosts.exec_ok(i, "ip", &["link", "set", dev, "up"]);
            hosts.exec_ok(i, "ip", &["link", "set", "lo", "up"]);
        }
        hosts
    }

    /// Runs `program args` in namespace `i` (0: a, 1: b).
    pub fn exec(&self, i: usize, program: &str, args: &[&str]) -> Output {
        let mut all = vec!["netns", "exec", &self.ns[i], program];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// [`Self::exec`], panicking if it fails.
    pub fn exec_ok(&self, i: usize, program: &str, args: &[&str]) {
        let mut all = vec!["netns", "exec", &self.ns[i], program];
        all.extend_from_slice(args);
        must("ip", &all);
    }

    /// A command that runs `program` in namespace `i` (for processes the
    /// test starts and waits for itself).
    pub fn command(&self, i: usize, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i]]).arg(program);
        c
    }

    /// Runs `ibtca-fabric up FILE --host a` in namespace a and `--host b`
    /// in b at once (each waits for its links, the TCP ones needing the
    /// other half), with run directories `runs`; panics if either fails.
    /// The fabrics go down when the result is dropped.
    pub fn up_fabric(&self, file: &Path, runs: &[PathBuf; 2]) -> [Down; 2] {
        let downs = runs.clone().map(Down);
        let ups: Vec<_> = ["a", "b"]
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let child = self
                    .command(i, &workspace_bin("ibtca-fabric"))
                    .args(["up", &file.display().to_string(), "--host", host])
                    .args(["--run-dir", &runs[i].display().to_string()])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("start ibtca-fabric up");
                std::thread::spawn(move || child.wait_with_output().expect("ibtca-fabric up"))
            })
            .collect();
        for (i, up) in ups.into_iter().enumerate() {
            let out = up.join().expect("the up thread");
            assert!(
                out.status.success(),
                "up --host {}: {}",
                ["a", "b"][i],
                text(&out)
            );
        }
        downs
    }

    /// Impairs the pair: `delay_ms` each way and `loss_percent` of the
    /// packets each end sends, with netem (at random); without netem in
    /// the kernel, the first `loss_percent` of every 100 packets `a`
    /// sends, and no delay.
    pub fn impair(&self, delay_ms: u32, loss_percent: u32) -> Impairment {
        let delay = format!("{delay_ms}ms");
        let loss = format!("{loss_percent}%");
        let netem = |i: usize| {
            self.exec(
                i,
                "tc",
                &[
                    "qdisc",
                    "add",
                    "dev",
                    &self.dev[i],
                    "root",
                    "netem",
                    "delay",
                    &delay,
                    "loss",
                    &loss,
                ],
            )
        };
        if netem(0).status.success() {
            let out = netem(1);
            assert!(out.status.success(), "netem on b: {out:?}");
            return Impairment::Netem;
        }
        let share = loss_percent.to_string();
        let table = ["inet", "ibtca_loss"];
        self.exec_ok(0, "nft", &["add", "table", table[0], table[1]]);
        let hook = "{ type filter hook output priority 0; }";
        self.exec_ok(0, "nft", &["add", "chain", table[0], table[1], "out", hook]);
        let rule = [
            "add",
            "rule",
            table[0],
            table[1],
            "out",
            "oifname",
            &self.dev[0],
            "numgen",
            "inc",
            "mod",
            "100",
            "lt",
            &share,
            "counter",
            "drop",
        ];
        self.exec_ok(0, "nft", &rule);
        Impairment::LossOnly
    }

    /// Packets the impairment dropped so far on `a`'s end: the nftables
    /// rule's counter, or netem's `dropped` in `tc -s qdisc`.
    pub fn dropped(&self, how: Impairment) -> u64 {
        let (out, word) = match how {
            Impairment::LossOnly => (
                self.exec(0, "nft", &["list", "table", "inet", "ibtca_loss"]),
                "packets",
            ),
            Impairment::Netem => (
                self.exec(0, "tc", &["-s", "qdisc", "show", "dev", &self.dev[0]]),
                "(dropped",
            ),
        };
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let words: Vec<&str> = text.split_whitespace().collect();
        words
            .windows(2)
            .find(|w| w[0] == word)
            .and_then(|w| w[1].trim_end_matches(',').parse().ok())
            .unwrap_or_else(|| panic!("no `{word}` count in {text}"))
    }
}

impl Drop for TwoHosts {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and with it
        // the pair.
        for ns in &self.ns {
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}
