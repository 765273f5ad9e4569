//! `gaspi-fault-rank`: the ranks of the fault-semantics tests
//! (`tests/fault_semantics.rs`): a stopped peer, a dead group member.
//!
//! Each scenario prints `rank R: ok ...` lines and measured figures as
//! `rank R: figure NAME=VALUE` (the test reads them back), exits 0 on
//! success and prints `rank R: FAILED: ...` and exits 1 otherwise. A rank
//! "stopped" here stops itself with SIGSTOP after starting a shell that
//! sends it SIGCONT a few seconds later: a live process that reads nothing,
//! as under a debugger.

use clap::{Parser, Subcommand};
use gaspi::{
    Config, Error, Gaspi, Group, Memory, NotifyId, Queue, Rank, RankState, ReduceOp, SegId, Timeout,
};
use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gaspi_tests::{ensure, fail, RankResult as Res};

#[derive(Parser)]
#[command(
    name = "gaspi-fault-rank",
    about = "A rank of a fault-semantics test job"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Three ranks; rank 2 stops itself until ranks 0 and 1 are done with
    /// it (or `stop_ms` at the most). Ranks 0 and 1 call
    /// `segment_create(.., Timeout::Ms(timeout_ms))`, which must return
    /// `Timeout` (figure `create_ms`), leave every rank healthy, and, once
    /// rank 2 runs again, a create of the same id with every rank must
    /// work and carry a write_notify ring.
    StoppedCreate {
        #[arg(long, default_value_t = 1500)]
        timeout_ms: u64,
        #[arg(long, default_value_t = 60_000)]
        stop_ms: u64,
    },
    /// Two ranks; rank 1 stops itself until rank 0 has seen two timeouts
    /// (or `stop_ms` at the most). Rank 0 sends passive
    /// messages of 65,535 bytes with `Timeout::Ms(timeout_ms)` until one
    /// times out, and once more (a retry): no call may take much longer
    /// than its timeout (figure `slowest_send_ms`), none may fail
    /// otherwise, and rank 1 must stay healthy. Once rank 1 runs again it
    /// receives every message rank 0 was told was sent, whole, and a
    /// barrier and the state vectors of both show no failure.
    StoppedPassive {
        #[arg(long, default_value_t = 500)]
        timeout_ms: u64,
        #[arg(long, default_value_t = 60_000)]
        stop_ms: u64,
    },
    /// Four ranks loop on barrier + allreduce(Block); rank `victim` kills
    /// itself with SIGKILL at iteration 20 (printing `figure killed_at_us`).
    /// Every survivor's call must fail with PeerDead naming the victim
    /// (`figure failed_at_us`), and a barrier and an allreduce started
    /// afterwards must fail at once (`figure late_allreduce_ms`,
    /// `late_barrier_ms`) with the same error. Rank 0 lingers `linger_ms`
    /// before it exits, so a member that waits for rank 0 instead of
    /// watching the whole group is seen. Run under `gaspi-run --keep-going`.
    DeadMember {
        #[arg(long, default_value_t = 2)]
        victim: u32,
        #[arg(long, default_value_t = 3000)]
        linger_ms: u64,
    },
    /// Three ranks, rank 2 on another host. After a barrier every rank
    /// prints `ready` and waits for `cut_file` to exist (the test cuts
    /// rank 2's host off the network first). Ranks 0 and 1 then enter a
    /// barrier of all ranks with `Timeout::Block`, which must fail with
    /// PeerDead naming rank 2 (figure `detect_ms`, about
    /// `GASPI_PEER_TIMEOUT_MS`), and carry on: a write_notify to each other
    /// and a barrier of a new group of the two. Rank 2 ends when it finds
    /// itself cut off.
    Unreachable {
        #[arg(long)]
        cut_file: std::path::PathBuf,
    },
    /// Connections on first use (run over TCP): after init every rank but
    /// 0 is connected to rank 0 alone; after a ring of write_notify to the
    /// next rank and barriers, to rank 0, its two neighbours and its
    /// barrier partners at most; then the last
    /// rank dies, and every survivor, connected to it or not, learns it
    /// (from rank 0) and names it.
    FirstUse,
    /// Three ranks over TCP, connected to rank 0 alone after init. Rank 2
    /// tells rank 0 its process id and stops itself (until rank 1
    /// continues it, or `stop_ms` at the most); rank 0 passes the id on to
    /// rank 1, which, once rank 2 is stopped, makes its first call to it:
    /// a `passive_send` with `Timeout::Ms(timeout_ms)`, which must return
    /// `Timeout` naming rank 2 (the connection made on first use gets no
    /// challenge from a stopped engine; figure `timeout_ms`). Rank 1 then
    /// continues rank 2 and sends again, which must arrive whole.
    StoppedFirstUse {
        #[arg(long, default_value_t = 1000)]
        timeout_ms: u64,
        #[arg(long, default_value_t = 60_000)]
        stop_ms: u64,
    },
}

