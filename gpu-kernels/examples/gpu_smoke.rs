//! A standalone check of the GPU layer on a machine with an NVIDIA GPU.
//!
//! Prints one JSON object per line:
//! - `env`: device, driver, NVRTC and gdrcopy availability;
//! - `layout`: the structs shared with CUDA have the same field offsets on
//!   both sides (NVRTC has no `offsetof`, so this is checked on the device);
//! - `segments`: `gaspi-segments`' GPU memory: zeroed and aligned
//!   allocations, copies, stream-ordered notification writes, CUDA IPC into
//!   a second process;
//! - `echo`, `echo_stream_write` and `echo_reference`: notification round
//!   trips between the CPU and a persistent kernel polling a word in
//!   host-mapped memory (set by a CPU store) or in GPU memory (set by
//!   `cuStreamWriteValue32`), against the ordinary way (4-byte copy, kernel
//!   launch, synchronise per round trip);
//! - `matvec_batch` and `matvec_persistent`: batched 32x32 matrix-vector
//!   products checked against a CPU reference, launched per batch and
//!   served by a persistent kernel (1, 16, 64 blocks) with double buffering,
//!   fed through host-mapped memory or copies plus stream-written
//!   notifications;
//! - `ring`: 65,537 requests posted by 8,192 GPU threads through a 256-slot
//!   and a 4096-slot request ring, consumed here and checked one by one.
//!
//! Without a GPU it prints the reason and exits with status 0 (skip).
//! Usage: `gpu_smoke [--rounds N]`. The NVRTC library must be on the
//! library path (e.g. `/usr/local/cuda/lib64`).

use cudarc::driver::{LaunchConfig, PushKernelArg};
use gaspi_gpu_kernels::{
    self as kernels, DeviceCtx, Request, RequestOp, RequestRing, SegmentDesc, STOP_VALUE,
};
use gaspi_segments::gpu::{
    self, GpuContext, GpuIpcMapping, GpuMemory, GpuStream, PinnedHostMemory,
};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

type Check = Result<(), String>;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--ipc-child") {
        std::process::exit(match ipc_child(&args[2..]) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("ipc child: {e}");
                1
            }
        });
    }
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000usize);

    let devices = match gpu::driver_available() {
        Ok(n) => n,
        Err(err) => {
            Json::new("env").str("skip", &err.to_string()).print();
            return;
        }
    };
    let mut failures = 0;
    let mut run = |name: &str, check: Check| {
        if let Err(err) = check {
            failures += 1;
            Json::new(name).bool("ok", false).str("error", &err).print();
        }
    };
    run("env", env(devices));
    run("layout", layout());
    run("segments", segments());
    run("matvec", matvec());
    run("echo", echo(rounds));
    run("ring", ring());
    Json::new("summary")
        .num("failed_checks", failures as f64)
        .print();
    // Exit without unwinding the CUDA objects: if a persistent kernel hung,
    // destroying its context could block.
    std::process::exit(if failures == 0 { 0 } else { 1 });
}

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// One JSON object, printed on one line.
struct Json(String);

impl Json {
    fn new(check: &str) -> Json {
        let mut j = Json(String::from("{"));
        j.raw("check", &quote(check));
        j
    }
    fn raw(&mut self, key: &str, value: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        self.0.push_str(&format!("{}:{}", quote(key), value));
    }
    fn str(mut self, key: &str, value: &str) -> Json {
        self.raw(key, &quote(value));
        self
    }
    fn num(mut self, key: &str, value: f64) -> Json {
        let text = if value.is_finite() {
            format!("{value:.3}")
        } else {
            "null".into()
        };
        self.raw(key, &text);
        self
    }
    fn bool(mut self, key: &str, value: bool) -> Json {
        self.raw(key, if value { "true" } else { "false" });
        self
    }
    fn print(mut self) {
        self.0.push('}');
        println!("{}", self.0);
    }
}

fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn e<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |err| format!("{what}: {err}")
}

