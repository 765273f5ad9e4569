//! Writes between GPU memories gathered: for the copy engine as one
//! `cuMemcpyBatchAsync` (the default, decision 0054), or into one copy
//! kernel per window (opt-in, decision 0046).
//!
//! # The copy engine's batch (default)
//!
//! Each `cuMemcpyAsync` between two GPUs pays a fixed cost of about 2.7 us
//! on the copy engine (H100 pair, NVLink); copies handed over in one
//! `cuMemcpyBatchAsync` pay about 1.9 us each (1 MiB: 4.6 instead of 5.5 us
//! a copy; 0.79 -> 1.05 of NVSHMEM's host-synchronised bandwidth at 1 MiB,
//! decision 0054). So a write from one GPU's memory into another
//! GPU's posted while the queue's stream still runs earlier work of the
//! queue (`cuStreamQuery`) joins the queue's batch instead of being
//! enqueued at once: in stream
//! order it could not have started before that work ends anyway. The batch
//! goes to the stream as one `cuMemcpyBatchAsync` at the same points as
//! the kernel's (before a notification, a copy that is not gathered, a
//! read, `wait`), or as soon as it holds `Config::gpu_engine_batch` bytes
//! (16 MiB, about 43 us of copying: the most that can wait for the host's
//! next call on the queue when the engine runs dry before it) or [`MAX`]
//! writes. A write posted to an idle stream, and a `write_notify` with
//! nothing gathered, are enqueued at once as before, so a lone write
//! overlaps whatever the host does next. The copies of one batch may run
//! in any order, as GASPI allows for the writes of a queue before its next
//! notification. The batch runs on the copy engines like any copy: no
//! multiprocessor is needed, so a kernel holding all of them cannot stop
//! it (checked by the GPU test `gpu-gpu-sms-held`). Writes within one GPU
//! are not gathered: not measured, and there a plain copy between two
//! processes' memories already waits for such a kernel (same test, one
//! GPU). `GASPI_GPU_ENGINE_BATCH=0` turns it off. A driver that refuses
//! the batch gets the copies one by one.
//!
//! # The copy kernel (opt-in)
//!
//! `cuMemcpyAsync` between two GPUs runs on a copy engine with a fixed cost
//! of about 2.7 us per copy on an H100 pair joined by NVLink, which a
//! second stream does not hide, and a kernel launched per write costs more
//! (decision 0037, issue 26). So a `write` between 16-byte aligned GPU
//! memories of `Config::gpu_batch_min` up to `Config::gpu_batch_max`
//! (`GASPI_GPU_BATCH_MIN`, `GASPI_GPU_BATCH_MAX`; 8 MiB) bytes, posted while the queue already has GPU work in flight,
//! is not enqueued at once: it joins the queue's batch, and the batch
//! becomes one launch of [`SOURCE`] on the queue's stream (the
//! multiprocessors copy, 32 KiB per block and step, at most one block per
//! multiprocessor, as NVSHMEM's block puts) before anything else is
//! enqueued on that stream or synchronised with it: a notification,
//! another copy, a read, `wait`. The stream's order is thus kept (data
//! first, then the flag), and a window of writes followed by `wait` costs
//! one copy and one launch. A full batch ([`MAX`] writes) is launched at
//! once. The first write of a window, and a `write_notify` with nothing
//! gathered, take the copy engine at once: alone, a launch answers about
//! 3 us later than the engine (host-driven ping-pong, 64 KiB - 4 MiB).
//!
//! The copy kernel needs room on a multiprocessor of the writer's GPU: a
//! kernel there that holds every multiprocessor's resources and waits for
//! such a write would wait forever, which the copy engine never does. So
//! it is off unless asked for: `GASPI_GPU_BATCH_MIN=65536` gathers from
//! 64 KiB (the size measured best, decision 0046); unset or 0 keeps every
//! write on the copy engine (with its batch above).
//!
//! The kernel is compiled with NVRTC on the first batched write of a device
//! and kept for the process; a device where it cannot be compiled or
//! launched keeps the copy engine.

use crate::model::config::Config;
use crate::model::error::Result;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use gaspi_segments::gpu::{self, DevicePtr, GpuContext, GpuStream};
use std::sync::Mutex;

/// Writes per launch (the batch travels as the kernel's parameter, which
/// must stay within 4 KiB).
pub(crate) const MAX: usize = 64;

