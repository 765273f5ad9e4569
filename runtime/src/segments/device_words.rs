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
//!   wake it: no writer runs on the CPU), into a pinned landing buffer,
//!   back to back for the configured spin time before it pauses (decision
//!   0037: pausing after the first miss cost a sleep of 50 us or more, the
//!   kernel's timer slack, in every host-driven round trip), and resets a
//!   word with a one-thread kernel doing `atomicExch`, because no driver
//!   operation exchanges a word atomically and a read followed by a write
//!   would lose a notification that lands between the two.
//!
//! The notification area in the segment's memfd still exists: it carries
//! the count (bounds checks) and the header through which a dead peer wakes
//! waiters, but its words stay zero.
//!
//! # The `gdrcopy` placement
//!
//! The same words, also mapped into the owner's process through gdrcopy
//! (`gaspi_notify::gdrcopy`: the `gdrdrv` driver pins the GPU pages and
//! exposes them through the GPU's BAR). Then the owner's CPU reads a word
//! with a load across PCIe (about a microsecond, against several for a
//! copy) and sets one with a store and a store fence instead of a stream
//! operation. Two things stay as under `device`:
//!
//! - a reset of a word that reads non-zero still runs the exchange kernel:
//!   gdrcopy's documentation says a CPU read-modify-write through the BAR
//!   is not atomic with respect to the GPU, and a read followed by a store
//!   would lose a notification a kernel sets between the two. (A word that
//!   reads 0 is reset without it: the reset then simply happened before
//!   any concurrent set.)
//! - ranges wider than [`BAR_SCAN_MAX`] words are scanned with one copy,
//!   since every load through the BAR is its own PCIe read.
//!
//! Peers are not told: they write as under `device` (the descriptor is the
//! same). Mapping a *peer's* words would need gdrcopy pins of memory opened
//! with CUDA IPC, which no machine here can try (no `gdrdrv`), so CPU
//! peers keep going through the owner's inbox, whose thread uses the
//! mapping when nothing is pending before the notification.

use crate::model::error::{Error, Result};
use gaspi_notify::gdrcopy::{Gdr, GdrError, GdrMapping};
use gaspi_segments::gpu::{self, DevicePtr, GpuError, GpuStream, PinnedHostMemory};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Widest range the owner's CPU scans with loads through a gdrcopy
/// mapping; wider ones take one copy (a load through the BAR is a PCIe
/// read of its own, a copy costs a few microseconds whatever the width).
pub(crate) const BAR_SCAN_MAX: u32 = 8;

/// This process's connection to the gdrcopy driver, opened on first use
/// and kept for the life of the process; the reason when there is none.
pub(crate) fn gdrcopy() -> std::result::Result<&'static Arc<Gdr>, &'static GdrError> {
    static GDR: OnceLock<std::result::Result<Arc<Gdr>, GdrError>> = OnceLock::new();
    GDR.get_or_init(Gdr::open).as_ref()
}

/// Bytes of words to pin and map for `count` words: whole GPU pages.
pub(crate) fn mapped_len(count: u32) -> usize {
    (4 * count as usize).next_multiple_of(gpu::GPU_PAGE_SIZE)
}

/// Where the words start in the segment's allocation: the first GPU page
/// boundary at or past `size` bytes of data; `None` if that overflows.
pub(crate) fn words_offset(size: usize) -> Option<usize> {
    size.checked_next_multiple_of(gpu::GPU_PAGE_SIZE)
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
    /// The words mapped into this process (the `gdrcopy` placement).
    bar: Option<GdrMapping>,
    /// How long a waiter polls back to back before it starts to pause.
    spin: Duration,
    /// Pinned memory that scans copy the words into (a copy into pageable
    /// memory is staged by the driver and slower), made on the first scan;
    /// one scan at a time uses it, others copy into a vector.
    landing: OnceLock<std::result::Result<Mutex<PinnedHostMemory>, String>>,
}

