//! `gaspi-test-rank`: the program every rank of a test job runs.
//!
//! One subcommand per scenario. Each checks what it is about with the public
//! API of `gaspi` only, prints `rank R: ok ...` lines, and exits 0 on
//! success; on failure it prints `rank R: FAILED: <what, where>` to stderr
//! and exits 1. Scenarios that let a rank die or exit with a chosen code say
//! so in their docs.

use clap::{Parser, Subcommand, ValueEnum};
use gaspi::{
    Config, Error, Gaspi, Group, Memory, NotifyId, Queue, Rank, RankState, SegId, Side, Timeout,
};
use gaspi_launch::Launcher;
use rand::{Rng, SeedableRng};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use gaspi_tests::{ensure, fail, RankResult as Res};

/// This process's rank once known (for messages), -1 before.
static RANK: AtomicI64 = AtomicI64::new(-1);

/// Checks that `$call` fails with an error matching `$pat` (and `$guard`).
macro_rules! expect_err {
    ($call:expr, $pat:pat $(if $guard:expr)?) => {
        match $call {
            Err($pat) $(if $guard)? => {}
            other => fail!(
                "`{}` returned {:?}, expected Err({})",
                stringify!($call),
                other,
                stringify!($pat $(if $guard)?)
            ),
        }
    };
}

const SEG: SegId = SegId(0);
const LONG: Timeout = Timeout::Ms(60_000);

#[derive(Parser)]
#[command(
    name = "gaspi-test-rank",
    about = "A rank of a GASPI integration-test job"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum How {
    /// The victim raises SIGKILL on itself.
    SelfKill,
    /// Another rank stops the victim with `proc_kill`.
    ProcKill,
}

#[derive(Subcommand)]
enum Cmd {
    /// Every rank writes a random block with a checksum to every other rank
    /// with write_notify; every target verifies every block, then every
    /// writer reads its blocks back.
    AllToAll {
        #[arg(long, default_value_t = 3)]
        rounds: u32,
        #[arg(long, default_value_t = 65536)]
        max_block: u64,
    },
    /// Pairs of ranks (0-1, 2-3, ...) bounce stamped messages of varying
    /// sizes, checking every byte both ways.
    PingPong {
        #[arg(long, default_value_t = 200)]
        rounds: u32,
        #[arg(long, default_value_t = 65536)]
        max_size: u64,
    },
    /// Two ranks exchange large random blocks at random offsets with
    /// write_notify (ping-pong), then rank 0 streams windows of large
    /// writes into rank 1 while rank 1 waits in a barrier, then both
    /// recreate their segment and exchange again. Every block is checked
    /// against a checksum its writer computed. Each rank then reports the
    /// bytes it copied for the other (target-assisted copies; run with
    /// `GASPI_COPY_ASSIST_MIN` set). How much a waiter helps depends on
    /// whether it got a core in time, so with assisted copies on the
    /// amount is only reported (`bench/` measures it); with
    /// `--assist-off` (run with `GASPI_COPY_ASSIST_MIN=0`) it must be zero.
    AssistedCopy {
        #[arg(long, default_value_t = 40)]
        rounds: u32,
        #[arg(long)]
        assist_off: bool,
    },
    /// Rank 0 streams 4 MiB write_notify into rank 1, which checks the
    /// first block (printing `victim: the first block arrived intact`) and
    /// then waits for the next ones (and so helps copy them) until a
    /// thread of its own kills it with SIGKILL at a random moment. Rank
    /// 0's writes must end with an error naming rank 1 well within 20 s,
    /// not hang on a chunk the dead rank held. Run under `gaspi-run --keep-going` with
    /// `GASPI_COPY_ASSIST_MIN` set.
    AssistedCopyVictim,
    /// Every rank but 0 writes large and small payloads to rank 0, each
    /// carrying its sequence number throughout, announced by write_notify or
    /// by a notify after the writes on the same queue; rank 0 verifies the
    /// whole payload whenever it sees a notification.
    Ordering {
        #[arg(long, default_value_t = 40)]
        iters: u32,
        #[arg(long, default_value_t = 1 << 20)]
        large: u64,
    },
    /// Notifications are seen in the order their writer sent them, however
    /// each travels (libfabric's compact CQ data carries ids below 65536
    /// and values below 256, the rest are written apart; decision 0052).
    /// Each round every rank sends the next rank `batch` write_notifys and
    /// notifies, ids spread past 65536 where GASPI_NOTIFICATION_NUM allows,
    /// values in and past 255, the last one in or out of the compact form
    /// by turns. The target waits for the last one only, then finds every
    /// earlier word of the round set and its data in place; then the same
    /// with a barrier as the last one.
    NotifyOrder {
        #[arg(long, default_value_t = 40)]
        rounds: u32,
        #[arg(long, default_value_t = 24)]
        batch: u32,
    },
    /// Every bad input is refused with its typed error, and nothing changes
    /// anywhere. Expects GASPI_QUEUE_NUM=2, GASPI_QUEUE_SIZE_MAX=8,
    /// GASPI_SEGMENT_MAX=16, GASPI_NOTIFICATION_NUM=64,
    /// GASPI_TRANSFER_SIZE_MAX=65536.
    BadInputs,
    /// Each iteration: every rank creates segment 3, deletes it, passes a
    /// barrier, and then writes and notifies into the next rank's deleted
    /// segment 3, which must be refused with UnknownSegment and leave the
    /// (still referenced) memory untouched.
    DeletedSegment {
        #[arg(long, default_value_t = 30)]
        iters: u32,
    },
    /// Rank 1 writes and notifies rank 0, which terminates in order once it
    /// has the notification; rank 1 then waits on its queue, which must
    /// succeed: the request completed, and the peer ended in order.
    WaitAfterPeerTerm,
    /// Four ranks; rank 0 enters a barrier with Timeout::Test (and gets
    /// Timeout: rank 3 enters only when rank 0 tells it, 300 ms after),
    /// then stays away for 1 s before resuming it. Ranks 3 and 1 can then complete the barrier and
    /// terminate while rank 2 still waits for rank 0's signal: every rank
    /// must still complete the barrier.
    BarrierOvertaken,
    /// `rounds` barriers, then `term` right away, as a program ends.
    BarrierThenTerm {
        #[arg(long, default_value_t = 1)]
        rounds: u32,
        /// Rank `late_rank` sleeps this long before the last barrier.
        #[arg(long, default_value_t = 0)]
        late_ms: u64,
        #[arg(long, default_value_t = 0)]
        late_rank: u32,
    },
    /// Run without a launcher: invalid configurations are refused at init;
    /// with --expect-env-error, Config::from_env must fail.
    BadConfig {
        #[arg(long)]
        expect_env_error: bool,
    },
    /// Timeout::Test and Timeout::Ms on notify_waitsome and barrier; the
    /// barrier resumes after a timeout.
    Timeouts,
    /// A rank dies mid-job (SIGKILL, by itself or by `proc_kill`), once
    /// every survivor has a write to it pending on queue 1 and has left the
    /// last barrier. With --keep-going (run under `gaspi-run --keep-going`)
    /// the survivors check that every call that needs it fails naming it
    /// and that they still reach each other; otherwise they sleep for 120 s
    /// and exit 3, expecting the launcher to stop them first.
    DeadPeer {
        #[arg(long)]
        victim: u32,
        #[arg(long, value_enum, default_value_t = How::SelfKill)]
        how: How,
        #[arg(long)]
        keep_going: bool,
    },
    /// Barriers and a write_notify ring; checks rank, size and launcher.
    Ring {
        #[arg(long, default_value_t = 10)]
        rounds: u32,
        #[arg(long)]
        expect_size: Option<u32>,
        #[arg(long)]
        expect_rank: Option<u32>,
        #[arg(long)]
        expect_local_rank: Option<u32>,
        /// gaspi-run, slurm, open-mpi or pmi
        #[arg(long)]
        expect_launcher: Option<String>,
    },
    /// Ranks wait in a barrier and in notify_waitsome while rank 0 sleeps;
    /// each measures the CPU time it used while waiting.
    IdleWait {
        #[arg(long, default_value_t = 1500)]
        sleep_ms: u64,
        #[arg(long, default_value_t = 0.1)]
        max_cpu_fraction: f64,
    },
    /// Prints "hello from rank R of N" (stdout) and "note from rank R" (stderr).
    Hello,
    /// Every rank adds 1 to a counter (word 0) on every rank `--count`
    /// times with `atomic_fetch_add(.., Timeout::Test)` and as many times
    /// to a second counter (word 1) with a compare-and-swap loop of
    /// `atomic_compare_swap(.., Timeout::Test)`, repeating each call while
    /// it returns `Timeout` (the GASPI idiom; decision 0029). After a
    /// barrier every rank checks that both its counters are `count * N`
    /// and prints "ok atomic retry: T timeouts". With `--bound` the segment
    /// is user memory (`segment_use`), so same-host atomics go to the owner
    /// too; with `--expect-timeouts` some call must have timed out (the
    /// retry path ran).
    AtomicRetry {
        #[arg(long, default_value_t = 50)]
        count: u64,
        #[arg(long)]
        bound: bool,
        #[arg(long)]
        expect_timeouts: bool,
    },
    /// Two ranks. Rank 0 prints "pid P" and waits (up to 60 s) until
    /// rank 1 is gone, then terms. Rank 1 prints "pid P", waits for
    /// `--go-file` to exist (the test stops rank 0 meanwhile), registers a
    /// new segment with rank 0 with a 300 ms timeout, which must time out,
    /// and leaves. Rank 0, continued after that, maps the segment of a
    /// rank that has ended (the test reads its log; decision 0028).
    RegisterAfterOwnerEnds {
        #[arg(long)]
        go_file: std::path::PathBuf,
    },
    /// Init, then term and exit without communicating (the start-up race
    /// of issue 23, decision 0028). The ranks finish in permutation number
    /// `--order` (modulo N!, for N up to 20; a shuffle seeded with it
    /// above) of their ranks: the rank in place `p` of that order sleeps
    /// `p * --step-us` microseconds between init and term (0: none at all).
    /// Prints "ok init-term" after term.
    InitTerm {
        #[arg(long, default_value_t = 0)]
        order: u64,
        #[arg(long, default_value_t = 0)]
        step_us: u64,
    },
    /// Rank `fail_rank` exits with `code` once all have met; `late_rank`
    /// exits with `late_code` `late_ms` later; the others exit 0.
    ExitCode {
        #[arg(long)]
        fail_rank: u32,
        #[arg(long)]
        code: i32,
        #[arg(long)]
        late_rank: Option<u32>,
        #[arg(long, default_value_t = 0)]
        late_code: i32,
        #[arg(long, default_value_t = 300)]
        late_ms: u64,
    },
    /// Calls `Config::standalone_ranks(ranks)`: started without a launcher
    /// it launches itself; each rank runs a ring. `fail_rank` then exits
    /// `code` and the others sleep (exit 3 after 120 s).
    Standalone {
        #[arg(long)]
        ranks: u32,
        #[arg(long)]
        fail_rank: Option<u32>,
        #[arg(long, default_value_t = 0)]
        code: i32,
    },
    /// Init, barrier, print "ready R", then sleep; exits 3 after 120 s.
    /// Started without a launcher, it launches `ranks` copies of itself.
    SleepForever {
        #[arg(long, default_value_t = 1)]
        ranks: u32,
    },
    /// After a first barrier `fail_rank` exits with `code`; the others
    /// enter a second barrier and exit with `others_code` when it fails.
    BarrierFail {
        #[arg(long)]
        fail_rank: u32,
        #[arg(long)]
        code: i32,
        #[arg(long)]
        others_code: i32,
    },
    /// Rank 0 streams `blocks` 4 MiB write_notify into rank 1 (4 slots,
    /// each acknowledged after rank 1 checked it), and overwrites its
    /// source right after each write's `wait` (as a program reusing its
    /// buffer does). Rank 1 waits for them, so it may help copy. Run with
    /// `GASPI_COPY_ASSIST_MIN` and `GASPI_TEST_HELPER_STALL` set: the first
    /// chunk rank 1 helps with stalls between its check and its store
    /// (`sigstop` stops the process, `until:PATH` its helping thread) until
    /// rank 0 releases it (SIGCONT, or creating PATH) before it waits for
    /// rank 1's first acknowledgement, and at the end. Rank 0's calls must
    /// therefore complete without rank 1: a write_notify + wait of
    /// `max_call_ms` or more is a writer that waited for its stalled helper
    /// (it would wait for ever: the test's hang guard). Every block must
    /// arrive intact, announced only once its data is final.
    AssistedCopyStalled {
        #[arg(long, default_value_t = 24)]
        blocks: u32,
        #[arg(long, default_value_t = 30_000)]
        max_call_ms: u64,
    },
}

