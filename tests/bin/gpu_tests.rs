//! The GPU integration tests, as one program that runs where there is no
//! Rust toolchain (the GPU machines): built here, carried there, started by
//! `bench/gpu/run-all.sh`. `cargo test` runs it too (`tests/tests/gpu.rs`);
//! on a host without a GPU every case that needs one is reported SKIP with
//! the reason, and only the no-driver case runs.
//!
//! `gaspi-gpu-tests` runs every case, each as its own job (the case
//! program starts its ranks itself), and prints one line per case,
//! `GPU_TEST <name> PASS|FAIL|SKIP <detail>`, then
//! `GPU_TESTS passed=N failed=M skipped=K`; it exits non-zero when a case
//! failed. `gaspi-gpu-tests --case NAME` runs one case.
//!
//! Cases:
//! - `host-gpu`: a host-segment rank and a GPU-segment rank write random
//!   data to each other (`write_notify`, `write` + `notify`, `read`), sizes
//!   1 B to 4 MiB + 5 at odd offsets: CPU to GPU and GPU to CPU.
//! - `gpu-gpu`: the same between two GPU segments (two GPUs when the host
//!   has them: CUDA IPC and peer access).
//! - `host-gpu-device-words`, `gpu-gpu-device-words`: the same with the
//!   GPU segments' notification words in GPU memory (the `device`
//!   placement: CPU writers set them with stream writes, the owner's CPU
//!   polls them with copies and resets them with a kernel).
//! - `host-gpu-gdrcopy`, `gpu-gpu-gdrcopy`: the same with the words in GPU
//!   memory mapped into the owner's process through gdrcopy (the owner's
//!   CPU loads and stores them). Where gdrcopy's library or driver is
//!   missing these check that such a segment falls back to host-mapped and
//!   says so, then report SKIP with the reason.
//! - `kernel-gpu-gpu` (and `-device-words`): kernels on two ranks' GPUs
//!   (two GPUs when there are two) bounce 20,000 checked payloads of 256 B
//!   to 64 KiB
//!   (200 when both share one GPU and take turns on it)
//!   with the device-side `write_notify` (and, every fourth round, the
//!   device-side `write` without notification by a warp, a block or one
//!   thread, then `notify`), each waiting with the device API; the device
//!   calls' refusals of a bad segment, rank, offset, size or value 0 too.
//! - `kernel-echo`: a persistent kernel waits for notifications with the
//!   device API, checks each 64-byte payload, and answers with the
//!   device-side `write_notify`: 100,000 round trips, checked on both sides.
//! - `ordering`: 2,000 rounds of 1 MiB `write_notify` into a GPU segment;
//!   the kernel checks that every word is there whenever it sees the flag.
//! - `full-ring`: 102,400 device-side payloads forced through a 32-slot
//!   request ring (full nearly all the time), half as `write_notify`, half
//!   as `write` then `notify` (153,600 requests): every payload and the
//!   last notification of each thread arrive, none lost or doubled.
//!   `full-ring-tcp`: the same over TCP through a 512-slot ring, every
//!   payload inline in the ring (decision 0093).
//! - `gpu-gpu-sms-held` (two GPUs): while a kernel holds every thread slot
//!   of the writer's GPU, a window of 8 `write`s of 1 MiB into the other
//!   GPU's segment (all but the first gathered for the copy engine's
//!   batch, decision 0054) and a `notify` arrive, checked; with the copy
//!   kernel (`GASPI_GPU_BATCH_MIN=65536`) nothing arrives. SKIP on one GPU,
//!   where a plain copy between two processes' memories waits too.
//! - `host-gpu-tcp`, `gpu-gpu-tcp`, `gpu-gpu-device-words-tcp`: the
//!   `directions` cases with every pair over TCP (`GASPI_TRANSPORT=tcp`),
//!   the path between hosts: the writer's GPU memory leaves through pinned
//!   chunks, pipelined (`gpu/network_staging.rs`); the target applies
//!   writes, notifications and reads on its apply stream
//!   (`transport/tcp/gpu_apply.rs`), large writes read from the socket
//!   and copied in chunk by chunk; `read_notify` sets its word only after
//!   the data landed.
//! - `kernel-gpu-gpu-tcp`: the kernels' ping-pong over TCP (their
//!   requests go through the ring to the network transport).
//! - `killed-peer-tcp`: rank 1 dies (`_exit`) while rank 0 streams 4 MiB
//!   writes from its GPU segment into rank 1's over TCP; rank 0's calls
//!   fail with an error naming rank 1 within the peer timeout, and rank 0
//!   terminates cleanly.
//! - `no-driver`: a GPU segment, bound GPU memory (`segment_bind_gpu`) or
//!   device context on a host without CUDA fails with `Error::Gpu(NoDriver)`
//!   and creates nothing; with CUDA, an unknown device fails with
//!   `BadDevice`, a host address given to `segment_bind_gpu` with
//!   `InvalidArgument`, and nothing is created.

use cudarc::driver::{LaunchConfig, PushKernelArg};
use gaspi::cuda::{GpuError, PinnedHostMemory};
use gaspi::{
    Config, Error, Gaspi, Group, Memory, NotificationPlacement, NotifyId, Queue, Rank, SegId,
    Timeout,
};
use rand::{Rng, SeedableRng};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

type Res<T = ()> = Result<T, Box<dyn std::error::Error>>;

