//! The batched matrix-vector job: a CPU node feeds a GPU node.
//!
//! Rank 0 (the CPU node) streams batches of 32-element f32 vectors into rank
//! 1's segment with `write_notify`; rank 1 multiplies each vector by a
//! constant 32x32 matrix and sends the products back into rank 0's segment
//! with `write_notify`; rank 0 checks every product against a CPU reference
//! and reports millions of vectors per second per batch size, beside the
//! figures of the GPUrdma paper (K40 over InfiniBand).
//!
//! Several batches are in flight (`--slots`, default 4): rank 0 refills a
//! slot as soon as its product came back, so the link never idles.
//!
//! Modes of rank 1: `cpu` (the work done by a CPU loop: runs anywhere, and
//! is what runs when no GPU is present), `host` (a CPU thread waits and
//! launches a kernel per batch) and `gpu` (a persistent kernel waits and
//! replies by itself). This build has no GPU segments yet, so `host` and
//! `gpu` report that and are skipped.
//!
//! `cargo run --release --example matvec` runs the job with 2 ranks.

use clap::Parser;
use gaspi::{Config, Gaspi, Group, Memory, NotifyId, Queue, Rank, SegId, Timeout};
use std::io::IsTerminal;
use std::time::Instant;

const N: usize = 32;
const VEC_BYTES: usize = N * 4;
/// Batch sizes of the GPUrdma paper's table.
const BATCHES: [usize; 6] = [480, 960, 1920, 3840, 7680, 15360];
/// GPUrdma paper, million vectors/s: (batch, GPI-2, GPUrdma).
const PAPER: [(usize, f64, f64); 6] = [
    (480, 2.6, 11.7),
    (960, 4.6, 17.5),
    (1920, 8.0, 23.6),
    (3840, 13.4, 27.7),
    (7680, 19.3, 30.3),
    (15360, 24.3, 31.5),
];
/// Largest relative error accepted per product element (f32 sums of 32
/// terms in different orders differ by a few ulps).
const MAX_REL_ERR: f32 = 1e-5;
const STOP: NotifyId = NotifyId(1000);
const SEG: SegId = SegId(0);

#[derive(Parser, Clone)]
struct Args {
    /// Modes to run: cpu, host, gpu, or all (the ones this machine can run).
    #[arg(long, default_value = "all")]
    mode: String,
    /// Batch sizes (vectors per batch).
    #[arg(long, value_delimiter = ',')]
    batch: Vec<usize>,
    /// Vectors to stream per batch size (rounded up to whole batches).
    #[arg(long, default_value_t = 2_000_000)]
    vectors: usize,
    /// Batches in flight.
    #[arg(long, default_value_t = 4)]
    slots: usize,
    /// One JSON line per (mode, batch).
    #[arg(long)]
    json: bool,
}

fn matrix() -> Vec<f32> {
    (0..N * N)
        .map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0)
        .collect()
}

fn matvec(m: &[f32], x: &[f32], y: &mut [f32]) {
    for (r, out) in y.iter_mut().enumerate() {
        let row = &m[r * N..(r + 1) * N];
        *out = row.iter().zip(x).map(|(a, b)| a * b).sum();
    }
}

fn as_bytes(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no invalid bit patterns nor padding; the byte view
    // covers exactly the same memory for the same lifetime.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    gaspi::init_logging();
    let args = Args::parse();
    let gaspi = Gaspi::init(Config::from_env()?.standalone_ranks(2))?;
    if gaspi.size() < 2 {
        return Err(
            "matvec needs 2 ranks (start it without a launcher, or with gaspi-run -n 2)".into(),
        );
    }
    let batches = if args.batch.is_empty() {
        BATCHES.to_vec()
    } else {
        args.batch.clone()
    };
    let max_batch = *batches.iter().max().unwrap_or(&480);
    let slot_bytes = (max_batch * VEC_BYTES) as u64;
    let slots = args.slots.clamp(1, 64);
    // Rank 0: [inputs to send][products received]; rank 1: [inputs received][products to send].
    let seg = gaspi.segment_create(
        SEG,
        2 * slots as u64 * slot_bytes,
        Memory::Host,
        Group::ALL,
        Timeout::Block,
    )?;
    let wanted: Vec<&str> = match args.mode.as_str() {
        "all" => vec!["cpu", "host", "gpu"],
        m => vec![m],
    };
    let mut rows = Vec::new();
    for mode in wanted {
        if mode != "cpu" {
            if gaspi.rank().0 == 0 {
                eprintln!("matvec: mode {mode} skipped: this build has no GPU segments yet (CPU fallback runs instead)");
            }
            continue;
        }
        for &batch in &batches {
            gaspi.barrier(Group::ALL, Timeout::Block)?;
            let nbatches = args.vectors.div_ceil(batch).max(slots);
            let row = match gaspi.rank().0 {
                0 => Some(feed(
                    &gaspi, &seg, batch, nbatches, slots, slot_bytes, mode, args.json,
                )?),
                1 => {
                    serve_cpu(&gaspi, &seg, batch, slots, slot_bytes)?;
                    None
                }
                _ => None,
            };
            rows.extend(row);
        }
    }
    if gaspi.rank().0 == 0 && !args.json {
        println!(
            "\n{:<8} {:>7} {:>12} {:>12} {:>14} {:>16}",
            "mode", "batch", "M vectors/s", "max rel err", "paper: GPI-2", "paper: GPUrdma"
        );
        for (mode, batch, mvps, err) in &rows {
            let paper = PAPER.iter().find(|p| p.0 == *batch);
            let (g, r) = paper.map_or(("-".into(), "-".into()), |p| {
                (format!("{:.1}", p.1), format!("{:.1}", p.2))
            });
            println!("{mode:<8} {batch:>7} {mvps:>12.2} {err:>12.2e} {g:>14} {r:>16}");
        }
        println!("(cpu: rank 1's work done by a CPU loop, no GPU in this run; paper: GPUrdma, K40 over InfiniBand)");
    }
    gaspi.barrier(Group::ALL, Timeout::Block)?;
    gaspi.term()?;
    Ok(())
}

