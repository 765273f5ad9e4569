//! `gaspi_run`: GPI-2's launcher command line over this runtime's launcher,
//! so that job scripts written for GPI-2 run unchanged:
//!
//! ```text
//! gaspi_run -m MACHINEFILE [-n N] [-N] PROGRAM [ARGS...]
//! ```
//!
//! GPI-2's machinefile lists one host a line, a host repeated once per rank
//! it takes; `gaspi-run`'s hostfile reader already adds up repeated lines
//! (and accepts `host slots=K` too). Ranks are grouped by host in the order
//! hosts first appear (GPI-2 places rank i on line i: with a machinefile
//! that alternates hosts the numbering differs). `-n N` starts the first N
//! ranks (default: one per line). When every host of the file is this
//! host (`localhost`, `127.0.0.1`, `::1`, its own name or address) the ranks start
//! locally, as `gaspi-run -n N` would, without ssh; otherwise over ssh,
//! as `gaspi-run -m`. `-N` (GPI-2's NUMA pinning) is accepted and ignored
//! with a note; `-b` (another binary for rank 0) and `-d` (rank 0 under
//! gdb) are refused. Over ssh each host needs `gaspi-run` beside
//! `gaspi_run` at the same path (the remote agent).

use gaspi_launch::{is_this_host, launch, read_hostfile, LaunchOptions};
use std::ffi::OsString;

const USAGE: &str = "usage: gaspi_run -m MACHINEFILE [-n N] [-N] PROGRAM [ARGS...]";

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("gaspi_run: {e}");
    eprintln!("{USAGE}");
    std::process::exit(1);
}

/// What the command line asks for.
struct Args {
    machinefile: std::path::PathBuf,
    ranks: Option<u32>,
    command: Vec<OsString>,
}

fn parse(mut args: impl Iterator<Item = OsString>) -> Args {
    let mut machinefile = None;
    let mut ranks = None;
    let mut command = Vec::new();
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("-m") => {
                let v = args
                    .next()
                    .unwrap_or_else(|| fail("-m needs a machinefile"));
                machinefile = Some(std::path::PathBuf::from(v));
            }
            Some("-n") => {
                let v = args.next().unwrap_or_else(|| fail("-n needs a number"));
                match v.to_str().and_then(|s| s.parse::<u32>().ok()) {
                    Some(n) if n > 0 => ranks = Some(n),
                    _ => fail(format!("-n {v:?}: not a positive number")),
                }
            }
            Some("-N") => eprintln!(
                "gaspi_run: -N (NUMA pinning) ignored: bind ranks with \
                 gaspi_set_socket_affinity or numactl"
            ),
            Some("-b") => fail("-b (another binary for rank 0) is not supported"),
            Some("-d") => fail("-d (rank 0 under gdb) is not supported"),
            Some("-h" | "--help") => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            Some(s) if s.starts_with('-') => fail(format!("unknown option {s}")),
            _ => {
                command.push(a);
                command.extend(args.by_ref());
            }
        }
    }
    let Some(machinefile) = machinefile else {
        fail("a machinefile (-m) is required, as for GPI-2")
    };
    if command.is_empty() {
        fail("no program given");
    }
    Args {
        machinefile,
        ranks,
        command,
    }
}

/// `gaspi_run --agent ...` (the remote half of an ssh launch, which runs
/// the launcher's own path on each host): handed to `gaspi-run` beside it.
fn run_agent() -> ! {
    use std::os::unix::process::CommandExt;
    let own = std::env::current_exe().unwrap_or_else(|e| fail(e));
    let sibling = own.with_file_name("gaspi-run");
    let err = std::process::Command::new(&sibling)
        .args(std::env::args_os().skip(1))
        .exec();
    fail(format!(
        "starting {} for the agent: {err}",
        sibling.display()
    ))
}

/// Records the program for `gaspi_cleanup` (GPI-2's gaspi_run writes
/// `/tmp/.last_gaspi_prg`; here one file per user, in the temporary
/// directory). Failing to record it does not stop the job.
fn record_last_program(program: &std::ffi::OsStr) {
    let path = std::fs::canonicalize(program).unwrap_or_else(|_| program.into());
    let file = std::env::temp_dir().join(format!(".last_gaspi_prg.{}", own_uid()));
    let mut text = path.into_os_string().into_encoded_bytes();
    text.push(b'\n');
    if let Err(e) = std::fs::write(&file, text) {
        tracing::debug!("recording the program in {}: {e}", file.display());
    }
}

/// This process's user id (the owner of `/proc/self`).
fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

fn main() {
    gaspi_launch::init_logging();
    if std::env::args_os().nth(1).is_some_and(|a| a == "--agent") {
        run_agent();
    }
    let args = parse(std::env::args_os().skip(1));
    let hosts = read_hostfile(&args.machinefile).unwrap_or_else(|e| fail(e));
    let lines: u32 = hosts.iter().map(|h| h.slots).sum();
    let ranks = args.ranks.unwrap_or(lines);
    if ranks > lines {
        fail(format!(
            "-n {ranks}: the machinefile {} lists {lines} ranks",
            args.machinefile.display()
        ));
    }
    record_last_program(&args.command[0]);
    let mut opts = LaunchOptions::new(ranks, &args.command[0]);
    opts.args = args.command[1..].to_vec();
    if !hosts.iter().all(|h| is_this_host(h.address())) {
        opts.hosts = hosts;
    }
    match launch(&opts) {
        Ok(code) => std::process::exit(code),
        Err(e) => fail(e),
    }
}
