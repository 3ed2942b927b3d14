//! `ibtca-fabric`: brings a fabric of ibtca devices and switches described
//! by a topology file up and down.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// `println!` that ignores a closed stdout (`ibtca-fabric up | head`):
/// what was started stays recorded, and nothing panics.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
use ibtca_cli as cli;
use ibtca_fabric::guest_run::{self, Outcome};
use ibtca_fabric::own_kernel::{self, KernelSource, OwnKernelError};
use ibtca_fabric::state::State;
use ibtca_fabric::{
    self as fabric, auto_placement, graph, guest_extras, inspect, launch, port_stats, qemu, End,
    Plan,
};
use ibtca_switch::control;

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
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
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
        /// Seconds to wait for every port to come up.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
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
        /// With an SM in the file (`"sm"`), boot every node's guest, not
        /// only the SM node's and those `--run` gives commands.
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

/// The JSON topology of net file `file`, its warnings on stderr.
fn import(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let imported = fabric::net_file::parse(&text)
        .and_then(|net| fabric::net_import::import(&net))
        .map_err(|e| format!("{}:\n{e}", file.display()))?;
    for w in &imported.warnings {
        eprintln!("{NAME}: warning: {}: {w}", file.display());
    }
    serde_json::to_string_pretty(&imported.topology).map_err(|e| e.to_string())
}

/// Reads and checks a topology file (a net file with `net`): its JSON
/// text, topology and plan, with the placement chosen for this machine
/// where the file sets none, and what the placement chose.
fn load_as(file: &Path, net: bool, run_dir: &Path) -> Result<Loaded, String> {
    let text = if net {
        import(file)?
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?
    };
    let topo = fabric::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut plan = fabric::plan(&topo, run_dir).map_err(|e| format!("{}: {e}", file.display()))?;
    let placed = auto_placement::apply(&mut plan, &auto_placement::machine_cpus());
    Ok((text, topo, plan, placed))
}

/// Reads and checks a JSON topology file, placed as [`load_as`] does.
fn load(file: &Path, run_dir: &Path) -> Result<(String, fabric::Topology, Plan), String> {
    let (text, topo, plan, _) = load_as(file, false, run_dir)?;
    Ok((text, topo, plan))
}

/// A topology file's text, topology, placed plan and the placement chosen.
type Loaded = (String, fabric::Topology, Plan, auto_placement::Applied);

/// Prints the warnings about `plan` (`NAME: warning: FILE: ...`).
fn warn(file: &Path, plan: &Plan) {
    for w in fabric::plan_warnings::warnings(plan) {
        eprintln!("{NAME}: warning: {}: {w}", file.display());
    }
}

fn bin_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "this binary has no directory".to_owned())
}

/// The plan of the fabric running in `run_dir`, from `up`'s copy of its
/// topology there.
fn running_plan(run_dir: &Path) -> Result<Plan, String> {
    State::load(run_dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("no fabric is up in {}", run_dir.display()))?;
    Ok(load(&run_dir.join(fabric::state::TOPOLOGY_FILE), run_dir)?.2)
}

fn resolve(plan: &Plan, text: &str) -> Option<End> {
    match text.split_once(':') {
        Some((name, port)) => {
            let s = plan.switches.iter().position(|s| s.name == name)?;
            Some(End::Switch(s, port.parse().ok()?))
        }
        None => plan
            .nodes
            .iter()
            .position(|n| n.name == text)
            .map(End::Node),
    }
}

