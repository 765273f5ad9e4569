//! Starting the ranks of a job: `gaspi-run`, and self-launch; on other
//! hosts over ssh in `ssh` (`gaspi-run -m HOSTFILE`).
//!
//! The launcher gives each rank its rank, the job size, the rendezvous
//! address and a fresh secret job key in the environment, and hands rank 0
//! the already-bound rendezvous socket (`GASPI_RENDEZVOUS_FD`), so no port
//! can be taken between choosing and binding it. Children die with the
//! launcher (`PR_SET_PDEATHSIG`). When a rank fails, the launcher stops the
//! others (unless told to keep them running) and returns the exit code of
//! the rank that failed first in time (its lifeline or pidfd tells first);
//! on Ctrl-C or SIGTERM it stops them all. Segments live in memfds, which
//! the kernel frees with the last process that maps them, so a stopped job
//! leaves no shared-memory files behind.

mod ssh;

pub use ssh::{agent, is_this_host, parse_hostfile, place, read_hostfile, AgentOptions, Host};

use crate::{Error, Result};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
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
    /// Hosts to start the ranks on over ssh; empty: all on this host.
    pub hosts: Vec<Host>,
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
            hosts: Vec::new(),
        }
    }
}

/// Set by the launcher's handler of SIGINT (Ctrl-C), SIGTERM and SIGHUP.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_signal: libc::c_int) {
    // An atomic store: async-signal-safe.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT, SIGTERM and SIGHUP set [`INTERRUPTED`], which the