/// Percentile of sorted nanosecond samples, in microseconds.
fn pct_us(sorted: &[u64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// A deterministic xorshift generator for test data.
struct Rng(u64);

impl Rng {
    fn f32(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// Spins until `cond` holds, at most `limit`.
fn spin_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..256 {
            if cond() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() > limit {
            return false;
        }
    }
}

fn upload<T: Copy>(stream: &GpuStream, dst: &GpuMemory, data: &[T]) -> Check {
    let bytes = std::mem::size_of_val(data);
    if bytes > dst.len() {
        return Err(format!("upload of {bytes} bytes into {}", dst.len()));
    }
    // SAFETY: `data` is `bytes` readable bytes, `dst` holds at least that
    // many (checked), and the synchronize below ends the copy before either
    // can go away.
    unsafe { gpu::copy_host_to_device(stream, dst.device_ptr(), data.as_ptr().cast(), bytes) }
        .map_err(e("upload"))?;
    gpu::synchronize(stream).map_err(e("sync"))
}

fn download<T: Copy + Default>(
    stream: &GpuStream,
    src: u64,
    count: usize,
) -> Result<Vec<T>, String> {
    let mut out = vec![T::default(); count];
    // SAFETY: `out` has room for `count` values; the caller passes a device
    // range of at least that size; the synchronize ends the copy before
    // `out` is used.
    unsafe {
        gpu::copy_device_to_host(
            stream,
            out.as_mut_ptr().cast(),
            src,
            std::mem::size_of_val(&out[..]),
        )
    }
    .map_err(e("download"))?;
    gpu::synchronize(stream).map_err(e("sync"))?;
    Ok(out)
}

/// A device-side segment table: `local` for rank 0, then the rows of the
/// `remote` table (rank-major), uploaded into device memory.
fn build_ctx(
    stream: &GpuStream,
    local: &[SegmentDesc],
    remote_rows: &[Vec<SegmentDesc>],
) -> Result<(GpuMemory, DeviceCtx), String> {
    let mut all: Vec<SegmentDesc> = local.to_vec();
    for row in remote_rows {
        assert_eq!(row.len(), local.len());
        all.extend_from_slice(row);
    }
    let table = GpuMemory::alloc(0, std::mem::size_of_val(&all[..])).map_err(e("table alloc"))?;
    upload(stream, &table, &all)?;
    let mut ctx = DeviceCtx {
        rank: 0,
        nranks: remote_rows.len() as u32,
        nsegments: local.len() as u32,
        ring_capacity: 0,
        local: table.device_ptr(),
        remote: table.device_ptr() + std::mem::size_of_val(local) as u64,
        ring: 0,
        ring_producer: 0,
        ..DeviceCtx::default()
    };
    ctx.fill_inline(&all);
    Ok((table, ctx))
}

fn compile_load(
    ctx: &GpuContext,
    source: &str,
    name: &str,
) -> Result<std::sync::Arc<cudarc::driver::CudaModule>, String> {
    let arch = kernels::device_arch(ctx.cuda()).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let ptx = kernels::compile_for_arch(source, name, &arch).map_err(|e| e.to_string())?;
    let compiled = start.elapsed();
    let module = kernels::load(ctx.cuda(), ptx).map_err(|e| e.to_string())?;
    Json::new("compile")
        .str("program", name)
        .str("arch", &arch)
        .num("nvrtc_ms", compiled.as_secs_f64() * 1e3)
        .num("total_ms", start.elapsed().as_secs_f64() * 1e3)
        .print();
    Ok(module)
}

// ---------------------------------------------------------------------------
// Checks
// ---------------------------------------------------------------------------

fn env(devices: u32) -> Check {
    let ctx = GpuContext::new(0).map_err(e("context"))?;
    let (major, minor) = ctx.compute_capability().map_err(e("cc"))?;
    let nvrtc = kernels::nvrtc_available().map_err(|e| e.to_string())?;
    let gdr = match gaspi_notify::gdrcopy::gdrcopy_available() {
        Ok(()) => "available".to_string(),
        Err(err) => err.to_string(),
    };
    gpu::enable_peer_access(&ctx, &ctx).map_err(e("peer access with itself"))?;
    Json::new("env")
        .str("device", &ctx.name().map_err(e("name"))?)
        .num("devices", devices as f64)
        .str("compute_capability", &format!("{major}.{minor}"))
        .str("nvrtc", &format!("{}.{}", nvrtc.0, nvrtc.1))
        .str("gdrcopy", &gdr)
        .print();
    Ok(())
}

fn layout() -> Check {
    let ctx = GpuContext::new(0).map_err(e("context"))?;
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    let module = compile_load(&ctx, kernels::RING_STRESS_SOURCE, "ring_stress.cu")?;
    let probe = kernels::function(&module, "gaspi_layout_probe").map_err(|e| e.to_string())?;
    let out = GpuMemory::alloc(0, 4096).map_err(e("alloc"))?;
    let out_ptr = out.device_ptr();
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: gaspi_layout_probe(unsigned long long*) writes 14 values to a
    // 4096-byte device buffer that outlives the download's synchronize.
    unsafe {
        stream
            .cuda()
            .launch_builder(&probe)
            .arg(&out_ptr)
            .launch(cfg)
    }
    .map_err(e("launch"))?;
    let device: Vec<u64> = download(&stream, out_ptr, kernels::LAYOUT_OFFSETS.len())?;
    let ok = device == kernels::LAYOUT_OFFSETS;
    Json::new("layout")
        .bool("ok", ok)
        .str("device", &format!("{device:?}"))
        .str("rust", &format!("{:?}", kernels::LAYOUT_OFFSETS))
        .print();
    if ok {
        Ok(())
    } else {
        Err("CUDA and Rust disagree on the shared layout".into())
    }
}

fn segments() -> Check {
    let ctx = GpuContext::new(0).map_err(e("context"))?;
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    // Zeroed, aligned, rounded.
    let a = GpuMemory::alloc(0, 3 << 20).map_err(e("alloc a"))?;
    let b = GpuMemory::alloc(0, 1000).map_err(e("alloc b"))?;
    let page_mask = gpu::GPU_PAGE_SIZE as u64 - 1;
    let aligned = a.device_ptr() & page_mask == 0 && b.device_ptr() & page_mask == 0;
    let zero: Vec<u8> = download(&stream, a.device_ptr(), a.len())?;
    let zeroed = zero.iter().all(|&x| x == 0);
    // host -> a -> b (device to device) -> host
    let pattern: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    upload(&stream, &a, &pattern)?;
    // SAFETY: both ranges are 60,000 bytes inside live allocations of the
    // same device; synchronized before use.
    unsafe {
        gpu::copy_device_to_device(
            &stream,
            b.device_ptr(),
            &ctx,
            a.device_ptr(),
            &ctx,
            pattern.len(),
        )
    }
    .map_err(e("dtod"))?;
    let back: Vec<u8> = download(&stream, b.device_ptr(), pattern.len())?;
    let copies = back == pattern;
    // Stream-ordered notification after data, into host-mapped and device memory.
    let pinned = PinnedHostMemory::alloc(0, 4096).map_err(e("pinned"))?;
    let pinned_zeroed = pinned
        .as_atomic_u32s()
        .iter()
        .all(|w| w.load(Ordering::Relaxed) == 0);
    // SAFETY: word 3 of the pinned allocation and byte 60,000 of `b` are
    // valid, aligned, device-reachable targets that outlive the synchronize.
    unsafe {
        gpu::stream_write_u32(&stream, pinned.device_ptr() + 12, 0xfeed)
            .map_err(e("write pinned"))?;
        gpu::stream_write_u32(&stream, b.device_ptr() + 60_000, 0xbeef)
            .map_err(e("write device"))?;
    }
    gpu::synchronize(&stream).map_err(e("sync"))?;
    let flag_device: Vec<u32> = download(&stream, b.device_ptr() + 60_000, 1)?;
    let stream_writes =
        pinned.as_atomic_u32s()[3].load(Ordering::Acquire) == 0xfeed && flag_device[0] == 0xbeef;
    // CUDA IPC: a child process opens `a`, writes a pattern and a flag.
    let handle = a.ipc_handle().map_err(e("ipc handle"))?;
    let hex: String = handle.iter().map(|b| format!("{b:02x}")).collect();
    let exe = std::env::current_exe().map_err(e("current_exe"))?;
    let started = Instant::now();
    let status = std::process::Command::new(exe)
        .args([
            "--ipc-child",
            &hex,
            &a.ipc_offset().to_string(),
            &a.len().to_string(),
        ])
        .status()
        .map_err(e("spawn child"))?;
    let child_ms = started.elapsed().as_secs_f64() * 1e3;
    let ipc = if status.success() {
        let data: Vec<u8> = download(&stream, a.device_ptr(), 4100)?;
        let expected: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
        data[..4096] == expected[..]
            && u32::from_le_bytes([data[4096], data[4097], data[4098], data[4099]]) == 0xc0ffee
    } else {
        false
    };
    let ok = aligned && zeroed && copies && pinned_zeroed && stream_writes && ipc;
    Json::new("segments")
        .bool("ok", ok)
        .bool("aligned_64k", aligned)
        .bool("zeroed", zeroed && pinned_zeroed)
        .bool("copies_h2d_d2d_d2h", copies)
        .bool("stream_write_u32", stream_writes)
        .bool("ipc_child_process", ipc)
        .num("ipc_child_ms", child_ms)
        .print();
    if ok {
        Ok(())
    } else {
        Err("a segment memory check failed".into())
    }
}

/// The second process of the IPC check.
fn ipc_child(args: &[String]) -> Check {
    let hex = args.first().ok_or("no handle")?;
    let offset: u64 = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no offset")?;
    let len: usize = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .ok_or("no length")?;
    let mut handle = [0u8; 64];
    for (i, byte) in handle.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2).ok_or("short handle")?, 16)
            .map_err(e("hex"))?;
    }
    let mapping = GpuIpcMapping::open(0, &handle, offset, len).map_err(e("open"))?;
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 256) as u8).collect();
    // SAFETY: the mapping is `len` (>= 4100) bytes and lives past the
    // synchronize; `pattern` too.
    unsafe {
        gpu::copy_host_to_device(
            &stream,
            mapping.device_ptr(),
            pattern.as_ptr(),
            pattern.len(),
        )
        .map_err(e("copy"))?;
        gpu::stream_write_u32(&stream, mapping.device_ptr() + 4096, 0xc0ffee).map_err(e("flag"))?;
    }
    gpu::synchronize(&stream).map_err(e("sync"))
}

