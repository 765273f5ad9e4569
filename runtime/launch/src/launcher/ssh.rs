//! Starting ranks on other hosts over ssh: `gaspi-run -m HOSTFILE`.
//!
//! Each rank is started as `ssh [user@]host AGENT --agent ... -- PROGRAM
//! ARGS`, where AGENT is `gaspi-run` itself at the same path on the remote
//! host (or `GASPI_RUN_AGENT`). The agent is the remote half of the
//! launcher (decision 0021): it sets the rank's environment, starts the
//! rank in a process group of its own and watches two things, the rank
//! and its own standard input, which is the launcher's pipe through ssh.
//!
//! - **Rendezvous.** No descriptor can be passed over ssh, so rank 0's
//!   agent binds the rendezvous socket on rank 0's host (port 0: the kernel
//!   picks a free one, nothing can take it between choosing and binding),
//!   hands it to the rank as `GASPI_RENDEZVOUS_FD` exactly as the local
//!   launcher does, and reports the port on its standard output before the
//!   rank starts. The launcher then tells the other agents `HOST:PORT`
//!   on their standard input; they start their ranks. All ssh sessions are
//!   opened at once; only the ranks other than 0 wait for the port.
//! - **The job key** travels on the agents' standard input too, never on a
//!   command line, where `ps` would show it to every user of either host.
//! - **Nothing left behind.** The launcher never closes an agent's input
//!   while the job runs. The input ends (EOF) when the launcher stops the
//!   job, or when ssh dies, or when the launcher dies (its ssh children
//!   die with it through `PR_SET_PDEATHSIG`; sshd then closes the session).
//!   On EOF the agent sends SIGTERM to the rank's process group and SIGKILL
//!   after a grace period. If the agent itself is killed, the rank dies with
//!   it (`PR_SET_PDEATHSIG`). Once the rank has ended, whatever else is left
//!   in its process group is killed before the agent exits with the rank's
//!   code, which ssh hands back to the launcher.

use crate::{Error, Result};
use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, ToSocketAddrs};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::{exit_code, pidfd_open, say, signal_all, supervise, LaunchOptions, Ranked, TICK};

/// One host of a hostfile and the ranks it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The ssh destination, `host` or `user@host`.
    pub name: String,
    /// How many ranks it takes.
    pub slots: u32,
}

impl Host {
    /// The host without the user: the name the ranks use to reach it.
    pub fn address(&self) -> &str {
        self.name.rsplit_once('@').map_or(&self.name, |(_, h)| h)
    }
}

/// Parses a hostfile: one host a line, `host`, `host slots=K` or `host:K`
/// (also `user@host`); `#` starts a comment. A host listed again gets the
/// slots of every line (GPI-2's machinefiles list a host once per rank).
pub fn parse_hostfile(text: &str) -> Result<Vec<Host>> {
    let mut hosts: Vec<Host> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| Error::Config(format!("hostfile line {}: {why}: {line:?}", i + 1));
        let mut words = line.split_whitespace();
        let first = words.next().expect("a non-empty line has a word");
        let count = |v: &str| -> Result<u32> {
            match v.parse::<u32>() {
                Ok(k) if k > 0 => Ok(k),
                _ => Err(bad("the slot count must be a positive number")),
            }
        };
        let (name, mut slots) = match first.rsplit_once(':') {
            // `host:K`; a name with more colons is an IPv6 address.
            Some((h, k)) if !h.contains(':') && !h.is_empty() => (h.to_string(), count(k)?),
            _ => (first.to_string(), 1),
        };
        for w in words {
            match w.split_once('=') {
                Some(("slots", k)) => slots = count(k)?,
                // mpirun's hostfiles: an upper bound, not a count.
                Some(("max_slots", _)) => {}
                _ => return Err(bad(&format!("unknown word {w:?}"))),
            }
        }
        match hosts.iter_mut().find(|h| h.name == name) {
            Some(h) => h.slots += slots,
            None => hosts.push(Host { name, slots }),
        }
    }
    if hosts.is_empty() {
        return Err(Error::Config("the hostfile names no host".into()));
    }
    Ok(hosts)
}

