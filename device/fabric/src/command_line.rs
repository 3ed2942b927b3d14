//! `ibtca-fabric`'s command line: its commands and options, with the help
//! text `--help` prints (the binary's, not the library's).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Brings up a fabric of ibtca devices and switches from a topology file.
///
///   ibtca-fabric check qemu-configs/four-nodes-one-switch.json
///   ibtca-fabric up qemu-configs/four-nodes-one-switch.json --run-dir /tmp/fab
///   ibtca-fabric link --run-dir /tmp/fab n2 down      # at run time
///   ibtca-fabric link --run-dir /tmp/fab n2 faults drop:10,corrupt:10
///   ibtca-fabric stats --run-dir /tmp/fab --watch      # IBA counters of every port
///   ibtca-fabric inspect --run-dir /tmp/fab            # processes, port states, LIDs, QPs
///   ibtca-fabric graph --run-dir /tmp/fab --svg -o fab.svg
///   ibtca-fabric restart --run-dir /tmp/fab n2 --kill   # n2 crashes, comes back
///   ibtca-fabric restart --run-dir /tmp/fab sw0         # a switch, same sockets
///   ibtca-fabric switch --run-dir /tmp/fab sw0 down     # sw0 loses power
///   ibtca-fabric down --run-dir /tmp/fab
///
/// `up` checks the file (nothing starts if it is wrong), starts the
/// switches, then the devices (binaries next to this one), waits until
/// every linked port is up, and writes each guest's QEMU command line into
/// the run directory as NODE.qemu.sh. Logs are NODE.log and SWITCH.log
/// there; `down` stops exactly the processes `up` started (guests first).
///
/// `up --guests` also boots one QEMU guest per node through
/// scripts/run-vm.sh (QEMU of the VM stack, scripts/setup-vm-stack.sh), so
/// the run directory must be inside the stack's chroot:
///
///   C=~/.cache/ibtca/chroot
///   ibtca-fabric up qemu-configs/three-nodes-one-switch.json --run-dir $C/tmp/fab \
///       --guests --append 'n1=ibtca.mode=shell' --append 'n2=ibtca.mode=foundation'
///
/// Each guest boots the bundled kernel and initramfs (scripts/build-guest.sh,
/// $IBTCA_GUEST_DIR or ~/.cache/ibtca/guest) unless the node's `guest`
/// entry in the file, --kernel/--initrd or the file's `guest` section say
/// otherwise; kernel command lines add up (file, node, --append).
/// --kernel-tree DIR (or --kernel IMAGE --modules DIR) boots a kernel you
/// built, with ibtca.ko built against it (docs/own-kernel.md). Consoles
/// go to NODE.console in the run directory, run-vm.sh's messages to
/// NODE.qemu.log. --wait keeps `up` until every guest has powered off and
/// fails if one did not exit cleanly (the fabric stays up for `down`).
///
/// Every guest gets a virtio-net NIC on the fabric's management wire (the
/// hub ibtca-mgmt-hub on mgmt.sock in the run directory; no host
/// interface): node number i (file order, from 1) is 10.77.0.i/16
/// (10.77.x.y past 255) and every guest's /etc/hosts names them all, for
/// the TCP exchange of perftest and ibv_rc_pingpong, or soft-RoCE.
/// --run NODE=COMMAND runs commands in a guest (ibtca.ko, ib_core and
/// ib_uverbs loaded; the network up; `ibtca-load-modules rxe` loads
/// soft-RoCE); --share DIR mounts DIR at /share in every guest:
///
///   ibtca-fabric up qemu-configs/two-nodes.json --run-dir $C/tmp/fab --guests \
///       --share ~/src/mydriver \
///       --run 'a=insmod /share/my.ko && ib_write_bw -d rxe0 -D 2' \
///       --run 'b=until ib_write_bw -d rxe0 -D 2 a; do sleep 1; done' --wait
///
/// Commands travel as files (NODE.guest/run/N in the run directory, on
/// virtio-9p), never on the kernel command line, so quotes and spaces
/// survive; the guest writes NODE.guest/status, and --wait names the node,
/// the command and its exit status when one fails.
#[derive(Parser, Debug)]
#[command(version, long_about, verbatim_doc_comment)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) command: Cmd,
}

