//! `matvec --gpus N`: the GPU-driven job on several GPUs of one host.
//!
//! Ranks `0..C` are CPU ranks (`--cpu-ranks C`, default 1), ranks
//! `C..C + N` GPU ranks, GPU rank `C + g` on GPU `g`. GPU `g` is fed by CPU
//! rank `g % C`. Every (CPU rank, GPU rank) pair has a segment of its own,
//! id `SEG_BASE + g`, laid out as the two-rank job's (`Layout`): host
//! memory on the CPU rank, GPU memory on the GPU rank, registered with the
//! partner only. The GPU rank runs the two-rank job's persistent kernel
//! (`matvec_serve`) on it, which writes the products straight into the
//! CPU rank's segment of the same id; the CPU rank runs `--slots` feeder
//! threads per GPU, each with two slots in flight (`feed_two`): while a
//! thread checks one slot's products the GPU works on its other slot's
//! batch, so checking (the CPU's share of a batch) no longer idles a
//! slot. Every product is checked, against one period of references
//! (the inputs repeat every [`PERIOD`] vectors, so the references stay in
//! the cache); the threads share the rank's 16 queues and wait for a queue
//! only when it is half full.
//!
//! The job is measured with the first k GPUs fed, for k = 1, 2, 4, ... and
//! N, at every batch size: the scaling against k = 1 in the same launch
//! (`--repeat R`: the whole sequence R times, interleaved, medians shown).
//! For each k the GPU ranks also measure their host-to-device copy
//! bandwidth at the same time (64 MiB copies from pinned memory, back to
//! back for 0.3 s each), whose sum over 128 bytes per vector is the
//! k-GPU PCIe ceiling of the same run.
//!
//! Output: a table (or `--json`: one line per (k, batch) with
//! `"mode":"gpu-multi"`, and one per k with `"mode":"ceiling-multi"`).

use super::{agree_min, gpu, matrix, matvec, max_rel_err, Args, Layout, Res, SlotReport};
use super::{BATCHES, MAX_REL_ERR, N, STOP, VEC_BYTES};
use gaspi::{Config, Gaspi, Group, Memory, Queue, Rank, ReduceOp, SegId, Timeout};
use std::time::{Duration, Instant};

/// Segment id of GPU `g`'s pair: `SEG_BASE + g`.
const SEG_BASE: u8 = 8;
/// The inputs repeat every `PERIOD` vectors (element `i` of an input is a
/// function of `i % 97`, and `97 * N` elements are 97 whole vectors): one
/// period of references checks a whole batch.
const PERIOD: usize = 97;

/// Where this rank stands in the job.
enum Role {
    /// CPU rank `c`, feeding these GPUs.
    Cpu { gpus: Vec<u32> },
    /// GPU rank on GPU `g`, fed by CPU rank `feeder`.
    Gpu { g: u32, feeder: u32 },
}

fn seg_of(g: u32) -> SegId {
    SegId(SEG_BASE + g as u8)
}

/// The GPU counts measured: 1, 2, 4, ... below `n`, and `n`.
fn counts(n: u32) -> Vec<u32> {
    let mut v: Vec<u32> = std::iter::successors(Some(1u32), |k| Some(k * 2))
        .take_while(|&k| k < n)
        .collect();
    v.push(n);
    v
}

/// One measured (k GPUs, batch), on rank 0.
struct Row {
    gpus: u32,
    batch: usize,
    mvps: f64,
    max_err: f32,
    checked: u64,
}

