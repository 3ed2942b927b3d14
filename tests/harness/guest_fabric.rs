//! A fabric with guests for a VM test: a topology written into a scratch
//! directory inside the chroot, brought up by `ibtca-fabric up --guests`
//! with the stack's kernel and initramfs, and taken down when dropped,
//! whatever the test did.

use std::path::PathBuf;

use crate::launcher::{fabric_ok, Down};
use crate::vm::VmStack;
use crate::TempDir;

/// A fabric of guests that is up; `down` and the scratch directory's
/// removal happen on drop, in that order.
pub struct GuestFabric {
    // Declared first: dropped (the fabric taken down) before `dir`.
    _down: Down,
    /// The scratch directory (topology file, run directory).
    pub dir: TempDir,
    /// The run directory (consoles `NODE.console`, device logs
    /// `NODE.log`).
    pub run: PathBuf,
}

impl GuestFabric {
    /// Writes `topology` (JSON) into a scratch directory tagged `tag` and
    /// runs `ibtca-fabric up TOPOLOGY --run-dir RUN --guests` with `extra`
    /// options after the stack's own; panics if `up` fails.
    pub fn up(stack: &VmStack, tag: &str, topology: &str, extra: &[String]) -> Self {
        Self::up_file(stack, tag, ("topology.json", topology), extra)
    }

    /// As [`GuestFabric::up`] with `net`, a net file (`up --net`, docs/net-files.md):
    /// its nodes boot a guest only where `extra`'s `--run` gives commands.
    pub fn up_net(stack: &VmStack, tag: &str, net: &str, extra: &[String]) -> Self {
        let mut args = vec!["--net".to_owned()];
        args.extend_from_slice(extra);
        Self::up_file(stack, tag, ("fabric.net", net), &args)
    }

    fn up_file(stack: &VmStack, tag: &str, (name, text): (&str, &str), extra: &[String]) -> Self {
        let dir = stack.scratch(tag);
        let topo = dir.join(name);
        std::fs::write(&topo, text).unwrap();
        let run = dir.join("run");
        let down = Down(run.clone());
        let mut args = stack.guests_up(&topo.display().to_string(), &run.display().to_string());
        args.extend_from_slice(extra);
        fabric_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        GuestFabric {
            _down: down,
            dir,
            run,
        }
    }

    /// The run directory as the launcher's `--run-dir` argument.
    pub fn run_dir(&self) -> String {
        self.run.display().to_string()
    }

    /// `NODE.console` (the guest's console) in the run directory.
    pub fn console(&self, node: &str) -> PathBuf {
        self.run.join(format!("{node}.console"))
    }
}
