//! Every rank says who it is.
//!
//! `cargo run --release --example hello` starts 4 ranks by itself;
//! `gaspi-run -n 8 target/release/examples/hello` starts 8.

use gaspi::{Config, Gaspi, Group, Timeout};
use std::process::ExitCode;

/// Errors reach the user with their `Display` text (`fn main() -> Result`
/// would print their `Debug` form).
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hello: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), gaspi::Error> {
    gaspi_launch::init_logging();
    let gaspi = Gaspi::init(Config::from_env()?.standalone_ranks(4))?;
    println!(
        "hello from rank {} of {} (pid {})",
        gaspi.rank().0,
        gaspi.size(),
        std::process::id()
    );
    gaspi.barrier(Group::ALL, Timeout::Block)?;
    gaspi.term()
}
