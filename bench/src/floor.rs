//! Physical floors of this machine, measured in the same run as the
//! benchmarks.
//!
//! A one-sided runtime over shared memory cannot beat the hardware it runs
//! on: a put-and-notify round trip between two processes needs at least one
//! cache-line transfer each way, and a large put cannot move bytes faster
//! than a single-threaded `memcpy`. This module measures both figures so that
//! every benchmark report can show how far from the floor we are:
//!
//! * [`cacheline_pingpong`]: two processes (forked) share one anonymous
//!   `MAP_SHARED` mapping holding two cache-line separated `AtomicU64`s and
//!   bounce a counter between them. Reported as half round trips.
//! * [`memcpy_bandwidth`]: single-threaded copy between two distinct,
//!   pre-touched buffers; [`gbps`] turns a time into GB/s (GB = 1e9 bytes).
//! * [`floor_records`]: both, as [`Record`]s ready for [`crate::report::emit`].
//!
//! Neither measurement pins CPUs; they see the same scheduler conditions as
//! the benchmarks they are compared with.

use crate::report::{Record, Samples};
use nix::sys::mman::{mmap_anonymous, munmap, MapFlags, ProtFlags};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};
use std::ffi::c_void;
use std::hint::spin_loop;
use std::io;
use std::num::NonZeroUsize;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Round trips per timed batch of the ping-pong: long enough that the two
/// `Instant::now()` calls (tens of ns) are noise, short enough to give a
/// distribution rather than one average.
pub const PINGPONG_BATCH: u64 = 100;

/// Value the parent writes to tell the child to exit. The counter never
/// reaches it.
const STOP: u64 = u64::MAX;

/// Spins between looks at the clock/child while waiting (keeps
/// `clock_gettime`/`waitpid` out of the fast path).
const SPINS_PER_CHECK: u32 = 1 << 14;

/// Spins after which a waiter yields the CPU: only reached when the peer has
/// been descheduled (e.g. more runnable threads than cores), where spinning
/// on would just burn the peer's time slice.
const SPINS_BEFORE_YIELD: u32 = 1 << 16;

/// How long either side waits for the other before giving up.
const PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// One 64-byte line padded to 128 bytes, so that the two lines also do not
/// share the 128-byte pair that the adjacent-line prefetcher of x86 CPUs
/// fetches together (which would add false sharing).
#[repr(C, align(128))]
struct PaddedLine {
    value: AtomicU64,
}

/// The layout of the shared mapping: `ping` is written only by the parent
/// (and polled by the child), `pong` only by the child.
#[repr(C)]
struct PingPongLines {
    ping: PaddedLine,
    pong: PaddedLine,
}

/// An anonymous `MAP_SHARED` mapping holding [`PingPongLines`]; unmapped on
/// drop. Shared (not private, as `memmap2`'s `map_anon` is) so that a forked
/// child sees the same physical page instead of a copy-on-write copy.
struct SharedLines {
    ptr: NonNull<c_void>,
    len: usize,
}

impl SharedLines {
    fn new() -> io::Result<Self> {
        let len = std::mem::size_of::<PingPongLines>();
        let nz_len = NonZeroUsize::new(len).ok_or_else(|| io::Error::other("empty mapping"))?;
        // SAFETY: we ask for a fresh anonymous mapping at an address of the
        // kernel's choosing (addr = None), so no existing memory is affected.
        let ptr = unsafe {
            mmap_anonymous(
                None,
                nz_len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED | MapFlags::MAP_ANONYMOUS,
            )
        }
        .map_err(io::Error::from)?;
        // The mapping is page aligned (>= 128) and zero-filled, and an all-zero
        // `AtomicU64` is a valid value, so `lines()` may view it as
        // `PingPongLines`.
        Ok(SharedLines { ptr, len })
    }

    fn lines(&self) -> &PingPongLines {
        // SAFETY: `ptr` is a live, page-aligned, zero-initialised, readable and
        // writable mapping of `size_of::<PingPongLines>()` bytes owned by
        // `self` (unmapped only in `drop`), and `PingPongLines` consists of
        // `AtomicU64`s, for which all-zero bytes are valid and which are only
        // ever accessed atomically (shared `&` access is therefore sound, also
        // across the two processes).
        unsafe { self.ptr.cast::<PingPongLines>().as_ref() }
    }
}