/// Bytes a block copies per step.
const CHUNK: usize = 32 << 10;

const THREADS: u32 = 512;

/// The kernel: block `b` copies the 32 KiB chunks `b`, `b + grid`, ... of
/// the batch's writes laid end to end; each thread keeps its four 16-byte
/// loads of a chunk in flight before it stores them.
pub(crate) const SOURCE: &str = r#"
#define GASPI_BATCH_MAX 64
#define GASPI_CHUNK_WORDS 2048
struct gaspi_copy_batch_t {
    unsigned long long dst[GASPI_BATCH_MAX];
    unsigned long long src[GASPI_BATCH_MAX];
    unsigned long long words[GASPI_BATCH_MAX];
    unsigned int first[GASPI_BATCH_MAX];
    unsigned int n;
    unsigned int chunks;
};
extern "C" __global__ void __launch_bounds__(512) gaspi_copy_batch(const gaspi_copy_batch_t b) {
    unsigned int e = 0;
    for (unsigned int c = blockIdx.x; c < b.chunks; c += gridDim.x) {
        while (e + 1 < b.n && b.first[e + 1] <= c) ++e;
        const unsigned long long base = (unsigned long long)(c - b.first[e]) * GASPI_CHUNK_WORDS;
        const uint4* __restrict__ src = (const uint4*)b.src[e] + base;
        uint4* __restrict__ dst = (uint4*)b.dst[e] + base;
        const unsigned long long left = b.words[e] - base;
        const unsigned int n = left < GASPI_CHUNK_WORDS ? (unsigned int)left : GASPI_CHUNK_WORDS;
        uint4 v[GASPI_CHUNK_WORDS / 512];
#pragma unroll
        for (unsigned int k = 0; k < GASPI_CHUNK_WORDS / 512; ++k) {
            const unsigned int i = threadIdx.x + k * 512;
            if (i < n) v[k] = src[i];
        }
#pragma unroll
        for (unsigned int k = 0; k < GASPI_CHUNK_WORDS / 512; ++k) {
            const unsigned int i = threadIdx.x + k * 512;
            if (i < n) dst[i] = v[k];
        }
    }
}
"#;

/// The kernel's parameter (`gaspi_copy_batch_t`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Params {
    dst: [u64; MAX],
    src: [u64; MAX],
    words: [u64; MAX],
    first: [u32; MAX],
    n: u32,
    chunks: u32,
}

// SAFETY: `Params` is `#[repr(C)]` plain integers laid out as
// `gaspi_copy_batch_t` (same field order and types, no padding between the
// arrays), so it is passed by value exactly as the kernel declares it.
unsafe impl cudarc::driver::DeviceRepr for Params {}

/// The writes gathered on one queue, not yet launched.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// (destination, source, bytes) of each write, in posting order.
    writes: Vec<(DevicePtr, DevicePtr, usize)>,
    /// Whether the writes go to the copy engine as one
    /// `cuMemcpyBatchAsync` rather than to the copy kernel.
    engine: bool,
    /// Bytes gathered for the copy engine.
    bytes: u64,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Gathers a write for the copy kernel.
    pub fn push(&mut self, dst: DevicePtr, src: DevicePtr, len: usize) {
        self.engine = false;
        self.writes.push((dst, src, len));
    }

    /// Gathers a write for the copy engine's batch (the batch then holds
    /// only such writes: engine and kernel gathering never run together).
    pub fn push_engine(&mut self, dst: DevicePtr, src: DevicePtr, len: usize) {
        self.engine = true;
        self.bytes = self.bytes.saturating_add(len as u64);
        self.writes.push((dst, src, len));
    }

    /// Whether the batch holds [`MAX`] writes, or for the copy engine
    /// `engine_max` bytes or more (it is launched at once).
    pub fn full(&self, engine_max: u64) -> bool {
        self.writes.len() >= MAX || (self.engine && self.bytes >= engine_max)
    }

    /// Enqueues the gathered writes on `stream`: one `cuMemcpyBatchAsync`
    /// or one kernel launch, or, where the driver refuses the batch or the
    /// device has no kernel, a copy each. The batch is empty afterwards,
    /// also on an error.
    pub fn launch(&mut self, stream: &GpuStream) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let writes = std::mem::take(&mut self.writes);
        self.bytes = 0;
        if self.engine {
            // SAFETY: the ranges were checked when each write was posted
            // and stay alive until `wait` (see `gpu_put`); a batch holds
            // writes only, whose order GASPI leaves open until a
            // notification, which comes after the batch in stream order.
            match unsafe { gpu::copy_unified_batch(stream, &writes) } {
                Ok(()) => return Ok(()),
                Err(e) => tracing::debug!("copy batch refused, one copy each: {e}"),
            }
        } else if launch_kernel(stream, &writes)? {
            return Ok(());
        }
        for (dst, src, len) in writes {
            // SAFETY: the ranges were checked when each write was posted
            // and stay alive until `wait` (see `gpu_put`).
            unsafe { gpu::copy_unified(stream, dst, src, len)? }
        }
        Ok(())
    }
}

