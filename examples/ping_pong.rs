//! Two ranks bounce a message with `write_notify`, checking every byte.
//!
//! `cargo run --release --example ping_pong -- --size 4096 --iters 10000`
//! starts its two ranks by itself. Rank 0 sends a buffer stamped with the
//! round number into rank 1's segment and notifies; rank 1 checks it and
//! sends it back the same way. Prints the median half round trip.
//!
//! The time is that of a whole round as a program lives it: stamping the
//! buffer byte by byte, copying it into the segment, `write_notify`,
//! `notify_waitsome`, `notify_reset`, copying it out and checking every
//! byte, on both ranks. `gaspi-bench pingpong` times the communication
//! alone (`write_notify` of data already in the segment, then
//! `notify_waitsome` and `notify_reset`; nothing stamped, copied or
//! checked), so its figure is the smaller one: at 4 KiB, one after the other on the 2-core
//! development VM, 0.20 - 0.24 us for `gaspi-bench pingpong --sizes 4096`
//! against 2.3 us here. Performance figures come from `gaspi-bench`
//! (`BENCHMARKS.md`); this example shows the calls and checks the data.

use clap::Parser;
use gaspi::{Config, Gaspi, Group, Memory, NotifyId, Queue, Rank, SegId, Timeout};
use std::process::ExitCode;
use std::time::Instant;

/// Two ranks bounce a message with write_notify, checking every byte; prints
/// the median half round trip, stamping and checking included (gaspi-bench
/// pingpong times the communication alone).
#[derive(Parser)]
struct Args {
    /// Bytes per message.
    #[arg(long, default_value_t = 4096)]
    size: u64,
    /// Round trips.
    #[arg(long, default_value_t = 10_000)]
    iters: u32,
}

const SEG: SegId = SegId(0);

fn stamp(buf: &mut [u8], round: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(round) as u8;
    }
}

/// Errors reach the user with their `Display` text (`fn main() -> Result`
/// would print their `Debug` form).
fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ping_pong: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    gaspi_launch::init_logging();
    let args = Args::parse();
    let gaspi = Gaspi::init(Config::from_env()?.standalone_ranks(2))?;
    if gaspi.size() != 2 {
        return Err(format!("ping_pong needs exactly 2 ranks, got {}", gaspi.size()).into());
    }
    let me = gaspi.rank();
    let peer = Rank(1 - me.0);
    let size = args.size;
    // Outgoing buffer at 0, incoming at `size`.
    let seg = gaspi.segment_create(SEG, 2 * size, Memory::Host, Group::ALL, Timeout::Block)?;
    let mut buf = vec![0u8; size as usize];
    let mut expect = vec![0u8; size as usize];
    let mut times = Vec::with_capacity(args.iters as usize);
    for round in 1..=args.iters {
        let t = Instant::now();
        if me.0 == 0 {
            stamp(&mut buf, round);
            seg.write(0, &buf)?;
            gaspi.write_notify(SEG, 0, peer, SEG, size, size, NotifyId(0), round, Queue(0))?;
        }
        let id = gaspi.notify_waitsome(SEG, NotifyId(0), 1, Timeout::Ms(10_000))?;
        let value = gaspi.notify_reset(SEG, id)?;
        if value != round {
            return Err(format!("round {round}: notification value {value}").into());
        }
        seg.read(size as usize, &mut buf)?;
        stamp(&mut expect, round);
        if buf != expect {
            return Err(format!("round {round}: payload corrupted").into());
        }
        if me.0 == 1 {
            seg.write(0, &buf)?;
            gaspi.write_notify(SEG, 0, peer, SEG, size, size, NotifyId(0), round, Queue(0))?;
        }
        gaspi.wait(Queue(0), Timeout::Block)?;
        times.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    times.sort_by(f64::total_cmp);
    if me.0 == 0 {
        println!(
            "ping_pong: {} round trips of {} bytes checked; half round trip median {:.3} us \
             (a whole round: stamping, copying in and out and checking every byte included; \
             gaspi-bench pingpong times the communication alone)",
            args.iters,
            size,
            times[times.len() / 2]
        );
    }
    gaspi.barrier(Group::ALL, Timeout::Block)?;
    gaspi.term()?;
    Ok(())
}
