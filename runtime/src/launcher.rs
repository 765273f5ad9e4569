//! Starting the ranks of a job on this host: `gaspi-run`, and self-launch.
//!
//! The launcher gives each rank its rank, the job size, the rendezvous
//! address and a fresh secret job key in the environment, and hands rank 0
//! the already-bound rendezvous socket (`GASPI_RENDEZVOUS_FD`), so no port
//! can be taken between choosing and binding it. Children die with the
//! launcher (`PR_SET_PDEATHSIG`). When a rank fails, the launcher stops the
//! others (unless told to keep them running) and returns the first non-zero
//! exit code; on Ctrl-C or SIGTERM it stops them all. Segments live in
//! memfds, which the kernel frees with the last process that maps them, so
//! a stopped job leaves no shared-memory files behind.

use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What to launch and how.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// Number of ranks.
    pub ranks: u32,
    /// The program.
    pub program: std::path::PathBuf,
    /// Its arguments.
    pub args: Vec<std::ffi::OsString>,
    /// Prefix each output line with `[rank]`.
    pub tag_output: bool,
    /// Let the other ranks run on when one fails (fault-tolerant programs).
    pub keep_going: bool,
    /// Stop the job after this long.
    pub timeout: Option<Duration>,
    /// Extra environment for every rank.
    pub env: Vec<(String, String)>,
}

impl LaunchOptions {
    /// `ranks` copies of `program` with `args`, other settings default.
    pub fn new(ranks: u32, program: impl Into<std::path::PathBuf>) -> LaunchOptions {
        LaunchOptions {
            ranks,
            program: program.into(),
            args: Vec::new(),
            tag_output: false,
            keep_going: false,
            timeout: None,
            env: Vec::new(),
        }
    }
}

/// Set by the Ctrl-C / SIGTERM handler of the process.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

fn install_interrupt_handler() {
    // A process has one handler; a second install (second job in the same
    // process, or the user's own) is not an error for us.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn signal_all(children: &mut [Option<Child>], sig: i32) {
    for c in children.iter().flatten() {
        // SAFETY: kill(2) on the pid of a child we have not reaped yet (it is
        // still in `children`), so the pid cannot have been reused.
        unsafe { libc::kill(c.id() as i32, sig) };
    }
}

/// Runs a job and returns its exit code (the first non-zero one, or 0).
pub fn launch(opts: &LaunchOptions) -> Result<i32> {
    if opts.ranks == 0 {
        return Err(Error::Config("a job needs at least one rank".into()));
    }
    install_interrupt_handler();
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("binding the rendezvous", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("rendezvous address", e))?;
    let key: [u8; 32] = rand::random();
    let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let listen_fd = listener.as_raw_fd();
    let mut children: Vec<Option<Child>> = Vec::with_capacity(opts.ranks as usize);
    let mut pumps = Vec::new();
    let launcher_pid = std::process::id() as i32;
    for r in 0..opts.ranks {
        let mut cmd = Command::new(&opts.program);
        cmd.args(&opts.args)
            .env("GASPI_RANK", r.to_string())
            .env("GASPI_SIZE", opts.ranks.to_string())
            .env("GASPI_LOCAL_RANK", r.to_string())
            .env("GASPI_LOCAL_SIZE", opts.ranks.to_string())
            .env("GASPI_RENDEZVOUS", addr.to_string())
            .env("GASPI_JOB_KEY", &key)
            .env_remove("GASPI_RENDEZVOUS_FD")
            .stdin(Stdio::null());
        for (k, v) in &opts.env {
            cmd.env(k, v);
        }
        if r == 0 {
            cmd.env("GASPI_RENDEZVOUS_FD", listen_fd.to_string());
        }
        if opts.tag_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let is_rank0 = r == 0;
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only async-signal-safe functions (prctl, getppid, fcntl,
        // _exit) on values computed before the fork.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // The launcher may have died before prctl took effect.
                if libc::getppid() != launcher_pid {
                    libc::_exit(1);
                }
                if is_rank0 {
                    // Let rank 0 inherit the bound rendezvous socket.
                    libc::fcntl(listen_fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(mut child) => {
                if opts.tag_output {
                    if let Some(out) = child.stdout.take() {
                        pumps.push(pump(r, out, false));
                    }
                    if let Some(err) = child.stderr.take() {
                        pumps.push(pump(r, err, true));
                    }
                }
                children.push(Some(child));
            }
            Err(e) => {
                signal_all(&mut children, libc::SIGKILL);
                for c in children.iter_mut().flatten() {
                    let _ = c.wait();
                }
                return Err(Error::io(format!("starting {}", opts.program.display()), e));
            }
        }
    }
    drop(listener);
    let code = supervise(&mut children, opts);
    for p in pumps {
        let _ = p.join();
    }
    Ok(code)
}

/// Waits for the ranks; stops them all on failure, interrupt or timeout.
fn supervise(children: &mut [Option<Child>], opts: &LaunchOptions) -> i32 {
    let start = Instant::now();
    let mut first_failure: Option<i32> = None;
    let mut stopping_since: Option<Instant> = None;
    let mut live = children.len();
    while live > 0 {
        for (r, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot.as_mut() else { continue };
            if let Ok(Some(status)) = child.try_wait() {
                *slot = None;
                live -= 1;
                let code = exit_code(status);
                if code != 0 {
                    if stopping_since.is_none() {
                        eprintln!("gaspi-run: rank {r} exited with code {code}");
                    }
                    first_failure.get_or_insert(code);
                }
            }
        }
        if live == 0 {
            break;
        }
        let interrupted = INTERRUPTED.load(Ordering::SeqCst);
        let timed_out = opts.timeout.is_some_and(|t| start.elapsed() > t);
        let failed = first_failure.is_some() && !opts.keep_going;
        if stopping_since.is_none() && (interrupted || timed_out || failed) {
            if interrupted {
                eprintln!("gaspi-run: interrupted, stopping {live} ranks");
                first_failure.get_or_insert(130);
            } else if timed_out {
                eprintln!("gaspi-run: job timed out, stopping {live} ranks");
                first_failure.get_or_insert(124);
            } else {
                eprintln!("gaspi-run: stopping the remaining {live} ranks");
            }
            signal_all(children, libc::SIGTERM);
            stopping_since = Some(Instant::now());
        }
        if stopping_since.is_some_and(|t| t.elapsed() > Duration::from_secs(3)) {
            signal_all(children, libc::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    first_failure.unwrap_or(0)
}

fn pump(
    rank: u32,
    stream: impl std::io::Read + Send + 'static,
    is_err: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    let text = text.trim_end_matches('\n');
                    if is_err {
                        let _ = writeln!(std::io::stderr().lock(), "[{rank}] {text}");
                    } else {
                        let _ = writeln!(std::io::stdout().lock(), "[{rank}] {text}");
                    }
                }
            }
        }
    })
}

/// Launches `ranks` copies of the current executable with its arguments.
pub(crate) fn relaunch_self(ranks: u32) -> Result<i32> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io("finding the current executable", e))?;
    let mut opts = LaunchOptions::new(ranks, exe);
    opts.args = std::env::args_os().skip(1).collect();
    opts.tag_output = std::env::var_os("GASPI_TAG_OUTPUT").is_some();
    launch(&opts)
}
