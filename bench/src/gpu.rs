//! The GPU benchmarks: notification round trips between the CPU and a
//! persistent kernel, and GPU-to-GPU ping-pong and bandwidth, each beside
//! its same-run reference (a copy plus a kernel launch per round trip;
//! `cuMemcpyPeer` between the same two GPUs).
//!
//! Without a usable GPU each prints one record whose note says why it was
//! skipped.

use crate::report::{Record, Samples};
use crate::SEG;
use cudarc::driver::{LaunchConfig, PushKernelArg};
use gaspi::cuda::{self as gpu, GpuContext, GpuMemory, GpuStream, PinnedHostMemory};
use gaspi::{Gaspi, Group, Memory, NotifyId, Queue, Rank, ReduceOp, Timeout};
use std::sync::atomic::Ordering;
use std::time::Instant;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// The number of GPUs, or a record saying why the benchmark is skipped.
pub fn gpus(bench: &str) -> Result<u32, Vec<Record>> {
    gpu::driver_available().map_err(|e| {
        let mut r = Record::new(bench, 0);
        r.note = Some(format!("skipped: {e}"));
        vec![r]
    })
}

/// Two GPUs, or a record saying why the benchmark is skipped: two
/// processes on one GPU are time-sliced (no MPS), which measures the
/// scheduler, not the transport. `GASPI_BENCH_SHARE_GPU=1` says the two
/// ranks may share GPU 0 because NVIDIA's Multi-Process Service runs
/// (`nvidia-cuda-mps-control -d`): then their kernels run side by side, as
/// on two GPUs, and only the GPU's copy engines and memory are shared
/// (what a one-GPU machine can say about transports between hosts).
pub fn two_gpus(bench: &str) -> Result<u32, Vec<Record>> {
    let n = gpus(bench)?;
    if n < 2 {
        if n == 1 && std::env::var("GASPI_BENCH_SHARE_GPU").is_ok_and(|v| v == "1") {
            return Ok(1);
        }
        let mut r = Record::new(bench, 0);
        r.note = Some(format!(
            "skipped: needs two GPUs (this host has {n}; two processes sharing one GPU are \
             time-sliced unless MPS runs: then set GASPI_BENCH_SHARE_GPU=1)"
        ));
        return Err(vec![r]);
    }
    Ok(n)
}

/// The device contexts' options: the runtime's defaults, but for
/// `GASPI_BENCH_RING_INLINE_MAX` (bytes a write to another host may carry
/// in the request ring, decision 0093; 0 turns the inline path off, for an
/// A/B of it in one build).
fn device_context_options() -> Res<gaspi::gpu::DeviceContextOptions> {
    let mut options = gaspi::gpu::DeviceContextOptions::default();
    if let Ok(v) = std::env::var("GASPI_BENCH_RING_INLINE_MAX") {
        options.ring_inline_max = v
            .parse()
            .map_err(|e| format!("GASPI_BENCH_RING_INLINE_MAX={v}: {e}"))?;
    }
    Ok(options)
}

