//! `gaspi-net-fault-rank`: ranks of the network-fault tests
//! (`tests/network_faults.rs`, issue 24): partitions shorter than the peer
//! timeout, permanent cuts, strangers flooding a running rank, a rank out
//! of descriptors, survivors of a kill that terminate at once; and the
//! stranger itself (`flood`, no rank).
//!
//! Each scenario prints `rank R: ok ...` lines and figures as
//! `rank R: figure NAME=VALUE`, exits 0 on success and prints
//! `rank R: FAILED: ...` and exits 1 otherwise.

use clap::{Parser, Subcommand};
use gaspi::{
    Config, Error, Gaspi, Group, Memory, NotifyId, Queue, Rank, RankState, ReduceOp, SegId, Timeout,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gaspi_tests::{ensure, fail, RankResult as Res};

#[derive(Parser)]
#[command(
    name = "gaspi-net-fault-rank",
    about = "A rank of a network-fault test job"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Four ranks, 0 and 1 on one host, 2 and 3 on another. Every pair
    /// exchanges a block, then all sit quiet (nothing sent) and print
    /// `ready`; the test cuts the link after a while and writes
    /// `cut_file`. Rank 0 then notifies rank 2 and waits for its answer
    /// with short timeouts (figure `timeouts`); every other connection
    /// stays quiet. No rank may be marked dead. Once `heal_file` exists
    /// (the link is back), rank 2 answers, every rank retries a barrier
    /// until it passes, and a second exchange must arrive intact.
    Partition {
        #[arg(long)]
        cut_file: PathBuf,
        #[arg(long)]
        heal_file: PathBuf,
    },
    /// Four ranks, 0 and 1 on one host, 2 and 3 on another, that have not
    /// talked across the hosts yet (control connections are made on first
    /// use): they print `ready` and wait for `go_file`. The test cuts the
    /// link before it writes the file and puts it back a few seconds
    /// later, longer than one connection attempt waits and shorter than
    /// the peer timeout. Every rank then runs a barrier, a segment
    /// creation and an exchange, none with a short timeout: their first
    /// contacts across the hosts must wait for the link, not fail; no
    /// rank may be marked dead (figure `first_barrier_ms`).
    FirstContact {
        #[arg(long)]
        go_file: PathBuf,
    },
    /// Ranks on two hosts exchange a block, print `ready` and sit quiet,
    /// watching the state vector, until a rank is marked dead: figure
    /// `dead_rank` and `dead_at_us` (wall clock); exit once `stop_file`
    /// exists (a rank that ended first would be one more death).
    Cut {
        #[arg(long)]
        stop_file: PathBuf,
    },
    /// Four ranks print `ready` once started, wait for `go_file`, then
    /// create and delete segments of the whole group (the first create
    /// connects every pair), write a ring and run allreduce and barrier,
    /// round after round, checking every value, until `stop_file` exists
    /// and at least `min_rounds` rounds are done.
    Busy {
        #[arg(long)]
        go_file: PathBuf,
        #[arg(long)]
        stop_file: PathBuf,
        #[arg(long, default_value_t = 5)]
        min_rounds: u64,
    },
    /// Not a rank: opens `count` connections to `addr` that never send
    /// anything, keeps them until `hold_file` exists, prints `flooded N`.
    Flood {
        #[arg(long)]
        addr: std::net::SocketAddr,
        #[arg(long, default_value_t = 2000)]
        count: usize,
        #[arg(long)]
        hold_file: PathBuf,
    },
    /// Three ranks, 0 and 1 on one host. Rank 1 opens descriptors until
    /// none is left; rank 0 registers a segment with it, which must fail
    /// naming the real error (`Too many open files`), not another host;
    /// once rank 1 has let them go the registration works.
    Descriptors,
    /// Four ranks loop on barrier + allreduce; rank `victim` kills itself
    /// at iteration `at`. Each survivor's call must fail naming the victim
    /// (PeerDead), and the survivor then terminates at once, which the
    /// others must not take for the first failure.
    KillThenTerm {
        #[arg(long, default_value_t = 3)]
        victim: u32,
        #[arg(long, default_value_t = 5)]
        at: u64,
    },
}

