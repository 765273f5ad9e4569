//! The batched matrix-vector job: a CPU node feeds a GPU node.
//!
//! Rank 0 (the CPU node) streams batches of 32-element f32 vectors into rank
//! 1's segment with `write_notify`; rank 1 multiplies each vector by a
//! constant 32x32 matrix and sends the products back into rank 0's segment
//! with `write_notify`; rank 0 checks every product against a CPU reference
//! and reports millions of vectors per second per batch size; the GPU
//! modes beside the figures of the GPUrdma paper (K40 over InfiniBand).
//! It ends with the number of products checked and the largest error.
//!
//! Several batches are in flight (`--slots`, default one per core, 4 to
//! 16): rank 0 refills a slot as soon as its product came back, so the
//! link never idles. Each slot has its own queue, so refilling one never
//! waits for another's copy.
//!
//! Modes of rank 1:
//! - `host`: rank 1's segment is GPU memory; a CPU thread waits in
//!   `notify_waitsome`, launches a kernel per batch, synchronises and
//!   `write_notify`s the products (how a GPI-2 user writes it);
//! - `gpu`: one persistent kernel (`matvec_serve` in
//!   `gpu-kernels/cuda/matvec.cu`) keeps the matrix in shared memory, waits
//!   on the notification words itself and writes the products straight
//!   into rank 0's segment, then its notification: no launch, no host
//!   thread per batch;
//! - `cpu`: the work done by a CPU loop on a host segment. It runs anywhere
//!   and is what runs when no GPU is present: a functional check of the
//!   runtime, not a performance figure (no paper columns beside it).
//!
//! `cargo run --release --example matvec` runs the job with 2 ranks and
//! every mode this machine can run. `--plot FILE.png` draws the figures.

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
/// terms in different orders, and the GPU's fused multiply-adds, differ by
/// a few ulps).
const MAX_REL_ERR: f32 = 1e-5;
const STOP: NotifyId = NotifyId(1000);
/// Segment of the cpu mode (host memory on both ranks).
const SEG_CPU: SegId = SegId(0);
/// Segment of the GPU modes (GPU memory on rank 1, host memory on rank 0).
const SEG_GPU: SegId = SegId(1);

#[derive(Parser, Clone)]
#[command(
    about = "The batched matrix-vector job: rank 0 (a CPU node) streams batches of \
             32-element vectors into rank 1, which multiplies them by a 32x32 matrix \
             (on its GPU, or a CPU loop where there is none) and writes the products \
             back; rank 0 checks every product and reports million vectors/s per \
             batch size.",
    long_about = "The batched matrix-vector job, the main example of gaspi-rs.\n\n\
        Rank 0 (the CPU node) streams batches of 32-element f32 vectors into rank 1's \
        segment with write_notify; rank 1 multiplies each by a constant 32x32 matrix and \
        writes the products back into rank 0's segment with write_notify; rank 0 checks \
        every product against a CPU reference.\n\n\
        Modes of rank 1: host (a kernel launch per batch), gpu (one persistent kernel \
        that waits and replies by itself) and cpu (a CPU loop, the fallback where there \
        is no GPU). The GPU modes are reported beside the GPUrdma paper's figures (K40 \
        over InfiniBand); the CPU fallback is a functional check of the runtime, not a \
        performance figure.\n\n\
        Started directly it runs 2 ranks on this host; under gaspi-run, srun or mpirun, \
        the launcher's (2) ranks."
)]
struct Args {
    /// Modes to run: cpu, host, gpu, or all (the ones this machine can run).
    #[arg(long, default_value = "all")]
    mode: String,
    /// Batch sizes (vectors per batch).
    #[arg(long, value_delimiter = ',')]
    batch: Vec<usize>,
    /// Vectors to stream per batch size (rounded up to whole batches);
    /// without it each batch size streams for `--seconds`.
    #[arg(long)]
    vectors: Option<usize>,
    /// Seconds to stream per batch size when `--vectors` is not given
    /// (at least `slots` batches either way).
    #[arg(long, default_value_t = 0.5)]
    seconds: f64,
    /// Batches in flight, each with its own queue and feeder thread on
    /// rank 0 (at most 16, the queue limit). Default: the cores of the
    /// host, between 4 and 16: rank 0's feeders check every product, and
    /// at large batches that work is what limits the job.
    #[arg(long)]
    slots: Option<usize>,
    /// One JSON line per (mode, batch).
    #[arg(long)]
    json: bool,
    /// Blocks of the persistent kernel (0: one per multiprocessor; with
    /// --gpus, 3 per slot and the dispatcher).
    #[arg(long, default_value_t = 0)]
    gpu_blocks: u32,
    /// Draw throughput against batch size, per mode, into this PNG.
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
    /// GPU-driven on several GPUs: CPU ranks feed this many GPU ranks, one
    /// per GPU (0: every GPU of the host), measured with 1, 2, 4, ... of
    /// them (see `matvec_multi.rs`). Without it: the two-rank job.
    #[arg(long)]
    gpus: Option<u32>,
    /// With --gpus: CPU ranks feeding the GPU ranks (GPU g is fed by CPU
    /// rank g mod this).
    #[arg(long, default_value_t = 1)]
    cpu_ranks: u32,
    /// With --gpus: measure every GPU count this many times, interleaved
    /// (1, 2, ... N, then again), and report the median.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
}