fn main() {
    gaspi_launch::init_logging();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::StoppedCreate {
            timeout_ms,
            stop_ms,
        } => stopped_create(timeout_ms, stop_ms),
        Cmd::StoppedPassive {
            timeout_ms,
            stop_ms,
        } => stopped_passive(timeout_ms, stop_ms),
        Cmd::DeadMember { victim, linger_ms } => dead_member(victim, linger_ms),
        Cmd::Unreachable { cut_file } => unreachable(&cut_file),
        Cmd::FirstUse => first_use(),
        Cmd::StoppedFirstUse {
            timeout_ms,
            stop_ms,
        } => stopped_first_use(timeout_ms, stop_ms),
    };
    if let Err(e) = result {
        let rank = std::env::var("GASPI_RANK").unwrap_or_else(|_| "?".into());
        eprintln!("rank {rank}: FAILED: {e}");
        std::process::exit(1);
    }
}

fn init() -> Res<Gaspi> {
    let g = Gaspi::init(Config::from_env()?)?;
    Ok(g)
}

fn say(g: &Gaspi, msg: impl std::fmt::Display) {
    println!("rank {}: {msg}", g.rank().0);
    let _ = std::io::stdout().flush();
}

fn figure(g: &Gaspi, name: &str, value: impl std::fmt::Display) {
    say(g, format!("figure {name}={value}"));
}

fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}

/// Word of segment 0 on which a rank about to stop tells the others its
/// process id.
const PID_WORD: NotifyId = NotifyId(9);

/// Word of segment 0 on which rank 1 tells rank 0 it is done with the
/// stopped rank.
const DONE_WORD: NotifyId = NotifyId(10);

/// Stops this process until another rank continues it ([`cont`]), or
/// after `ms` at the latest (a shell sends SIGCONT then: a guard, so that
/// a failed test ends). First tells every other rank its process id (see
/// [`wait_stopped`]).
fn stop_self(g: &Gaspi, ms: u64) -> Res {
    stop_self_after(g, ms, |pid| {
        for r in (0..g.size()).filter(|&r| r != g.rank().0) {
            g.notify(Rank(r), SegId(0), PID_WORD, pid, Queue(1))?;
        }
        g.wait(Queue(1), Timeout::Ms(60_000))?;
        Ok(())
    })
}

/// Stops this process (SIGSTOP) after `announce` has told others its pid,
/// with a shell that continues it after `ms` at the most.
fn stop_self_after(g: &Gaspi, ms: u64, announce: impl FnOnce(u32) -> Res) -> Res {
    use std::os::unix::process::CommandExt;
    let pid = std::process::id();
    let mut guard = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("sleep {}; kill -CONT {pid}", ms as f64 / 1000.0))
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting the shell that continues us: {e}"))?;
    announce(pid)?;
    say(g, format!("stopping (for {ms} ms at most)"));
    // SAFETY: raise(2) has no memory-safety requirements; SIGSTOP stops the
    // whole process until a SIGCONT.
    unsafe { libc::raise(libc::SIGSTOP) };
    say(g, "running again");
    // SAFETY: kill(2) has no memory-safety requirements; the group is the
    // guard shell's own (process_group(0)), its sleep included.
    unsafe { libc::kill(-(guard.id() as libc::pid_t), libc::SIGKILL) };
    let _ = guard.wait();
    Ok(())
}

