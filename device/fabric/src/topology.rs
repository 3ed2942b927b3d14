//! The topology file: JSON naming device nodes, switches and the links
//! between their ports, with per-link options.
//!
//! ```json
//! {
//!   "nodes": [ { "name": "a", "lid": 1 }, { "name": "b", "lid": 2, "node_guid": "0x1200000000000102" } ],
//!   "switches": [ { "name": "sw0", "ports": 4 } ],
//!   "links": [
//!     { "a": "a", "b": "sw0:1", "capture": "sw0-p1.pcap" },
//!     { "a": "b", "b": "sw0:2", "faults": { "drop": 10, "seed": 7 } }
//!   ]
//! }
//! ```
//!
//! A node or switch may add `"vl": { "data_vls": 2, "sl2vl": [16 VLs],
//! "weights": [4, 1] }` (a switch also `"ports_vl": { "2": {...} }`): the
//! SL → VL table and VL arbitration of what that port sends.
//!
//! A node or switch may also set `"link_ring_kib"`: the shared-memory ring
//! it offers per link for its frames (0 keeps them on the sockets).
//!
//! A node may set `"drdma_window": "mapped"`: its device maps the DRDMA
//! window's pages into the guest (`ibtca-device --drdma-window mapped`;
//! default `"trapped"`, every access a vfio-user message).
//!
//! `"min_ack_timeout_ms"`, file-wide or per node, is the devices' local
//! ACK timeout floor (`ibtca-device --min-ack-timeout-ms`; default 250 for
//! the TCG guests they serve, 0: none).
//!
//! `"seccomp": false` starts every process without its seccomp filter
//! (`--no-seccomp`, for debugging; docs/sandbox.md).
//!
//! `"sm": "NODE"` (and `"sm_options": [...]`, `"sm_partitions": [...]`)
//! runs OpenSM in that node's guest and starts every device and switch `--sm-managed`
//! (`sm_plan.rs`). A node's `"sim_port": "NAME"` makes it a port the
//! host's programs own (`ibtca-simport`, `sim_port_node.rs`), and the
//! fabric SM-managed too.
//!
//! `"guest": {"root": "debian", "packages": [...]}`, file-wide or per node,
//! boots the VM stack's Debian system with those packages layered on it
//! (`guest_root.rs`, docs/guest-root.md).
//!
//! `"hosts": {"a": {"address": "10.1.0.1"}, ...}` and a `"host"` per node
//! and switch spread the fabric over hosts (`hosts.rs`,
//! docs/cross-host.md).
//!
//! A link end is a node's name (a device has one port) or `SWITCH:PORT`
//! (ports from 1). Relative paths (sockets, captures) are inside the run
//! directory.

use std::collections::BTreeMap;

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Device instances.
    #[serde(default)]
    pub nodes: Vec<NodeSpec>,
    /// Switches.
    #[serde(default)]
    pub switches: Vec<SwitchSpec>,
    /// Links between ports.
    #[serde(default)]
    pub links: Vec<LinkSpec>,
    /// Guest settings for the QEMU command lines.
    #[serde(default)]
    pub guest: GuestSpec,
    /// The node whose guest runs OpenSM; every device and switch then
    /// starts `--sm-managed` (`sm_plan.rs`).
    #[serde(default)]
    pub sm: Option<String>,
    /// Extra `opensm` arguments, one word each.
    #[serde(default)]
    pub sm_options: Vec<String>,
    /// OpenSM's partition configuration, one line of `partitions.conf`
    /// each, written in the SM's guest and given as `opensm -P`
    /// (`sm_plan.rs`, docs/partitions.md).
    #[serde(default)]
    pub sm_partitions: Option<Vec<String>>,
    /// Every device's local ACK timeout floor in ms, unless its node sets
    /// one (`ibtca-device --min-ack-timeout-ms`; default 250, 0: none).
    #[serde(default)]
    pub min_ack_timeout_ms: Option<u64>,
    /// `false` starts every device, switch and gateway `--no-seccomp`
    /// (without its seccomp filter, for debugging; docs/sandbox.md).
    #[serde(default)]
    pub seccomp: Option<bool>,
    /// The hosts a fabric spreads over, by name: every node and switch
    /// then names its `host`, and links between hosts run over TCP
    /// (`hosts.rs`, docs/cross-host.md).
    #[serde(default)]
    pub hosts: BTreeMap<String, HostSpec>,
}

