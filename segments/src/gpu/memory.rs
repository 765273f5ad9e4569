//! Owned GPU memory, pinned host memory mapped into the GPU, and host
//! registrations.
//!
//! Each type owns exactly one driver allocation and gives it back in `Drop`,
//! so a segment cannot leak GPU memory and cannot be freed twice. Drop never
//! panics: a failing free is logged (`tracing::warn!`) and forgotten, since
//! nothing better can be done with it.

use super::{DevicePtr, GpuContext, GpuError, GPU_PAGE_SIZE};
use cudarc::driver::sys;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64};

/// Device memory from `cuMemAlloc`: zeroed, starting on a 64 KiB GPU page,
/// its length rounded up to whole GPU pages, freed on drop; or device memory
/// the user allocated, *borrowed* ([`GpuMemory::borrow`]): never freed here.
///
/// The alignment and rounding make every allocation pinnable by gdrcopy and
/// GPUDirect RDMA, which work on whole GPU pages. The allocation also has
/// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set, as gdrcopy requires for memory the
/// CPU accesses through a BAR mapping: synchronous memory operations on it
/// are then ordered with the third-party accesses.
#[derive(Debug)]
pub struct GpuMemory {
    ctx: GpuContext,
    /// what cuMemAlloc returned (what cuMemFree and IPC need)
    base: DevicePtr,
    /// the first GPU-page-aligned address at or after `base`
    ptr: DevicePtr,
    len: usize,
    /// Whether this value allocated the memory (and frees it on drop); false
    /// for user memory ([`GpuMemory::borrow`]).
    owned: bool,
}

impl GpuMemory {
    /// Allocates at least `len` bytes of zeroed memory on `device`.
    ///
    /// Fails with [`GpuError::NoDriver`] where there is no CUDA driver,
    /// [`GpuError::BadDevice`] for an unknown device, and
    /// [`GpuError::InvalidArgument`] for `len == 0`.
    pub fn alloc(device: u32, len: usize) -> Result<GpuMemory, GpuError> {
        let ctx = GpuContext::new(device)?;
        if len == 0 {
            return Err(GpuError::InvalidArgument(
                "a GPU allocation of 0 bytes".into(),
            ));
        }
        let len = len
            .checked_next_multiple_of(GPU_PAGE_SIZE)
            .ok_or_else(|| GpuError::InvalidArgument(format!("{len} bytes is too large")))?;
        ctx.bind()?;
        let mut base = mem_alloc(len)?;
        let mut alloc_len = len;
        if base & (GPU_PAGE_SIZE as u64 - 1) != 0 {
            // cuMemAlloc promises only 256-byte alignment; in practice large
            // allocations are 2 MiB aligned. When not, over-allocate by one
            // GPU page and use the aligned part.
            mem_free(base);
            alloc_len = len + GPU_PAGE_SIZE;
            base = mem_alloc(alloc_len)?;
        }
        let ptr = base.next_multiple_of(GPU_PAGE_SIZE as u64);
        let memory = GpuMemory {
            ctx,
            base,
            ptr,
            len,
            owned: true,
        };
        // SAFETY: `base` is a live allocation of `alloc_len` bytes in the
        // current context (bound above); the memset goes to the legacy null
        // stream, and the stream synchronize waits for it so that no later
        // copy on a non-blocking stream can overtake the zeroing.
        unsafe {
            sys::cuMemsetD8_v2(base, 0, alloc_len)
                .result()
                .map_err(GpuError::cuda("cuMemsetD8"))?;
            sys::cuStreamSynchronize(std::ptr::null_mut())
                .result()
                .map_err(GpuError::cuda("cuStreamSynchronize"))?;
        }
        let one: std::ffi::c_uint = 1;
        // SAFETY: `one` outlives the call and has the type the attribute
        // expects (an unsigned int flag); `base` is a live allocation.
        unsafe {
            sys::cuPointerSetAttribute(
                &one as *const _ as *const c_void,
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                base,
            )
        }
        .result()
        .map_err(GpuError::cuda("cuPointerSetAttribute"))?;
        tracing::trace!(
            device,
            len,
            ptr = format_args!("{ptr:#x}"),
            "GPU memory allocated"
        );
        Ok(memory)
    }

