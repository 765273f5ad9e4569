//! GPU memory for segments: the CUDA driver, wrapped once.
//!
//! A GASPI segment may live in GPU memory, and the notification words of a
//! GPU segment may live in pinned host memory that the GPU maps. This module
//! is the only place in the runtime that talks to the CUDA driver about
//! memory; everything above it holds the RAII types defined here and never a
//! raw `CUdeviceptr` it has to free.
//!
//! # Layers
//!
//! It follows cudarc's own layering: cudarc's `driver::sys` is the raw
//! binding and `driver::result` wraps each C call 1:1 into a `Result`. This
//! module adds the safe layer the runtime needs and cudarc lacks:
//!
//! - [`GpuContext`]: the *primary* context of one device, retained once and
//!   shared (`Clone` is an `Arc` clone). Primary contexts are what the CUDA
//!   runtime, PyTorch and every other library in the process use, so memory
//!   allocated here is usable by a user's own kernels without any context
//!   juggling. It is made current on the calling thread by every call that
//!   needs it, because the progress engine and application threads both
//!   touch GPU memory.
//! - [`GpuMemory`]: `cuMemAlloc`'ed device memory, zeroed, 64 KiB aligned
//!   (the GPU page size that gdrcopy and GPUDirect RDMA pin), freed on drop,
//!   exportable with a CUDA IPC handle.
//! - [`GpuIpcMapping`]: a same-host peer's [`GpuMemory`] opened in this
//!   process, closed on drop.
//! - [`PinnedHostMemory`]: page-locked host memory mapped into the GPU
//!   (`DEVICEMAP | PORTABLE`). Deliberately *not* write-combined: the
//!   notification words that live here are polled by the CPU, and reads from
//!   write-combined memory are uncached and very slow. (cudarc's
//!   `alloc_pinned` asks for write-combined memory, which is why it is not
//!   used here.)
//! - [`HostRegistration`]: an existing host mapping (a shared-memory
//!   segment) page-locked and mapped into the GPU.
//! - [`GpuStream`] and the copy functions ([`copy_host_to_device`],
//!   [`copy_device_to_host`], [`copy_device_to_device`]) plus
//!   [`stream_write_u32`], which sets a notification word *in stream order
//!   after* the data copies enqueued before it: that is how a `write_notify`
//!   into a GPU segment keeps "data first, then the flag" without a CPU
//!   round trip.
//!
//! # No GPU, no panic
//!
//! cudarc loads `libcuda` lazily and panics when it is absent. Every entry
//! point here first calls [`driver_available`], which checks that the library
//! can be loaded (catching a panic from a driver too old for the CUDA 13.0
//! binding), initialises it and counts devices, once per process. On a host
//! without a GPU every constructor returns [`GpuError::NoDriver`] and the
//! runtime carries on with host segments.

mod context;
mod ipc;
mod memory;
mod stream;

pub use context::{enable_peer_access, GpuContext};
pub use ipc::GpuIpcMapping;
pub use memory::{
    device_allocation, DeviceAllocation, GpuMemory, HostRegistration, PinnedHostMemory,
};
pub use stream::{
    copy_device_to_device, copy_device_to_host, copy_host_to_device, copy_unified,
    copy_unified_batch, copy_unified_blocking, is_idle, stream_write_u32, stream_write_u32_batch,
    stream_write_u32s, synchronize, GpuStream,
};

use cudarc::driver::{result, sys, DriverError};
use std::sync::OnceLock;

/// The GPU page size: the granularity at which GPU memory is pinned for
/// third-party access (gdrcopy, GPUDirect RDMA). Every [`GpuMemory`] starts on
/// such a boundary and its usable length is a multiple of it.
pub const GPU_PAGE_SIZE: usize = 1 << 16;

/// A device address: a `CUdeviceptr` as the driver hands it out.
pub type DevicePtr = u64;

/// Errors of the GPU layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// The CUDA driver cannot be used on this host.
    #[error("no CUDA driver: {reason}")]
    NoDriver {
        /// why (library missing, no device, initialisation failed)
        reason: String,
    },
    /// A device ordinal that this host does not have.
    #[error("GPU {device} does not exist: this host has {count} CUDA device(s)")]
    BadDevice {
        /// the ordinal asked for
        device: u32,
        /// how many devices the driver reports
        count: u32,
    },
    /// A CUDA driver call failed.
    #[error("CUDA call {call} failed: {code}")]
    Cuda {
        /// the driver function
        call: &'static str,
        /// the `CUresult` name and the driver's description of it
        code: String,
    },
    /// Two devices cannot reach each other's memory directly.
    #[error("GPU {device} cannot access the memory of GPU {peer} (no peer-to-peer path)")]
    NoPeerAccess {
        /// the device that would access
        device: u32,
        /// the device whose memory would be accessed
        peer: u32,
    },
    /// A call was given an argument it refuses before touching the driver.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl GpuError {
    /// Maps a driver error of `call` into [`GpuError::Cuda`].
    pub(crate) fn cuda(call: &'static str) -> impl FnOnce(DriverError) -> GpuError {
        move |err| GpuError::Cuda {
            call,
            code: describe(err),
        }
    }
}

/// Name and description of a driver error, e.g.
/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.
fn describe(err: DriverError) -> String {
    // Only reached after the driver loaded (every call is behind
    // `driver_available`), so asking the driver for the text cannot panic.
    match err.error_string() {
        Ok(text) => format!("{:?} ({})", err.0, text.to_string_lossy()),
        Err(_) => format!("{:?}", err.0),
    }
}

