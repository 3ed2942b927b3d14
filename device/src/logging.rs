//! Logging set-up shared by the binaries: `tracing` to stderr, filtered by
//! `RUST_LOG` (e.g. `RUST_LOG=debug`), else by the binary's default level.

/// Installs the subscriber; `default` is the filter when `RUST_LOG` is unset.
pub fn init(default: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
        )
        .with_writer(std::io::stderr)
        .init();
}