fn main() {
    gaspi_launch::init_logging();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::AllToAll { rounds, max_block } => all_to_all(rounds, max_block),
        Cmd::PingPong { rounds, max_size } => ping_pong(rounds, max_size),
        Cmd::AssistedCopy { rounds, assist_off } => assisted_copy(rounds, assist_off),
        Cmd::AssistedCopyVictim => assisted_copy_victim(),
        Cmd::Ordering { iters, large } => ordering(iters, large),
        Cmd::NotifyOrder { rounds, batch } => notify_order(rounds, batch),
        Cmd::BadInputs => bad_inputs(),
        Cmd::DeletedSegment { iters } => deleted_segment(iters),
        Cmd::WaitAfterPeerTerm => wait_after_peer_term(),
        Cmd::BarrierOvertaken => barrier_overtaken(),
        Cmd::BarrierThenTerm {
            rounds,
            late_ms,
            late_rank,
        } => barrier_then_term(rounds, late_ms, late_rank),
        Cmd::BadConfig { expect_env_error } => bad_config(expect_env_error),
        Cmd::Timeouts => timeouts(),
        Cmd::DeadPeer {
            victim,
            how,
            keep_going,
        } => dead_peer(victim, how, keep_going),
        Cmd::Ring {
            rounds,
            expect_size,
            expect_rank,
            expect_local_rank,
            expect_launcher,
        } => init(Config::from_env()).and_then(|g| {
            check_identity(
                &g,
                expect_size,
                expect_rank,
                expect_local_rank,
                expect_launcher.as_deref(),
            )?;
            ring(&g, rounds)?;
            finish(g)
        }),
        Cmd::IdleWait {
            sleep_ms,
            max_cpu_fraction,
        } => idle_wait(sleep_ms, max_cpu_fraction),
        Cmd::Hello => hello(),
        Cmd::InitTerm { order, step_us } => init_term(order, step_us),
        Cmd::RegisterAfterOwnerEnds { go_file } => register_after_owner_ends(&go_file),
        Cmd::AtomicRetry {
            count,
            bound,
            expect_timeouts,
        } => atomic_retry(count, bound, expect_timeouts),
        Cmd::ExitCode {
            fail_rank,
            code,
            late_rank,
            late_code,
            late_ms,
        } => exit_code(fail_rank, code, late_rank, late_code, late_ms),
        Cmd::Standalone {
            ranks,
            fail_rank,
            code,
        } => standalone(ranks, fail_rank, code),
        Cmd::SleepForever { ranks } => sleep_forever(ranks),
        Cmd::BarrierFail {
            fail_rank,
            code,
            others_code,
        } => barrier_fail(fail_rank, code, others_code),
        Cmd::AssistedCopyStalled {
            blocks,
            max_call_ms,
        } => assisted_copy_stalled(blocks, max_call_ms),
    };
    if let Err(e) = result {
        let rank = RANK.load(Ordering::Relaxed);
        eprintln!("rank {rank}: FAILED: {e}");
        std::process::exit(1);
    }
}

// ----- helpers -----

/// Starts the rank; an init failure is reported with its Debug form (the
/// tests look for the variant's name).
fn init(config: gaspi::Result<Config>) -> Res<Gaspi> {
    let config = config.map_err(|e| format!("Config::from_env failed: {e:?} ({e})"))?;
    let g = Gaspi::init(config).map_err(|e| format!("Gaspi::init failed: {e:?} ({e})"))?;
    RANK.store(g.rank().0 as i64, Ordering::Relaxed);
    Ok(g)
}

fn say(g: &Gaspi, msg: impl std::fmt::Display) {
    println!("rank {}: {msg}", g.rank().0);
    let _ = std::io::stdout().flush();
}

/// Ends this rank's part: a last synchronisation, then `term`.
///
/// Not a plain `barrier` + `term`: that fails at random (runtime bug, see
/// the `barrier-then-term` scenario): a rank that has left the barrier and
/// terminated makes the same barrier fail with `PeerTerminated` on ranks
/// still in its later rounds. Here every rank tells rank 0 it is done, and
/// rank 0 releases them all once everyone is, so no rank terminates while
/// another still waits in a barrier.
fn finish(g: Gaspi) -> Res {
    const FIN: SegId = SegId(15);
    let n = g.size();
    let me = g.rank().0;
    let _fin = g.segment_create(FIN, 8, Memory::Host, Group::ALL, LONG)?;
    if me == 0 {
        for _ in 1..n {
            let id = g.notify_waitsome(FIN, NotifyId(1), n - 1, LONG)?;
            g.notify_reset(FIN, id)?;
        }
        for r in 1..n {
            g.notify(Rank(r), FIN, NotifyId(0), 1, Queue(0))?;
        }
    } else {
        g.notify(Rank(0), FIN, NotifyId(me), 1, Queue(0))?;
        let id = g.notify_waitsome(FIN, NotifyId(0), 1, LONG)?;
        g.notify_reset(FIN, id)?;
    }
    // No `wait` on queue 0: its targets may have terminated by now, and
    // `wait` reports them even though the notifications completed.
    g.term()?;
    Ok(())
}

/// FNV-1a over bytes.
fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A deterministic mix of two numbers (both sides of a transfer compute it).
fn mix(a: u64, b: u64) -> u64 {
    let mut x = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_add(0x632b_e59b_d9b4_e019);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^ (x >> 29)
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct we pass; zeroed is a valid rusage.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn check_identity(
    g: &Gaspi,
    size: Option<u32>,
    rank: Option<u32>,
    local_rank: Option<u32>,
    launcher: Option<&str>,
) -> Res {
    let launch = &g.config().launch;
    if let Some(s) = size {
        ensure!(g.size() == s, "size {} but expected {s}", g.size());
    }
    if let Some(r) = rank {
        ensure!(g.rank().0 == r, "rank {} but expected {r}", g.rank().0);
    }
    if let Some(l) = local_rank {
        ensure!(
            launch.local_rank == l,
            "local rank {} but expected {l}",
            launch.local_rank
        );
    }
    if let Some(name) = launcher {
        let want = match name {
            "gaspi-run" => Launcher::GaspiRun,
            "slurm" => Launcher::Slurm,
            "open-mpi" => Launcher::OpenMpi,
            "pmi" => Launcher::Pmi,
            "pmix" => Launcher::Pmix,
            "standalone" => Launcher::Standalone,
            other => fail!("unknown launcher name {other:?}"),
        };
        ensure!(
            launch.launcher == want,
            "launched by {:?}, expected {want:?}",
            launch.launcher
        );
    }
    Ok(())
}

/// `rounds` rounds of: barrier, write_notify to the next rank of a stamped
/// 256-byte message, wait for the previous rank's, check it.
fn ring(g: &Gaspi, rounds: u32) -> Res {
    let n = g.size();
    let me = g.rank().0;
    let next = Rank((me + 1) % n);
    let prev = (me + n - 1) % n;
    let seg = g.segment_create(SEG, 512, Memory::Host, Group::ALL, LONG)?;
    for round in 1..=rounds {
        g.barrier(Group::ALL, LONG)?;
        let msg: Vec<u32> = (0..64).map(|i| (me << 24) ^ (round << 8) ^ i).collect();
        seg.write(0, &msg)?;
        g.write_notify(SEG, 0, next, SEG, 256, 256, NotifyId(0), round, Queue(0))?;
        g.wait(Queue(0), LONG)?;
        let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
        let v = g.notify_reset(SEG, id)?;
        ensure!(v == round, "round {round}: notification value {v}");
        let got = seg.read_vec::<u32>(256, 64)?;
        let want: Vec<u32> = (0..64).map(|i| (prev << 24) ^ (round << 8) ^ i).collect();
        ensure!(
            got == want,
            "round {round}: the message from rank {prev} is wrong"
        );
    }
    g.barrier(Group::ALL, LONG)?;
    say(g, format!("ok ring of {rounds} rounds, rank {me} of {n}"));
    Ok(())
}

// ----- 1. all-to-all -----

fn all_to_all(rounds: u32, max_block: u64) -> Res {
    let g = init(Config::from_env())?;
    let n = g.size() as u64;
    let me = g.rank().0 as u64;
    let block = max_block.max(32);
    // [0, n*block): outgoing blocks by target; [n*block, 2n*block): incoming
    // by source; [2n*block, 3n*block): read back, by target.
    let seg = g.segment_create(SEG, 3 * n * block, Memory::Host, Group::ALL, LONG)?;
    let seed: u64 = rand::random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let queues = g.queue_num();
    let mut checked = 0u64;
    for round in 1..=rounds {
        let mut lens = vec![0u64; n as usize];
        for t in (0..n).filter(|&t| t != me) {
            // A block: [len u64][checksum u64][data].
            let len = rng.random_range(17..=block);
            let mut data = vec![0u8; (len - 16) as usize];
            rng.fill(&mut data[..]);
            let sum = fnv64(&data) ^ round as u64;
            let mut b = Vec::with_capacity(len as usize);
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&sum.to_le_bytes());
            b.extend_from_slice(&data);
            seg.write((t * block) as usize, &b)?;
            lens[t as usize] = len;
            g.write_notify(
                SEG,
                t * block,
                Rank(t as u32),
                SEG,
                n * block + me * block,
                len,
                NotifyId(me as u32),
                round,
                Queue((t as u32) % queues),
            )?;
        }
        for q in 0..queues {
            g.wait(Queue(q), LONG)?;
        }
        let mut seen = vec![false; n as usize];
        for _ in 1..n {
            let id = g.notify_waitsome(SEG, NotifyId(0), n as u32, LONG)?;
            let v = g.notify_reset(SEG, id)?;
            let s = id.0 as u64;
            ensure!(
                s < n && s != me && !seen[s as usize],
                "round {round}: unexpected notification {id:?}"
            );
            seen[s as usize] = true;
            ensure!(
                v == round,
                "round {round}: notification from rank {s} has value {v}"
            );
            let at = (n * block + s * block) as usize;
            let head = seg.read_vec::<u8>(at, 16)?;
            let len = u64::from_le_bytes(head[0..8].try_into()?);
            let sum = u64::from_le_bytes(head[8..16].try_into()?);
            ensure!(
                (17..=block).contains(&len),
                "round {round}: block from rank {s} announces length {len} (seed {seed})"
            );
            let data = seg.read_vec::<u8>(at + 16, (len - 16) as usize)?;
            ensure!(
                fnv64(&data) ^ round as u64 == sum,
                "round {round}: checksum mismatch in the {len}-byte block from rank {s}"
            );
            checked += 1;
        }
        // Read back what this rank wrote into every peer.
        for t in (0..n).filter(|&t| t != me) {
            g.read(
                SEG,
                2 * n * block + t * block,
                Rank(t as u32),
                SEG,
                n * block + me * block,
                lens[t as usize],
                Queue(0),
            )?;
        }
        g.wait(Queue(0), LONG)?;
        for t in (0..n).filter(|&t| t != me) {
            let len = lens[t as usize] as usize;
            let sent = seg.read_vec::<u8>((t * block) as usize, len)?;
            let back = seg.read_vec::<u8>((2 * n * block + t * block) as usize, len)?;
            ensure!(
                sent == back,
                "round {round}: reading back the block written to rank {t} gives other bytes"
            );
        }
        g.barrier(Group::ALL, LONG)?;
    }
    say(&g, format!("ok all-to-all: {checked} blocks verified"));
    finish(g)
}