    /// Views `len` bytes of device memory the caller allocated (with
    /// `cudaMalloc` or `cuMemAlloc`) starting at `ptr`, without taking it
    /// over: dropping the value never frees it.
    ///
    /// The driver is asked where the address lies ([`device_allocation`]):
    /// the device and the allocation's base and length, so that
    /// [`Self::ipc_handle`] names the allocation and [`Self::ipc_offset`]
    /// says where `ptr` lies in it. Unlike [`Self::alloc`], the memory is
    /// neither zeroed nor GPU-page aligned, and `len` is not rounded.
    ///
    /// Fails with [`GpuError::NoDriver`] without a driver, and with
    /// [`GpuError::InvalidArgument`] when `ptr` is not device memory (host
    /// memory, managed memory) or `ptr + len` runs past its allocation.
    ///
    /// # Safety
    /// The allocation must stay allocated (not freed by the caller) for as
    /// long as the returned value and every use of its addresses exist.
    pub unsafe fn borrow(ptr: DevicePtr, len: usize) -> Result<GpuMemory, GpuError> {
        if len == 0 {
            return Err(GpuError::InvalidArgument("a GPU range of 0 bytes".into()));
        }
        let Some(alloc) = device_allocation(ptr)? else {
            return Err(GpuError::InvalidArgument(format!(
                "{ptr:#x} is not device memory of this process"
            )));
        };
        let end = (ptr - alloc.base).checked_add(len as u64);
        if end.is_none_or(|end| end > alloc.len as u64) {
            return Err(GpuError::InvalidArgument(format!(
                "{len} bytes at {ptr:#x} run past the end of its allocation \
                 ({} bytes at {:#x})",
                alloc.len, alloc.base
            )));
        }
        let ctx = GpuContext::new(alloc.device)?;
        tracing::trace!(
            device = alloc.device,
            len,
            ptr = format_args!("{ptr:#x}"),
            base = format_args!("{:#x}", alloc.base),
            "user GPU memory borrowed"
        );
        Ok(GpuMemory {
            ctx,
            base: alloc.base,
            ptr,
            len,
            owned: false,
        })
    }

    /// Whether the memory is the caller's ([`Self::borrow`]), not freed here.
    pub fn is_borrowed(&self) -> bool {
        !self.owned
    }

    /// The device address of the first byte (GPU-page aligned unless
    /// borrowed).
    pub fn device_ptr(&self) -> DevicePtr {
        self.ptr
    }

    /// Usable length in bytes (a multiple of [`GPU_PAGE_SIZE`] unless
    /// borrowed).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: zero-length allocations are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// The CUDA IPC handle of the allocation, for a same-host peer process
    /// to open with [`GpuIpcMapping::open`](super::GpuIpcMapping::open)
    /// together with [`Self::ipc_offset`].
    pub fn ipc_handle(&self) -> Result<[u8; 64], GpuError> {
        self.ctx.bind()?;
        let mut handle = std::mem::MaybeUninit::<sys::CUipcMemHandle>::uninit();
        // SAFETY: `handle` is a valid out-pointer; `base` is the start of a
        // live cuMemAlloc allocation, which is what the call requires.
        unsafe { sys::cuIpcGetMemHandle(handle.as_mut_ptr(), self.base) }
            .result()
            .map_err(GpuError::cuda("cuIpcGetMemHandle"))?;
        // SAFETY: the call succeeded, so it initialised the handle.
        let handle = unsafe { handle.assume_init() };
        Ok(handle.reserved.map(|b| b as u8))
    }

    /// Where [`Self::device_ptr`] lies inside the allocation the IPC handle
    /// names (0 unless the allocation had to be over-aligned).
    pub fn ipc_offset(&self) -> u64 {
        self.ptr - self.base
    }
}

impl Drop for GpuMemory {
    fn drop(&mut self) {
        if !self.owned {
            // The user's memory: the user frees it.
            return;
        }
        if let Err(err) = self.ctx.bind() {
            tracing::warn!(%err, "cannot bind the context to free GPU memory; leaking it");
            return;
        }
        mem_free(self.base);
    }
}

