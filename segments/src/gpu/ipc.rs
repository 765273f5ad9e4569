//! A same-host peer's GPU memory, opened in this process with CUDA IPC.
//!
//! The owner exports a [`GpuMemory`](super::GpuMemory) as a 64-byte handle
//! ([`ipc_handle`](super::GpuMemory::ipc_handle)); the runtime ships it in
//! the segment descriptor; a peer on the same host opens it here and may then
//! copy into it on a stream, or hand the address to a kernel that stores
//! into it over NVLink or PCIe. The mapping is opened with
//! `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`, so it works whether the memory sits
//! on this process's device or on another one.

use super::{DevicePtr, GpuContext, GpuError};
use cudarc::driver::sys;

/// A peer process's GPU allocation mapped into this process; closed on drop.
///
/// The owner must keep its allocation alive while peers may have it open
/// (the runtime's segment lifetime rules ensure this: a segment is freed
/// only after every rank that could write to it has let go).
#[derive(Debug)]
pub struct GpuIpcMapping {
    ctx: GpuContext,
    base: DevicePtr,
    ptr: DevicePtr,
    len: usize,
}

impl GpuIpcMapping {
    /// Opens the allocation named by `handle` in the context of `device`,
    /// and views the `len` bytes starting `offset` bytes into it.
    ///
    /// Fails (and closes the handle again) when `offset + len` exceeds the
    /// allocation. Opening a handle in the very process that exported it is
    /// refused by the driver.
    pub fn open(
        device: u32,
        handle: &[u8; 64],
        offset: u64,
        len: usize,
    ) -> Result<GpuIpcMapping, GpuError> {
        let ctx = GpuContext::new(device)?;
        ctx.bind()?;
        let raw = sys::CUipcMemHandle {
            reserved: handle.map(|b| b as std::ffi::c_char),
        };
        let mut base: DevicePtr = 0;
        // SAFETY: `base` is a valid out-pointer, the handle is passed by
        // value, the flag is a defined CUipcMem_flags value, and a context is
        // current. A handle that names no live allocation makes the driver
        // return an error, not undefined behaviour.
        unsafe {
            sys::cuIpcOpenMemHandle_v2(
                &mut base,
                raw,
                sys::CUipcMem_flags_enum::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
            )
        }
        .result()
        .map_err(GpuError::cuda("cuIpcOpenMemHandle"))?;
        let mapping = GpuIpcMapping {
            ctx,
            base,
            ptr: base + offset,
            len,
        };
        let mut range_base: DevicePtr = 0;
        let mut range_len: usize = 0;
        // SAFETY: both out-pointers are valid; `base` is a live mapping.
        unsafe { sys::cuMemGetAddressRange_v2(&mut range_base, &mut range_len, base) }
            .result()
            .map_err(GpuError::cuda("cuMemGetAddressRange"))?;
        let end = offset
            .checked_add(len as u64)
            .map(|e| e + (base - range_base));
        if !matches!(end, Some(end) if end <= range_len as u64) {
            return Err(GpuError::InvalidArgument(format!(
                "IPC range {offset}+{len} exceeds the peer allocation of {range_len} bytes"
            )));
        }
        Ok(mapping)
    }

    /// The address of the first byte of the requested range, valid in this
    /// process's context of the device it was opened on.
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Length of the requested range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty range.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The context the mapping was opened in.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }
}

impl Drop for GpuIpcMapping {
    fn drop(&mut self) {
        if let Err(err) = self.ctx.bind() {
            tracing::warn!(%err, "cannot bind the context to close an IPC mapping");
            return;
        }
        // SAFETY: `base` was returned by cuIpcOpenMemHandle and is closed
        // exactly once.
        let status = unsafe { sys::cuIpcCloseMemHandle(self.base) };
        if status != sys::CUresult::CUDA_SUCCESS {
            tracing::warn!(?status, "cuIpcCloseMemHandle failed");
        }
    }
}