// ----- 2. ping-pong -----

fn stamp(buf: &mut [u8], round: u32, salt: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u64)
            .wrapping_mul(31)
            .wrapping_add(round as u64 * 7)
            .wrapping_add(salt) as u8;
    }
}

fn ping_pong(rounds: u32, max_size: u64) -> Res {
    let g = init(Config::from_env())?;
    let me = g.rank().0;
    let partner = me ^ 1;
    let seg = g.segment_create(SEG, 2 * max_size, Memory::Host, Group::ALL, LONG)?;
    if partner < g.size() {
        let peer = Rank(partner);
        let pinger = me % 2 == 0;
        let mut buf = vec![0u8; max_size as usize];
        let mut expect = vec![0u8; max_size as usize];
        for round in 1..=rounds {
            let size = 1 + mix(round as u64, me as u64 / 2) % max_size;
            let n = size as usize;
            if pinger {
                stamp(&mut buf[..n], round, size);
                seg.write(0, &buf[..n])?;
                g.write_notify(
                    SEG,
                    0,
                    peer,
                    SEG,
                    max_size,
                    size,
                    NotifyId(0),
                    round,
                    Queue(0),
                )?;
                g.wait(Queue(0), LONG)?;
            }
            // Name the round and the side on failure: a stall says which
            // message was lost.
            let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG).map_err(|e| {
                let what = if pinger { "answer" } else { "message" };
                format!("round {round}: waiting for the {size}-byte {what} of rank {partner}: {e}")
            })?;
            let v = g.notify_reset(SEG, id)?;
            ensure!(v == round, "round {round}: notification value {v}");
            seg.read(max_size as usize, &mut buf[..n])?;
            stamp(&mut expect[..n], round, size);
            ensure!(
                buf[..n] == expect[..n],
                "round {round}: {size}-byte message from rank {partner} is corrupted"
            );
            if !pinger {
                // Send back what arrived, straight from the incoming area.
                g.write_notify(
                    SEG,
                    max_size,
                    peer,
                    SEG,
                    max_size,
                    size,
                    NotifyId(0),
                    round,
                    Queue(0),
                )?;
                g.wait(Queue(0), LONG)?;
            }
        }
        let via = match g.transport_provider(Rank(partner))? {
            Some(p) => format!("{} over {p}", g.transport(Rank(partner))?),
            None => g.transport(Rank(partner))?.to_string(),
        };
        say(
            &g,
            format!("ok ping-pong with rank {partner}: {rounds} rounds ({via})"),
        );
    } else {
        say(&g, "ok ping-pong: no partner, idle");
    }
    g.barrier(Group::ALL, LONG)?;
    finish(g)
}

// ----- 2b. target-assisted copies -----

/// The notification value that carries a block's checksum (never 0).
fn checksum_value(data: &[u8]) -> u32 {
    (fnv64(data) as u32) | 1
}

/// Large random blocks, both ways and into a rank waiting in a barrier,
/// checked by checksum; see `Cmd::AssistedCopy`.
fn assisted_copy(rounds: u32, assist_off: bool) -> Res {
    const MAX: u64 = 3 << 20;
    const SIZE: u64 = 2 * MAX + 4096;
    let g = init(Config::from_env())?;
    ensure!(g.size() == 2, "assisted-copy runs on 2 ranks");
    let me = g.rank().0;
    let peer = Rank(1 - me);
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::random());
    let mut block = vec![0u8; MAX as usize];
    let copied = |g: &Gaspi| g.statistics().bytes_copied_for_peers;
    // Blocks of every size class: below the threshold, around it, many
    // chunks and a ragged last chunk, at odd offsets on both sides.
    let exchange = |g: &Gaspi, rng: &mut rand::rngs::StdRng, block: &mut [u8], rounds| -> Res {
        let seg = g.segment_create(SEG, SIZE, Memory::Host, Group::ALL, LONG)?;
        for round in 0..rounds {
            let size = mix(round as u64, 7) % MAX + 1;
            let (src, dst) = (
                mix(round as u64, 1) % 4096,
                MAX + mix(round as u64, 2) % 4096,
            );
            let n = size as usize;
            if (round % 2 == 0) == (me == 0) {
                rng.fill(&mut block[..n]);
                seg.write(src as usize, &block[..n])?;
                let v = checksum_value(&block[..n]);
                g.write_notify(SEG, src, peer, SEG, dst, size, NotifyId(0), v, Queue(0))?;
                g.wait(Queue(0), LONG)?;
            } else {
                let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
                let v = g.notify_reset(SEG, id)?;
                seg.read(dst as usize, &mut block[..n])?;
                ensure!(
                    checksum_value(&block[..n]) == v,
                    "round {round}: the {size}-byte block from {peer:?} at offset {dst} is corrupted"
                );
            }
        }
        g.barrier(Group::ALL, LONG)?;
        g.segment_delete(SEG)?;
        Ok(())
    };
    exchange(&g, &mut rng, &mut block, rounds)?;
    let after_pingpong = copied(&g);
    // Windows of writes into rank 1 while it waits in the barrier; the
    // checksums follow in a table, announced by the last write_notify.
    let seg = g.segment_create(SEG, SIZE, Memory::Host, Group::ALL, LONG)?;
    const BLOCKS: u64 = 8;
    const BLOCK: u64 = 512 << 10;
    let table = BLOCKS * BLOCK;
    const WINDOWS: u32 = 8;
    for window in 1..=WINDOWS {
        if me == 0 {
            let mut sums = Vec::new();
            for b in 0..BLOCKS {
                let n = (BLOCK - b * 1000) as usize;
                rng.fill(&mut block[..n]);
                sums.push(fnv64(&block[..n]));
                seg.write(0, &block[..n])?;
                g.write(SEG, 0, peer, SEG, b * BLOCK, n as u64, Queue(0))?;
            }
            seg.write(table as usize, &sums)?;
            g.write_notify(
                SEG,
                table,
                peer,
                SEG,
                table,
                8 * BLOCKS,
                NotifyId(1),
                1,
                Queue(0),
            )?;
            g.wait(Queue(0), LONG)?;
        }
        g.barrier(Group::ALL, LONG)?;
        if me == 1 {
            g.notify_waitsome(SEG, NotifyId(1), 1, LONG)?;
            g.notify_reset(SEG, NotifyId(1))?;
            let sums = seg.read_vec::<u64>(table as usize, BLOCKS as usize)?;
            for (b, sum) in sums.iter().enumerate() {
                let n = (BLOCK - b as u64 * 1000) as usize;
                seg.read(b * BLOCK as usize, &mut block[..n])?;
                ensure!(
                    fnv64(&block[..n]) == *sum,
                    "window {window}: block {b} ({n} bytes) written during the barrier is corrupted"
                );
            }
        }
        // Rank 0 refills its source only once rank 1 checked the window.
        g.barrier(Group::ALL, LONG)?;
    }
    g.segment_delete(SEG)?;
    let after_barrier = copied(&g);
    // A segment created again under the same id: helpers must use the new one.
    exchange(&g, &mut rng, &mut block, rounds / 2)?;
    let total = copied(&g);
    // Whether a waiter helped, and how much, depends on whether it had a
    // core at the time: reported, not asserted (bench/ measures it).
    if assist_off {
        ensure!(
            total == 0,
            "copied {total} bytes for the peer with assisted copies off"
        );
    }
    say(
        &g,
        format!(
            "ok assisted-copy: {rounds} + {} rounds, {WINDOWS} windows, {total} bytes copied for \
             the peer ({after_pingpong} in the ping-pong, {} in the barrier windows)",
            rounds / 2,
            after_barrier - after_pingpong
        ),
    );
    finish(g)
}

/// See `Cmd::AssistedCopyVictim`.
fn assisted_copy_victim() -> Res {
    const BLOCK: u64 = 4 << 20;
    let g = init(Config::from_env())?;
    ensure!(g.size() == 2, "assisted-copy-victim runs on 2 ranks");
    let victim = Rank(1);
    let seg = g.segment_create(SEG, BLOCK, Memory::Host, Group::ALL, LONG)?;
    g.barrier(Group::ALL, LONG)?;
    if g.rank() == victim {
        // The first block decides when the victim dies: from then on, at a
        // random moment while it waits for (and helps copy) the next ones,
        // whatever the scheduler did before.
        let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
        g.notify_reset(SEG, id)?;
        ensure!(
            seg.read_vec::<u8>(0, BLOCK as usize)?
                .iter()
                .all(|&b| b == 7),
            "the first block arrived damaged"
        );
        say(&g, "victim: the first block arrived intact");
        let after = Duration::from_millis(rand::rng().random_range(0..100));
        std::thread::spawn(move || {
            std::thread::sleep(after);
            // SAFETY: raise(2) has no memory-safety requirements.
            unsafe { libc::raise(libc::SIGKILL) };
        });
        loop {
            let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
            g.notify_reset(SEG, id)?;
        }
    }
    seg.write(0, &vec![7u8; BLOCK as usize])?;
    let start = Instant::now();
    let mut sent = 0u32;
    let err = loop {
        let r = g
            .write_notify(SEG, 0, victim, SEG, 0, BLOCK, NotifyId(0), 1, Queue(0))
            .and_then(|()| g.wait(Queue(0), Timeout::Ms(20_000)));
        match r {
            Ok(()) => sent += 1,
            Err(e) => break e,
        }
        ensure!(
            start.elapsed() < Duration::from_secs(20),
            "still writing to {victim:?} after 20 s ({sent} blocks)"
        );
    };
    ensure!(
        matches!(err, Error::PeerDead { rank } if rank == victim),
        "writing to the dead {victim:?} ended with {err:?}"
    );
    say(
        &g,
        format!(
            "ok writer: {sent} blocks of 4 MiB, then {err} after {:?}",
            start.elapsed()
        ),
    );
    g.term()?;
    Ok(())
}

// ----- 3. ordering under stress -----