const SKIP_CODE: i32 = 77;
const CASES: [&str; 20] = [
    "no-driver",
    "host-gpu",
    "host-gpu-writer-copies",
    "host-gpu-device-words",
    "host-gpu-gdrcopy",
    "gpu-gpu",
    "gpu-gpu-device-words",
    "gpu-gpu-gdrcopy",
    "gpu-gpu-sms-held",
    "kernel-echo",
    "kernel-gpu-gpu",
    "kernel-gpu-gpu-device-words",
    "ordering",
    "full-ring",
    "full-ring-tcp",
    "host-gpu-tcp",
    "gpu-gpu-tcp",
    "gpu-gpu-device-words-tcp",
    "kernel-gpu-gpu-tcp",
    "killed-peer-tcp",
];
const SEG: SegId = SegId(0);
const Q: Queue = Queue(0);
const WAIT: Timeout = Timeout::Ms(60_000);

fn main() {
    gaspi_launch::init_logging();
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--case") {
        let name = args.get(i + 1).map(String::as_str).unwrap_or("");
        let code = match run_case(name) {
            Ok(()) => 0,
            Err(e) => {
                if let Some(reason) = e.to_string().strip_prefix("SKIP: ") {
                    println!("SKIP: {reason}");
                    SKIP_CODE
                } else {
                    eprintln!("case {name} failed: {e}");
                    1
                }
            }
        };
        std::process::exit(code);
    }
    std::process::exit(run_all());
}

/// Runs every case as a child process; returns the exit code.
fn run_all() -> i32 {
    let exe = std::env::current_exe().expect("the test program's own path");
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    for case in CASES {
        let start = Instant::now();
        let out = Command::new(&exe).args(["--case", case]).output();
        let secs = start.elapsed().as_secs_f64();
        match out {
            Ok(out) => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                match out.status.code() {
                    Some(0) => {
                        passed += 1;
                        let detail: Vec<&str> =
                            stdout.lines().filter(|l| l.starts_with("OK")).collect();
                        let detail = detail.join(" | ");
                        println!("GPU_TEST {case} PASS ({secs:.1} s) {detail}");
                    }
                    Some(SKIP_CODE) => {
                        skipped += 1;
                        let reason = stdout
                            .lines()
                            .find_map(|l| l.strip_prefix("SKIP: "))
                            .unwrap_or("no reason given");
                        println!("GPU_TEST {case} SKIP {reason}");
                    }
                    code => {
                        failed += 1;
                        println!("GPU_TEST {case} FAIL (exit {code:?}, {secs:.1} s)");
                        for line in stdout
                            .lines()
                            .chain(stderr.lines())
                            .rev()
                            .take(15)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                        {
                            println!("    {line}");
                        }
                    }
                }
            }
            Err(e) => {
                failed += 1;
                println!("GPU_TEST {case} FAIL cannot start: {e}");
            }
        }
    }
    println!("GPU_TESTS passed={passed} failed={failed} skipped={skipped}");
    i32::from(failed > 0)
}

fn skip(reason: impl std::fmt::Display) -> Box<dyn std::error::Error> {
    format!("SKIP: {reason}").into()
}

/// The number of GPUs, or the reason there are none.
fn gpus() -> Res<u32> {
    gaspi::cuda::driver_available().map_err(|e| skip(format!("no usable GPU here: {e}")))
}

fn run_case(name: &str) -> Res {
    // `-tcp`: the same case with every pair over TCP, as between hosts
    // (the ranks this process starts inherit the variable).
    let name = match name.strip_suffix("-tcp") {
        Some(base) => {
            std::env::set_var("GASPI_TRANSPORT", "tcp");
            if base == "killed-peer" {
                gpus()?;
                return killed_peer();
            }
            base
        }
        None => name,
    };
    match name {
        "no-driver" => no_driver(),
        "host-gpu" | "host-gpu-writer-copies" | "host-gpu-device-words" | "host-gpu-gdrcopy" => {
            let n = gpus()?;
            if name.ends_with("-gdrcopy") {
                gdrcopy_or_skip()?;
            }
            let owner_copies = name != "host-gpu-writer-copies";
            directions(owner_copies, placement(name), |rank| {
                if rank == 0 {
                    Memory::Host
                } else {
                    Memory::Gpu((rank - 1) % n)
                }
            })
        }
        "gpu-gpu" | "gpu-gpu-device-words" | "gpu-gpu-gdrcopy" => {
            let n = gpus()?;
            if name.ends_with("-gdrcopy") {
                gdrcopy_or_skip()?;
            }
            directions(true, placement(name), |rank| Memory::Gpu(rank % n))
        }
        "kernel-gpu-gpu" | "kernel-gpu-gpu-device-words" => {
            let n = gpus()?;
            kernel_gpu_gpu(n, placement(name))
        }
        "gpu-gpu-sms-held" => {
            let n = gpus()?;
            if n < 2 {
                // Measured (bench/results/2026-11-27-gpubw, call 4): on one
                // GPU, a plain copy between two processes' memories waits
                // too while a kernel holds every thread slot, and writes
                // within one GPU are never batched (decision 0054).
                return Err(skip(
                    "one GPU: a copy between two processes' memories of one GPU waits for \
                     the kernel with or without the batch, which gathers only between GPUs",
                ));
            }
            sms_held(n)
        }
        "kernel-echo" => {
            gpus()?;
            kernel_echo()
        }
        "ordering" => {
            gpus()?;
            ordering()
        }
        "full-ring" => {
            gpus()?;
            full_ring()
        }
        other => Err(format!("unknown case {other:?}; cases: {CASES:?}").into()),
    }
}