/// Runs the persistent echo kernel for `WARMUP + rounds` round trips: `post`
/// sets the request word (at device address `request`), the kernel answers
/// in word 0 of `answer`. Returns the sorted round-trip times (ns) after the
/// warm-up.
fn persistent_echo(
    echo: &cudarc::driver::CudaFunction,
    rounds: usize,
    request: u64,
    post: &dyn Fn(u32) -> Check,
    answer: &PinnedHostMemory,
) -> Result<Vec<u64>, String> {
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    // Segment 0: the word the CPU sets; segment 1: the word the GPU answers in.
    let local = [
        SegmentDesc::direct(0, 0, request, 1),
        SegmentDesc::direct(0, 0, answer.device_ptr(), 1),
    ];
    let (_table, dctx) = build_ctx(&stream, &local, &[local.to_vec()])?;
    let total = (ECHO_WARMUP + rounds) as u32;
    let cfg = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    };
    let (in_seg, out_seg) = (0u32, 1u32);
    // SAFETY: gaspi_echo(gaspi_device_ctx, unsigned, unsigned, unsigned);
    // the context's tables and words live until after the kernel ends
    // (synchronize below, or process exit on failure).
    unsafe {
        stream
            .cuda()
            .launch_builder(echo)
            .arg(&dctx)
            .arg(&in_seg)
            .arg(&out_seg)
            .arg(&total)
            .launch(cfg)
    }
    .map_err(e("launch echo"))?;
    let ans = &answer.as_atomic_u32s()[0];
    let mut samples = Vec::with_capacity(rounds);
    for round in 1..=total {
        let start = Instant::now();
        post(round)?;
        if !spin_until(Duration::from_secs(5), || ans.load(Ordering::Acquire) != 0) {
            let _ = post(STOP_VALUE);
            return Err(format!("no answer to round {round} within 5 s"));
        }
        let got = ans.swap(0, Ordering::AcqRel);
        let elapsed = start.elapsed().as_nanos() as u64;
        if got != round {
            let _ = post(STOP_VALUE);
            return Err(format!("round {round} answered with {got}"));
        }
        if round as usize > ECHO_WARMUP {
            samples.push(elapsed);
        }
    }
    // The kernel exits after `total` rounds by itself.
    gpu::synchronize(&stream).map_err(e("sync echo"))?;
    samples.sort_unstable();
    Ok(samples)
}