fn notify_order(rounds: u32, batch: u32) -> Res {
    const BLOCK: u64 = 64;
    let g = init(Config::from_env())?;
    let (n, me) = (g.size(), g.rank().0);
    ensure!(n >= 2, "notify-order needs at least 2 ranks");
    let ids = g.config().notification_num;
    ensure!(
        batch >= 2 && ids >= 2 * batch + 2,
        "bad arguments: batch {batch} with {ids} notification ids"
    );
    let next = Rank((me + 1) % n);
    let prev = (me + n - 1) % n;
    // Bytes [0, batch*BLOCK): outgoing; [batch*BLOCK, 2*batch*BLOCK): incoming.
    let half = u64::from(batch) * BLOCK;
    let seg = g.segment_create(SEG, 2 * half, Memory::Host, Group::ALL, LONG)?;
    // Notification i of a round: its id (ids spread over the whole range,
    // past 65535 where there are that many), its value (in or past the
    // compact form's 255), and whether it carries data (else a notify).
    let id_of = |i: u32| {
        let stride = (ids - 1) / batch;
        NotifyId(i * stride)
    };
    let value_of = |round: u32, i: u32| {
        let last = i == batch - 1;
        match (round + i) % 3 {
            _ if last && round.is_multiple_of(2) => 1 + round % 255,
            _ if last => 256 + round,
            0 => 1 + (round * 7 + i) % 255,
            1 => 256 + round * batch + i,
            _ => u32::MAX - i,
        }
    };
    let stamp = |from: u32, round: u32, i: u32, k: u32| (from << 24) ^ (round << 12) ^ (i << 4) ^ k;
    for round in 1..=rounds {
        let by_barrier = round.is_multiple_of(4);
        let sent = if by_barrier { batch - 1 } else { batch };
        for i in 0..sent {
            let (id, value) = (id_of(i), value_of(round, i));
            if i % 2 == 0 {
                let msg: Vec<u32> = (0..BLOCK as u32 / 4)
                    .map(|k| stamp(me, round, i, k))
                    .collect();
                let off = u64::from(i) * BLOCK;
                seg.write(off as usize, &msg)?;
                g.write_notify(SEG, off, next, SEG, half + off, BLOCK, id, value, Queue(0))?;
            } else {
                g.notify(next, SEG, id, value, Queue(0))?;
            }
        }
        if by_barrier {
            g.barrier(Group::ALL, LONG)?;
        } else {
            g.notify_waitsome(SEG, id_of(batch - 1), 1, LONG)?;
        }
        for i in 0..sent {
            let (id, want) = (id_of(i), value_of(round, i));
            let v = g.notify_reset(SEG, id)?;
            ensure!(
                v == want,
                "round {round}: notification {i} (id {}) from rank {prev} is {v} once a later \
                 one ({}) was seen, expected {want}",
                id.0,
                if by_barrier {
                    "the barrier"
                } else {
                    "the last"
                }
            );
            if i % 2 == 0 {
                let off = half + u64::from(i) * BLOCK;
                let got = seg.read_vec::<u32>(off as usize, (BLOCK / 4) as usize)?;
                let bad =
                    (0..BLOCK as u32 / 4).find(|&k| got[k as usize] != stamp(prev, round, i, k));
                ensure!(
                    bad.is_none(),
                    "round {round}: the data of notification {i} from rank {prev} is not in place"
                );
            }
        }
        g.wait(Queue(0), LONG)?;
        // Nobody writes the next round before everyone checked this one.
        g.barrier(Group::ALL, LONG)?;
    }
    say(
        &g,
        format!("ok notify-order: {rounds} rounds of {batch} notifications, {ids} ids"),
    );
    Ok(())
}

fn ordering(iters: u32, large: u64) -> Res {
    const SMALL: u64 = 256;
    let g = init(Config::from_env())?;
    let n = g.size();
    let me = g.rank().0;
    ensure!(n >= 2, "ordering needs at least 2 ranks");
    ensure!(iters < 1 << 20 && large & 3 == 0, "bad arguments");
    let region = large + SMALL;
    let seg_size = if me == 0 {
        (n as u64 - 1) * region
    } else {
        region
    };
    let seg = g.segment_create(SEG, seg_size, Memory::Host, Group::ALL, LONG)?;
    let tag = |w: u32, i: u32| (w << 20) | i;
    let large_len = |w: u32, i: u32| -> u64 {
        if i & 3 == 0 {
            large
        } else {
            4 * (1 + mix(w as u64, i as u64) % (large / 4))
        }
    };
    let small_len = |w: u32, i: u32| 4 * (1 + mix(i as u64, w as u64) % (SMALL / 4));
    if me == 0 {
        let mut next = vec![1u32; n as usize];
        let mut words = vec![0u32; (large / 4) as usize];
        let mut left = (n - 1) * iters;
        while left > 0 {
            let id = g.notify_waitsome(SEG, NotifyId(1), n - 1, LONG)?;
            let v = g.notify_reset(SEG, id)?;
            let w = id.0;
            ensure!(
                v == next[w as usize],
                "writer {w}: notification value {v}, expected {}",
                next[w as usize]
            );
            let base = (w as u64 - 1) * region;
            let want = tag(w, v);
            for (what, off, len) in [
                ("small", base + large, small_len(w, v)),
                ("large", base, large_len(w, v)),
            ] {
                // The last word first: a copy still in flight (front to
                // back) shows there first.
                let last = seg.read_vec::<u32>((off + len - 4) as usize, 1)?[0];
                ensure!(
                    last == want,
                    "writer {w} message {v}: the notification was visible before the {what} \
                     payload of {len} bytes: its last word is {last:#x}, expected {want:#x}"
                );
                let got = &mut words[..(len / 4) as usize];
                seg.read(off as usize, got)?;
                if let Some(bad) = got.iter().position(|&x| x != want) {
                    let wrong = got.iter().filter(|&&x| x != want).count();
                    fail!(
                        "writer {w} message {v}: the notification was visible before the {what} \
                         payload of {len} bytes: word {bad} is {:#x}, expected {want:#x} \
                         ({wrong} of {} words wrong)",
                        got[bad],
                        len / 4
                    );
                }
            }
            next[w as usize] += 1;
            g.notify(Rank(w), SEG, NotifyId(0), v, Queue(0))?;
            g.wait(Queue(0), LONG)?;
            left -= 1;
        }
        say(
            &g,
            format!("ok ordering: {} messages verified", (n - 1) * iters),
        );
    } else {
        let queues = g.queue_num();
        let remote = (me as u64 - 1) * region;
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::random());
        for i in 1..=iters {
            let (ll, sl) = (large_len(me, i), small_len(me, i));
            let t = tag(me, i);
            seg.write(0, &vec![t; (ll / 4) as usize])?;
            seg.write(large as usize, &vec![t; (sl / 4) as usize])?;
            let q = Queue(i % queues);
            let target = Rank(0);
            if i % 2 == 0 {
                // Small write first, then the large one with its notification.
                g.write(SEG, large, target, SEG, remote + large, sl, q)?;
                g.write_notify(SEG, 0, target, SEG, remote, ll, NotifyId(me), i, q)?;
            } else {
                // The large payload in several writes, the small one, then
                // a notify on the same queue: it must not overtake them.
                let chunks = rng.random_range(1..=8u64);
                let step = (ll / chunks).div_ceil(4) * 4;
                let mut off = 0;
                while off < ll {
                    let len = step.min(ll - off);
                    g.write(SEG, off, target, SEG, remote + off, len, q)?;
                    off += len;
                }
                g.write(SEG, large, target, SEG, remote + large, sl, q)?;
                g.notify(target, SEG, NotifyId(me), i, q)?;
            }
            g.wait(q, LONG)?;
            let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
            let v = g.notify_reset(SEG, id)?;
            ensure!(v == i, "message {i}: acknowledged as {v}");
        }
        say(&g, format!("ok ordering: {iters} messages sent"));
    }
    g.barrier(Group::ALL, LONG)?;
    finish(g)
}

// ----- 4. bad input -----

/// The initial byte at `off` of rank `r`'s segment 0.
fn pattern(r: u32, off: u64) -> u8 {
    ((off * 7 + r as u64 * 13 + 1) % 251) as u8
}

/// Every notification of `seg` is 0.
fn no_notifications(g: &Gaspi, seg: SegId, count: u32) -> Res {
    match g.notify_waitsome(seg, NotifyId(0), count, Timeout::Test) {
        Err(Error::Timeout { .. }) => Ok(()),
        Ok(id) => {
            let v = g.notify_reset(seg, id)?;
            fail!("{seg:?}: notification {} is set to {v}", id.0)
        }
        Err(e) => Err(e.into()),
    }
}