pub fn run(args: &Args, gpus: u32) -> Res {
    let available =
        gaspi::cuda::driver_available().map_err(|e| format!("matvec --gpus needs GPUs: {e}"))?;
    let n = if gpus == 0 { available } else { gpus };
    if n == 0 || n > available {
        return Err(format!("--gpus {gpus}: this host has {available} GPU(s)").into());
    }
    let cpus = args.cpu_ranks.max(1);
    if n > 16 {
        return Err(format!("--gpus {n}: at most 16").into());
    }
    if cpus > n {
        return Err(format!("--cpu-ranks {cpus}: more CPU ranks than GPUs ({n})").into());
    }
    if args.mode != "all" && args.mode != "gpu" {
        return Err("--gpus runs the GPU-driven mode only (--mode gpu)".into());
    }
    let config = Config::from_env()?.standalone_ranks(cpus + n);
    let queues = config.queue_max;
    let config = config.queue_num(queues);
    let gaspi = Gaspi::init(config)?;
    if gaspi.size() != cpus + n {
        return Err(format!(
            "matvec --gpus {n} --cpu-ranks {cpus} needs {} ranks, started with {}",
            cpus + n,
            gaspi.size()
        )
        .into());
    }
    let me = gaspi.rank().0;
    let role = if me < cpus {
        Role::Cpu {
            gpus: (0..n).filter(|g| g % cpus == me).collect(),
        }
    } else {
        Role::Gpu {
            g: me - cpus,
            feeder: (me - cpus) % cpus,
        }
    };
    let batches = if args.batch.is_empty() {
        BATCHES.to_vec()
    } else {
        args.batch.clone()
    };
    let max_batch = *batches.iter().max().unwrap_or(&480);
    // Feeder threads per GPU: the host's cores shared among the GPUs, less
    // three per GPU rank (its inbox thread, which runs the copies into its
    // GPU, its ring thread and its main thread) and one: every one of
    // these threads spins while it waits, so more threads than cores
    // starve the inbox threads (2 GPUs, 32 cores, 14 slots each: 1.69x
    // one GPU at batch 7680).
    let cores = std::thread::available_parallelism().map_or(4, |c| c.get());
    let per_gpu = (cores.saturating_sub(3 * n as usize + 1) / n as usize).clamp(4, 16);
    let threads = agree_min(&gaspi, args.slots.unwrap_or(per_gpu).clamp(1, 16))?;
    // Two slots per feeder thread (the kernel serves at most 32).
    let slots = 2 * threads;
    let layout = Layout {
        slots,
        slot_bytes: (max_batch * VEC_BYTES) as u64,
    };
    // The pairs' segments, each registered with the partner only.
    let mut segments = Vec::new();
    match &role {
        Role::Cpu { gpus } => {
            for &g in gpus {
                let s = gaspi.segment_alloc(seg_of(g), layout.bytes(), Memory::Host)?;
                gaspi.segment_register(seg_of(g), Rank(cpus + g), Timeout::Ms(60_000))?;
                segments.push((g, s));
            }
        }
        Role::Gpu { g, feeder } => {
            let s = gaspi.segment_alloc(seg_of(*g), layout.bytes(), Memory::Gpu(*g))?;
            gaspi.segment_register(seg_of(*g), Rank(*feeder), Timeout::Ms(60_000))?;
            segments.push((*g, s));
        }
    }
    gaspi.barrier(Group::ALL, Timeout::Ms(60_000))?;
    // The persistent kernel's blocks: by default 3 per slot (and the
    // dispatcher), not one per multiprocessor. Every block stores its
    // products across PCIe, and those posted writes hold back the copy
    // engine's reads of the next inputs (one H100: 44 GB/s of copies
    // alone, 19 beside a kernel storing to host memory at 40); fewer
    // storers at once left more room for the inputs: nvidia-h100-x4, 3
    // launches, 4 GPUs at 7680 974 -> 1029 M vectors/s, at 15360 1058 ->
    // 1080, 2 GPUs 550 -> 569 and 613 -> 636, one GPU the same
    // (bench/results/2026-11-27-lead-matvec4, calls 6 and 7).
    let blocks = match args.gpu_blocks {
        0 => 1 + 3 * slots as u32,
        b => b,
    };
    // Made after the barrier: the device context's tables hold the
    // feeder's segment.
    let mut server = match &role {
        Role::Gpu { g, .. } => Some(gpu::Server::persistent(
            &gaspi,
            &segments[0].1,
            layout,
            blocks,
            *g,
        )?),
        Role::Cpu { .. } => None,
    };
    let seconds = Duration::from_secs_f64(args.seconds.max(0.0));
    let mut rows = Vec::new();
    let mut ceilings = Vec::new();
    let plan: Vec<u32> = (0..args.repeat.max(1)).flat_map(|_| counts(n)).collect();
    for k in plan {
        for &batch in &batches {
            if let (Some(s), Role::Gpu { feeder, .. }) = (&mut server, &role) {
                s.prepare_for(&gaspi, batch, *feeder)?;
            }
            gaspi.barrier(Group::ALL, Timeout::Ms(60_000))?;
            let mut mine = (0u64, 0f64, 0f32);
            match &role {
                Role::Cpu { .. } => {
                    let active: Vec<_> = segments.iter().filter(|(g, _)| *g < k).collect();
                    let (vectors, secs, err) =
                        feed_gpus(&gaspi, &active, cpus, layout, batch, seconds)?;
                    // Every GPU of this rank stops, fed or not.
                    for (g, _) in &segments {
                        gaspi.notify(Rank(cpus + g), seg_of(*g), STOP, 1, Queue(0))?;
                    }
                    gaspi.wait(Queue(0), Timeout::Block)?;
                    mine = (vectors, secs, err);
                }
                Role::Gpu { .. } => {
                    if let Some(s) = &mut server {
                        s.serve(&gaspi, batch)?;
                    }
                }
            }
            let vectors = allreduce(&gaspi, mine.0 as f64, ReduceOp::Sum)?;
            let secs = allreduce(&gaspi, mine.1, ReduceOp::Max)?;
            let err = allreduce(&gaspi, f64::from(mine.2), ReduceOp::Max)?;
            let row = Row {
                gpus: k,
                batch,
                mvps: vectors / secs.max(1e-9) / 1e6,
                max_err: err as f32,
                checked: vectors as u64,
            };
            if me == 0 && args.json {
                println!(
                    "{}",
                    serde_json::json!({"mode": "gpu-multi", "gpus": k, "cpu_ranks": cpus,
                        "batch": batch, "mvecs_per_s": row.mvps, "max_rel_err": row.max_err,
                        "vectors_checked": row.checked, "slots_per_gpu": slots})
                );
            }
            rows.push(row);
        }
        let ceiling = ceiling_of(&gaspi, &role, k)?;
        if me == 0 && args.json {
            println!(
                "{}",
                serde_json::json!({"mode": "ceiling-multi", "gpus": k, "cpu_ranks": cpus, "h2d_gbps": ceiling,
                    "mvecs_per_s": ceiling * 1e9 / VEC_BYTES as f64 / 1e6, "bytes_per_vector": VEC_BYTES})
            );
        }
        ceilings.push((k, ceiling));
    }
    if me == 0 && !args.json {
        print_table(&rows, &ceilings, cpus, slots);
    }
    gaspi.barrier(Group::ALL, Timeout::Ms(60_000))?;
    drop(server);
    gaspi.term()?;
    Ok(())
}