/// supervisor looks at every tick, instead of killing the launcher: the
/// launcher then stops its ranks and returns 130. The handler replaces
/// whatever was installed before (a self-launching program is the
/// launcher from here on). `SA_RESTART`: the output pumps' reads go on
/// through a signal; the supervisor's `epoll_wait` returns early, as it
/// should.
fn install_interrupt_handler() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_interrupt),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for signal in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is
        // async-signal-safe, and touches nothing a signal could interrupt
        // half-way.
        if let Err(e) = unsafe { sigaction(signal, &action) } {
            tracing::debug!("sigaction({signal}): {e}; that signal ends the launcher");
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// A started rank: the child, a pidfd that becomes readable the moment it
/// has ended (`None` before Linux 5.3), and the read end of its lifeline.
struct Ranked {
    child: Child,
    pidfd: Option<OwnedFd>,
    /// Read end of a pipe whose only write end the rank holds: it hangs up
    /// as the rank exits, before its connections to the other ranks close
    /// and they can notice that it is gone (see [`adopt_lifeline`]), and a
    /// while before the kernel reports the exit itself (that waits for all
    /// its threads).
    lifeline: Option<OwnedFd>,
    /// For a rank on another host: the input of its ssh, which its remote
    /// agent reads; closing it stops the rank (see [`ssh`]).
    stdin: Option<ChildStdin>,
}

/// A pidfd for the child `pid`, which must not have been reaped yet.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open(2) takes a pid and flags by value and returns a new
    // descriptor or -1; no memory is passed. `pid` is an unreaped child of
    // ours, so it names that child and no other process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        tracing::debug!(
            "pidfd_open({pid}): {}; watching that rank by polling",
            std::io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: the kernel just returned this descriptor (close-on-exec) to us
    // and nothing else owns it.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Names the lifeline a rank inherits, as `fd:inode`; the inode tells the
/// right descriptor from one that a process which merely inherited the
/// variable happens to have open under the same number.
const LIFELINE_VAR: &str = "GASPI_LIFELINE";

/// The inode of an open pipe, `None` if `fd` is not one.
fn fd_inode(fd: RawFd) -> Option<u64> {
    // SAFETY: an all-zero `stat` is a valid value of the plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat(2) writes into `st`, which lives across the call; a
    // descriptor that is not open makes it fail with EBADF, nothing worse.
    if unsafe { libc::fstat(fd, &mut st) } < 0 || st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    Some(st.st_ino)
}

/// The lifeline this rank holds, closed by [`close_lifeline`] (-1: none).
static LIFELINE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn close_lifeline() {
    let fd = LIFELINE.swap(-1, Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: `fd` is the lifeline that `adopt_lifeline` checked and
        // took over; the swap makes this the only close of it.
        unsafe { libc::close(fd) };
    }
}

/// In a rank started by `gaspi-run`: takes over the lifeline the launcher
/// handed it, so that it is closed first thing when the process exits
/// (`exit`, a return from `main`), before its connections to the other
/// ranks close and they can react. The launcher then learns of this rank's
/// end before it learns of theirs. Without it (a rank killed by a signal)
/// the kernel closes the lifeline with the rest of the descriptors.
pub fn adopt_lifeline() {
    let Some((fd, ino)) = std::env::var(LIFELINE_VAR).ok().and_then(|v| {
        let (fd, ino) = v.split_once(':')?;
        Some((fd.parse::<RawFd>().ok()?, ino.parse::<u64>().ok()?))
    }) else {
        return;
    };
    if fd < 0 || fd_inode(fd) != Some(ino) {
        tracing::debug!("{LIFELINE_VAR} names no lifeline of ours; ignored");
        return;
    }
    if LIFELINE
        .compare_exchange(-1, fd, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    // SAFETY: fcntl(2) on a descriptor just checked to be open; programs this
    // rank starts do not inherit the lifeline.
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: `close_lifeline` is an `extern "C" fn()` that only swaps an
    // atomic and closes a descriptor, safe to run from `exit`. Registered
    // once: the compare-exchange above lets one caller through per process.
    if unsafe { libc::atexit(close_lifeline) } != 0 {
        tracing::debug!("atexit failed; the lifeline closes with the process");
    }
}

/// A close-on-exec pipe: (read end, write end).
fn lifeline_pipe() -> Option<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: pipe2(2) writes two descriptors into `fds`, which has room
    // for them.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        tracing::debug!(
            "pipe2: {}; exit order from exits alone",
            std::io::Error::last_os_error()
        );
        return None;
    }
    // SAFETY: the kernel just returned these two descriptors to us and
    // nothing else owns them.
    Some(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn signal_all(children: &mut [Option<Ranked>], sig: i32) {
    for c in children.iter_mut().flatten() {
        if sig == libc::SIGTERM && c.stdin.is_some() {
            // A remote rank: its agent stops it when its input ends, and
            // reports its code through ssh.
            c.stdin = None;
            continue;
        }
        // SAFETY: kill(2) on the pid of a child we have not reaped yet (it is
        // still in `children`), so the pid cannot have been reused.
        unsafe { libc::kill(c.child.id() as i32, sig) };
    }
}

/// Runs a job and returns its exit code: that of the rank that failed
/// first (in time), or 0.
pub fn launch(opts: &LaunchOptions) -> Result<i32> {
    if opts.ranks == 0 {
        return Err(Error::Config("a job needs at least one rank".into()));
    }
    install_interrupt_handler();
    if !opts.hosts.is_empty() {
        return ssh::launch_remote(opts);
    }
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| Error::io("binding the rendezvous", e))?;
    let addr = listener
        .local_addr()
        .map_err(|e| Error::io("rendezvous address", e))?;
    let key: [u8; 32] = rand::random();
    let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let listen_fd = listener.as_raw_fd();
    let mut children: Vec<Option<Ranked>> = Vec::with_capacity(opts.ranks as usize);
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
        let lifeline = lifeline_pipe();
        let lifeline_fd = lifeline.as_ref().map_or(-1, |(_, w)| w.as_raw_fd());
        match lifeline.as_ref().and_then(|(_, w)| fd_inode(w.as_raw_fd())) {
            Some(ino) => cmd.env(LIFELINE_VAR, format!("{lifeline_fd}:{ino}")),
            None => cmd.env_remove(LIFELINE_VAR),
        };
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
                if lifeline_fd >= 0 {
                    // Let this rank (alone) inherit its lifeline's write end.
                    libc::fcntl(lifeline_fd, libc::F_SETFD, 0);
                }
                Ok(())
            });
        }
        let spawned = cmd.spawn();
        // The rank holds the write end now; ours would keep it from hanging up.
        let lifeline = lifeline.map(|(read, _write)| read);
        match spawned {
            Ok(mut child) => {
                if opts.tag_output {
                    if let Some(out) = child.stdout.take() {
                        pumps.push(pump(r, out, false));
                    }
                    if let Some(err) = child.stderr.take() {
                        pumps.push(pump(r, err, true));
                    }
                }
                let pidfd = pidfd_open(child.id());
                children.push(Some(Ranked {
                    child,
                    pidfd,
                    lifeline,
                    stdin: None,
                }));
            }
            Err(e) => {
                signal_all(&mut children, libc::SIGKILL);
                for c in children.iter_mut().flatten() {
                    let _ = c.child.wait();
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

/// How long a rank gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// How long a rank gets between SIGTERM and SIGKILL when the launcher
/// itself was interrupted (Ctrl-C, SIGTERM): it exits within a second.
const INTERRUPT_GRACE: Duration = Duration::from_millis(500);

/// The longest the supervisor sleeps before it looks at Ctrl-C again.
const TICK: Duration = Duration::from_millis(100);

/// How long a rank whose lifeline hung up keeps its place in the exit
/// order while its exit is not reported. A rank ends within milliseconds
/// of closing its descriptors; one that closed its lifeline itself and
/// lives on is placed by its exit instead.
const LIFELINE_TRUST: Duration = Duration::from_secs(3);

/// What the watch saw, in the order it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// The rank's lifeline hung up: it is ending.
    Hangup(usize),
    /// The rank may have ended: reap it if so.
    Exit(usize),
}

/// An epoll set of the ranks' pidfds and lifelines.
///
/// epoll hands out ready descriptors in the order they became ready (the
/// kernel's wake-ups append to its ready list), so even when the launcher
/// wakes late, after several ranks have ended, it learns the order in which
/// they ended. Ranks without a pidfd, or all of them without epoll, are
/// polled with `try_wait`.
struct ExitWatch {
    epoll: Option<OwnedFd>,
}

const LIFELINE_BIT: u64 = 1 << 63;

impl ExitWatch {
    fn new(children: &[Option<Ranked>]) -> ExitWatch {
        // SAFETY: epoll_create1(2) takes flags by value and returns a new
        // descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            tracing::debug!(
                "epoll_create1: {}; watching the ranks by polling",
                std::io::Error::last_os_error()
            );
            return ExitWatch { epoll: None };
        }
        // SAFETY: the kernel just returned this descriptor to us and nothing
        // else owns it.
        let watch = ExitWatch {
            epoll: Some(unsafe { OwnedFd::from_raw_fd(fd) }),
        };
        for (r, slot) in children.iter().enumerate() {
            let Some(ranked) = slot else { continue };
            let fds = [
                (ranked.pidfd.as_ref(), r as u64),
                (ranked.lifeline.as_ref(), r as u64 | LIFELINE_BIT),
            ];
            for (target, token) in fds {
                let Some(target) = target else { continue };
                let mut ev = libc::epoll_event {
                    events: libc::EPOLLIN as u32,
                    u64: token,
                };
                // SAFETY: both descriptors are open (owned by `watch` and
                // `children`); `ev` is a valid epoll_event for the call.
                let rc = unsafe {
                    libc::epoll_ctl(fd, libc::EPOLL_CTL_ADD, target.as_raw_fd(), &mut ev)
                };
                if rc < 0 {
                    tracing::debug!(
                        "epoll_ctl: {}; watching the ranks by polling",
                        std::io::Error::last_os_error()
                    );
                    return ExitWatch { epoll: None };
                }
            }
        }
        watch
    }

    fn forget(&self, fd: Option<&OwnedFd>) {
        if let (Some(ep), Some(fd)) = (&self.epoll, fd) {
            // SAFETY: both descriptors are open; EPOLL_CTL_DEL ignores the
            // event argument, which may be null.
            unsafe {
                libc::epoll_ctl(
                    ep.as_raw_fd(),
                    libc::EPOLL_CTL_DEL,
                    fd.as_raw_fd(),
                    std::ptr::null_mut(),
                )
            };
        }
    }

    /// Stops watching a rank's lifeline (a hung-up pipe stays ready).
    fn forget_lifeline(&self, ranked: &mut Ranked) {
        self.forget(ranked.lifeline.as_ref());
        ranked.lifeline = None;
    }

    /// Stops watching a reaped rank.
    fn forget_rank(&self, ranked: &mut Ranked) {
        self.forget_lifeline(ranked);
        self.forget(ranked.pidfd.as_ref());
    }

    /// Sleeps until something happens to a rank or `wait` has passed;
    /// returns what happened, in order, followed by an `Exit` for every
    /// rank that must be polled.
    fn wait(&self, children: &[Option<Ranked>], wait: Duration) -> Vec<Seen> {
        let unwatched: Vec<usize> = children
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.as_ref()
                    .is_some_and(|c| c.pidfd.is_none() || self.epoll.is_none())
            })
            .map(|(r, _)| r)
            .collect();
        let wait = if unwatched.is_empty() {
            wait
        } else {
            wait.min(Duration::from_millis(5))
        };
        // Round up, so that a deadline a fraction of a millisecond away is
        // not waited for in a busy loop.
        let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        let mut seen = Vec::new();
        match &self.epoll {
            Some(ep) => {
                let max = 2 * children.len().max(1);
                let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; max];
                // SAFETY: `events` has room for `max` entries and lives
                // across the call; `ep` is an open epoll descriptor.
                let n = unsafe {
                    libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), max as i32, ms)
                };
                // n < 0: EINTR (a signal, e.g. Ctrl-C); the caller re-checks.
                for ev in events.iter().take(n.max(0) as usize) {
                    let r = (ev.u64 & !LIFELINE_BIT) as usize;
                    seen.push(if ev.u64 & LIFELINE_BIT != 0 {
                        Seen::Hangup(r)
                    } else {
                        Seen::Exit(r)
                    });
                }
            }
            None => std::thread::sleep(wait),
        }
        seen.extend(unwatched.into_iter().map(Seen::Exit));
        seen
    }
}

