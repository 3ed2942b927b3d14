//! The seccomp sandbox of `ibtca-device`, `ibtca-switch`,
//! `ibtca-gateway`, `ibtca-hive` and `ibtca-simport`: each thread, once set up, installs a filter for its
//! [`Role`] that allows only the system calls that role makes from then
//! on; any other call ends the process with one line naming the call and
//! the thread ([`sigsys`]). docs/sandbox.md describes the roles.
//!
//! A binary calls [`enable`] first thing (it compiles every role's filter
//! and installs the `SIGSYS` handler); each thread calls [`enter`] with its
//! role when its set-up is done. Without [`enable`] (`--no-seccomp`, or the
//! crate used as a library, as the tests do) [`enter`] does nothing.

mod groups;
mod roles;
mod rules;
mod sigsys;
mod syscall_names;

use std::collections::HashMap;
use std::io;
use std::sync::OnceLock;

pub use roles::Role;
pub use sigsys::EXIT_FORBIDDEN_CALL;

/// The sandbox options every sandboxed binary takes.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SandboxArgs {
    /// Run without the seccomp filter, for debugging (also when the
    /// environment has IBTCA_NO_SECCOMP; see docs/sandbox.md).
    #[arg(long)]
    pub no_seccomp: bool,

    /// Test hook: the thread of this role makes a forbidden system call
    /// (execve) right after installing its filter.
    #[arg(long, value_name = "ROLE", hide = true, value_parser = parse_role)]
    pub seccomp_selftest: Option<Role>,
}

fn parse_role(name: &str) -> Result<Role, String> {
    Role::from_name(name).ok_or_else(|| {
        let names: Vec<_> = Role::ALL.iter().map(|r| r.name()).collect();
        format!("no role {name:?} (roles: {})", names.join(", "))
    })
}

struct Sandbox {
    /// Each role's filter; `None` with `--no-seccomp`.
    programs: Option<HashMap<Role, seccompiler::BpfProgram>>,
    selftest: Option<Role>,
}

static SANDBOX: OnceLock<Sandbox> = OnceLock::new();

/// Turns the sandbox on for this process (unless `--no-seccomp`), before
/// any thread starts: compiles every role's filter, installs the handler
/// that reports a forbidden call as `program`, and has each link thread
/// enter its role. Fails if the kernel has no seccomp filters.
pub fn enable(program: &'static str, args: &SandboxArgs) -> io::Result<()> {
    if args.no_seccomp || std::env::var_os("IBTCA_NO_SECCOMP").is_some() {
        tracing::warn!("seccomp filter off (--no-seccomp)");
        let _ = SANDBOX.set(Sandbox {
            programs: None,
            selftest: args.seccomp_selftest,
        });
        set_link_hook();
        return Ok(());
    }
    // SAFETY: PR_GET_SECCOMP takes no pointer and changes nothing.
    if unsafe { libc::prctl(libc::PR_GET_SECCOMP) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("seccomp: {e} (--no-seccomp runs without the filter)"),
        ));
    }
    set_malloc_parameters();
    let mut programs = HashMap::new();
    for role in Role::ALL {
        let program = rules::compile(role.groups())
            .map_err(|e| io::Error::other(format!("seccomp: the {} filter: {e}", role.name())))?;
        programs.insert(role, program);
    }
    sigsys::install(program)?;
    let _ = SANDBOX.set(Sandbox {
        programs: Some(programs),
        selftest: args.seccomp_selftest,
    });
    set_link_hook();
    Ok(())
}

/// Sets two glibc malloc parameters that glibc would otherwise work out
/// later by reading a file, in whichever thread first needs them; that
/// thread may be filtered by then, and no role may open files to read:
/// the limit on arenas (to its default, 8 per CPU online), read from
/// /sys/devices/system/cpu/online when a thread first needs a new arena;
/// and the trim threshold (to the largest value), without which shrinking
/// a thread's arena reads /proc/sys/vm/overcommit_memory. Freed memory at
/// the top of an arena then stays with the process for reuse; allocations
/// of 128 KiB and more are mappings of their own, returned when freed.
fn set_malloc_parameters() {
    // SAFETY: sysconf and mallopt take no pointers; mallopt only sets
    // malloc parameters, before the other threads start.
    unsafe {
        let cpus = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).clamp(1, 4096);
        libc::mallopt(libc::M_ARENA_MAX, 8 * cpus as libc::c_int);
        libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
    }
}

/// Has each link thread enter its role.
fn set_link_hook() {
    ibtca_link::set_thread_hook(|kind| {
        enter(match kind {
            ibtca_link::LinkThread::Supervisor => Role::Link,
            ibtca_link::LinkThread::Writer => Role::LinkWriter,
        })
    });
}

/// Installs `role`'s filter on the calling thread (nothing if the sandbox
/// is off; with `--no-seccomp` only the self-test call is made). A filter
/// that cannot be installed ends the process: a thread must not run
/// unfiltered when the sandbox is on.
pub fn enter(role: Role) {
    let Some(sandbox) = SANDBOX.get() else {
        return;
    };
    if let Some(programs) = &sandbox.programs {
        sigsys::set_thread_role(role.name());
        if let Err(e) = seccompiler::apply_filter(&programs[&role]) {
            tracing::error!("seccomp: cannot install the {} filter: {e}", role.name());
            std::process::exit(1);
        }
    }
    if sandbox.selftest == Some(role) {
        forbidden_call();
    }
}

/// Starts `ibtca-signals`, the thread that waits for the first of
/// `signals` in the [`Role::Signals`] role and calls `on` with it.
pub fn start_signal_thread(
    mut signals: signal_hook::iterator::Signals,
    on: impl FnOnce(i32) + Send + 'static,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("ibtca-signals".into())
        .spawn(move || {
            enter(Role::Signals);
            if let Some(sig) = signals.forever().next() {
                on(sig);
            }
        })
        .map(drop)
}

/// The test hook's forbidden call: `execve` of a path that does not exist
/// (harmless if the filter let it through, which the tests would see).
fn forbidden_call() {
    tracing::info!("seccomp self-test: calling execve");
    let path = c"/nonexistent/ibtca-seccomp-selftest";
    let argv = [std::ptr::null::<libc::c_char>()];
    // SAFETY: execve with a NUL-terminated path and an empty,
    // NULL-terminated argv and envp; the path does not exist.
    unsafe {
        libc::syscall(
            libc::SYS_execve,
            path.as_ptr(),
            argv.as_ptr(),
            argv.as_ptr(),
        )
    };
    tracing::error!("seccomp self-test: execve was not stopped");
}