fn allreduce(gaspi: &Gaspi, x: f64, op: ReduceOp) -> Res<f64> {
    let mut v = [0.0f64];
    gaspi.allreduce(&[x], &mut v, op, Group::ALL, Timeout::Ms(60_000))?;
    Ok(v[0])
}

/// A CPU rank: feeds the GPUs in `active` for `seconds`, `slots` threads
/// each, every product checked; returns (vectors, seconds, largest error).
fn feed_gpus(
    gaspi: &Gaspi,
    active: &[&(u32, gaspi::Segment)],
    cpus: u32,
    layout: Layout,
    batch: usize,
    seconds: Duration,
) -> Res<(u64, f64, f32)> {
    let m = matrix();
    let mut refs = Vec::with_capacity(layout.pool_len());
    for p in 0..layout.pool_len() {
        let x: Vec<f32> = (0..batch * N)
            .map(|i| (((i * 31 + p * 17) % 97) as f32 - 48.0) / 16.0)
            .collect();
        // Vector v + PERIOD of an input is vector v's (element i's value
        // depends on i mod 97 only, and PERIOD * N is a multiple of 97),
        // so one period of products is every vector's reference.
        let period = PERIOD.min(batch);
        if x[period * N..]
            .chunks_exact(N)
            .zip(x[..period * N].chunks_exact(N).cycle())
            .any(|(a, b)| a != b)
        {
            return Err("matvec inputs are not periodic in PERIOD vectors".into());
        }
        let mut y = vec![0f32; period * N];
        for v in 0..period {
            matvec(&m, &x[v * N..(v + 1) * N], &mut y[v * N..(v + 1) * N]);
        }
        for (_, seg) in active {
            seg.write(layout.pool(p) as usize, &x)?;
        }
        refs.push(y);
    }
    for (g, _) in active {
        for s in 0..layout.slots {
            gaspi.notify_reset(seg_of(*g), layout.product_id(s))?;
        }
    }
    let queues = gaspi.queue_num() as usize;
    let threads = layout.slots / 2;
    // Half the queue's room: the threads sharing a queue each add one
    // write_notify between two looks at its size.
    let wait_at = (gaspi.config().queue_size_max / 2).max(1);
    let start = Instant::now();
    let until = start + seconds;
    let results: Vec<Result<SlotReport, String>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, (g, seg)) in active.iter().enumerate() {
            for t in 0..threads {
                let refs = &refs;
                let feeder = Feeder {
                    gaspi,
                    seg,
                    id: seg_of(*g),
                    layout,
                    batch,
                    refs,
                    target: Rank(cpus + g),
                    queue: Queue(((i * threads + t) % queues) as u32),
                    wait_at,
                };
                handles.push(scope.spawn(move || {
                    feeder
                        .feed_two([t, t + threads], until)
                        .map_err(|e| format!("GPU {g}: {e}"))
                }));
            }
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a feeder panicked".into())))
            .collect()
    });
    let secs = start.elapsed().as_secs_f64();
    let mut total = SlotReport::default();
    for r in results {
        total.add(&r?);
    }
    if active.is_empty() {
        return Ok((0, 0.0, 0.0));
    }
    Ok(((total.sent * batch) as u64, secs, total.max_err))
}

