//! Writes between GPU memories copied by a kernel instead of the copy
//! engine (decision 0038).
//!
//! `cuMemcpyAsync` between two GPUs runs on a copy engine, one copy after
//! the other per stream, with a fixed cost per copy of about 2.7 us on an
//! H100 pair joined by NVLink: a window of 1 MiB writes reached 192 GB/s,
//! where NVSHMEM's kernel-driven puts (the multiprocessors copy) reach
//! 267-272 GB/s on the same GPUs; a second stream per queue did not help.
//! So, where `Config::gpu_copy_kernel_max` allows it (off by default: the
//! kernel needs room on a multiprocessor, and a persistent kernel holding
//! every one, waiting for this very data, would never give it), a write of
//! [`MIN`] up to that many bytes between 16-byte aligned GPU addresses is a
//! launch of [`SOURCE`] on the queue's stream, which keeps the stream's
//! order (a notification enqueued after it follows the data, `wait`
//! synchronises it). The kernel is compiled with NVRTC on the first such
//! write of a device and kept for the process; a device where it cannot be
//! compiled or launched keeps the copy engine.

use crate::error::Result;
use cudarc::driver::{CudaFunction, LaunchConfig, PushKernelArg};
use gaspi_segments::gpu::{DevicePtr, GpuContext, GpuStream};
use std::sync::Mutex;

/// Smallest write copied by the kernel: below it the launch costs about
/// what the copy engine's fixed cost does.
pub(crate) const MIN: usize = 256 << 10;

/// Bytes per block: a write of 1 MiB runs on 32 blocks, 4 MiB and more on
/// every multiprocessor (as NVSHMEM's block puts, bench/peers/nvshmem_bw.cu).
const PER_BLOCK: usize = 32 << 10;

const THREADS: u32 = 512;

/// Grid-stride copy of 16-byte words, four loads in flight per thread.
pub(crate) const SOURCE: &str = r#"
extern "C" __global__ void gaspi_copy_words(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                            unsigned long long n) {
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
        dst[i] = a;
        dst[i + stride] = b;
        dst[i + 2 * stride] = c;
        dst[i + 3 * stride] = d;
    }
    for (; i < n; i += stride) dst[i] = src[i];
}
"#;

/// Per device: the kernel and the multiprocessor count, or `None` where it
/// could not be made (then the copy engine stays).
type Loaded = Option<(CudaFunction, u32)>;

static KERNELS: Mutex<Vec<(u32, Loaded)>> = Mutex::new(Vec::new());

/// Whether a write of `len` bytes from `src` to `dst` (both GPU memory
/// this context reaches) is one for the kernel.
pub(crate) fn suits(len: usize, dst: DevicePtr, src: DevicePtr, max: u64) -> bool {
    len >= MIN && len as u64 <= max && (dst | src | len as u64) & 15 == 0
}

fn kernel_for(ctx: &GpuContext) -> Loaded {
    let device = ctx.device();
    let mut kernels = KERNELS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, k)) = kernels.iter().find(|(d, _)| *d == device) {
        return k.clone();
    }
    let made = (|| -> std::result::Result<(CudaFunction, u32), String> {
        let cuda = ctx.cuda();
        let module = gaspi_gpu_kernels::compile_and_load(cuda, SOURCE, "gaspi_copy_words.cu")
            .map_err(|e| e.to_string())?;
        let f =
            gaspi_gpu_kernels::function(&module, "gaspi_copy_words").map_err(|e| e.to_string())?;
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

/// Enqueues the copy of `len` bytes (see [`suits`]) on `stream` as a kernel;
/// false where the device has no kernel (the caller copies instead).
pub(crate) fn launch(
    stream: &GpuStream,
    dst: DevicePtr,
    src: DevicePtr,
    len: usize,
) -> Result<bool> {
    let Some((f, sms)) = kernel_for(stream.context()) else {
        return Ok(false);
    };
    let blocks = (len / PER_BLOCK).clamp(1, sms as usize) as u32;
    let cfg = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let words = (len / 16) as u64;
    stream.context().bind()?;
    // SAFETY: gaspi_copy_words(uint4*, const uint4*, unsigned long long):
    // the caller checked both ranges (len bytes, 16-byte aligned) against
    // their segments, which stay alive until the stream has run the copy
    // (`wait`, as for any posted write), and this stream's context reaches
    // both (the caller's condition).
    let launched = unsafe {
        stream
            .cuda()
            .launch_builder(&f)
            .arg(&dst)
            .arg(&src)
            .arg(&words)
            .launch(cfg)
    };
    match launched {
        Ok(_) => Ok(true),
        Err(e) => {
            tracing::warn!("copy kernel launch failed, the copy engine copies: {e}");
            Ok(false)
        }
    }
}