/// The notification placement a case name asks for.
fn placement(case: &str) -> NotificationPlacement {
    if case.ends_with("-device-words") {
        NotificationPlacement::Device
    } else if case.ends_with("-gdrcopy") {
        NotificationPlacement::Gdrcopy
    } else {
        NotificationPlacement::HostMapped
    }
}

/// Ok where gdrcopy can map GPU memory here. Elsewhere checks that a GPU
/// segment asked for with the gdrcopy placement falls back to host-mapped
/// words, works, and reports it, then skips with the reason.
fn gdrcopy_or_skip() -> Res {
    let Err(reason) = gaspi::gdrcopy::gdrcopy_available() else {
        return Ok(());
    };
    let g = Gaspi::init(
        Config::from_env()?
            .standalone_ranks(1)
            .gpu_notifications(NotificationPlacement::Gdrcopy),
    )?;
    g.segment_alloc(SEG, 4096, Memory::Gpu(0))?;
    let placed = g.segment_notification_placement(SEG)?;
    if placed != NotificationPlacement::HostMapped {
        return Err(format!("without gdrcopy a gdrcopy segment reports {placed}").into());
    }
    g.notify(Rank(0), SEG, NotifyId(3), 9, Q)?;
    g.wait(Q, WAIT)?;
    let id = g.notify_waitsome(SEG, NotifyId(0), 8, WAIT)?;
    if id != NotifyId(3) || g.notify_reset(SEG, id)? != 9 {
        return Err("the fallback segment's notification did not arrive".into());
    }
    g.term()?;
    Err(skip(format!(
        "{reason} (checked: the segment fell back to host-mapped words and said so)"
    )))
}

fn start(ranks: u32) -> Res<Gaspi> {
    Ok(Gaspi::init(Config::from_env()?.standalone_ranks(ranks))?)
}

/// Whether this case runs every pair over TCP (`-tcp` cases).
fn over_tcp() -> bool {
    std::env::var("GASPI_TRANSPORT").is_ok_and(|t| t == "tcp")
}