/// Whether `host` (a hostfile's host, without the user) names the
/// machine this runs on: `localhost`, `127.0.0.1`, `::1`, its own host
/// name (or that name's first label, or the host's with the other's), or
/// one of its addresses. Ranks for such a host start here without ssh.
pub fn is_this_host(host: &str) -> bool {
    if matches!(host, "localhost" | "127.0.0.1" | "::1") {
        return true;
    }
    let own = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_default();
    let short = |h: &str| h.split('.').next().unwrap_or(h).to_string();
    if !own.is_empty() && (host == own || short(host) == short(&own)) {
        return true;
    }
    // An address of one of this host's interfaces: binding to it works.
    let ip = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ip.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| std::net::UdpSocket::bind((ip, 0)).is_ok())
}

/// Reads and parses the hostfile at `path`.
pub fn read_hostfile(path: &Path) -> Result<Vec<Host>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::io(format!("reading hostfile {}", path.display()), e))?;
    parse_hostfile(&text)
}

/// The host of every rank: ranks fill the hosts in order, each up to its
/// slots. More ranks than slots is refused (as `mpirun` does).
pub fn place(hosts: &[Host], ranks: u32) -> Result<Vec<usize>> {
    let total: u64 = hosts.iter().map(|h| h.slots as u64).sum();
    if ranks as u64 > total {
        return Err(Error::Config(format!(
            "{ranks} ranks asked for, but the hostfile has {total} slots"
        )));
    }
    Ok(hosts
        .iter()
        .enumerate()
        .flat_map(|(i, h)| std::iter::repeat_n(i, h.slots as usize))
        .take(ranks as usize)
        .collect())
}

/// `s` quoted for a POSIX shell (ssh hands the command to the remote
/// user's shell as one string).
pub fn shell_quote(s: &OsStr) -> OsString {
    let b = s.as_bytes();
    let plain = !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(c));
    if plain {
        return s.to_os_string();
    }
    let mut out = b"'".to_vec();
    for &c in b {
        if c == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(c);
        }
    }
    out.push(b'\'');
    OsString::from_vec(out)
}

/// The ssh command: `GASPI_SSH` split at white space, else
/// `ssh -o BatchMode=yes` (no password prompt can stall a job).
fn ssh_command() -> Vec<String> {
    match std::env::var("GASPI_SSH") {
        Ok(s) if !s.trim().is_empty() => s.split_whitespace().map(String::from).collect(),
        _ => vec!["ssh".into(), "-o".into(), "BatchMode=yes".into()],
    }
}

/// Variables the launcher sets itself, or that concern this host only:
/// never forwarded from the launcher's environment.
const NOT_FORWARDED: &[&str] = &[
    "GASPI_RANK",
    "GASPI_SIZE",
    "GASPI_LOCAL_RANK",
    "GASPI_LOCAL_SIZE",
    "GASPI_RENDEZVOUS",
    "GASPI_RENDEZVOUS_FD",
    "GASPI_JOB_KEY",
    super::LIFELINE_VAR,
    "GASPI_SSH",
    "GASPI_RUN_AGENT",
];

/// What the agent of rank 0 prints before its rank starts.
const PORT_REPORT: &str = "gaspi-run-agent: rendezvous-port ";