/// Continues the process `pid` that [`stop_self`] stopped.
fn cont(pid: u32) {
    // SAFETY: kill(2) has no memory-safety requirements; `pid` is a rank
    // of this job, alive until continued.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
}

/// Waits until the rank that announced its pid on [`PID_WORD`] is stopped
/// (state `T` in `/proc/PID/stat`); returns its pid.
fn wait_stopped(g: &Gaspi) -> Res<u32> {
    let id = g.notify_waitsome(SegId(0), PID_WORD, 1, Timeout::Ms(60_000))?;
    let pid = g.notify_reset(SegId(0), id)?;
    wait_stopped_pid(pid)?;
    Ok(pid)
}

/// Waits until process `pid` is stopped (state `T` in `/proc/PID/stat`).
fn wait_stopped_pid(pid: u32) -> Res {
    let start = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The state follows the command name in parentheses.
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        if let Some(Some('T' | 't')) = state {
            return Ok(());
        }
        ensure!(
            start.elapsed() < Duration::from_secs(30),
            "process {pid} did not stop"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// After a barrier: no rank is marked dead. A rank that left the barrier
/// first may already have ended in order (`Terminated`): not a death.
fn none_dead(g: &Gaspi) -> Res {
    let states = g.state_vec();
    ensure!(
        states.iter().all(|s| *s != RankState::Corrupt),
        "the state vector is {states:?}: a stopped rank was taken for dead"
    );
    Ok(())
}

fn all_healthy(g: &Gaspi) -> Res {
    let states = g.state_vec();
    ensure!(
        states.iter().all(|s| *s == RankState::Healthy),
        "the state vector is {states:?}: a stopped rank was taken for dead"
    );
    Ok(())
}

fn stopped_create(timeout_ms: u64, stop_ms: u64) -> Res {
    let g = init()?;
    ensure!(g.size() == 3, "needs 3 ranks");
    g.segment_create(SegId(0), 64, Memory::Host, Group::ALL, Timeout::Ms(60_000))?;
    let me = g.rank().0;
    if me == 2 {
        stop_self(&g, stop_ms)?;
    } else {
        let pid = wait_stopped(&g)?;
        let t = Instant::now();
        let r = g.segment_create(
            SegId(1),
            1 << 16,
            Memory::Host,
            Group::ALL,
            Timeout::Ms(timeout_ms),
        );
        let took = t.elapsed().as_millis();
        figure(&g, "create_ms", took);
        match r {
            Err(Error::Timeout { .. }) => {}
            other => fail!("segment_create returned {other:?}, expected Timeout"),
        }
        ensure!(
            g.segment_list() == [SegId(0)],
            "the timed-out create left {:?} behind",
            g.segment_list()
        );
        all_healthy(&g)?;
        // Rank 2 runs again once both creates have returned: a create that
        // waited for it would wait until the guard's `stop_ms`.
        if me == 1 {
            g.notify(Rank(0), SegId(0), DONE_WORD, 1, Queue(0))?;
            g.wait(Queue(0), Timeout::Ms(60_000))?;
        } else {
            let id = g.notify_waitsome(SegId(0), DONE_WORD, 1, Timeout::Ms(60_000))?;
            g.notify_reset(SegId(0), id)?;
            cont(pid);
        }
    }
    // Everyone again, rank 2 running: the same id works.
    let seg = g.segment_create(
        SegId(1),
        1 << 16,
        Memory::Host,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    let next = Rank((me + 1) % 3);
    seg.write(0, &[me as u64 + 100])?;
    g.write_notify(SegId(1), 0, next, SegId(1), 8, 8, NotifyId(1), 1, Queue(0))?;
    g.wait(Queue(0), Timeout::Ms(60_000))?;
    let id = g.notify_waitsome(SegId(1), NotifyId(1), 1, Timeout::Ms(60_000))?;
    g.notify_reset(SegId(1), id)?;
    let got: Vec<u64> = seg.read_vec(8, 1)?;
    let from = (me + 2) % 3;
    ensure!(got[0] == from as u64 + 100, "got {got:?} from rank {from}");
    g.barrier(Group::ALL, Timeout::Ms(60_000))?;
    none_dead(&g)?;
    say(&g, "ok stopped-create");
    g.term()?;
    Ok(())
}

/// A passive message: its sequence number in the first 8 bytes, then a
/// pattern of it.
fn message(seq: u64, len: usize) -> Vec<u8> {
    let mut m: Vec<u8> = (0..len).map(|i| (i as u64 ^ seq) as u8).collect();
    m[..8].copy_from_slice(&seq.to_le_bytes());
    m
}

fn stopped_passive(timeout_ms: u64, stop_ms: u64) -> Res {
    const LEN: usize = 65_535;
    let g = init()?;
    ensure!(g.size() == 2, "needs 2 ranks");
    let seg = g.segment_create(
        SegId(0),
        1 << 17,
        Memory::Host,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    g.barrier(Group::ALL, Timeout::Ms(60_000))?;
    if g.rank().0 == 1 {
        stop_self(&g, stop_ms)?;
        let mut expected = 0u64;
        loop {
            let (from, size) = g.passive_receive(SegId(0), 0, Timeout::Ms(60_000))?;
            ensure!(from == Rank(0), "a message from {from}");
            let got: Vec<u8> = seg.read_vec(0, size as usize)?;
            if size == 8 {
                let sent = u64::from_le_bytes(got[..8].try_into()?);
                ensure!(
                    sent == expected,
                    "rank 0 says it sent {sent} messages, {expected} arrived"
                );
                break;
            }
            ensure!(size == LEN as u64, "a message of {size} bytes");
            ensure!(
                got == message(expected, LEN),
                "message {expected} arrived damaged or out of order"
            );
            expected += 1;
        }
        figure(&g, "received", expected);
    } else {
        let pid = wait_stopped(&g)?;
        let mut sent = 0u64;
        let mut slowest = Duration::ZERO;
        let mut timeouts = 0;
        let start = Instant::now();
        while timeouts < 2 {
            // Rank 1 stays stopped until continued below (or `stop_ms`).
            ensure!(
                start.elapsed() < Duration::from_millis(stop_ms / 2),
                "no passive_send timed out while rank 1 was stopped ({sent} sent in {:?})",
                start.elapsed()
            );
            seg.write(0, &message(sent, LEN))?;
            let t = Instant::now();
            let r = g.passive_send(SegId(0), 0, Rank(1), LEN as u64, Timeout::Ms(timeout_ms));
            slowest = slowest.max(t.elapsed());
            match r {
                Ok(()) => sent += 1,
                Err(Error::Timeout { .. }) => timeouts += 1,
                Err(e) => fail!("passive_send to a stopped rank failed with {e:?}"),
            }
        }
        figure(&g, "slowest_send_ms", slowest.as_millis());
        figure(&g, "sent_before_timeout", sent);
        all_healthy(&g)?;
        cont(pid);
        // Tell rank 1 how many went; it waits for them once it runs.
        seg.write(0, &sent.to_le_bytes())?;
        g.passive_send(SegId(0), 0, Rank(1), 8, Timeout::Ms(60_000))?;
    }
    g.barrier(Group::ALL, Timeout::Ms(60_000))?;
    none_dead(&g)?;
    say(&g, "ok stopped-passive");
    g.term()?;
    Ok(())
}

fn dead_member(victim: u32, linger_ms: u64) -> Res {
    let g = init()?;
    ensure!(g.size() == 4, "needs 4 ranks");
    let me = g.rank().0;
    let named_victim = |e: &Error| matches!(e, Error::PeerDead { rank } if rank.0 == victim);
    let mut failure = None;
    for i in 0..10_000u64 {
        if me == victim && i == 20 {
            figure(&g, "killed_at_us", now_us());
            // SAFETY: raise(2) has no memory-safety requirements.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let r = g.barrier(Group::ALL, Timeout::Block).and_then(|_| {
            let mut sum = [0u64];
            g.allreduce(&[i], &mut sum, ReduceOp::Sum, Group::ALL, Timeout::Block)?;
            ensure_sum(sum[0], i * 4)
        });
        if let Err(e) = r {
            figure(&g, "failed_at_us", now_us());
            failure = Some(e);
            break;
        }
    }
    let Some(e) = failure else {
        fail!("10,000 rounds and no failure: the victim never died")
    };
    ensure!(
        named_victim(&e),
        "the collective failed with {e:?}, not PeerDead(rank {victim})"
    );
    // Started when the death is known: both fail at once.
    let t = Instant::now();
    let mut sum = [0u64];
    let late = g.allreduce(
        &[1u64],
        &mut sum,
        ReduceOp::Sum,
        Group::ALL,
        Timeout::Ms(30_000),
    );
    figure(&g, "late_allreduce_ms", t.elapsed().as_millis());
    ensure!(
        late.as_ref().is_err_and(named_victim),
        "an allreduce started after the death returned {late:?}"
    );
    let t = Instant::now();
    let late = g.barrier(Group::ALL, Timeout::Ms(30_000));
    figure(&g, "late_barrier_ms", t.elapsed().as_millis());
    ensure!(
        late.as_ref().is_err_and(named_victim),
        "a barrier started after the death returned {late:?}"
    );
    ensure!(
        g.state_vec()[victim as usize] == RankState::Corrupt,
        "the victim is not marked corrupt: {:?}",
        g.state_vec()
    );
    if me == 0 {
        std::thread::sleep(Duration::from_millis(linger_ms));
    }
    // The survivors go on as a group of their own (ULFM's shrink), which
    // also keeps every survivor alive until all have made their checks:
    // a survivor that left earlier would be one more death to report.
    let survivors = g.group_create()?;
    for r in (0..g.size()).filter(|&r| r != victim) {
        g.group_add(survivors, Rank(r))?;
    }
    g.group_commit(survivors, Timeout::Ms(60_000))?;
    g.barrier(survivors, Timeout::Ms(60_000))?;
    let mut sum = [0u64];
    g.allreduce(
        &[1u64],
        &mut sum,
        ReduceOp::Sum,
        survivors,
        Timeout::Ms(60_000),
    )?;
    ensure!(sum[0] == 3, "the survivors' allreduce summed {}", sum[0]);
    g.barrier(survivors, Timeout::Ms(60_000))?;
    say(&g, "ok survivor");
    g.term()?;
    Ok(())
}

fn ensure_sum(got: u64, want: u64) -> gaspi::Result<()> {
    if got != want {
        return Err(Error::Protocol(format!(
            "allreduce summed {got}, expected {want}"
        )));
    }
    Ok(())
}

fn unreachable(cut_file: &std::path::Path) -> Res {
    let g = init()?;
    ensure!(g.size() == 3, "needs 3 ranks");
    let seg = g.segment_create(
        SegId(0),
        4096,
        Memory::Host,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    g.barrier(Group::ALL, Timeout::Ms(60_000))?;
    say(&g, "ready");
    let start = Instant::now();
    while !cut_file.exists() {
        ensure!(start.elapsed() < Duration::from_secs(60), "never cut off");
        std::thread::sleep(Duration::from_millis(10));
    }
    let me = g.rank().0;
    let t = Instant::now();
    let r = g.barrier(Group::ALL, Timeout::Block);
    if me == 2 {
        say(&g, format!("cut off: {r:?}"));
        std::process::exit(0);
    }
    figure(&g, "detect_ms", t.elapsed().as_millis());
    ensure!(
        matches!(r, Err(Error::PeerDead { rank: Rank(2) })),
        "the barrier with a host cut off returned {r:?}"
    );
    ensure!(
        g.state_vec() == [RankState::Healthy, RankState::Healthy, RankState::Corrupt],
        "state vector {:?}",
        g.state_vec()
    );
    // The two on the healthy host carry on.
    let other = Rank(1 - me);
    seg.write(0, &[u64::from(me) + 7])?;
    g.write_notify(
        SegId(0),
        0,
        other,
        SegId(0),
        64,
        8,
        NotifyId(3),
        1,
        Queue(0),
    )?;
    g.wait(Queue(0), Timeout::Ms(60_000))?;
    let id = g.notify_waitsome(SegId(0), NotifyId(3), 1, Timeout::Ms(60_000))?;
    g.notify_reset(SegId(0), id)?;
    let got: Vec<u64> = seg.read_vec(64, 1)?;
    ensure!(got[0] == u64::from(1 - me) + 7, "got {got:?}");
    let pair = g.group_create()?;
    g.group_add(pair, Rank(0))?;
    g.group_add(pair, Rank(1))?;
    g.group_commit(pair, Timeout::Ms(60_000))?;
    g.barrier(pair, Timeout::Ms(60_000))?;
    say(&g, "ok carried on");
    std::process::exit(0);
}

fn first_use() -> Res {
    let g = init()?;
    let (me, n) = (g.rank().0, g.size());
    ensure!(n >= 4, "needs at least 4 ranks");
    let star: Vec<Rank> = if me == 0 {
        (1..n).map(Rank).collect()
    } else {
        vec![Rank(0)]
    };
    // Segments of their own, without registering with the whole group.
    let seg = g.segment_alloc(SegId(0), 4096, Memory::Host)?;
    ensure!(
        g.connections() == star,
        "after init connected to {:?}, expected {star:?}",
        g.connections()
    );
    star_sync(&g)?;
    let (next, prev) = (Rank((me + 1) % n), Rank((me + n - 1) % n));
    for r in [next, prev] {
        g.segment_register(SegId(0), r, Timeout::Ms(60_000))?;
    }
    g.barrier(Group::ALL, Timeout::Ms(60_000))?;
    seg.write(0, &[u64::from(me)])?;
    g.write_notify(SegId(0), 0, next, SegId(0), 8, 8, NotifyId(1), 1, Queue(0))?;
    g.wait(Queue(0), Timeout::Ms(60_000))?;
    let id = g.notify_waitsome(SegId(0), NotifyId(1), 1, Timeout::Ms(60_000))?;
    g.notify_reset(SegId(0), id)?;
    ensure!(
        seg.read_vec::<u64>(8, 1)?[0] == u64::from(prev.0),
        "wrong data from {prev}"
    );
    // Rank 0, the ring's neighbours, and the barrier's partners (at
    // distances 1, 2, 4, ... either way): nobody else was sent to.
    let mut allowed = if me == 0 {
        (1..n).map(Rank).collect()
    } else {
        vec![Rank(0), next, prev]
    };
    let mut d = 1;
    while d < n {
        allowed.push(Rank((me + d) % n));
        allowed.push(Rank((me + n - d % n) % n));
        d *= 2;
    }
    let conns = g.connections();
    ensure!(
        conns.iter().all(|r| allowed.contains(r)),
        "connected to {conns:?}; only {allowed:?} were used"
    );
    say(&g, format!("connections {}", conns.len()));
    g.barrier(Group::ALL, Timeout::Ms(60_000))?;
    let victim = Rank(n - 1);
    // The victim dies once every other rank has left the barrier (each
    // tells rank 0, rank 0 tells the victim: no new connection is made).
    if me != 0 && g.rank() != victim {
        g.passive_send(SegId(0), 0, Rank(0), 1, Timeout::Ms(60_000))?;
    }
    if me == 0 {
        for _ in 0..n - 2 {
            g.passive_receive(SegId(0), 64, Timeout::Ms(60_000))?;
        }
        g.passive_send(SegId(0), 0, victim, 1, Timeout::Ms(60_000))?;
    }
    if g.rank() == victim {
        g.passive_receive(SegId(0), 64, Timeout::Ms(60_000))?;
        // SAFETY: raise(2) has no memory-safety requirements.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    let t = Instant::now();
    while g.state_vec()[victim.0 as usize] != RankState::Corrupt {
        ensure!(
            t.elapsed() < Duration::from_secs(20),
            "never learnt of the death of {victim} (connected to {:?})",
            g.connections()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let r = g.barrier(Group::ALL, Timeout::Ms(5000));
    ensure!(
        matches!(r, Err(Error::PeerDead { rank }) if rank == victim),
        "a barrier after the death returned {r:?}"
    );
    say(
        &g,
        format!(
            "ok first-use (learnt of the death {} connected to it)",
            if g.connections().contains(&victim) {
                "while"
            } else {
                "without being"
            }
        ),
    );
    std::process::exit(0);
}

/// Every rank waits until all have got here, over the connections to rank
/// 0 alone (passive messages of one byte from segment 0).
fn star_sync(g: &Gaspi) -> Res {
    let n = g.size();
    if g.rank().0 == 0 {
        for _ in 1..n {
            g.passive_receive(SegId(0), 128, Timeout::Ms(60_000))?;
        }
        for r in 1..n {
            g.passive_send(SegId(0), 0, Rank(r), 1, Timeout::Ms(60_000))?;
        }
    } else {
        g.passive_send(SegId(0), 0, Rank(0), 1, Timeout::Ms(60_000))?;
        g.passive_receive(SegId(0), 128, Timeout::Ms(60_000))?;
    }
    Ok(())
}

/// [`Cmd::StoppedFirstUse`].
fn stopped_first_use(timeout_ms: u64, stop_ms: u64) -> Res {
    let g = init()?;
    let me = g.rank().0;
    ensure!(g.size() == 3, "needs 3 ranks");
    let seg = g.segment_alloc(SegId(0), 4096, Memory::Host)?;
    let star: Vec<Rank> = if me == 0 {
        vec![Rank(1), Rank(2)]
    } else {
        vec![Rank(0)]
    };
    ensure!(
        g.connections() == star,
        "after init connected to {:?}, expected {star:?} (run over TCP)",
        g.connections()
    );
    let payload: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(7) ^ 0x5a).collect();
    match me {
        0 => {
            // Rank 2's pid, on to rank 1; then both ranks' ends.
            let (from, size) = g.passive_receive(SegId(0), 128, Timeout::Ms(60_000))?;
            ensure!(from == Rank(2) && size == 4, "{size} bytes from {from}");
            seg.write(0, &seg.read_vec::<u8>(128, 4)?)?;
            g.passive_send(SegId(0), 0, Rank(1), 4, Timeout::Ms(60_000))?;
            for _ in 0..2 {
                g.passive_receive(SegId(0), 128, Timeout::Ms(120_000))?;
            }
        }
        2 => {
            stop_self_after(&g, stop_ms, |pid| {
                seg.write(0, &pid.to_le_bytes())?;
                g.passive_send(SegId(0), 0, Rank(0), 4, Timeout::Ms(60_000))?;
                Ok(())
            })?;
            let (from, size) = g.passive_receive(SegId(0), 128, Timeout::Ms(60_000))?;
            ensure!(from == Rank(1), "a message from {from}");
            ensure!(
                seg.read_vec::<u8>(128, size as usize)? == payload,
                "rank 1's message arrived damaged ({size} bytes)"
            );
            g.passive_send(SegId(0), 0, Rank(0), 1, Timeout::Ms(60_000))?;
        }
        _ => {
            let (from, size) = g.passive_receive(SegId(0), 128, Timeout::Ms(60_000))?;
            ensure!(from == Rank(0) && size == 4, "{size} bytes from {from}");
            let pid = u32::from_le_bytes(seg.read_vec::<u8>(128, 4)?[..4].try_into()?);
            wait_stopped_pid(pid)?;
            seg.write(0, &payload)?;
            let t = Instant::now();
            let r = g.passive_send(
                SegId(0),
                0,
                Rank(2),
                payload.len() as u64,
                Timeout::Ms(timeout_ms),
            );
            figure(&g, "timeout_ms", t.elapsed().as_millis());
            match r {
                Err(
                    e @ Error::Timeout {
                        peer: Some(Rank(2)),
                        ..
                    },
                ) => {
                    ensure!(
                        e.to_string().contains("rank 2"),
                        "the message does not name rank 2: {e}"
                    );
                    say(&g, format!("timed out: {e}"));
                }
                other => fail!("the first call to a stopped rank 2 returned {other:?}"),
            }
            ensure!(
                !g.connections().contains(&Rank(2)),
                "connected to rank 2 though it never answered"
            );
            cont(pid);
            g.passive_send(
                SegId(0),
                0,
                Rank(2),
                payload.len() as u64,
                Timeout::Ms(60_000),
            )?;
            g.passive_send(SegId(0), 0, Rank(0), 1, Timeout::Ms(60_000))?;
        }
    }
    say(&g, "ok stopped-first-use");
    Ok(())
}