const ECHO_WARMUP: usize = 200;

fn echo(rounds: usize) -> Check {
    const WARMUP: usize = ECHO_WARMUP;
    let ctx = GpuContext::new(0).map_err(e("context"))?;
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    let module = compile_load(&ctx, kernels::ECHO_SOURCE, "echo.cu")?;
    let echo = kernels::function(&module, "gaspi_echo").map_err(|e| e.to_string())?;
    let once = kernels::function(&module, "gaspi_echo_once").map_err(|e| e.to_string())?;
    let answer = PinnedHostMemory::alloc(0, 4096).map_err(e("pinned"))?;

    // (1) The request word in host-mapped memory: the CPU stores it.
    let request = PinnedHostMemory::alloc(0, 4096).map_err(e("pinned"))?;
    let req = &request.as_atomic_u32s()[0];
    let store = |value: u32| -> Check {
        req.store(value, Ordering::Release);
        Ok(())
    };
    let samples = persistent_echo(&echo, rounds, request.device_ptr(), &store, &answer)?;
    let persistent = (
        pct_us(&samples, 0.5),
        pct_us(&samples, 0.1),
        pct_us(&samples, 0.9),
    );
    Json::new("echo")
        .str(
            "what",
            "CPU store -> persistent kernel polls host-mapped word -> GPU store -> CPU polls",
        )
        .num("rounds", rounds as f64)
        .num("median_us", persistent.0)
        .num("p10_us", persistent.1)
        .num("p90_us", persistent.2)
        .num("min_us", samples[0] as f64 / 1000.0)
        .print();

    // (2) The request word in GPU memory, set by cuStreamWriteValue32.
    let device_word = GpuMemory::alloc(0, 4096).map_err(e("device word"))?;
    let feeder = GpuStream::new(0).map_err(e("feeder"))?;
    let stream_write = |value: u32| -> Check {
        // SAFETY: word 0 of `device_word` is valid device memory that
        // outlives every write (the allocation lives to the end of `echo`).
        unsafe { gpu::stream_write_u32(&feeder, device_word.device_ptr(), value) }
            .map_err(e("stream write"))
    };
    let written = persistent_echo(
        &echo,
        rounds,
        device_word.device_ptr(),
        &stream_write,
        &answer,
    )?;
    gpu::synchronize(&feeder).map_err(e("sync feeder"))?;
    Json::new("echo_stream_write")
        .str(
            "what",
            "cuStreamWriteValue32 into GPU memory -> persistent kernel polls it -> GPU store -> CPU polls",
        )
        .num("rounds", rounds as f64)
        .num("median_us", pct_us(&written, 0.5))
        .num("p10_us", pct_us(&written, 0.1))
        .num("p90_us", pct_us(&written, 0.9))
        .num("min_us", written[0] as f64 / 1000.0)
        .print();

    // (3) The ordinary way: copy the flag, launch, synchronise, per round trip.
    let total = (WARMUP + rounds) as u32;
    let flag = GpuMemory::alloc(0, 4096).map_err(e("flag"))?;
    let flag_ptr = flag.device_ptr();
    let answer_ptr = answer.device_ptr() + 64;
    let ans = &answer.as_atomic_u32s()[16];
    let one = LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1, 1, 1),
        shared_mem_bytes: 0,
    };
    let mut reference = Vec::with_capacity(rounds);
    for round in 1..=total {
        let start = Instant::now();
        // SAFETY: `round` lives across the call (pageable source: the driver
        // stages it before returning); `flag` is 4096 bytes of device memory.
        unsafe { gpu::copy_host_to_device(&stream, flag_ptr, (&round as *const u32).cast(), 4) }
            .map_err(e("copy flag"))?;
        // SAFETY: gaspi_echo_once(const unsigned*, unsigned*) reads the flag
        // and writes one word of host-mapped memory, both alive until sync.
        unsafe {
            stream
                .cuda()
                .launch_builder(&once)
                .arg(&flag_ptr)
                .arg(&answer_ptr)
                .launch(one)
        }
        .map_err(e("launch once"))?;
        gpu::synchronize(&stream).map_err(e("sync once"))?;
        let got = ans.load(Ordering::Acquire);
        let elapsed = start.elapsed().as_nanos() as u64;
        if got != round {
            return Err(format!("reference round {round} answered with {got}"));
        }
        if round as usize > WARMUP {
            reference.push(elapsed);
        }
    }
    reference.sort_unstable();
    let ordinary = (
        pct_us(&reference, 0.5),
        pct_us(&reference, 0.1),
        pct_us(&reference, 0.9),
    );
    Json::new("echo_reference")
        .str(
            "what",
            "4-byte cuMemcpyHtoDAsync of the flag + kernel launch + cuStreamSynchronize",
        )
        .num("rounds", rounds as f64)
        .num("median_us", ordinary.0)
        .num("p10_us", ordinary.1)
        .num("p90_us", ordinary.2)
        .num("min_us", reference[0] as f64 / 1000.0)
        .num("speedup_median", ordinary.0 / persistent.0)
        .print();
    Ok(())
}