fn bad_inputs() -> Res {
    const QF: u64 = 8192; // where the queue-full part writes
    const SRC: u64 = 4096; // its sources are this far above (never written)
    const NOTIFS: u32 = 64;
    const MAXT: u64 = 65536;
    let g = init(Config::from_env())?;
    let c = g.config();
    ensure!(
        (
            c.queue_num,
            c.queue_size_max,
            c.segment_max,
            c.notification_num,
            c.transfer_size_max
        ) == (2, 8, 16, NOTIFS, MAXT),
        "the GASPI_* settings were not applied: {c:?}"
    );
    let n = g.size();
    let me = Rank(g.rank().0);
    let t = Rank((me.0 + 1) % n);
    let s = (me.0 + n - 1) % n;
    let size_of = |r: u32| 2 * MAXT + 4096 * r as u64;
    let (my_size, t_size) = (size_of(me.0), size_of(t.0));
    let seg = g.segment_create(SEG, my_size, Memory::Host, Group::ALL, LONG)?;
    let init_bytes: Vec<u8> = (0..my_size).map(|o| pattern(me.0, o)).collect();
    seg.write(0, &init_bytes)?;
    // Segment 3: created everywhere, then deleted everywhere (handle kept).
    let s3 = g.segment_create(SegId(3), 4096, Memory::Host, Group::ALL, LONG)?;
    // Segment 4: allocated but registered with nobody.
    let s4 = g.segment_alloc(SegId(4), 4096, Memory::Host)?;
    g.barrier(Group::ALL, LONG)?;
    g.segment_delete(SegId(3))?;
    g.barrier(Group::ALL, LONG)?;

    let q0 = Queue(0);
    let one = NotifyId(1);
    // Unknown segments: never created, deleted, not registered with us.
    for bad in [SegId(5), SegId(3)] {
        expect_err!(g.write(bad, 0, t, SEG, 0, 8, q0), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.read(bad, 0, t, SEG, 0, 8, q0), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.write_notify(bad, 0, t, SEG, 0, 8, one, 1, q0), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.notify_waitsome(bad, NotifyId(0), 1, Timeout::Test), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.notify_reset(bad, NotifyId(0)), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.segment_delete(bad), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.segment_register(bad, t, LONG), Error::UnknownSegment { rank, seg } if rank == me && seg == bad);
        expect_err!(g.segment_size(bad), Error::UnknownSegment { .. });
    }
    // (Deleted remote segments: see the deleted-segment scenario.)
    for bad in [SegId(5), SegId(4)] {
        expect_err!(g.write(SEG, 0, t, bad, 0, 8, q0), Error::UnknownSegment { rank, seg } if rank == t && seg == bad);
        expect_err!(g.read(SEG, 0, t, bad, 0, 8, q0), Error::UnknownSegment { rank, seg } if rank == t && seg == bad);
        expect_err!(g.write_notify(SEG, 0, t, bad, 0, 8, one, 1, q0), Error::UnknownSegment { rank, seg } if rank == t && seg == bad);
        expect_err!(g.notify(t, bad, one, 1, q0), Error::UnknownSegment { rank, seg } if rank == t && seg == bad);
    }
    // Duplicate ids.
    expect_err!(g.segment_alloc(SEG, 4096, Memory::Host), Error::SegmentExists { seg } if seg == SEG);
    expect_err!(g.segment_alloc(SegId(4), 4096, Memory::Host), Error::SegmentExists { seg } if seg == SegId(4));
    expect_err!(g.segment_create(SEG, 4096, Memory::Host, Group::ALL, LONG), Error::SegmentExists { seg } if seg == SEG);
    expect_err!(g.segment_bind_buffer(SEG, vec![0u8; 64].into_boxed_slice()), Error::SegmentExists { seg } if seg == SEG);
    // Ids at or above segment_max (16), including the runtime's own 255.
    for bad in [SegId(16), SegId(200), SegId(255)] {
        expect_err!(g.segment_alloc(bad, 4096, Memory::Host), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.segment_create(bad, 4096, Memory::Host, Group::ALL, LONG), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.write(bad, 0, t, SEG, 0, 8, q0), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.write(SEG, 0, t, bad, 0, 8, q0), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.read(SEG, 0, t, bad, 0, 8, q0), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.write_notify(SEG, 0, t, bad, 0, 8, one, 1, q0), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.notify(t, bad, one, 1, q0), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.notify_waitsome(bad, NotifyId(0), 1, Timeout::Test), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.notify_reset(bad, NotifyId(0)), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
        expect_err!(g.segment_delete(bad), Error::SegmentIdOutOfRange { seg, max: 16 } if seg == bad);
    }
    // Local bounds.
    for (off, len) in [
        (my_size - 4, 8),
        (my_size, 1),
        (u64::MAX, 1),
        (my_size - MAXT + 1, MAXT),
    ] {
        expect_err!(g.write(SEG, off, t, SEG, 0, len, q0), Error::OutOfBounds { side: Side::Local, rank, seg: SEG, offset, seg_size, .. } if rank == me && offset == off && seg_size == my_size);
        expect_err!(g.write_notify(SEG, off, t, SEG, 0, len, one, 1, q0), Error::OutOfBounds { side: Side::Local, rank, .. } if rank == me);
        expect_err!(g.read(SEG, off, t, SEG, 0, len, q0), Error::OutOfBounds { side: Side::Local, rank, .. } if rank == me);
    }
    // Remote bounds: the target's segment is 4096 bytes larger than ours
    // when it has the higher rank, so local bounds would not catch these.
    for (off, len) in [(t_size - 4, 8), (t_size, 1), (u64::MAX - 2, 4)] {
        expect_err!(g.write(SEG, 0, t, SEG, off, len, q0), Error::OutOfBounds { side: Side::Remote, rank, seg: SEG, offset, end, seg_size } if rank == t && offset == off && seg_size == t_size && end == off.saturating_add(len));
        expect_err!(g.write_notify(SEG, 0, t, SEG, off, len, one, 1, q0), Error::OutOfBounds { side: Side::Remote, rank, .. } if rank == t);
        expect_err!(g.read(SEG, 0, t, SEG, off, len, q0), Error::OutOfBounds { side: Side::Remote, rank, .. } if rank == t);
    }
    // Notification ids out of range.
    for bad in [NOTIFS, NOTIFS + 1, u32::MAX] {
        expect_err!(g.write_notify(SEG, 0, t, SEG, 0, 8, NotifyId(bad), 1, q0), Error::NotifyIdOutOfRange { rank, seg: SEG, id, count: NOTIFS, .. } if rank == t && id == NotifyId(bad));
        expect_err!(g.notify(t, SEG, NotifyId(bad), 1, q0), Error::NotifyIdOutOfRange { rank, seg: SEG, id, count: NOTIFS, .. } if rank == t && id == NotifyId(bad));
        expect_err!(g.notify_reset(SEG, NotifyId(bad)), Error::NotifyIdOutOfRange { rank, seg: SEG, id, count: NOTIFS, .. } if rank == me && id == NotifyId(bad));
        expect_err!(g.notify_waitsome(SEG, NotifyId(bad), 1, Timeout::Test), Error::NotifyIdOutOfRange { rank, .. } if rank == me);
    }
    for (begin, num) in [
        (60, 5),
        (0, NOTIFS + 1),
        (0, 0),
        (u32::MAX, 2),
        (1, u32::MAX),
    ] {
        expect_err!(g.notify_waitsome(SEG, NotifyId(begin), num, Timeout::Test), Error::NotifyIdOutOfRange { rank, seg: SEG, id, num: got, count: NOTIFS } if rank == me && id == NotifyId(begin) && got == num);
    }
    // Value 0.
    expect_err!(
        g.write_notify(SEG, 0, t, SEG, 0, 8, one, 0, q0),
        Error::NotifyValueZero
    );
    expect_err!(g.notify(t, SEG, one, 0, q0), Error::NotifyValueZero);
    // Bad ranks.
    for bad in [Rank(n), Rank(n + 7), Rank(u32::MAX)] {
        expect_err!(g.write(SEG, 0, bad, SEG, 0, 8, q0), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.write_notify(SEG, 0, bad, SEG, 0, 8, one, 1, q0), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.read(SEG, 0, bad, SEG, 0, 8, q0), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.notify(bad, SEG, one, 1, q0), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.segment_register(SEG, bad, LONG), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.proc_ping(bad, LONG), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.proc_kill(bad), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.transport(bad), Error::BadRank { rank, size } if rank == bad && size == n);
        expect_err!(g.transport_provider(bad), Error::BadRank { rank, size } if rank == bad && size == n);
    }
    expect_err!(g.proc_kill(me), Error::BadRank { rank, .. } if rank == me);
    // Bad queues (2 in use, 16 at most).
    for bad in [Queue(2), Queue(15), Queue(16), Queue(u32::MAX)] {
        expect_err!(g.write(SEG, 0, t, SEG, 0, 8, bad), Error::BadQueue { queue, count: 2 } if queue == bad);
        expect_err!(g.write_notify(SEG, 0, t, SEG, 0, 8, one, 1, bad), Error::BadQueue { queue, count: 2 } if queue == bad);
        expect_err!(g.read(SEG, 0, t, SEG, 0, 8, bad), Error::BadQueue { queue, count: 2 } if queue == bad);
        expect_err!(g.notify(t, SEG, one, 1, bad), Error::BadQueue { queue, count: 2 } if queue == bad);
        expect_err!(g.wait(bad, Timeout::Test), Error::BadQueue { queue, count: 2 } if queue == bad);
        expect_err!(g.queue_size(bad), Error::BadQueue { queue, count: 2 } if queue == bad);
    }
    // Size 0 is a valid transfer (as in GPI-2, decision 0030), but its other
    // arguments are checked as for any size.
    expect_err!(g.write(SegId(5), 0, t, SEG, 0, 0, q0), Error::UnknownSegment { seg, .. } if seg == SegId(5));
    expect_err!(g.write(SEG, 0, t, SegId(5), 0, 0, q0), Error::UnknownSegment { seg, .. } if seg == SegId(5));
    expect_err!(g.read(SegId(5), 0, t, SEG, 0, 0, q0), Error::UnknownSegment { seg, .. } if seg == SegId(5));
    expect_err!(
        g.write(SEG, my_size + 1, t, SEG, 0, 0, q0),
        Error::OutOfBounds {
            side: Side::Local,
            ..
        }
    );
    expect_err!(
        g.read(SEG, 0, t, SEG, t_size + 1, 0, q0),
        Error::OutOfBounds {
            side: Side::Remote,
            ..
        }
    );
    expect_err!(
        g.write_notify(SEG, 0, t, SEG, 0, 0, one, 0, q0),
        Error::NotifyValueZero
    );
    expect_err!(
        g.write_notify(SEG, 0, t, SEG, 0, 0, NotifyId(NOTIFS), 1, q0),
        Error::NotifyIdOutOfRange { .. }
    );
    expect_err!(
        g.write(SEG, 0, t, SEG, 0, 0, Queue(2)),
        Error::BadQueue { .. }
    );
    expect_err!(
        g.read(SEG, 0, Rank(n), SEG, 0, 0, q0),
        Error::BadRank { .. }
    );
    expect_err!(
        g.segment_alloc(SegId(6), 0, Memory::Host),
        Error::ZeroSize { .. }
    );
    ensure!(
        !g.segment_list().contains(&SegId(6)),
        "a refused segment_alloc left segment 6 behind: {:?}",
        g.segment_list()
    );
    // Above the transfer size maximum (both segments are large enough).
    expect_err!(g.write(SEG, 0, t, SEG, 0, MAXT + 1, q0), Error::TooLarge { size, max: MAXT } if size == MAXT + 1);
    expect_err!(g.write_notify(SEG, 0, t, SEG, 0, MAXT + 1, one, 1, q0), Error::TooLarge { size, max: MAXT } if size == MAXT + 1);
    expect_err!(g.read(SEG, 0, t, SEG, 0, MAXT + 1, q0), Error::TooLarge { size, max: MAXT } if size == MAXT + 1);
    // Nothing was posted by any of the refused calls.
    for q in [Queue(0), Queue(1)] {
        ensure!(
            g.queue_size(q)? == 0,
            "refused calls left {} entries on {q:?}",
            g.queue_size(q)?
        );
    }

    // Queue full: depth 8 on queue 1. Valid requests write the source's
    // bytes from SRC + QF + 16k at QF + 16k; refused ones would write at
    // QF + 1024 and set notification 30.
    let q1 = Queue(1);
    g.wait(q1, LONG)?;
    for k in 0..8 {
        g.write(SEG, SRC + QF + 16 * k, t, SEG, QF + 16 * k, 16, q1)?;
    }
    ensure!(
        g.queue_size(q1)? == 8,
        "queue size {} after 8 writes",
        g.queue_size(q1)?
    );
    expect_err!(g.write(SEG, QF + 1024, t, SEG, QF + 1024, 16, q1), Error::QueueFull { queue, depth: 8 } if queue == q1);
    expect_err!(g.write_notify(SEG, QF + 1024, t, SEG, QF + 1024, 16, NotifyId(30), 1, q1), Error::QueueFull { queue, depth: 8 } if queue == q1);
    expect_err!(g.notify(t, SEG, NotifyId(30), 1, q1), Error::QueueFull { queue, depth: 8 } if queue == q1);
    expect_err!(g.read(SEG, QF + 1024, t, SEG, QF + 1024, 16, q1), Error::QueueFull { queue, depth: 8 } if queue == q1);
    ensure!(
        g.queue_size(q1)? == 8,
        "queue size {} after refusals",
        g.queue_size(q1)?
    );
    g.wait(q1, LONG)?;
    ensure!(
        g.queue_size(q1)? == 0,
        "queue size {} after wait",
        g.queue_size(q1)?
    );
    // A write_notify is one request, its notification part of it (decision
    // 0030): 6 of them and a write make 7 of 8, a seventh fills the queue.
    for k in 0..6u64 {
        g.write_notify(
            SEG,
            SRC + QF + 512 + 16 * k,
            t,
            SEG,
            QF + 512 + 16 * k,
            16,
            NotifyId(10 + k as u32),
            100 + k as u32,
            q1,
        )?;
    }
    g.write(SEG, SRC + QF + 768, t, SEG, QF + 768, 16, q1)?;
    ensure!(
        g.queue_size(q1)? == 7,
        "queue size {} after 6 write_notify + 1 write",
        g.queue_size(q1)?
    );
    g.write_notify(
        SEG,
        SRC + QF + 784,
        t,
        SEG,
        QF + 784,
        16,
        NotifyId(16),
        106,
        q1,
    )?;
    expect_err!(g.write_notify(SEG, QF + 1024, t, SEG, QF + 1024, 16, NotifyId(30), 1, q1), Error::QueueFull { queue, depth: 8 } if queue == q1);
    expect_err!(
        g.write(SEG, QF + 1024, t, SEG, QF + 1024, 16, q1),
        Error::QueueFull { .. }
    );
    ensure!(g.queue_size(q1)? == 8, "queue size {}", g.queue_size(q1)?);
    g.wait(q1, LONG)?;
    // The other queue was never affected.
    g.write(SEG, SRC + QF + 800, t, SEG, QF + 800, 16, Queue(0))?;
    // Valid transfers of size 0 (at the very ends of the segments too)
    // change no byte; the notification of a zero-size write_notify arrives.
    g.write(SEG, my_size, t, SEG, t_size, 0, Queue(0))?;
    g.read(SEG, 0, t, SEG, t_size, 0, Queue(0))?;
    g.read_notify(SEG, 0, t, SEG, 0, 0, NotifyId(21), Queue(0))?;
    g.write_notify(SEG, 0, t, SEG, 0, 0, NotifyId(20), 7, Queue(0))?;
    ensure!(
        g.queue_size(Queue(0))? == 5,
        "queue size {} after a write and 4 zero-size requests",
        g.queue_size(Queue(0))?
    );
    g.wait(Queue(0), LONG)?;
    for (id, value) in [(NotifyId(20), 7), (NotifyId(21), 1)] {
        let got = g.notify_waitsome(SEG, id, 1, LONG)?;
        ensure!(got == id, "waited for {id:?}, got {got:?}");
        let v = g.notify_reset(SEG, id)?;
        ensure!(
            v == value,
            "zero-size notification {id:?} is {v}, expected {value}"
        );
    }

    // Everything settles; every rank checks its own memory.
    g.barrier(Group::ALL, LONG)?;
    let mut want = init_bytes.clone();
    let from_s = |o: u64| pattern(s, SRC + o);
    let mut valid: Vec<(u64, u64)> = (0..8).map(|k| (QF + 16 * k, 16)).collect();
    valid.extend((0..6).map(|k| (QF + 512 + 16 * k, 16)));
    valid.extend([(QF + 768, 16), (QF + 784, 16), (QF + 800, 16)]);
    for (off, len) in valid {
        for o in off..off + len {
            want[o as usize] = from_s(o);
        }
    }
    let got = seg.read_vec::<u8>(0, my_size as usize)?;
    if got != want {
        let bad = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
        let count = got.iter().zip(&want).filter(|(a, b)| a != b).count();
        fail!(
            "segment 0 changed where no valid write went: byte {bad} is {}, expected {} ({count} bytes differ)",
            got[bad],
            want[bad]
        );
    }
    for k in 0..7u32 {
        let v = g.notify_reset(SEG, NotifyId(10 + k))?;
        ensure!(
            v == 100 + k,
            "notification {} is {v}, expected {}",
            10 + k,
            100 + k
        );
    }
    no_notifications(&g, SEG, NOTIFS)?;
    // The deleted and the unregistered segments were not touched either.
    for (what, h) in [("deleted segment 3", &s3), ("unregistered segment 4", &s4)] {
        let bytes = h.read_vec::<u8>(0, 4096)?;
        ensure!(bytes.iter().all(|&b| b == 0), "the {what} was written into");
    }
    no_notifications(&g, SegId(4), NOTIFS)?;
    g.barrier(Group::ALL, LONG)?;
    say(&g, "ok bad inputs refused, nothing changed");
    finish(g)
}

fn deleted_segment(iters: u32) -> Res {
    let g = init(Config::from_env())?;
    let n = g.size();
    let t = Rank((g.rank().0 + 1) % n);
    let seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, LONG)?;
    seg.write(0, &[0xabu8; 64])?;
    let d = SegId(3);
    let mut accepted = Vec::new();
    let mut landed = 0;
    for i in 1..=iters {
        let h = g.segment_create(d, 4096, Memory::Host, Group::ALL, LONG)?;
        g.segment_delete(d)?;
        g.barrier(Group::ALL, LONG)?;
        let w = g.write(SEG, 0, t, d, 0, 64, Queue(0));
        let nt = g.notify(t, d, NotifyId(0), 1, Queue(0));
        for (what, r) in [("write", w), ("notify", nt)] {
            match r {
                Err(Error::UnknownSegment { rank, seg }) if rank == t && seg == d => {}
                Err(e) => fail!("iteration {i}: {what} into the deleted {d:?} of {t:?} returned {e:?}, expected UnknownSegment"),
                Ok(()) => accepted.push(format!("{what} in iteration {i}")),
            }
        }
        g.wait(Queue(0), LONG)?;
        g.barrier(Group::ALL, LONG)?;
        if h.read_vec::<u8>(0, 64)?.iter().any(|&b| b != 0) {
            landed += 1;
        }
    }
    g.barrier(Group::ALL, LONG)?;
    ensure!(
        accepted.is_empty() && landed == 0,
        "after segment_delete and a barrier, {} calls into the deleted {d:?} of {t:?} were accepted \
         ({}), and in {landed} of {iters} iterations data landed in this rank's deleted segment",
        accepted.len(),
        accepted.join(", ")
    );
    say(
        &g,
        format!("ok deleted segments refused in {iters} iterations"),
    );
    finish(g)
}