/// One host of a fabric spread over several (docs/cross-host.md).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// The address its links listen on and the other hosts connect to:
    /// an IP address or a host name (the launcher resolves a name).
    pub address: String,
    /// The TCP port of the first link it listens for; link `i` of the
    /// plan (`ibtca-fabric check` lists them) takes `port_base + i`.
    #[serde(default = "default_port_base")]
    pub port_base: u16,
}

/// Default [`HostSpec::port_base`].
pub const DEFAULT_PORT_BASE: u16 = 18600;

fn default_port_base() -> u16 {
    DEFAULT_PORT_BASE
}

impl Topology {
    /// True if a node is a host port (`sim_port`): the host's SM manages
    /// the fabric.
    pub fn has_sim_port(&self) -> bool {
        self.nodes.iter().any(|n| n.sim_port.is_some())
    }

    /// The local ACK timeout floor node `n`'s device gets, in ms: its own,
    /// else the file's, else the default (250); `Err` with one above the
    /// device's maximum.
    pub fn min_ack_timeout_ms(&self, n: &NodeSpec) -> Result<u64, u64> {
        use ibtca_transport::config::{DEFAULT_MIN_ACK_TIMEOUT_MS, MAX_MIN_ACK_TIMEOUT_MS};
        let ms = n
            .min_ack_timeout_ms
            .or(self.min_ack_timeout_ms)
            .unwrap_or(DEFAULT_MIN_ACK_TIMEOUT_MS);
        if ms > MAX_MIN_ACK_TIMEOUT_MS {
            return Err(ms);
        }
        Ok(ms)
    }
}

/// How a device gives its guest the DRDMA window (`--drdma-window`).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DrdmaWindow {
    /// Every load and store is a vfio-user message the device checks.
    #[default]
    Trapped,
    /// The ranges' pages are mapped into the guest.
    Mapped,
}

/// One device instance (one port).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Unique name; also a link end.
    pub name: String,
    /// The port's LID (unicast: 1..=0xbfff): a number, or a string in hex
    /// (`"0x10"`) or decimal.
    #[serde(deserialize_with = "lid")]
    pub lid: u16,
    /// Node GUID, hex (`ibtca-device --node-guid`; default: the node's
    /// place in the file, locally administered: see [`crate::guid`]).
    /// `guid` is its older name.
    #[serde(default, alias = "guid")]
    pub node_guid: Option<String>,
    /// Port GUID, hex (`ibtca-device --port-guid`; default: the node GUID).
    #[serde(default)]
    pub port_guid: Option<String>,
    /// vfio-user socket (default `NAME.sock` in the run directory).
    #[serde(default)]
    pub socket: Option<String>,
    /// NodeDescription its agent reports, up to 64 bytes (default
    /// `NAME ibtca0`).
    #[serde(default)]
    pub description: Option<String>,
    /// The port's SL → VL table and VL weights.
    #[serde(default)]
    pub vl: Option<VlSpec>,
    /// This node's guest, over the file's `guest` section.
    #[serde(default)]
    pub guest: Option<NodeGuestSpec>,
    /// CPUs for the device's threads (`ibtca-device --cpus`), e.g. `"0"`;
    /// unset, the launcher chooses ([`crate::auto_placement`]).
    #[serde(default)]
    pub cpus: Option<String>,
    /// `SCHED_FIFO` priority of the device's threads, 1-99
    /// (`ibtca-device --realtime`; needs root).
    #[serde(default)]
    pub realtime: Option<u8>,
    /// The device's threads under `SCHED_BATCH` (`ibtca-device
    /// --sched-batch`: throughput without busy-polling guests; not with
    /// `realtime`).
    #[serde(default)]
    pub sched_batch: bool,
    /// The shared-memory ring the device offers for its link's frames, in
    /// KiB (`ibtca-device --link-ring-kib`; 0: its frames stay on the
    /// socket; default: the device's).
    #[serde(default)]
    pub link_ring_kib: Option<u64>,
    /// How the device gives the guest its DRDMA window.
    #[serde(default)]
    pub drdma_window: DrdmaWindow,
    /// The device's local ACK timeout floor in ms, over the file's
    /// (`ibtca-device --min-ack-timeout-ms`; 0: none).
    #[serde(default)]
    pub min_ack_timeout_ms: Option<u64>,
    /// Makes the node an `ibtca-gateway` instead of a device.
    #[serde(default)]
    pub gateway: Option<GatewaySpec>,
    /// Makes the node an `ibtca-simport` instead of a device: a port host
    /// programs own through ibsim's protocol (libumad2sim), the value its
    /// socket name (`IBSIM_SOCKNAME`); the fabric is then SM-managed by
    /// the host's SM (`sim_port_node.rs`, docs/host-sm.md).
    #[serde(default)]
    pub sim_port: Option<String>,
    /// The host (a key of the file's `hosts`) that runs the node.
    #[serde(default)]
    pub host: Option<String>,
}