// Parsed once per run: the size of `Up`, the largest variant, is of no
// account, and boxing its fields would only obscure the clap definitions.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Check a topology file and print what `up` would start.
    Check {
        /// The topology file (JSON).
        file: PathBuf,
        /// FILE is ibnetdiscover output or an ibsim net file
        /// (docs/net-files.md).
        #[arg(long)]
        net: bool,
        /// Run directory the sockets would be in.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// Check and show only what host NAME of the file's `hosts` runs
        /// (docs/cross-host.md).
        #[arg(long, value_name = "NAME")]
        host: Option<String>,
    },
    /// Start everything in a topology file and wait until every port is up;
    /// with --guests, then boot one QEMU guest per node, all on one
    /// management network (ibtca-mgmt-hub; see `ibtca-fabric --help`).
    Up {
        /// The topology file (JSON).
        file: PathBuf,
        /// FILE is ibnetdiscover output or an ibsim net file: its switches
        /// and CAs with their GUIDs, port counts and descriptions, linked
        /// as the file links them (docs/net-files.md).
        #[arg(long)]
        net: bool,
        /// Directory for sockets, logs, captures and the state file.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// Start only the nodes and switches of host NAME of the file's
        /// `hosts`; links to other hosts run over TCP, and `up` waits
        /// until they are up too (docs/cross-host.md).
        #[arg(long, value_name = "NAME")]
        host: Option<String>,
        /// Seconds to wait for every port to come up.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Make NODE a port the host's programs own through libumad2sim
        /// with IBSIM_SOCKNAME=NAME (default `sim`): ibtca-simport instead
        /// of a device, and the fabric managed by the host's SM
        /// (docs/host-sm.md). Repeatable.
        #[arg(long, value_name = "NODE[=NAME]")]
        sim_port: Vec<String>,
        /// Also boot one QEMU guest per node (needs the VM stack and a run
        /// directory inside its chroot).
        #[arg(long)]
        guests: bool,
        /// Kernel of every guest (default: the bundled guest's). With
        /// --modules: a kernel of your own (docs/own-kernel.md).
        #[arg(long, value_name = "FILE", requires = "guests")]
        kernel: Option<PathBuf>,
        /// Initramfs of every guest (default: the bundled guest's).
        #[arg(long, value_name = "FILE", requires = "guests")]
        initrd: Option<PathBuf>,
        /// Boot every guest on the kernel built in tree DIR
        /// (arch/x86/boot/bzImage, modules built in place, .config): ibtca.ko
        /// is built against it and packed with the tree's RDMA core and
        /// virtio modules (docs/own-kernel.md).
        #[arg(long, value_name = "DIR", requires = "guests",
              conflicts_with_all = ["kernel", "initrd", "modules"])]
        kernel_tree: Option<PathBuf>,
        /// The module directory of --kernel (/lib/modules/KVER style, with
        /// build/ the tree or headers): as --kernel-tree, for a kernel
        /// installed rather than built in place.
        #[arg(
            long,
            value_name = "DIR",
            requires = "kernel",
            conflicts_with = "initrd"
        )]
        modules: Option<PathBuf>,
        /// With --kernel-tree or --modules, also pack the kernel verbs test
        /// modules (ibtca.mode=kverbs).
        #[arg(long)]
        kernel_tests: bool,
        /// Kernel command line for one node's guest (`NODE=TEXT`) or, when
        /// the text does not start with a node name and `=`, for every
        /// guest. Repeatable; adds to the file's settings.
        #[arg(long, value_name = "[NODE=]TEXT", requires = "guests")]
        append: Vec<String>,
        /// Seconds after which a guest still running is stopped.
        #[arg(long, value_name = "SECS", default_value_t = 86400)]
        guest_timeout: u64,
        /// scripts/run-vm.sh (default: $IBTCA_RUN_VM, else the source tree
        /// the binaries were built in).
        #[arg(long, value_name = "PATH", requires = "guests")]
        run_vm: Option<PathBuf>,
        /// Wait until every guest has exited; fail, naming the node and
        /// the exit status, if a guest or one of its commands failed.
        #[arg(long, requires = "guests")]
        wait: bool,
        /// Run COMMAND (a shell command line, passed byte for byte) in
        /// NODE's guest once its driver is loaded and the management
        /// network is up; output to NODE.console; the guest powers off
        /// when its commands end. Repeatable, in order per node; the first
        /// that fails ends the node's commands.
        #[arg(long = "run", value_name = "NODE=COMMAND", requires = "guests")]
        run: Vec<String>,
        /// With an SM in the file (`"sm"`) or `--net`, boot every node's
        /// guest, not only the SM node's and those `--run` gives commands.
        #[arg(long, requires = "guests")]
        all_guests: bool,
        /// Mount host directory DIR at /share in every guest (virtio-9p,
        /// read-write, files as root; bind-mounted into the VM stack's
        /// chroot when outside it, needs root).
        #[arg(long, value_name = "DIR", requires = "guests")]
        share: Option<PathBuf>,
        /// Debian packages for every guest, comma-separated: installed once
        /// into a cached layer over the Debian root, which those guests
        /// then boot (docs/guest-root.md).
        #[arg(
            long,
            value_name = "PKG,...",
            value_delimiter = ',',
            requires = "guests"
        )]
        guest_packages: Vec<String>,
        /// With --net: one process per switch and CA, not one `ibtca-hive`
        /// for every guestless node (docs/hive.md).
        #[arg(long)]
        process_per_node: bool,
        /// With --net: run CA NODE as its own `ibtca-device`, not in the
        /// hive, so a guest (QEMU, or a test's simulated one) can attach
        /// to its vfio-user socket. Repeatable.
        #[arg(long = "device", value_name = "NODE")]
        devices: Vec<String>,
    },
    /// Change a running link: `down`, `up`, `faults SPEC|none` (SPEC:
    /// drop:N,dup:N,reorder:N,corrupt:N,seed:N per mille) or `delay US`.
    /// The link is named by one of its ends: a node or SWITCH:PORT. Done by
    /// the switch end(s) of the link (faults and delay at every switch end,
    /// down/up at the first).
    Link {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// A node name or SWITCH:PORT at one end of the link.
        end: String,
        /// down, up, faults or delay.
        action: String,
        /// The fault spec or the delay in µs.
        arg: Option<String>,
    },
    /// Power a switch off (`down`) or on (`up`), as a real switch loses
    /// power: every link of it goes down at once (each neighbour's port
    /// goes Down; neighbour switches send trap 128, so an SM routes around
    /// it), it forwards and answers nothing, and it forgets its LID and
    /// forwarding tables. `up` starts it as `up` did (under an SM: no
    /// routes, ports Init until the SM's next sweep) and its links come
    /// back. A switch hosted in the hive is powered by the hive (links
    /// `link` took down stay down); a switch process is killed (SIGKILL)
    /// and started again on the same sockets.
    Switch {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// The switch.
        switch: String,
        /// down or up.
        #[arg(value_parser = ["down", "up"])]
        action: String,
        /// Seconds to wait for a switch process's links after `up`.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// Restart one node as a machine restarts: stop its guest (if `up
    /// --guests` booted one) and its device, start the device afresh (no
    /// objects, no QPs: its peers' QPs to it end in WC_RETRY_EXC_ERR), wait
    /// for its link, then boot the guest again as `up` did (QEMU's
    /// vfio-user client does not reconnect, so the guest goes with its
    /// device). A gateway node restarts the same way: a fresh
    /// ibtca-gateway, its QPs from the map's PSNs, its run-time remote-qpn
    /// settings gone. Old logs and consoles are kept as NODE.log.1, ...
    ///
    /// A switch restarts on the same sockets, its links come back: without
    /// an SM with the file's routes, with one (`"sm"`) without routes and
    /// its ports Init until OpenSM sweeps again.
    Restart {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// The node or switch.
        node: String,
        /// SIGKILL, no SIGTERM first: the node crashes.
        #[arg(long)]
        kill: bool,
        /// Restart only the guest (its QEMU): the device keeps running,
        /// forgets the old guest's objects and serves the new one.
        #[arg(long)]
        guest_only: bool,
        /// Seconds to wait for the restarted device's link.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// Print every port of every device, switch and gateway with its
    /// state and counters under their IBA names (PortXmitData in 4-byte
    /// words, PortRcvErrors, ...; docs/inspect.md).
    Stats {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// JSON (one document; with --watch one per line).
        #[arg(long)]
        json: bool,
        /// Print again every SECS seconds (default 2) until Ctrl-C.
        #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2",
              value_parser = clap::value_parser!(u64).range(1..))]
        watch: Option<u64>,
    },
    /// Print every process of the fabric (devices, switches, gateways, the
    /// management hub, guests and their QEMU) with its PID and whether it
    /// runs, and what each device's, switch's and gateway's agent says:
    /// port states, LIDs as the SM set them, QPs; guests' consoles.
    Inspect {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// JSON (docs/inspect.md).
        #[arg(long)]
        json: bool,
    },
    /// Write the topology as a Graphviz DOT graph: of FILE, or of the
    /// fabric running in the run directory with its live state (links
    /// with a port down in red, bytes sent on each link).
    Graph {
        /// A topology file (default: the running fabric's).
        file: Option<PathBuf>,
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// SVG instead of DOT (runs Graphviz's `dot`).
        #[arg(long)]
        svg: bool,
        /// Write to FILE instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print the JSON topology of ibnetdiscover output or an ibsim net
    /// file (what `up --net` runs); what it cannot keep is warned about
    /// on stderr (docs/net-files.md).
    Import {
        /// The net file.
        file: PathBuf,
    },
    /// Write the running fabric as an ibnetdiscover / ibsim net file that
    /// `up --net` loads back as the same fabric: its switches and CAs with
    /// their GUIDs, descriptions and LIDs (as the SM set them), and every
    /// link whose ports are up; what is left out is said on stderr
    /// (docs/topologies.md).
    Export {
        /// Write a net file (the one format).
        #[arg(long, required = true)]
        net: bool,
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// Write to FILE instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Run a command in a running guest (`up --guests`) through its guest
    /// agent on a virtio-serial port: its stdout and stderr stream here,
    /// and its exit status is this command's (docs/exec-console.md).
    ///
    ///   ibtca-fabric exec --run-dir /tmp/fab n1 -- ibv_devinfo
    ///   ibtca-fabric exec --run-dir /tmp/fab n1 -- sh -c 'echo hi; exit 3'
    ///
    /// The arguments go to the guest byte for byte (run through /bin/sh's
    /// `exec "$@"`, so PATH applies). Execs on one node run one at a time.
    #[command(verbatim_doc_comment)]
    Exec {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// Forward standard input to the command (default: /dev/null).
        #[arg(short = 'i', long)]
        stdin: bool,
        /// Seconds the guest agent may take to answer (a booting guest's
        /// included).
        #[arg(long, value_name = "SECS", default_value_t = 120,
              value_parser = clap::value_parser!(u64).range(1..))]
        agent_timeout: u64,
        /// The node.
        node: String,
        /// The command and its arguments, after `--`.
        #[arg(required = true, last = true, value_name = "CMD")]
        command: Vec<std::ffi::OsString>,
    },
    /// Attach the terminal to a running guest's serial console; Ctrl-]
    /// detaches and leaves the guest running. With standard input not a
    /// terminal, its bytes go to the console and its end detaches (or
    /// --until waits for the guest's answer) (docs/exec-console.md).
    ///
    ///   ibtca-fabric console --run-dir /tmp/fab n1
    ///   echo 'echo ok-$((6*7))' | ibtca-fabric console --run-dir /tmp/fab n1 --until ok-42
    #[command(verbatim_doc_comment)]
    Console {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// The node.
        node: String,
        /// End the session (exit 0) once the guest printed TEXT.
        #[arg(long, value_name = "TEXT", value_parser = clap::builder::NonEmptyStringValueParser::new())]
        until: Option<String>,
        /// Fail (exit 1) if the session lasts longer than SECS.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        timeout: Option<u64>,
    },
    /// Stop what `up` started in the run directory.
    Down {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
    },
}