/// Runs a job on the hosts of `opts.hosts` over ssh.
pub(super) fn launch_remote(opts: &LaunchOptions) -> Result<i32> {
    let hosts = &opts.hosts;
    let place = place(hosts, opts.ranks)?;
    let key: [u8; 32] = rand::random();
    let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let ssh = ssh_command();
    let agent = match std::env::var_os("GASPI_RUN_AGENT") {
        Some(a) if !a.is_empty() => PathBuf::from(a),
        _ => std::env::current_exe()
            .map_err(|e| Error::io("finding gaspi-run's own path for the remote agent", e))?,
    };
    // A program named by a path runs at that path on every host; a bare
    // name is looked up in the remote PATH.
    let program = if opts.program.components().count() > 1 {
        std::path::absolute(&opts.program)
            .map_err(|e| Error::io(format!("resolving {}", opts.program.display()), e))?
    } else {
        opts.program.clone()
    };
    let wdir = std::env::current_dir().ok();
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("GASPI_") && !NOT_FORWARDED.contains(&k.as_str()))
        .collect();
    env.extend(opts.env.iter().cloned());
    if let Some((k, _)) = env.iter().find(|(k, _)| {
        k.is_empty()
            || k.starts_with(|c: char| c.is_ascii_digit())
            || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }) {
        return Err(Error::Config(format!(
            "{k:?} cannot be passed to a remote rank: not a variable name"
        )));
    }
    let rank0_host = hosts[place[0]].address().to_string();
    let (report_tx, report_rx) = channel::<u16>();
    let mut children: Vec<Option<Ranked>> = Vec::with_capacity(place.len());
    let mut pumps = Vec::new();
    let launcher_pid = std::process::id() as i32;
    let size = opts.ranks;
    for (r, &h) in place.iter().enumerate() {
        let local: Vec<usize> = (0..place.len()).filter(|&q| place[q] == h).collect();
        let local_rank = local.iter().position(|&q| q == r).unwrap_or(0);
        // `env NAME=VALUE ... AGENT`: the agent and the rank both carry the
        // job's variables (a process can be told by its environment).
        let mut remote: Vec<OsString> = vec!["env".into()];
        let mut vars = vec![
            ("GASPI_RANK".to_string(), r.to_string()),
            ("GASPI_SIZE".into(), size.to_string()),
            ("GASPI_LOCAL_RANK".into(), local_rank.to_string()),
            ("GASPI_LOCAL_SIZE".into(), local.len().to_string()),
        ];
        vars.extend(env.iter().cloned());
        for (k, v) in vars {
            remote.push(format!("{k}={v}").into());
        }
        remote.extend([agent.clone().into(), "--agent".into()]);
        if let Some(w) = &wdir {
            remote.extend(["--wdir".into(), w.clone().into()]);
        }
        if r == 0 {
            remote.extend(["--rendezvous-host".into(), rank0_host.clone().into()]);
        }
        remote.push("--".into());
        remote.push(program.clone().into());
        remote.extend(opts.args.iter().cloned());
        let line = remote
            .iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(OsStr::new(" "));
        // This host's ranks start here, without ssh: the same agent,
        // started by `env` with the same arguments (no shell between).
        let mut cmd = if is_this_host(hosts[h].address()) {
            let mut cmd = Command::new(&remote[0]);
            cmd.args(&remote[1..]);
            // What ssh would not have carried over from this environment.
            for k in NOT_FORWARDED {
                cmd.env_remove(k);
            }
            cmd
        } else {
            let mut cmd = Command::new(&ssh[0]);
            cmd.args(&ssh[1..]).arg(&hosts[h].name).arg(line);
            cmd
        };
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A terminal's Ctrl-C reaches the launcher alone, which stops
            // the ranks through their agents; ssh killed by the SIGINT
            // would end with its own code (255) instead.
            .process_group(0);
        // SAFETY: the closure runs in the child between fork and exec and
        // calls only async-signal-safe functions (prctl, getppid, _exit) on
        // a value computed before the fork.
        unsafe {
            cmd.pre_exec(move || {
                // ssh dies with the launcher; its remote agent then sees EOF.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != launcher_pid {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        tracing::debug!(rank = r, host = %hosts[h].name, "starting {cmd:?}");
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                stop_now(&mut children);
                return Err(Error::io(format!("starting {}", ssh[0]), e));
            }
        };
        let mut stdin = child.stdin.take();
        if let Some(s) = stdin.as_mut() {
            // A failed write means ssh is gone already: its exit tells.
            let _ = s.write_all(format!("key {key}\n").as_bytes());
        }
        let report = (r == 0).then(|| report_tx.clone());
        if let Some(out) = child.stdout.take() {
            pumps.push(pump(r as u32, out, false, opts.tag_output, report));
        }
        if let Some(err) = child.stderr.take() {
            pumps.push(pump(r as u32, err, true, opts.tag_output, None));
        }
        let pidfd = pidfd_open(child.id());
        children.push(Some(Ranked {
            child,
            pidfd,
            lifeline: None,
            stdin,
        }));
    }
    drop(report_tx);
    let code = match wait_for_port(&report_rx, &mut children, opts, &rank0_host) {
        Ok(port) => {
            tracing::debug!("rendezvous at {rank0_host}:{port}");
            let line = format!("rendezvous {rank0_host}:{port}\n");
            for c in children.iter_mut().skip(1).flatten() {
                if let Some(s) = c.stdin.as_mut() {
                    let _ = s.write_all(line.as_bytes());
                }
            }
            supervise(&mut children, opts)
        }
        Err(code) => code,
    };
    for p in pumps {
        let _ = p.join();
    }
    Ok(code)
}