fn link_command(run_dir: &Path, end: &str, action: &str, arg: Option<&str>) -> Result<(), String> {
    let plan = running_plan(run_dir)?;
    let want =
        resolve(&plan, end).ok_or_else(|| format!("`{end}` names no node or switch port"))?;
    let &(a, b) = plan
        .links
        .iter()
        .find(|(a, b)| *a == want || *b == want)
        .ok_or_else(|| format!("no link has the end `{end}`"))?;
    let ends: Vec<(usize, u8)> = [a, b]
        .into_iter()
        .filter_map(|e| match e {
            End::Switch(s, p) => Some((s, p)),
            End::Node(_) => None,
        })
        .collect();
    let (targets, what): (&[(usize, u8)], String) = match (action, arg) {
        ("down" | "up", None) => (ends.get(..1).unwrap_or_default(), action.to_owned()),
        ("faults", Some(spec)) => (&ends, format!("faults {{port}} {spec}")),
        ("delay", Some(us)) => (&ends, format!("delay {{port}} {us}")),
        _ => return Err("action: down | up | faults SPEC|none | delay US".into()),
    };
    if targets.is_empty() {
        return Err(format!("the link of `{end}` has no switch end to act on"));
    }
    for &(s, p) in targets {
        let name = plan
            .switches
            .get(s)
            .map(|x| x.name.as_str())
            .unwrap_or_default();
        let line = if what == "down" || what == "up" {
            format!("{what} {p}")
        } else {
            what.replace("{port}", &p.to_string())
        };
        let reply = control::request(&launch::switch_control_path(run_dir, name), &line)
            .map_err(|e| format!("{name}: {e}"))?;
        out!("{name}: {reply}");
        if !reply.starts_with("ok") {
            return Err(format!("{name} refused `{line}`"));
        }
    }
    Ok(())
}

fn stats_command(run_dir: &Path, json: bool, watch: Option<u64>) -> Result<(), String> {
    let show = || -> Result<(), String> {
        let (_, views) = inspect::running(run_dir)?;
        let (ports, missing) = (inspect::ports(&views), inspect::unreachable(&views));
        if json {
            out!("{}", port_stats::render_json(&ports, &missing));
        } else {
            let traps = |name: &str| {
                let sw = views
                    .iter()
                    .find(|v| v.started.name == name && v.kind == "switch")?;
                let reply = control::request(sw.control.as_ref()?, "traps").ok()?;
                Some(reply.strip_prefix("ok ").unwrap_or(&reply).to_owned())
            };
            out!(
                "{}",
                port_stats::render_text(&ports, &missing, &traps).trim_end()
            );
        }
        Ok(())
    };
    match watch {
        Some(secs) => port_stats::watch(Duration::from_secs(secs), show),
        None => show(),
    }
}

fn inspect_command(run_dir: &Path, json: bool) -> Result<(), String> {
    let (state, views) = inspect::running(run_dir)?;
    if json {
        out!("{}", inspect::fabric_json(run_dir, &state, &views));
    } else {
        out!("{}", inspect::render_text(run_dir, &views).trim_end());
    }
    Ok(())
}