/// Where the ranks stand in the order they ended.
struct EndOrder {
    next: u64,
    /// Per rank: its place in the order, once it has hung up or ended.
    place: Vec<Option<u64>>,
    /// Per rank: when its lifeline hung up, while its exit is not reaped.
    hung_up: Vec<Option<Instant>>,
    /// Per rank: its exit code, once reaped.
    code: Vec<Option<i32>>,
}

/// The first failure, or why it is not known yet.
enum Verdict {
    /// This rank failed first, with this code.
    Failed(usize, i32),
    /// A rank that ended before every known failure is not reaped yet;
    /// decide again when it is, or at this instant.
    Pending(Instant),
    /// No rank has failed (yet).
    NoFailure,
}

impl EndOrder {
    fn new(n: usize) -> EndOrder {
        EndOrder {
            next: 0,
            place: vec![None; n],
            hung_up: vec![None; n],
            code: vec![None; n],
        }
    }

    fn hangup(&mut self, r: usize) {
        if self.place[r].is_none() {
            self.place[r] = Some(self.next);
            self.next += 1;
            self.hung_up[r] = Some(Instant::now());
        }
    }

    fn exited(&mut self, r: usize, code: i32) {
        if self.place[r].is_none() {
            self.place[r] = Some(self.next);
            self.next += 1;
        }
        self.hung_up[r] = None;
        self.code[r] = Some(code);
    }

