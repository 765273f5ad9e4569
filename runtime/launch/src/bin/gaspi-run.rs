//! `gaspi-run`: starts the ranks of a GASPI job, on this host or, with
//! `-m HOSTFILE`, on the listed hosts over ssh. `gaspi-run --agent ...` is
//! the remote half of the latter, started by ssh on each host (see
//! `gaspi_launch::agent`); users do not call it.

use clap::Parser;
use gaspi_launch::{agent, is_this_host, launch, read_hostfile, AgentOptions, LaunchOptions};
use std::ffi::OsString;
use std::time::Duration;

/// Start N ranks of PROGRAM on this host, or on the hosts of a hostfile.
#[derive(Parser, Debug)]
#[command(name = "gaspi-run", version, about)]
struct Args {
    /// Number of ranks (with -m: default, every slot of the hostfile).
    #[arg(short = 'n', long = "ranks", value_parser = clap::value_parser!(u32).range(1..))]
    ranks: Option<u32>,
    /// Start the ranks on these hosts over ssh: one host a line, `host`,
    /// `host slots=K` or `host:K`, `#` comments; ranks fill the hosts in
    /// order. This host's entries (`localhost`, `127.0.0.1`, its name or
    /// address) start without ssh. `GASPI_SSH` replaces the ssh command (default `ssh -o
    /// BatchMode=yes`).
    #[arg(short = 'm', long = "hostfile", alias = "machinefile")]
    hostfile: Option<std::path::PathBuf>,
    /// Pass this variable (NAME: its value here; or NAME=VALUE) to every
    /// rank. With -m, every GASPI_* variable is passed as well.
    #[arg(short = 'x', long = "export", value_name = "NAME[=VALUE]")]
    export: Vec<String>,
    // The help text is an attribute, not a doc comment: rustdoc would read
    // "[rank]" as a link.
    #[arg(
        short = 't',
        long = "tag-output",
        help = "Prefix every output line with \"[rank] \"."
    )]
    tag_output: bool,
    /// Keep the other ranks running when one fails (fault-tolerant programs).
    #[arg(short = 'k', long = "keep-going")]
    keep_going: bool,
    /// Stop the whole job after this many seconds.
    #[arg(long = "timeout")]
    timeout: Option<u64>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// `gaspi-run --agent`: runs one rank of a job started with -m.
#[derive(Parser, Debug)]
#[command(name = "gaspi-run --agent")]
struct AgentArgs {
    /// The directory to run in, where it exists.
    #[arg(long)]
    wdir: Option<std::path::PathBuf>,
    /// Rank 0: bind the rendezvous on this host name and report its port.
    #[arg(long)]
    rendezvous_host: Option<String>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("gaspi-run: {e}");
    std::process::exit(1);
}

fn run_agent() -> ! {
    let args = AgentArgs::parse_from(std::env::args_os().skip(1));
    let opts = AgentOptions {
        wdir: args.wdir,
        rendezvous_host: args.rendezvous_host,
        program: args.command[0].clone(),
        args: args.command[1..].to_vec(),
    };
    match agent(&opts) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let host = nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default();
            fail(format!("agent on {host}: {e}"))
        }
    }
}

fn main() {
    gaspi_launch::init_logging();
    if std::env::args_os().nth(1).is_some_and(|a| a == "--agent") {
        run_agent();
    }
    let args = Args::parse();
    let hosts = match &args.hostfile {
        Some(path) => read_hostfile(path).unwrap_or_else(|e| fail(e)),
        None => Vec::new(),
    };
    let ranks = match (args.ranks, hosts.is_empty()) {
        (Some(n), _) => n,
        (None, false) => hosts.iter().map(|h| h.slots).sum(),
        (None, true) => fail("give the number of ranks (-n N) or a hostfile (-m FILE)"),
    };
    let mut opts = LaunchOptions::new(ranks, &args.command[0]);
    opts.args = args.command[1..].to_vec();
    opts.tag_output = args.tag_output;
    opts.keep_going = args.keep_going;
    opts.timeout = args.timeout.map(Duration::from_secs);
    // A hostfile of this host alone: started here, as `gaspi-run -n`
    // (no ssh, no sshd needed); ranks of this host in a hostfile with
    // others start here too (`gaspi_launch::is_this_host`).
    if !hosts.iter().all(|h| is_this_host(h.address())) {
        opts.hosts = hosts;
    }
    for x in &args.export {
        match x.split_once('=') {
            Some((k, v)) => opts.env.push((k.into(), v.into())),
            None => match std::env::var(x) {
                Ok(v) => opts.env.push((x.clone(), v)),
                Err(_) => fail(format!("-x {x}: no such variable here")),
            },
        }
    }
    match launch(&opts) {
        Ok(code) => std::process::exit(code),
        Err(e) => fail(e),
    }
}