/// Where a device address lies, as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceAllocation {
    /// The ordinal of the device whose memory it is.
    pub device: u32,
    /// The first address of the driver allocation that holds it.
    pub base: DevicePtr,
    /// The length of that allocation in bytes.
    pub len: usize,
}

/// Asks the driver whether `ptr` is device memory of this process, and if
/// so of which device and in which allocation.
///
/// `Ok(None)` for every address the driver does not report as device
/// memory: ordinary host memory, page-locked host memory, and managed
/// (`cudaMallocManaged`) memory, which the CPU reaches directly and which
/// CUDA IPC cannot export. [`GpuError::NoDriver`] without a driver.
///
/// Creates no context: the query runs in the calling thread's current
/// context; when there is none, under the first device's *active* primary
/// context (one that the CUDA runtime or this crate already made); when no
/// device has one, no device memory can exist in this process yet, so the
/// answer is `None`.
pub fn device_allocation(ptr: DevicePtr) -> Result<Option<DeviceAllocation>, GpuError> {
    let count = super::driver_available()?;
    if ptr == 0 {
        return Ok(None);
    }
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: `current` is a valid out-pointer; the driver is initialised.
    unsafe { sys::cuCtxGetCurrent(&mut current) }
        .result()
        .map_err(GpuError::cuda("cuCtxGetCurrent"))?;
    if current.is_null() {
        let Some(device) = (0..count).find(|&d| primary_context_active(d)) else {
            return Ok(None);
        };
        // Retains the context that is active anyway, and makes it current
        // on this thread (as the CUDA runtime would).
        GpuContext::new(device)?.bind()?;
    }
    let mut kind: std::ffi::c_uint = 0;
    // SAFETY: `kind` is a valid out-pointer of the type the MEMORY_TYPE
    // attribute writes (an unsigned int); any address may be asked about.
    let status = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut std::ffi::c_uint).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            ptr,
        )
    };
    match status {
        sys::CUresult::CUDA_SUCCESS => {}
        // An address the driver knows nothing of: plain host memory.
        sys::CUresult::CUDA_ERROR_INVALID_VALUE => return Ok(None),
        err => {
            return Err(GpuError::cuda("cuPointerGetAttribute")(
                cudarc::driver::DriverError(err),
            ))
        }
    }
    if kind != sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as std::ffi::c_uint {
        return Ok(None);
    }
    let mut managed: std::ffi::c_uint = 0;
    // SAFETY: as above; IS_MANAGED writes an unsigned int.
    unsafe {
        sys::cuPointerGetAttribute(
            (&mut managed as *mut std::ffi::c_uint).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
            ptr,
        )
    }
    .result()
    .map_err(GpuError::cuda("cuPointerGetAttribute"))?;
    if managed != 0 {
        return Ok(None);
    }
    let mut ordinal: std::ffi::c_int = -1;
    // SAFETY: as above; DEVICE_ORDINAL writes an int.
    unsafe {
        sys::cuPointerGetAttribute(
            (&mut ordinal as *mut std::ffi::c_int).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr,
        )
    }
    .result()
    .map_err(GpuError::cuda("cuPointerGetAttribute"))?;
    let device = u32::try_from(ordinal).map_err(|_| {
        GpuError::InvalidArgument(format!("the driver reports device {ordinal} for {ptr:#x}"))
    })?;
    let mut base: DevicePtr = 0;
    let mut len: usize = 0;
    // SAFETY: both out-pointers are valid; `ptr` is device memory (above).
    unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut len, ptr) }
        .result()
        .map_err(GpuError::cuda("cuMemGetAddressRange"))?;
    Ok(Some(DeviceAllocation { device, base, len }))
}

/// Whether the primary context of `device` is active (retained by anyone).
fn primary_context_active(device: u32) -> bool {
    let mut dev: sys::CUdevice = 0;
    let mut flags: std::ffi::c_uint = 0;
    let mut active: std::ffi::c_int = 0;
    // SAFETY: valid out-pointers; `device` is below the device count.
    let known = unsafe {
        sys::cuDeviceGet(&mut dev, device as std::ffi::c_int) == sys::CUresult::CUDA_SUCCESS
            && sys::cuDevicePrimaryCtxGetState(dev, &mut flags, &mut active)
                == sys::CUresult::CUDA_SUCCESS
    };
    known && active != 0
}