/// Kills every started ssh (and so every agent) and reaps them.
fn stop_now(children: &mut [Option<Ranked>]) {
    signal_all(children, libc::SIGKILL);
    for c in children.iter_mut().flatten() {
        let _ = c.child.wait();
    }
}

/// Waits for rank 0's agent to report the rendezvous port. `Err(code)`
/// when the job ended first (rank 0's ssh ended, Ctrl-C, timeout): every
/// rank is stopped by then.
fn wait_for_port(
    rx: &Receiver<u16>,
    children: &mut [Option<Ranked>],
    opts: &LaunchOptions,
    host: &str,
) -> std::result::Result<u16, i32> {
    let start = Instant::now();
    loop {
        match rx.recv_timeout(TICK) {
            Ok(port) => return Ok(port),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                // Rank 0's output closed without a report: wait for ssh.
                let code = children[0]
                    .as_mut()
                    .and_then(|c| c.child.wait().ok())
                    .map_or(1, exit_code);
                say(format!(
                    "rank 0 on {host} ended with code {code} before it reported its rendezvous port; stopping the job"
                ));
                stop_now(children);
                return Err(if code == 0 { 1 } else { code });
            }
        }
        if super::INTERRUPTED.load(Ordering::SeqCst) {
            say("interrupted, stopping the job".into());
            stop_now(children);
            return Err(130);
        }
        if opts.timeout.is_some_and(|t| start.elapsed() >= t) {
            say("job timed out before it started, stopping it".into());
            stop_now(children);
            return Err(124);
        }
    }
}

/// Copies a rank's output (ssh's) line by line to ours, `[rank]`-prefixed
/// with `tag`. With `report`, a line carrying the agent's port report is
/// taken out of the stream and sent there.
fn pump(
    rank: u32,
    stream: impl Read + Send + 'static,
    is_err: bool,
    tag: bool,
    report: Option<Sender<u16>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        let mut report = report;
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if let Some(tx) = &report {
                let text = String::from_utf8_lossy(&line);
                if let Some(port) = text
                    .strip_prefix(PORT_REPORT)
                    .and_then(|p| p.trim().parse::<u16>().ok())
                {
                    let _ = tx.send(port);
                    report = None;
                    continue;
                }
            }
            let mut out: Vec<u8> = Vec::with_capacity(line.len() + 8);
            if tag {
                out.extend_from_slice(format!("[{rank}] ").as_bytes());
            }
            out.extend_from_slice(&line);
            if out.last() != Some(&b'\n') {
                out.push(b'\n');
            }
            let _ = if is_err {
                std::io::stderr().lock().write_all(&out)
            } else {
                std::io::stdout().lock().write_all(&out)
            };
        }
    })
}

/// What the remote agent is told on its command line.
#[derive(Debug, Clone, Default)]
pub struct AgentOptions {
    /// The directory to run the rank in, where it exists on this host.
    pub wdir: Option<PathBuf>,
    /// For rank 0: bind the rendezvous on this host name, report its port.
    pub rendezvous_host: Option<String>,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// How long the agent gives its rank between SIGTERM and SIGKILL; shorter
/// than the launcher's grace, so that the rank's own code comes back.
const AGENT_GRACE: Duration = Duration::from_millis(2500);

/// Reads one `word value` line of the launcher's from standard input, a
/// byte at a time: nothing past the line is taken out of the pipe, whose
/// end is what tells the agent to stop.
fn header(word: &str) -> Result<String> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        // SAFETY: read(2) of one byte from standard input, open for the
        // life of the process, into `byte`, which has room for it.
        let n = unsafe { libc::read(libc::STDIN_FILENO, byte.as_mut_ptr().cast(), 1) };
        let got = if n < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(n as usize)
        };
        match got {
            Ok(0) => {
                return Err(Error::Bootstrap(format!(
                    "the launcher closed the session before sending the {word}"
                )))
            }
            Ok(_) if byte[0] == b'\n' => break,
            Ok(_) if line.len() < 4096 => line.push(byte[0]),
            Ok(_) => {
                return Err(Error::Bootstrap(
                    "a line from the launcher is too long".into(),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("reading from the launcher", e)),
        }
    }
    String::from_utf8_lossy(&line)
        .strip_prefix(word)
        .and_then(|v| v.strip_prefix(' '))
        .map(String::from)
        .ok_or_else(|| Error::Bootstrap(format!("expected the {word} from the launcher")))
}