/// Where things are in both ranks' segments.
///
/// Rank 0's segment also holds the pool of distinct input batches (see
/// `feed`) after the sync words, so a batch goes out with `write_notify`
/// straight from where it lies: no copy into a send slot per batch. The
/// pool area exists in rank 1's segment too (both are made by one
/// `segment_create`) and is unused there.
#[derive(Clone, Copy)]
struct Layout {
    slots: usize,
    slot_bytes: u64,
}

impl Layout {
    fn input(&self, slot: usize) -> u64 {
        slot as u64 * self.slot_bytes
    }
    fn product(&self, slot: usize) -> u64 {
        (self.slots + slot) as u64 * self.slot_bytes
    }
    fn matrix(&self) -> u64 {
        2 * self.slots as u64 * self.slot_bytes
    }
    /// Counter and gate words of the persistent kernel's blocks (4 KiB).
    fn sync(&self) -> u64 {
        self.matrix() + (N * N * 4) as u64
    }
    /// Input batch `p` of rank 0's pool (`pool_len` of them).
    fn pool(&self, p: usize) -> u64 {
        self.sync() + 4096 + p as u64 * self.slot_bytes
    }
    /// The fewest inputs (at least 2) whose count does not divide the
    /// slots: slot `s` gets batches `s, s + slots, ...`, input `k %
    /// pool_len` each, so a slot never gets the same input twice in a row
    /// and a stale product cannot pass the check. Few inputs keep the pool
    /// small enough for the cache the copies read it from (it was `slots +
    /// 1` inputs: 25 x 2 MB per GPU at batch 15360 with 24 slots).
    fn pool_len(&self) -> usize {
        (2..).find(|p| !self.slots.is_multiple_of(*p)).unwrap_or(2)
    }
    fn bytes(&self) -> u64 {
        self.pool(self.pool_len())
    }
    fn product_id(&self, slot: usize) -> NotifyId {
        NotifyId((self.slots + slot) as u32)
    }
}

/// One measured (mode, batch).
struct Row {
    mode: &'static str,
    batch: usize,
    mvps: f64,
    max_err: f32,
    /// Share of rank 0's feeder time spent posting and checking.
    busy: f64,
    /// Products rank 0 checked.
    vectors: usize,
}

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

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

/// Errors reach the user with their `Display` text (`fn main() -> Result`
/// would print their `Debug` form).
fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("matvec: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Res {
    gaspi_launch::init_logging();
    let args = Args::parse();
    if let Some(gpus) = args.gpus {
        return multi::run(&args, gpus);
    }
    let mut config = Config::from_env()?.standalone_ranks(2);
    let cores = std::thread::available_parallelism().map_or(4, |n| n.get());
    let slots = args.slots.unwrap_or(cores.clamp(4, 16));
    // A queue per slot: more slots than the configured queues raise them
    // (up to the maximum); GASPI_QUEUE_NUM above that is kept.
    let wanted = u32::try_from(slots)
        .unwrap_or(u32::MAX)
        .min(config.queue_max);
    if wanted > config.queue_num {
        config = config.queue_num(wanted);
    }
    let gaspi = Gaspi::init(config)?;
    if gaspi.size() < 2 {
        return Err(
            "matvec needs 2 ranks (start it without a launcher, or with gaspi-run -n 2)".into(),
        );
    }
    let me = gaspi.rank().0;
    let batches = if args.batch.is_empty() {
        BATCHES.to_vec()
    } else {
        args.batch.clone()
    };
    let max_batch = *batches.iter().max().unwrap_or(&480);
    // Both ranks must lay their segments out alike: the fewest slots any
    // rank asked for (their hosts may have different core counts).
    let slots = agree_min(&gaspi, slots.clamp(1, gaspi.config().queue_num as usize))?;
    let layout = Layout {
        slots,
        slot_bytes: (max_batch * VEC_BYTES) as u64,
    };
    // Both ranks run on this host: they agree on whether it has a GPU.
    let gpu = gaspi::cuda::driver_available();
    let modes: Vec<&'static str> = match args.mode.as_str() {
        "all" if gpu.is_ok() => vec!["host", "gpu"],
        "all" => vec!["cpu"],
        "cpu" => vec!["cpu"],
        "host" => vec!["host"],
        "gpu" => vec!["gpu"],
        m => return Err(format!("unknown mode {m:?}: cpu, host, gpu or all").into()),
    };
    if let (Err(e), 0) = (&gpu, me) {
        eprintln!(
            "matvec: no usable GPU here ({e}): the CPU fallback runs rank 1's work \
             (a functional check, not a performance figure)"
        );
        if modes.iter().any(|m| *m != "cpu") {
            return Err(format!("mode {} needs a GPU", args.mode).into());
        }
    }
    let mut rows = Vec::new();
    let mut ceiling = None;
    for mode in modes {
        // In the GPU modes rank 0's segment is host memory, the others' GPU.
        let (seg, memory) = match (mode, me) {
            ("cpu", _) => (SEG_CPU, Memory::Host),
            (_, 0) => (SEG_GPU, Memory::Host),
            _ => (SEG_GPU, Memory::Gpu(0)),
        };
        // The GPU modes share their segment: made by the first of them.
        let segment = if gaspi.segment_list().contains(&seg) {
            gaspi.segment(seg)?
        } else {
            gaspi.segment_create(seg, layout.bytes(), memory, Group::ALL, Timeout::Block)?
        };
        let mut server = match (me, mode) {
            (1, "host") => Some(gpu::Server::host(&segment, layout)?),
            (1, "gpu") => Some(gpu::Server::persistent(
                &gaspi,
                &segment,
                layout,
                args.gpu_blocks,
                0,
            )?),
            _ => None,
        };
        if me == 1 && mode != "cpu" && ceiling.is_none() {
            ceiling = Some(gpu::host_to_device_ceiling()?);
        }
        for &batch in &batches {
            if let Some(s) = &mut server {
                s.prepare(&gaspi, batch)?;
            }
            gaspi.barrier(Group::ALL, Timeout::Block)?;
            let amount = match args.vectors {
                Some(v) => Amount::Batches(v.div_ceil(batch).max(slots)),
                None => Amount::For(std::time::Duration::from_secs_f64(args.seconds.max(0.0))),
            };
            match me {
                0 => rows.push(feed(
                    &gaspi, &segment, seg, layout, batch, amount, mode, args.json,
                )?),
                1 => match &mut server {
                    Some(s) => s.serve(&gaspi, batch)?,
                    None => serve_cpu(&gaspi, &segment, layout, batch)?,
                },
                _ => {}
            }
        }
    }
    // Rank 1 measured the physical ceiling; rank 0 prints it.
    let ceiling = share_ceiling(&gaspi, ceiling)?;
    if me == 0 {
        report(&rows, ceiling, &args)?;
    }
    gaspi.barrier(Group::ALL, Timeout::Block)?;
    gaspi.term()?;
    Ok(())
}