const N: usize = 32;

fn matvec_cpu(m: &[f32], x: &[f32], y: &mut [f32]) {
    for (i, yi) in y.iter_mut().enumerate() {
        *yi = (0..N).map(|j| m[i * N + j] * x[j]).sum();
    }
}

fn max_error(m: &[f32], input: &[f32], output: &[f32]) -> f32 {
    let mut worst = 0.0f32;
    let mut y = [0.0f32; N];
    for (x, got) in input.chunks_exact(N).zip(output.chunks_exact(N)) {
        matvec_cpu(m, x, &mut y);
        for (a, b) in y.iter().zip(got) {
            worst = worst.max((a - b).abs() / (1.0 + a.abs()));
        }
    }
    worst
}

fn matvec() -> Check {
    const CAP: usize = 4096; // vectors per batch
    const BATCHES: usize = 64;
    const TOLERANCE: f32 = 1e-4;
    let ctx = GpuContext::new(0).map_err(e("context"))?;
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    let module = compile_load(&ctx, kernels::MATVEC_SOURCE, "matvec.cu")?;
    let batch_fn = kernels::function(&module, "matvec_batch").map_err(|e| e.to_string())?;
    let persistent_fn =
        kernels::function(&module, "matvec_persistent").map_err(|e| e.to_string())?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let matrix: Vec<f32> = (0..N * N).map(|_| rng.f32()).collect();
    let batch_floats = CAP * N;
    let batch_bytes = batch_floats * 4;
    // All inputs, pinned, so both variants start from the same host memory.
    let inputs = PinnedHostMemory::alloc(0, BATCHES * batch_bytes).map_err(e("inputs"))?;
    // SAFETY: freshly allocated, exclusively ours, BATCHES * batch_floats f32.
    let input: &mut [f32] =
        unsafe { std::slice::from_raw_parts_mut(inputs.host_ptr().cast(), BATCHES * batch_floats) };
    input.iter_mut().for_each(|x| *x = rng.f32());
    let input: &[f32] = input;

    // (a) one launch per batch.
    let m_dev = GpuMemory::alloc(0, N * N * 4).map_err(e("alloc"))?;
    let in_dev = GpuMemory::alloc(0, batch_bytes).map_err(e("alloc"))?;
    let out_dev = GpuMemory::alloc(0, batch_bytes).map_err(e("alloc"))?;
    upload(&stream, &m_dev, &matrix)?;
    let results = PinnedHostMemory::alloc(0, BATCHES * batch_bytes).map_err(e("results"))?;
    let (m_ptr, in_ptr, out_ptr, nvec) = (
        m_dev.device_ptr(),
        in_dev.device_ptr(),
        out_dev.device_ptr(),
        CAP as i32,
    );
    let cfg = LaunchConfig {
        grid_dim: ((CAP / 8) as u32, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    };
    let start = Instant::now();
    for k in 0..BATCHES {
        // SAFETY: the pinned source and destination batches and the device
        // buffers are batch_bytes long and live past the synchronize;
        // matvec_batch(const float*, const float*, float*, int) touches
        // nvec * 32 floats of each.
        unsafe {
            gpu::copy_host_to_device(
                &stream,
                in_ptr,
                inputs.host_ptr().add(k * batch_bytes),
                batch_bytes,
            )
            .map_err(e("h2d"))?;
            stream
                .cuda()
                .launch_builder(&batch_fn)
                .arg(&m_ptr)
                .arg(&in_ptr)
                .arg(&out_ptr)
                .arg(&nvec)
                .launch(cfg)
                .map_err(e("launch"))?;
            gpu::copy_device_to_host(
                &stream,
                results.host_ptr().add(k * batch_bytes),
                out_ptr,
                batch_bytes,
            )
            .map_err(e("d2h"))?;
        }
        gpu::synchronize(&stream).map_err(e("sync"))?;
    }
    let per_launch = start.elapsed().as_secs_f64();
    // SAFETY: the results buffer holds BATCHES * batch_floats f32 written by
    // the copies above, all finished (synchronized).
    let output: &[f32] =
        unsafe { std::slice::from_raw_parts(results.host_ptr().cast(), BATCHES * batch_floats) };
    let err_a = max_error(&matrix, input, output);
    let vectors = (BATCHES * CAP) as f64;
    Json::new("matvec_batch")
        .bool("ok", err_a <= TOLERANCE)
        .str(
            "what",
            "per batch: H2D copy + matvec_batch launch + D2H copy + sync",
        )
        .num("batches", BATCHES as f64)
        .num("vectors_per_batch", CAP as f64)
        .num("max_rel_error", err_a as f64)
        .num("seconds", per_launch)
        .num("mvectors_per_s", vectors / per_launch / 1e6)
        .print();

    // (b) the persistent kernel, double buffered, fed two ways.
    let batches = Batches {
        matrix: &matrix,
        inputs: &inputs,
        input,
        batch_bytes,
    };
    let mut worst = err_a;
    for feed in [Feed::HostStores, Feed::CopyAndStreamWrite] {
        for blocks in [1u32, 16, 64] {
            let (err_b, seconds) =
                matvec_persistent(&stream, &persistent_fn, &batches, feed, blocks)?;
            worst = worst.max(err_b);
            Json::new("matvec_persistent")
                .bool("ok", err_b <= TOLERANCE)
                .str("feed", feed.describe())
                .num("blocks", blocks as f64)
                .str(
                    "what",
                    "persistent kernel (blocks of 1024): waitsome, compute, gaspi_write_notify \
                     into a host-mapped segment; double buffered",
                )
                .num("batches", BATCHES as f64)
                .num("vectors_per_batch", CAP as f64)
                .num("max_rel_error", err_b as f64)
                .num("seconds", seconds)
                .num("mvectors_per_s", vectors / seconds / 1e6)
                .num("reference_mvectors_per_s", vectors / per_launch / 1e6)
                .print();
        }
    }
    if worst <= TOLERANCE {
        Ok(())
    } else {
        Err(format!("results differ from the CPU reference by {worst}"))
    }
}

/// How the CPU hands a batch to the persistent kernel.
#[derive(Clone, Copy, Debug)]
enum Feed {
    /// The input segment is pinned host memory mapped into the GPU: the CPU
    /// stores the vectors and then the notification word; the kernel reads
    /// both across PCIe.
    HostStores,
    /// The input segment is GPU memory: the CPU enqueues a copy and then a
    /// `cuStreamWriteValue32` of the notification on a second stream (the
    /// runtime's path for writing into a same-host GPU segment).
    CopyAndStreamWrite,
}

impl Feed {
    fn describe(self) -> &'static str {
        match self {
            Feed::HostStores => "CPU stores into host-mapped input segment, kernel reads over PCIe",
            Feed::CopyAndStreamWrite => {
                "H2D copy + cuStreamWriteValue32 notification into GPU-memory input segment"
            }
        }
    }
}