/// Binds rank 0's rendezvous on `host` (one of this host's names), or on
/// every interface when `host` is not an address of this host.
fn bind_rendezvous(host: &str) -> Result<TcpListener> {
    let addrs: Vec<_> = (host, 0)
        .to_socket_addrs()
        .map_err(|e| Error::Config(format!("cannot resolve {host:?}: {e}")))?
        .collect();
    for a in &addrs {
        if let Ok(l) = TcpListener::bind(a) {
            return Ok(l);
        }
    }
    tracing::warn!("{host} is not an address of this host; the rendezvous listens on all");
    TcpListener::bind(("0.0.0.0", 0)).map_err(|e| Error::io("binding the rendezvous", e))
}

/// The remote half of `gaspi-run -m`: runs one rank on this host (see the
/// module docs) and returns its exit code.
pub fn agent(opts: &AgentOptions) -> Result<i32> {
    let key = header("key")?;
    let (rendezvous, listener) = match &opts.rendezvous_host {
        Some(host) => {
            let l = bind_rendezvous(host)?;
            let port = l
                .local_addr()
                .map_err(|e| Error::io("rendezvous address", e))?
                .port();
            let mut out = std::io::stdout().lock();
            out.write_all(format!("{PORT_REPORT}{port}\n").as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Error::io("reporting the rendezvous port", e))?;
            (format!("{host}:{port}"), Some(l))
        }
        None => (header("rendezvous")?, None),
    };
    if let Some(w) = &opts.wdir {
        if let Err(e) = std::env::set_current_dir(w) {
            tracing::debug!("staying in the home directory: {}: {e}", w.display());
        }
    }
    let mut cmd = Command::new(&opts.program);
    cmd.args(&opts.args)
        .env_remove("GASPI_RENDEZVOUS_FD")
        .env_remove(super::LIFELINE_VAR);
    cmd.env("GASPI_RENDEZVOUS", &rendezvous)
        .env("GASPI_JOB_KEY", &key)
        .stdin(Stdio::null())
        .process_group(0);
    let listen_fd = listener.as_ref().map_or(-1, |l| l.as_raw_fd());
    if listen_fd >= 0 {
        cmd.env("GASPI_RENDEZVOUS_FD", listen_fd.to_string());
    }
    let agent_pid = std::process::id() as i32;
    // SAFETY: the closure runs in the child between fork and exec and calls
    // only async-signal-safe functions (prctl, getppid, fcntl, _exit) on
    // values computed before the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != agent_pid {
                libc::_exit(1);
            }
            if listen_fd >= 0 {
                // The rank (alone) inherits the bound rendezvous socket.
                libc::fcntl(listen_fd, libc::F_SETFD, 0);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| {
        Error::io(
            format!("starting {}", Path::new(&opts.program).display()),
            e,
        )
    })?;
    drop(listener);
    let pgid = child.id() as i32;
    let pidfd = pidfd_open(child.id());
    // The rest of the input only tells when the launcher is gone.
    let in_fd = libc::STDIN_FILENO;
    let mut input_eof = false;
    let mut stop_since: Option<Instant> = None;
    let mut killed = false;
    loop {
        if !input_eof && stop_since.is_none() && input_ended(in_fd) {
            input_eof = true;
            tracing::debug!("the launcher's session ended; stopping the rank");
            // SAFETY: kill(2) on the process group of our child, which is
            // not reaped (reaping happens below, after which we return), so
            // the group id still names the rank's group.
            unsafe { libc::kill(-pgid, libc::SIGTERM) };
            stop_since = Some(Instant::now());
        }
        if !killed && stop_since.is_some_and(|t| t.elapsed() >= AGENT_GRACE) {
            // SAFETY: as above, the leader is not reaped yet.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            killed = true;
        }
        if ended(pgid) {
            // The leader is a zombie, not reaped: its group id cannot be
            // reused. Whatever else of the rank is left goes with it.
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let status = child
                .wait()
                .map_err(|e| Error::io("waiting for the rank", e))?;
            return Ok(exit_code(status));
        }
        wait_readable(&[
            pidfd.as_ref().map(|f| f.as_raw_fd()),
            (!input_eof).then_some(in_fd),
        ]);
    }
}

