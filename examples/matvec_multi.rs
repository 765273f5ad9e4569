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
//! threads per GPU (`feed_slot`, each checking every product it gets back;
//! the threads share the rank's 16 queues).
//!
//! The job is measured with the first k GPUs fed, for k = 1, 2, 4, ... and
//! N, at every batch size: the scaling against k = 1 in the same launch.
//! For each k the GPU ranks also measure their host-to-device copy
//! bandwidth at the same time (64 MiB copies from pinned memory, back to
//! back for 0.3 s each), whose sum over 128 bytes per vector is the
//! k-GPU PCIe ceiling of the same run.
//!
//! Output: a table (or `--json`: one line per (k, batch) with
//! `"mode":"gpu-multi"`, and one per k with `"mode":"ceiling-multi"`).

use super::{agree_min, feed_slot, gpu, matrix, matvec, Args, Layout, Res, SlotReport};
use super::{BATCHES, N, STOP, VEC_BYTES};
use gaspi::{Config, Gaspi, Group, Memory, Queue, Rank, ReduceOp, SegId, Timeout};
use std::time::{Duration, Instant};

/// Segment id of GPU `g`'s pair: `SEG_BASE + g`.
const SEG_BASE: u8 = 8;

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
    // Feeder threads per GPU: the CPU ranks' cores shared among their GPUs,
    // two left for each GPU rank's inbox and ring threads (one host).
    let cores = std::thread::available_parallelism().map_or(4, |c| c.get());
    let per_gpu = (cores.saturating_sub(2 * n as usize) / n as usize).clamp(4, 16);
    let slots = agree_min(&gaspi, args.slots.unwrap_or(per_gpu).clamp(1, 16))?;
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
    // Made after the barrier: the device context's tables hold the
    // feeder's segment.
    let mut server = match &role {
        Role::Gpu { g, .. } => Some(gpu::Server::persistent(
            &gaspi,
            &segments[0].1,
            layout,
            args.gpu_blocks,
            *g,
        )?),
        Role::Cpu { .. } => None,
    };
    let seconds = Duration::from_secs_f64(args.seconds.max(0.0));
    let mut rows = Vec::new();
    let mut ceilings = Vec::new();
    for k in counts(n) {
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
                serde_json::json!({"mode": "ceiling-multi", "gpus": k, "h2d_gbps": ceiling,
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
        let mut y = vec![0f32; batch * N];
        for v in 0..batch {
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
    let start = Instant::now();
    let until = Some(start + seconds);
    let results: Vec<Result<SlotReport, String>> = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        for (i, (g, seg)) in active.iter().enumerate() {
            for slot in 0..layout.slots {
                let refs = &refs;
                let queue = Queue(((i * layout.slots + slot) % queues) as u32);
                let target = Rank(cpus + g);
                handles.push(scope.spawn(move || {
                    feed_slot(
                        gaspi,
                        seg,
                        seg_of(*g),
                        layout,
                        batch,
                        usize::MAX,
                        until,
                        slot,
                        refs,
                        &None,
                        target,
                        queue,
                    )
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

fn print_table(rows: &[Row], ceilings: &[(u32, f64)], cpus: u32, slots: usize) {
    println!("\nmatvec, GPU-driven, {cpus} CPU rank(s) feeding k GPU ranks, {slots} slots per GPU");
    println!(
        "{:>5} {:>7} {:>12} {:>10} {:>12} {:>14} {:>12}",
        "GPUs", "batch", "M vectors/s", "x 1 GPU", "PCIe ceiling", "of ceiling", "max rel err"
    );
    for r in rows {
        let one = rows
            .iter()
            .find(|o| o.gpus == 1 && o.batch == r.batch)
            .map_or(f64::NAN, |o| o.mvps);
        let ceiling = ceilings
            .iter()
            .find(|c| c.0 == r.gpus)
            .map_or(f64::NAN, |c| c.1 * 1e9 / VEC_BYTES as f64 / 1e6);
        println!(
            "{:>5} {:>7} {:>12.1} {:>10.2} {:>12.0} {:>13.0}% {:>12.2e}",
            r.gpus,
            r.batch,
            r.mvps,
            r.mvps / one,
            ceiling,
            100.0 * r.mvps / ceiling,
            r.max_err
        );
    }
    let checked: u64 = rows.iter().map(|r| r.checked).sum();
    println!("products checked: {checked} vectors, every one within the error bound");
}