/// What a feeder thread needs to feed one GPU.
struct Feeder<'a> {
    gaspi: &'a Gaspi,
    seg: &'a gaspi::Segment,
    id: SegId,
    layout: Layout,
    batch: usize,
    refs: &'a [Vec<f32>],
    target: Rank,
    queue: Queue,
    /// Queue size from which `post` waits for the queue first.
    wait_at: u32,
}

impl Feeder<'_> {
    /// Sends batch `k` (`k % slots == slot`) into `slot`.
    fn post(&self, slot: usize, k: usize) -> Res {
        let bytes = (self.batch * VEC_BYTES) as u64;
        // The queue's books are settled only when it is half full: feeder
        // threads of several GPUs share a queue (16 queues, up to 16
        // threads per GPU), and a `wait` returns only once every copy on
        // the queue is done, other GPUs' included, so a wait before every
        // post held each thread up behind its neighbours' copies (4 GPUs:
        // three threads a queue). Nothing here needs the wait otherwise:
        // the pool inputs are never rewritten, and this slot's previous
        // input was read before its products came back.
        if self.gaspi.queue_size(self.queue)? >= self.wait_at {
            self.gaspi.wait(self.queue, Timeout::Block)?;
        }
        self.gaspi.write_notify(
            self.id,
            self.layout.pool(k % self.refs.len()),
            self.target,
            self.id,
            self.layout.input(slot),
            bytes,
            gaspi::NotifyId(slot as u32),
            k as u32 + 1,
            self.queue,
        )?;
        Ok(())
    }

    /// Waits for the products of batch `k` in `slot` and checks them all;
    /// returns the largest relative error.
    fn check(&self, slot: usize, k: usize) -> Res<f32> {
        let pid = self.layout.product_id(slot);
        self.gaspi
            .notify_waitsome(self.id, pid, 1, Timeout::Ms(30_000))?;
        let seq = self.gaspi.notify_reset(self.id, pid)?;
        if seq != k as u32 + 1 {
            return Err(format!(
                "slot {slot}: product of batch {} arrived, expected {k}",
                seq.wrapping_sub(1)
            )
            .into());
        }
        let product = self.layout.product(slot) as usize;
        let len = self.batch * N;
        if !matches!(self.seg.memory(), Memory::Host) || product + 4 * len > self.seg.size() {
            return Err("the CPU rank's product slots must lie in its host segment".into());
        }
        // SAFETY: the range lies inside this rank's host segment (checked
        // just above) and is 128-byte aligned in a page-aligned mapping, so
        // it is valid, aligned f32 memory. Only the GPU rank writes it, and
        // only after this slot's next input goes out: batch k's products
        // are complete (notification k + 1, stored after them), and nothing
        // writes the range until this thread posts into the slot again,
        // after the slice's last use.
        let got = unsafe {
            std::slice::from_raw_parts(self.seg.as_ptr().add(product) as *const f32, len)
        };
        // Each period of PERIOD products against the one period of
        // references, which stays in the cache: reading a whole batch of
        // references beside each batch of products (4 GPUs: about 1 G
        // vectors/s, 128 GB/s each) doubled what the checks read from
        // memory.
        let want = &self.refs[k % self.refs.len()];
        let err = got
            .chunks(want.len())
            .map(|g| max_rel_err(g, &want[..g.len()]))
            .fold(0.0f32, |a, e| {
                if e.is_nan() || a.is_nan() {
                    f32::NAN
                } else {
                    a.max(e)
                }
            });
        if err.is_nan() || err > MAX_REL_ERR {
            return Err(format!("batch {k}: relative error {err:e} above {MAX_REL_ERR:e}").into());
        }
        Ok(err)
    }

    /// Keeps a batch in flight in each of two slots until `until`: checks
    /// one slot's products and refills it while the GPU works on the
    /// other's.
    fn feed_two(&self, slots: [usize; 2], until: Instant) -> Res<SlotReport> {
        let n = self.layout.slots;
        let mut r = SlotReport::default();
        let mut next = slots;
        for (i, &s) in slots.iter().enumerate() {
            self.post(s, next[i])?;
        }
        // Out of time, nothing more is posted and what is in flight is
        // collected.
        let mut pending = [true, true];
        let mut i = 0;
        while pending.iter().any(|&p| p) {
            if pending[i] {
                let t0 = Instant::now();
                r.max_err = r.max_err.max(self.check(slots[i], next[i])?);
                r.sent += 1;
                let t1 = Instant::now();
                r.check += t1 - t0;
                pending[i] = t1 < until;
                if pending[i] {
                    next[i] += n;
                    self.post(slots[i], next[i])?;
                    r.post += t1.elapsed();
                }
            }
            i ^= 1;
        }
        Ok(r)
    }
}