/// Whether the launcher's input has ended: reads and drops what is there
/// without blocking.
fn input_ended(fd: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one valid pollfd that lives across the call.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    if n <= 0 {
        return false;
    }
    if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
        && p.revents & libc::POLLIN == 0
    {
        return true;
    }
    let mut buf = [0u8; 256];
    // SAFETY: `fd` is standard input, open for the life of the process.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    // SAFETY: read(2) into `buf`, which has room for its length; poll said
    // it will not block.
    let r = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    r == 0 || (r < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
}

/// Whether the rank has ended, without reaping it.
fn ended(pid: i32) -> bool {
    // SAFETY: an all-zero siginfo_t is a valid value of the plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid(2) with WNOWAIT looks at our own child `pid` without
    // reaping it, writing into `info`, which lives across the call.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: waitid filled `info` (or left it zeroed); si_pid is 0 when
    // the child has not ended.
    rc == 0 && unsafe { info.si_pid() } != 0
}

/// Sleeps until one of `fds` is readable, or a tick has passed.
fn wait_readable(fds: &[Option<i32>]) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .flatten()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // A rank without a pidfd is looked at every 50 ms.
    let ms = if fds[0].is_some() { 200 } else { 50 };
    // SAFETY: poll(2) on `p.len()` valid pollfds that live across the call.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostfiles_in_every_form_parse() {
        let hosts = parse_hostfile(
            "# cluster\nnode1 slots=2\n\nnode2:3   # fast\nroot@node3\nnode1\nnode4 slots=1 max_slots=8\n",
        )
        .unwrap();
        assert_eq!(
            hosts,
            vec![
                Host {
                    name: "node1".into(),
                    slots: 3
                },
                Host {
                    name: "node2".into(),
                    slots: 3
                },
                Host {
                    name: "root@node3".into(),
                    slots: 1
                },
                Host {
                    name: "node4".into(),
                    slots: 1
                },
            ]
        );
        assert_eq!(hosts[2].address(), "node3");
        assert!(parse_hostfile("node1 slots=0").is_err());
        assert!(parse_hostfile("node1 cpus=2").is_err());
        assert!(parse_hostfile("node1:x").is_err());
        assert!(parse_hostfile("# nothing\n\n").is_err());
        let v6 = parse_hostfile("fe80::1 slots=2").unwrap();
        assert_eq!(
            v6[0],
            Host {
                name: "fe80::1".into(),
                slots: 2
            }
        );
    }

    #[test]
    fn ranks_fill_hosts_in_order_up_to_their_slots() {
        let hosts = parse_hostfile("a slots=2\nb slots=2\nc").unwrap();
        assert_eq!(place(&hosts, 4).unwrap(), vec![0, 0, 1, 1]);
        assert_eq!(place(&hosts, 3).unwrap(), vec![0, 0, 1]);
        assert_eq!(place(&hosts, 5).unwrap(), vec![0, 0, 1, 1, 2]);
        assert!(place(&hosts, 6).is_err());
    }

    #[test]
    fn shell_quoting_survives_a_shell() {
        for s in ["plain", "a b", "it's", "", "$HOME;rm -rf /", "x'\"y\\"] {
            let q = shell_quote(OsStr::new(s));
            let out = Command::new("sh")
                .arg("-c")
                .arg(OsString::from_vec(
                    [b"printf %s ".as_slice(), q.as_bytes()].concat(),
                ))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), s, "quoted as {q:?}");
        }
    }
}