/// Whether a write of `len` bytes from `src` to `dst` (both GPU memory the
/// queue's device reaches) is one for the batch.
/// `config` gives the range (`gpu_batch_min`, `gpu_batch_max`; a minimum
/// of 0 turns gathering off: see the module docs for why it is opt-in).
pub(crate) fn suits(config: &Config, len: usize, dst: DevicePtr, src: DevicePtr) -> bool {
    let (min, len64) = (config.gpu_batch_min, len as u64);
    min > 0
        && len64 >= min
        && len64 <= config.gpu_batch_max
        && len < (u32::MAX as usize)
        && (dst | src | len as u64) & 15 == 0
}

/// Per device: the kernel and the multiprocessor count, or `None` where it
/// could not be made (then the copy engine stays).
type Loaded = Option<(CudaFunction, u32)>;

static KERNELS: Mutex<Vec<(u32, Loaded)>> = Mutex::new(Vec::new());

fn kernel_for(ctx: &GpuContext) -> Loaded {
    let device = ctx.device();
    let mut kernels = KERNELS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, k)) = kernels.iter().find(|(d, _)| *d == device) {
        return k.clone();
    }
    let made = (|| -> std::result::Result<(CudaFunction, u32), String> {
        let cuda = ctx.cuda();
        let module = gaspi_gpu_kernels::compile_and_load(cuda, SOURCE, "gaspi_copy_batch.cu")
            .map_err(|e| e.to_string())?;
        let f =
            gaspi_gpu_kernels::function(&module, "gaspi_copy_batch").map_err(|e| e.to_string())?;
        let sms = cuda
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(|e| e.to_string())?;
        Ok((f, sms.max(1) as u32))
    })();
    let k = match made {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!(device, "writes between GPUs keep the copy engine: {e}");
            None
        }
    };
    kernels.push((device, k.clone()));
    k
}

/// One launch copying `writes` (at most [`MAX`], each passing [`suits`]);
/// false where the device has no kernel (the caller copies instead).
fn launch_kernel(stream: &GpuStream, writes: &[(DevicePtr, DevicePtr, usize)]) -> Result<bool> {
    let Some((f, sms)) = kernel_for(stream.context()) else {
        return Ok(false);
    };
    let mut p = Params {
        dst: [0; MAX],
        src: [0; MAX],
        words: [0; MAX],
        first: [0; MAX],
        n: writes.len() as u32,
        chunks: 0,
    };
    let mut chunks: u64 = 0;
    for (i, &(dst, src, len)) in writes.iter().enumerate() {
        p.dst[i] = dst;
        p.src[i] = src;
        p.words[i] = (len / 16) as u64;
        p.first[i] = chunks as u32;
        chunks += len.div_ceil(CHUNK) as u64;
    }
    let Ok(total) = u32::try_from(chunks) else {
        return Ok(false);
    };
    p.chunks = total;
    let cfg = LaunchConfig {
        grid_dim: (total.clamp(1, sms), 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    stream.context().bind()?;
    // SAFETY: gaspi_copy_batch(gaspi_copy_batch_t) by value, which `Params`
    // matches; every range was checked against its segment when posted
    // (16-byte aligned, whole words) and stays alive until the stream has
    // run the kernel (`wait`, as for any posted write), and this stream's
    // context reaches both ends of each (checked before batching).
    let launched = unsafe { stream.cuda().launch_builder(&f).arg(&p).launch(cfg) };
    match launched {
        Ok(_) => Ok(true),
        Err(e) => {
            tracing::warn!("copy kernel launch failed, the copy engine copies: {e}");
            Ok(false)
        }
    }
}