/// A gateway node's ATM side (`ibtca-gateway`, issue 24;
/// `gateway_node.rs`).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GatewaySpec {
    /// The ATM port: `listen:PATH` or `connect:PATH`.
    pub atm: String,
    /// The VC map: the object `ibtca-gateway --map` reads, inline, or
    /// the name of a file holding it.
    pub map: serde_json::Value,
    /// Service class → SL (`--service-sl`).
    #[serde(default)]
    pub service_sl: Option<String>,
    /// A pcap of the ATM side's cells (`--capture`).
    #[serde(default)]
    pub capture: Option<String>,
}

/// One node's own guest settings (`ibtca-fabric up --guests`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeGuestSpec {
    /// Guest RAM.
    #[serde(default)]
    pub mem: Option<String>,
    /// Kernel image.
    #[serde(default)]
    pub kernel: Option<String>,
    /// Initramfs.
    #[serde(default)]
    pub initrd: Option<String>,
    /// Kernel command line, after the file's `guest.append`.
    #[serde(default)]
    pub append: Option<String>,
    /// CPUs for this guest's QEMU (run-vm.sh `--cpu-affinity`), e.g. `"1"`;
    /// unset, the launcher chooses ([`crate::auto_placement`]).
    #[serde(default)]
    pub cpus: Option<String>,
    /// The guest's root, over the file's: `"initramfs"` (the bundled
    /// guest) or `"debian"` (the VM stack's Debian system; `guest_root`).
    #[serde(default)]
    pub root: Option<String>,
    /// Debian packages for this guest, added to the file's
    /// (`guest_root`).
    #[serde(default)]
    pub packages: Vec<String>,
    /// Niceness of this guest's QEMU (`nice -n`, run-vm.sh `--nice`),
    /// -20..=19; raising it needs no privilege. At 19 a woken device
    /// thread preempts a busy-polling vCPU on its CPU at once: the 64 B
    /// WRITE latency between two unpinned TCG guests on 2 CPUs has a
    /// median of 45.8 µs and a p99 of 0.9 ms at nice 19, against 53.6 µs
    /// and 2.6 ms at equal priority (BENCHMARKS.md, "Verbs between two
    /// guests", the nice and shared rows).
    /// Unset here and in the file's `guest`, the launcher chooses it
    /// ([`crate::auto_placement`]).
    #[serde(default)]
    pub nice: Option<i8>,
}

/// A LID as a JSON number or a string, hex (`"0x10"`) or decimal
/// ([`ibtca_cli::ids::number`]); the plan checks its range.
fn lid<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Lid {
        Number(u64),
        Text(String),
    }
    let (n, text) = match Lid::deserialize(d)? {
        Lid::Number(n) => (n, n.to_string()),
        Lid::Text(t) => (
            ibtca_cli::ids::number("LID", &t).map_err(serde::de::Error::custom)?,
            t,
        ),
    };
    u16::try_from(n)
        .map_err(|_| serde::de::Error::custom(format!("LID {text} is out of range 1–0xbfff")))
}

