//! Streams, copies and stream-ordered notification writes.
//!
//! A `write_notify` into GPU memory that the CPU cannot store into directly
//! is two operations on one stream: the data copy, then a 4-byte write of
//! the notification word. The stream executes them in order, and
//! `cuStreamWriteValue32` (without the no-barrier flag) fences before it
//! writes, so a kernel polling the word never sees the flag before the data.
//! The CPU enqueues both and moves on; [`synchronize`] is only for local
//! completion.
//!
//! The copy functions take raw addresses because the runtime computes them
//! from segment bases and offsets it has already bounds-checked; they are
//! `unsafe` because the memory must stay valid until the stream has run the
//! copy, which no Rust lifetime here can express.

use super::{DevicePtr, GpuContext, GpuError};
use cudarc::driver::{sys, CudaStream};
use std::sync::Arc;

/// A non-blocking CUDA stream of one device.
#[derive(Debug, Clone)]
pub struct GpuStream {
    ctx: GpuContext,
    stream: Arc<CudaStream>,
}

impl GpuStream {
    /// Creates a stream on `device` that does not synchronise with the
    /// legacy default stream.
    pub fn new(device: u32) -> Result<GpuStream, GpuError> {
        let ctx = GpuContext::new(device)?;
        let stream = ctx
            .cuda()
            .new_stream()
            .map_err(GpuError::cuda("cuStreamCreate"))?;
        Ok(GpuStream { ctx, stream })
    }

    /// The context of the stream.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// The cudarc stream, for launching kernels on it.
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    fn raw(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }
}

/// Enqueues a copy of `len` bytes from host memory at `src` to device
/// address `dst`.
///
/// # Safety
/// `src..src+len` must be readable host memory and `dst..dst+len` device
/// memory (or device-mapped host memory) of the stream's device or reachable
/// from it, and both must stay valid until the stream has executed the copy
/// ([`synchronize`]). For pageable `src` the driver stages the data before
/// returning; for pinned `src` it reads it later, so it must not change.
pub unsafe fn copy_host_to_device(
    stream: &GpuStream,
    dst: DevicePtr,
    src: *const u8,
    len: usize,
) -> Result<(), GpuError> {
    stream.ctx.bind()?;
    // SAFETY: the caller guarantees both ranges for `len` bytes until the
    // copy has run; the stream belongs to the current context.
    unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream.raw()) }
        .result()
        .map_err(GpuError::cuda("cuMemcpyHtoDAsync"))
}

/// Enqueues a copy of `len` bytes from device address `src` to host memory
/// at `dst`.
///
/// # Safety
/// `dst..dst+len` must be writable host memory that nothing else accesses
/// until the copy has run ([`synchronize`]), and `src..src+len` device memory
/// reachable from the stream's device that stays valid until then.
pub unsafe fn copy_device_to_host(
    stream: &GpuStream,
    dst: *mut u8,
    src: DevicePtr,
    len: usize,
) -> Result<(), GpuError> {
    stream.ctx.bind()?;
    // SAFETY: the caller guarantees both ranges until the copy has run.
    unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, stream.raw()) }
        .result()
        .map_err(GpuError::cuda("cuMemcpyDtoHAsync"))
}

/// Enqueues a copy of `len` bytes between device addresses: within one
/// device, or from `src_ctx`'s device to `dst_ctx`'s (a peer GPU;
/// `cuMemcpyPeerAsync`, which takes the direct path when peer access is
/// enabled and stages through the host otherwise).
///
/// Memory opened with [`GpuIpcMapping`](super::GpuIpcMapping) belongs to the
/// context it was opened in (`mapping.context()`); with unified addressing
/// the driver finds the physical device itself.
///
/// # Safety
/// `src..src+len` must be device memory of `src_ctx`, `dst..dst+len` of
/// `dst_ctx`, and both must stay valid until the copy has run; nothing else
/// may write `dst..dst+len` meanwhile.
pub unsafe fn copy_device_to_device(
    stream: &GpuStream,
    dst: DevicePtr,
    dst_ctx: &GpuContext,
    src: DevicePtr,
    src_ctx: &GpuContext,
    len: usize,
) -> Result<(), GpuError> {
    stream.ctx.bind()?;
    if dst_ctx.device() == src_ctx.device() {
        // SAFETY: the caller guarantees both ranges until the copy has run;
        // with unified addressing cuMemcpyAsync infers the memory kinds.
        unsafe { sys::cuMemcpyAsync(dst, src, len, stream.raw()) }
            .result()
            .map_err(GpuError::cuda("cuMemcpyAsync"))
    } else {
        // SAFETY: as above; both contexts are retained by the caller's
        // `GpuContext` values for the duration of the call.
        unsafe { sys::cuMemcpyPeerAsync(dst, dst_ctx.raw(), src, src_ctx.raw(), len, stream.raw()) }
            .result()
            .map_err(GpuError::cuda("cuMemcpyPeerAsync"))
    }
}

