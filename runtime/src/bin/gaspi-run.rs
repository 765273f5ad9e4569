//! `gaspi-run`: starts the ranks of a GASPI job on this host.

use clap::Parser;
use gaspi::launcher::{launch, LaunchOptions};
use std::time::Duration;

/// Start N ranks of PROGRAM on this host.
#[derive(Parser, Debug)]
#[command(name = "gaspi-run", version, about)]
struct Args {
    /// Number of ranks.
    #[arg(short = 'n', long = "ranks", value_parser = clap::value_parser!(u32).range(1..))]
    ranks: u32,
    /// Prefix every output line with "[rank] ".
    #[arg(short = 't', long = "tag-output")]
    tag_output: bool,
    /// Keep the other ranks running when one fails (fault-tolerant programs).
    #[arg(short = 'k', long = "keep-going")]
    keep_going: bool,
    /// Stop the whole job after this many seconds.
    #[arg(long = "timeout")]
    timeout: Option<u64>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<std::ffi::OsString>,
}

fn main() {
    gaspi::init_logging();
    let args = Args::parse();
    let mut opts = LaunchOptions::new(args.ranks, &args.command[0]);
    opts.args = args.command[1..].to_vec();
    opts.tag_output = args.tag_output;
    opts.keep_going = args.keep_going;
    opts.timeout = args.timeout.map(Duration::from_secs);
    match launch(&opts) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("gaspi-run: {e}");
            std::process::exit(1);
        }
    }
}