/// Checks once per process that the CUDA driver can be used, and returns the
/// number of CUDA devices.
///
/// Never panics: a missing `libcuda`, a driver too old for the binding, a
/// failing `cuInit` and a host with zero devices are all reported as
/// [`GpuError::NoDriver`] with the reason.
pub fn driver_available() -> Result<u32, GpuError> {
    static STATE: OnceLock<Result<u32, String>> = OnceLock::new();
    STATE
        .get_or_init(probe_driver)
        .clone()
        .map_err(|reason| GpuError::NoDriver { reason })
}

fn probe_driver() -> Result<u32, String> {
    // cudarc's loader panics ("Expected symbol in library") when a libcuda is
    // found but lacks a symbol of the CUDA 13.0 binding; catch that too.
    // SAFETY: `is_culib_present` only tries to dlopen the candidate library
    // names and resolve symbols; it has no precondition.
    let present = std::panic::catch_unwind(|| unsafe { sys::is_culib_present() });
    match present {
        Ok(true) => {}
        Ok(false) => {
            return Err("libcuda could not be loaded (is the NVIDIA driver installed?)".into())
        }
        Err(_) => {
            return Err(
                "libcuda was found but lacks functions of the CUDA 13.0 API (driver too old?)"
                    .into(),
            )
        }
    }
    let count = std::panic::catch_unwind(|| {
        result::init()?;
        result::device::get_count()
    });
    match count {
        Ok(Ok(n)) if n > 0 => {
            tracing::debug!(devices = n, "CUDA driver initialised");
            Ok(n as u32)
        }
        Ok(Ok(_)) => Err("the CUDA driver loaded but reports no device".into()),
        Ok(Err(err)) => Err(format!("cuInit failed: {}", describe(err))),
        Err(_) => Err("loading libcuda panicked".into()),
    }
}

/// Checks the driver and that `device` exists.
pub(crate) fn check_device(device: u32) -> Result<(), GpuError> {
    let count = driver_available()?;
    if device >= count {
        return Err(GpuError::BadDevice { device, count });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// On a host without a GPU (CI, the developers' machines) every entry
    /// point reports `NoDriver` instead of panicking.
    #[test]
    fn without_a_driver_every_entry_point_reports_no_driver() {
        let reason = match driver_available() {
            Err(GpuError::NoDriver { reason }) => reason,
            Err(other) => panic!("driver_available may fail only with NoDriver, got {other}"),
            Ok(count) => {
                println!(
                    "skip: {count} CUDA device(s) present; the no-driver path is not reachable"
                );
                return;
            }
        };
        assert!(!reason.is_empty());
        let no_driver = |result: Result<(), GpuError>| match result {
            Err(err @ GpuError::NoDriver { .. }) => {
                assert!(err.to_string().starts_with("no CUDA driver: "), "{err}");
            }
            other => panic!("expected NoDriver, got {other:?}"),
        };
        no_driver(GpuContext::new(0).map(drop));
        no_driver(GpuMemory::alloc(0, 4096).map(drop));
        no_driver(PinnedHostMemory::alloc(0, 4096).map(drop));
        no_driver(GpuStream::new(0).map(drop));
        no_driver(GpuIpcMapping::open(0, &[0; 64], 0, 4096).map(drop));
        println!("skip: no CUDA driver ({reason}); GPU assertions not run");
    }

    /// On a GPU host the same calls succeed and the memory behaves as
    /// documented: zeroed, GPU-page aligned, device-mapped host memory that a
    /// stream-ordered write reaches.
    #[test]
    fn on_a_gpu_memory_is_zeroed_aligned_and_reachable() {
        let count = match driver_available() {
            Ok(count) => count,
            Err(err) => {
                println!("skip: {err}; GPU assertions not run");
                return;
            }
        };
        assert!(matches!(
            GpuContext::new(count),
            Err(GpuError::BadDevice { .. })
        ));
        assert!(matches!(
            GpuMemory::alloc(0, 0),
            Err(GpuError::InvalidArgument(_))
        ));
        let mem = GpuMemory::alloc(0, 1000).expect("alloc");
        assert_eq!(mem.device_ptr() & (GPU_PAGE_SIZE as u64 - 1), 0);
        assert_eq!(mem.len(), GPU_PAGE_SIZE);
        let stream = GpuStream::new(0).expect("stream");
        let mut back = vec![1u8; 1000];
        // SAFETY: `back` has 1000 bytes and `mem` more; both outlive the
        // synchronize below.
        unsafe { copy_device_to_host(&stream, back.as_mut_ptr(), mem.device_ptr(), 1000) }
            .expect("copy");
        synchronize(&stream).expect("sync");
        assert!(back.iter().all(|&b| b == 0), "GpuMemory must be zeroed");
        let pinned = PinnedHostMemory::alloc(0, 4096).expect("pinned");
        let words = pinned.as_atomic_u32s();
        assert!(words.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        // SAFETY: word 1 of the pinned allocation is device-mapped and
        // outlives the synchronize below.
        unsafe { stream_write_u32(&stream, pinned.device_ptr() + 4, 7) }.expect("write");
        synchronize(&stream).expect("sync");
        assert_eq!(words[1].load(Ordering::Acquire), 7);
        let (w2, w3) = (pinned.device_ptr() + 8, pinned.device_ptr() + 12);
        // SAFETY: words 2 and 3 of the same allocation, alive past the sync.
        unsafe { stream_write_u32s(&stream, &[(w2, 9), (w3, 0xfeed_beef)]) }.expect("writes");
        synchronize(&stream).expect("sync");
        assert_eq!(words[2].load(Ordering::Acquire), 9);
        assert_eq!(words[3].load(Ordering::Acquire), 0xfeed_beef);
        // SAFETY: unaligned: refused before anything is enqueued.
        assert!(unsafe { stream_write_u32s(&stream, &[(w2 + 1, 1)]) }.is_err());
        assert!(mem.ipc_handle().is_ok());
    }
}
