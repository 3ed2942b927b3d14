//! One boot of guests that run commands, as the VM tests that share a
//! boot between their checks have it: a scratch directory inside the
//! chroot with the topology and the run directory, `ibtca-fabric up
//! TOPOLOGY --guests OPTIONS --wait --run NODE=CMD ...` with the stack's
//! kernel and initramfs, and what it left (the launcher's output, each
//! guest's console); the fabric goes down when the boot is dropped,
//! whatever the test did.

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use crate::launcher::{fabric, text, Down};
use crate::vm::VmStack;
use crate::TempDir;

/// A scratch directory for one `up --guests ... --wait`; `down` and the
/// directory's removal happen on drop, in that order.
pub struct GuestBoot {
    // Declared first: dropped (the fabric taken down) before `dir`.
    down: Option<Down>,
    /// The scratch directory.
    pub dir: TempDir,
    /// The run directory (consoles `NODE.console`, device logs
    /// `NODE.log`, the state file).
    pub run: PathBuf,
    /// The topology file `up` is given (`topology.json` in `dir`).
    pub topology: PathBuf,
    up: Vec<String>,
}

/// What `up --wait` left.
pub struct Booted {
    /// Its exit status and output.
    pub out: Output,
    /// Its stdout followed by its stderr.
    pub said: String,
    /// From its start to its exit (every guest's commands done).
    pub took: Duration,
}

impl GuestBoot {
    /// A scratch directory tagged `tag`; the topology file is not written
    /// (see [`GuestBoot::with_topology`]).
    pub fn new(stack: &VmStack, tag: &str) -> Self {
        let dir = stack.scratch(tag);
        let run = dir.join("run");
        let topology = dir.join("topology.json");
        let up = stack.guests_up(&topology.display().to_string(), &run.display().to_string());
        GuestBoot {
            down: Some(Down(run.clone())),
            dir,
            run,
            topology,
            up,
        }
    }

    /// A scratch directory tagged `tag` with the topology `json` written.
    pub fn with_topology(stack: &VmStack, tag: &str, json: &str) -> Self {
        let boot = Self::new(stack, tag);
        std::fs::write(&boot.topology, json).unwrap();
        boot
    }

    /// The run directory as the launcher's `--run-dir` argument.
    pub fn run_dir(&self) -> String {
        self.run.display().to_string()
    }

    /// The arguments of `ibtca-fabric up TOPOLOGY --run-dir RUN --guests`
    /// with the stack's kernel, initramfs and `run-vm.sh`, then `options`,
    /// `--wait`, and each node's commands as `--run NODE=CMD`, node by
    /// node, in order.
    pub fn up_args<C: AsRef<str>>(
        &self,
        options: &[&str],
        commands: &[(&str, &[C])],
    ) -> Vec<String> {
        let mut args = self.up.clone();
        args.extend(options.iter().map(|o| o.to_string()));
        args.push("--wait".into());
        for (node, cmds) in commands {
            for c in cmds.iter() {
                args.push("--run".into());
                args.push(format!("{node}={}", c.as_ref()));
            }
        }
        args
    }

    /// Runs `ibtca-fabric` with [`GuestBoot::up_args`] and returns when it
    /// exits: every guest's commands done, or one failed or timed out.
    pub fn up<C: AsRef<str>>(&self, options: &[&str], commands: &[(&str, &[C])]) -> Booted {
        let args = self.up_args(options, commands);
        let start = Instant::now();
        let out = fabric(&args.iter().map(String::as_str).collect::<Vec<_>>());
        Booted {
            said: text(&out),
            out,
            took: start.elapsed(),
        }
    }

    /// `NODE.console` (the guest's console) in the run directory, empty if
    /// there is none.
    pub fn console(&self, node: &str) -> String {
        std::fs::read_to_string(self.run.join(format!("{node}.console"))).unwrap_or_default()
    }

    /// `said`, then each of `nodes`' console after a `==> NODE:` line: the
    /// context of an assertion message.
    pub fn all(&self, said: &str, nodes: &[&str]) -> String {
        let mut all = said.to_owned();
        for n in nodes {
            all.push_str(&format!("\n==> {n}:\n{}", self.console(n)));
        }
        all
    }

    /// Takes the fabric down now (`ibtca-fabric down`); the scratch
    /// directory stays until the boot is dropped.
    pub fn down(&mut self) {
        self.down.take();
    }
}