/// Enqueues a copy of `len` bytes between two addresses of the unified
/// address space: device memory of any device the stream's device reaches,
/// host memory registered with CUDA, or (staged by the driver, slower)
/// plain pageable host memory. The driver infers the direction from the
/// pointers.
///
/// # Safety
/// Both ranges must be valid for `len` bytes until the stream has run the
/// copy, and nothing else may write `dst..dst+len` meanwhile.
pub unsafe fn copy_unified(
    stream: &GpuStream,
    dst: DevicePtr,
    src: DevicePtr,
    len: usize,
) -> Result<(), GpuError> {
    stream.ctx.bind()?;
    // SAFETY: the caller guarantees both ranges until the copy has run;
    // with unified addressing cuMemcpyAsync infers the memory kinds.
    unsafe { sys::cuMemcpyAsync(dst, src, len, stream.raw()) }
        .result()
        .map_err(GpuError::cuda("cuMemcpyAsync"))
}

/// Enqueues `copies` ((destination, source, bytes) in the unified address
/// space, as [`copy_unified`] takes them) as one `cuMemcpyBatchAsync`: the
/// batch runs in stream order after earlier work, and later work after all
/// of it; within the batch the driver may run the copies in any order or
/// at once, so no two may overlap where one writes. Each source is read in
/// stream order. The driver carries them on its copy engines, as
/// `cuMemcpyAsync`, for one submission instead of one per copy.
///
/// # Safety
/// As [`copy_unified`] for every copy; no destination may overlap another
/// copy's source or destination.
pub unsafe fn copy_unified_batch(
    stream: &GpuStream,
    copies: &[(DevicePtr, DevicePtr, usize)],
) -> Result<(), GpuError> {
    if copies.is_empty() {
        return Ok(());
    }
    stream.ctx.bind()?;
    let mut dsts: Vec<DevicePtr> = copies.iter().map(|c| c.0).collect();
    let mut srcs: Vec<DevicePtr> = copies.iter().map(|c| c.1).collect();
    let mut sizes: Vec<usize> = copies.iter().map(|c| c.2).collect();
    let mut attrs = sys::CUmemcpyAttributes {
        srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
        // The location hints apply to managed and system memory only.
        srcLocHint: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID,
            id: 0,
        },
        dstLocHint: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID,
            id: 0,
        },
        flags: 0,
    };
    let mut first = 0usize;
    // SAFETY: three arrays of `copies.len()` entries and one attribute set
    // applying from copy 0, all alive for the call (the driver copies the
    // descriptions when it enqueues); the ranges are the caller's to keep.
    unsafe {
        sys::cuMemcpyBatchAsync_v2(
            dsts.as_mut_ptr(),
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            copies.len(),
            &mut attrs,
            &mut first,
            1,
            stream.raw(),
        )
    }
    .result()
    .map_err(GpuError::cuda("cuMemcpyBatchAsync"))
}

/// [`copy_unified`], then waits until the stream has run it (and everything
/// enqueued before it): the copy is complete when this returns.
///
/// # Safety
/// Both ranges must be valid for `len` bytes for the duration of the call,
/// and nothing else may write `dst..dst+len` meanwhile.
pub unsafe fn copy_unified_blocking(
    stream: &GpuStream,
    dst: DevicePtr,
    src: DevicePtr,
    len: usize,
) -> Result<(), GpuError> {
    // SAFETY: forwarded from this function's contract; the synchronize
    // below ends the copy before the ranges may go away.
    unsafe { copy_unified(stream, dst, src, len)? };
    synchronize(stream)
}

/// Enqueues a 4-byte write of `value` to `dst` that happens after all work
/// enqueued on the stream before it, with a memory fence in between: the
/// notification store of a stream-ordered `write_notify`.
///
/// `dst` may be device memory or device-mapped pinned host memory (use its
/// `device_ptr`). Managed memory is not allowed.
///
/// # Safety
/// `dst` must be a 4-byte aligned address valid for a 4-byte write from the
/// stream's device until the stream has executed the write.
pub unsafe fn stream_write_u32(
    stream: &GpuStream,
    dst: DevicePtr,
    value: u32,
) -> Result<(), GpuError> {
    if dst & 3 != 0 {
        return Err(GpuError::InvalidArgument(format!(
            "stream_write_u32 to unaligned address {dst:#x}"
        )));
    }
    stream.ctx.bind()?;
    // SAFETY: the caller guarantees `dst` is writable until the write has
    // run; flag 0 (CU_STREAM_WRITE_VALUE_DEFAULT) keeps the fence that
    // orders the earlier copies before this write.
    unsafe {
        sys::cuStreamWriteValue32_v2(
            stream.raw(),
            dst,
            value,
            sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
        )
    }
    .result()
    .map_err(GpuError::cuda("cuStreamWriteValue32"))
}