impl Drop for SharedLines {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe exactly the mapping created in `new`,
        // and no reference from `lines()` outlives `self`.
        if let Err(e) = unsafe { munmap(self.ptr, self.len) } {
            eprintln!("floor: munmap failed: {e}");
        }
    }
}

/// The forked child: tells it to stop, kills it if it does not, and reaps it.
/// Runs on every exit path of the parent, unwinding included.
struct ChildGuard<'a> {
    pid: Pid,
    lines: &'a PingPongLines,
    reaped: bool,
}

impl ChildGuard<'_> {
    /// Non-blocking check whether the child is gone (and reap it if so).
    fn exited(&mut self) -> bool {
        match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::EINTR) => false,
            // Exited or killed (now reaped), or ECHILD: not our child any more.
            Ok(_) | Err(_) => {
                self.reaped = true;
                true
            }
        }
    }
}

impl Drop for ChildGuard<'_> {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        self.lines.ping.value.store(STOP, Ordering::Release);
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if self.exited() {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Did not react to STOP: make sure it ends and does not stay a zombie.
        let _ = kill(self.pid, Signal::SIGKILL);
        let _ = waitpid(self.pid, None);
        self.reaped = true;
    }
}

/// Body of the forked child. Never returns.
///
/// Only async-signal-safe operations happen here (atomic loads/stores on the
/// shared mapping, `sched_yield`, `prctl`, `getppid`, `_exit`): no
/// allocation, no locks, no I/O, and nothing that can panic, so it is sound
/// even if the parent had other threads when it forked.
fn child_main(lines: &PingPongLines, parent: libc::pid_t) -> ! {
    // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid only affect this process and
    // are async-signal-safe syscalls. If the parent already died before prctl
    // took effect, getppid() differs and we leave at once.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(2);
        }
    }
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        let v = loop {
            let v = lines.ping.value.load(Ordering::Acquire);
            if v != seen {
                break v;
            }
            spin_loop();
            spins = spins.wrapping_add(1);
            if spins >= SPINS_BEFORE_YIELD {
                // SAFETY: sched_yield has no preconditions and is
                // async-signal-safe.
                unsafe { libc::sched_yield() };
                spins = 0;
            }
        };
        if v == STOP {
            break;
        }
        lines.pong.value.store(v, Ordering::Release);
        seen = v;
    }
    // SAFETY: _exit ends the process without running atexit handlers or
    // destructors (which belong to the parent's copy of the state).
    unsafe { libc::_exit(0) }
}

/// Parent side of one round trip: publish `i`, wait until the child echoes it.
fn round_trip(guard: &mut ChildGuard<'_>, i: u64) -> io::Result<()> {
    let lines = guard.lines;
    lines.ping.value.store(i, Ordering::Release);
    let mut spins = 0u32;
    let mut since_yield = 0u32;
    let mut started: Option<Instant> = None;
    while lines.pong.value.load(Ordering::Acquire) != i {
        spin_loop();
        spins += 1;
        since_yield += 1;
        if since_yield >= SPINS_BEFORE_YIELD {
            std::thread::yield_now();
            since_yield = 0;
        }
        if spins >= SPINS_PER_CHECK {
            spins = 0;
            let t0 = *started.get_or_insert_with(Instant::now);
            if guard.exited() {
                return Err(io::Error::other("ping-pong child exited unexpectedly"));
            }
            if t0.elapsed() > PEER_TIMEOUT {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "ping-pong child did not answer within 10 s",
                ));
            }
        }
    }
    Ok(())
}

/// Cache-line ping-pong between two processes: the floor of any
/// inter-process notification over shared memory.
///
/// Returns `iters` samples; each is the mean half round trip (microseconds)
/// of one batch of [`PINGPONG_BATCH`] round trips, i.e. batch time divided by
/// `2 * PINGPONG_BATCH`. A warm-up of `max(1000, iters * batch / 10)` round
/// trips (capped at 100 000) comes first.
///
/// # Errors
/// If the shared mapping or the fork fails, or the child stops answering.
pub fn cacheline_pingpong(iters: u64) -> io::Result<Samples> {
    pingpong_with_child(iters).map(|(samples, _child)| samples)
}

