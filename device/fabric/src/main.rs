//! `ibtca-fabric`: brings a fabric of ibtca devices and switches described
//! by a topology file up and down.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

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
use ibtca_fabric::{self as fabric, graph, guest_extras, inspect, launch, port_stats, qemu};
use ibtca_switch::control;

mod command_line;
mod link_command;
mod loading;
mod switch_command;
use command_line::{Args, Cmd};
use loading::{import, load, load_host, running_plan, warn};

fn bin_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "this binary has no directory".to_owned())
}

fn stats_command(run_dir: &Path, json: bool, watch: Option<u64>) -> Result<(), String> {
    let show = || -> Result<(), String> {
        let (_, views) = inspect::running(run_dir)?;
        let (ports, missing) = (inspect::ports(&views), inspect::unreachable(&views));
        if json {
            out!("{}", port_stats::render_json(&ports, &missing));
        } else {
            let traps = |name: &str| {
                if let Some(t) = inspect::hosted_traps(&views, name) {
                    return Some(t.to_string());
                }
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

fn export_command(run_dir: &Path, output: Option<&Path>) -> Result<(), String> {
    let plan = running_plan(run_dir)?;
    let (_, views) = inspect::running(run_dir)?;
    let (text, notes) = fabric::net_export::net_file(&plan, &inspect::ports(&views));
    for n in notes {
        eprintln!("{NAME}: {n}");
    }
    for (name, kind, why) in inspect::unreachable(&views) {
        eprintln!("{NAME}: {kind} {name} did not answer ({why}): its links kept as planned");
    }
    match output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
        }
        None => {
            out!("{}", text.trim_end());
            Ok(())
        }
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
    debian_root: bool,
) -> Result<PathBuf, Failure> {
    let failure = |e: OwnKernelError| match e {
        OwnKernelError::Bad(m) => Failure::Usage(m),
        OwnKernelError::Build(m) => Failure::Runtime(m),
    };
    own_kernel::check(src, debian_root).map_err(failure)?;
    let run_vm = fabric::guests::find_run_vm(run_vm, &bin_dir()?).map_err(|e| e.to_string())?;
    let script = run_vm.with_file_name("build-guest.sh");
    own_kernel::build(&script, &fabric::guests::cache_dir(), src, tests).map_err(failure)
}

fn run(args: Args) -> Result<(), Failure> {
    match args.command {
        Cmd::Check {
            file,
            net,
            run_dir,
            host,
        } => {
            let ((_, _, plan, _), cross, warnings) =
                load_host(&file, net, &run_dir, host.as_deref(), &[])?;
            warn(&file, &warnings);
            fabric::gateway_launch::check_all(&plan.nodes, &bin_dir()?)?;
            out!("{}: OK", file.display());
            out!("{}", fabric::plan_summary::summary(&plan));
            for line in fabric::hosts::summary(&cross) {
                out!("{line}");
            }
            Ok(())
        }
        Cmd::Up {
            file,
            net,
            run_dir,
            host,
            timeout,
            sim_port,
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
            process_per_node,
            devices,
        } => {
            let ((text, topo, plan, placed), cross, warnings) =
                load_host(&file, net, &run_dir, host.as_deref(), &sim_port)?;
            warn(&file, &warnings);
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
                        // Checked for every node that asks for the Debian
                        // root, before the module is built.
                        let debian_root = topo.nodes.iter().any(|n| {
                            matches!(
                                fabric::guest_root::root(
                                    &n.name,
                                    &topo.guest,
                                    n.guest.as_ref(),
                                    &guest_packages
                                ),
                                Ok(fabric::guest_root::Root::Debian { .. })
                            )
                        });
                        let image =
                            own_kernel_image(src, run_vm.as_deref(), kernel_tests, debian_root)?;
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
                } else if net && !all_guests {
                    // A net file's nodes are guestless but for those
                    // `--run` gives commands.
                    plans.retain(|g| run.iter().any(|r| r.starts_with(&format!("{}=", g.node))));
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
                let mut extras = guest_extras::check(&plan.nodes, &run, share.as_deref(), &run_dir)
                    .map_err(|e| e.to_string())?;
                extras.wait = wait;
                Some((plans, run_vm, stack, extras))
            } else {
                None
            };
            let mut hosted = match net && !process_per_node {
                true => fabric::hive_plan::Hosted::choose(&plan, true),
                false => fabric::hive_plan::Hosted::none(),
            };
            // A node whose guest boots keeps its device.
            if let Some((plans, ..)) = &guest_plans {
                for g in plans {
                    hosted.0.remove(&g.node);
                }
            }
            for d in &devices {
                if !plan.nodes.iter().any(|n| &n.name == d) {
                    return Err(Failure::Usage(format!("--device {d}: no such node")));
                }
                hosted.0.remove(d);
            }
            let mut state = launch::up_hosting(
                &plan,
                &hosted,
                &file,
                &text,
                &run_dir,
                &bin_dir()?,
                Duration::from_secs(timeout),
            )
            .map_err(|e| e.to_string())?;
            fabric::hosts::save(&run_dir, host.as_deref()).map_err(|e| e.to_string())?;
            out!("{}", fabric::plan_summary::summary(&plan));
            for line in fabric::hosts::summary(&cross) {
                out!("{line}");
            }
            if !hosted.is_empty() {
                out!("  hosted in one ibtca-hive: {} nodes", hosted.0.len());
            }
            for n in plan
                .nodes
                .iter()
                .filter(|n| n.gateway.is_none() && !hosted.has(&n.name))
            {
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
        } => Ok(link_command::link_command(
            &run_dir,
            &end,
            &action,
            arg.as_deref(),
        )?),
        Cmd::Switch {
            run_dir,
            switch,
            action,
            timeout,
        } => Ok(switch_command::switch_command(
            &run_dir,
            &switch,
            action == "up",
            Duration::from_secs(timeout),
        )?),
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
        Cmd::Export {
            net: _,
            run_dir,
            output,
        } => Ok(export_command(&run_dir, output.as_deref())?),
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
