//! The primary context of a device, shared by everything allocated on it.
//!
//! CUDA memory belongs to a context, and a context must be current on the
//! calling thread for most driver calls. Every device has one *primary*
//! context that all libraries of a process share; using it (rather than a
//! context of our own) means the user's kernels, PyTorch tensors and our
//! segments all live in the same address space view. One [`GpuContext`] per
//! device exists at a time: [`GpuContext::new`] hands out the live one if
//! there is one, so the primary context is retained once and released when
//! the last segment, stream or mapping of that device is gone.

use super::{check_device, GpuError};
use cudarc::driver::{result, sys, CudaContext};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// The retained primary context of one CUDA device. Cloning is cheap (an
/// `Arc` clone); all clones are the same context.
#[derive(Clone, Debug)]
pub struct GpuContext {
    cuda: Arc<CudaContext>,
    device: u32,
}

/// Live contexts by device ordinal; weak, so that dropping the last user
/// releases the primary context.
static LIVE: Mutex<Option<HashMap<u32, Weak<CudaContext>>>> = Mutex::new(None);

impl GpuContext {
    /// The primary context of `device`, retained and made current on this
    /// thread. Returns the already-live context of that device if any.
    ///
    /// Fails with [`GpuError::NoDriver`] on a host without a usable CUDA
    /// driver and [`GpuError::BadDevice`] for an ordinal it does not have.
    pub fn new(device: u32) -> Result<GpuContext, GpuError> {
        check_device(device)?;
        let mut live = LIVE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let live = live.get_or_insert_with(HashMap::new);
        if let Some(cuda) = live.get(&device).and_then(Weak::upgrade) {
            let ctx = GpuContext { cuda, device };
            ctx.bind()?;
            return Ok(ctx);
        }
        let cuda = CudaContext::new(device as usize)
            .map_err(GpuError::cuda("cuDevicePrimaryCtxRetain"))?;
        live.insert(device, Arc::downgrade(&cuda));
        tracing::debug!(device, "retained the primary CUDA context");
        Ok(GpuContext { cuda, device })
    }

    /// The device ordinal.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// Makes this context current on the calling thread (cheap when it
    /// already is).
    pub fn bind(&self) -> Result<(), GpuError> {
        self.cuda
            .bind_to_thread()
            .map_err(GpuError::cuda("cuCtxSetCurrent"))
    }

    /// The device's compute capability as (major, minor), e.g. (9, 0).
    pub fn compute_capability(&self) -> Result<(u32, u32), GpuError> {
        let (major, minor) = self
            .cuda
            .compute_capability()
            .map_err(GpuError::cuda("cuDeviceGetAttribute"))?;
        Ok((major as u32, minor as u32))
    }

    /// The device's name as the driver reports it.
    pub fn name(&self) -> Result<String, GpuError> {
        self.cuda.name().map_err(GpuError::cuda("cuDeviceGetName"))
    }

    /// Waits until all work of this context on every stream has finished.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.bind()?;
        result::ctx::synchronize().map_err(GpuError::cuda("cuCtxSynchronize"))
    }

    /// Whether this device can access `peer`'s memory directly (NVLink or
    /// PCIe peer-to-peer). A device can always access its own memory.
    pub fn can_access_peer(&self, peer: &GpuContext) -> Result<bool, GpuError> {
        if self.device == peer.device {
            return Ok(true);
        }
        let mut can: std::ffi::c_int = 0;
        // SAFETY: both CUdevice handles come from live contexts, and `can` is
        // a valid out-pointer for the duration of the call.
        unsafe {
            sys::cuDeviceCanAccessPeer(&mut can, self.cuda.cu_device(), peer.cuda.cu_device())
        }
        .result()
        .map_err(GpuError::cuda("cuDeviceCanAccessPeer"))?;
        Ok(can != 0)
    }

    /// The cudarc context, for loading modules and launching kernels
    /// (`gaspi-gpu-kernels` works with cudarc types).
    pub fn cuda(&self) -> &Arc<CudaContext> {
        &self.cuda
    }

    /// The raw context handle, for the other functions of this module.
    pub(crate) fn raw(&self) -> sys::CUcontext {
        self.cuda.cu_ctx()
    }
}

/// Lets each of the two devices access the other's memory directly, so that
/// copies between them take the peer-to-peer path and kernels on one may
/// store into memory of the other.
///
/// Idempotent: access that is already enabled is not an error. The same
/// device twice is a no-op. Fails with [`GpuError::NoPeerAccess`] when the
/// hardware has no path between them.
pub fn enable_peer_access(a: &GpuContext, b: &GpuContext) -> Result<(), GpuError> {
    if a.device == b.device {
        return Ok(());
    }
    for (from, to) in [(a, b), (b, a)] {
        if !from.can_access_peer(to)? {
            return Err(GpuError::NoPeerAccess {
                device: from.device,
                peer: to.device,
            });
        }
        from.bind()?;
        // SAFETY: `from` is current on this thread (bind above) and `to.raw()`
        // is a live, retained context; flags must be 0 per the driver API.
        let status = unsafe { sys::cuCtxEnablePeerAccess(to.raw(), 0) };
        match status {
            sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {
            }
            other => {
                return Err(GpuError::cuda("cuCtxEnablePeerAccess")(
                    cudarc::driver::DriverError(other),
                ))
            }
        }
        tracing::debug!(
            device = from.device,
            peer = to.device,
            "peer access enabled"
        );
    }
    Ok(())
}