/// [`cacheline_pingpong`], also returning the (by then reaped) child's pid
/// so that tests can check it is gone.
fn pingpong_with_child(iters: u64) -> io::Result<(Samples, Pid)> {
    let shared = SharedLines::new()?;
    let lines = shared.lines();
    let parent = std::process::id() as libc::pid_t;

    // SAFETY: after fork the child runs only `child_main`, which performs
    // async-signal-safe operations only (atomics on the shared mapping,
    // sched_yield, prctl, getppid, _exit) and never returns, unwinds or
    // allocates. That is what POSIX requires of a child forked from a
    // possibly multi-threaded process, so this is sound whether or not other
    // threads exist (in `gaspi-bench` the floor is measured before any
    // threads are started; under `cargo test` the harness has threads).
    let child = match unsafe { fork() }.map_err(io::Error::from)? {
        ForkResult::Child => child_main(lines, parent),
        ForkResult::Parent { child } => child,
    };
    let mut guard = ChildGuard {
        pid: child,
        lines,
        reaped: false,
    };

    let warmup = (iters.saturating_mul(PINGPONG_BATCH) / 10).clamp(1000, 100_000);
    let mut i = 0u64;
    for _ in 0..warmup {
        i += 1;
        round_trip(&mut guard, i)?;
    }

    let mut samples = Samples::with_capacity(usize::try_from(iters).unwrap_or(0));
    for _ in 0..iters {
        let t0 = Instant::now();
        for _ in 0..PINGPONG_BATCH {
            i += 1;
            round_trip(&mut guard, i)?;
        }
        let us = t0.elapsed().as_secs_f64() * 1e6;
        samples.push(us / (2 * PINGPONG_BATCH) as f64);
    }
    drop(guard); // stop and reap the child before `shared` is unmapped
    Ok((samples, child))
}

/// `floor` (one of the raw TCP floors) between this thread, the lead, and
/// another one on a loopback connection.
#[cfg(test)]
fn over_loopback(
    floor: fn(std::net::TcpStream, TcpSide, usize, u64) -> io::Result<Samples>,
    size: usize,
    iters: u64,
) -> io::Result<Samples> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let other = std::thread::spawn(move || -> io::Result<()> {
        let (s, _) = listener.accept()?;
        floor(s, TcpSide::Echo, size, iters).map(drop)
    });
    let samples = floor(
        std::net::TcpStream::connect(addr)?,
        TcpSide::Lead,
        size,
        iters,
    )?;
    other
        .join()
        .map_err(|_| io::Error::other("the other end panicked"))??;
    Ok(samples)
}

/// Which end of a raw TCP floor this is: the one that sends first and
/// measures, or the one that echoes (ping-pong) or sinks (stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpSide {
    Lead,
    Echo,
}

/// Half round trip of `size`-byte messages over a TCP connection made
/// elsewhere (between two hosts: the path the transport takes), both ends
/// busy-polling non-blocking sockets with `TCP_NODELAY`: the best a raw
/// socket does, with no wake-up on either side (a blocking ping-pong pays
/// one per message), the floor of the TCP transport. Both ends call it
/// with the same `size` and `iters`; the lead gets `iters` samples, each
/// the mean of a batch of 16 round trips, the echo an empty set.
///
/// # Errors
/// If a socket operation fails.
pub fn tcp_pingpong_over(
    mut s: std::net::TcpStream,
    side: TcpSide,
    size: usize,
    iters: u64,
) -> io::Result<Samples> {
    const BATCH: u64 = 16;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let mut buf = vec![1u8; size];
    let mut samples = Samples::with_capacity(usize::try_from(iters).unwrap_or(0));
    if side == TcpSide::Echo {
        for _ in 0..(iters + 1) * BATCH {
            spin_read(&mut s, &mut buf)?;
            spin_write(&mut s, &buf)?;
        }
        return Ok(samples);
    }
    for i in 0..=iters {
        let t0 = Instant::now();
        for _ in 0..BATCH {
            spin_write(&mut s, &buf)?;
            spin_read(&mut s, &mut buf)?;
        }
        if i > 0 {
            samples.push(t0.elapsed().as_secs_f64() * 1e6 / (2 * BATCH) as f64);
        }
    }
    Ok(samples)
}

