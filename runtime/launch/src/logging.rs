//! A `tracing` subscriber for programs (feature `logging`).
//!
//! The `gaspi` library logs through `tracing` and installs no subscriber:
//! that is the program's choice. This is the one the project's binaries use
//! (`gaspi-run`, the examples, the benchmark, the test ranks) and the C
//! library `libGPI2`, whose C programs cannot install one themselves.

/// Sends `tracing` output to stderr, filtered by `GASPI_LOG` (or `RUST_LOG`),
/// warnings and errors by default. For programs; libraries leave it alone.
/// Colours only when stderr is a terminal: logs written to a pipe or a
/// file (a launcher's, a job script's) carry no escape codes. A second call,
/// or a call after the program installed a subscriber of its own, changes
/// nothing.
pub fn init_logging() {
    use std::io::IsTerminal;
    let filter = std::env::var("GASPI_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