/// The smallest `n` of every rank (allreduce min).
fn agree_min(gaspi: &Gaspi, n: usize) -> Res<usize> {
    let mut v = [0.0f64];
    gaspi.allreduce(
        &[n as f64],
        &mut v,
        gaspi::ReduceOp::Min,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    Ok(v[0] as usize)
}

/// Rank 1's host-to-device bandwidth in GB/s, to rank 0 (allreduce max).
fn share_ceiling(gaspi: &Gaspi, mine: Option<f64>) -> Res<Option<f64>> {
    let mut v = [0.0f64];
    gaspi.allreduce(
        &[mine.unwrap_or(0.0)],
        &mut v,
        gaspi::ReduceOp::Max,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    Ok((v[0] > 0.0).then_some(v[0]))
}

fn report(rows: &[Row], ceiling: Option<f64>, args: &Args) -> Res {
    if let Some(gbps) = ceiling {
        let mvps = gbps * 1e9 / VEC_BYTES as f64 / 1e6;
        if args.json {
            println!(
                "{}",
                serde_json::json!({"mode": "ceiling", "h2d_gbps": gbps, "mvecs_per_s": mvps, "bytes_per_vector": VEC_BYTES})
            );
        }
    }
    if !args.json {
        let (cpu, gpu): (Vec<&Row>, Vec<&Row>) = rows.iter().partition(|r| r.mode == "cpu");
        if !gpu.is_empty() {
            println!(
                "\n{:<6} {:>7} {:>12} {:>12} {:>12} {:>14} {:>16}",
                "mode",
                "batch",
                "M vectors/s",
                "max rel err",
                "rank 0 busy",
                "paper: GPI-2",
                "paper: GPUrdma"
            );
            for r in &gpu {
                let paper = PAPER.iter().find(|p| p.0 == r.batch);
                let (g, d) = paper.map_or(("-".into(), "-".into()), |p| {
                    (format!("{:.1}", p.1), format!("{:.1}", p.2))
                });
                println!(
                    "{:<6} {:>7} {:>12.2} {:>12.2e} {:>11.0}% {g:>14} {d:>16}",
                    r.mode,
                    r.batch,
                    r.mvps,
                    r.max_err,
                    r.busy * 100.0
                );
            }
            println!("(host: a kernel launch per batch; gpu: one persistent kernel; rank 0 busy: share of its feeders' time spent posting and checking, the rest waiting for products; paper: GPUrdma, K40 over InfiniBand)");
            if let Some(gbps) = ceiling {
                println!(
                    "physical ceiling: {} bytes per vector over {gbps:.1} GB/s host-to-device (measured in this run) = {:.0} M vectors/s",
                    VEC_BYTES,
                    gbps * 1e9 / VEC_BYTES as f64 / 1e6
                );
            }
        }
        if !cpu.is_empty() {
            println!(
                "\nCPU fallback (no GPU in this run): rank 1's work is a CPU loop. This is a \
                 functional check of the runtime, not a performance figure: the GPU modes' \
                 paper columns (GPU over InfiniBand) do not apply to it."
            );
            println!(
                "{:<6} {:>7} {:>12} {:>12} {:>12}",
                "mode", "batch", "M vectors/s", "max rel err", "rank 0 busy"
            );
            for r in &cpu {
                println!(
                    "{:<6} {:>7} {:>12.2} {:>12.2e} {:>11.0}%",
                    r.mode,
                    r.batch,
                    r.mvps,
                    r.max_err,
                    r.busy * 100.0
                );
            }
        }
    }
    if let Some(path) = &args.plot {
        plot::draw(
            path,
            rows,
            ceiling.map(|g| g * 1e9 / VEC_BYTES as f64 / 1e6),
        )?;
        if !args.json {
            println!("plot written to {}", path.display());
        }
    }
    if !args.json {
        let checked: usize = rows.iter().map(|r| r.vectors).sum();
        let worst = rows.iter().map(|r| r.max_err).fold(0.0f32, f32::max);
        println!(
            "checked {checked} products, each against the CPU reference: largest relative \
             error {worst:.1e} (limit {MAX_REL_ERR:.0e})"
        );
    }
    Ok(())
}

/// How much rank 0 streams per batch size.
#[derive(Clone, Copy)]
enum Amount {
    /// This many batches.
    Batches(usize),
    /// New batches until this long has passed (at least one per slot).
    For(std::time::Duration),
}

/// Rank 0: streams batches (`amount`), checks every product, returns the row.
///
/// One thread per slot, each with its own queue: the thread of slot `s`
/// sends batches s, s + slots, s + 2 slots, ... and checks each product
/// before it sends the next, so sending, waiting and checking of different
/// slots overlap, and the check of one batch never holds up the others.
///
/// Rank 0 touches as little memory per batch as it can, because at large
/// batches its memory traffic is what limits the job (a batch of 15360 is
/// 2 MiB each way): inputs go out from the pool in the segment, products
/// are checked where they landed, against the reference alone.
#[allow(clippy::too_many_arguments)]
fn feed(
    gaspi: &Gaspi,
    seg: &gaspi::Segment,
    id: SegId,
    layout: Layout,
    batch: usize,
    amount: Amount,
    mode: &'static str,
    json: bool,
) -> Res<Row> {
    let slots = layout.slots;
    // The pool of distinct input batches, written into the segment once,
    // and their reference products.
    let m = matrix();
    let mut refs = Vec::with_capacity(layout.pool_len());
    for p in 0..layout.pool_len() {
        let x: Vec<f32> = (0..batch * N)
            .map(|i| (((i * 31 + p * 17) % 97) as f32 - 48.0) / 16.0)
            .collect();
        let mut y = vec![0f32; batch * N];
        for v in 0..batch {
            matvec(&m, &x[v * N..(v + 1) * N], &mut y[v * N..(v + 1) * N]);
        }
        seg.write(layout.pool(p) as usize, &x)?;
        refs.push(y);
    }
    for s in 0..slots {
        gaspi.notify_reset(id, layout.product_id(s))?;
    }
    let bar = (std::io::stdout().is_terminal() && !json).then(|| {
        let b = match amount {
            Amount::Batches(n) => indicatif::ProgressBar::new(n as u64),
            Amount::For(_) => indicatif::ProgressBar::no_length(),
        };
        b.set_message(format!("{mode} batch {batch}"));
        b
    });
    let start = Instant::now();
    let (nbatches, until) = match amount {
        Amount::Batches(n) => (n, None),
        Amount::For(d) => (usize::MAX, Some(start + d)),
    };
    let results: Vec<Result<SlotReport, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..slots)
            .map(|slot| {
                let (refs, bar) = (&refs, &bar);
                scope.spawn(move || {
                    feed_slot(
                        gaspi, seg, id, layout, batch, nbatches, until, slot, refs, bar,
                    )
                    .map_err(|e| e.to_string())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a feeder panicked".into())))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    gaspi.notify(Rank(1), id, STOP, 1, Queue(0))?;
    gaspi.wait(Queue(0), Timeout::Block)?;
    let mut total = SlotReport::default();
    for r in results {
        total.add(&r?);
    }
    let mvps = (total.sent * batch) as f64 / secs / 1e6;
    // Where rank 0's feeders spent the run, as fractions of slots x run
    // time: posting (wait for the queue + write_notify), waiting for the
    // product, checking it. Mostly waiting: rank 1 or the link limits the
    // job; mostly posting or checking: rank 0 does.
    let share = |d: std::time::Duration| d.as_secs_f64() / (secs * slots as f64);
    if json {
        println!(
            "{}",
            serde_json::json!({"mode": mode, "batch": batch, "mvecs_per_s": mvps,
                "max_rel_err": total.max_err, "vectors": total.sent * batch, "slots": slots,
                "rank0_post": share(total.post), "rank0_wait": share(total.wait),
                "rank0_check": share(total.check)})
        );
    }
    Ok(Row {
        mode,
        batch,
        mvps,
        max_err: total.max_err,
        busy: share(total.post) + share(total.check),
        vectors: total.sent * batch,
    })
}

/// What one feeder thread did: batches sent, largest relative error, and
/// where its time went.
#[derive(Default)]
struct SlotReport {
    sent: usize,
    max_err: f32,
    post: std::time::Duration,
    wait: std::time::Duration,
    check: std::time::Duration,
}

impl SlotReport {
    fn add(&mut self, o: &SlotReport) {
        self.sent += o.sent;
        self.max_err = self.max_err.max(o.max_err);
        self.post += o.post;
        self.wait += o.wait;
        self.check += o.check;
    }
}

/// The thread of one slot (see `feed`): batches slot, slot + slots, ...
/// below `nbatches`, and only while `until` has not passed (the first batch
/// always).
#[allow(clippy::too_many_arguments)]
fn feed_slot(
    gaspi: &Gaspi,
    seg: &gaspi::Segment,
    id: SegId,
    layout: Layout,
    batch: usize,
    nbatches: usize,
    until: Option<Instant>,
    slot: usize,
    refs: &[Vec<f32>],
    bar: &Option<indicatif::ProgressBar>,
) -> Res<SlotReport> {
    let (slots, pool) = (layout.slots, refs.len());
    let queue = Queue(slot as u32);
    let bytes = (batch * VEC_BYTES) as u64;
    let pid = layout.product_id(slot);
    let product = layout.product(slot);
    if !matches!(seg.memory(), Memory::Host) || product + bytes > seg.size() as u64 {
        return Err("rank 0's product slots must lie in its host segment".into());
    }
    let mut r = SlotReport::default();
    for k in (slot..nbatches).step_by(slots) {
        let t0 = Instant::now();
        if r.sent > 0 && until.is_some_and(|u| t0 >= u) {
            break;
        }
        r.sent += 1;
        // The slot's previous copy is complete (its product came back);
        // this settles the queue's books.
        gaspi.wait(queue, Timeout::Block)?;
        gaspi.write_notify(
            id,
            layout.pool(k % pool),
            Rank(1),
            id,
            layout.input(slot),
            bytes,
            NotifyId(slot as u32),
            k as u32 + 1,
            queue,
        )?;
        let t1 = Instant::now();
        gaspi.notify_waitsome(id, pid, 1, Timeout::Ms(30_000))?;
        let seq = gaspi.notify_reset(id, pid)?;
        let t2 = Instant::now();
        if seq != k as u32 + 1 {
            return Err(format!(
                "slot {slot}: product of batch {} arrived, expected {k}",
                seq.wrapping_sub(1)
            )
            .into());
        }
        // SAFETY: the range lies inside rank 0's host segment (checked
        // above) and is 128-byte aligned in a page-aligned mapping, so it
        // is valid, aligned f32 memory. Only rank 1 writes it, and only
        // after this slot's next input goes out: its products for batch k
        // are complete (notification k + 1, stored after them), and
        // nothing writes the range until the next `write_notify` of this
        // thread, after the slice's last use.
        let got = unsafe {
            std::slice::from_raw_parts(seg.as_ptr().add(product as usize) as *const f32, batch * N)
        };
        let err = max_rel_err(got, &refs[k % pool]);
        if err.is_nan() || err > MAX_REL_ERR {
            return Err(format!("batch {k}: relative error {err:e} above {MAX_REL_ERR:e}").into());
        }
        r.max_err = r.max_err.max(err);
        if let Some(b) = bar {
            b.inc(1);
        }
        let t3 = Instant::now();
        r.post += t1 - t0;
        r.wait += t2 - t1;
        r.check += t3 - t2;
    }
    Ok(r)
}

/// max |got - want| / max(|want|, 1); NaN when a product is NaN. Eight
/// lanes, so the compiler vectorises it.
fn max_rel_err(got: &[f32], want: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let mut nan = false;
    for (g, w) in got.chunks_exact(8).zip(want.chunks_exact(8)) {
        for i in 0..8 {
            let e = (g[i] - w[i]).abs() / w[i].abs().max(1.0);
            nan |= e.is_nan();
            acc[i] = if e > acc[i] { e } else { acc[i] };
        }
    }
    let tail = got.len() / 8 * 8;
    for i in tail..got.len() {
        let e = (got[i] - want[i]).abs() / want[i].abs().max(1.0);
        nan |= e.is_nan();
        acc[0] = acc[0].max(e);
    }
    if nan {
        return f32::NAN;
    }
    acc.iter().copied().fold(0.0, f32::max)
}

/// Rank 1 without a GPU: waits for batches, multiplies on the CPU, replies.
fn serve_cpu(gaspi: &Gaspi, seg: &gaspi::Segment, layout: Layout, batch: usize) -> Res {
    let m = matrix();
    let bytes = (batch * VEC_BYTES) as u64;
    let mut x = vec![0f32; batch * N];
    let mut y = vec![0f32; batch * N];
    let id = SEG_CPU;
    loop {
        if gaspi.notify_reset(id, STOP)? != 0 {
            return Ok(());
        }
        let got = match gaspi.notify_waitsome(id, NotifyId(0), layout.slots as u32, Timeout::Ms(10))
        {
            Ok(n) => n,
            Err(e) if e.is_timeout() => continue,
            Err(e) => return Err(e.into()),
        };
        let seq = gaspi.notify_reset(id, got)?;
        let slot = got.0 as usize;
        seg.read(layout.input(slot) as usize, &mut x)?;
        for v in 0..batch {
            matvec(&m, &x[v * N..(v + 1) * N], &mut y[v * N..(v + 1) * N]);
        }
        let out = layout.product(slot);
        seg.write(out as usize, as_bytes(&y))?;
        reply(gaspi, id, layout, slot, bytes, seq)?;
    }
}

/// Rank 1: sends the products of `slot` back (notification value `seq`)
/// and waits until they left.
fn reply(gaspi: &Gaspi, id: SegId, layout: Layout, slot: usize, bytes: u64, seq: u32) -> Res {
    let out = layout.product(slot);
    let pid = layout.product_id(slot);
    gaspi.write_notify(id, out, Rank(0), id, out, bytes, pid, seq, Queue(0))?;
    gaspi.wait(Queue(0), Timeout::Block)?;
    Ok(())
}

#[path = "matvec_multi.rs"]
mod multi;

/// Rank 1 with a GPU: the host-driven and the GPU-driven server.
mod gpu {
    use super::{Layout, Res, SEG_GPU, STOP, VEC_BYTES};
    use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
    use gaspi::cuda::{GpuContext, GpuMemory, PinnedHostMemory};
    use gaspi::SegId;
    use gaspi::{Gaspi, NotifyId, Timeout};
    use std::sync::Arc;

    /// Threads per block of both kernels (8 warps, a vector per warp).
    const THREADS: u32 = 256;

    /// What rank 1 serves batches with.
    pub enum Server {
        /// A kernel launch per batch, driven by this thread.
        Host {
            batch_kernel: CudaFunction,
            stream: Arc<CudaStream>,
            data: u64,
            layout: Layout,
            sms: u32,
        },
        /// One persistent kernel per batch size.
        Persistent {
            serve_kernel: CudaFunction,
            stream: Arc<CudaStream>,
            dctx: Box<gaspi::gpu::DeviceContext>,
            status: PinnedHostMemory,
            segment: gaspi::Segment,
            layout: Layout,
            sms: u32,
        },
    }

    impl Server {
        /// The segment the server's notifications arrive in.
        fn seg(&self) -> SegId {
            match self {
                Server::Host { .. } => SEG_GPU,
                Server::Persistent { segment, .. } => segment.id(),
            }
        }
    }

    fn compile(ctx: &GpuContext, name: &str) -> Res<(CudaFunction, Arc<CudaStream>, u32)> {
        let cuda = ctx.cuda();
        let module =
            gaspi::kernels::compile_and_load(cuda, gaspi::kernels::MATVEC_SOURCE, "matvec.cu")?;
        let f = gaspi::kernels::function(&module, name)?;
        let sms = cuda.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )? as u32;
        Ok((f, cuda.new_stream()?, sms))
    }

    fn write_matrix(segment: &gaspi::Segment, layout: Layout) -> Res {
        segment.write(layout.matrix() as usize, &super::matrix())?;
        Ok(())
    }

    impl Server {
        pub fn host(segment: &gaspi::Segment, layout: Layout) -> Res<Server> {
            write_matrix(segment, layout)?;
            let ctx = GpuContext::new(0)?;
            let (batch_kernel, stream, sms) = compile(&ctx, "matvec_batch")?;
            Ok(Server::Host {
                batch_kernel,
                stream,
                data: segment.as_ptr() as u64,
                layout,
                sms,
            })
        }

        /// The persistent kernel on GPU `device`, serving `segment` (GPU
        /// memory of that device; products go to the same segment id on
        /// rank 0, or on the rank `prepare` names).
        pub fn persistent(
            gaspi: &Gaspi,
            segment: &gaspi::Segment,
            layout: Layout,
            blocks: u32,
            device: u32,
        ) -> Res<Server> {
            write_matrix(segment, layout)?;
            // Rank 0's segment is registered here (segment_create): the
            // device context's tables hold it.
            let dctx = Box::new(gaspi.device_context(device)?);
            let (serve_kernel, stream, mut sms) = compile(dctx.gpu_context(), "matvec_serve")?;
            if blocks != 0 {
                sms = sms.min(blocks);
            }
            let status = PinnedHostMemory::alloc(device, 4096)?;
            Ok(Server::Persistent {
                serve_kernel,
                stream,
                dctx,
                status,
                segment: segment.clone(),
                layout,
                sms,
            })
        }

        /// Gets ready for a batch size, before the barrier that lets rank 0
        /// start: the persistent kernel is launched here.
        pub fn prepare(&mut self, gaspi: &Gaspi, batch: usize) -> Res {
            self.prepare_for(gaspi, batch, 0)
        }

        /// `prepare`, with the products going to rank `out_rank`.
        pub fn prepare_for(&mut self, gaspi: &Gaspi, batch: usize, out_rank: u32) -> Res {
            let seg_id = self.seg();
            let Server::Persistent {
                serve_kernel,
                stream,
                dctx,
                status,
                segment,
                layout,
                sms,
            } = self
            else {
                return Ok(());
            };
            // Fresh words, counters and gates (the kernel never resets the
            // slot words; stop is reset once the kernel has returned).
            for s in 0..layout.slots {
                gaspi.notify_reset(seg_id, NotifyId(s as u32))?;
            }
            segment.write(layout.sync() as usize, &[0u32; 1024])?;
            status.as_atomic_u32s()[0].store(0, std::sync::atomic::Ordering::Relaxed);
            let arg = dctx.kernel_arg();
            let (seg, slots) = (seg_id.0 as u32, layout.slots as u32);
            let (slot_bytes, products, matrix, sync) = (
                layout.slot_bytes,
                layout.product(0),
                layout.matrix(),
                layout.sync(),
            );
            let (batch_u, stop, status_ptr) = (batch as u32, STOP.0, status.device_ptr());
            // Every block must be resident at once (they spin): at most
            // one per multiprocessor, fewer for small batches; the same
            // number for every slot (a group of blocks per slot).
            // Block 0 dispatches (see matvec.cu).
            let per_slot = (sms.saturating_sub(1) / slots).clamp(1, batch.div_ceil(8) as u32);
            let blocks = 1 + per_slot * slots;
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: matvec_serve's parameters are (gaspi_device_ctx, 3 x
            // unsigned, 4 x unsigned long long, 2 x unsigned, unsigned*),
            // matching the arguments in order; the device context, the
            // segments and the status memory outlive the kernel, which
            // `serve` synchronises.
            unsafe {
                stream
                    .launch_builder(serve_kernel)
                    .arg(&arg)
                    .arg(&seg)
                    .arg(&out_rank)
                    .arg(&slots)
                    .arg(&slot_bytes)
                    .arg(&products)
                    .arg(&matrix)
                    .arg(&sync)
                    .arg(&batch_u)
                    .arg(&stop)
                    .arg(&status_ptr)
                    .launch(cfg)?
            };
            Ok(())
        }

        /// Serves one batch size until rank 0 says stop.
        pub fn serve(&mut self, gaspi: &Gaspi, batch: usize) -> Res {
            let seg_id = self.seg();
            match self {
                Server::Host {
                    batch_kernel,
                    stream,
                    data,
                    layout,
                    sms,
                } => serve_host(gaspi, batch_kernel, stream, *data, *layout, *sms, batch),
                Server::Persistent {
                    stream,
                    dctx,
                    status,
                    ..
                } => {
                    // The kernel runs until rank 0's stop notification.
                    stream.synchronize()?;
                    gaspi.notify_reset(seg_id, STOP)?;
                    let code =
                        status.as_atomic_u32s()[0].load(std::sync::atomic::Ordering::Relaxed);
                    if code != 0 {
                        return Err(format!("matvec_serve failed with status {code}").into());
                    }
                    if let (n @ 1.., last) = dctx.ring_errors() {
                        return Err(format!(
                            "{n} of matvec_serve's ring requests were refused: {last:?}"
                        )
                        .into());
                    }
                    Ok(())
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn serve_host(
        gaspi: &Gaspi,
        kernel: &CudaFunction,
        stream: &Arc<CudaStream>,
        data: u64,
        layout: Layout,
        sms: u32,
        batch: usize,
    ) -> Res {
        let bytes = (batch * VEC_BYTES) as u64;
        let blocks = (batch.div_ceil(8) as u32).min(sms * 8).max(1);
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let matrix = data + layout.matrix();
        loop {
            if gaspi.notify_reset(SEG_GPU, STOP)? != 0 {
                return Ok(());
            }
            let got = match gaspi.notify_waitsome(
                SEG_GPU,
                NotifyId(0),
                layout.slots as u32,
                Timeout::Ms(10),
            ) {
                Ok(n) => n,
                Err(e) if e.is_timeout() => continue,
                Err(e) => return Err(e.into()),
            };
            let seq = gaspi.notify_reset(SEG_GPU, got)?;
            let slot = got.0 as usize;
            let (input, out) = (data + layout.input(slot), layout.product(slot));
            let (output, n) = (data + out, batch as i32);
            // SAFETY: matvec_batch takes (const float*, const float*,
            // float*, int): the matrix, the slot's inputs and products, all
            // inside rank 1's GPU segment, which outlives the synchronize.
            unsafe {
                stream
                    .launch_builder(kernel)
                    .arg(&matrix)
                    .arg(&input)
                    .arg(&output)
                    .arg(&n)
                    .launch(cfg)?
            };
            stream.synchronize()?;
            super::reply(gaspi, SEG_GPU, layout, slot, bytes, seq)?;
        }
    }

    /// Host-to-device copy bandwidth of GPU 0 from pinned memory, GB/s
    /// (median of 10 copies of 64 MiB): the physical ceiling of the job is
    /// this over the bytes of one vector.
    pub fn host_to_device_ceiling() -> Res<f64> {
        const LEN: usize = 64 << 20;
        let host = PinnedHostMemory::alloc(0, LEN)?;
        let dev = GpuMemory::alloc(0, LEN)?;
        let stream = gaspi::cuda::GpuStream::new(0)?;
        let mut t = Vec::new();
        for _ in 0..10 {
            let start = std::time::Instant::now();
            // SAFETY: both buffers hold LEN bytes and outlive the copy,
            // which is complete at the synchronize.
            unsafe {
                gaspi::cuda::copy_host_to_device(&stream, dev.device_ptr(), host.host_ptr(), LEN)?
            };
            gaspi::cuda::synchronize(&stream)?;
            t.push(start.elapsed().as_secs_f64());
        }
        t.sort_by(f64::total_cmp);
        Ok(LEN as f64 / t[t.len() / 2] / 1e9)
    }
}

/// `--plot`: throughput against batch size, per mode, with the paper's.
mod plot {
    use super::{Res, Row, PAPER};
    use plotters::prelude::*;

    /// DejaVu Sans Mono (license in `examples/assets/DejaVu-LICENSE`):
    /// embedded, so plots need no system fonts.
    const FONT: &[u8] = include_bytes!("assets/DejaVuSansMono.ttf");

    /// The x coordinate of a batch size: log2 of it over the paper's first.
    fn x_of(batch: usize) -> f64 {
        (batch as f64 / PAPER[0].0 as f64).log2()
    }

    fn batch_of(x: f64) -> f64 {
        PAPER[0].0 as f64 * x.exp2()
    }

    pub fn draw(path: &std::path::Path, rows: &[Row], ceiling: Option<f64>) -> Res {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded plot font cannot be read")?;
        let root = BitMapBackend::new(path, (800, 500)).into_drawing_area();
        root.fill(&WHITE)?;
        // The paper's curves (GPUs over InfiniBand) go only beside GPU modes:
        // the CPU fallback is a functional check, not comparable.
        let with_paper = rows.iter().any(|r| r.mode != "cpu");
        let top = rows
            .iter()
            .map(|r| r.mvps)
            .chain(PAPER.iter().map(|p| p.2).filter(|_| with_paper))
            .fold(0.0f64, f64::max)
            .max(1e-3)
            * 1.15;
        let caption = if with_paper {
            "matvec: million vectors/s against batch size"
        } else {
            "matvec, CPU fallback (a functional check, not a performance figure)"
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(-0.3f64..5.3f64, 0f64..top)?;
        chart
            .configure_mesh()
            .x_labels(6)
            .x_label_formatter(&|x| format!("{:.0}", batch_of(*x)))
            .x_desc("vectors per batch (log scale)")
            .y_desc("M vectors/s")
            .draw()?;
        let series: [(&str, RGBColor); 3] = [("gpu", RED), ("host", BLUE), ("cpu", GREEN)];
        for (mode, color) in series {
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .filter(|r| r.mode == mode)
                .map(|r| (x_of(r.batch), r.mvps))
                .collect();
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(format!("ours, {mode}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        let paper = |i: usize| {
            PAPER
                .iter()
                .map(move |p| (x_of(p.0), if i == 1 { p.1 } else { p.2 }))
        };
        if with_paper {
            chart
                .draw_series(LineSeries::new(paper(2), BLACK.stroke_width(1)))?
                .label("paper: GPUrdma (K40, IB)")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
            chart
                .draw_series(LineSeries::new(
                    paper(1),
                    RGBColor(128, 128, 128).stroke_width(1),
                ))?
                .label("paper: GPI-2 (K40, IB)")
                .legend(|(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], RGBColor(128, 128, 128))
                });
        }
        if let Some(c) = ceiling.filter(|c| *c < top) {
            chart
                .draw_series(LineSeries::new(
                    vec![(-0.3, c), (5.3, c)],
                    MAGENTA.stroke_width(1),
                ))?
                .label("ceiling: H2D bandwidth / 128 B")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], MAGENTA));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        root.present()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::max_rel_err;

    #[test]
    fn the_check_sees_one_wrong_element_anywhere_and_nan() {
        // 37 elements: the 8-lane loop and the tail both covered.
        let want: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.75).collect();
        assert_eq!(max_rel_err(&want, &want), 0.0);
        for i in 0..want.len() {
            let mut got = want.clone();
            got[i] += 0.01 * want[i].abs().max(1.0);
            let e = max_rel_err(&got, &want);
            assert!((e - 0.01).abs() < 1e-4, "element {i}: {e}");
            got[i] = f32::NAN;
            assert!(max_rel_err(&got, &want).is_nan(), "NaN at {i} missed");
        }
    }
}