/// One switch.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SwitchSpec {
    /// Unique name (among nodes and switches).
    pub name: String,
    /// Number of ports (1..=254).
    pub ports: u16,
    /// Node GUID, hex (default: the switch's place in the file, locally
    /// administered: see [`crate::guid`]).
    #[serde(default)]
    pub guid: Option<String>,
    /// NodeDescription its agent reports, up to 64 bytes (default: the
    /// name).
    #[serde(default)]
    pub description: Option<String>,
    /// SL → VL table and VL weights of every port.
    #[serde(default)]
    pub vl: Option<VlSpec>,
    /// Per-port settings over `vl`, by port number (`"2": {...}`).
    #[serde(default)]
    pub ports_vl: BTreeMap<u16, VlSpec>,
    /// The shared-memory ring each port offers for its frames, in KiB
    /// (`ibtca-switch --link-ring-kib`; 0: frames stay on the sockets;
    /// default: the switch's).
    #[serde(default)]
    pub link_ring_kib: Option<u64>,
    /// The host (a key of the file's `hosts`) that runs the switch.
    #[serde(default)]
    pub host: Option<String>,
}

/// A port's virtual lanes: what it sends on SL n leaves on VL
/// `sl2vl[n]`; `weights` are 64-byte units per arbitration turn of each
/// data VL (VL0 first; the port's low-priority VLArbitrationTable until an
/// SM sets one), their number the port's data VLs.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VlSpec {
    /// Data VLs the port runs (1..=15; default: the number of `weights`,
    /// else 15).
    #[serde(default)]
    pub data_vls: Option<u8>,
    /// 16 VLs, SL0 first; SL15's must be 15 (default: SL n on VL n modulo
    /// the data VLs).
    #[serde(default)]
    pub sl2vl: Option<Vec<u8>>,
    /// Weight of each data VL (default: 1 each).
    #[serde(default)]
    pub weights: Option<Vec<u8>>,
}

/// One link between two ports.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// One end: a node name or `SWITCH:PORT`.
    pub a: String,
    /// The other end.
    pub b: String,
    /// Faults injected where the link leaves a switch.
    #[serde(default)]
    pub faults: Option<FaultSpec>,
    /// A pcap (ERF) capture of the link, taken at its switch end.
    #[serde(default)]
    pub capture: Option<String>,
    /// Microseconds each packet is held where the link leaves a switch.
    #[serde(default)]
    pub delay_us: u64,
}

/// Fault rates in per mille (10 = 1 %).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    /// Drop.
    #[serde(default)]
    pub drop: u16,
    /// Duplicate.
    #[serde(default)]
    pub duplicate: u16,
    /// Swap with the next packet.
    #[serde(default)]
    pub reorder: u16,
    /// Flip a byte (the next ICRC/VCRC check drops the packet).
    #[serde(default)]
    pub corrupt: u16,
    /// Generator seed.
    #[serde(default)]
    pub seed: u64,
}

/// Settings of the guests' QEMU command lines.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GuestSpec {
    /// Guest RAM (QEMU size syntax).
    #[serde(default = "default_mem")]
    pub mem: String,
    /// Kernel image (default: the bundled guest's, in the VM-stack cache).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Initramfs (default: the bundled guest's).
    #[serde(default)]
    pub initrd: Option<String>,
    /// Extra kernel command line.
    #[serde(default)]
    pub append: String,
    /// Niceness of every guest's QEMU whose node sets none
    /// ([`NodeGuestSpec::nice`]).
    #[serde(default)]
    pub nice: Option<i8>,
    /// Every guest's root unless its node sets one: `"initramfs"`
    /// (default) or `"debian"` ([`crate::guest_root`]).
    #[serde(default)]
    pub root: Option<String>,
    /// Debian packages for every guest, installed once into a cached
    /// layer over the Debian root ([`crate::guest_root`]).
    #[serde(default)]
    pub packages: Vec<String>,
}

fn default_mem() -> String {
    "1G".into()
}

impl Default for GuestSpec {
    fn default() -> Self {
        GuestSpec {
            mem: default_mem(),
            kernel: None,
            initrd: None,
            append: String::new(),
            nice: None,
            root: None,
            packages: Vec::new(),
        }
    }
}