/// Words that a scan copies into the pinned landing buffer; wider ranges
/// go into a vector.
const LANDING_WORDS: u32 = 1024;

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
    /// holds (the segment's own stream: every use here is synchronous); a
    /// waiter polls them back to back for `spin` before it pauses.
    pub fn new(stream: GpuStream, base: DevicePtr, count: u32, spin: Duration) -> DeviceWords {
        DeviceWords {
            base,
            count,
            stream,
            exchange: OnceLock::new(),
            serial: Mutex::new(()),
            bar: None,
            spin,
            landing: OnceLock::new(),
        }
    }

    /// Maps the words into this process through gdrcopy, so the owner's
    /// CPU loads and stores them directly. On failure the words stay as
    /// they were (reached with copies and stream writes).
    ///
    /// # Safety
    /// `base` must lie in a `GpuMemory` allocation (`CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`
    /// set, pages of 64 KiB) holding at least [`mapped_len`]`(count)` bytes
    /// from `base`, on a GPU page boundary, and that allocation must be
    /// freed only after these words are dropped.
    pub unsafe fn map_with_gdrcopy(&mut self, gdr: &Arc<Gdr>) -> std::result::Result<(), GdrError> {
        // SAFETY: the caller's contract is GdrMapping::new's.
        let mapping = unsafe { GdrMapping::new(gdr, self.base, mapped_len(self.count))? };
        tracing::debug!(
            words = self.count,
            write_combined = mapping.is_write_combined(),
            "notification words mapped through gdrcopy"
        );
        self.bar = Some(mapping);
        Ok(())
    }

    /// Whether the words are mapped through gdrcopy.
    pub fn is_mapped(&self) -> bool {
        self.bar.is_some()
    }

    /// Sets word `id` (checked by the caller) with a store through the
    /// gdrcopy mapping, if there is one; false otherwise. The store is
    /// fenced: it reaches the GPU after every earlier store of this thread.
    pub fn store(&self, id: u32, value: u32) -> bool {
        match &self.bar {
            Some(bar) => bar.write_u32(id as usize, value),
            None => false,
        }
    }

    /// The first non-zero word of `begin..begin + num` (checked by the
    /// caller), read with loads through a gdrcopy mapping or with one
    /// device-to-host copy.
    pub fn scan(&self, begin: u32, num: u32) -> Result<Option<u32>> {
        debug_assert!(begin as u64 + num as u64 <= self.count as u64);
        if let Some(bar) = self.bar.as_ref().filter(|_| num <= BAR_SCAN_MAX) {
            return Ok(
                (begin..begin + num).find(|&id| bar.read_u32(id as usize).is_some_and(|v| v != 0))
            );
        }
        let src = self.base + 4 * begin as u64;
        let landing = match self.landing() {
            Some(l) if num <= LANDING_WORDS => l.try_lock().ok(),
            _ => None,
        };
        if let Some(landing) = landing {
            // SAFETY: the range lies within the words (checked by the
            // caller), which live as long as the segment; the landing
            // buffer holds LANDING_WORDS words, is ours while the lock is
            // held, and the copy is complete when the call returns.
            unsafe {
                gpu::copy_unified_blocking(
                    &self.stream,
                    landing.host_ptr() as DevicePtr,
                    src,
                    4 * num as usize,
                )?
            };
            let words = &landing.as_atomic_u32s()[..num as usize];
            return Ok(words
                .iter()
                .position(|w| w.load(std::sync::atomic::Ordering::Acquire) != 0)
                .map(|i| begin + i as u32));
        }
        let mut words = vec![0u32; num as usize];
        // SAFETY: as above; `words` holds num u32.
        unsafe {
            gpu::copy_unified_blocking(
                &self.stream,
                words.as_mut_ptr() as DevicePtr,
                src,
                4 * num as usize,
            )?
        };
        Ok(words.iter().position(|&w| w != 0).map(|i| begin + i as u32))
    }

    /// The pinned landing buffer of scans, made on first use; `None` where
    /// it cannot be made (scans then copy into a vector).
    fn landing(&self) -> Option<&Mutex<PinnedHostMemory>> {
        self.landing
            .get_or_init(|| {
                PinnedHostMemory::alloc(self.stream.context().device(), 4 * LANDING_WORDS as usize)
                    .map(Mutex::new)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .ok()
    }

    /// Waits for one of the words `begin..begin + num` (checked by the
    /// caller) to become non-zero; `None` once `deadline` passed. Nothing
    /// can wake a CPU waiter here, so it polls: back to back for the spin
    /// time (loads through a gdrcopy mapping where there is one, copies
    /// otherwise), then pausing a little longer each time (up to 100 us)
    /// so that a long wait costs little. A pause is a sleep, and the
    /// shortest sleep lasts the kernel's timer slack (50 us by default):
    /// pausing from the first miss on made every host-driven round trip
    /// cost that (decision 0037).
    pub fn wait(&self, begin: u32, num: u32, deadline: Option<Instant>) -> Result<Option<u32>> {
        let spin_until = Instant::now() + self.spin;
        loop {
            if let Some(id) = self.scan(begin, num)? {
                return Ok(Some(id));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            if now >= spin_until {
                break;
            }
            std::hint::spin_loop();
        }
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

    /// Sets word `id` (checked by the caller): a store through the gdrcopy
    /// mapping, or a write in stream order that is complete on return.
    pub fn set(&self, id: u32, value: u32) -> Result<()> {
        if self.store(id, value) {
            return Ok(());
        }
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
        if let Some(bar) = &self.bar {
            // A word that reads 0 needs no exchange (see the module docs).
            if bar.read_u32(id as usize) == Some(0) {
                return Ok(0);
            }
        }
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