fn wait_after_peer_term() -> Res {
    let g = init(Config::from_env())?;
    ensure!(g.size() == 2, "needs 2 ranks");
    let seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, LONG)?;
    if g.rank().0 == 0 {
        let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
        g.notify_reset(SEG, id)?;
        ensure!(seg.read_vec::<u8>(32, 8)? == vec![5u8; 8], "data missing");
        say(&g, "ok terminating");
        g.term()?;
        return Ok(());
    }
    seg.write(0, &[5u8; 8])?;
    g.write_notify(SEG, 0, Rank(0), SEG, 32, 8, NotifyId(0), 1, Queue(0))?;
    let until = Instant::now() + Duration::from_secs(20);
    while g.state_vec()[0] != RankState::Terminated {
        ensure!(
            Instant::now() < until,
            "rank 0 never showed as terminated: {:?}",
            g.state_vec()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    match g.wait(Queue(0), LONG) {
        Ok(()) => {}
        Err(e) => fail!(
            "wait on a queue whose write_notify to rank 0 had completed failed after rank 0 \
             terminated in order: {e:?}"
        ),
    }
    say(&g, "ok wait after the peer's term");
    g.term()?;
    Ok(())
}

fn barrier_overtaken() -> Res {
    let g = init(Config::from_env())?;
    ensure!(g.size() == 4, "needs 4 ranks");
    let me = g.rank().0;
    let _seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, LONG)?;
    g.barrier(Group::ALL, LONG)?;
    // The sleeps make the overtaking likely; the verdict (every rank
    // completes the barrier) must hold in any order.
    let done = match me {
        0 => {
            match g.barrier(Group::ALL, Timeout::Test) {
                Err(Error::Timeout { .. }) => {}
                other => {
                    fail!("barrier(Test) before rank 3 entered returned {other:?}")
                }
            }
            // Rank 3 enters once this rank's Test has returned.
            g.notify(Rank(3), SEG, NotifyId(0), 1, Queue(0))?;
            g.wait(Queue(0), LONG)?;
            std::thread::sleep(Duration::from_millis(1000));
            g.barrier(Group::ALL, LONG)
        }
        3 => {
            let id = g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
            g.notify_reset(SEG, id)?;
            std::thread::sleep(Duration::from_millis(300));
            g.barrier(Group::ALL, LONG)
        }
        _ => g.barrier(Group::ALL, LONG),
    };
    if let Err(e) = done {
        fail!(
            "the barrier every rank entered failed: {e:?} (state vector {:?})",
            g.state_vec()
        );
    }
    say(&g, "ok barrier completed");
    g.term()?;
    Ok(())
}

fn barrier_then_term(rounds: u32, late_ms: u64, late_rank: u32) -> Res {
    let g = init(Config::from_env())?;
    for round in 1..=rounds {
        if round == rounds && g.rank().0 == late_rank {
            std::thread::sleep(Duration::from_millis(late_ms));
        }
        if let Err(e) = g.barrier(Group::ALL, LONG) {
            fail!(
                "barrier {round} of {rounds} failed: {e:?} (state vector {:?})",
                g.state_vec()
            );
        }
    }
    say(&g, "ok barrier then term");
    g.term()?;
    Ok(())
}

fn bad_config(expect_env_error: bool) -> Res {
    if expect_env_error {
        match Config::from_env() {
            Err(Error::Config(msg)) => {
                println!("ok Config::from_env refused the environment: {msg}");
                return Ok(());
            }
            other => fail!("Config::from_env returned {other:?}, expected Err(Config(_))"),
        }
    }
    let bad = [
        ("segment_max 0", Config::default().segment_max(0)),
        ("segment_max 256", Config::default().segment_max(256)),
        ("notification_num 0", Config::default().notification_num(0)),
        ("queue_num 0", Config::default().queue_num(0)),
        ("queue_num 17", Config::default().queue_num(17)),
        ("queue_size_max 0", Config::default().queue_size_max(0)),
        (
            "transfer_size_max 0",
            Config::default().transfer_size_max(0),
        ),
        (
            "gpu_batch_min above gpu_batch_max",
            Config::default().gpu_batch(16 << 20, 8 << 20),
        ),
        (
            "gpu_batch_max 4 GiB",
            Config::default().gpu_batch(65536, 1 << 32),
        ),
    ];
    for (what, config) in bad {
        match Gaspi::init(config) {
            Err(Error::Config(_)) => {}
            other => fail!("init with {what} returned {other:?}, expected Err(Config(_))"),
        }
    }
    // A valid configuration without a launcher gives a job of one rank.
    let g = init(Ok(Config::default().notification_num(8)))?;
    ensure!(
        g.size() == 1 && g.rank() == Rank(0),
        "standalone job is not 1 rank"
    );
    let seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, Timeout::Ms(5000))?;
    seg.write(0, &[7u8; 8])?;
    g.write_notify(SEG, 0, Rank(0), SEG, 32, 8, NotifyId(7), 9, Queue(0))?;
    g.wait(Queue(0), Timeout::Ms(5000))?;
    ensure!(
        g.notify_waitsome(SEG, NotifyId(0), 8, Timeout::Test)? == NotifyId(7),
        "no notification"
    );
    ensure!(
        g.notify_reset(SEG, NotifyId(7))? == 9,
        "wrong notification value"
    );
    ensure!(
        seg.read_vec::<u8>(32, 8)? == vec![7u8; 8],
        "self write lost"
    );
    g.term()?;
    println!("ok invalid configurations refused");
    Ok(())
}

// ----- 5. timeouts -----

/// The bound on a call that must return at once (or right after its
/// timeout): a hang guard, far above what a busy machine's scheduler adds,
/// far below the `LONG` such a call would block for if it ignored its
/// timeout. Lower bounds are exact; how promptly is a benchmark's figure.
const PROMPT: Duration = Duration::from_secs(10);

fn timeouts() -> Res {
    let g = init(Config::from_env())?;
    let n = g.size();
    let me = g.rank().0;
    let seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, LONG)?;
    let count = g.config().notification_num;
    let _ = seg;
    g.barrier(Group::ALL, LONG)?;
    if me == 0 {
        // Nothing is set: Test returns at once.
        let t = Instant::now();
        expect_err!(
            g.notify_waitsome(SEG, NotifyId(0), count, Timeout::Test),
            Error::Timeout { .. }
        );
        let e = t.elapsed();
        ensure!(e < PROMPT, "notify_waitsome(Test) took {e:?}");
        // Ms(n) returns after about n ms.
        for ms in [100u64, 300] {
            let t = Instant::now();
            expect_err!(
                g.notify_waitsome(SEG, NotifyId(0), count, Timeout::Ms(ms)),
                Error::Timeout { .. }
            );
            let e = t.elapsed();
            ensure!(
                e >= Duration::from_millis(ms) && e < Duration::from_millis(ms) + PROMPT,
                "notify_waitsome(Ms({ms})) returned after {e:?}"
            );
        }
        // The others wait for notification 1 before they enter the barrier.
        let t = Instant::now();
        expect_err!(g.barrier(Group::ALL, Timeout::Test), Error::Timeout { .. });
        let e = t.elapsed();
        ensure!(e < PROMPT, "barrier(Test) took {e:?}");
        let t = Instant::now();
        expect_err!(
            g.barrier(Group::ALL, Timeout::Ms(300)),
            Error::Timeout { .. }
        );
        let e = t.elapsed();
        ensure!(
            e >= Duration::from_millis(300) && e < Duration::from_millis(300) + PROMPT,
            "barrier(Ms(300)) returned after {e:?}"
        );
        for r in 1..n {
            g.proc_ping(Rank(r), Timeout::Ms(10_000))?;
            g.notify(Rank(r), SEG, NotifyId(1), 1, Queue(0))?;
        }
        g.wait(Queue(0), LONG)?;
        // The barrier that timed out resumes and completes.
        g.barrier(Group::ALL, LONG)?;
    } else {
        let id = g.notify_waitsome(SEG, NotifyId(1), 1, LONG)?;
        ensure!(g.notify_reset(SEG, id)? == 1, "bad go value");
        g.barrier(Group::ALL, LONG)?;
    }
    // Barriers after the resumed one stay in step; one polled with Test.
    g.barrier(Group::ALL, LONG)?;
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match g.barrier(Group::ALL, Timeout::Test) {
            Ok(()) => break,
            Err(Error::Timeout { .. }) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Test returns a notification that is set.
    if n > 1 {
        let next = Rank((me + 1) % n);
        g.notify(next, SEG, NotifyId(5), 42, Queue(0))?;
        // Over TCP the answer takes a round trip: not what this tests.
        g.wait(Queue(0), LONG)?;
        g.barrier(Group::ALL, LONG)?;
        let t = Instant::now();
        let id = g.notify_waitsome(SEG, NotifyId(0), count, Timeout::Test)?;
        ensure!(id == NotifyId(5), "notify_waitsome(Test) found {id:?}");
        ensure!(g.notify_reset(SEG, id)? == 42, "wrong value");
        ensure!(
            t.elapsed() < PROMPT,
            "Test with a set notification took {:?}",
            t.elapsed()
        );
        ensure!(g.notify_reset(SEG, id)? == 0, "notify_reset did not clear");
    }
    g.barrier(Group::ALL, LONG)?;
    say(&g, "ok timeouts");
    finish(g)
}