/// The test data of the matvec checks.
struct Batches<'a> {
    matrix: &'a [f32],
    inputs: &'a PinnedHostMemory,
    input: &'a [f32],
    batch_bytes: usize,
}

/// Runs all batches through matvec_persistent on `blocks` blocks; returns
/// the worst relative error and the seconds from the first batch posted to
/// the last collected.
fn matvec_persistent(
    stream: &GpuStream,
    function: &cudarc::driver::CudaFunction,
    data: &Batches,
    feed: Feed,
    blocks: u32,
) -> Result<(f32, f64), String> {
    const CAP: usize = 4096;
    let g = blocks as usize;
    let batch_bytes = data.batch_bytes;
    let batches = data.input.len() * 4 / batch_bytes;
    // Segment 0 (in): matrix + 2 input buffers, then 2 * G notification words.
    // Segment 1 (work): 2 result buffers in GPU memory (+ unused words).
    // Segment 2 (out): 2 result buffers + 2 * G words, host-mapped (direct store).
    let in_data = 4096 + 2 * batch_bytes;
    let words = 2 * g;
    let in_host = PinnedHostMemory::alloc(0, in_data + 4 * words).map_err(e("in seg"))?;
    let in_gpu = GpuMemory::alloc(0, in_data + 4 * words).map_err(e("in seg"))?;
    let in_ptr = match feed {
        Feed::HostStores => in_host.device_ptr(),
        Feed::CopyAndStreamWrite => in_gpu.device_ptr(),
    };
    let out_data = 2 * batch_bytes;
    let work = GpuMemory::alloc(0, out_data + 4 * words).map_err(e("work seg"))?;
    let out_seg = PinnedHostMemory::alloc(0, out_data + 4 * words).map_err(e("out seg"))?;
    let local = [
        SegmentDesc::direct(
            in_ptr,
            in_data as u64,
            in_ptr + in_data as u64,
            words as u32,
        ),
        SegmentDesc::direct(
            work.device_ptr(),
            out_data as u64,
            work.device_ptr() + out_data as u64,
            words as u32,
        ),
        SegmentDesc::direct(
            out_seg.device_ptr(),
            out_data as u64,
            out_seg.device_ptr() + out_data as u64,
            words as u32,
        ),
    ];
    let (_table, dctx) = build_ctx(stream, &local, &[local.to_vec()])?;
    let feeder = GpuStream::new(0).map_err(e("feed stream"))?;
    match feed {
        // SAFETY: the matrix area (4096 bytes) of the input segment is ours
        // until the kernel starts.
        Feed::HostStores => unsafe {
            std::ptr::copy_nonoverlapping(
                data.matrix.as_ptr(),
                in_host.host_ptr().cast::<f32>(),
                N * N,
            )
        },
        Feed::CopyAndStreamWrite => upload(stream, &in_gpu, data.matrix)?,
    }
    let in_words = &in_host.as_atomic_u32s()[in_data / 4..in_data / 4 + words];
    let out_words = &out_seg.as_atomic_u32s()[out_data / 4..out_data / 4 + words];
    let collected = PinnedHostMemory::alloc(0, batches * batch_bytes).map_err(e("collected"))?;
    let (seg_in, seg_work, out_rank, seg_out, cap) = (0u32, 1u32, 0u32, 2u32, CAP as u32);
    let grid = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: matvec_persistent(gaspi_device_ctx, unsigned x5); every
    // segment it reaches lives until the kernel ends (synchronize below or
    // process exit).
    unsafe {
        stream
            .cuda()
            .launch_builder(function)
            .arg(&dctx)
            .arg(&seg_in)
            .arg(&seg_work)
            .arg(&out_rank)
            .arg(&seg_out)
            .arg(&cap)
            .launch(grid)
    }
    .map_err(e("launch persistent"))?;
    // Sets the G notifications of input buffer `b` to `value`, as `feed` says.
    let notify = |b: usize, value: u32| -> Check {
        for (i, host_word) in in_words[b * g..(b + 1) * g].iter().enumerate() {
            let word = b * g + i;
            match feed {
                Feed::HostStores => host_word.store(value, Ordering::Release),
                // SAFETY: `word` < 2G lies in the notification area of the
                // GPU input segment, which outlives the final synchronize.
                Feed::CopyAndStreamWrite => unsafe {
                    gpu::stream_write_u32(&feeder, in_ptr + (in_data + 4 * word) as u64, value)
                        .map_err(e("stream write"))?
                },
            }
        }
        Ok(())
    };
    let stop = |why: String| {
        let _ = notify(batches % 2, STOP_VALUE);
        let _ = notify((batches + 1) % 2, STOP_VALUE);
        why
    };
    let collect = |k: usize| -> Check {
        let b = k % 2;
        for word in &out_words[b * g..(b + 1) * g] {
            if !spin_until(Duration::from_secs(10), || {
                word.load(Ordering::Acquire) != 0
            }) {
                return Err(format!("no result for batch {k} within 10 s"));
            }
            let got = word.swap(0, Ordering::AcqRel);
            if got != cap {
                return Err(format!("batch {k} notified {got} vectors"));
            }
        }
        // SAFETY: result buffer b of the out segment is complete (all its
        // notifications were acquired) and not written again before we post
        // batch k + 2; the destination is batch k of `collected`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                out_seg.host_ptr().add(b * batch_bytes),
                collected.host_ptr().add(k * batch_bytes),
                batch_bytes,
            )
        };
        Ok(())
    };
    let start = Instant::now();
    for k in 0..batches {
        let b = k % 2;
        if k >= 2 {
            collect(k - 2).map_err(stop)?;
        }
        // Input buffer b is free: the result of its previous batch has been
        // collected, so the kernel is done reading it.
        let source = data.inputs.host_ptr().wrapping_add(k * batch_bytes);
        let target = 4096 + b * batch_bytes;
        match feed {
            // SAFETY: source batch k and input buffer b are batch_bytes long,
            // distinct, and nobody else touches them now.
            Feed::HostStores => unsafe {
                std::ptr::copy_nonoverlapping(source, in_host.host_ptr().add(target), batch_bytes)
            },
            // SAFETY: pinned source batch k outlives the copy (it lives until
            // the end of the check, after the final synchronize); the target
            // buffer is free as argued above.
            Feed::CopyAndStreamWrite => unsafe {
                gpu::copy_host_to_device(&feeder, in_ptr + target as u64, source, batch_bytes)
                    .map_err(e("feed copy"))?
            },
        }
        notify(b, cap)?;
    }
    for k in batches.saturating_sub(2)..batches {
        collect(k).map_err(stop)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    notify(batches % 2, STOP_VALUE)?;
    gpu::synchronize(&feeder).map_err(e("sync feeder"))?;
    gpu::synchronize(stream).map_err(e("sync persistent"))?;
    // SAFETY: all batches were collected into `collected`.
    let output: &[f32] = unsafe {
        std::slice::from_raw_parts(collected.host_ptr().cast(), batches * batch_bytes / 4)
    };
    Ok((max_error(data.matrix, data.input, output), seconds))
}

