//! Helpers of the multi-process integration tests.
//!
//! The tests start jobs of the `gaspi-test-rank` program (one subcommand per
//! scenario, see `bin/rank.rs`), either through `gaspi-run` or directly with
//! the environment of another launcher, and check their exit codes and
//! output. Every job is started with a unique tag in its environment
//! (`GASPI_TESTS_JOB_TAG`), which lets [`leftover_processes`] find any of its
//! processes that outlive it. A job that runs past its timeout is killed
//! (its whole process group) and the test fails with the job's output.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Name of the environment variable that tags every process of a job.
pub const TAG_VAR: &str = "GASPI_TESTS_JOB_TAG";

/// The path of the `gaspi-test-rank` program; expands in the calling test
/// crate, where Cargo sets `CARGO_BIN_EXE_gaspi-test-rank`.
#[macro_export]
macro_rules! rank_bin {
    () => {
        ::std::path::PathBuf::from(env!("CARGO_BIN_EXE_gaspi-test-rank"))
    };
}

/// Prints why a test cannot run here. The test then returns.
///
/// The line goes straight to the process's standard error, past the test
/// harness's output capture (which takes only the `print!` macros), so it
/// shows in every `cargo test` run, CI's included, beside the `ok` that the
/// harness prints for the returned test: a skip is never a silent pass.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let line = format!("SKIPPED {test}: {reason}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
    // Also in the captured output, for a harness that shows it on failure.
    println!("SKIPPED {test}: {reason}");
}