// ----- 6. dead peer -----

fn dead_peer(victim: u32, how: How, keep_going: bool) -> Res {
    let g = init(Config::from_env())?;
    let n = g.size();
    let me = g.rank().0;
    ensure!(victim < n && n >= 2, "bad victim {victim}");
    let v = Rank(victim);
    let killer = if victim == 0 { 1 } else { 0 };
    let seg = g.segment_create(SEG, 4096, Memory::Host, Group::ALL, LONG)?;
    let _ = seg;
    g.barrier(Group::ALL, LONG)?;
    if me != victim {
        // A request to the victim left on queue 1, not waited for.
        g.write(SEG, 0, v, SEG, 64 * me as u64, 64, Queue(1))?;
    }
    g.barrier(Group::ALL, LONG)?;
    // The victim dies only once every survivor has left that barrier (a
    // rank dying while another is still in a barrier fails that barrier,
    // which is not what this scenario checks).
    if me != victim {
        if !keep_going {
            // Said before the notify: once the victim has every notify it
            // dies, and the launcher may stop this rank at any moment.
            say(&g, "survivor: sleeping");
        }
        g.notify(v, SEG, NotifyId(16 + me), 1, Queue(2))?;
    }
    if me == victim {
        for _ in 1..n {
            let id = g.notify_waitsome(SEG, NotifyId(16), 16, LONG)?;
            g.notify_reset(SEG, id)?;
        }
        match how {
            How::SelfKill => {
                say(&g, "victim: raising SIGKILL");
                // SAFETY: raise(2) has no memory-safety requirements.
                unsafe { libc::raise(libc::SIGKILL) };
                fail!("still alive after SIGKILL");
            }
            How::ProcKill => {
                say(&g, "victim: waiting to be killed");
                g.notify(Rank(killer), SEG, NotifyId(4), 1, Queue(2))?;
                let _ = g.notify_waitsome(SEG, NotifyId(9), 1, LONG);
                fail!("still alive 60 s after proc_kill");
            }
        }
    }
    if matches!(how, How::ProcKill) && me == killer {
        let id = g.notify_waitsome(SEG, NotifyId(4), 1, LONG)?;
        g.notify_reset(SEG, id)?;
        g.proc_kill(v)?;
    }
    if !keep_going {
        // The launcher must stop this rank.
        std::thread::sleep(Duration::from_secs(120));
        std::process::exit(3);
    }
    let names_victim = |e: &Error| {
        matches!(e, Error::PeerDead { rank } if *rank == v) && e.failed_rank() == Some(v)
    };
    // The next barrier fails naming the victim, well within its timeout.
    let t = Instant::now();
    match g.barrier(Group::ALL, Timeout::Ms(20_000)) {
        Err(e) if names_victim(&e) => {}
        other => fail!(
            "barrier after the death of {v} returned {other:?} after {:?}",
            t.elapsed()
        ),
    }
    let detected = t.elapsed();
    let states = g.state_vec();
    ensure!(
        states.len() == n as usize,
        "state_vec has {} entries",
        states.len()
    );
    ensure!(
        states[victim as usize] == RankState::Corrupt,
        "state_vec {states:?}: {v} is not Corrupt"
    );
    ensure!(
        states[me as usize] == RankState::Healthy,
        "state_vec {states:?}: this rank is not Healthy"
    );
    for (r, s) in states.iter().enumerate() {
        ensure!(
            r == victim as usize || matches!(s, RankState::Healthy | RankState::Terminated),
            "state_vec {states:?}: survivor {r} is {s:?}"
        );
    }
    // The queue that had a request to the victim reports it.
    match g.wait(Queue(1), Timeout::Ms(10_000)) {
        Err(e) if names_victim(&e) => {}
        other => fail!("wait on the queue with a request to {v} returned {other:?}"),
    }
    // Every call that needs the victim fails naming it, also with Block.
    let checks: Vec<(&str, gaspi::Result<()>)> = vec![
        (
            "write_notify",
            g.write_notify(SEG, 0, v, SEG, 0, 8, NotifyId(0), 1, Queue(0)),
        ),
        ("write", g.write(SEG, 0, v, SEG, 0, 8, Queue(0))),
        ("read", g.read(SEG, 0, v, SEG, 0, 8, Queue(0))),
        ("notify", g.notify(v, SEG, NotifyId(0), 1, Queue(0))),
        ("proc_ping", g.proc_ping(v, Timeout::Ms(10_000))),
        ("barrier(Block)", g.barrier(Group::ALL, Timeout::Block)),
        (
            "segment_register",
            g.segment_register(SEG, v, Timeout::Ms(10_000)),
        ),
    ];
    for (what, r) in checks {
        match r {
            Err(e) if names_victim(&e) => {}
            other => fail!("{what} to dead {v} returned {other:?}"),
        }
    }
    ensure!(
        g.queue_size(Queue(0))? == 0,
        "refused requests to the dead rank were queued"
    );
    // The survivors still reach each other. First every survivor reports
    // to the lowest one that its checks are done, and waits to be released,
    // so that none terminates while another still checks (an orderly
    // terminated rank is not the dead one the checks expect); then a ring
    // that skips the victim.
    let survivors: Vec<u32> = (0..n).filter(|&r| r != victim).collect();
    let short = Timeout::Ms(20_000);
    let lead = survivors[0];
    if me == lead {
        for _ in 1..survivors.len() {
            let id = g.notify_waitsome(SEG, NotifyId(16), 16, short)?;
            g.notify_reset(SEG, id)?;
        }
        for &r in &survivors[1..] {
            g.notify(Rank(r), SEG, NotifyId(3), 1, Queue(2))?;
        }
    } else {
        g.notify(Rank(lead), SEG, NotifyId(16 + me), 1, Queue(2))?;
        let id = g.notify_waitsome(SEG, NotifyId(3), 1, short)?;
        g.notify_reset(SEG, id)?;
    }
    if survivors.len() >= 2 {
        let pos = survivors.iter().position(|&r| r == me).expect("a survivor");
        let next = survivors[(pos + 1) % survivors.len()];
        let prev = survivors[(pos + survivors.len() - 1) % survivors.len()];
        seg.write(0, &[me; 4])?;
        g.write_notify(
            SEG,
            0,
            Rank(next),
            SEG,
            1024,
            16,
            NotifyId(2),
            1 + me,
            Queue(0),
        )?;
        let id = g.notify_waitsome(SEG, NotifyId(2), 1, short)?;
        ensure!(
            g.notify_reset(SEG, id)? == 1 + prev,
            "ring among survivors: wrong value"
        );
        ensure!(
            seg.read_vec::<u32>(1024, 4)? == vec![prev; 4],
            "ring among survivors: wrong data"
        );
    }
    say(
        &g,
        format!("ok survivor: {v} reported dead after {detected:?}, every call naming it"),
    );
    g.term()?;
    Ok(())
}

// ----- 8./9. launcher and oversubscription -----

fn idle_wait(sleep_ms: u64, max_cpu_fraction: f64) -> Res {
    let g = init(Config::from_env())?;
    let n = g.size();
    let me = g.rank().0;
    let seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, LONG)?;
    let _ = seg;
    g.barrier(Group::ALL, LONG)?;
    let check = |what: &str, cpu: Duration, wall: Duration| -> Res {
        let frac = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-3);
        say(
            &g,
            format!("{what}: {cpu:?} of CPU in {wall:?} ({:.1}%)", frac * 100.0),
        );
        if frac > max_cpu_fraction {
            fail!(
                "{what}: used {cpu:?} of CPU in {wall:?} of waiting ({:.0}% > {:.0}%): waiting burns a core",
                frac * 100.0,
                max_cpu_fraction * 100.0
            );
        }
        Ok(())
    };
    let sleep = Duration::from_millis(sleep_ms);
    if me == 0 {
        let (c, t) = (cpu_time(), Instant::now());
        std::thread::sleep(sleep);
        check("rank 0 idle (progress engine)", cpu_time() - c, t.elapsed())?;
        g.barrier(Group::ALL, LONG)?;
        std::thread::sleep(sleep);
        for r in 1..n {
            g.notify(Rank(r), SEG, NotifyId(1), 1, Queue(0))?;
        }
        g.wait(Queue(0), LONG)?;
    } else {
        let (c, t) = (cpu_time(), Instant::now());
        g.barrier(Group::ALL, LONG)?;
        check("waiting in barrier", cpu_time() - c, t.elapsed())?;
        let (c, t) = (cpu_time(), Instant::now());
        let id = g.notify_waitsome(SEG, NotifyId(1), 1, Timeout::Block)?;
        check("waiting in notify_waitsome", cpu_time() - c, t.elapsed())?;
        g.notify_reset(SEG, id)?;
    }
    g.barrier(Group::ALL, LONG)?;
    say(&g, "ok idle wait");
    finish(g)
}

fn hello() -> Res {
    let g = init(Config::from_env())?;
    println!("hello from rank {} of {}", g.rank().0, g.size());
    eprintln!("note from rank {}", g.rank().0);
    g.barrier(Group::ALL, LONG)?;
    finish(g)
}

fn atomic_retry(count: u64, bound: bool, expect_timeouts: bool) -> Res {
    let g = init(Config::from_env())?;
    let n = g.size();
    let _seg = if bound {
        g.segment_use(SEG, vec![0u8; 4096].into_boxed_slice(), Group::ALL, LONG)?
    } else {
        g.segment_create(SEG, 4096, Memory::Host, Group::ALL, LONG)?
    };
    let mut timeouts = 0u64;
    // Repeats `call` while it returns Timeout, as GASPI programs do.
    let mut retry = |call: &mut dyn FnMut() -> gaspi::Result<u64>| -> Res<u64> {
        loop {
            match call() {
                Err(Error::Timeout { .. }) => timeouts += 1,
                other => return Ok(other?),
            }
        }
    };
    for i in 0..count {
        for k in 0..n {
            let target = Rank((g.rank().0 + k + i as u32) % n);
            retry(&mut || g.atomic_fetch_add(SEG, 0, target, 1, Timeout::Test))?;
            let mut expected = 0;
            loop {
                let old = retry(&mut || {
                    g.atomic_compare_swap(SEG, 8, target, expected, expected + 1, Timeout::Test)
                })?;
                if old == expected {
                    break;
                }
                expected = old;
            }
        }
    }
    g.barrier(Group::ALL, LONG)?;
    let words: Vec<u64> = _seg.read_vec(0, 2)?;
    let want = count * n as u64;
    ensure!(
        words == [want, want],
        "counters {words:?}, expected {want} each ({count} x {n} ranks; {timeouts} timeouts)"
    );
    ensure!(
        !expect_timeouts || timeouts > 0,
        "no call timed out: the retry path did not run"
    );
    say(&g, format!("ok atomic retry: {timeouts} timeouts"));
    finish(g)
}

