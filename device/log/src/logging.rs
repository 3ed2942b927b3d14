//! Logging set-up shared by the binaries: `tracing` to stderr, filtered by
//! `RUST_LOG` (e.g. `RUST_LOG=debug`), else by the binary's default level;
//! colours only when stderr is a terminal (not in the log files
//! `ibtca-fabric` and the tests write).

use std::io::IsTerminal;

/// Installs the subscriber; `default` is the filter when `RUST_LOG` is unset.
pub fn init(default: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