fn mem_alloc(len: usize) -> Result<DevicePtr, GpuError> {
    let mut ptr: DevicePtr = 0;
    // SAFETY: `ptr` is a valid out-pointer; a context is current (callers
    // bind first).
    unsafe { sys::cuMemAlloc_v2(&mut ptr, len) }
        .result()
        .map_err(GpuError::cuda("cuMemAlloc"))?;
    Ok(ptr)
}

fn mem_free(ptr: DevicePtr) {
    // SAFETY: `ptr` came from cuMemAlloc in the current context and is freed
    // exactly once (by its single owner).
    let status = unsafe { sys::cuMemFree_v2(ptr) };
    if status != sys::CUresult::CUDA_SUCCESS {
        tracing::warn!(?status, "cuMemFree failed");
    }
}

/// Page-locked host memory mapped into the GPU's address space
/// (`cuMemHostAlloc` with `DEVICEMAP | PORTABLE`), zeroed, freed on drop.
///
/// This is where notification words polled by a GPU kernel (and by the CPU)
/// live by default, and where the device-side request ring lives. It is
/// ordinary cached memory, not write-combined: CPU reads of it are fast.
/// `PORTABLE` makes it usable from every context of the process, not only
/// the one that allocated it.
#[derive(Debug)]
pub struct PinnedHostMemory {
    ctx: GpuContext,
    host: *mut u8,
    device: DevicePtr,
    len: usize,
}

// SAFETY: the allocation is process-wide (not tied to the allocating thread)
// and freeing it from another thread is allowed by the driver. The type hands
// out only raw pointers and atomic views, so sharing it adds no data race
// that the user of those pointers does not already have to rule out.
unsafe impl Send for PinnedHostMemory {}
// SAFETY: see `Send`; `&self` methods only read the immutable fields.
unsafe impl Sync for PinnedHostMemory {}

impl PinnedHostMemory {
    /// Allocates `len` zeroed bytes of host memory that `device` can access.
    pub fn alloc(device: u32, len: usize) -> Result<PinnedHostMemory, GpuError> {
        let ctx = GpuContext::new(device)?;
        if len == 0 {
            return Err(GpuError::InvalidArgument(
                "a pinned allocation of 0 bytes".into(),
            ));
        }
        ctx.bind()?;
        let mut host: *mut c_void = std::ptr::null_mut();
        // SAFETY: `host` is a valid out-pointer and a context is current.
        unsafe {
            sys::cuMemHostAlloc(
                &mut host,
                len,
                sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE,
            )
        }
        .result()
        .map_err(GpuError::cuda("cuMemHostAlloc"))?;
        let mut memory = PinnedHostMemory {
            ctx,
            host: host.cast(),
            device: 0,
            len,
        };
        // SAFETY: the driver returned `len` writable bytes at `host`, owned
        // by `memory` and not yet shared with anybody.
        unsafe { std::ptr::write_bytes(memory.host, 0, len) };
        memory.device = host_device_pointer(memory.host)?;
        Ok(memory)
    }