/// Rank 0: streams `nbatches` batches, checks every product, returns the row.
#[allow(clippy::too_many_arguments)]
fn feed(
    gaspi: &Gaspi,
    seg: &gaspi::Segment,
    batch: usize,
    nbatches: usize,
    slots: usize,
    slot_bytes: u64,
    mode: &str,
    json: bool,
) -> Result<(String, usize, f64, f32), Box<dyn std::error::Error>> {
    let m = matrix();
    // A pool of distinct input batches with their reference products.
    let pool = 3;
    let mut inputs = Vec::with_capacity(pool);
    let mut refs = Vec::with_capacity(pool);
    for p in 0..pool {
        let x: Vec<f32> = (0..batch * N)
            .map(|i| (((i * 31 + p * 17) % 97) as f32 - 48.0) / 16.0)
            .collect();
        let mut y = vec![0f32; batch * N];
        for v in 0..batch {
            matvec(&m, &x[v * N..(v + 1) * N], &mut y[v * N..(v + 1) * N]);
        }
        inputs.push(x);
        refs.push(y);
    }
    let products_at = slots as u64 * slot_bytes;
    let bytes = (batch * VEC_BYTES) as u64;
    let bar = (std::io::stdout().is_terminal() && !json).then(|| {
        let b = indicatif::ProgressBar::new(nbatches as u64);
        b.set_message(format!("{mode} batch {batch}"));
        b
    });
    let mut got = vec![0f32; batch * N];
    let mut max_err = 0f32;
    let start = Instant::now();
    let mut sent = 0usize;
    let mut done = 0usize;
    while done < nbatches {
        // Keep every slot busy.
        while sent < nbatches && sent - done < slots {
            let slot = sent % slots;
            let at = slot as u64 * slot_bytes;
            seg.write(at as usize, &inputs[sent % pool])?;
            gaspi.write_notify(
                SEG,
                at,
                Rank(1),
                SEG,
                at,
                bytes,
                NotifyId(slot as u32),
                sent as u32 + 1,
                Queue(0),
            )?;
            gaspi.wait(Queue(0), Timeout::Block)?;
            sent += 1;
        }
        // Products come back in order: batch `done` in slot done % slots.
        let slot = done % slots;
        let id = NotifyId(slots as u32 + slot as u32);
        gaspi.notify_waitsome(SEG, id, 1, Timeout::Ms(30_000))?;
        let seq = gaspi.notify_reset(SEG, id)?;
        if seq != done as u32 + 1 {
            return Err(format!(
                "slot {slot}: product of batch {} arrived, expected {}",
                seq - 1,
                done
            )
            .into());
        }
        seg.read((products_at + slot as u64 * slot_bytes) as usize, &mut got)?;
        for (a, b) in got.iter().zip(&refs[done % pool]) {
            let err = (a - b).abs() / b.abs().max(1.0);
            max_err = max_err.max(err);
        }
        if max_err > MAX_REL_ERR {
            return Err(
                format!("batch {done}: relative error {max_err:e} above {MAX_REL_ERR:e}").into(),
            );
        }
        done += 1;
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    gaspi.notify(Rank(1), SEG, STOP, 1, Queue(0))?;
    gaspi.wait(Queue(0), Timeout::Block)?;
    let mvps = (nbatches * batch) as f64 / secs / 1e6;
    if json {
        println!(
            "{}",
            serde_json::json!({"mode": mode, "batch": batch, "mvecs_per_s": mvps, "max_rel_err": max_err, "vectors": nbatches * batch})
        );
    }
    Ok((mode.to_string(), batch, mvps, max_err))
}

/// Rank 1 without a GPU: waits for batches, multiplies on the CPU, replies.
fn serve_cpu(
    gaspi: &Gaspi,
    seg: &gaspi::Segment,
    batch: usize,
    slots: usize,
    slot_bytes: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let m = matrix();
    let products_at = slots as u64 * slot_bytes;
    let bytes = (batch * VEC_BYTES) as u64;
    let mut x = vec![0f32; batch * N];
    let mut y = vec![0f32; batch * N];
    loop {
        if gaspi.notify_reset(SEG, STOP)? != 0 {
            return Ok(());
        }
        let id = match gaspi.notify_waitsome(SEG, NotifyId(0), slots as u32, Timeout::Ms(10)) {
            Ok(id) => id,
            Err(e) if e.is_timeout() => continue,
            Err(e) => return Err(e.into()),
        };
        let seq = gaspi.notify_reset(SEG, id)?;
        let slot = id.0 as u64;
        seg.read((slot * slot_bytes) as usize, &mut x)?;
        for v in 0..batch {
            matvec(&m, &x[v * N..(v + 1) * N], &mut y[v * N..(v + 1) * N]);
        }
        let out = products_at + slot * slot_bytes;
        seg.write(out as usize, as_bytes(&y))?;
        gaspi.write_notify(
            SEG,
            out,
            Rank(0),
            SEG,
            out,
            bytes,
            NotifyId(slots as u32 + id.0),
            seq,
            Queue(0),
        )?;
        gaspi.wait(Queue(0), Timeout::Block)?;
    }
}