/// Reads exactly `buf.len()` bytes from a non-blocking socket, spinning.
fn spin_read(s: &mut std::net::TcpStream, buf: &mut [u8]) -> io::Result<()> {
    use std::io::Read;
    let mut at = 0;
    while at < buf.len() {
        match s.read(&mut buf[at..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf` to a non-blocking socket, spinning.
fn spin_write(s: &mut std::net::TcpStream, buf: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut at = 0;
    while at < buf.len() {
        match s.write(&buf[at..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Bandwidth of a raw TCP stream (`size`-byte writes, the reader
/// busy-polling) over a connection made elsewhere: the floor of the TCP
/// transport's write bandwidth. The lead writes and gets one sample per
/// batch of 16 writes, in GB/s; the other end (`Echo`) reads everything
/// and answers one byte at the end.
///
/// # Errors
/// If a socket operation fails.
pub fn tcp_stream_over(
    mut s: std::net::TcpStream,
    side: TcpSide,
    size: usize,
    iters: u64,
) -> io::Result<Samples> {
    const BATCH: u64 = 16;
    s.set_nodelay(true)?;
    s.set_nonblocking(true)?;
    let mut samples = Samples::with_capacity(usize::try_from(iters).unwrap_or(0));
    if side == TcpSide::Echo {
        let mut buf = vec![0u8; size];
        for _ in 0..(iters + 1) * BATCH {
            spin_read(&mut s, &mut buf)?;
        }
        // The last byte read: tell the writer.
        spin_write(&mut s, &[1])?;
        return Ok(samples);
    }
    let buf = vec![1u8; size];
    for i in 0..=iters {
        let t0 = Instant::now();
        for _ in 0..BATCH {
            spin_write(&mut s, &buf)?;
        }
        if i > 0 {
            samples.push(gbps(
                size * BATCH as usize,
                t0.elapsed().as_secs_f64() * 1e6,
            ));
        }
    }
    spin_read(&mut s, &mut [0u8])?;
    Ok(samples)
}

/// Bandwidth in GB/s (1e9 bytes per second) of moving `size` bytes in
/// `us` microseconds.
pub fn gbps(size: usize, us: f64) -> f64 {
    size as f64 / (us * 1e3)
}

/// Times `iters` copies of `src` into `dst` (same length); one sample per
/// copy, microseconds.
fn timed_copies(src: &[u8], dst: &mut [u8], iters: u64) -> Samples {
    let mut samples = Samples::with_capacity(usize::try_from(iters).unwrap_or(0));
    for _ in 0..iters {
        let t0 = Instant::now();
        // `copy_from_slice` is `ptr::copy_nonoverlapping`, i.e. `memcpy`,
        // without the `unsafe`: the borrow checker already guarantees the
        // two buffers are distinct.
        dst.copy_from_slice(src);
        std::hint::black_box(&mut *dst);
        samples.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    samples
}

/// Single-threaded `memcpy` of `size` bytes between two distinct buffers,
/// both written before timing (so page faults are not measured).
///
/// Returns `iters` samples, each the time of one copy in microseconds;
/// `gbps(size, samples.median())` gives the bandwidth. Three untimed copies
/// warm up caches and TLB first.
pub fn memcpy_bandwidth(size: usize, iters: u64) -> Samples {
    // Distinct, non-zero contents so the pages are really allocated (a
    // zeroed `vec!` could stay mapped to the shared zero page).
    let src: Vec<u8> = (0..size).map(|i| (i % 251) as u8 + 1).collect();
    let mut dst = vec![0xA5u8; size];
    timed_copies(&src, &mut dst, 3);
    timed_copies(&src, &mut dst, iters)
}

/// The floor records: `floor-cacheline-pingpong` (2 processes, 8-byte
/// counter, half round trip) and `floor-memcpy` at 64 KiB, 1 MiB, 64 MiB.
///
/// `quick` lowers the iteration counts (for tests and smoke runs). If the
/// ping-pong cannot run, its record carries the error in `note` and no
/// figures.
pub fn floor_records(quick: bool) -> Vec<Record> {
    let mut out = Vec::new();

    let batches = if quick { 20 } else { 2000 };
    let mut pp = Record::new("floor-cacheline-pingpong", 2);
    pp.transport = Some("shm-atomic".into());
    pp.size = Some(8);
    match cacheline_pingpong(batches) {
        Ok(s) => {
            pp = pp.with_samples(&s);
            pp.iters = Some(batches * PINGPONG_BATCH);
            pp.note = Some(format!(
                "half round trip, 2 processes, AtomicU64 store/spin; \
                 p10/p90 over {batches} batches of {PINGPONG_BATCH}"
            ));
        }
        Err(e) => pp.note = Some(format!("not measured: {e}")),
    }
    out.push(pp);

    let points: [(usize, u64, u64); 3] = [
        (64 << 10, 20_000, 200),
        (1 << 20, 1_000, 20),
        (64 << 20, 20, 3),
    ];
    for (size, full, fast) in points {
        let iters = if quick { fast } else { full };
        let s = memcpy_bandwidth(size, iters);
        let mut r = Record::new("floor-memcpy", 1).with_samples(&s);
        r.transport = Some("memcpy".into());
        r.size = Some(size as u64);
        r.iters = Some(iters);
        r.gbps = r.median_us.map(|m| gbps(size, m));
        out.push(r);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn the_raw_tcp_floors_run_over_a_connection_and_measure_something() {
        let pp = over_loopback(tcp_pingpong_over, 64, 4).unwrap();
        assert_eq!(pp.len(), 4);
        assert!(pp.median() > 0.0);
        let stream = over_loopback(tcp_stream_over, 1 << 16, 4).unwrap();
        assert_eq!(stream.len(), 4);
        assert!(stream.median() > 0.0);
    }

    /// Serialises the tests that fork, so that two ping-pongs (two spinning
    /// processes each) do not compete for the same cores.
    static FORK_LOCK: Mutex<()> = Mutex::new(());

    fn fork_lock() -> std::sync::MutexGuard<'static, ()> {
        FORK_LOCK.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[test]
    fn pingpong_returns_requested_samples_all_positive() {
        let _lock = fork_lock();
        let s = cacheline_pingpong(30).unwrap();
        assert_eq!(s.len(), 30);
        for &x in s.as_slice() {
            assert!(x.is_finite() && x > 0.0, "bad sample {x}");
        }
        // A half round trip through a cache line cannot take a full second
        // even on a loaded machine, nor be faster than 1 ns.
        assert!(s.median() > 1e-3 && s.median() < 1e6, "{}", s.median());
    }

    #[test]
    fn pingpong_leaves_no_child_behind() {
        let _lock = fork_lock();
        let (samples, child) = pingpong_with_child(1).unwrap();
        assert_eq!(samples.len(), 1);
        // Reaped: it is no longer our child (a zombie still would be) ...
        let r = waitpid(child, Some(WaitPidFlag::WNOHANG));
        assert_eq!(r, Err(nix::errno::Errno::ECHILD), "child not reaped");
        // ... and no process with its pid exists any more (not running).
        assert_eq!(kill(child, None), Err(nix::errno::Errno::ESRCH));
    }

    #[test]
    fn memcpy_moves_the_bytes() {
        let size = 100_003; // odd size: no lucky alignment
        let src: Vec<u8> = (0..size).map(|i| (i * 7 % 256) as u8).collect();
        let mut dst = vec![0u8; size];
        let s = timed_copies(&src, &mut dst, 5);
        assert_eq!(s.len(), 5);
        assert!(dst == src, "destination differs from source");
        assert!(s.as_slice().iter().all(|&x| x.is_finite() && x >= 0.0));
    }

    #[test]
    fn memcpy_bandwidth_is_plausible() {
        let size = 1 << 20;
        let s = memcpy_bandwidth(size, 10);
        assert_eq!(s.len(), 10);
        let g = gbps(size, s.median());
        // A measured rate; how high depends on the machine and its load
        // (a figure for the benchmark, not a verdict), but no cache is
        // faster than 1000 GB/s.
        assert!(g > 0.0 && g < 1000.0, "{g} GB/s");
    }

    #[test]
    fn gbps_units() {
        // 1 GB in 1 s = 1 GB/s; 1 MiB in 100 us = 10.48576 GB/s.
        assert!((gbps(1_000_000_000, 1e6) - 1.0).abs() < 1e-12);
        assert!((gbps(1 << 20, 100.0) - 10.48576).abs() < 1e-9);
    }

    #[test]
    fn floor_records_quick() {
        let recs = {
            let _lock = fork_lock();
            floor_records(true)
        };
        assert_eq!(recs.len(), 4);
        assert_eq!(recs[0].bench, "floor-cacheline-pingpong");
        assert!(recs[0].median_us.is_some(), "{:?}", recs[0].note);
        let sizes: Vec<_> = recs[1..].iter().map(|r| r.size).collect();
        assert_eq!(sizes, [Some(64 << 10), Some(1 << 20), Some(64 << 20)]);
        for r in &recs[1..] {
            assert_eq!(r.bench, "floor-memcpy");
            let (p10, m, p90) = (r.p10_us.unwrap(), r.median_us.unwrap(), r.p90_us.unwrap());
            assert!(p10 <= m && m <= p90);
            assert!(r.gbps.unwrap() > 0.0);
        }
    }
}
