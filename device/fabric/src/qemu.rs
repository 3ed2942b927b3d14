//! The QEMU command line of each guest, following `qemu-configs/`: guest
//! RAM in a shared memfd (the device maps it), q35, and the ibtca device as
//! `vfio-user-pci` in JSON form (QEMU rejects the dotted `socket.path=`
//! spelling).

use std::path::Path;

use super::plan::NodePlan;
use super::topology::{GuestSpec, Topology};

/// The guest settings of node `name`: its own `guest` entry over the
/// file's `guest` section (kernel command lines add up).
pub fn node_guest(topo: &Topology, name: &str) -> GuestSpec {
    let mut g = topo.guest.clone();
    if let Some(own) = topo
        .nodes
        .iter()
        .find(|n| n.name == name)
        .and_then(|n| n.guest.as_ref())
    {
        g.mem = own.mem.clone().unwrap_or(g.mem);
        g.kernel = own.kernel.clone().or(g.kernel);
        g.initrd = own.initrd.clone().or(g.initrd);
        if let Some(a) = &own.append {
            g.append = format!("{} {a}", g.append).trim().to_owned();
        }
    }
    g
}

/// A shell script that boots the guest of `node`. Kernel and initramfs
/// default to the bundled guest built by `scripts/build-guest.sh`.
pub fn guest_script(node: &NodePlan, guest: &GuestSpec) -> String {
    let dir = "${IBTCA_GUEST_DIR:-${IBTCA_CACHE:-$HOME/.cache/ibtca}/guest}";
    let kernel = guest.kernel.clone().unwrap_or(format!("{dir}/vmlinuz"));
    let initrd = guest
        .initrd
        .clone()
        .unwrap_or(format!("{dir}/initramfs.cpio.gz"));
    let socket = node.socket.display();
    let device = format!(
        r#"{{"driver":"vfio-user-pci","id":"tca0","socket":{{"type":"unix","path":"{socket}"}}}}"#
    );
    let append = format!("console=ttyS0 panic=-1 {}", guest.append)
        .trim_end()
        .to_owned();
    let mut prefix = node
        .guest_cpus
        .as_ref()
        .map(|c| format!("taskset -c {c} "))
        .unwrap_or_default();
    if let Some(n) = node.guest_nice {
        prefix.push_str(&format!("nice -n {n} "));
    }
    format!(
        "#!/bin/sh\n\
         # Guest `{name}` (LID {lid}) on the ibtca device at {socket}.\n\
         # Written by `ibtca-fabric up`; run it once the fabric is up. With the\n\
         # bundled VM stack (QEMU in a chroot) use instead:\n\
         #   scripts/run-vm.sh --socket {socket} --kernel KERNEL --initrd INITRD\n\
         # (the socket must then be inside the chroot: pick such a --run-dir).\n\
         exec {prefix}qemu-system-x86_64 -nodefaults -no-user-config -display none \\\n  \
         -accel tcg -cpu max -m {mem} \\\n  \
         -object memory-backend-memfd,id=mem,size={mem},share=on \\\n  \
         -machine q35,memory-backend=mem -no-reboot -serial stdio \\\n  \
         -device '{device}' \\\n  \
         -kernel \"{kernel}\" -initrd \"{initrd}\" \\\n  \
         -append '{append}' \"$@\"\n",
        name = node.name,
        lid = node.lid,
        mem = guest.mem,
    )
}

/// Where the script for `node` goes in `run_dir`.
pub fn guest_script_path(run_dir: &Path, node: &NodePlan) -> std::path::PathBuf {
    run_dir.join(format!("{}.qemu.sh", node.name))
}