fn register_after_owner_ends(go_file: &std::path::Path) -> Res {
    let g = init(Config::from_env())?;
    ensure!(g.size() == 2, "needs 2 ranks");
    say(&g, format!("pid {}", std::process::id()));
    let until = Instant::now() + Duration::from_secs(60);
    if g.rank() == Rank(0) {
        while g.state_vec()[1] == RankState::Healthy {
            ensure!(Instant::now() < until, "rank 1 never left");
            std::thread::sleep(Duration::from_millis(10));
        }
        g.term()?;
        say_rank(0, "ok rank 1 gone");
        return Ok(());
    }
    while !go_file.exists() {
        ensure!(Instant::now() < until, "no {}", go_file.display());
        std::thread::sleep(Duration::from_millis(10));
    }
    let _seg = g.segment_alloc(SegId(1), 4096, Memory::Host)?;
    expect_err!(
        g.segment_register(SegId(1), Rank(0), Timeout::Ms(300)),
        Error::Timeout { .. }
    );
    say(&g, "ok registration timed out");
    g.term()?;
    Ok(())
}

fn say_rank(rank: u32, msg: &str) {
    println!("rank {rank}: {msg}");
    let _ = std::io::stdout().flush();
}

fn init_term(order: u64, step_us: u64) -> Res {
    let g = init(Config::from_env())?;
    let (me, n) = (g.rank().0, g.size());
    if step_us > 0 {
        let place = finishing_order(n, order)
            .iter()
            .position(|&r| r == me)
            .unwrap_or(0) as u64;
        std::thread::sleep(Duration::from_micros(place * step_us));
    }
    g.term()?;
    println!("rank {me}: ok init-term");
    Ok(())
}

/// Permutation number `k` of the ranks `0..n` (modulo n!, in lexicographic
/// order) for n up to 20; above, a shuffle seeded with `k`.
fn finishing_order(n: u32, k: u64) -> Vec<u32> {
    let mut items: Vec<u32> = (0..n).collect();
    if n > 20 {
        use rand::seq::SliceRandom;
        items.shuffle(&mut rand::rngs::StdRng::seed_from_u64(k));
        return items;
    }
    let fact = |m: u32| (1..=m as u64).product::<u64>();
    let mut k = k % fact(n);
    let mut out = Vec::with_capacity(n as usize);
    for i in (1..=n).rev() {
        let f = fact(i - 1);
        out.push(items.remove((k / f) as usize));
        k %= f;
    }
    out
}

fn exit_code(
    fail_rank: u32,
    code: i32,
    late_rank: Option<u32>,
    late_code: i32,
    late_ms: u64,
) -> Res {
    let g = init(Config::from_env())?;
    let me = g.rank().0;
    let n = g.size();
    let _seg = g.segment_create(SEG, 64, Memory::Host, Group::ALL, LONG)?;
    // No rank exits before every rank has left the barrier in
    // segment_create (a rank dying while others are still in a barrier
    // fails their barrier, and they would exit with codes of their own):
    // the failing rank collects everyone's word, releases them and exits.
    if me == fail_rank {
        for _ in 1..n {
            let id = g.notify_waitsome(SEG, NotifyId(1), n, LONG)?;
            g.notify_reset(SEG, id)?;
        }
        for r in (0..n).filter(|&r| r != me) {
            g.notify(Rank(r), SEG, NotifyId(0), 1, Queue(0))?;
        }
        say(&g, format!("exiting with {code}"));
        std::process::exit(code);
    }
    g.notify(Rank(fail_rank), SEG, NotifyId(1 + me), 1, Queue(0))?;
    g.notify_waitsome(SEG, NotifyId(0), 1, LONG)?;
    if late_rank == Some(me) {
        std::thread::sleep(Duration::from_millis(late_ms));
        say(&g, format!("exiting with {late_code}"));
        std::process::exit(late_code);
    }
    say(&g, "exiting with 0");
    std::process::exit(0);
}

fn standalone(ranks: u32, fail_rank: Option<u32>, code: i32) -> Res {
    let g = init(Config::from_env().map(|c| c.standalone_ranks(ranks)))?;
    check_identity(&g, Some(ranks), None, None, Some("gaspi-run"))?;
    ring(&g, 3)?;
    say(
        &g,
        format!("standalone rank {} of {}", g.rank().0, g.size()),
    );
    let (me, n) = (g.rank().0, g.size());
    match fail_rank {
        Some(r) if r == me => {
            // Exit once the others have left the ring's last barrier.
            for _ in 1..n {
                let id = g.notify_waitsome(SEG, NotifyId(1), n, LONG)?;
                g.notify_reset(SEG, id)?;
            }
            std::process::exit(code)
        }
        // The launcher must stop the others.
        Some(r) => {
            g.notify(Rank(r), SEG, NotifyId(1 + me), 1, Queue(0))?;
            std::thread::sleep(Duration::from_secs(120));
            std::process::exit(3);
        }
        None => {}
    }
    finish(g)
}

fn sleep_forever(ranks: u32) -> Res {
    let g = init(Config::from_env().map(|c| c.standalone_ranks(ranks)))?;
    g.barrier(Group::ALL, LONG)?;
    say(&g, format!("ready {}", g.rank().0));
    std::thread::sleep(Duration::from_secs(120));
    std::process::exit(3);
}

fn barrier_fail(fail_rank: u32, code: i32, others_code: i32) -> Res {
    let g = init(Config::from_env())?;
    // A rank still inside this barrier when `fail_rank` leaves may see it
    // fail too: that is the same failure, met one barrier earlier.
    if let Err(e) = g.barrier(Group::ALL, LONG) {
        eprintln!(
            "rank {}: first barrier failed ({e}); exiting with {others_code}",
            g.rank().0
        );
        std::process::exit(others_code);
    }
    if g.rank().0 == fail_rank {
        std::process::exit(code);
    }
    match g.barrier(Group::ALL, LONG) {
        Err(e) => {
            eprintln!(
                "rank {}: barrier failed ({e}); exiting with {others_code}",
                g.rank().0
            );
            std::process::exit(others_code);
        }
        Ok(()) => fail!("the barrier passed without rank {fail_rank}"),
    }
}

// ----- target-assisted copies with a stalled helper -----

/// See `Cmd::AssistedCopyStalled`.
fn assisted_copy_stalled(blocks: u32, max_call_ms: u64) -> Res {
    const BLOCK: u64 = 4 << 20;
    const SLOTS: u32 = 4;
    /// Rank 1 tells rank 0 its process id on this word.
    const PID_WORD: NotifyId = NotifyId(SLOTS);
    let g = init(Config::from_env())?;
    ensure!(g.size() == 2, "assisted-copy-stalled runs on 2 ranks");
    let me = g.rank().0;
    let peer = Rank(1 - me);
    let seg = g.segment_create(SEG, SLOTS as u64 * BLOCK, Memory::Host, Group::ALL, LONG)?;
    // Block `seq`'s words (both sides compute them).
    let block_of = |seq: u32| -> Vec<u64> {
        (0..BLOCK / 8)
            .map(|i| mix(seq as u64, i) | 1)
            .collect::<Vec<_>>()
    };
    let value_of = |seq: u32| (mix(seq as u64, u64::MAX) as u32) | 1;
    let how = std::env::var("GASPI_TEST_HELPER_STALL").unwrap_or_default();
    if me == 1 {
        g.notify(peer, SEG, PID_WORD, std::process::id(), Queue(0))?;
        g.wait(Queue(0), LONG)?;
        let mut got = vec![0u64; (BLOCK / 8) as usize];
        for seq in 0..blocks {
            let slot = seq % SLOTS;
            let id = g.notify_waitsome(SEG, NotifyId(slot), 1, LONG)?;
            let v = g.notify_reset(SEG, id)?;
            ensure!(
                v == value_of(seq),
                "block {seq}: notification value {v}, expected {}",
                value_of(seq)
            );
            seg.read((slot as u64 * BLOCK) as usize, &mut got)?;
            if let Some(i) = got.iter().zip(block_of(seq)).position(|(a, b)| *a != b) {
                fail!(
                    "block {seq} (slot {slot}) is wrong at byte {} when its notification is seen: {:#x}",
                    i * 8,
                    got[i]
                );
            }
            g.notify(peer, SEG, NotifyId(slot), 1, Queue(0))?;
        }
        g.wait(Queue(0), LONG)?;
        say(
            &g,
            format!(
                "ok stalled target: {blocks} blocks intact, {} bytes copied for the peer",
                g.statistics().bytes_copied_for_peers
            ),
        );
        return finish(g);
    }
    let id = g.notify_waitsome(SEG, PID_WORD, 1, LONG)?;
    let pid = g.notify_reset(SEG, id)? as libc::pid_t;
    // While rank 0 waits for rank 1 (never during its own calls), a stalled
    // helper of rank 1 is let go on: with `sigstop` a thread continues the
    // process every few ms (a stop may come just after a SIGCONT), with
    // `until:PATH` the file is created.
    let releasing = std::sync::Arc::new(AtomicBool::new(false));
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let continuer = (how == "sigstop").then(|| {
        let (releasing, done) = (releasing.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if releasing.load(Ordering::Relaxed) {
                    // SAFETY: kill(2) has no memory-safety requirements;
                    // rank 1 lives until it acknowledged every block.
                    unsafe { libc::kill(pid, libc::SIGCONT) };
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    });
    let release = |on: bool| -> Res {
        releasing.store(on, Ordering::Relaxed);
        if let (true, Some(path)) = (on, how.strip_prefix("until:")) {
            std::fs::write(path, b"")?;
        }
        Ok(())
    };
    // Waits for rank 1's acknowledgement of the block in `slot`.
    let acknowledged = |slot: u32| -> Res {
        release(true)?;
        let id = g.notify_waitsome(SEG, NotifyId(slot), 1, LONG)?;
        g.notify_reset(SEG, id)?;
        release(false)
    };
    let garbage = vec![0xdead_beef_dead_beefu64; (BLOCK / 8) as usize];
    let mut worst = Duration::ZERO;
    for seq in 0..blocks {
        let slot = seq % SLOTS;
        if seq >= SLOTS {
            // Rank 1 checked the slot's previous block.
            acknowledged(slot)?;
        }
        let at = slot as u64 * BLOCK;
        seg.write(at as usize, &block_of(seq))?;
        let start = Instant::now();
        g.write_notify(
            SEG,
            at,
            peer,
            SEG,
            at,
            BLOCK,
            NotifyId(slot),
            value_of(seq),
            Queue(0),
        )?;
        g.wait(Queue(0), LONG)?;
        let took = start.elapsed();
        worst = worst.max(took);
        // The source is this program's again: a late copy of it must not
        // reach rank 1.
        seg.write(at as usize, &garbage)?;
        ensure!(
            took < Duration::from_millis(max_call_ms),
            "block {seq}: write_notify + wait took {took:?}: the writer waited for its stalled helper"
        );
    }
    for seq in blocks.saturating_sub(SLOTS)..blocks {
        acknowledged(seq % SLOTS)?;
    }
    done.store(true, Ordering::Relaxed);
    if let Some(t) = continuer {
        t.join().map_err(|_| "the continuing thread panicked")?;
    }
    say(
        &g,
        format!("ok stalled target: {blocks} blocks written, worst write_notify + wait {worst:?}"),
    );
    finish(g)
}