/// The device-driven ping-pong's launch: one warp waits and copies; from
/// 16 KiB on, a block of 16 warps copies (one warp's loads in flight do not
/// cover a large message's latency), warp 0 still waits.
fn pingpong_launch(size: u64) -> LaunchConfig {
    let threads = if size >= 16 << 10 { 512 } else { 32 };
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn one_warp() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Spreads (median, p10, p90) of rank `from` to every rank.
fn share(g: &Gaspi, from: Rank, s: &Samples) -> Res<(f64, f64, f64)> {
    let mine = if g.rank() == from && !s.is_empty() {
        [s.median(), s.p10(), s.p90()]
    } else {
        [f64::MIN; 3]
    };
    let mut all = [0.0; 3];
    g.allreduce(&mine, &mut all, ReduceOp::Max, Group::ALL, Timeout::Block)?;
    Ok((all[0], all[1], all[2]))
}

/// notify-rtt's variant for the plain pattern answering with an 8-byte
/// `gaspi_write_notify` (echo.cu: bit 11, mode 64 = waitsome, atomic
/// reset, write_notify of 8 bytes into rank 0's host segment).
const PLAIN_PAYLOAD: u32 = 2048 | (64 << 12);

/// `notify-rtt`: rank 0 (CPU) sets notification 0 of rank 1's GPU
/// segment; a persistent kernel on rank 1 polls it and answers with
/// notification 0 of rank 0's host segment.
pub fn notify_rtt(g: &Gaspi, quick: bool) -> Res<Vec<Record>> {
    let me = g.rank().0;
    let rounds: u32 = if quick { 2_000 } else { 20_000 };
    let warmup = 200u32;
    let memory = if me == 1 {
        Memory::Gpu(0)
    } else {
        Memory::Host
    };
    let seg = g.segment_create(SEG, 4096, memory, Group::ALL, Timeout::Block)?;
    // Reference on rank 1: 4-byte copy of the flag + launch + synchronise.
    let mut reference = Samples::with_capacity(rounds as usize);
    let mut raw = Samples::with_capacity(rounds as usize);
    let mut raw_multi: Vec<(u32, Samples)> = Vec::new();
    let mut gpu_side = None;
    if me == 1 {
        let dctx = g.device_context(0)?;
        let cuda = dctx.gpu_context().cuda().clone();
        let module =
            gaspi::kernels::compile_and_load(&cuda, gaspi::kernels::ECHO_SOURCE, "echo.cu")?;
        let once = gaspi::kernels::function(&module, "gaspi_echo_once")?;
        let stream = GpuStream::new(0)?;
        let flag = GpuMemory::alloc(0, 4096)?;
        let answer = PinnedHostMemory::alloc(0, 4096)?;
        let (flag_ptr, answer_ptr) = (flag.device_ptr(), answer.device_ptr());
        let one = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        for round in 1..=(warmup + rounds) {
            let t = Instant::now();
            // SAFETY: `round` lives across the call (pageable: staged before
            // it returns); `flag` is device memory of 4096 bytes.
            unsafe {
                gpu::copy_host_to_device(&stream, flag_ptr, (&round as *const u32).cast(), 4)?
            };
            // SAFETY: gaspi_echo_once(const unsigned*, unsigned*): both
            // pointers are valid until the synchronize below.
            unsafe {
                stream
                    .cuda()
                    .launch_builder(&once)
                    .arg(&flag_ptr)
                    .arg(&answer_ptr)
                    .launch(one)?
            };
            gpu::synchronize(&stream)?;
            if answer.as_atomic_u32s()[0].load(Ordering::Acquire) != round {
                return Err("reference kernel answered wrongly".into());
            }
            if round > warmup {
                reference.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        // The floor, same run: a raw echo through pinned host-mapped flags,
        // this process's CPU thread on one side, one GPU thread on the other
        // (then one polling thread in each of 2, 4, 8 warps).
        let total = warmup + rounds;
        let raw_echo = |name: &str, threads: u32| -> Res<Samples> {
            let kernel = gaspi::kernels::function(&module, name)?;
            let flags = PinnedHostMemory::alloc(0, 4096)?;
            let words = flags.as_atomic_u32s();
            let (flag_ptr, answer_ptr) = (flags.device_ptr(), flags.device_ptr() + 128);
            let block = LaunchConfig {
                grid_dim: (1, 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: gaspi_echo_raw / gaspi_echo_raw_multi(volatile
            // unsigned*, volatile unsigned*, unsigned): two words of
            // `flags`, which outlives the kernel (synchronised below); the
            // kernel ends after `total` rounds, which the loop below sends.
            unsafe {
                stream
                    .cuda()
                    .launch_builder(&kernel)
                    .arg(&flag_ptr)
                    .arg(&answer_ptr)
                    .arg(&total)
                    .launch(block)?
            };
            let mut raw = Samples::with_capacity(rounds as usize);
            for round in 1..=total {
                let t = Instant::now();
                words[0].store(round, Ordering::Release);
                let spin_start = Instant::now();
                while words[32].load(Ordering::Acquire) != round {
                    std::hint::spin_loop();
                    if spin_start.elapsed() > std::time::Duration::from_secs(10) {
                        return Err("raw echo kernel stopped answering".into());
                    }
                }
                if round > warmup {
                    raw.push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
            gpu::synchronize(&stream)?;
            Ok(raw)
        };
        raw = raw_echo("gaspi_echo_raw", 1)?;
        for warps in [2u32, 4] {
            raw_multi.push((warps, raw_echo("gaspi_echo_raw_multi", 32 * warps)?));
        }
        let echo = gaspi::kernels::function(&module, "gaspi_echo_peer")?;
        gpu_side = Some((dctx, stream, echo));
    }
    let (ref_med, _, _) = share(g, Rank(1), &reference)?;
    let (raw_med, _, _) = share(g, Rank(1), &raw)?;
    let mut out = Vec::new();
    for warps in [2u32, 4] {
        let empty = Samples::default();
        let s = raw_multi
            .iter()
            .find(|(w, _)| *w == warps)
            .map_or(&empty, |(_, s)| s);
        let (med, p10, p90) = share(g, Rank(1), s)?;
        if me == 0 {
            let mut r = Record::new("notify-rtt-floor", 2);
            r.median_us = Some(med);
            r.p10_us = Some(p10);
            r.p90_us = Some(p90);
            r.iters = Some(rounds as u64);
            r = r.with_ref_us("raw echo, one polling thread", raw_med);
            r.note = Some(format!(
                "raw echo through pinned host-mapped flags, one polling thread in each of {warps} warps"
            ));
            out.push(r);
        }
    }
    // NOTIFY_RTT_VARIANTS: which kernel variants to run (see echo.cu).
    let variants: Vec<u32> = std::env::var("NOTIFY_RTT_VARIANTS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![0, PLAIN_PAYLOAD, 24, 384, 1408]);
    for variant in variants {
        if let Some((dctx, stream, echo)) = &gpu_side {
            // Variants whose kernel never clears (the CPU counts up) leave
            // the last round's value behind: start every variant from zero.
            for id in [0, 32] {
                g.notify_reset(SEG, NotifyId(id))?;
            }
            let (arg, seg, peer, total) = (dctx.kernel_arg(), SEG.0 as u32, 0u32, warmup + rounds);
            // SAFETY: gaspi_echo_peer(gaspi_device_ctx, 5 x unsigned); the
            // context outlives the kernel (synchronised below).
            unsafe {
                stream
                    .cuda()
                    .launch_builder(echo)
                    .arg(&arg)
                    .arg(&seg)
                    .arg(&peer)
                    .arg(&seg)
                    .arg(&total)
                    .arg(&variant)
                    .launch(if variant & 256 != 0 {
                        LaunchConfig {
                            block_dim: (64, 1, 1),
                            ..one_warp()
                        }
                    } else {
                        one_warp()
                    })?
            };
        }
        g.barrier(Group::ALL, Timeout::Block)?;
        let mut rtt = Samples::with_capacity(rounds as usize);
        let mut wrong_answers = 0u64;
        if me == 0 {
            // Variant bit 3: ids alternate and each side clears what it
            // received after its next send (see echo.cu).
            let deferred = variant & 8 != 0;
            let mut unreset: Option<(NotifyId, u32)> = None;
            // Exploration variants (bit 11) count wrong answers and missing
            // payloads instead of failing the run.
            let explore = variant & 2048 != 0;
            let payload = explore && (variant >> 12) & 64 != 0;
            let wrong = std::cell::Cell::new(0u64);
            let check = |id: NotifyId, round: u32| -> Res<()> {
                let v = g.notify_reset(SEG, id)?;
                let paid = !payload || seg.read_vec::<u64>(64, 1)?[0] == u64::from(round);
                if v == round && paid {
                    Ok(())
                } else if explore {
                    wrong.set(wrong.get() + 1);
                    Ok(())
                } else {
                    Err(format!("round {round}: answer {v}").into())
                }
            };
            for round in 1..=(warmup + rounds) {
                let id = NotifyId(if deferred { 32 * (round % 2) } else { 0 });
                let t = Instant::now();
                g.notify(Rank(1), SEG, id, round, Queue(0))?;
                if variant & 512 != 0 {
                    // Bit 9: the second poller's own word (see echo.cu).
                    g.notify(Rank(1), SEG, NotifyId(32), round, Queue(0))?;
                }
                if let Some((got, r)) = unreset.take() {
                    check(got, r)?;
                }
                let got = g.notify_waitsome(SEG, id, 1, Timeout::Ms(10_000))?;
                if deferred {
                    unreset = Some((got, round));
                } else {
                    check(got, round)?;
                }
                if round > warmup {
                    rtt.push(t.elapsed().as_secs_f64() * 1e6);
                }
                if round % 256 == 0 {
                    g.wait(Queue(0), Timeout::Block)?;
                }
            }
            if let Some((got, r)) = unreset.take() {
                check(got, r)?;
            }
            g.wait(Queue(0), Timeout::Block)?;
            wrong_answers = wrong.get();
        }
        if let Some((_, stream, _)) = &gpu_side {
            gpu::synchronize(stream)?;
        }
        g.barrier(Group::ALL, Timeout::Block)?;
        if me == 0 {
            let reset = match variant {
                v if v & 2048 != 0 => {
                    let m = v >> 12;
                    format!(
                        "variant {v}: plain pattern, poll {}, reset {}, answer {}{}; wrong answers {wrong_answers}",
                        ["waitsome (acquire)", "relaxed + fence.acq_rel", "relaxed + one ld.acquire", "relaxed only"][(m & 3) as usize],
                        ["atomic exchange", "exchange, value from scan", "plain store", "atomicCAS"][((m >> 2) & 3) as usize],
                        ["gaspi_notify (fence.sc)", "fence.acq_rel + store", "st.release", "relaxed store, no fence"][((m >> 4) & 3) as usize],
                        if m & 64 != 0 { ", 8-byte payload first" } else { "" },
                    )
                }
                0 => "device API as is: acquire polling, atomic-exchange reset, fence + relaxed store".to_string(),
                v if v & 128 != 0 => format!(
                    "variant {v}: values count up: {} (no clear) + \
                     gaspi_notify_relaxed (no fence), {}",
                    if v & 1024 != 0 {
                        "gaspi_notify_wait_above_relaxed"
                    } else {
                        "gaspi_notify_wait_above"
                    },
                    if v & 512 != 0 {
                        "two polling warps on two words the CPU both sets, the first to see a round answers"
                    } else if v & 256 != 0 {
                        "two polling warps, the first to see a round answers"
                    } else {
                        "one polling thread"
                    }
                ),
                v if v & 64 != 0 => format!(
                    "variant {v}: raw kernel on the runtime's words (volatile poll for the \
                     round's value, volatile store answer, no clear, no fence)"
                ),
                v if v & 16 != 0 => format!(
                    "variant {v}: value from the scan (gaspi_notify_waitsome_value), \
                     posted clear (gaspi_notify_clear); {}",
                    if v & 8 != 0 {
                        "answer at once by gaspi_notify_relaxed, then clear + gaspi_fence (ids alternate)"
                    } else if v & 32 != 0 {
                        "answer by a relaxed store without fence"
                    } else {
                        "answer by gaspi_notify (fence + store)"
                    }
                ),
                v => format!(
                    "variant {v}:{}{}{}{}",
                    if v & 1 != 0 { " volatile polling + fence;" } else { "" },
                    if v & 2 != 0 { " plain-store reset;" } else { "" },
                    if v & 4 != 0 { " fence + volatile store answer;" } else { "" },
                    if v & 8 != 0 { " answer first, reset after (ids alternate)" } else { "" }
                ),
            };
            let mut full = Record::new("notify-rtt", 2).with_samples(&rtt);
            full.transport = Some("host-mapped".into());
            full.iters = Some(rounds as u64);
            full = full.with_ref_us("cuMemcpy flag + kernel launch + sync", ref_med);
            full.note = Some(format!(
                "full round trip CPU -> kernel -> CPU; {reset}; floor (raw echo through \
                 pinned host-mapped flags, same run): {raw_med:.3} us"
            ));
            let half = Samples(rtt.0.iter().map(|x| x / 2.0).collect());
            let mut h = Record::new("notify-half-rtt", 2).with_samples(&half);
            h.transport = full.transport.clone();
            h.iters = full.iters;
            h = h.with_ref_us("half of the reference", ref_med / 2.0);
            h.note = Some(reset);
            out.push(full);
            out.push(h);
        }
    }
    Ok(out)
}

/// The reference of the GPU-to-GPU benchmarks: `cuMemcpyPeerAsync` +
/// synchronise between two allocations of this process on the two GPUs;
/// `window` copies per synchronise. Microseconds per copy.
fn peer_copy_us(src_dev: u32, dst_dev: u32, size: u64, iters: u32, window: u32) -> Res<Samples> {
    let src = GpuMemory::alloc(src_dev, size as usize)?;
    let dst = GpuMemory::alloc(dst_dev, size as usize)?;
    let (sctx, dctx) = (GpuContext::new(src_dev)?, GpuContext::new(dst_dev)?);
    if src_dev != dst_dev {
        gpu::enable_peer_access(&sctx, &dctx)?;
    }
    let stream = GpuStream::new(src_dev)?;
    let mut s = Samples::with_capacity(iters as usize);
    for i in 0..(iters + 10) {
        let t = Instant::now();
        for _ in 0..window {
            // SAFETY: both allocations hold `size` bytes and outlive the
            // synchronize below.
            unsafe {
                gpu::copy_device_to_device(
                    &stream,
                    dst.device_ptr(),
                    &dctx,
                    src.device_ptr(),
                    &sctx,
                    size as usize,
                )?
            };
        }
        gpu::synchronize(&stream)?;
        if i >= 10 {
            s.push(t.elapsed().as_secs_f64() * 1e6 / window as f64);
        }
    }
    Ok(s)
}

fn gpu_pair(g: &Gaspi, n: u32, max: u64) -> Res<(u32, u64)> {
    let me = g.rank().0;
    let device = me % n;
    let send_off = max.next_multiple_of(1 << 16);
    g.segment_create(
        SEG,
        2 * send_off,
        Memory::Gpu(device),
        Group::ALL,
        Timeout::Block,
    )?;
    Ok((device, send_off))
}

/// One way the device-driven ping-pong uses the device API (echo.cu).
struct PingpongStyle {
    /// The record's name.
    record: &'static str,
    /// echo.cu's number for it.
    style: u32,
    /// Its kernels for one warp and for a block; `None`: one thread
    /// (`gaspi_gpu_pingpong_thread`).
    kernels: Option<(&'static str, &'static str)>,
    /// The largest size it runs at (one thread copying 1 MiB takes
    /// milliseconds).
    up_to: u64,
}

const PINGPONG_STYLES: [PingpongStyle; 4] = [
    PingpongStyle {
        record: "device-driven",
        style: 0,
        kernels: Some((
            "gaspi_gpu_pingpong_waitsome_warp",
            "gaspi_gpu_pingpong_waitsome_block",
        )),
        up_to: u64::MAX,
    },
    PingpongStyle {
        record: "device-driven-count",
        style: 2,
        kernels: Some((
            "gaspi_gpu_pingpong_count_warp",
            "gaspi_gpu_pingpong_count_block",
        )),
        up_to: u64::MAX,
    },
    PingpongStyle {
        record: "device-driven-route",
        style: 3,
        kernels: Some((
            "gaspi_gpu_pingpong_route_warp",
            "gaspi_gpu_pingpong_route_block",
        )),
        up_to: u64::MAX,
    },
    PingpongStyle {
        record: "device-driven-thread",
        style: 1,
        kernels: None,
        up_to: 64 << 10,
    },
];

/// Round trips per size: `base`, fewer from 64 KiB on (256 MiB worth),
/// at least 100.
fn pingpong_rounds(size: u64, base: u32) -> u32 {
    let by_size = ((256u64 << 20) / size.max(1)).max(100);
    base.min(u32::try_from(by_size).unwrap_or(u32::MAX))
}

/// `gpu-pingpong`: half round trips between GPU segments of two ranks
/// (on two GPUs when there are two), posted by the CPU and by kernels.
/// The kernels use the device API three ways (`PINGPONG_STYLES`): the
/// warp or block waits with `gaspi_notify_waitsome` and resets
/// (`device-driven`), or waits for a value above the last round's
/// (`device-driven-count`, no reset), or the same sending along a route
/// prepared once (`device-driven-route`, `gaspi_write_notify_warp_via`),
/// and one thread does it all
/// (`device-driven-thread`) -- NVSHMEM's warp/block and thread variants of
/// `putmem_signal_nbi` + `signal_wait_until` (bench/peers/nvshmem_pingpong.cu).
pub fn gpu_pingpong(
    g: &Gaspi,
    n: u32,
    sizes: &[u64],
    device_driven: bool,
    quick: bool,
) -> Res<Vec<Record>> {
    let me = g.rank().0;
    let peer = Rank(1 - me);
    let max = sizes.iter().copied().max().unwrap_or(8);
    let (device, send_off) = gpu_pair(g, n, max)?;
    let base_rounds: u32 = if quick { 500 } else { 5_000 };
    // The kernel side, only when asked for (see BENCHMARKS.md).
    let kernel_side = if device_driven {
        let dctx = g.device_context_with(device, device_context_options()?)?;
        let cuda = dctx.gpu_context().cuda().clone();
        let module =
            gaspi::kernels::compile_and_load(&cuda, gaspi::kernels::ECHO_SOURCE, "echo.cu")?;
        let mut kernels = std::collections::HashMap::new();
        for name in PINGPONG_STYLES.iter().flat_map(|p| {
            p.kernels
                .map_or(vec!["gaspi_gpu_pingpong_thread"], |(w, b)| vec![w, b])
        }) {
            kernels.insert(name, gaspi::kernels::function(&module, name)?);
        }
        let stream = cuda.new_stream()?;
        let times = PinnedHostMemory::alloc(device, base_rounds as usize * 8)?;
        Some((dctx, kernels, stream, times))
    } else {
        None
    };
    let mut out = Vec::new();
    let placement = g.segment_notification_placement(SEG)?;
    let shared = if n == 1 { " (shared under MPS)" } else { "" };
    let note_pair = format!(
        "ranks on GPUs 0 and {}{shared}; notifications {placement}",
        1 % n
    );
    for &size in sizes {
        let rounds = pingpong_rounds(size, base_rounds);
        let reference = if me == 0 {
            peer_copy_us(0, 1 % n, size, rounds.min(2000), 1)?
        } else {
            Samples::default()
        };
        // Host-driven.
        g.barrier(Group::ALL, Timeout::Block)?;
        let mut host = Samples::with_capacity(rounds as usize);
        for r in 1..=rounds + 50 {
            let t = Instant::now();
            if me == 0 {
                g.write_notify(SEG, send_off, peer, SEG, 0, size, NotifyId(0), r, Queue(0))?;
                let id = g.notify_waitsome(SEG, NotifyId(1), 1, Timeout::Ms(10_000))?;
                g.notify_reset(SEG, id)?;
            } else {
                let id = g.notify_waitsome(SEG, NotifyId(0), 1, Timeout::Ms(10_000))?;
                g.notify_reset(SEG, id)?;
                g.write_notify(SEG, send_off, peer, SEG, 0, size, NotifyId(1), r, Queue(0))?;
            }
            if r % 128 == 0 {
                g.wait(Queue(0), Timeout::Block)?;
            }
            if r > 50 {
                host.push(t.elapsed().as_secs_f64() * 1e6 / 2.0);
            }
        }
        g.wait(Queue(0), Timeout::Block)?;
        g.barrier(Group::ALL, Timeout::Block)?;
        let mut results = vec![("host-driven", host, String::new())];
        for PingpongStyle {
            record: what,
            style,
            kernels: names,
            up_to,
        } in PINGPONG_STYLES
        {
            let Some((dctx, kernels, stream, times)) = &kernel_side else {
                break;
            };
            if size > up_to {
                continue;
            }
            let (arg, seg, p, initiator) =
                (dctx.kernel_arg(), SEG.0 as u32, peer.0, u32::from(me == 0));
            let times_ptr = times.device_ptr();
            let (launch, name) = match names {
                None => (
                    LaunchConfig {
                        block_dim: (1, 1, 1),
                        ..one_warp()
                    },
                    "gaspi_gpu_pingpong_thread",
                ),
                Some((warp, block)) => {
                    let launch = pingpong_launch(size);
                    (launch, if launch.block_dim.0 > 32 { block } else { warp })
                }
            };
            let kernel = &kernels[name];
            let ring_before = dctx.ring_activity();
            // SAFETY: every gaspi_gpu_pingpong_* kernel takes (gaspi_device_ctx,
            // unsigned, unsigned, u64, u64, unsigned, unsigned, u64*) and is
            // launched with at most the threads of its __launch_bounds__; the
            // times buffer holds base_rounds >= rounds u64 and outlives the
            // kernel (synchronised below).
            unsafe {
                stream
                    .launch_builder(kernel)
                    .arg(&arg)
                    .arg(&seg)
                    .arg(&p)
                    .arg(&size)
                    .arg(&send_off)
                    .arg(&rounds)
                    .arg(&initiator)
                    .arg(&times_ptr)
                    .launch(launch)?
            };
            stream.synchronize()?;
            // Every notification for this rank has arrived once its kernel
            // returned (the initiator saw the last answer, the responder the
            // last request): start the next kernel from zero words.
            g.notify_reset(SEG, NotifyId(0))?;
            g.notify_reset(SEG, NotifyId(1))?;
            g.barrier(Group::ALL, Timeout::Block)?;
            let words = times.as_atomic_u64s();
            let device = Samples(
                (10..rounds as usize)
                    .map(|i| words[i].load(Ordering::Acquire) as f64 / 1e3 / 2.0)
                    .collect(),
            );
            let ring = dctx.ring_activity();
            let (served, inline) = (
                ring.served - ring_before.served,
                ring.inline - ring_before.inline,
            );
            let ring_note = if served > 0 {
                let each = |d: std::time::Duration| d.as_secs_f64() * 1e6 / served as f64;
                format!(
                    "; ring: {served} requests, {inline} inline, {:.2} us issuing and {:.2} us \
                     completing each",
                    each(ring.issuing - ring_before.issuing),
                    each(ring.completing - ring_before.completing)
                )
            } else {
                String::new()
            };
            let how = match style {
                1 => {
                    "; one thread: gaspi_notify_wait_above + gaspi_write_notify_thread".to_string()
                }
                2 => format!(
                    "; {} threads copy; waits with gaspi_notify_wait_above, no reset",
                    launch.block_dim.0
                ),
                3 => format!(
                    "; {} threads copy along a route prepared once (gaspi_write_notify_warp_via); \
                     waits with gaspi_notify_wait_above, no reset",
                    launch.block_dim.0
                ),
                _ => format!(
                    "; {} threads copy; gaspi_notify_waitsome + gaspi_notify_reset",
                    launch.block_dim.0
                ),
            };
            results.push((what, device, how + &ring_note));
        }
        if me == 0 {
            for (what, s, how) in &results {
                let mut r = Record::new("gpu-pingpong", 2).with_samples(s);
                // CUDA IPC on one host; the network transport across hosts.
                let via = match g.transport(peer)? {
                    "shm" => "cuda-ipc",
                    other => other,
                };
                r.transport = Some(format!("{via} {what} words-{placement}"));
                r.size = Some(size);
                r.iters = Some(s.len() as u64);
                r = r.with_ref_us("cuMemcpyPeer + sync", reference.median());
                r.note = Some(format!("half round trip; {note_pair}{how}"));
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// `gpu-bw`: a window of `write`s from one GPU segment into another
/// rank's, then `wait`, against the same window of `cuMemcpyPeerAsync`.
/// With `device_driven`, also the same windows written by a kernel with
/// the device API (`gaspi_gpu_bw_block`, echo.cu), the grid sharing each
/// write as NVSHMEM's bandwidth program shares its puts
/// (bench/peers/nvshmem_bw.cu), timed both ways that program times them.
pub fn gpu_bw(
    g: &Gaspi,
    n: u32,
    sizes: &[u64],
    device_driven: bool,
    quick: bool,
) -> Res<Vec<Record>> {
    let me = g.rank().0;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let (device, send_off) = gpu_pair(g, n, max)?;
    // The writing kernel lives on rank 0; rank 1 only receives.
    let kernel_side = if device_driven && me == 0 {
        Some(BwKernel::new(g, device)?)
    } else {
        None
    };
    let mut out = Vec::new();
    for &size in sizes {
        let window: u32 = if size >= 1 << 20 { 8 } else { 64 };
        let iters: u32 = if quick { 20 } else { 100 };
        let reference = if me == 0 {
            peer_copy_us(0, 1 % n, size, iters, window)?
        } else {
            Samples::default()
        };
        g.barrier(Group::ALL, Timeout::Block)?;
        let mut ours = Samples::with_capacity(iters as usize);
        // Where a window's time goes: posting its writes, then `wait`.
        let (mut posting, mut waiting) = (Samples::default(), Samples::default());
        if me == 0 {
            for i in 0..iters + 5 {
                let t = Instant::now();
                for _ in 0..window {
                    g.write(SEG, send_off, Rank(1), SEG, 0, size, Queue(0))?;
                }
                let posted = t.elapsed();
                g.wait(Queue(0), Timeout::Block)?;
                if i >= 5 {
                    let all = t.elapsed();
                    ours.push(all.as_secs_f64() * 1e6 / window as f64);
                    posting.push(posted.as_secs_f64() * 1e6);
                    waiting.push((all - posted).as_secs_f64() * 1e6);
                }
            }
        }
        let kernel_runs = match &kernel_side {
            Some(k) => k.windows(size, send_off, window, iters)?,
            None => Vec::new(),
        };
        g.barrier(Group::ALL, Timeout::Block)?;
        if me == 0 {
            let gbps = |us: f64| size as f64 / us / 1e3;
            let mut r = Record::new("gpu-bw", 2).with_samples(&ours);
            r.transport = Some("cuda-ipc".into());
            r.size = Some(size);
            r.iters = Some(iters as u64 * window as u64);
            r.gbps = Some(gbps(ours.median()));
            r = r.with_ref_gbps("cuMemcpyPeerAsync, same window", gbps(reference.median()));
            r.note = Some(format!(
                "window {window}; GPUs 0 -> {}; a window: posting {:.1} us, wait {:.1} us (medians)",
                1 % n,
                posting.median(),
                waiting.median()
            ));
            out.push(r);
            for (how, s, note) in kernel_runs {
                let mut r = Record::new("gpu-bw", 2).with_samples(&s);
                r.transport = Some(format!("cuda-ipc {how}"));
                r.size = Some(size);
                r.iters = Some(iters as u64 * window as u64);
                r.gbps = Some(gbps(s.median()));
                r.note = Some(format!("window {window}; GPUs 0 -> {}; {note}", 1 % n));
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// `gpu-bw --device-driven`'s kernel side on the writing rank.
struct BwKernel {
    dctx: gaspi::gpu::DeviceContext,
    /// `gaspi_gpu_bw_block` (echo.cu).
    kernel: cudarc::driver::CudaFunction,
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    /// The first failed device call's code (0: none).
    err: PinnedHostMemory,
    sms: u32,
}

impl BwKernel {
    fn new(g: &Gaspi, device: u32) -> Res<BwKernel> {
        let dctx = g.device_context_with(device, device_context_options()?)?;
        let cuda = dctx.gpu_context().cuda().clone();
        let module =
            gaspi::kernels::compile_and_load(&cuda, gaspi::kernels::ECHO_SOURCE, "echo.cu")?;
        let kernel = gaspi::kernels::function(&module, "gaspi_gpu_bw_block")?;
        let sms = cuda.attribute(
            cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
        )? as u32;
        let stream = cuda.new_stream()?;
        let err = PinnedHostMemory::alloc(device, 8)?;
        Ok(BwKernel {
            dctx,
            kernel,
            stream,
            err,
            sms,
        })
    }

    /// `iters` windows (after 5 unmeasured), timed with events
    /// around each launch (the launches queued back to back, as
    /// nvshmem_bw.cu's first figure) and then on the host from the launch
    /// until the stream is synchronised (its second); per write, us.
    fn windows(
        &self,
        size: u64,
        send_off: u64,
        window: u32,
        iters: u32,
    ) -> Res<Vec<(String, Samples, String)>> {
        // NVSHMEM's grid: a block per 32 KiB, at most one per multiprocessor.
        let blocks = u32::try_from(size / (32 << 10))
            .unwrap_or(u32::MAX)
            .clamp(1, self.sms);
        let threads = if size < 4096 { 32 } else { 512 };
        let launch = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let arg = self.dctx.kernel_arg();
        let (seg, peer, dst_off) = (SEG.0 as u32, 1u32, 0u64);
        let err_ptr = self.err.device_ptr();
        let cuda = self.dctx.gpu_context().cuda().clone();
        let run = |value: u32| -> Res<()> {
            // SAFETY: gaspi_gpu_bw_block takes (gaspi_device_ctx, unsigned,
            // unsigned, u64, u64, u64, unsigned, unsigned, u64*) and is
            // launched with at most its __launch_bounds__ (512) threads;
            // source and destination ranges lie in the segments (send_off +
            // size and size bytes of 2 * send_off), and `err` outlives the
            // launch (synchronised below).
            unsafe {
                self.stream
                    .launch_builder(&self.kernel)
                    .arg(&arg)
                    .arg(&seg)
                    .arg(&peer)
                    .arg(&size)
                    .arg(&send_off)
                    .arg(&dst_off)
                    .arg(&window)
                    .arg(&value)
                    .arg(&err_ptr)
                    .launch(launch)?
            };
            Ok(())
        };
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::with_capacity(iters as usize + 5);
        for i in 0..iters + 5 {
            let start = cuda.new_event(flags)?;
            start.record(&self.stream)?;
            run(i + 1)?;
            let end = cuda.new_event(flags)?;
            end.record(&self.stream)?;
            events.push((start, end));
        }
        self.stream.synchronize()?;
        let mut timed = Samples::with_capacity(iters as usize);
        for (start, end) in &events[5..] {
            timed.push(start.elapsed_ms(end)? as f64 * 1e3 / window as f64);
        }
        let mut host = Samples::with_capacity(iters as usize);
        for i in 0..iters + 5 {
            let t = Instant::now();
            run(i + 1)?;
            self.stream.synchronize()?;
            if i >= 5 {
                host.push(t.elapsed().as_secs_f64() * 1e6 / window as f64);
            }
        }
        let failed = self.err.as_atomic_u64s()[0].load(Ordering::Acquire);
        if failed != 0 {
            return Err(
                format!("gaspi_gpu_bw_block: a device call failed with code -{failed}").into(),
            );
        }
        let grid = format!(
            "{blocks} blocks x {threads} threads, each its part of every write \
             (gaspi_write_via), then one gaspi_notify_via"
        );
        Ok(vec![
            (
                "device-driven".to_string(),
                timed,
                format!("kernel per window, timed with events around its launch; {grid}"),
            ),
            (
                "device-driven host-synchronised".to_string(),
                host,
                format!("kernel per window, host clock from launch to stream synchronised; {grid}"),
            ),
        ])
    }
}

/// `host-gpu-bw`: rank 0 (a CPU rank, host segment) posts a window of
/// `write`s into rank 1's GPU segment on the same host, then `wait`; the
/// reference is the same window of `cuMemcpyHtoDAsync` from pinned memory
/// into device memory, measured by rank 1 in the same run.
pub fn host_gpu_bw(g: &Gaspi, sizes: &[u64], quick: bool) -> Res<Vec<Record>> {
    let me = g.rank().0;
    let max = sizes.iter().copied().max().unwrap_or(8);
    let memory = if me == 1 {
        Memory::Gpu(0)
    } else {
        Memory::Host
    };
    // Rank 0's source starts at 0, rank 1's destination at 0.
    g.segment_create(SEG, max, memory, Group::ALL, Timeout::Block)?;
    let mut out = Vec::new();
    for &size in sizes {
        let window: u32 = if size >= 1 << 20 { 8 } else { 64 };
        let iters: u32 = if quick { 10 } else { 40 };
        let reference = if me == 1 {
            htod_copy_us(size, iters, window)?
        } else {
            Samples::default()
        };
        let (ref_us, _, _) = share(g, Rank(1), &reference)?;
        g.barrier(Group::ALL, Timeout::Block)?;
        let mut ours = Samples::with_capacity(iters as usize);
        if me == 0 {
            for i in 0..iters + 3 {
                let t = Instant::now();
                for _ in 0..window {
                    g.write(SEG, 0, Rank(1), SEG, 0, size, Queue(0))?;
                }
                g.wait(Queue(0), Timeout::Block)?;
                if i >= 3 {
                    ours.push(t.elapsed().as_secs_f64() * 1e6 / window as f64);
                }
            }
        }
        g.barrier(Group::ALL, Timeout::Block)?;
        if me == 0 {
            let gbps = |us: f64| size as f64 / us / 1e3;
            let mut r = Record::new("host-gpu-bw", 2).with_samples(&ours);
            r.transport = Some(g.transport(Rank(1))?.to_string());
            r.size = Some(size);
            r.iters = Some(iters as u64 * window as u64);
            r.gbps = Some(gbps(ours.median()));
            r = r.with_ref_gbps(
                "cuMemcpyHtoDAsync from pinned memory, same window",
                gbps(ref_us),
            );
            r.note = Some(format!(
                "window {window}; CPU rank 0's host segment -> rank 1's GPU segment (GPU 0); \
                 p10-p90 {:.1} - {:.1} GB/s",
                gbps(ours.p90()),
                gbps(ours.p10())
            ));
            out.push(r);
        }
    }
    Ok(out)
}

/// The reference of `host-gpu-bw`: `window` copies of `size` bytes from
/// pinned host memory into device memory per synchronise; microseconds per
/// copy.
fn htod_copy_us(size: u64, iters: u32, window: u32) -> Res<Samples> {
    let src = PinnedHostMemory::alloc(0, size as usize)?;
    let dst = GpuMemory::alloc(0, size as usize)?;
    let stream = GpuStream::new(0)?;
    let mut s = Samples::with_capacity(iters as usize);
    for i in 0..(iters + 3) {
        let t = Instant::now();
        for _ in 0..window {
            // SAFETY: both allocations hold `size` bytes and outlive the
            // synchronize below; nothing writes `src` meanwhile.
            unsafe {
                gpu::copy_host_to_device(&stream, dst.device_ptr(), src.host_ptr(), size as usize)?
            };
        }
        gpu::synchronize(&stream)?;
        if i >= 3 {
            s.push(t.elapsed().as_secs_f64() * 1e6 / window as f64);
        }
    }
    Ok(s)
}
