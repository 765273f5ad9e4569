//! `gaspi_cleanup`: ends the leftover ranks of a GASPI job on the hosts of
//! a machinefile, as GPI-2's `gaspi_cleanup` does.
//!
//! ```text
//! gaspi_cleanup -m MACHINEFILE [-c] [PROGRAM]
//! ```
//!
//! GPI-2's tool kills the last program `gaspi_run` started (by name, with
//! `killall` over ssh on every host of the machinefile), for a job that was
//! interrupted or ended badly and left ranks, ports or memory behind. This
//! one does the same in this runtime's terms:
//!
//! - **Which program**: PROGRAM, or else the last one this user's
//!   `gaspi_run` started on this host (recorded in the temporary directory
//!   as `.last_gaspi_prg.UID`, as GPI-2 records it in `/tmp/.last_gaspi_prg`).
//! - **Which processes**: on each host, this user's processes that run that
//!   program (the same executable, or one of the same file name) *and* were
//!   started as ranks (`GASPI_RANK` in their environment, which every
//!   launcher of this runtime sets). A program of the same name that is not
//!   a rank is left alone.
//! - **Ending them**: SIGTERM, then SIGKILL to those still there after two
//!   seconds. `-c` (`--check`) only lists them.
//! - **Their memory**: segments live in memory files without a name
//!   (`memfd`), which the kernel frees when the last process that maps them
//!   ends; so ending the ranks frees it, and no file is left to remove.
//! - **Hosts**: this host directly; another host over ssh (`GASPI_SSH`, as
//!   for `gaspi-run`), running `gaspi_cleanup --local` at the same path there.
//!
//! The launchers already end every rank of a job when it stops, whatever way
//! (decision 0021); this is for what survives a launcher that was killed
//! with SIGKILL on a host whose ranks it could not reach.

use gaspi_launch::{is_this_host, read_hostfile};
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: gaspi_cleanup -m MACHINEFILE [-c] [PROGRAM]\n\
       \x20  -m, --machinefile FILE  the hosts of the job (GPI-2's machinefile)\n\
       \x20  -c, --check             only list the job's processes on each host\n\
       \x20  PROGRAM                 default: the last program gaspi_run started here";

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("gaspi_cleanup: {e}");
    eprintln!("{USAGE}");
    std::process::exit(1);
}

/// Where `gaspi_run` records the program it starts (GPI-2's
/// `/tmp/.last_gaspi_prg`, one file per user here).
fn last_program_file() -> PathBuf {
    std::env::temp_dir().join(format!(".last_gaspi_prg.{}", own_uid()))
}

/// This process's user id (the owner of `/proc/self`).
fn own_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

/// The process ids of this user's ranks of `program` on this host.
fn ranks_of(program: &Path) -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let uid = own_uid();
    let want_exe = std::fs::canonicalize(program).ok();
    let want_name = program.file_name().map(|n| n.to_os_string());
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let proc_dir = entry.path();
        let owner = std::fs::metadata(&proc_dir).map(|m| m.uid());
        if owner.ok() != Some(uid) {
            continue;
        }
        let Ok(exe) = std::fs::read_link(proc_dir.join("exe")) else {
            continue;
        };
        // A replaced executable reads as "PATH (deleted)".
        let exe_name = exe
            .file_name()
            .map(|n| {
                let s = n.as_bytes();
                let s = s.strip_suffix(b" (deleted)").unwrap_or(s);
                OsString::from(std::ffi::OsStr::from_bytes(s))
            })
            .unwrap_or_default();
        let same = want_exe.as_deref() == Some(exe.as_path())
            || want_name.as_ref().is_some_and(|n| *n == exe_name);
        if !same {
            continue;
        }
        let Ok(environ) = std::fs::read(proc_dir.join("environ")) else {
            continue;
        };
        let rank = environ
            .split(|&b| b == 0)
            .find_map(|v| v.strip_prefix(b"GASPI_RANK="))
            .map(|r| String::from_utf8_lossy(r).into_owned());
        if let Some(rank) = rank {
            found.push((pid, rank));
        }
    }
    found
}

/// Lists or ends the ranks of `program` on this host; returns how many
/// there were.
fn clean_here(program: &Path, check: bool) -> usize {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "this host".into());
    let found = ranks_of(program);
    let name = program.display();
    if check {
        for (pid, rank) in &found {
            println!("{name} running on {host} (rank {rank}, pid {pid})");
        }
        return found.len();
    }
    for (pid, _) in &found {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(2);
    let alive = |pid: i32| kill(Pid::from_raw(pid), None).is_ok();
    while Instant::now() < until && found.iter().any(|&(p, _)| alive(p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut killed = 0;
    for (pid, _) in &found {
        if alive(*pid) && kill(Pid::from_raw(*pid), Signal::SIGKILL).is_ok() {
            killed += 1;
        }
    }
    println!(
        "gaspi_cleanup: {host}: ended {} rank(s) of {name} ({killed} needed SIGKILL)",
        found.len()
    );
    found.len()
}

fn main() {
    let mut machinefile = None;
    let mut check = false;
    let mut local = false;
    let mut program: Option<PathBuf> = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("-m" | "--machinefile") => {
                let v = args
                    .next()
                    .unwrap_or_else(|| fail("-m needs a machinefile"));
                machinefile = Some(PathBuf::from(v));
            }
            Some("-c" | "--check") => check = true,
            Some("--local") => local = true,
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return;
            }
            Some(s) if s.starts_with('-') => fail(format!("unknown option {s}")),
            _ if program.is_none() => program = Some(PathBuf::from(a)),
            _ => fail("more than one program given"),
        }
    }
    let program = program.unwrap_or_else(|| {
        let file = last_program_file();
        match std::fs::read_to_string(&file) {
            Ok(p) if !p.trim().is_empty() => PathBuf::from(p.trim()),
            _ => fail(format!(
                "no program given, and gaspi_run recorded none here ({})",
                file.display()
            )),
        }
    });
    if local {
        clean_here(&program, check);
        return;
    }
    let Some(machinefile) = machinefile else {
        fail("a machinefile (-m) is required, as for GPI-2")
    };
    let hosts = read_hostfile(&machinefile).unwrap_or_else(|e| fail(e));
    let mut done_here = false;
    let mut failed = false;
    for host in &hosts {
        if is_this_host(host.address()) {
            if !done_here {
                clean_here(&program, check);
                done_here = true;
            }
            continue;
        }
        let own = std::env::current_exe().unwrap_or_else(|e| fail(e));
        let ssh = std::env::var("GASPI_SSH").unwrap_or_else(|_| "ssh".into());
        let mut words = ssh.split_whitespace();
        let mut cmd = Command::new(words.next().unwrap_or("ssh"));
        cmd.args(words)
            .arg(&host.name)
            .arg(&own)
            .arg("--local")
            .args(check.then_some("-c"))
            .arg(&program);
        match cmd.status() {
            Ok(s) if s.success() => {}
            other => {
                eprintln!("gaspi_cleanup: {}: {other:?}", host.name);
                failed = true;
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}
