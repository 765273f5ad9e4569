//! Probe of the copy engine between two GPUs (issue 26, decision 0054):
//! how a window of peer copies costs when posted as single copies, as one
//! `cuMemcpyBatchAsync`, split in parts, or over several streams; and
//! whether a batched copy completes while a kernel holds every
//! multiprocessor of the source GPU (it must not need one).
//!
//! `ce_probe [--window 8] [--iters 50] [--sizes a,b,...]`, GPUs 0 -> 1.
//! Prints one line per variant and size: median us per write and GB/s
//! (timed on the host from the first post to `cuStreamSynchronize`, as
//! gaspi-bench gpu-bw times `write`s then `wait`).

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use std::time::{Duration, Instant};

type R<T> = Result<T, Box<dyn std::error::Error>>;

fn ck(r: sys::CUresult, what: &str) -> R<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {r:?}").into())
    }
}

fn attrs() -> sys::CUmemcpyAttributes {
    sys::CUmemcpyAttributes {
        srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
        srcLocHint: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: 0,
        },
        dstLocHint: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: 1,
        },
        flags: 0,
    }
}

/// One `cuMemcpyBatchAsync` of the given copies on `s`.
///
/// # Safety
/// Every range must be valid device memory the stream's context reaches.
unsafe fn batch(s: sys::CUstream, dst: &[u64], src: &[u64], len: &[usize], flags: u32) -> R<()> {
    let mut d = dst.to_vec();
    let mut sr = src.to_vec();
    let mut l = len.to_vec();
    let mut a = attrs();
    a.flags = flags;
    let mut idx = 0usize;
    // SAFETY: arrays of `count` entries, one attribute applying from 0.
    ck(
        unsafe {
            sys::cuMemcpyBatchAsync_v2(
                d.as_mut_ptr(),
                sr.as_mut_ptr(),
                l.as_mut_ptr(),
                d.len(),
                &mut a,
                &mut idx,
                1,
                s,
            )
        },
        "cuMemcpyBatchAsync",
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

const HOG: &str = r#"
extern "C" __global__ void hog(volatile unsigned int* flag, unsigned int* started) {
    if (threadIdx.x == 0) atomicAdd(started, 1u);
    while (*flag == 0) { }
}
extern "C" __global__ void tiny(unsigned int* out) { *out = 7u; }
"#;

fn main() -> R<()> {
    let args: Vec<String> = std::env::args().collect();
    let mut window = 8usize;
    let mut iters = 50usize;
    let mut sizes: Vec<usize> = vec![256 << 10, 1 << 20, 4 << 20, 16 << 20];
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--window" => {
                window = args[i + 1].parse()?;
                i += 1
            }
            "--iters" => {
                iters = args[i + 1].parse()?;
                i += 1
            }
            "--sizes" => {
                sizes = args[i + 1]
                    .split(',')
                    .map(|s| s.parse())
                    .collect::<Result<_, _>>()?;
                i += 1
            }
            _ => {}
        }
        i += 1;
    }
    let c0 = CudaContext::new(0)?;
    let c1 = CudaContext::new(1)?;
    let max = *sizes.iter().max().unwrap();
    c1.bind_to_thread()?;
    let mut dbuf = 0u64;
    // SAFETY: plain allocation in device 1's context.
    ck(unsafe { sys::cuMemAlloc_v2(&mut dbuf, max) }, "alloc 1")?;
    c0.bind_to_thread()?;
    let mut sbuf = 0u64;
    // SAFETY: plain allocation in device 0's context.
    ck(unsafe { sys::cuMemAlloc_v2(&mut sbuf, max) }, "alloc 0")?;
    // SAFETY: enabling peer access from the current context (0) to 1.
    let r = unsafe { sys::cuCtxEnablePeerAccess(c1.cu_ctx(), 0) };
    if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
        ck(r, "peer access")?;
    }
    let streams: Vec<_> = (0..4).map(|_| c0.new_stream()).collect::<Result<_, _>>()?;
    let s0 = streams[0].cu_stream();
    let mut events = Vec::new();
    for _ in 0..8 {
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: an event of the current context, without timing.
        ck(
            unsafe {
                sys::cuEventCreate(&mut e, sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32)
            },
            "event",
        )?;
        events.push(e);
    }
    for &size in &sizes {
        // Every write to the same destination, as gpu-bw does.
        let variants: &[&str] = &[
            "plain",
            "batch-all",
            "first+batch",
            "batch1-each",
            "split2-each",
            "split4-each",
            "batch-all-split2",
            "batch-all-split4",
            "streams2-alt",
            "streams2-split",
            "streams4-split",
            "plain2",
        ];
        for v in variants {
            let mut t = Vec::new();
            for it in 0..iters + 5 {
                let start = Instant::now();
                // SAFETY (all below): the buffers hold `max` >= size bytes and
                // live until the synchronize at the end of each iteration.
                unsafe {
                    match *v {
                        "plain" | "plain2" => {
                            for _ in 0..window {
                                ck(sys::cuMemcpyAsync(dbuf, sbuf, size, s0), "copy")?;
                            }
                        }
                        "batch-all" => {
                            batch(
                                s0,
                                &vec![dbuf; window],
                                &vec![sbuf; window],
                                &vec![size; window],
                                0,
                            )?;
                        }
                        "first+batch" => {
                            ck(sys::cuMemcpyAsync(dbuf, sbuf, size, s0), "copy")?;
                            let n = window - 1;
                            batch(s0, &vec![dbuf; n], &vec![sbuf; n], &vec![size; n], 0)?;
                        }
                        "batch1-each" => {
                            for _ in 0..window {
                                batch(s0, &[dbuf], &[sbuf], &[size], 0)?;
                            }
                        }
                        "split2-each" | "split4-each" => {
                            let k = if *v == "split2-each" { 2 } else { 4 };
                            let part = size / k;
                            let d: Vec<u64> = (0..k).map(|j| dbuf + (j * part) as u64).collect();
                            let s: Vec<u64> = (0..k).map(|j| sbuf + (j * part) as u64).collect();
                            for _ in 0..window {
                                batch(s0, &d, &s, &vec![part; k], 0)?;
                            }
                        }
                        "batch-all-split2" | "batch-all-split4" => {
                            let k = if *v == "batch-all-split2" { 2 } else { 4 };
                            let part = size / k;
                            let mut d = Vec::new();
                            let mut s = Vec::new();
                            for _ in 0..window {
                                for j in 0..k {
                                    d.push(dbuf + (j * part) as u64);
                                    s.push(sbuf + (j * part) as u64);
                                }
                            }
                            let n = d.len();
                            batch(s0, &d, &s, &vec![part; n], 0)?;
                        }
                        "streams2-alt" => {
                            let s1 = streams[1].cu_stream();
                            ck(sys::cuEventRecord(events[0], s0), "rec")?;
                            ck(sys::cuStreamWaitEvent(s1, events[0], 0), "wait")?;
                            for w in 0..window {
                                let s = if w % 2 == 0 { s0 } else { s1 };
                                ck(sys::cuMemcpyAsync(dbuf, sbuf, size, s), "copy")?;
                            }
                            ck(sys::cuEventRecord(events[1], s1), "rec")?;
                            ck(sys::cuStreamWaitEvent(s0, events[1], 0), "wait")?;
                        }
                        "streams2-split" | "streams4-split" => {
                            let k = if *v == "streams2-split" { 2 } else { 4 };
                            let part = size / k;
                            ck(sys::cuEventRecord(events[0], s0), "rec")?;
                            for j in 1..k {
                                ck(
                                    sys::cuStreamWaitEvent(streams[j].cu_stream(), events[0], 0),
                                    "wait",
                                )?;
                            }
                            for _ in 0..window {
                                for j in 0..k {
                                    let off = (j * part) as u64;
                                    ck(
                                        sys::cuMemcpyAsync(
                                            dbuf + off,
                                            sbuf + off,
                                            part,
                                            streams[j].cu_stream(),
                                        ),
                                        "copy",
                                    )?;
                                }
                            }
                            for j in 1..k {
                                ck(sys::cuEventRecord(events[j], streams[j].cu_stream()), "rec")?;
                                ck(sys::cuStreamWaitEvent(s0, events[j], 0), "wait")?;
                            }
                        }
                        _ => unreachable!(),
                    }
                    ck(sys::cuStreamSynchronize(s0), "sync")?;
                }
                if it >= 5 {
                    t.push(start.elapsed().as_secs_f64() * 1e6 / window as f64);
                }
            }
            let m = median(t);
            println!(
                "PROBE {v:<18} size {size:>9} window {window}: {m:8.3} us/write {:7.1} GB/s",
                size as f64 / m / 1e3
            );
        }
    }

    // Does a batched (or plain) copy complete while a kernel holds every
    // thread slot of GPU 0? A tiny kernel must not (the hog really holds it).
    let ptx = cudarc::nvrtc::compile_ptx(HOG)?;
    let module = c0.load_module(ptx)?;
    let hog = module.load_function("hog")?;
    let tiny = module.load_function("tiny")?;
    let sms =
        c0.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let per_sm = c0
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?
        as u32;
    let mut host = 0u64;
    let mut hostp: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: pinned, device-mapped host memory: [flag, started, tiny's out].
    unsafe {
        ck(
            sys::cuMemHostAlloc(&mut hostp, 64, 0x02 | 0x01),
            "host alloc",
        )?;
        std::ptr::write_bytes(hostp as *mut u8, 0, 64);
        ck(
            sys::cuMemHostGetDevicePointer_v2(&mut host, hostp, 0),
            "host ptr",
        )?;
    }
    let flag = hostp as *mut u32;
    for what in ["tiny-kernel", "plain-copy", "batch-copy"] {
        // SAFETY: flag/started/out are the mapped words above.
        unsafe {
            std::ptr::write_volatile(flag, 0);
            std::ptr::write_volatile(flag.add(1), 0);
            std::ptr::write_volatile(flag.add(2), 0);
        }
        let blocks = sms * (per_sm / 1024);
        let hs = &streams[1];
        let (fp, sp) = (host, host + 4);
        // SAFETY: hog(flag, started) spins on the mapped flag.
        unsafe {
            hs.launch_builder(&hog)
                .arg(&fp)
                .arg(&sp)
                .launch(LaunchConfig {
                    grid_dim: (blocks, 1, 1),
                    block_dim: (1024, 1, 1),
                    shared_mem_bytes: 0,
                })?;
        }
        let t0 = Instant::now();
        // SAFETY: reading the mapped counter the hog's blocks increment.
        while unsafe { std::ptr::read_volatile(flag.add(1)) } < blocks
            && t0.elapsed() < Duration::from_secs(2)
        {}
        let started = unsafe { std::ptr::read_volatile(flag.add(1)) };
        let size = 1usize << 20;
        // SAFETY: as in the windows above; tiny writes the mapped word 2.
        unsafe {
            match what {
                "tiny-kernel" => {
                    let op = host + 8;
                    streams[0]
                        .launch_builder(&tiny)
                        .arg(&op)
                        .launch(LaunchConfig {
                            grid_dim: (1, 1, 1),
                            block_dim: (32, 1, 1),
                            shared_mem_bytes: 0,
                        })?;
                }
                "plain-copy" => ck(sys::cuMemcpyAsync(dbuf, sbuf, size, s0), "copy")?,
                _ => batch(s0, &[dbuf, dbuf], &[sbuf, sbuf], &[size, size], 0)?,
            }
        }
        let t1 = Instant::now();
        let mut done = false;
        while t1.elapsed() < Duration::from_secs(1) {
            // SAFETY: a query of our stream.
            if unsafe { sys::cuStreamQuery(s0) } == sys::CUresult::CUDA_SUCCESS {
                done = true;
                break;
            }
        }
        let took = t1.elapsed();
        // SAFETY: releasing the hog through the mapped flag.
        unsafe { std::ptr::write_volatile(flag, 1) };
        c0.synchronize()?;
        println!(
            "HOG {what}: hog blocks {started}/{blocks} resident; completed while held: {done} ({:.1} us)",
            took.as_secs_f64() * 1e6
        );
    }
    Ok(())
}
