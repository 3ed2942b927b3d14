//! `ibtca-fabric`: brings a fabric of ibtca devices and switches described
//! by a topology file up and down.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ibtca_device::fabric::{self, launch, qemu, End, Plan};

/// Brings up a fabric of ibtca devices and switches from a topology file.
///
///   ibtca-fabric check qemu-configs/four-nodes-one-switch.json
///   ibtca-fabric up qemu-configs/four-nodes-one-switch.json --run-dir /tmp/fab
///   ibtca-fabric down --run-dir /tmp/fab
///
/// `up` checks the file (nothing starts if it is wrong), starts the
/// switches, then the devices (binaries next to this one), waits until
/// every linked port is up, and writes each guest's QEMU command line into
/// the run directory as NODE.qemu.sh. Logs are NODE.log and SWITCH.log
/// there; `down` stops exactly the processes `up` started.
#[derive(Parser, Debug)]
#[command(version, about, long_about, verbatim_doc_comment)]
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
        /// Run directory the sockets would be in.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
    },
    /// Start everything in a topology file and wait until every port is up.
    Up {
        /// The topology file (JSON).
        file: PathBuf,
        /// Directory for sockets, logs, captures and the state file.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
        /// Seconds to wait for every port to come up.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// Stop what `up` started in the run directory.
    Down {
        /// The run directory given to `up`.
        #[arg(long, default_value = "/tmp/ibtca-fabric")]
        run_dir: PathBuf,
    },
}

fn load(file: &Path, run_dir: &Path) -> Result<(fabric::Topology, Plan), String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let topo = fabric::parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let plan = fabric::plan(&topo, run_dir).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok((topo, plan))
}

fn end_name(plan: &Plan, end: End) -> String {
    match end {
        End::Node(n) => plan
            .nodes
            .get(n)
            .map(|x| x.name.clone())
            .unwrap_or_default(),
        End::Switch(s, p) => format!(
            "{}:{p}",
            plan.switches
                .get(s)
                .map(|x| x.name.as_str())
                .unwrap_or_default()
        ),
    }
}

fn summary(plan: &Plan) {
    println!(
        "{} node(s), {} switch(es), {} link(s)",
        plan.nodes.len(),
        plan.switches.len(),
        plan.links.len()
    );
    for n in &plan.nodes {
        println!(
            "  node {:<10} LID {:<5} GUID {:#018x}  {}",
            n.name,
            n.lid,
            n.guid,
            n.socket.display()
        );
    }
    for sw in &plan.switches {
        let routes: Vec<String> = sw.routes.iter().map(|(l, p)| format!("{l}→{p}")).collect();
        println!(
            "  switch {:<8} {} ports, LFT {}",
            sw.name,
            sw.ports.len(),
            routes.join(" ")
        );
    }
    for &(a, b) in &plan.links {
        println!("  link {} <-> {}", end_name(plan, a), end_name(plan, b));
    }
}

fn bin_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "this binary has no directory".to_owned())
}

fn run(args: Args) -> Result<(), String> {
    match args.command {
        Cmd::Check { file, run_dir } => {
            let (_, plan) = load(&file, &run_dir)?;
            println!("{}: OK", file.display());
            summary(&plan);
            Ok(())
        }
        Cmd::Up {
            file,
            run_dir,
            timeout,
        } => {
            let (topo, plan) = load(&file, &run_dir)?;
            let state = launch::up(
                &plan,
                &file,
                &run_dir,
                &bin_dir()?,
                Duration::from_secs(timeout),
            )
            .map_err(|e| e.to_string())?;
            summary(&plan);
            for n in &plan.nodes {
                let path = qemu::guest_script_path(&run_dir, n);
                let script = qemu::guest_script(n, &topo.guest);
                std::fs::write(&path, script)
                    .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                println!("  guest {}: sh {}", n.name, path.display());
            }
            println!(
                "fabric up: {} processes; stop with: ibtca-fabric down --run-dir {}",
                state.processes.len(),
                run_dir.display()
            );
            Ok(())
        }
        Cmd::Down { run_dir } => {
            let stopped = launch::down(&run_dir).map_err(|e| e.to_string())?;
            if stopped.is_empty() {
                println!("nothing running in {}", run_dir.display());
            } else {
                println!("stopped {}", stopped.join(", "));
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    ibtca_device::logging::init("warn");
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ibtca-fabric: {e}");
            ExitCode::FAILURE
        }
    }
}