/// Enqueues several 4-byte writes on `stream` with one driver call
/// (`cuStreamBatchMemOp`): the stream runs them in the order given, each
/// after everything enqueued before the call, as [`stream_write_u32`] would
/// in as many calls. The owner of a GPU segment uses it to set a
/// notification and its writer's completion word for the price of one call.
///
/// # Safety
/// As for [`stream_write_u32`], for every address in `writes`.
pub unsafe fn stream_write_u32s(
    stream: &GpuStream,
    writes: &[(DevicePtr, u32)],
) -> Result<(), GpuError> {
    if let Some((dst, _)) = writes.iter().find(|(dst, _)| dst & 3 != 0) {
        return Err(GpuError::InvalidArgument(format!(
            "stream_write_u32s to unaligned address {dst:#x}"
        )));
    }
    stream.ctx.bind()?;
    // Up to four per call, built on the stack.
    for chunk in writes.chunks(4) {
        // Zeroed unions: the driver reads each one's full size.
        let mut ops = [sys::CUstreamBatchMemOpParams { pad: [0; 6] }; 4];
        for (op, &(address, value)) in ops.iter_mut().zip(chunk) {
            op.writeValue = sys::CUstreamBatchMemOpParams_union_CUstreamMemOpWriteValueParams_st {
                operation: sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32,
                address,
                __bindgen_anon_1:
                    sys::CUstreamBatchMemOpParams_union_CUstreamMemOpWriteValueParams_st__bindgen_ty_1 {
                        value64: u64::from(value),
                    },
                flags: sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
                alias: 0,
            };
        }
        // SAFETY: the first chunk.len() (<= 4) entries of `ops` are
        // initialised write operations, read by the driver before it
        // returns; the caller guarantees every address stays writable
        // until the stream has run the write.
        unsafe {
            sys::cuStreamBatchMemOp_v2(stream.raw(), chunk.len() as u32, ops.as_mut_ptr(), 0)
        }
        .result()
        .map_err(GpuError::cuda("cuStreamBatchMemOp"))?;
    }
    Ok(())
}

/// Enqueues up to 32 four-byte writes on `stream` with one driver call
/// (`cuStreamBatchMemOp`), run in the order given after everything
/// enqueued before, each behind a memory fence: a small write's data as
/// values, then its notification, then a completion word, for the price of
/// one submission and no copy-engine operation.
///
/// # Safety
/// As for [`stream_write_u32`], for every address in `writes`.
pub unsafe fn stream_write_u32_batch(
    stream: &GpuStream,
    writes: &[(DevicePtr, u32)],
) -> Result<(), GpuError> {
    const MAX: usize = 32;
    if writes.len() > MAX {
        return Err(GpuError::InvalidArgument(format!(
            "{} stream writes in one batch (at most {MAX})",
            writes.len()
        )));
    }
    if let Some((dst, _)) = writes.iter().find(|(dst, _)| dst & 3 != 0) {
        return Err(GpuError::InvalidArgument(format!(
            "stream_write_u32_batch to unaligned address {dst:#x}"
        )));
    }
    if writes.is_empty() {
        return Ok(());
    }
    stream.ctx.bind()?;
    // Zeroed unions: the driver reads each one's full size.
    let mut ops = [sys::CUstreamBatchMemOpParams { pad: [0; 6] }; MAX];
    for (op, &(address, value)) in ops.iter_mut().zip(writes) {
        op.writeValue = sys::CUstreamBatchMemOpParams_union_CUstreamMemOpWriteValueParams_st {
            operation: sys::CUstreamBatchMemOpType::CU_STREAM_MEM_OP_WRITE_VALUE_32,
            address,
            __bindgen_anon_1:
                sys::CUstreamBatchMemOpParams_union_CUstreamMemOpWriteValueParams_st__bindgen_ty_1 {
                    value64: u64::from(value),
                },
            flags: sys::CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
            alias: 0,
        };
    }
    // SAFETY: the first writes.len() (<= 32) entries of `ops` are
    // initialised write operations, read by the driver before it returns;
    // the caller guarantees every address stays writable until the stream
    // has run the write.
    unsafe { sys::cuStreamBatchMemOp_v2(stream.raw(), writes.len() as u32, ops.as_mut_ptr(), 0) }
        .result()
        .map_err(GpuError::cuda("cuStreamBatchMemOp"))
}

/// Whether everything enqueued on `stream` so far has finished
/// (`cuStreamQuery`); never waits. A CPU store may then stand in for a
/// stream-ordered write: nothing enqueued is left for it to overtake.
pub fn is_idle(stream: &GpuStream) -> Result<bool, GpuError> {
    stream.ctx.bind()?;
    // SAFETY: the stream is alive (held by `stream`) in the bound context;
    // cuStreamQuery only reads its state.
    match unsafe { sys::cuStreamQuery(stream.raw()) } {
        sys::CUresult::CUDA_SUCCESS => Ok(true),
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => Err(GpuError::cuda("cuStreamQuery")(
            cudarc::driver::DriverError(other),
        )),
    }
}

/// Waits until everything enqueued on `stream` so far has finished.
pub fn synchronize(stream: &GpuStream) -> Result<(), GpuError> {
    stream
        .stream
        .synchronize()
        .map_err(GpuError::cuda("cuStreamSynchronize"))
}
