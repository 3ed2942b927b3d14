//! `ibtca-fabric`, the launcher: fabrics from a topology file (device
//! instances, switches and the links between them, and guests) brought up
//! and down as processes. It reads the JSON topology (serde) and starts
//! and stops the processes; the device and the switch it runs know
//! nothing of it.
//!
//! - [`topology`]: the JSON file's types (serde).
//! - [`plan`]: every check of a file (all reported at once, before anything
//!   starts, [`plan_error`]; [`plan_warnings`]: what is allowed but likely
//!   wrong), socket
//!   paths, and forwarding tables by BFS over the switch graph.
//! - [`auto_placement`]: guest niceness and CPUs of guests and devices
//!   chosen from the machine's CPUs where the file says nothing.
//! - [`launch`]: start switches then devices, wait for every linked port,
//!   stop them again; [`state`]: the run directory's record of processes;
//!   [`switch_restart`]: one switch restarted on the same sockets.
//! - [`qemu`]: each guest's QEMU command line; [`guests`]: booting them
//!   through `scripts/run-vm.sh` (`up --guests`).
//! - [`sim_port_node`]: nodes that run `ibtca-simport`, ports the host's
//!   programs own (`up --sim-port`);
//! - [`gateway_node`]: nodes that run `ibtca-gateway` (their plan);
//!   [`gateway_launch`]: their command line and the `--check` of each
//!   before anything starts.
//! - [`mgmt_hub`]: the guests' management wire (`ibtca-mgmt-hub`), a
//!   learning Ethernet switch for QEMU's stream netdevs; [`mgmt_net`]:
//!   the guests' addresses and NICs on it; [`guest_run`]: each guest's
//!   configuration directory (`--run` commands, `--share`);
//!   [`guest_extras`]: all of it added to the guests of `up --guests`.
//! - [`guest_channels`]: a running guest's agent and console sockets;
//!   [`guest_exec`]: `exec` through the guest agent ([`agent_frame`]: its
//!   frames); [`guest_console`]: `console`.
//! - [`inspect`]: what a running fabric's processes and agents say
//!   (`inspect`, `stats`, `graph`); [`port_stats`]: `stats`' table;
//!   [`graph`]: the fabric as Graphviz DOT.
//! - [`net_file`]: ibnetdiscover output and ibsim net files, parsed;
//!   [`net_import`]: one as a topology (`up --net`, `import`);
//!   [`net_export`]: the running fabric as one (`export --net`).
//! - [`sm_plan`]: the `"sm"` option: OpenSM in one node's guest, its
//!   guid2lid file and command line, every device and switch managed.

#![deny(missing_docs)]

pub mod agent_frame;
pub mod auto_placement;
pub mod gateway_launch;
pub mod gateway_node;
pub mod graph;
pub mod guest_channels;
pub mod guest_console;
pub mod guest_exec;
pub mod guest_extras;
pub mod guest_root;
pub mod guest_root_mounts;
pub mod guest_run;
pub mod guests;
pub mod hive_plan;
pub mod hosts;
mod inherited_fds;
pub mod inspect;
pub mod launch;
pub mod mgmt_hub;
pub mod mgmt_net;
pub mod net_export;
pub mod net_file;
pub mod net_import;
mod node_args;
pub mod own_kernel;
pub mod plan;
pub mod plan_error;
pub mod plan_summary;
pub mod plan_warnings;
pub mod port_stats;
pub mod processes;
pub mod qemu;
pub mod sim_port_node;
pub mod sm_plan;
pub mod state;
pub mod switch_restart;
pub mod topology;

pub use plan::{
    parse, plan, End, NodePlan, Plan, PortPlan, SwitchPlan, TopologyError, TopologyErrors,
};
pub use topology::Topology;
#[cfg(test)]
mod auto_placement_tests;
#[cfg(test)]
mod gateway_node_tests;
#[cfg(test)]
mod hosts_tests;
#[cfg(test)]
mod net_file_tests;
#[cfg(test)]
mod plan_check_tests;
#[cfg(test)]
mod plan_tests;
#[cfg(test)]
mod sm_plan_tests;