fn main() {
    gaspi_launch::init_logging();
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Partition {
            cut_file,
            heal_file,
        } => partition(&cut_file, &heal_file),
        Cmd::FirstContact { go_file } => first_contact(&go_file),
        Cmd::Cut { stop_file } => cut(&stop_file),
        Cmd::Busy {
            go_file,
            stop_file,
            min_rounds,
        } => busy(&go_file, &stop_file, min_rounds),
        Cmd::Flood {
            addr,
            count,
            hold_file,
        } => flood(addr, count, &hold_file),
        Cmd::Descriptors => descriptors(),
        Cmd::KillThenTerm { victim, at } => kill_then_term(victim, at),
    };
    if let Err(e) = result {
        let rank = std::env::var("GASPI_RANK").unwrap_or_else(|_| "?".into());
        eprintln!("rank {rank}: FAILED: {e}");
        std::process::exit(1);
    }
}

fn init() -> Res<Gaspi> {
    Ok(Gaspi::init(Config::from_env()?)?)
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

const LONG: Timeout = Timeout::Ms(60_000);

/// Every rank writes `round * 1000 + rank` into every other rank's slot
/// for it (segment 0, 8 bytes a rank) with write_notify, and checks what
/// it got. `retry` allows Timeout on the waits (after a partition).
fn exchange(g: &Gaspi, seg: &gaspi::Segment, round: u64) -> Res {
    let (me, n) = (g.rank().0, g.size());
    let base = u64::from(n) * 8;
    seg.write(base as usize, &[round * 1000 + u64::from(me)])?;
    for r in (0..n).filter(|&r| r != me) {
        g.write_notify(
            SegId(0),
            base,
            Rank(r),
            SegId(0),
            u64::from(me) * 8,
            8,
            NotifyId(100 + me),
            1,
            Queue(0),
        )?;
    }
    g.wait(Queue(0), LONG)?;
    for _ in 1..n {
        let id = g.notify_waitsome(SegId(0), NotifyId(100), n, LONG)?;
        g.notify_reset(SegId(0), id)?;
    }
    for r in (0..n).filter(|&r| r != me) {
        let got = seg.read_vec::<u64>(r as usize * 8, 1)?[0];
        ensure!(
            got == round * 1000 + u64::from(r),
            "round {round}: got {got} from rank {r}"
        );
    }
    Ok(())
}

fn first_dead(g: &Gaspi) -> Option<u32> {
    g.state_vec()
        .iter()
        .position(|s| *s == RankState::Corrupt)
        .map(|r| r as u32)
}

fn no_dead(g: &Gaspi, when: &str) -> Res {
    ensure!(
        first_dead(g).is_none(),
        "{when}: the state vector is {:?}",
        g.state_vec()
    );
    Ok(())
}

fn wait_file(path: &Path, g: &Gaspi, check_alive: bool) -> Res {
    let start = Instant::now();
    while !path.exists() {
        ensure!(
            start.elapsed() < Duration::from_secs(90),
            "{} never appeared",
            path.display()
        );
        if check_alive {
            no_dead(g, &format!("waiting for {}", path.display()))?;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn partition(cut_file: &Path, heal_file: &Path) -> Res {
    let g = init()?;
    ensure!(g.size() == 4, "needs 4 ranks");
    let me = g.rank().0;
    let seg = g.segment_create(SegId(0), 4096, Memory::Host, Group::ALL, LONG)?;
    g.barrier(Group::ALL, LONG)?;
    exchange(&g, &seg, 1)?;
    g.barrier(Group::ALL, LONG)?;
    say(&g, "ready");
    wait_file(cut_file, &g, true)?;
    let is_timeout = |e: &Error| matches!(e, Error::Timeout { .. });
    match me {
        0 => {
            // A request in flight across the cut, and waits that time out.
            g.notify(Rank(2), SegId(0), NotifyId(1), 1, Queue(1))?;
            let mut timeouts = 0u64;
            loop {
                match g.notify_waitsome(SegId(0), NotifyId(2), 1, Timeout::Ms(200)) {
                    Ok(id) => {
                        g.notify_reset(SegId(0), id)?;
                        break;
                    }
                    Err(e) if is_timeout(&e) => timeouts += 1,
                    Err(e) => fail!("waiting for rank 2 across the partition: {e:?}"),
                }
                ensure!(timeouts < 300, "rank 2 never answered");
                no_dead(&g, "during the partition")?;
            }
            loop {
                match g.wait(Queue(1), Timeout::Ms(200)) {
                    Ok(()) => break,
                    Err(e) if is_timeout(&e) => timeouts += 1,
                    Err(e) => fail!("wait across the partition: {e:?}"),
                }
            }
            figure(&g, "timeouts", timeouts);
        }
        2 => {
            wait_file(heal_file, &g, true)?;
            loop {
                match g.notify_waitsome(SegId(0), NotifyId(1), 1, Timeout::Ms(200)) {
                    Ok(id) => {
                        g.notify_reset(SegId(0), id)?;
                        break;
                    }
                    Err(e) if is_timeout(&e) => no_dead(&g, "after the heal")?,
                    Err(e) => fail!("waiting for rank 0 after the heal: {e:?}"),
                }
            }
            g.notify(Rank(0), SegId(0), NotifyId(2), 1, Queue(1))?;
            g.wait(Queue(1), LONG)?;
        }
        _ => wait_file(heal_file, &g, true)?,
    }
    // Traffic resumes: a barrier, retried while it times out.
    let start = Instant::now();
    loop {
        match g.barrier(Group::ALL, Timeout::Ms(500)) {
            Ok(()) => break,
            Err(e) if is_timeout(&e) => {
                ensure!(
                    start.elapsed() < Duration::from_secs(30),
                    "no barrier passed within 30 s of the heal"
                );
            }
            Err(e) => fail!("a barrier after the heal: {e:?}"),
        }
    }
    exchange(&g, &seg, 2)?;
    g.barrier(Group::ALL, LONG)?;
    no_dead(&g, "at the end")?;
    say(&g, "ok partition healed");
    g.term()?;
    Ok(())
}

fn first_contact(go_file: &Path) -> Res {
    let g = init()?;
    ensure!(g.size() == 4, "needs 4 ranks");
    say(&g, "ready");
    wait_file(go_file, &g, true)?;
    let start = Instant::now();
    g.barrier(Group::ALL, LONG)?;
    figure(&g, "first_barrier_ms", start.elapsed().as_millis());
    let seg = g.segment_create(SegId(0), 4096, Memory::Host, Group::ALL, LONG)?;
    exchange(&g, &seg, 1)?;
    g.barrier(Group::ALL, LONG)?;
    no_dead(&g, "at the end")?;
    say(&g, "ok first contact");
    g.term()?;
    Ok(())
}

fn cut(stop_file: &Path) -> Res {
    let g = init()?;
    let seg = g.segment_create(SegId(0), 4096, Memory::Host, Group::ALL, LONG)?;
    g.barrier(Group::ALL, LONG)?;
    exchange(&g, &seg, 1)?;
    g.barrier(Group::ALL, LONG)?;
    say(&g, "ready");
    // Quiet: nothing sent by the program, whatever the runtime does.
    let start = Instant::now();
    let dead = loop {
        if let Some(r) = first_dead(&g) {
            break r;
        }
        ensure!(
            start.elapsed() < Duration::from_secs(90),
            "no rank was marked dead"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    figure(&g, "dead_at_us", now_us());
    figure(&g, "dead_rank", dead);
    wait_file(stop_file, &g, false)?;
    std::process::exit(0);
}

fn busy(go_file: &Path, stop_file: &Path, min_rounds: u64) -> Res {
    let g = init()?;
    let (me, n) = (g.rank().0, g.size());
    say(&g, "ready");
    wait_file(go_file, &g, true)?;
    let mut round = 0u64;
    loop {
        // Whether to stop is decided together: a rank that saw the stop
        // file one round later than the others would start a round alone
        // (its segment_create could then meet their closing barrier, and
        // it would wait for a write that never comes).
        let seen = u64::from(round >= min_rounds && stop_file.exists());
        let mut stop = [0u64];
        g.allreduce(&[seen], &mut stop, ReduceOp::Max, Group::ALL, LONG)?;
        if stop[0] != 0 {
            break;
        }
        ensure!(round < 100_000, "never stopped");
        let id = SegId(1 + (round % 2) as u8);
        let seg = g.segment_create(id, 1 << 16, Memory::Host, Group::ALL, LONG)?;
        let next = Rank((me + 1) % n);
        seg.write(0, &[round * 100 + u64::from(me)])?;
        g.write_notify(id, 0, next, id, 8, 8, NotifyId(1), 1, Queue(0))?;
        g.wait(Queue(0), LONG)?;
        let nid = g.notify_waitsome(id, NotifyId(1), 1, LONG)?;
        g.notify_reset(id, nid)?;
        let prev = (me + n - 1) % n;
        let got = seg.read_vec::<u64>(8, 1)?[0];
        ensure!(
            got == round * 100 + u64::from(prev),
            "round {round}: got {got} from rank {prev}"
        );
        let mut sum = [0u64];
        g.allreduce(
            &[round + u64::from(me)],
            &mut sum,
            ReduceOp::Sum,
            Group::ALL,
            LONG,
        )?;
        let want = u64::from(n) * round + u64::from(n * (n - 1) / 2);
        ensure!(sum[0] == want, "round {round}: allreduce gave {}", sum[0]);
        g.barrier(Group::ALL, LONG)?;
        g.segment_delete(id)?;
        g.barrier(Group::ALL, LONG)?;
        round += 1;
    }
    g.barrier(Group::ALL, LONG)?;
    say(&g, format!("ok busy rounds={round}"));
    g.term()?;
    Ok(())
}

fn flood(addr: std::net::SocketAddr, count: usize, hold_file: &Path) -> Res {
    // Room for every connection.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read or fill the rlimit struct we pass.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let mut held = Vec::with_capacity(count);
    let mut failed = 0usize;
    println!("connecting");
    let _ = std::io::stdout().flush();
    for _ in 0..count {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => held.push(s),
            Err(_) => failed += 1,
        }
    }
    println!("flooded {} (failed {failed})", held.len());
    let _ = std::io::stdout().flush();
    let start = Instant::now();
    while !hold_file.exists() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Opens /dev/null until the process has no descriptor left, under a
/// soft limit of at most 1,024 (the runtime raised it to the hard one).
fn exhaust() -> Vec<std::fs::File> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read or fill the rlimit struct we pass.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_cur.min(1024);
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let mut files = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        files.push(f);
        if files.len() > 1 << 20 {
            break;
        }
    }
    files
}

fn descriptors() -> Res {
    let g = init()?;
    ensure!(g.size() == 3, "needs 3 ranks");
    let me = g.rank().0;
    let seg = g.segment_alloc(SegId(0), 4096, Memory::Host)?;
    // Connections made before the descriptors run out.
    g.barrier(Group::ALL, LONG)?;
    if me == 1 {
        let files = exhaust();
        say(&g, format!("holding {} descriptors", files.len()));
        g.passive_send(SegId(0), 0, Rank(0), 1, LONG)?;
        // Rank 0 tells when it has tried.
        g.passive_receive(SegId(0), 64, LONG)?;
        drop(files);
        g.passive_send(SegId(0), 0, Rank(0), 1, LONG)?;
    }
    if me == 0 {
        g.passive_receive(SegId(0), 64, LONG)?;
        let r = g.segment_register(SegId(0), Rank(1), Timeout::Ms(20_000));
        let text = match &r {
            Ok(()) => fail!("registering with a rank out of descriptors worked"),
            Err(e) => e.to_string(),
        };
        say(&g, format!("register failed: {text}"));
        ensure!(
            !text.contains("cannot be mapped on host"),
            "the error blames another host: {text}"
        );
        ensure!(
            text.contains("Too many open files") || text.contains("EMFILE"),
            "the error does not name the real cause: {text}"
        );
        g.passive_send(SegId(0), 0, Rank(1), 1, LONG)?;
        g.passive_receive(SegId(0), 64, LONG)?;
        g.segment_register(SegId(0), Rank(1), LONG)?;
    }
    seg.write(0, &[7u64])?;
    g.barrier(Group::ALL, LONG)?;
    no_dead(&g, "at the end")?;
    say(&g, "ok descriptors");
    g.term()?;
    Ok(())
}

fn kill_then_term(victim: u32, at: u64) -> Res {
    let g = init()?;
    ensure!(g.size() == 4, "needs 4 ranks");
    let me = g.rank().0;
    for i in 0..100_000u64 {
        if me == victim && i == at {
            // SAFETY: raise(2) has no memory-safety requirements.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        let r = g.barrier(Group::ALL, Timeout::Block).and_then(|_| {
            let mut sum = [0u64];
            g.allreduce(&[i], &mut sum, ReduceOp::Sum, Group::ALL, Timeout::Block)?;
            if sum[0] != i * 4 {
                return Err(Error::Protocol(format!("allreduce summed {}", sum[0])));
            }
            Ok(())
        });
        if let Err(e) = r {
            ensure!(
                matches!(e, Error::PeerDead { rank } if rank.0 == victim),
                "iteration {i}: the collective failed with {e:?}, not PeerDead(rank {victim})"
            );
            say(
                &g,
                format!("ok survivor named rank {victim} at iteration {i}"),
            );
            g.term()?;
            return Ok(());
        }
    }
    fail!("the victim never died")
}