fn graph_command(
    file: Option<&Path>,
    run_dir: &Path,
    svg: bool,
    output: Option<&Path>,
) -> Result<(), String> {
    let text = match file {
        Some(f) => graph::dot(&load(f, run_dir)?.2, None),
        None => {
            let plan = running_plan(run_dir)?;
            let (_, views) = inspect::running(run_dir)?;
            graph::dot(&plan, Some(&inspect::ports(&views)))
        }
    };
    let bytes = if svg {
        graph::svg(&text)?
    } else {
        text.into_bytes()
    };
    match output {
        Some(path) => {
            std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        None => {
            use std::io::Write as _;
            let _ = std::io::stdout().write_all(&bytes);
            Ok(())
        }
    }
}

/// Why a command failed: a bad argument (exit status 2) or something at run
/// time (1).
enum Failure {
    Usage(String),
    Runtime(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Runtime(e)
    }
}

/// Checks the own kernel `src` and builds (or finds cached) its guest image
/// with the build-guest.sh beside run-vm.sh; returns the image's directory.
fn own_kernel_image(
    src: &KernelSource,
    run_vm: Option<&Path>,
    tests: bool,
) -> Result<PathBuf, Failure> {
    let failure = |e: OwnKernelError| match e {
        OwnKernelError::Bad(m) => Failure::Usage(m),
        OwnKernelError::Build(m) => Failure::Runtime(m),
    };
    own_kernel::check(src).map_err(failure)?;
    let run_vm = fabric::guests::find_run_vm(run_vm, &bin_dir()?).map_err(|e| e.to_string())?;
    let script = run_vm.with_file_name("build-guest.sh");
    own_kernel::build(&script, &fabric::guests::cache_dir(), src, tests).map_err(failure)
}

fn run(args: Args) -> Result<(), Failure> {
    match args.command {
        Cmd::Check { file, net, run_dir } => {
            let (_, _, plan, _) = load_as(&file, net, &run_dir)?;
            warn(&file, &plan);
            fabric::gateway_launch::check_all(&plan.nodes, &bin_dir()?)?;
            out!("{}: OK", file.display());
            out!("{}", fabric::plan_summary::summary(&plan));
            Ok(())
        }
        Cmd::Up {
            file,
            net,
            run_dir,
            timeout,
            guests,
            kernel,
            initrd,
            kernel_tree,
            modules,
            kernel_tests,
            append,
            guest_timeout,
            run_vm,
            wait,
            run,
            share,
            all_guests,
            guest_packages,
        } => {
            let (text, topo, plan, placed) = load_as(&file, net, &run_dir)?;
            warn(&file, &plan);
            out!("{placed}");
            fabric::gateway_launch::check_all(&plan.nodes, &bin_dir()?)?;
            // Everything the guests need is checked before anything starts.
            let own = match (kernel_tree, &kernel, modules) {
                (Some(dir), ..) => Some(KernelSource::Tree(dir)),
                (None, Some(image), Some(modules)) => Some(KernelSource::Image {
                    image: image.clone(),
                    modules,
                }),
                _ => None,
            };
            if kernel_tests && own.is_none() {
                return Err(Failure::Usage(
                    "--kernel-tests goes with --kernel-tree or --modules".into(),
                ));
            }
            let mut guest_plans = if guests {
                let stack = fabric::guests::VmStack::find(&fabric::guests::cache_dir())
                    .map_err(|e| e.to_string())?;
                let (kernel, initrd) = match &own {
                    Some(src) => {
                        fabric::guests::check_run_dir(&run_dir, &stack)
                            .map_err(|e| e.to_string())?;
                        let image = own_kernel_image(src, run_vm.as_deref(), kernel_tests)?;
                        (
                            Some(image.join("vmlinuz")),
                            Some(image.join("initramfs.cpio.gz")),
                        )
                    }
                    None => (kernel, initrd),
                };
                let opts = fabric::guests::GuestOptions {
                    kernel,
                    initrd,
                    append: append
                        .iter()
                        .map(|a| fabric::guests::parse_append(&topo, a))
                        .collect(),
                    timeout: Duration::from_secs(guest_timeout),
                    packages: guest_packages,
                };
                let mut plans =
                    fabric::guests::resolve(&topo, &plan.nodes, &run_dir, &stack, &opts)
                        .map_err(|e| e.to_string())?;
                if let Some(sm) = &plan.sm {
                    plans.retain(|g| sm.boots_guest(&g.node, &run, all_guests));
                }
                let run_vm = fabric::guests::find_run_vm(run_vm.as_deref(), &bin_dir()?)
                    .map_err(|e| e.to_string())?;
                let layer_script = run_vm.with_file_name(fabric::guest_root_mounts::LAYER_SCRIPT);
                fabric::guest_root_mounts::build_layers(&mut plans, &layer_script)
                    .map_err(|e| e.to_string())?;
                let run = plan
                    .sm
                    .as_ref()
                    .map_or(run.clone(), |sm| sm.with_runs(&run));
                let extras = guest_extras::check(&plan.nodes, &run, share.as_deref(), &run_dir)
                    .map_err(|e| e.to_string())?;
                Some((plans, run_vm, stack, extras))
            } else {
                None
            };
            let mut state = launch::up(
                &plan,
                &file,
                &text,
                &run_dir,
                &bin_dir()?,
                Duration::from_secs(timeout),
            )
            .map_err(|e| e.to_string())?;
            out!("{}", fabric::plan_summary::summary(&plan));
            for n in plan.nodes.iter().filter(|n| n.gateway.is_none()) {
                let path = qemu::guest_script_path(&run_dir, n);
                let script = qemu::guest_script(n, &qemu::node_guest(&topo, &n.name));
                std::fs::write(&path, script)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                match &guest_plans {
                    None => out!("  guest {}: sh {}", n.name, path.display()),
                    Some((p, ..)) if !p.iter().any(|g| g.node == n.name) => {
                        out!(
                            "  guest {}: not booted (only the SM's node needs one; --all-guests)",
                            n.name
                        );
                    }
                    Some(_) => {}
                }
            }
            let still_up = |e: String| {
                format!(
                    "{e} (the fabric is up: ibtca-fabric down --run-dir {})",
                    run_dir.display()
                )
            };
            let children = match &mut guest_plans {
                Some((plans, run_vm, stack, extras)) => {
                    guest_extras::prepare(
                        extras,
                        &mut state,
                        plans,
                        &stack.chroot,
                        &run_dir,
                        &bin_dir()?,
                    )
                    .map_err(|e| still_up(e.to_string()))?;
                    fabric::guest_root_mounts::prepare(plans, &mut state, &stack.chroot, &run_dir)
                        .map_err(|e| still_up(e.to_string()))?;
                    let children = launch::start_guests(&mut state, plans, run_vm, &run_dir)
                        .map_err(|e| still_up(e.to_string()))?;
                    for (g, c) in plans.iter().zip(&children) {
                        let ip = extras
                            .addresses
                            .iter()
                            .find(|a| a.node == g.node)
                            .map(|a| format!(", {}", a.ip))
                            .unwrap_or_default();
                        out!(
                            "  guest {} (pid {}{ip}): console {}",
                            g.node,
                            c.id(),
                            g.console.display()
                        );
                    }
                    out!(
                        "  management wire: {}",
                        fabric::mgmt_net::hub_socket(&run_dir).display()
                    );
                    children
                }
                None => Vec::new(),
            };
            out!(
                "fabric up: {} processes; stop with: ibtca-fabric down --run-dir {}",
                state.processes.len(),
                run_dir.display()
            );
            if wait {
                let (plans, extras) = guest_plans.map(|(p, _, _, x)| (p, x)).unwrap_or_default();
                let mut failed = Vec::new();
                for (g, mut c) in plans.iter().zip(children) {
                    let status = c
                        .wait()
                        .map_err(|e| format!("waiting for guest {}: {e}", g.node))?;
                    out!("guest {}: exited, {status}", g.node);
                    if !status.success() {
                        failed.push(format!("{} ({status})", g.node));
                    } else if !extras.commands(&g.node).is_empty() {
                        let dir = guest_run::cfg_dir(&run_dir, &g.node);
                        match guest_run::outcome(&dir, &extras.commands(&g.node)) {
                            Outcome::Passed => out!("guest {}: commands passed", g.node),
                            Outcome::Failed {
                                index,
                                command,
                                status,
                            } => failed.push(format!(
                                "{}: command {index} (`{command}`) exited with status {status}",
                                g.node
                            )),
                            Outcome::NoStatus => failed.push(format!(
                                "{}: its commands did not finish (no status in {})",
                                g.node,
                                dir.display()
                            )),
                        }
                    }
                }
                if !failed.is_empty() {
                    return Err(format!(
                        "guests that failed: {} (see NODE.console and NODE.qemu.log in {})",
                        failed.join(", "),
                        run_dir.display()
                    )
                    .into());
                }
            }
            Ok(())
        }
        Cmd::Link {
            run_dir,
            end,
            action,
            arg,
        } => Ok(link_command(&run_dir, &end, &action, arg.as_deref())?),
        Cmd::Stats {
            run_dir,
            json,
            watch,
        } => Ok(stats_command(&run_dir, json, watch)?),
        Cmd::Inspect { run_dir, json } => Ok(inspect_command(&run_dir, json)?),
        Cmd::Graph {
            file,
            run_dir,
            svg,
            output,
        } => Ok(graph_command(
            file.as_deref(),
            &run_dir,
            svg,
            output.as_deref(),
        )?),
        Cmd::Restart {
            run_dir,
            node,
            kill,
            guest_only,
            timeout,
        } => {
            let plan = running_plan(&run_dir)?;
            if plan.switches.iter().any(|s| s.name == node) && !guest_only {
                let wait = Duration::from_secs(timeout);
                let p = fabric::switch_restart::restart(
                    &plan,
                    &run_dir,
                    &bin_dir()?,
                    &node,
                    kill,
                    wait,
                )
                .map_err(|e| e.to_string())?;
                out!("restarted {} (pid {})", p.name, p.pid);
                return Ok(());
            }
            let opts = launch::RestartOptions {
                kill,
                guest_only,
                timeout: Duration::from_secs(timeout),
            };
            let restarted = launch::restart(&plan, &run_dir, &bin_dir()?, &node, opts)
                .map_err(|e| e.to_string())?;
            for p in &restarted {
                match &p.console {
                    Some(c) => out!(
                        "restarted {} (pid {}): console {}",
                        p.name,
                        p.pid,
                        c.display()
                    ),
                    None => out!("restarted {} (pid {})", p.name, p.pid),
                }
            }
            Ok(())
        }
        Cmd::Import { file } => {
            out!("{}", import(&file)?);
            Ok(())
        }
        Cmd::Exec { .. } | Cmd::Console { .. } => unreachable!("handled by guest_command"),
        Cmd::Down { run_dir } => {
            let stopped = launch::down(&run_dir).map_err(|e| e.to_string())?;
            if stopped.is_empty() {
                out!("nothing running in {}", run_dir.display());
            } else {
                out!("stopped {}", stopped.join(", "));
            }
            Ok(())
        }
    }
}

/// `exec` and `console`, which end with their own status; `None` for the
/// other commands.
fn guest_command(cmd: &Cmd) -> Option<ExitCode> {
    use ibtca_fabric::{guest_console, guest_exec};
    let fail = |usage: bool, e: &dyn std::fmt::Display| {
        if usage {
            cli::usage_error(NAME, e)
        } else {
            cli::runtime_error(NAME, e)
        }
    };
    Some(match cmd {
        Cmd::Exec {
            run_dir,
            stdin,
            agent_timeout,
            node,
            command,
        } => {
            let opts = guest_exec::ExecOptions {
                stdin: *stdin,
                agent_timeout: Duration::from_secs(*agent_timeout),
            };
            let argv: Vec<&[u8]> = command.iter().map(|a| a.as_encoded_bytes()).collect();
            let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
            match guest_exec::exec(run_dir, node, &argv, &opts, &mut out, &mut err) {
                Ok(status) => ExitCode::from(status),
                Err(e) => fail(e.is_usage(), &e),
            }
        }
        Cmd::Console {
            run_dir,
            node,
            until,
            timeout,
        } => {
            let opts = guest_console::ConsoleOptions {
                until: until.clone(),
                timeout: timeout.map(Duration::from_secs),
            };
            match guest_console::attach(run_dir, node, &opts, &mut std::io::stdout()) {
                Ok(_) => ExitCode::SUCCESS,
                Err(guest_console::ConsoleError::Reach(e)) => fail(e.is_usage(), &e),
                Err(e) => fail(false, &e),
            }
        }
        _ => return None,
    })
}

/// This binary's name, in help, version and errors.
const NAME: &str = "ibtca-fabric";

fn main() -> ExitCode {
    // Warnings, and `up`'s progress: each process started, each port up.
    ibtca_log::logging::init("warn,ibtca_fabric::launch=info");
    let args: Args = cli::parse(NAME);
    if let Some(code) = guest_command(&args.command) {
        return code;
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(e)) => cli::usage_error(NAME, e),
        Err(Failure::Runtime(e)) => cli::runtime_error(NAME, e),
    }
}