/// The `gaspi-run` launcher of the same build profile as `rank_bin`.
///
/// `gaspi-run` belongs to the `gaspi-launch` package, which `cargo test -p
/// gaspi-tests` builds only as a library; so it is built here once per test
/// process with `cargo build -p gaspi-launch --bin gaspi-run` into the same
/// target directory and profile (a no-op when it is up to date, and it
/// keeps the launcher in step with its sources). When cargo is not
/// available an existing binary next to `rank_bin` is used.
pub fn gaspi_run(rank_bin: &Path) -> PathBuf {
    static LAUNCHER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    LAUNCHER
        .get_or_init(|| build_launcher(rank_bin))
        .clone()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Example `name` of the `gaspi-examples` package, built like
/// [`gaspi_run`] into the same target directory and profile as `rank_bin`.
pub fn example_bin(rank_bin: &Path, name: &str) -> PathBuf {
    let mut what = vec!["-p", "gaspi-examples", "--example", name];
    let features = network_features();
    what.extend(features.iter().map(String::as_str));
    build_target(rank_bin, &what, &format!("examples/{name}")).unwrap_or_else(|e| panic!("{e}"))
}

/// `libGPI2.so` of the `gaspi-capi` package (the GPI-2 compatible C
/// interface), built like [`gaspi_run`] into the same target directory and
/// profile as `rank_bin`, with the network transports of this build.
pub fn capi_library(rank_bin: &Path) -> PathBuf {
    let mut what = vec!["-p", "gaspi-capi"];
    let features = network_features();
    what.extend(features.iter().map(String::as_str));
    build_target(rank_bin, &what, "libGPI2.so").unwrap_or_else(|e| panic!("{e}"))
}

/// Cargo arguments that give a package depending on `gaspi` the network
/// transports of the `gaspi` this test is built with (`--features
/// gaspi/libfabric` in a `--features gaspi/libfabric` build; none in the
/// default build). Without them a library or example built for a test of
/// a libfabric-only build would be the default build's, and the test
/// would pass without ever running that build's code.
pub fn network_features() -> Vec<String> {
    let features: Vec<String> = gaspi::network_transports()
        .map(|name| format!("gaspi/{name}"))
        .collect();
    match features.is_empty() {
        true => Vec::new(),
        false => vec!["--features".into(), features.join(",")],
    }
}

/// Under a PMIx server (mpirun, srun --mpi=pmix): what every rank's
/// start-up line says about its bootstrap, and the launcher name the test
/// program's `--expect-launcher` takes. The PMIx bootstrap in a build with
/// the feature `gaspi/pmix`; without it the ranks fall back to
/// `fallback`'s variables and say why (decision 0084).
pub fn pmix_expectation(fallback: &'static str) -> (&'static str, &'static str) {
    if gaspi_launch::PMIX_BUILT {
        (
            "bootstrap PMIx (endpoints on first use with PMIx_Get",
            "pmix",
        )
    } else {
        (
            "a PMIx server started this process, but this build has no PMIx bootstrap",
            fallback,
        )
    }
}

/// Whether this build has the network transport `name` (`verbs`,
/// `libfabric`); where it does not, says so in a `SKIPPED` line for
/// `test` (see [`skip`]) and returns `false`.
pub fn built_with(test: &str, name: &str) -> bool {
    if gaspi::network_transports().any(|n| n == name) {
        return true;
    }
    skip(
        test,
        &format!("this build has no {name} transport (build with --features gaspi/{name})"),
    );
    false
}

/// Compiles the C or C++ program `source` with `compiler` (and language
/// standard `std`) against the C interface's headers and the `libGPI2.so`
/// in `lib_dir`, warnings as errors, into `out` (with an rpath to
/// `lib_dir`).
pub fn compile_c(
    compiler: &str,
    std: &str,
    source: &Path,
    lib_dir: &Path,
    out: &Path,
) -> Result<(), String> {
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/capi/include");
    let output = Command::new(compiler)
        .arg(std)
        .args(["-O2", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(&include)
        .arg(source)
        .arg("-L")
        .arg(lib_dir)
        .arg("-lGPI2")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .arg("-o")
        .arg(out)
        .output()
        .map_err(|e| format!("running {compiler}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{compiler} {} failed:\n{}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// `gaspi_run`, the GPI-2 style launcher of the `gaspi-launch` package, built like
/// [`gaspi_run`] into the same target directory and profile as `rank_bin`.
pub fn gpi2_launcher(rank_bin: &Path) -> PathBuf {
    build_target(
        rank_bin,
        &["-p", "gaspi-launch", "--bin", "gaspi_run"],
        "gaspi_run",
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Every program of the `gaspi-launch` package (`gaspi-run`, `gaspi_run`,
/// `gaspi_cleanup`, `gaspi_logger`: what `install.sh` installs), built like
/// [`gaspi_run`] into the same target directory and profile as `rank_bin`;
/// returns the directory that holds them.
pub fn launch_programs(rank_bin: &Path) -> PathBuf {
    let cleanup = build_target(rank_bin, &["-p", "gaspi-launch", "--bins"], "gaspi_cleanup")
        .unwrap_or_else(|e| panic!("{e}"));
    cleanup
        .parent()
        .expect("a program lies in a directory")
        .to_path_buf()
}

fn build_launcher(rank_bin: &Path) -> Result<PathBuf, String> {
    build_target(
        rank_bin,
        &["-p", "gaspi-launch", "--bin", "gaspi-run"],
        "gaspi-run",
    )
}

/// Builds what `what` names (cargo arguments) into the profile directory of
/// `rank_bin`; returns `relative` in it.
fn build_target(rank_bin: &Path, what: &[&str], relative: &str) -> Result<PathBuf, String> {
    let profile_dir = rank_bin
        .parent()
        .ok_or_else(|| format!("{} has no parent directory", rank_bin.display()))?;
    let launcher = profile_dir.join(relative);
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_string();
    let target_dir = profile_dir.parent();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--quiet"]).args(what);
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    if let Some(t) = target_dir {
        cmd.arg("--target-dir").arg(t);
    }
    if let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") {
        cmd.current_dir(dir);
    }
    let built = cmd.status();
    match built {
        Ok(s) if s.success() && launcher.exists() => Ok(launcher),
        other if launcher.exists() => {
            eprintln!(
                "warning: building {relative} failed ({other:?}); using the existing {}",
                launcher.display()
            );
            Ok(launcher)
        }
        other => Err(format!(
            "{relative} is not at {} and `{} build {}` failed: {other:?}",
            launcher.display(),
            cargo.to_string_lossy(),
            what.join(" ")
        )),
    }
}

/// A fresh tag for a job: unique within this machine and run.
pub fn fresh_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{:08x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    )
}

/// Prefixes of the variables launchers set; removed from every job's
/// environment so that the test's own environment cannot steer a job.
const LAUNCH_PREFIXES: &[&str] = &["GASPI_", "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL"];

/// Removes every launcher variable of this process's environment from `cmd`.
pub fn clean_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        let name = k.to_string_lossy();
        if LAUNCH_PREFIXES.iter().any(|p| name.starts_with(p)) {
            cmd.env_remove(&k);
        }
    }
}

/// Files in `/dev/shm` whose name mentions gaspi.
pub fn shm_files() -> BTreeSet<PathBuf> {
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return BTreeSet::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .to_lowercase()
                .contains("gaspi")
        })
        .map(|e| e.path())
        .collect()
}

/// Processes (pid, command line) whose environment carries `tag`, ignoring
/// zombies (their environment is gone, they hold nothing).
pub fn leftover_processes(tag: &str) -> Vec<(u32, String)> {
    let needle = format!("{TAG_VAR}={tag}");
    let mut found = Vec::new();
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in proc_dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|&b| b == 0)
            .any(|var| var == needle.as_bytes())
        {
            let cmdline = std::fs::read(entry.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            found.push((pid, cmdline));
        }
    }
    found
}

/// The pid of the process of job `tag` whose environment holds `var`
/// (`NAME=VALUE`, e.g. `GASPI_RANK=0`), as soon as it exists; `None` if
/// none appears within `within`.
pub fn process_with_env(tag: &str, var: &str, within: Duration) -> Option<u32> {
    let until = Instant::now() + within;
    while Instant::now() < until {
        for (pid, _) in leftover_processes(tag) {
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                continue;
            };
            if env.split(|&b| b == 0).any(|v| v == var.as_bytes()) {
                return Some(pid);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}

/// Stops the process of job `tag` whose environment holds `var` (see
/// [`process_with_env`]) with SIGSTOP for a second as soon as it exists,
/// then lets it go on: a rank slow to start. Panics if it never appears
/// within `within`.
pub fn stop_for_a_second(tag: &str, var: &str, within: Duration) {
    let Some(pid) = process_with_env(tag, var, within) else {
        panic!("the process with {var} never appeared");
    };
    let pid = nix::unistd::Pid::from_raw(pid as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    std::thread::sleep(Duration::from_secs(1));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("SIGCONT");
}

/// Waits up to `grace` for every process of job `tag` to be gone; returns
/// those still there.
pub fn wait_no_leftovers(tag: &str, grace: Duration) -> Vec<(u32, String)> {
    let until = Instant::now() + grace;
    loop {
        let left = leftover_processes(tag);
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a finished process left.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What ran.
    pub what: String,
    /// Exit code, or 128 + signal.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// From start to exit.
    pub elapsed: Duration,
    /// The job's tag.
    pub tag: String,
}

impl Outcome {
    /// The output, for failure messages.
    pub fn dump(&self) -> String {
        format!(
            "{} exited with {} after {:.2?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.what, self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Panics with the output unless the exit code is 0.
    pub fn assert_success(&self) -> &Self {
        assert_eq!(self.code, 0, "the job failed:\n{}", self.dump());
        self
    }

    /// Panics with the output unless the exit code is `code`.
    pub fn assert_code(&self, code: i32) -> &Self {
        assert_eq!(self.code, code, "unexpected exit code:\n{}", self.dump());
        self
    }

    /// Panics unless stdout has a line containing `needle`, counting them.
    pub fn stdout_lines_with(&self, needle: &str) -> usize {
        self.stdout.lines().filter(|l| l.contains(needle)).count()
    }

    /// Stderr lines containing `needle` (the ranks' log lines).
    pub fn stderr_lines_with(&self, needle: &str) -> usize {
        self.stderr.lines().filter(|l| l.contains(needle)).count()
    }

    /// Panics unless `ranks` start-up lines say `says` (one per rank):
    /// which bootstrap each rank used ([`pmix_expectation`]).
    pub fn assert_every_rank_says(&self, ranks: usize, says: &str) -> &Self {
        assert_eq!(
            self.stderr_lines_with(says),
            ranks,
            "every rank's start-up line must say {says:?}:\n{}",
            self.dump()
        );
        self
    }

    /// Panics if a process of the job or a gaspi file in /dev/shm that was
    /// not there before the job (`shm_before`) is left.
    pub fn assert_nothing_left(&self, shm_before: &BTreeSet<PathBuf>) -> &Self {
        let procs = wait_no_leftovers(&self.tag, Duration::from_secs(3));
        assert!(
            procs.is_empty(),
            "processes of the job are left behind: {procs:?}\n{}",
            self.dump()
        );
        let shm: Vec<_> = shm_files().difference(shm_before).cloned().collect();
        assert!(
            shm.is_empty(),
            "shared-memory files are left behind: {shm:?}\n{}",
            self.dump()
        );
        self
    }
}

fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

enum Line {
    Out(String),
    Err(String),
}

fn pump(
    stream: impl Read + Send + 'static,
    err: bool,
    tx: std::sync::mpsc::Sender<Line>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let line = String::from_utf8_lossy(&buf)
                        .trim_end_matches('\n')
                        .to_string();
                    let msg = if err {
                        Line::Err(line)
                    } else {
                        Line::Out(line)
                    };
                    if tx.send(msg).is_err() {
                        return;
                    }
                }
            }
        }
    })
}

/// A process started by a test: its own process group, output captured line
/// by line, killed (group and all) if the test drops it while it runs.
pub struct Running {
    what: String,
    tag: String,
    child: Child,
    lines: Receiver<Line>,
    stdout: Vec<String>,
    stderr: Vec<String>,
    start: Instant,
    status: Option<ExitStatus>,
}

impl Running {
    /// Starts `cmd` tagged with `tag`, output piped, in its own process group.
    pub fn spawn(mut cmd: Command, tag: &str) -> Running {
        let what = format!("{cmd:?}");
        cmd.env(TAG_VAR, tag)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let (tx, rx) = channel();
        pump(child.stdout.take().expect("piped"), false, tx.clone());
        pump(child.stderr.take().expect("piped"), true, tx);
        Running {
            what,
            tag: tag.to_string(),
            child,
            lines: rx,
            stdout: Vec::new(),
            stderr: Vec::new(),
            start: Instant::now(),
            status: None,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn take(&mut self, l: Line) {
        match l {
            Line::Out(s) => self.stdout.push(s),
            Line::Err(s) => self.stderr.push(s),
        }
    }

    /// The standard output lines read so far.
    pub fn stdout_lines(&self) -> &[String] {
        &self.stdout
    }

    /// Waits until stdout has `count` lines containing `needle`; panics with
    /// the output after `timeout` or if the process ends first.
    pub fn wait_for_lines(&mut self, needle: &str, count: usize, timeout: Duration) {
        let until = Instant::now() + timeout;
        loop {
            if self.stdout.iter().filter(|l| l.contains(needle)).count() >= count {
                return;
            }
            let left = until.saturating_duration_since(Instant::now());
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(l) => self.take(l),
                Err(RecvTimeoutError::Timeout) => {
                    if Instant::now() >= until {
                        self.kill_group();
                        panic!(
                            "waited {timeout:?} for {count} lines with {needle:?}:\n{}",
                            self.snapshot().dump()
                        );
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let _ = self.child.wait();
                    panic!(
                        "the process ended before printing {count} lines with {needle:?}:\n{}",
                        self.snapshot().dump()
                    );
                }
            }
        }
    }

    /// Waits until stderr has a line containing `needle` and returns the
    /// first such line; panics with the output after `timeout` or if the
    /// process ends first.
    pub fn wait_for_stderr_line(&mut self, needle: &str, timeout: Duration) -> String {
        let until = Instant::now() + timeout;
        loop {
            if let Some(l) = self.stderr.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let left = until.saturating_duration_since(Instant::now());
            match self
                .lines
                .recv_timeout(left.min(Duration::from_millis(100)))
            {
                Ok(l) => self.take(l),
                Err(RecvTimeoutError::Timeout) if Instant::now() < until => {}
                Err(_) => {
                    self.kill_group();
                    panic!(
                        "no stderr line with {needle:?} within {timeout:?}:\n{}",
                        self.snapshot().dump()
                    );
                }
            }
        }
    }

    /// Bytes of standard error read so far (lines and their ends).
    pub fn stderr_len(&self) -> usize {
        self.stderr.iter().map(|l| l.len() + 1).sum()
    }

    /// Sends signal `sig` to the process (not its group).
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child, not yet reaped (the Child is
        // alive and not waited for), so the pid cannot have been reused.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Sends signal `sig` to the process's whole group (as `timeout` and
    /// a terminal's Ctrl-C do).
    pub fn signal_group(&self, sig: i32) {
        // SAFETY: kill(2) on the process group this child leads (created by
        // `process_group(0)`); it holds the job's processes only.
        unsafe { libc::kill(-(self.child.id() as i32), sig) };
    }

    fn kill_group(&mut self) {
        // SAFETY: kill(2) on the process group this child leads (created by
        // `process_group(0)`); it holds the job's processes only.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.kill();
        self.status = self.child.wait().ok();
    }

    fn snapshot(&self) -> Outcome {
        Outcome {
            what: self.what.clone(),
            code: self.status.map_or(-1, exit_code),
            stdout: self.stdout.join("\n"),
            stderr: self.stderr.join("\n"),
            elapsed: self.start.elapsed(),
            tag: self.tag.clone(),
        }
    }

    /// Polls for the exit; `None` while it runs.
    pub fn try_finish(&mut self) -> Option<i32> {
        while let Ok(l) = self.lines.try_recv() {
            self.take(l);
        }
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status.map(exit_code)
    }

    /// Waits for the exit and the end of its output. After `timeout` the
    /// process group is killed and the test panics with the output.
    pub fn finish(mut self, timeout: Duration) -> Outcome {
        let until = self.start + timeout;
        loop {
            if self.try_finish().is_some() {
                break;
            }
            if Instant::now() >= until {
                self.kill_group();
                // Let the pumps drain what is left.
                while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    self.take(l);
                }
                let _ = std::fs::write(
                    std::env::temp_dir().join(format!("gaspi-tests-hung-{}.log", self.tag)),
                    self.snapshot().dump(),
                );
                panic!(
                    "the job hung: killed after {timeout:?}\n{}",
                    self.snapshot().dump()
                );
            }
            match self.lines.recv_timeout(Duration::from_millis(20)) {
                Ok(l) => self.take(l),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
            }
        }
        let elapsed = self.start.elapsed();
        // The output ends when every holder of the pipes is gone: a process
        // of the job that survives its launcher keeps them open.
        let drain_until = Instant::now() + Duration::from_secs(5);
        loop {
            match self
                .lines
                .recv_timeout(drain_until.saturating_duration_since(Instant::now()))
            {
                Ok(l) => self.take(l),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    let left = leftover_processes(&self.tag);
                    // SAFETY: as in kill_group; the leader is reaped, but the
                    // group id stays taken while members live.
                    unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
                    panic!(
                        "the job's output is still open 5 s after it exited: processes left {left:?}\n{}",
                        self.snapshot().dump()
                    );
                }
            }
        }
        let mut out = self.snapshot();
        out.elapsed = elapsed;
        out
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.status.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            self.kill_group();
        }
    }
}

/// A job of `gaspi-test-rank` started through `gaspi-run`.
pub struct Job {
    launcher: PathBuf,
    program: PathBuf,
    ranks: u32,
    launcher_args: Vec<String>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Duration,
    /// The job's tag (see [`leftover_processes`]).
    pub tag: String,
}

impl Job {
    /// `gaspi-run -n ranks program`, a 60 s hang guard, a fresh tag.
    pub fn new(program: &Path, ranks: u32) -> Job {
        Job {
            launcher: gaspi_run(program),
            program: program.to_path_buf(),
            ranks,
            launcher_args: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            timeout: Duration::from_secs(60),
            tag: fresh_tag(),
        }
    }

    /// Adds launcher options (before the program).
    pub fn launcher_args(mut self, a: &[&str]) -> Job {
        self.launcher_args.extend(a.iter().map(|s| s.to_string()));
        self
    }

    /// Adds program arguments (the scenario and its options).
    pub fn args(mut self, a: &[&str]) -> Job {
        self.args.extend(a.iter().map(|s| s.to_string()));
        self
    }

    /// Sets an environment variable of every rank.
    pub fn env(mut self, k: &str, v: &str) -> Job {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Sets the hang guard.
    pub fn timeout(mut self, t: Duration) -> Job {
        self.timeout = t;
        self
    }

    /// The command line, environment cleaned of launcher variables.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.launcher);
        clean_env(&mut cmd);
        cmd.arg("-n")
            .arg(self.ranks.to_string())
            .args(&self.launcher_args)
            .arg(&self.program)
            .args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts the job.
    pub fn spawn(&self) -> Running {
        Running::spawn(self.command(), &self.tag)
    }

    /// Runs the job to its end (or kills it at the hang guard and panics).
    pub fn run(&self) -> Outcome {
        self.spawn().finish(self.timeout)
    }
}

/// A temporary directory, removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A fresh directory under the system's temporary directory.
    pub fn new(what: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("gaspi-tests-{what}-{}", fresh_tag()));
        std::fs::create_dir_all(&p).expect("creating a temporary directory");
        TempDir(p)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs several processes at once (the ranks of a job started without
/// `gaspi-run`) and waits for all of them; kills all and panics at `timeout`.
/// Once one has failed, the others get 5 s before they are killed (as a
/// launcher would stop them), so a failed job ends quickly.
pub fn run_all(cmds: Vec<Command>, tag: &str, timeout: Duration) -> Vec<Outcome> {
    let mut running: Vec<Running> = cmds.into_iter().map(|c| Running::spawn(c, tag)).collect();
    let until = Instant::now() + timeout;
    let mut failed_at: Option<Instant> = None;
    loop {
        let mut done = true;
        for r in running.iter_mut() {
            match r.try_finish() {
                None => done = false,
                Some(0) => {}
                Some(_) => {
                    failed_at.get_or_insert_with(Instant::now);
                }
            }
        }
        if done {
            break;
        }
        if failed_at.is_some_and(|t| t.elapsed() > Duration::from_secs(5)) {
            for r in running.iter_mut() {
                if r.try_finish().is_none() {
                    r.kill_group();
                }
            }
            break;
        }
        if Instant::now() >= until {
            let dumps: Vec<String> = running
                .iter_mut()
                .map(|r| {
                    if r.try_finish().is_none() {
                        r.kill_group();
                    }
                    r.snapshot().dump()
                })
                .collect();
            panic!(
                "the ranks hung: killed after {timeout:?}\n{}",
                dumps.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    running
        .into_iter()
        .map(|r| r.finish(Duration::from_secs(5)))
        .collect()
}

/// A TCP port that was free a moment ago on the loopback interface.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port")
}

/// Hosts for multi-host tests: network namespaces on this machine, each
/// with its own address on one private subnet, joined by a bridge that
/// lives in a namespace of its own (nothing of the machine's own network
/// is touched). Removed, with everything in them, when dropped.
///
/// Needs root and `ip` (iproute2); [`NetNamespaces::create`] says why not
/// where it cannot run, for the test to [`skip`].
pub struct NetNamespaces {
    /// Namespace of host `i`.
    pub names: Vec<String>,
    /// Address of host `i`.
    pub addrs: Vec<std::net::Ipv4Addr>,
    switch: String,
}

impl NetNamespaces {
    /// Makes `n` hosts, or says why it cannot.
    pub fn create(n: usize) -> Result<NetNamespaces, String> {
        // SAFETY: geteuid(2) has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("creating network namespaces needs root".into());
        }
        let ip_works = Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !ip_works {
            return Err("`ip` (iproute2) is not installed".into());
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}x{k}", std::process::id() % 100_000);
        let subnet = ((std::process::id() as u64 * 7 + k * 13) % 250) as u8 + 1;
        let ns = NetNamespaces {
            names: (0..n).map(|i| format!("gaspi-{id}-h{i}")).collect(),
            addrs: (0..n)
                .map(|i| std::net::Ipv4Addr::new(10, 213, subnet, i as u8 + 1))
                .collect(),
            switch: format!("gaspi-{id}-sw"),
        };
        ns.build().map(|_| ns)
    }

    fn build(&self) -> Result<(), String> {
        let ip = |args: &[&str]| -> Result<(), String> {
            let out = Command::new("ip")
                .args(args)
                .output()
                .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
            if !out.status.success() {
                return Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            Ok(())
        };
        let sw = self.switch.as_str();
        ip(&["netns", "add", sw])?;
        ip(&["-n", sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", sw, "link", "set", "br0", "up"])?;
        for (i, (name, addr)) in self.names.iter().zip(&self.addrs).enumerate() {
            let (inside, outside) = (format!("eth{i}"), format!("port{i}"));
            ip(&["netns", "add", name])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
            ip(&[
                "-n", name, "link", "add", &inside, "type", "veth", "peer", "name", &outside,
                "netns", sw,
            ])?;
            ip(&["-n", sw, "link", "set", &outside, "master", "br0"])?;
            ip(&["-n", sw, "link", "set", &outside, "up"])?;
            ip(&[
                "-n",
                name,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &inside,
            ])?;
            ip(&["-n", name, "link", "set", &inside, "up"])?;
        }
        Ok(())
    }

    /// Cuts host `i` off the network (its port on the bridge goes down):
    /// its packets and those to it are dropped, nothing is closed.
    pub fn cut(&self, i: usize) {
        let port = format!("port{i}");
        let ok = Command::new("ip")
            .args(["-n", &self.switch, "link", "set", &port, "down"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "could not cut host {i} off");
    }

    /// Makes host `i`'s link lossy and slow (`tc qdisc ... netem ARGS`,
    /// e.g. `loss 5% delay 20ms`); says why not where the kernel has no
    /// netem.
    pub fn netem(&self, i: usize, args: &str) -> Result<(), String> {
        let mut qdisc = vec!["netem"];
        qdisc.extend(args.split_whitespace());
        self.root_qdisc(i, &qdisc)
    }

    /// `tc qdisc add dev ethI root QDISC...` in host `i`'s namespace.
    fn root_qdisc(&self, i: usize, qdisc: &[&str]) -> Result<(), String> {
        let dev = format!("eth{i}");
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.names[i],
                "tc",
                "qdisc",
                "add",
                "dev",
                &dev,
                "root",
            ])
            .args(qdisc)
            .output()
            .map_err(|e| format!("tc: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "tc qdisc {}: {}",
                qdisc[0],
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Makes host `i`'s link lossy and slow without netem: every packet
    /// the host sends is dropped with probability `loss_percent` (an
    /// nftables rule on `meta random`, in the host's namespace only) and
    /// the link is shaped to `rate` (`tc qdisc ... tbf`, e.g. `20mbit`:
    /// queueing delay under load instead of a fixed one). Says why not
    /// where `nft` or the kernel's nftables is missing.
    pub fn lossy_without_netem(
        &self,
        i: usize,
        loss_percent: u32,
        rate: &str,
    ) -> Result<(), String> {
        let threshold = (u64::from(loss_percent) * (1u64 << 32) / 100).min(u64::from(u32::MAX));
        let script = format!(
            "table inet gaspi_test_loss {{\n  chain out {{\n    type filter hook output priority 0; policy accept;\n    meta random < {threshold} drop\n  }}\n}}\n"
        );
        let mut nft = Command::new("ip")
            .args(["netns", "exec", &self.names[i], "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("nft: {e}"))?;
        nft.stdin
            .take()
            .ok_or("nft: no stdin")?
            .write_all(script.as_bytes())
            .map_err(|e| format!("nft: {e}"))?;
        let out = nft.wait_with_output().map_err(|e| format!("nft: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "nft: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        self.root_qdisc(
            i,
            &["tbf", "rate", rate, "burst", "32kb", "latency", "400ms"],
        )
    }

    /// `program` run inside host `i`'s namespace.
    pub fn command(&self, i: usize, program: &Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.names[i]]).arg(program);
        cmd
    }
}

impl Drop for NetNamespaces {
    fn drop(&mut self) {
        for name in self.names.iter().chain(std::iter::once(&self.switch)) {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// An sshd in every host of a [`NetNamespaces`], on port 22 of the host's
/// address, accepting root with a key made for the test; stopped (and its
/// files removed) when dropped.
///
/// [`Sshd::start`] says why not where it cannot run (no sshd or ssh-keygen
/// installed), for the test to [`skip`].
pub struct Sshd {
    dir: TempDir,
    daemons: Vec<Child>,
}

impl Sshd {
    /// Starts one sshd per host of `hosts` and waits until each accepts.
    pub fn start(hosts: &NetNamespaces) -> Result<Sshd, String> {
        let sshd = Path::new("/usr/sbin/sshd");
        if !sshd.exists() {
            return Err("sshd is not installed (apt-get install openssh-server)".into());
        }
        for tool in ["ssh", "ssh-keygen"] {
            if Command::new(tool).arg("-V").output().is_err() {
                return Err(format!("{tool} is not installed (openssh-client)"));
            }
        }
        // sshd insists on its privilege-separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        let dir = TempDir::new("sshd");
        let d = dir.path();
        for key in ["host_key", "id"] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "gaspi-tests", "-f"])
                .arg(d.join(key))
                .stdin(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(format!("ssh-keygen could not make {key}"));
            }
        }
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys"))
            .map_err(|e| format!("authorized_keys: {e}"))?;
        let mut this = Sshd {
            dir,
            daemons: Vec::new(),
        };
        for (i, addr) in hosts.addrs.iter().enumerate() {
            let d = this.dir.path();
            let config = d.join(format!("sshd_config.{i}"));
            std::fs::write(
                &config,
                format!(
                    "ListenAddress {addr}:22\nHostKey {hk}\nAuthorizedKeysFile {ak}\n\
                     PermitRootLogin yes\nUsePAM no\nPasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\nStrictModes no\nPidFile {pid}\n\
                     LogLevel ERROR\nMaxStartups 100\nMaxSessions 100\n",
                    hk = d.join("host_key").display(),
                    ak = d.join("authorized_keys").display(),
                    pid = d.join(format!("sshd.{i}.pid")).display(),
                ),
            )
            .map_err(|e| format!("writing {}: {e}", config.display()))?;
            let mut cmd = hosts.command(i, sshd);
            cmd.arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            let child = cmd.spawn().map_err(|e| format!("starting sshd: {e}"))?;
            this.daemons.push(child);
        }
        // Wait until every sshd accepts a session.
        for i in 0..hosts.addrs.len() {
            let until = Instant::now() + Duration::from_secs(10);
            loop {
                let out = hosts
                    .command(0, Path::new("/bin/sh"))
                    .arg("-c")
                    .arg(format!("{} {} true", this.ssh_command(), hosts.addrs[i]))
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("running ssh: {e}"))?;
                if out.status.success() {
                    break;
                }
                if Instant::now() >= until {
                    return Err(format!(
                        "the sshd of host {i} does not accept the test's key: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(this)
    }

    /// The ssh command that reaches these daemons (for `GASPI_SSH` or
    /// Open MPI's `plm_rsh_agent`): the test's key, no host-key checks.
    pub fn ssh_command(&self) -> String {
        format!(
            "ssh -i {} -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            self.dir.path().join("id").display()
        )
    }

    /// The directory of the test's keys and configuration.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            // `ip netns exec` execs sshd, so the child is sshd itself.
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// A fresh job key (64 hex digits).
pub fn job_key() -> String {
    (0..32)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// The commands of a job whose rank `r` runs on host `place[r]` of
/// `hosts`, started directly with the variables gaspi-run would give it
/// (rank 0's host holds the rendezvous), `env` set for every rank and the
/// log filter `GASPI_TEST_LOG` (default `info`).
pub fn commands_on_hosts(
    hosts: &NetNamespaces,
    place: &[usize],
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Vec<Command> {
    let n = place.len();
    let key = job_key();
    let rendezvous = format!("{}:47123", hosts.addrs[place[0]]);
    (0..n)
        .map(|r| {
            let host = place[r];
            let local: Vec<usize> = (0..n).filter(|&q| place[q] == host).collect();
            let mut cmd = hosts.command(host, program);
            clean_env(&mut cmd);
            cmd.env("GASPI_RANK", r.to_string())
                .env("GASPI_SIZE", n.to_string())
                .env(
                    "GASPI_LOCAL_RANK",
                    local.iter().position(|&q| q == r).unwrap_or(0).to_string(),
                )
                .env("GASPI_LOCAL_SIZE", local.len().to_string())
                .env("GASPI_RENDEZVOUS", &rendezvous)
                .env("GASPI_JOB_KEY", &key)
                .env(
                    "GASPI_LOG",
                    std::env::var("GASPI_TEST_LOG").unwrap_or_else(|_| "info".into()),
                )
                .args(args);
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd
        })
        .collect()
}

impl NetNamespaces {
    /// Puts host `i` back on the network after [`NetNamespaces::cut`].
    pub fn heal(&self, i: usize) {
        let port = format!("port{i}");
        let ok = Command::new("ip")
            .args(["-n", &self.switch, "link", "set", &port, "up"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "could not put host {i} back");
    }
}

/// Every value of figure `name` in `out`'s standard output (lines
/// `rank R: figure NAME=VALUE`), with the rank that printed it.
pub fn figures(out: &Outcome, name: &str) -> Vec<(u32, u128)> {
    let key = format!("figure {name}=");
    out.stdout
        .lines()
        .filter_map(|l| {
            let (rank, rest) = l.strip_prefix("rank ")?.split_once(": ")?;
            let value = rest.strip_prefix(&key)?;
            Some((rank.parse().ok()?, value.trim().parse().ok()?))
        })
        .collect()
}

/// Microseconds since the Unix epoch (the clock the ranks' figures use).
pub fn unix_us() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// What a rank program's steps return: a failure is a message naming the
/// file and line where it was found (see [`fail!`]).
pub type RankResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// Returns from a rank program's step with an error naming this file and
/// line and the formatted message.
#[macro_export]
macro_rules! fail {
    ($($t:tt)*) => {
        return Err(format!("{}:{}: {}", file!(), line!(), format!($($t)*)).into())
    };
}

/// [`fail!`] unless the condition holds.
#[macro_export]
macro_rules! ensure {
    ($c:expr, $($t:tt)*) => {
        if !$c {
            $crate::fail!($($t)*)
        }
    };
}