fn ring() -> Check {
    for capacity in [256, 4096] {
        ring_with(capacity)?;
    }
    Ok(())
}

fn ring_with(capacity: u32) -> Check {
    const BLOCKS: u32 = 64;
    const THREADS: u32 = 128;
    const PER_THREAD: u32 = 8;
    let ctx = GpuContext::new(0).map_err(e("context"))?;
    let stream = GpuStream::new(0).map_err(e("stream"))?;
    let module = compile_load(&ctx, kernels::RING_STRESS_SOURCE, "ring_stress.cu")?;
    let stress = kernels::function(&module, "ring_stress").map_err(|e| e.to_string())?;
    let ring_mem =
        PinnedHostMemory::alloc(0, RequestRing::bytes_for(capacity)).map_err(e("ring"))?;
    // SAFETY: the pinned allocation is page aligned, large enough, outlives
    // the ring, and no kernel uses it yet; this is its only consumer.
    let ring =
        unsafe { RequestRing::init(ring_mem.host_ptr(), capacity) }.map_err(e("ring init"))?;
    let producer = GpuMemory::alloc(0, RequestRing::PRODUCER_BYTES).map_err(e("producer"))?;
    let status = GpuMemory::alloc(0, 4096).map_err(e("status"))?;
    let seg0 = PinnedHostMemory::alloc(0, 8192).map_err(e("seg0"))?;
    let local = [
        SegmentDesc::direct(seg0.device_ptr(), 4096, seg0.device_ptr() + 4096, 64),
        SegmentDesc::direct(seg0.device_ptr(), 4096, seg0.device_ptr() + 4096, 64),
    ];
    let far = vec![SegmentDesc::via_ring(1 << 20, 64); 2];
    let (_table, mut dctx) = build_ctx(&stream, &local, &[local.to_vec(), far])?;
    dctx.ring = ring_mem.device_ptr();
    dctx.ring_producer = producer.device_ptr();
    dctx.ring_capacity = capacity;
    let (rank, local_seg, seg, per_thread, status_ptr) =
        (1u32, 0u32, 1u32, PER_THREAD, status.device_ptr());
    let cfg = LaunchConfig {
        grid_dim: (BLOCKS, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let start = Instant::now();
    // SAFETY: ring_stress(gaspi_device_ctx, unsigned x4, int*); the ring,
    // producer counter, tables and status word live until the kernel ends.
    unsafe {
        stream
            .cuda()
            .launch_builder(&stress)
            .arg(&dctx)
            .arg(&rank)
            .arg(&local_seg)
            .arg(&seg)
            .arg(&per_thread)
            .arg(&status_ptr)
            .launch(cfg)
    }
    .map_err(e("launch ring_stress"))?;
    let threads = (BLOCKS * THREADS) as usize;
    let expected = threads as u64 * PER_THREAD as u64 + 1;
    let mut next_i = vec![0u32; threads];
    let mut write_notify: Vec<Request> = Vec::new();
    let mut errors = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ring.consumed() < expected {
        match ring.try_pop() {
            Some(r) => {
                ring.complete_through(r.ticket + 1);
                match r.op {
                    RequestOp::WriteNotify => write_notify.push(r),
                    RequestOp::Notify => {
                        let v = r.value.wrapping_sub(1);
                        let (gtid, i) = ((v / PER_THREAD) as usize, v % PER_THREAD);
                        let fine = r.target_rank == 1
                            && r.remote_segment == 1
                            && gtid < threads
                            && r.notification_id == gtid as u32 % 64
                            && next_i[gtid] == i;
                        if fine {
                            next_i[gtid] += 1;
                        } else if errors.len() < 5 {
                            errors.push(format!("{r:?}"));
                        }
                    }
                    RequestOp::Write | RequestOp::Unknown(_) => {
                        errors.push(format!("unexpected request {:?}", r.op))
                    }
                }
            }
            None => {
                if Instant::now() > deadline {
                    return Err(format!(
                        "only {} of {expected} requests within 30 s",
                        ring.consumed()
                    ));
                }
                std::hint::spin_loop();
            }
        }
    }
    let consumed_at = start.elapsed();
    gpu::synchronize(&stream).map_err(e("sync ring_stress"))?;
    let status_word: Vec<i32> = download(&stream, status.device_ptr(), 1)?;
    let wn_ok = write_notify.len() == 1 && {
        let r = write_notify[0];
        (
            r.target_rank,
            r.local_segment,
            r.local_offset,
            r.remote_segment,
            r.remote_offset,
            r.size,
            r.notification_id,
            r.value,
        ) == (1, 0, 128, 1, 256, 512, 5, 0xabcd)
    };
    let all_seen = next_i.iter().all(|&n| n == PER_THREAD);
    let ok =
        errors.is_empty() && all_seen && wn_ok && status_word[0] == 0 && ring.try_pop().is_none();
    Json::new("ring")
        .bool("ok", ok)
        .num("capacity", capacity as f64)
        .num("gpu_threads", threads as f64)
        .num("requests", expected as f64)
        .bool("write_notify_request_ok", wn_ok)
        .bool("every_request_once_in_order", all_seen && errors.is_empty())
        .num("device_status", status_word[0] as f64)
        .num(
            "mrequests_per_s",
            expected as f64 / consumed_at.as_secs_f64() / 1e6,
        )
        .str("first_errors", &errors.join("; "))
        .print();
    if ok {
        Ok(())
    } else {
        Err("ring check failed".into())
    }
}
