//! The placement the launcher chooses where a topology file says nothing:
//! the guests' niceness, the CPUs of guests and devices, and so whether the
//! devices spin, from the CPUs the launcher may run on
//! ([docs/placement.md](../../../docs/placement.md)).
//!
//! Every device node brings two busy threads: its guest's vCPU (a TCG
//! guest that polls its completions keeps it running) and its device.
//! - **Shared** (fewer CPUs than guests + devices): every guest's QEMU at
//!   nice 19 and nothing pinned. A woken device thread (weight 1024)
//!   then preempts a niced vCPU (weight 15) at once, without root; and the
//!   launcher already starts the device of a niced guest with
//!   `--spin-us 0` ([`crate::launch::device_args`]), since a spinning
//!   thread yields its CPU to the vCPU and a doorbell then waits for the
//!   vCPU's slice.
//! - **Dedicated** (a CPU for every guest and device): guest *i* pinned
//!   to its own CPU, all devices on the remaining CPUs, guests at normal
//!   niceness, devices with their default spins: no thread of a device
//!   waits behind a vCPU.
//!
//! Each of these settings that the file gives for a node (`guest.nice`,
//! `guest.cpus`, `cpus`) is kept as written.

use std::fmt;

use ibtca_sched::CpuList;

use super::plan::Plan;

/// The niceness of a guest's QEMU on a shared machine.
pub const SHARED_GUEST_NICE: i8 = 19;

/// What the launcher chooses for a fabric's nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// Fewer CPUs than guests + devices: guests at nice
    /// [`SHARED_GUEST_NICE`], devices do not spin, nothing pinned.
    Shared,
    /// A CPU per guest, the rest for the devices, which spin.
    Dedicated {
        /// The CPU of each device node's guest, in the nodes' order.
        guests: Vec<CpuList>,
        /// The CPUs all devices share.
        devices: CpuList,
    },
}

/// The choice for `nodes` device nodes (each a guest and a device) on the
/// CPUs `cpus` the launcher may use.
pub fn choose(cpus: &[usize], nodes: usize) -> Choice {
    if cpus.len() < 2 * nodes || nodes == 0 {
        return Choice::Shared;
    }
    let guests = cpus[..nodes]
        .iter()
        .filter_map(|&c| CpuList::from_cpus([c]))
        .collect();
    match CpuList::from_cpus(cpus[nodes..].iter().copied()) {
        Some(devices) => Choice::Dedicated { guests, devices },
        None => Choice::Shared,
    }
}

/// The CPUs the launcher may use: its affinity mask, cut to the count the
/// standard library sees (which also counts a cgroup's CPU quota).
pub fn machine_cpus() -> Vec<usize> {
    let count = std::thread::available_parallelism().map_or(1, usize::from);
    match ibtca_sched::allowed_cpus() {
        Ok(list) => list.cpus().iter().copied().take(count).collect(),
        Err(_) => (0..count).collect(),
    }
}

/// What [`apply`] chose and for which nodes, for the log line at `up`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// CPUs the choice was made for.
    pub cpus: usize,
    /// Device nodes (each a guest and a device).
    pub nodes: usize,
    /// The choice.
    pub choice: Choice,
    /// `node: setting` for each setting the file gave and that was kept.
    pub kept: Vec<String>,
}

/// Fills in, on every device node of `plan`, the settings its file left
/// out, from the choice for `cpus`.
pub fn apply(plan: &mut Plan, cpus: &[usize]) -> Applied {
    let devices = plan.nodes.iter().filter(|n| n.gateway.is_none());
    let choice = choose(cpus, devices.count());
    let mut kept = Vec::new();
    let nodes = plan.nodes.iter_mut().filter(|n| n.gateway.is_none());
    for (i, n) in nodes.enumerate() {
        let mut kept_here = Vec::new();
        match &choice {
            Choice::Shared => match n.guest_nice {
                Some(_) => kept_here.push("guest.nice"),
                None => n.guest_nice = Some(SHARED_GUEST_NICE),
            },
            Choice::Dedicated { guests, devices } => {
                match n.guest_cpus {
                    Some(_) => kept_here.push("guest.cpus"),
                    None => n.guest_cpus = guests.get(i).cloned(),
                }
                match n.cpus {
                    Some(_) => kept_here.push("cpus"),
                    None => n.cpus = Some(devices.clone()),
                }
            }
        }
        kept.extend(kept_here.iter().map(|what| format!("{}: {what}", n.name)));
    }
    Applied {
        cpus: cpus.len(),
        nodes: plan.nodes.iter().filter(|n| n.gateway.is_none()).count(),
        choice,
        kept,
    }
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "placement: {} CPUs for {} guests and {} devices: ",
            self.cpus, self.nodes, self.nodes
        )?;
        match &self.choice {
            Choice::Shared => write!(
                f,
                "guests the file gives no nice at nice {SHARED_GUEST_NICE}, their devices not spinning, nothing pinned"
            )?,
            Choice::Dedicated { guests, devices } => {
                let guests: Vec<String> = guests.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "guests on CPUs {} (one each), devices on {devices} and spin",
                    guests.join(" ")
                )?;
            }
        }
        if !self.kept.is_empty() {
            write!(f, "; kept from the file: {}", self.kept.join(", "))?;
        }
        f.write_str(" (docs/placement.md)")
    }
}