    /// The CPU address of the first byte (page aligned).
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    /// The address a kernel uses for the first byte.
    pub fn device_ptr(&self) -> DevicePtr {
        self.device
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: zero-length allocations are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The context that allocated the memory.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// The memory as 32-bit atomic words (the trailing `len % 4` bytes are
    /// not covered): the way to read and write notification words that a
    /// GPU reads and writes concurrently.
    pub fn as_atomic_u32s(&self) -> &[AtomicU32] {
        // SAFETY: the allocation is page aligned (so 4-aligned), `len / 4`
        // words fit in it, it lives as long as `self`, and AtomicU32 has the
        // layout of u32 and permits shared mutation (including by the GPU,
        // which only ever performs aligned 32-bit accesses on these words).
        unsafe { std::slice::from_raw_parts(self.host as *const AtomicU32, self.len / 4) }
    }

    /// The memory as 64-bit atomic words (the trailing `len % 8` bytes are
    /// not covered).
    pub fn as_atomic_u64s(&self) -> &[AtomicU64] {
        // SAFETY: as for `as_atomic_u32s`, with 8-byte alignment (the
        // allocation is page aligned) and `len / 8` words.
        unsafe { std::slice::from_raw_parts(self.host as *const AtomicU64, self.len / 8) }
    }
}

impl Drop for PinnedHostMemory {
    fn drop(&mut self) {
        if let Err(err) = self.ctx.bind() {
            tracing::warn!(%err, "cannot bind the context to free pinned memory; leaking it");
            return;
        }
        // SAFETY: `host` came from cuMemHostAlloc and is freed exactly once.
        let status = unsafe { sys::cuMemFreeHost(self.host.cast()) };
        if status != sys::CUresult::CUDA_SUCCESS {
            tracing::warn!(?status, "cuMemFreeHost failed");
        }
    }
}

fn host_device_pointer(host: *mut u8) -> Result<DevicePtr, GpuError> {
    let mut device: DevicePtr = 0;
    // SAFETY: `host` is page-locked and device-mapped (allocated or
    // registered with DEVICEMAP); flags must be 0; `device` is a valid
    // out-pointer.
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host.cast(), 0) }
        .result()
        .map_err(GpuError::cuda("cuMemHostGetDevicePointer"))?;
    Ok(device)
}

/// Host memory that already exists (a shared-memory segment, say),
/// page-locked and mapped into the GPU with `cuMemHostRegister`
/// (`DEVICEMAP | PORTABLE`); unregistered on drop. The memory itself stays
/// owned by whoever mapped it.
///
/// Registering a same-host segment lets copies to and from it run at full
/// speed and lets kernels store into it directly.
#[derive(Debug)]
pub struct HostRegistration {
    ctx: GpuContext,
    host: *mut u8,
    device: DevicePtr,
    len: usize,
}

// SAFETY: the registration is process-wide; the type only hands out the
// addresses, so moving or sharing it across threads adds no data race.
unsafe impl Send for HostRegistration {}
// SAFETY: see `Send`.
unsafe impl Sync for HostRegistration {}

impl HostRegistration {
    /// Registers `len` bytes at `host` for access by `device`.
    ///
    /// # Safety
    /// `host..host + len` must be a mapping of this process that stays
    /// mapped until the returned value is dropped, and must not already be
    /// registered. Page-aligned ranges are recommended.
    pub unsafe fn register(
        device: u32,
        host: *mut u8,
        len: usize,
    ) -> Result<HostRegistration, GpuError> {
        let ctx = GpuContext::new(device)?;
        if len == 0 || host.is_null() {
            return Err(GpuError::InvalidArgument(
                "registering an empty or null host range".into(),
            ));
        }
        ctx.bind()?;
        // SAFETY: the caller promises the range is mapped for the lifetime
        // of the registration and not yet registered; a context is current.
        unsafe {
            sys::cuMemHostRegister_v2(
                host.cast(),
                len,
                sys::CU_MEMHOSTREGISTER_DEVICEMAP | sys::CU_MEMHOSTREGISTER_PORTABLE,
            )
        }
        .result()
        .map_err(GpuError::cuda("cuMemHostRegister"))?;
        let mut registration = HostRegistration {
            ctx,
            host,
            device: 0,
            len,
        };
        registration.device = host_device_pointer(host)?;
        Ok(registration)
    }

    /// The CPU address of the first byte.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    /// The address a kernel uses for the first byte.
    pub fn device_ptr(&self) -> DevicePtr {
        self.device
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty registrations are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if let Err(err) = self.ctx.bind() {
            tracing::warn!(%err, "cannot bind the context to unregister host memory");
            return;
        }
        // SAFETY: `host` was registered by `register` and is unregistered
        // exactly once, while still mapped (register's contract).
        let status = unsafe { sys::cuMemHostUnregister(self.host.cast()) };
        if status != sys::CUresult::CUDA_SUCCESS {
            tracing::warn!(?status, "cuMemHostUnregister failed");
        }
    }
}