/// The host-to-device bandwidth of the first `k` GPUs copying at the same
/// time (GB/s, summed); every rank takes part in the reductions.
fn ceiling_of(gaspi: &Gaspi, role: &Role, k: u32) -> Res<f64> {
    gaspi.barrier(Group::ALL, Timeout::Ms(60_000))?;
    let mine = match role {
        Role::Gpu { g, .. } if *g < k => h2d_for(*g, Duration::from_millis(300))?,
        _ => 0.0,
    };
    allreduce(gaspi, mine, ReduceOp::Sum)
}

/// GB/s of back-to-back 64 MiB copies from pinned memory into GPU `g`'s
/// memory for about `d`.
fn h2d_for(g: u32, d: Duration) -> Res<f64> {
    use gaspi::cuda::{GpuMemory, GpuStream, PinnedHostMemory};
    const LEN: usize = 64 << 20;
    let host = PinnedHostMemory::alloc(g, LEN)?;
    let dev = GpuMemory::alloc(g, LEN)?;
    let stream = GpuStream::new(g)?;
    let start = Instant::now();
    let mut copies = 0u64;
    while copies == 0 || start.elapsed() < d {
        // SAFETY: both buffers hold LEN bytes and outlive the copy, which
        // is complete at the synchronize.
        unsafe {
            gaspi::cuda::copy_host_to_device(&stream, dev.device_ptr(), host.host_ptr(), LEN)?
        };
        gaspi::cuda::synchronize(&stream)?;
        copies += 1;
    }
    Ok((copies * LEN as u64) as f64 / start.elapsed().as_secs_f64() / 1e9)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn print_table(rows: &[Row], ceilings: &[(u32, f64)], cpus: u32, slots: usize) {
    println!(
        "\nmatvec, GPU-driven, {cpus} CPU rank(s) feeding k GPU ranks, {slots} slots per GPU, \
         two per feeder thread (medians of the repeats)"
    );
    println!(
        "{:>5} {:>7} {:>12} {:>10} {:>12} {:>14} {:>12}",
        "GPUs", "batch", "M vectors/s", "x 1 GPU", "PCIe ceiling", "of ceiling", "max rel err"
    );
    let mvps = |k: u32, batch: usize| {
        median(
            rows.iter()
                .filter(|r| r.gpus == k && r.batch == batch)
                .map(|r| r.mvps)
                .collect(),
        )
    };
    let mut keys: Vec<(u32, usize)> = rows.iter().map(|r| (r.gpus, r.batch)).collect();
    keys.sort_unstable();
    keys.dedup();
    for (k, batch) in keys {
        let m = mvps(k, batch);
        let ceiling = median(
            ceilings
                .iter()
                .filter(|c| c.0 == k)
                .map(|c| c.1 * 1e9 / VEC_BYTES as f64 / 1e6)
                .collect(),
        );
        let err = rows
            .iter()
            .filter(|r| r.gpus == k && r.batch == batch)
            .map(|r| r.max_err)
            .fold(0.0f32, f32::max);
        println!(
            "{k:>5} {batch:>7} {m:>12.1} {:>10.2} {ceiling:>12.0} {:>13.0}% {err:>12.2e}",
            m / mvps(1, batch),
            100.0 * m / ceiling,
        );
    }
    let checked: u64 = rows.iter().map(|r| r.checked).sum();
    println!("products checked: {checked} vectors, every one within the error bound");
}