    fn verdict(&mut self) -> Verdict {
        let mut order: Vec<usize> = (0..self.place.len())
            .filter(|&r| self.place[r].is_some())
            .collect();
        order.sort_by_key(|&r| self.place[r]);
        for r in order {
            match (self.code[r], self.hung_up[r]) {
                (Some(0), _) => {}
                (Some(c), _) => return Verdict::Failed(r, c),
                (None, Some(at)) if at.elapsed() < LIFELINE_TRUST => {
                    return Verdict::Pending(at + LIFELINE_TRUST)
                }
                // It closed its lifeline but lives on: it goes where its
                // exit puts it.
                _ => {
                    self.place[r] = None;
                    self.hung_up[r] = None;
                }
            }
        }
        Verdict::NoFailure
    }
}

/// Waits for the ranks; stops them all on failure, interrupt or timeout.
///
/// The job's code is that of the rank that failed first in time, not the
/// lowest-numbered one: each rank's end is seen the moment its lifeline
/// hangs up or its pidfd becomes readable, and ends that happen before the
/// launcher wakes are handed out in the order they happened (see
/// [`ExitWatch`]).
fn supervise(children: &mut [Option<Ranked>], opts: &LaunchOptions) -> i32 {
    let start = Instant::now();
    let mut order = EndOrder::new(children.len());
    let mut first_failure: Option<i32> = None;
    let mut pending: Option<Instant>;
    let mut stopping_since: Option<Instant> = None;
    let mut killed = false;
    let mut live = children.len();
    let watch = ExitWatch::new(children);
    let mut seen: Vec<Seen> = (0..children.len()).map(Seen::Exit).collect();
    loop {
        for s in seen.drain(..) {
            match s {
                Seen::Hangup(r) => {
                    if let Some(ranked) = children[r].as_mut() {
                        watch.forget_lifeline(ranked);
                        order.hangup(r);
                    }
                }
                Seen::Exit(r) => {
                    let Some(ranked) = children[r].as_mut() else {
                        continue;
                    };
                    let Ok(Some(status)) = ranked.child.try_wait() else {
                        continue;
                    };
                    watch.forget_rank(ranked);
                    children[r] = None;
                    live -= 1;
                    let code = exit_code(status);
                    order.exited(r, code);
                    if code != 0 && first_failure.is_some() && stopping_since.is_none() {
                        say(format!("rank {r} exited with code {code}"));
                    }
                }
            }
        }
        // Once the job's code is decided (a failure, an interrupt, a
        // timeout), no verdict is pending any more: a pending one left
        // here kept the loop from ending after its last rank, polling
        // without a pause (issue 24: 95% of a core after a SIGTERM).
        pending = None;
        if first_failure.is_none() {
            match order.verdict() {
                Verdict::Failed(r, code) => {
                    say(format!("rank {r} exited with code {code} first"));
                    first_failure = Some(code);
                }
                Verdict::Pending(until) => pending = Some(until),
                Verdict::NoFailure => {}
            }
        }
        if live == 0 && pending.is_none() {
            break;
        }
        let interrupted = INTERRUPTED.load(Ordering::SeqCst);
        let timed_out = opts.timeout.is_some_and(|t| start.elapsed() >= t);
        let failed = first_failure.is_some() && !opts.keep_going;
        if live > 0 && stopping_since.is_none() && (interrupted || timed_out || failed) {
            if interrupted {
                say(format!("interrupted, stopping {live} ranks"));
                first_failure.get_or_insert(130);
            } else if timed_out {
                say(format!("job timed out, stopping {live} ranks"));
                first_failure.get_or_insert(124);
            } else {
                say(format!("stopping the remaining {live} ranks"));
            }
            signal_all(children, libc::SIGTERM);
            stopping_since = Some(Instant::now());
        }
        // Interrupted, the user waits: the ranks get a short grace.
        let grace = if interrupted { INTERRUPT_GRACE } else { GRACE };
        if !killed && stopping_since.is_some_and(|t| t.elapsed() >= grace) {
            signal_all(children, libc::SIGKILL);
            killed = true;
        }
        let mut wait = TICK;
        match stopping_since {
            None => {
                if let Some(t) = opts.timeout {
                    wait = wait.min(t.saturating_sub(start.elapsed()));
                }
            }
            Some(since) if !killed => wait = wait.min(grace.saturating_sub(since.elapsed())),
            Some(_) => {}
        }
        if let Some(until) = pending {
            wait = wait.min(until.saturating_duration_since(Instant::now()));
        }
        seen = watch.wait(children, wait);
    }
    first_failure.unwrap_or(0)
}

/// Writes one line of the launcher's own to stderr, in one write, so that
/// it does not interleave with the ranks' output.
fn say(msg: String) {
    let line = format!("gaspi-run: {msg}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
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

/// Launches `ranks` copies of the current executable with its arguments
/// and returns the job's exit code (as [`launch`]): the self-launch of a
/// program started without a launcher that asks for several ranks
/// (`gaspi::Config::standalone_ranks`). `GASPI_TAG_OUTPUT` set: every
/// output line is prefixed with `[rank]`.
pub fn relaunch_self(ranks: u32) -> Result<i32> {
    let exe =
        std::env::current_exe().map_err(|e| Error::io("finding the current executable", e))?;
    let mut opts = LaunchOptions::new(ranks, exe);
    opts.args = std::env::args_os().skip(1).collect();
    opts.tag_output = std::env::var_os("GASPI_TAG_OUTPUT").is_some();
    launch(&opts)
}
