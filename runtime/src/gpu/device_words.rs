//! Notification words in GPU memory: the `device` placement
//! ([`NotificationPlacement::Device`](crate::NotificationPlacement)).
//!
//! The words of such a segment sit in its own GPU allocation, on the first
//! 64 KiB boundary past the data (a GPU page, as gdrcopy would need), so
//! the CUDA IPC handle of the data also carries them: a peer GPU's kernel
//! stores its notification over NVLink into the owner's memory, and the
//! owner's kernels poll their own memory instead of host memory across
//! PCIe. Everything that does not run on a GPU pays instead:
//!
//! - CPU writers (peers' or the owner's own) set a word with a stream
//!   memory operation (`cuStreamWriteValue32`) after their copies, on the
//!   queue's stream or in the owner's inbox (`owner_copy`), never with a
//!   store;
//! - the owner's CPU waits by polling the words with copies (no futex can
//!   wake it: no writer runs on the CPU), and resets a word with a
//!   one-thread kernel doing `atomicExch`, because no driver operation
//!   exchanges a word atomically and a read followed by a write would lose
//!   a notification that lands between the two.
//!
//! The notification area in the segment's memfd still exists: it carries
//! the count (bounds checks) and the header through which a dead peer wakes
//! waiters, but its words stay zero.

use crate::error::{Error, Result};
use gaspi_segments::gpu::{self, DevicePtr, GpuError, GpuStream, PinnedHostMemory};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Where the words start in the segment's allocation: the first GPU page
/// boundary at or past `size` bytes of data.
pub(crate) fn words_offset(size: usize) -> usize {
    size.next_multiple_of(gpu::GPU_PAGE_SIZE)
}

/// One-thread kernel: exchange a word with 0 and report the old value.
const EXCHANGE_SOURCE: &str = r#"
extern "C" __global__ void gaspi_word_exchange(unsigned int* word, unsigned int* old) {
    *old = atomicExch(word, 0u);
    __threadfence_system();
}
"#;

/// The owner's CPU-side access to words in GPU memory.
#[derive(Debug)]
pub(crate) struct DeviceWords {
    /// Device address of word 0.
    pub base: DevicePtr,
    count: u32,
    stream: GpuStream,
    /// The exchange kernel and its result word, made on the first reset.
    exchange: OnceLock<std::result::Result<Exchange, String>>,
    /// One reset at a time uses the result word.
    serial: Mutex<()>,
}

#[derive(Debug)]
struct Exchange {
    function: cudarc::driver::CudaFunction,
    result: PinnedHostMemory,
}

// SAFETY: `Exchange` holds a loaded function of a module that lives in the
// context for the life of the process (cudarc keeps the module alive inside
// the function) and a pinned buffer; both are used only under `serial`.
unsafe impl Send for Exchange {}
// SAFETY: see Send.
unsafe impl Sync for Exchange {}

impl DeviceWords {
    /// Words `base..base + 4 * count` of the allocation `stream`'s device
    /// holds (the segment's own stream: every use here is synchronous).
    pub fn new(stream: GpuStream, base: DevicePtr, count: u32) -> DeviceWords {
        DeviceWords {
            base,
            count,
            stream,
            exchange: OnceLock::new(),
            serial: Mutex::new(()),
        }
    }

    /// The first non-zero word of `begin..begin + num` (checked by the
    /// caller), read with one device-to-host copy.
    pub fn scan(&self, begin: u32, num: u32) -> Result<Option<u32>> {
        debug_assert!(begin as u64 + num as u64 <= self.count as u64);
        let mut words = vec![0u32; num as usize];
        // SAFETY: the range lies within the words (checked by the caller),
        // which live as long as the segment; `words` holds num u32 and the
        // copy is complete when the call returns.
        unsafe {
            gpu::copy_unified_blocking(
                &self.stream,
                words.as_mut_ptr() as DevicePtr,
                self.base + 4 * begin as u64,
                4 * num as usize,
            )?
        };
        Ok(words.iter().position(|&w| w != 0).map(|i| begin + i as u32))
    }

    /// Waits for one of the words `begin..begin + num` (checked by the
    /// caller) to become non-zero; `None` once `deadline` passed. Nothing
    /// can wake a CPU waiter here, so it polls with copies, pausing a
    /// little longer each time (up to 100 us) so that a long wait costs
    /// little.
    pub fn wait(&self, begin: u32, num: u32, deadline: Option<Instant>) -> Result<Option<u32>> {
        let mut pause = Duration::from_micros(1);
        loop {
            if let Some(id) = self.scan(begin, num)? {
                return Ok(Some(id));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_micros(100));
        }
    }

    /// Sets word `id` (checked by the caller) in stream order and waits
    /// until it is written.
    pub fn set(&self, id: u32, value: u32) -> Result<()> {
        // SAFETY: the word lies within the allocation, alive as long as the
        // segment; the synchronize below completes the write.
        unsafe { gpu::stream_write_u32(&self.stream, self.base + 4 * id as u64, value)? };
        gpu::synchronize(&self.stream)?;
        Ok(())
    }

    /// Atomically exchanges word `id` (checked by the caller) with 0;
    /// returns the old value.
    pub fn reset(&self, id: u32) -> Result<u32> {
        use cudarc::driver::PushKernelArg;
        let exchange = self
            .exchange
            .get_or_init(|| {
                let cuda = self.stream.context().cuda();
                let module = gaspi_gpu_kernels::compile_and_load(
                    cuda,
                    EXCHANGE_SOURCE,
                    "gaspi_word_exchange.cu",
                )
                .map_err(|e| e.to_string())?;
                let function = gaspi_gpu_kernels::function(&module, "gaspi_word_exchange")
                    .map_err(|e| e.to_string())?;
                let result = PinnedHostMemory::alloc(self.stream.context().device(), 4096)
                    .map_err(|e| e.to_string())?;
                Ok(Exchange { function, result })
            })
            .as_ref()
            .map_err(|reason| {
                Error::Gpu(GpuError::Cuda {
                    call: "the notification reset kernel",
                    code: reason.clone(),
                })
            })?;
        let _one = self.serial.lock().unwrap_or_else(|p| p.into_inner());
        let (word, old) = (self.base + 4 * id as u64, exchange.result.device_ptr());
        let one = cudarc::driver::LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: gaspi_word_exchange(unsigned*, unsigned*): `word` is a word
        // of the allocation (checked id), `old` the device address of the
        // pinned result buffer; both outlive the synchronize below.
        unsafe {
            self.stream
                .cuda()
                .launch_builder(&exchange.function)
                .arg(&word)
                .arg(&old)
                .launch(one)
        }
        .map_err(|e| {
            Error::Gpu(GpuError::Cuda {
                call: "cuLaunchKernel (notification reset)",
                code: e.to_string(),
            })
        })?;
        gpu::synchronize(&self.stream)?;
        Ok(exchange.result.as_atomic_u32s()[0].load(std::sync::atomic::Ordering::Acquire))
    }
}