/// `killed-peer-tcp`: rank 1 dies in the middle of rank 0's stream of
/// 4 MiB writes from GPU memory over TCP; rank 0's calls fail naming rank
/// 1 within the peer timeout, never hang, and rank 0 ends cleanly.
fn killed_peer() -> Res {
    let n = gpus()?;
    let g = Gaspi::init(
        Config::from_env()?
            .standalone_ranks(2)
            .peer_timeout(Duration::from_secs(5)),
    )?;
    let me = g.rank().0;
    const SIZE: u64 = 4 << 20;
    g.segment_create(
        SEG,
        2 * SIZE,
        Memory::Gpu(me % n),
        Group::ALL,
        Timeout::Block,
    )?;
    g.barrier(Group::ALL, WAIT)?;
    if me == 1 {
        // Let a few writes land, then die without a word.
        let id = g.notify_waitsome(SEG, NotifyId(0), 1, WAIT)?;
        g.notify_reset(SEG, id)?;
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: ends this process at once, as a crash would.
        unsafe { libc::_exit(0) };
    }
    let start = Instant::now();
    let mut failed = None;
    for i in 0..100_000u32 {
        let r = g
            .write_notify(SEG, 0, Rank(1), SEG, SIZE, SIZE, NotifyId(0), i + 1, Q)
            .and_then(|()| g.wait(Q, WAIT));
        if let Err(e) = r {
            failed = Some(e);
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
    let Some(e) = failed else {
        return Err("rank 1 died, yet 60 s of writes to it went on without an error".into());
    };
    let took = start.elapsed();
    let text = e.to_string();
    if e.failed_rank() != Some(Rank(1)) && !text.contains("rank 1") {
        return Err(format!("the error does not name rank 1: {text}").into());
    }
    // No hang at the end either.
    let _ = g.term();
    println!(
        "OK rank 0: writes to the killed rank failed after {:.1} s: {text}",
        took.as_secs_f64()
    );
    Ok(())
}

fn no_driver() -> Res {
    let g = start(1)?;
    let before = g.segment_list();
    let (device, expect_no_driver) = match gaspi::cuda::driver_available() {
        Err(_) => (0, true),
        Ok(n) => (n, false),
    };
    let seg = SegId(7);
    let r = g.segment_alloc(seg, 4096, Memory::Gpu(device));
    match (&r, expect_no_driver) {
        (Err(Error::Gpu(GpuError::NoDriver { reason })), true) => {
            println!("segment_alloc(Gpu(0)) without CUDA: NoDriver ({reason})")
        }
        (Err(Error::Gpu(GpuError::BadDevice { device: d, count })), false) if *d == device => {
            println!("segment_alloc(Gpu({d})) with {count} device(s): BadDevice")
        }
        _ => return Err(format!("segment_alloc(Gpu({device})) gave {r:?}").into()),
    }
    if g.segment_list() != before {
        return Err("a failed GPU segment_alloc left a segment behind".into());
    }
    // The id is still free: a host segment of that id can be made.
    g.segment_alloc(seg, 4096, Memory::Host)?;
    g.segment_delete(seg)?;
    let r = g.segment_create(seg, 4096, Memory::Gpu(device), Group::ALL, Timeout::Block);
    if !matches!(r, Err(Error::Gpu(_))) {
        return Err(format!("segment_create(Gpu({device})) gave {r:?}").into());
    }
    // User memory as a GPU segment (segment_bind_gpu): without CUDA,
    // NoDriver; with it, a host address is refused as not device memory.
    let mut host = vec![0u8; 4096];
    // SAFETY: refused before the memory is used (checked below: nothing is
    // created); `host` outlives the call anyway.
    let r = unsafe { g.segment_bind_gpu(seg, host.as_mut_ptr() as u64, 4096) };
    match (&r, expect_no_driver) {
        (Err(Error::Gpu(GpuError::NoDriver { .. })), true) => {
            println!("segment_bind_gpu without CUDA: NoDriver")
        }
        (Err(Error::Gpu(GpuError::InvalidArgument(why))), false) => {
            println!("segment_bind_gpu of host memory: {why}")
        }
        _ => return Err(format!("segment_bind_gpu(host memory) gave {r:?}").into()),
    }
    if g.segment_list() != before {
        return Err("a failed segment_bind_gpu left a segment behind".into());
    }
    let d = g.device_context(device);
    if !matches!(d, Err(Error::Gpu(_))) {
        return Err(format!("device_context({device}) gave {d:?}").into());
    }
    // A ring payload that is not whole 128-byte lines up to 64 KiB is
    // refused with or without CUDA (decision 0093).
    for bad in [100, 128 * 513] {
        let options = gaspi::gpu::DeviceContextOptions {
            ring_inline_max: bad,
            ..Default::default()
        };
        let d = g.device_context_with(0, options);
        if !matches!(d, Err(Error::Ring(gaspi::kernels::RingError::BadInline(b))) if b == bad) {
            return Err(format!("device_context with ring_inline_max {bad} gave {d:?}").into());
        }
    }
    g.term()?;
    println!("OK the documented errors, nothing created");
    Ok(())
}

fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// Both ranks send random data to each other with every call, checked.
/// Random data in every direction between two ranks whose segments are of
/// `kind`; `owner_copies`: whether owners run the copies CPU ranks post
/// into their GPU segments (checked in the statistics).
fn directions(
    owner_copies: bool,
    placement: NotificationPlacement,
    kind: impl Fn(u32) -> Memory,
) -> Res {
    let config = Config::from_env()?
        .standalone_ranks(2)
        .gpu_owner_copies(owner_copies)
        .gpu_notifications(placement);
    let g = Gaspi::init(config)?;
    let me = g.rank().0;
    let peer = Rank(1 - me);
    const MAX: u64 = (4 << 20) + 64;
    // Outgoing area at 0, incoming at MAX, read-back area at 2*MAX.
    let seg = g.segment_create(SEG, 3 * MAX, kind(me), Group::ALL, Timeout::Block)?;
    let placed = g.segment_notification_placement(SEG)?;
    let expect = match kind(me) {
        Memory::Host => NotificationPlacement::HostMapped,
        _ => placement,
    };
    if placed != expect {
        return Err(format!("rank {me}: notifications {placed}, expected {expect}").into());
    }
    // Round 6: two writes of 1 MiB, then the notification, which must not
    // overtake either. Rounds 7 and 8 the same sizes 16-byte aligned (at
    // offset 0).
    let sizes = [
        1u64,
        8,
        4096,
        65_539,
        (4 << 20) + 5,
        (2 << 20) + 3,
        1 << 20,
        2 << 20,
    ];
    let mut checked = 0u64;
    for (round, &size) in sizes.iter().enumerate() {
        let round = round as u32 + 1;
        // Odd offsets too; the aligned rounds at 0.
        let off = if round >= 7 { 0 } else { 3 * round as u64 };
        for sender in 0..2u32 {
            let seed = (round as u64) << 8 | sender as u64;
            if me == sender {
                let data = random_bytes(seed, size as usize);
                seg.write(off as usize, &data)?;
                if round % 2 == 1 {
                    g.write_notify(
                        SEG,
                        off,
                        peer,
                        SEG,
                        MAX + off,
                        size,
                        NotifyId(round),
                        round,
                        Q,
                    )?;
                } else {
                    // In two writes, then the notification.
                    let half = size / 2;
                    if half > 0 {
                        g.write(SEG, off, peer, SEG, MAX + off, half, Q)?;
                    }
                    g.write(SEG, off + half, peer, SEG, MAX + off + half, size - half, Q)?;
                    g.notify(peer, SEG, NotifyId(round), round, Q)?;
                }
                g.wait(Q, WAIT)?;
                // The receiver reads our outgoing area back before we go on.
                let id = g.notify_waitsome(SEG, NotifyId(100 + round), 1, WAIT)?;
                g.notify_reset(SEG, id)?;
            } else {
                let id = g.notify_waitsome(SEG, NotifyId(round), 1, WAIT)?;
                if g.notify_reset(SEG, id)? != round {
                    return Err(format!("round {round}: wrong notification value").into());
                }
                let expect = random_bytes(seed, size as usize);
                let got: Vec<u8> = seg.read_vec((MAX + off) as usize, size as usize)?;
                if got != expect {
                    let first = got.iter().zip(&expect).position(|(a, b)| a != b);
                    return Err(format!(
                        "{size} bytes from rank {sender} ({:?} -> {:?}) differ first at byte {first:?}",
                        kind(sender),
                        kind(me)
                    )
                    .into());
                }
                // read: the sender's outgoing area into our read-back area.
                g.read(SEG, 2 * MAX + off, peer, SEG, off, size, Q)?;
                g.wait(Q, WAIT)?;
                let back: Vec<u8> = seg.read_vec((2 * MAX + off) as usize, size as usize)?;
                if back != expect {
                    return Err(format!("read of {size} bytes from rank {sender} differs").into());
                }
                if over_tcp() {
                    // read_notify: the local word only after the data.
                    let back = 2 * MAX + off;
                    seg.write(back as usize, &vec![0u8; size as usize])?;
                    g.read_notify(SEG, back, peer, SEG, off, size, NotifyId(200 + round), Q)?;
                    let id = g.notify_waitsome(SEG, NotifyId(200 + round), 1, WAIT)?;
                    g.notify_reset(SEG, id)?;
                    let again: Vec<u8> = seg.read_vec(back as usize, size as usize)?;
                    if again != expect {
                        return Err(format!(
                            "read_notify of {size} bytes from rank {sender}: the notification came before the data"
                        )
                        .into());
                    }
                    g.wait(Q, WAIT)?;
                }
                g.notify(peer, SEG, NotifyId(100 + round), 1, Q)?;
                g.wait(Q, WAIT)?;
                checked += 2 * size;
            }
        }
    }
    g.barrier(Group::ALL, WAIT)?;
    // A CPU rank's writes and reads of a GPU segment run in its owner's
    // process exactly when owner copies are on.
    let by_owner = g.statistics().calls_of("owner_copy");
    let expected =
        owner_copies && !over_tcp() && kind(me) == Memory::Host && kind(1 - me) != Memory::Host;
    if expected != (by_owner > 0) {
        return Err(format!(
            "rank {me}: {by_owner} requests ran in the owner's process, expected {}",
            if expected { "some" } else { "none" }
        )
        .into());
    }
    g.term()?;
    println!(
        "OK rank {me} ({:?}, notifications {placed}) checked {checked} bytes written and read ({by_owner} copies run by the owner)",
        kind(me)
    );
    Ok(())
}

struct Kernels {
    stream: std::sync::Arc<cudarc::driver::CudaStream>,
    module: std::sync::Arc<cudarc::driver::CudaModule>,
    status: PinnedHostMemory,
}

fn kernels(dctx: &gaspi::gpu::DeviceContext) -> Res<Kernels> {
    let cuda = dctx.gpu_context().cuda();
    let module = gaspi::kernels::compile_and_load(cuda, gaspi::kernels::TESTS_SOURCE, "tests.cu")?;
    let stream = cuda.new_stream()?;
    let status = PinnedHostMemory::alloc(dctx.device(), 4096)?;
    Ok(Kernels {
        stream,
        module,
        status,
    })
}

impl Kernels {
    fn status(&self) -> [u32; 4] {
        let s = self.status.as_atomic_u32s();
        std::array::from_fn(|i| s[i].load(Ordering::Acquire))
    }

    fn check(&self, what: &str) -> Res {
        self.stream.synchronize()?;
        match self.status() {
            [0, ..] => Ok(()),
            [code, a, b, c] => {
                Err(format!("{what}: kernel reported failure {code} ({a}, {b}, {c})").into())
            }
        }
    }
}

/// One block of one warp: the launch of the ping-pong style kernels.
fn one_warp() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn pattern(r: u32, i: u32) -> u32 {
    r.wrapping_mul(2654435761) ^ (i.wrapping_mul(40503).wrapping_add(17))
}

/// Two kernels, one per rank (on two GPUs when there are two), bounce
/// checked payloads with the device-side write_notify.
fn kernel_gpu_gpu(n: u32, placement: NotificationPlacement) -> Res {
    // Up to 64 KiB - 12 bytes (rounds alternate sizes: see tests.cu).
    const WORDS: u32 = 16_381;
    const OUT: u32 = 65_536;
    // Two processes' kernels on one GPU run in turns (time slices of
    // milliseconds, no MPS): fewer rounds there, same checks.
    let rounds_here: u32 = match (n >= 2, over_tcp()) {
        (true, false) => 20_000,
        (true, true) => 2_000,
        (false, _) => 200,
    };
    let g = Gaspi::init(
        Config::from_env()?
            .standalone_ranks(2)
            .gpu_notifications(placement),
    )?;
    let me = g.rank().0;
    let device = me % n;
    g.segment_create(
        SEG,
        2 * OUT as u64,
        Memory::Gpu(device),
        Group::ALL,
        Timeout::Block,
    )?;
    let dctx = g.device_context(device)?;
    let k = kernels(&dctx)?;
    let f = gaspi::kernels::function(&k.module, "test_gpu_pingpong")?;
    let arg = dctx.kernel_arg();
    let (seg, peer, words, rounds, out) = (SEG.0 as u32, 1 - me, WORDS, rounds_here, OUT);
    let initiator = u32::from(me == 0);
    let status = k.status.device_ptr();
    let cfg = one_warp();
    g.barrier(Group::ALL, WAIT)?; // both device contexts are built
    let t = Instant::now();
    // SAFETY: test_gpu_pingpong(gaspi_device_ctx, 6 x unsigned, unsigned*)
    // matches the arguments; the context and the status memory outlive the
    // kernel (synchronised in `check`).
    unsafe {
        k.stream
            .launch_builder(&f)
            .arg(&arg)
            .arg(&seg)
            .arg(&peer)
            .arg(&words)
            .arg(&rounds)
            .arg(&out)
            .arg(&initiator)
            .arg(&status)
            .launch(cfg)?
    };
    k.check("test_gpu_pingpong")?;
    let secs = t.elapsed().as_secs_f64();
    let ring = dctx.ring_activity();
    if over_tcp() && me == 0 && ring.inline == 0 {
        // Rank 0 sends 0 - 256 bytes in some rounds (and 32 - 64 KiB,
        // staged, in others): the small ones travel in the ring
        // (decision 0093).
        return Err(format!(
            "over TCP the ring served {} requests, none inline",
            ring.served
        )
        .into());
    }
    g.barrier(Group::ALL, WAIT)?;
    g.term()?;
    println!(
        "OK rank {me} (GPU {device}, notifications {placement}): {rounds} kernel-to-kernel round trips of 256 to {} bytes checked ({:.2} us each, launch included)",
        WORDS * 4,
        secs * 1e6 / rounds as f64
    );
    Ok(())
}

/// Every block's thread 0 counts itself in `started`, then polls the
/// host-mapped `flag` until the host sets it; the block's other threads
/// wait at the barrier meanwhile, holding their slots.
const HOG_SOURCE: &str = r#"
extern "C" __global__ void gaspi_test_hog(volatile unsigned int* flag, unsigned int* started) {
    if (threadIdx.x == 0) {
        atomicAdd(started, 1u);
        __threadfence_system();
        while (*flag == 0) { __nanosleep(1000); }
    }
    __syncthreads();
}
"#;

/// Rank 0 fills every thread slot of its GPU with a kernel that waits for
/// the host, then writes a window to rank 1's GPU segment and notifies;
/// rank 1 checks the data and answers (1: arrived and right, 2: nothing
/// within 20 s, 3: wrong data). Only then does rank 0 release the kernel.
fn sms_held(n: u32) -> Res {
    const SIZE: u64 = 1 << 20;
    const WINDOW: u64 = 8;
    let g = start(2)?;
    let me = g.rank().0;
    let device = me % n;
    let seg = g.segment_create(
        SEG,
        SIZE * WINDOW,
        Memory::Gpu(device),
        Group::ALL,
        Timeout::Block,
    )?;
    let data = random_bytes(0x5ed, (SIZE * WINDOW) as usize);
    if me == 1 {
        // The notification comes after the window in the writer's stream
        // order: its arrival says the copies ran while the kernel held
        // the writer's GPU. The data is checked once the kernel has ended
        // (on one GPU a copy out of it may wait for its time slice).
        let verdict = match g.notify_waitsome(SEG, NotifyId(1), 1, Timeout::Ms(20_000)) {
            Ok(id) => {
                g.notify_reset(SEG, id)?;
                1
            }
            Err(e) if e.is_timeout() => 2,
            Err(e) => return Err(e.into()),
        };
        g.notify(Rank(0), SEG, NotifyId(2), verdict, Q)?;
        g.wait(Q, WAIT)?;
        g.barrier(Group::ALL, WAIT)?;
        let got: Vec<u8> = seg.read_vec(0, data.len())?;
        g.term()?;
        if verdict != 1 {
            return Err(
                "rank 1: nothing arrived within 20 s while rank 0's kernel held its GPU".into(),
            );
        }
        if got != data {
            let first = got.iter().zip(&data).position(|(a, b)| a != b);
            return Err(format!("rank 1: the window differs first at byte {first:?}").into());
        }
        println!("OK rank 1 (GPU {device}): {WINDOW} x {SIZE} bytes arrived while rank 0's kernel held its GPU, checked");
        return Ok(());
    }
    seg.write(0, &data)?;
    let ctx = gaspi::cuda::GpuContext::new(device)?;
    let cuda = ctx.cuda();
    let module = gaspi::kernels::compile_and_load(cuda, HOG_SOURCE, "hog.cu")?;
    let f = gaspi::kernels::function(&module, "gaspi_test_hog")?;
    use cudarc::driver::sys::CUdevice_attribute as A;
    let sms = cuda.attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let per_sm = cuda.attribute(A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)? as u32;
    let blocks = sms * (per_sm / 1024).max(1);
    let words = PinnedHostMemory::alloc(device, 4096)?;
    let w = words.as_atomic_u32s();
    let (flag, started) = (words.device_ptr(), words.device_ptr() + 4);
    let stream = cuda.new_stream()?;
    // SAFETY: gaspi_test_hog(unsigned*, unsigned*) takes the two mapped
    // words, which outlive it (released and synchronised below).
    unsafe {
        stream
            .launch_builder(&f)
            .arg(&flag)
            .arg(&started)
            .launch(LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (1024, 1, 1),
                shared_mem_bytes: 0,
            })?
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while w[1].load(Ordering::Acquire) < blocks && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let resident = w[1].load(Ordering::Acquire);
    // Without every block resident the check would prove nothing: then
    // nothing is posted and rank 1 answers 2 after its 20 s.
    let posted = (|| -> Res {
        if resident == blocks {
            for i in 0..WINDOW {
                g.write(SEG, i * SIZE, Rank(1), SEG, i * SIZE, SIZE, Q)?;
            }
            g.notify(Rank(1), SEG, NotifyId(1), 1, Q)?;
        }
        Ok(())
    })();
    let answer = g.notify_waitsome(SEG, NotifyId(2), 1, Timeout::Ms(40_000));
    w[0].store(1, Ordering::Release);
    stream.synchronize()?;
    posted?;
    let verdict = g.notify_reset(SEG, answer?)?;
    g.wait(Q, WAIT)?;
    g.barrier(Group::ALL, WAIT)?;
    g.term()?;
    if resident != blocks {
        return Err(
            format!("only {resident} of {blocks} blocks of 1024 threads became resident").into(),
        );
    }
    if verdict != 1 {
        return Err(
            "rank 1 saw nothing within 20 s while the kernel held every thread slot".into(),
        );
    }
    println!(
        "OK rank 0 (GPU {device}): {blocks} blocks of 1024 threads held every thread slot while the window went out"
    );
    Ok(())
}

fn kernel_echo() -> Res {
    const ROUNDS: u32 = 100_000;
    const WORDS: u32 = 16;
    const OUT: u32 = 4096;
    let g = start(2)?;
    let me = g.rank().0;
    if me == 1 {
        let device = 0;
        g.segment_create(SEG, 8192, Memory::Gpu(device), Group::ALL, Timeout::Block)?;
        g.barrier(Group::ALL, WAIT)?; // rank 0's segment is registered here
        let dctx = g.device_context(device)?;
        let k = kernels(&dctx)?;
        let f = gaspi::kernels::function(&k.module, "test_echo")?;
        let arg = dctx.kernel_arg();
        let cfg = one_warp();
        let (seg, peer, words, rounds, out) = (SEG.0 as u32, 0u32, WORDS, ROUNDS, OUT);
        let status = k.status.device_ptr();
        // SAFETY: test_echo's parameters are (gaspi_device_ctx, 6 x unsigned,
        // unsigned*), matching the arguments; the context and the status
        // memory outlive the kernel (synchronised in `check`).
        unsafe {
            k.stream
                .launch_builder(&f)
                .arg(&arg)
                .arg(&seg)
                .arg(&peer)
                .arg(&seg)
                .arg(&words)
                .arg(&rounds)
                .arg(&out)
                .arg(&status)
                .launch(cfg)?
        };
        g.barrier(Group::ALL, WAIT)?; // the kernel is running
        k.check("test_echo")?;
        g.barrier(Group::ALL, WAIT)?;
        println!("OK the kernel checked {ROUNDS} payloads");
    } else {
        let seg = g.segment_create(SEG, 8192, Memory::Host, Group::ALL, Timeout::Block)?;
        g.barrier(Group::ALL, WAIT)?;
        g.barrier(Group::ALL, WAIT)?;
        let mut times = Vec::with_capacity(ROUNDS as usize);
        let mut payload = vec![0u32; WORDS as usize];
        for r in 1..=ROUNDS {
            let t = Instant::now();
            for (i, w) in payload.iter_mut().enumerate() {
                *w = pattern(r, i as u32);
            }
            seg.write(0, &payload)?;
            g.write_notify(SEG, 0, Rank(1), SEG, 0, WORDS as u64 * 4, NotifyId(0), r, Q)?;
            let id = g.notify_waitsome(SEG, NotifyId(0), 1, WAIT)?;
            let v = g.notify_reset(SEG, id)?;
            if v != r {
                return Err(format!("round {r}: reply notification {v}").into());
            }
            let reply: Vec<u32> = seg.read_vec(OUT as usize, WORDS as usize)?;
            for (i, &w) in reply.iter().enumerate() {
                if w != pattern(r, i as u32).wrapping_add(1) {
                    return Err(format!("round {r}: reply word {i} is {w:#x}").into());
                }
            }
            g.wait(Q, WAIT)?;
            times.push(t.elapsed());
        }
        times.sort();
        g.barrier(Group::ALL, WAIT)?;
        println!(
            "OK {ROUNDS} round trips with 64-byte payloads checked (median {:.2} us)",
            times[times.len() / 2].as_secs_f64() * 1e6
        );
    }
    g.term()?;
    Ok(())
}

fn ordering() -> Res {
    const ROUNDS: u32 = 2000;
    const WORDS: usize = 1 << 18; // 1 MiB
    let g = start(2)?;
    let me = g.rank().0;
    let bytes = (WORDS * 4) as u64;
    if me == 1 {
        g.segment_create(SEG, bytes, Memory::Gpu(0), Group::ALL, Timeout::Block)?;
        g.barrier(Group::ALL, WAIT)?;
        let dctx = g.device_context(0)?;
        let k = kernels(&dctx)?;
        let f = gaspi::kernels::function(&k.module, "test_ordering")?;
        let arg = dctx.kernel_arg();
        let (seg, peer, words, rounds) = (SEG.0 as u32, 0u32, WORDS as u32, ROUNDS);
        let status = k.status.device_ptr();
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1024, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: test_ordering takes (gaspi_device_ctx, 5 x unsigned,
        // unsigned*); everything it uses outlives it (checked below).
        unsafe {
            k.stream
                .launch_builder(&f)
                .arg(&arg)
                .arg(&seg)
                .arg(&peer)
                .arg(&seg)
                .arg(&words)
                .arg(&rounds)
                .arg(&status)
                .launch(cfg)?
        };
        g.barrier(Group::ALL, WAIT)?;
        k.check("test_ordering")?;
        g.barrier(Group::ALL, WAIT)?;
        println!("OK the kernel saw complete data with every one of {ROUNDS} notifications");
    } else {
        let seg = g.segment_create(SEG, bytes, Memory::Host, Group::ALL, Timeout::Block)?;
        g.barrier(Group::ALL, WAIT)?;
        g.barrier(Group::ALL, WAIT)?;
        let mut data = vec![0u32; WORDS];
        for r in 1..=ROUNDS {
            data.fill(r);
            seg.write(0, &data)?;
            g.write_notify(SEG, 0, Rank(1), SEG, 0, bytes, NotifyId(0), r, Q)?;
            let id = g.notify_waitsome(SEG, NotifyId(0), 1, WAIT)?;
            if g.notify_reset(SEG, id)? != r {
                return Err(format!("round {r}: wrong answer").into());
            }
            g.wait(Q, WAIT)?;
        }
        g.barrier(Group::ALL, WAIT)?;
        println!("OK {ROUNDS} rounds of 1 MiB");
    }
    g.term()?;
    Ok(())
}

fn full_ring() -> Res {
    const BLOCKS: u32 = 8;
    const THREADS: u32 = 128;
    const PER_THREAD: u32 = 100;
    // Over TCP the 8-byte payloads travel inline (decision 0093), through
    // 512 slots: more than the server takes in one batch (256).
    // GASPI_TEST_RING_CAPACITY: another ring size, to tell its effects apart.
    let capacity: u32 = match std::env::var("GASPI_TEST_RING_CAPACITY") {
        Ok(v) => v.parse()?,
        Err(_) if over_tcp() => 512,
        Err(_) => 32,
    };
    let total = (BLOCKS * THREADS * PER_THREAD) as u64;
    let g = start(2)?;
    let me = g.rank().0;
    let threads = (BLOCKS * THREADS) as u64;
    // Odd payloads go as a write and a notify (tests.cu): two requests.
    let requests = total + threads * (PER_THREAD / 2) as u64;
    if me == 1 {
        g.segment_create(SEG, threads * 8, Memory::Gpu(0), Group::ALL, Timeout::Block)?;
        g.barrier(Group::ALL, WAIT)?;
        let dctx = g.device_context_with(
            0,
            gaspi::gpu::DeviceContextOptions {
                ring_capacity: capacity,
                force_ring: true,
                // GASPI_TEST_RING_INLINE_MAX: another payload size (0:
                // none), to tell the inline path from the rest.
                ring_inline_max: match std::env::var("GASPI_TEST_RING_INLINE_MAX") {
                    Ok(v) => v.parse()?,
                    Err(_) => gaspi::gpu::DeviceContextOptions::default().ring_inline_max,
                },
            },
        )?;
        let k = kernels(&dctx)?;
        let f = gaspi::kernels::function(&k.module, "test_ring_flood")?;
        let arg = dctx.kernel_arg();
        let (seg, peer, per) = (SEG.0 as u32, 0u32, PER_THREAD);
        let status = k.status.device_ptr();
        let cfg = LaunchConfig {
            grid_dim: (BLOCKS, 1, 1),
            block_dim: (THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let t = Instant::now();
        // SAFETY: test_ring_flood takes (gaspi_device_ctx, 4 x unsigned,
        // unsigned*); everything it uses outlives it (checked below).
        unsafe {
            k.stream
                .launch_builder(&f)
                .arg(&arg)
                .arg(&seg)
                .arg(&peer)
                .arg(&seg)
                .arg(&per)
                .arg(&status)
                .launch(cfg)?
        };
        // Served everything within 40 s (before rank 0's barrier gives
        // up), else say how far it got; only then wait for the kernel,
        // which ends once the ring has served its last request.
        let deadline = Instant::now() + Duration::from_secs(40);
        while dctx.ring_served() < requests && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let secs = t.elapsed().as_secs_f64();
        let (errors, last) = dctx.ring_errors();
        if dctx.ring_served() != requests || errors != 0 {
            return Err(format!(
                "ring served {} of {requests} requests, {errors} refused (last: {last:?}); {:?}",
                dctx.ring_served(),
                dctx.ring_activity()
            )
            .into());
        }
        k.check("test_ring_flood")?;
        g.barrier(Group::ALL, WAIT)?;
        let a = dctx.ring_activity();
        if a.served != requests || a.batches == 0 || a.batches > requests {
            return Err(format!("ring activity does not add up: {a:?}").into());
        }
        // Every payload is a write of 8 bytes: over TCP each went inline.
        if over_tcp() && a.inline != total && dctx.kernel_arg().ring_inline_max > 0 {
            return Err(format!("{} of {total} payloads went inline over TCP", a.inline).into());
        }
        println!(
            "OK {requests} requests ({total} payloads, {} inline) through a {capacity}-slot ring ({:.2} M \
             requests/s; {} batches of {:.1}, {} naps; issuing {:.0} ms, completing {:.0} ms, napping {:.0} ms)",
            a.inline,
            requests as f64 / secs / 1e6,
            a.batches,
            a.served as f64 / a.batches as f64,
            a.naps,
            a.issuing.as_secs_f64() * 1e3,
            a.completing.as_secs_f64() * 1e3,
            a.napping.as_secs_f64() * 1e3,
        );
    } else {
        let seg = g.segment_create(SEG, total * 8, Memory::Host, Group::ALL, Timeout::Block)?;
        g.barrier(Group::ALL, WAIT)?;
        // Rank 1 compiles the kernels, then gives the ring 40 s and says
        // how far it got: wait for it longer than that.
        g.barrier(Group::ALL, Timeout::Ms(120_000))?;
        let words: Vec<u64> = seg.read_vec(0, total as usize)?;
        for t in 0..threads {
            for j in 0..PER_THREAD as u64 {
                let w = words[(t * PER_THREAD as u64 + j) as usize];
                if w != t + 1 {
                    return Err(format!("thread {t} request {j}: word {w}").into());
                }
            }
            let v = g.notify_reset(SEG, NotifyId(t as u32))?;
            if v != PER_THREAD {
                return Err(format!("thread {t}: last notification value {v}").into());
            }
        }
        println!("OK {total} payloads and {threads} notifications checked");
    }
    g.term()?;
    Ok(())
}
