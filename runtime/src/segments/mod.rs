//! Segments as the runtime sees them: the local ones it owns, the remote ones
//! peers registered with it, and the descriptor that travels between them.
//!
//! A local segment is data plus a notification area. For host segments both
//! live in one memfd, data first, the notification area on the next page, so
//! a peer maps a single file. Memory the user bound (`segment_bind`) cannot
//! be mapped by peers; its notification area still lives in a memfd of its
//! own, and peers copy data with cross-memory attach.
//!
//! A GPU segment's data is `cuMemAlloc`'ed memory of its device, exported to
//! same-host peers with a CUDA IPC handle. Its notification words stay in
//! host memory (a memfd, as for host segments), registered with CUDA so a
//! kernel polls them over PCIe while CPU peers still set them with a plain
//! store: the *host-mapped* placement, which works on every machine (see
//! `gpu/` for why the others are not the default).
//!
//! Below the transports: [`device_words`] is the `device` placement of the
//! notification words, in GPU memory. The tables every call reads the local
//! and remote segments from sit beside the seam (`transport/tables.rs`).

pub(crate) mod device_words;

use crate::model::bounds::check_bounds;
use crate::model::config::{NotificationPlacement, SEGMENT_SIZE_CEILING};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result, Side};
use crate::model::ids::{Rank, SegId};
use bytemuck::Pod;
use device_words::DeviceWords;
use gaspi_notify::{NotificationArea, WakeMode, HEADER_BYTES};
use gaspi_segments::gpu::{self, DevicePtr, GpuMemory, GpuStream, HostRegistration};
use gaspi_segments::{HostId, MemoryDescriptor, ProcessMemory, SharedMemory};
use std::sync::{Arc, Mutex, OnceLock};

/// A fresh [`SegmentDescriptor::instance`] (never 0).
fn next_instance() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

const PAGE: usize = 4096;

/// The size of a new segment as a `usize`, checked: not 0 and at most
/// [`SEGMENT_SIZE_CEILING`] (the configured maximum is checked before, by
/// the calls of [`crate::Gaspi`]), so every size computed from it below
/// stays far from overflow.
pub(crate) fn checked_segment_size(size: u64) -> Result<usize> {
    if size == 0 {
        return Err(Error::ZeroSize { what: "a segment" });
    }
    let too_large = Error::SegmentTooLarge {
        size,
        max: SEGMENT_SIZE_CEILING,
    };
    if size > SEGMENT_SIZE_CEILING {
        return Err(too_large);
    }
    usize::try_from(size).map_err(|_| too_large)
}

/// The layout of a host segment's memfd: where the notification area of
/// `count` words starts (the first page at or past the data) and the
/// memfd's length. Pure, with checked arithmetic throughout.
pub(crate) fn host_layout(size: u64, count: u32) -> Result<(usize, usize)> {
    let len = checked_segment_size(size)?;
    let too_large = || Error::SegmentTooLarge {
        size,
        max: SEGMENT_SIZE_CEILING,
    };
    let notif_at = len.checked_next_multiple_of(PAGE).ok_or_else(too_large)?;
    let total = notif_at
        .checked_add(NotificationArea::bytes_for(count))
        .ok_or_else(too_large)?;
    Ok((notif_at, total))
}

/// The layout of a GPU segment's allocation: where its notification words
/// start when they live in GPU memory (`words_in_gpu`: the first GPU page
/// at or past the data), and the allocation's length (whole GPU pages of
/// words after the data, so that gdrcopy can pin them). Pure, with checked
/// arithmetic throughout, so it is tested without a GPU.
pub(crate) fn gpu_layout(
    size: u64,
    count: u32,
    words_in_gpu: bool,
) -> Result<(Option<usize>, usize)> {
    let len = checked_segment_size(size)?;
    if !words_in_gpu {
        return Ok((None, len));
    }
    let too_large = || Error::SegmentTooLarge {
        size,
        max: SEGMENT_SIZE_CEILING,
    };
    let at = device_words::words_offset(len).ok_or_else(too_large)?;
    let alloc_len = at
        .checked_add(device_words::mapped_len(count))
        .ok_or_else(too_large)?;
    Ok((Some(at), alloc_len))
}

/// The device address of `offset..offset + len` of a GPU allocation of
/// `size` bytes at `base`, or `None` when the range does not lie in it (or
/// an address would wrap). Pure: the GPU copies' last bound check.
pub(crate) fn device_range(base: DevicePtr, offset: u64, len: u64, size: u64) -> Option<DevicePtr> {
    if !crate::model::bounds::fits(offset, len, size) {
        return None;
    }
    let start = base.checked_add(offset)?;
    start.checked_add(len)?;
    Some(start)
}

/// The placement a GPU segment gets when `asked` is requested: `gdrcopy`
/// falls back to host-mapped where gdrcopy's library or driver is missing,
/// with a warning (once per process) that says which.
pub(crate) fn resolve_placement(asked: NotificationPlacement) -> NotificationPlacement {
    if asked != NotificationPlacement::Gdrcopy {
        return asked;
    }
    match device_words::gdrcopy() {
        Ok(_) => asked,
        Err(reason) => {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "GPU notification words fall back to host-mapped: {reason} \
                     (GASPI_GPU_NOTIFICATIONS=gdrcopy)"
                )
            });
            NotificationPlacement::HostMapped
        }
    }
}

/// What keeps a local segment's memory alive (never read: held for Drop).
#[derive(Debug)]
#[allow(dead_code)]
enum Storage {
    /// Data and notifications in one memfd.
    Shared(SharedMemory),
    /// User memory; notifications in their own memfd; the buffer itself when
    /// the runtime owns it (`segment_bind_buffer`).
    Bound(SharedMemory, Option<Box<[u8]>>),
    /// GPU memory (in `LocalSegment::gpu`); notifications in their own memfd.
    Gpu(SharedMemory),
}

impl Storage {
    /// The memfd that holds the notification area (and a host segment's data).
    fn memfd(&self) -> &SharedMemory {
        match self {
            Storage::Shared(m) | Storage::Bound(m, _) | Storage::Gpu(m) => m,
        }
    }
}

/// The GPU side of a GPU segment.
#[derive(Debug)]
pub(crate) struct GpuData {
    pub memory: GpuMemory,
    /// For the owner's own copies in and out (`Segment::write`/`read`).
    stream: GpuStream,
    /// Serialises the owner's read-modify-write atomics on the segment.
    atomics: Mutex<()>,
}

/// A segment this rank owns.
#[derive(Debug)]
pub(crate) struct LocalSegment {
    pub id: SegId,
    pub size: usize,
    data: *mut u8,
    pub notifications: NotificationArea,
    pub descriptor: SegmentDescriptor,
    /// The words themselves when they live in GPU memory (the `device` and
    /// `gdrcopy` placements); the area's words then stay unused. Declared
    /// before `gpu`: a gdrcopy mapping of them must be unpinned before the
    /// allocation is freed (fields drop in declaration order).
    pub device_words: Option<DeviceWords>,
    pub gpu: Option<GpuData>,
    /// The memfd registered with CUDA, made on first use by a GPU path;
    /// dropped (unregistered) before `_storage` unmaps it.
    registration: OnceLock<std::result::Result<HostRegistration, gpu::GpuError>>,
    /// Ranks this segment was registered with (they map it).
    known_by: Mutex<Vec<Rank>>,
    /// What transports registered of the segment at its creation (the
    /// `verbs` transport: memory regions of the data and the words), each
    /// read back only by the transport that made it
    /// ([`LocalSegment::transport_registration`]). Declared before `_storage`: they
    /// are deregistered before the memory is unmapped (fields drop in
    /// declaration order).
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub registrations: Vec<Box<dyn std::any::Any + Send + Sync>>,
    _storage: Storage,
}

// SAFETY: the raw data pointer refers to memory owned by `_storage` (or to
// user memory the user promised to keep alive, `segment_bind`'s contract);
// it is only used for copies whose ranges are bounds-checked, and concurrent
// access to segment memory by several threads and processes is the nature of
// a PGAS segment (synchronised by notifications, as in C).
unsafe impl Send for LocalSegment {}
// SAFETY: see Send; no interior state other than the shared memory itself.
unsafe impl Sync for LocalSegment {}

impl LocalSegment {
    /// The registration of type `T` a transport made of this segment, if any.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub fn transport_registration<T: std::any::Any>(&self) -> Option<&T> {
        self.registrations
            .iter()
            .find_map(|r| r.downcast_ref::<T>())
    }

    /// Allocates a host segment of `size` bytes with `notification_count` words.
    pub fn alloc_host(
        id: SegId,
        size: u64,
        notification_count: u32,
        spin: std::time::Duration,
    ) -> Result<LocalSegment> {
        let (notif_at, total) = host_layout(size, notification_count)?;
        let size = checked_segment_size(size)?;
        let shm = SharedMemory::create(&format!("seg{}", id.0), total)?;
        let desc = shm.descriptor();
        // SAFETY: notif_at + bytes_for(count) == total, the mapping's length,
        // and notif_at is page-aligned; the mapping lives in `_storage` as
        // long as the area.
        let mut notifications = unsafe {
            NotificationArea::from_raw(
                shm.as_ptr().add(notif_at),
                notification_count,
                WakeMode::Futex,
            )
        };
        notifications.set_spin(spin);
        Ok(LocalSegment {
            id,
            size,
            data: shm.as_ptr(),
            notifications,
            descriptor: SegmentDescriptor {
                size: size as u64,
                data: desc.clone(),
                data_offset: 0,
                notifications: desc,
                notifications_offset: notif_at as u64,
                notification_count,
                inbox: None,
                device_words_offset: None,
                instance: next_instance(),
                keys: Vec::new(),
            },
            gpu: None,
            registration: OnceLock::new(),
            known_by: Mutex::new(Vec::new()),
            device_words: None,
            registrations: Vec::new(),
            _storage: Storage::Shared(shm),
        })
    }

    /// Allocates a segment of `size` bytes in the memory of GPU `device`,
    /// with its notification words where `placement` says: in a registered
    /// memfd (host-mapped) or in the same allocation past the data (also
    /// mapped through gdrcopy under `gdrcopy`; host-mapped when gdrcopy is
    /// missing here, see [`resolve_placement`]).
    pub fn alloc_gpu(
        id: SegId,
        size: u64,
        device: u32,
        notification_count: u32,
        spin: std::time::Duration,
        placement: NotificationPlacement,
    ) -> Result<LocalSegment> {
        // Checked before the driver is asked for anything.
        checked_segment_size(size)?;
        let placement = resolve_placement(placement);
        let words_in_gpu = matches!(
            placement,
            NotificationPlacement::Device | NotificationPlacement::Gdrcopy
        );
        let (words_at, alloc_len) = gpu_layout(size, notification_count, words_in_gpu)?;
        let size = checked_segment_size(size)?;
        let memory = GpuMemory::alloc(device, alloc_len)?;
        let stream = GpuStream::new(device)?;
        let device_words = match words_at {
            None => None,
            Some(at) => {
                let mut words = DeviceWords::new(
                    stream.clone(),
                    memory.device_ptr() + at as u64,
                    notification_count,
                    spin,
                );
                if let (NotificationPlacement::Gdrcopy, Ok(gdr)) =
                    (placement, device_words::gdrcopy())
                {
                    // SAFETY: the words start on a GPU page boundary
                    // (words_offset) of `memory`, a GpuMemory (sync memops
                    // set) holding mapped_len(count) bytes from there
                    // (alloc_len); `device_words` drops before `gpu`, which
                    // frees it (field order).
                    if let Err(e) = unsafe { words.map_with_gdrcopy(gdr) } {
                        // In GPU memory either way: unmapped, they are
                        // the `device` placement's words.
                        tracing::warn!("{id}: notification words not mapped: {e}");
                    }
                }
                Some(words)
            }
        };
        let handle = memory.ipc_handle()?;
        let (shm, notifications) = notification_memfd(id, notification_count, spin)?;
        // Kernels of this rank and of peers may store into these words.
        notifications.mark_silent_writer();
        let data = MemoryDescriptor::GpuIpc {
            host: HostId::current()?,
            pid: std::process::id(),
            device,
            handle: handle.to_vec(),
            offset: memory.ipc_offset(),
            len: alloc_len as u64,
        };
        let segment = LocalSegment {
            id,
            size,
            data: memory.device_ptr() as *mut u8,
            notifications,
            descriptor: SegmentDescriptor {
                size: size as u64,
                data,
                data_offset: 0,
                notifications: shm.descriptor(),
                notifications_offset: 0,
                notification_count,
                inbox: None,
                device_words_offset: words_at.map(|at| at as u64),
                instance: next_instance(),
                keys: Vec::new(),
            },
            gpu: Some(GpuData {
                memory,
                stream,
                atomics: Mutex::new(()),
            }),
            registration: OnceLock::new(),
            known_by: Mutex::new(Vec::new()),
            device_words,
            registrations: Vec::new(),
            _storage: Storage::Gpu(shm),
        };
        // A kernel polls host-mapped words: register them now, not on
        // first use. (Words in GPU memory need no registration.)
        if segment.device_words.is_none() {
            segment.registration(device)?;
        }
        Ok(segment)
    }

    /// Wraps device memory the user allocated (`cudaMalloc`, `cuMemAlloc`)
    /// as a GPU segment of `size` bytes starting at `ptr`.
    ///
    /// The driver names the device and the allocation ([`GpuMemory::borrow`]);
    /// same-host peers open the allocation's CUDA IPC handle and add the
    /// offset of `ptr` in it, as for a segment the runtime allocated. The
    /// notification words are always host-mapped: the `device` and
    /// `gdrcopy` placements put them in the segment's own allocation past
    /// the data, and user memory has no room the runtime may claim. The
    /// memory is never freed by the runtime.
    ///
    /// # Safety
    /// `ptr..ptr + size` must stay allocated device memory for as long as
    /// the segment (and any handle to it) exists: peers write into it and
    /// kernels may be given its address at any time.
    pub unsafe fn bind_gpu(
        id: SegId,
        ptr: DevicePtr,
        size: u64,
        notification_count: u32,
        spin: std::time::Duration,
    ) -> Result<LocalSegment> {
        let size = checked_segment_size(size)?;
        // SAFETY: forwarded from this function's contract.
        let memory = unsafe { GpuMemory::borrow(ptr, size) }?;
        let device = memory.context().device();
        let stream = GpuStream::new(device)?;
        let handle = memory.ipc_handle()?;
        let (shm, notifications) = notification_memfd(id, notification_count, spin)?;
        // Kernels of this rank and of peers may store into these words.
        notifications.mark_silent_writer();
        let data = MemoryDescriptor::GpuIpc {
            host: HostId::current()?,
            pid: std::process::id(),
            device,
            handle: handle.to_vec(),
            offset: memory.ipc_offset(),
            len: size as u64,
        };
        let segment = LocalSegment {
            id,
            size,
            data: ptr as *mut u8,
            notifications,
            descriptor: SegmentDescriptor {
                size: size as u64,
                data,
                data_offset: 0,
                notifications: shm.descriptor(),
                notifications_offset: 0,
                notification_count,
                inbox: None,
                device_words_offset: None,
                instance: next_instance(),
                keys: Vec::new(),
            },
            gpu: Some(GpuData {
                memory,
                stream,
                atomics: Mutex::new(()),
            }),
            registration: OnceLock::new(),
            known_by: Mutex::new(Vec::new()),
            device_words: None,
            registrations: Vec::new(),
            _storage: Storage::Gpu(shm),
        };
        // A kernel polls the host-mapped words: register them now.
        segment.registration(device)?;
        Ok(segment)
    }

    /// Wraps user memory as a segment.
    ///
    /// # Safety
    /// `data` must be valid for reads and writes of `size` bytes for as long
    /// as the segment (and any handle to it) exists, and must not be freed or
    /// moved meanwhile: peers write into it at any time.
    pub unsafe fn bind(
        id: SegId,
        data: *mut u8,
        size: u64,
        owned: Option<Box<[u8]>>,
        notification_count: u32,
        spin: std::time::Duration,
    ) -> Result<LocalSegment> {
        let size = checked_segment_size(size)?;
        let too_large = Error::SegmentTooLarge {
            size: size as u64,
            max: SEGMENT_SIZE_CEILING,
        };
        // The memory must not wrap the address space.
        if (data as usize).checked_add(size).is_none() {
            return Err(too_large);
        }
        let (shm, notifications) = notification_memfd(id, notification_count, spin)?;
        Ok(LocalSegment {
            id,
            size,
            data,
            notifications,
            descriptor: SegmentDescriptor {
                size: size as u64,
                data: ProcessMemory::describe_own(data, size)?,
                data_offset: 0,
                notifications: shm.descriptor(),
                notifications_offset: 0,
                notification_count,
                inbox: None,
                device_words_offset: None,
                instance: next_instance(),
                keys: Vec::new(),
            },
            gpu: None,
            registration: OnceLock::new(),
            known_by: Mutex::new(Vec::new()),
            device_words: None,
            registrations: Vec::new(),
            _storage: Storage::Bound(shm, owned),
        })
    }

    /// Start of the data: a CPU address for host segments, the device
    /// address for GPU segments (never dereference it on the CPU then).
    pub fn data(&self) -> *mut u8 {
        self.data
    }

    /// Whether the data lives in GPU memory.
    pub fn is_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// Whether the data is in this segment's own memfd, which same-host
    /// peers map (not user memory, not GPU memory).
    pub fn is_shared_memory(&self) -> bool {
        matches!(self._storage, Storage::Shared(_))
    }

    /// Records that `rank` has this segment registered (mapped).
    pub fn note_known_by(&self, rank: Rank) {
        let mut v = self.known_by.lock().unwrap_or_else(|p| p.into_inner());
        if !v.contains(&rank) {
            v.push(rank);
        }
    }

    /// Whether `rank` has this segment registered.
    pub fn known_by(&self, rank: Rank) -> bool {
        self.known_by
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&rank)
    }

    /// The device of a GPU segment.
    pub fn device(&self) -> Option<u32> {
        self.gpu.as_ref().map(|g| g.memory.context().device())
    }

    /// The memfd of this segment registered with CUDA (made once, on the
    /// first call; `device` only picks the context to register it in, the
    /// registration is portable to every device).
    pub fn registration(&self, device: u32) -> Result<&HostRegistration> {
        let reg = self.registration.get_or_init(|| {
            let m = self._storage.memfd();
            // SAFETY: the memfd mapping lives in `_storage`, which is dropped
            // after this registration (field order), and nothing else
            // registers it (this OnceLock is the only place).
            unsafe { HostRegistration::register(device, m.as_ptr(), m.len()) }
        });
        reg.as_ref().map_err(|e| Error::Gpu(e.clone()))
    }

    /// Address of byte `offset` for a GPU copy (unified addressing): device
    /// memory, or host memory (registered when possible, for full-speed
    /// DMA; pageable otherwise, which the driver stages).
    pub fn unified_ptr(&self, offset: u64, home: u32, pin: bool) -> DevicePtr {
        if self.gpu.is_none() && pin {
            if let Err(e) = self.registration(home) {
                tracing::debug!("copies from {} run unpinned: {e}", self.id);
            }
        }
        self.data as DevicePtr + offset
    }

    /// Where a kernel on any device finds this segment's data and word 0.
    pub fn kernel_view(&self, device: u32) -> Result<(DevicePtr, DevicePtr)> {
        // The memfd is registered only where it holds what a kernel reads:
        // host-mapped words, a host segment's data.
        let words = match &self.device_words {
            Some(w) => w.base,
            None => {
                let notif_offset = self.descriptor.notifications_offset + HEADER_BYTES as u64;
                self.registration(device)?.device_ptr() + notif_offset
            }
        };
        let data = match &self.gpu {
            Some(g) => g.memory.device_ptr(),
            None if matches!(self._storage, Storage::Shared(_)) => {
                self.registration(device)?.device_ptr()
            }
            // Bound user memory is not registered: the kernel cannot reach it.
            None => 0,
        };
        Ok((data, words))
    }

    /// Copies `bytes` into the data at `offset` (checked by the caller).
    pub fn copy_in(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        match &self.gpu {
            None => {
                debug_assert!(crate::model::bounds::fits(
                    offset,
                    bytes.len() as u64,
                    self.size as u64
                ));
                // SAFETY: the caller checked offset + len <= size; the memory
                // lives as long as self.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        self.data.add(offset as usize),
                        bytes.len(),
                    )
                };
                Ok(())
            }
            Some(g) => {
                let dst = self.device_range(g, offset, bytes.len())?;
                // SAFETY: the destination range lies in the allocation
                // (device_range) and `bytes` outlives the copy, which is
                // complete when the call returns.
                unsafe {
                    gpu::copy_unified_blocking(
                        &g.stream,
                        dst,
                        bytes.as_ptr() as DevicePtr,
                        bytes.len(),
                    )?
                };
                Ok(())
            }
        }
    }

    /// The device address of `offset..offset + len` of this GPU segment's
    /// data; a refusal (a bug of the caller, who checked) is reported.
    fn device_range(&self, g: &GpuData, offset: u64, len: usize) -> Result<DevicePtr> {
        device_range(g.memory.device_ptr(), offset, len as u64, self.size as u64).ok_or_else(|| {
            Error::Gpu(gpu::GpuError::InvalidArgument(format!(
                "bytes {offset}.. ({len}) lie outside {} of {} bytes",
                self.id, self.size
            )))
        })
    }

    /// The device address of `offset..offset + len` of this GPU segment's
    /// data, refused (an error, nothing else) outside it or for a host
    /// segment.
    pub fn gpu_address(&self, offset: u64, len: usize) -> Result<DevicePtr> {
        match &self.gpu {
            Some(g) => self.device_range(g, offset, len),
            None => Err(Error::Gpu(gpu::GpuError::InvalidArgument(format!(
                "{} is not in GPU memory",
                self.id
            )))),
        }
    }

    /// Copies from the data at `offset` into `out` (checked by the caller).
    pub fn copy_out(&self, offset: u64, out: &mut [u8]) -> Result<()> {
        match &self.gpu {
            None => {
                // SAFETY: as in copy_in, with the roles swapped.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.data.add(offset as usize),
                        out.as_mut_ptr(),
                        out.len(),
                    )
                };
                Ok(())
            }
            Some(g) => {
                let src = self.device_range(g, offset, out.len())?;
                // SAFETY: as in copy_in, with the roles swapped.
                unsafe {
                    gpu::copy_unified_blocking(
                        &g.stream,
                        out.as_mut_ptr() as DevicePtr,
                        src,
                        out.len(),
                    )?
                };
                Ok(())
            }
        }
    }

    /// Applies `op` to the u64 at `offset` of a GPU segment: read, apply,
    /// write back, serialised with the owner's other atomics on it (not
    /// with kernels' own atomics on the same word).
    pub fn gpu_atomic(&self, offset: u64, op: crate::model::ids::AtomicOp) -> Result<u64> {
        let g = self.gpu.as_ref().expect("gpu_atomic on a GPU segment");
        let _serial = g.atomics.lock().unwrap_or_else(|p| p.into_inner());
        let mut word = [0u8; 8];
        self.copy_out(offset, &mut word)?;
        let cell = std::sync::atomic::AtomicU64::new(u64::from_ne_bytes(word));
        let old = op.apply(&cell);
        self.copy_in(offset, &cell.into_inner().to_ne_bytes())?;
        Ok(old)
    }

    /// Checks that `offset..offset+len` lies in the data.
    pub fn check(&self, side: Side, rank: Rank, offset: u64, len: u64) -> Result<()> {
        check_bounds(side, rank, self.id, offset, len, self.size as u64)
    }
}

/// A memfd of its own holding a notification area of `count` words (for
/// segments whose data is not in a memfd: bound memory, GPU memory). The
/// area points into the memfd: keep both together (`Storage`).
fn notification_memfd(
    id: SegId,
    count: u32,
    spin: std::time::Duration,
) -> Result<(SharedMemory, NotificationArea)> {
    let shm = SharedMemory::create(
        &format!("seg{}-notify", id.0),
        NotificationArea::bytes_for(count),
    )?;
    // SAFETY: the memfd holds exactly bytes_for(count) bytes; the caller
    // keeps it (in `_storage`) for as long as the area exists, and moving
    // the SharedMemory value does not move its mapping.
    let mut notifications =
        unsafe { NotificationArea::from_raw(shm.as_ptr(), count, WakeMode::Futex) };
    notifications.set_spin(spin);
    Ok((shm, notifications))
}

/// A handle to a segment of this rank.
///
/// The memory stays valid while a handle exists, even after
/// `segment_delete`: deleting unregisters the id, dropping the last handle
/// frees the memory.
///
/// Peers write into a segment at any time, so the safe accessors copy
/// (`read`, `write`); references into the memory are `unsafe` and valid
/// only while the program's own synchronisation (notifications) rules out
/// concurrent writers.
#[derive(Debug, Clone)]
pub struct Segment {
    pub(crate) inner: Arc<LocalSegment>,
    pub(crate) rank: Rank,
}

impl Segment {
    /// The segment's id.
    pub fn id(&self) -> SegId {
        self.inner.id
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Start of the segment's memory: a CPU address for host segments, the
    /// device address for GPU segments.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.data()
    }

    /// Where the segment lives.
    pub fn memory(&self) -> crate::Memory {
        match self.inner.device() {
            Some(d) => crate::Memory::Gpu(d),
            None => crate::Memory::Host,
        }
    }

    fn check_host(&self) -> Result<()> {
        match self.inner.device() {
            None => Ok(()),
            Some(device) => Err(Error::GpuSegmentNotHostAccessible {
                seg: self.id(),
                device,
            }),
        }
    }

    fn check_typed<T>(&self, offset: usize, count: usize) -> Result<()> {
        let bytes = (count as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        self.inner
            .check(Side::Local, self.rank, offset as u64, bytes)
    }

    /// Copies `values` into the segment at byte `offset`.
    ///
    /// ```no_run
    /// # fn f(seg: &gaspi::Segment) -> gaspi::Result<()> {
    /// seg.write(0, &[1.0f64, 2.0, 3.0])?;
    /// # Ok(()) }
    /// ```
    pub fn write<T: Pod>(&self, offset: usize, values: &[T]) -> Result<()> {
        self.check_typed::<T>(offset, values.len())?;
        // The range was checked against the segment's size. The two cannot
        // overlap: a Rust slice into the segment only comes from the
        // `unsafe` `as_slice`, whose contract rules out writing while it lives.
        self.inner
            .copy_in(offset as u64, bytemuck::cast_slice(values))
    }

    /// Copies from the segment at byte `offset` into `out`.
    pub fn read<T: Pod>(&self, offset: usize, out: &mut [T]) -> Result<()> {
        self.check_typed::<T>(offset, out.len())?;
        self.inner
            .copy_out(offset as u64, bytemuck::cast_slice_mut(out))
    }

    /// Reads `count` values starting at byte `offset` into a new vector.
    pub fn read_vec<T: Pod>(&self, offset: usize, count: usize) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); count];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// The whole segment as a byte slice; refused for a GPU segment (use
    /// `read`, or a kernel).
    ///
    /// # Safety
    /// No peer (and no other thread) may write into the segment while the
    /// slice is alive: the program's notifications must guarantee it.
    pub unsafe fn as_slice(&self) -> Result<&[u8]> {
        self.check_host()?;
        // SAFETY: valid host memory of `size` bytes (handle keeps it alive);
        // absence of concurrent writers is the caller's promise.
        Ok(unsafe { std::slice::from_raw_parts(self.as_ptr(), self.size()) })
    }

    /// The whole segment as a mutable byte slice.
    ///
    /// # Safety
    /// As for [`Segment::as_slice`], and no other reference into the
    /// segment may exist while this one lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> Result<&mut [u8]> {
        self.check_host()?;
        // SAFETY: as for as_slice, plus exclusivity promised by the caller.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.size()) })
    }
}

#[cfg(test)]
mod tests {
    //! Property tests of the pure validation behind every call that takes
    //! a segment size, an offset or a length (issue 15, point 5).

    use super::*;
    use crate::model::bounds::check_segment_size;
    use proptest::prelude::*;

    /// Sizes, offsets and lengths with the edges weighted in: small ones,
    /// ones around the page, the ceiling and the maximum, and the band
    /// near u64::MAX where page rounding used to wrap.
    fn edgy() -> impl Strategy<Value = u64> {
        prop_oneof![
            0u64..=8192,
            any::<u64>(),
            (0u64..=8192).prop_map(|d| u64::MAX - d),
            (0u64..=8192).prop_map(|d| SEGMENT_SIZE_CEILING.wrapping_add(d).wrapping_sub(4096)),
            (0u64..=8192).prop_map(|d| crate::DEFAULT_SEGMENT_SIZE_MAX
                .wrapping_add(d)
                .wrapping_sub(4096)),
        ]
    }

    fn fits_u128(offset: u64, len: u64, size: u64) -> bool {
        offset as u128 + len as u128 <= size as u128
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn a_segment_size_is_accepted_exactly_when_it_is_1_to_the_maximum(size in edgy(), max in edgy()) {
            match check_segment_size(size, max) {
                Ok(()) => prop_assert!(size >= 1 && size <= max),
                Err(Error::ZeroSize { .. }) => prop_assert_eq!(size, 0),
                Err(Error::SegmentTooLarge { size: s, max: m }) => {
                    prop_assert!(size > max);
                    prop_assert_eq!((s, m), (size, max));
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        #[test]
        fn host_layout_puts_the_notifications_on_the_next_page_or_refuses(size in edgy(), count in 1u32..=1 << 24) {
            match host_layout(size, count) {
                Ok((at, total)) => {
                    prop_assert!((1..=SEGMENT_SIZE_CEILING).contains(&size));
                    prop_assert!(at as u64 >= size && (at as u64) - size < PAGE as u64);
                    prop_assert_eq!(at % PAGE, 0);
                    prop_assert_eq!(total, at + NotificationArea::bytes_for(count));
                }
                Err(Error::ZeroSize { .. }) => prop_assert_eq!(size, 0),
                Err(Error::SegmentTooLarge { size: s, max }) => {
                    prop_assert!(size > SEGMENT_SIZE_CEILING);
                    prop_assert_eq!((s, max), (size, SEGMENT_SIZE_CEILING));
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        #[test]
        fn gpu_layout_keeps_the_words_past_the_data_or_refuses(size in edgy(), count in 1u32..=1 << 24, in_gpu: bool) {
            match gpu_layout(size, count, in_gpu) {
                Ok((None, len)) => {
                    prop_assert!(!in_gpu);
                    prop_assert_eq!(len as u64, size);
                }
                Ok((Some(at), len)) => {
                    prop_assert!(in_gpu);
                    prop_assert!(at as u64 >= size);
                    prop_assert_eq!(at % gpu::GPU_PAGE_SIZE, 0);
                    prop_assert!(len >= at + 4 * count as usize);
                    prop_assert_eq!(len % gpu::GPU_PAGE_SIZE, 0);
                }
                Err(Error::ZeroSize { .. }) => prop_assert_eq!(size, 0),
                Err(Error::SegmentTooLarge { .. }) => prop_assert!(size > SEGMENT_SIZE_CEILING),
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        #[test]
        fn a_range_is_in_bounds_exactly_when_it_fits_without_wrapping(offset in edgy(), len in edgy(), size in edgy()) {
            let fits = fits_u128(offset, len, size);
            prop_assert_eq!(crate::model::bounds::fits(offset, len, size), fits);
            match check_bounds(Side::Remote, Rank(3), SegId(2), offset, len, size) {
                Ok(()) => prop_assert!(fits),
                Err(Error::OutOfBounds { side, rank, seg, offset: o, end, seg_size }) => {
                    prop_assert!(!fits);
                    prop_assert_eq!((side, rank, seg), (Side::Remote, Rank(3), SegId(2)));
                    prop_assert_eq!((o, end, seg_size), (offset, offset.saturating_add(len), size));
                }
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
        }

        #[test]
        fn a_gpu_copy_address_is_given_only_for_a_range_inside_the_allocation(
            base in prop_oneof![Just(0x7f00_0000_0000u64), edgy()],
            offset in edgy(), len in edgy(), size in edgy(),
        ) {
            let ok = fits_u128(offset, len, size)
                && base as u128 + offset as u128 + len as u128 <= u64::MAX as u128;
            match device_range(base, offset, len, size) {
                Some(p) => {
                    prop_assert!(ok);
                    prop_assert_eq!(p, base + offset);
                }
                None => prop_assert!(!ok),
            }
        }

        #[test]
        fn a_peer_descriptor_is_accepted_only_when_everything_lies_in_its_memory(
            size in edgy(), data_len in edgy(), data_offset in edgy(),
            notif_len in edgy(), notif_offset in edgy(), count in 1u32..=1 << 20,
            words in proptest::option::of(edgy()),
        ) {
            let host = HostId("h".into());
            let desc = SegmentDescriptor {
                size,
                data: MemoryDescriptor::SharedFd { host: host.clone(), pid: 1, fd: 3, len: data_len },
                data_offset,
                notifications: MemoryDescriptor::SharedFd { host, pid: 1, fd: 4, len: notif_len },
                notifications_offset: notif_offset,
                notification_count: count,
                inbox: None,
                device_words_offset: words,
                instance: 1,
                keys: Vec::new(),
            };
            let area = NotificationArea::bytes_for(count) as u64;
            let ok = (1..=SEGMENT_SIZE_CEILING).contains(&size)
                && fits_u128(data_offset, size, data_len)
                && fits_u128(notif_offset, area, notif_len)
                && words.is_none_or(|at| {
                    at >= size
                        && (data_offset as u128 + at as u128 + 4 * count as u128)
                            <= data_len as u128
                });
            prop_assert_eq!(desc.validate().is_ok(), ok, "{:?}", desc.validate());
        }

        /// `Segment::write`/`read` on a real (small) host segment: a range
        /// that fits is copied, one that does not is refused with
        /// `OutOfBounds` and the memory is unchanged.
        #[test]
        fn segment_write_and_read_copy_ranges_that_fit_and_refuse_the_rest(
            offset in prop_oneof![0u64..=5000, edgy()],
            len in 0usize..=1200,
        ) {
            let seg = Segment {
                inner: Arc::new(
                    LocalSegment::alloc_host(SegId(1), 4096 + 100, 4, std::time::Duration::ZERO)
                        .unwrap(),
                ),
                rank: Rank(0),
            };
            let size = seg.size() as u64;
            let before: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            seg.write(0, &before).unwrap();
            let data = vec![0xA5u8; len];
            let fits = fits_u128(offset, len as u64, size);
            let off = usize::try_from(offset).unwrap();
            let written = seg.write(off, &data);
            let mut back = vec![0u8; len];
            let read = seg.read(off, &mut back);
            let after = seg.read_vec::<u8>(0, size as usize).unwrap();
            if fits {
                prop_assert!(written.is_ok() && read.is_ok(), "{written:?} {read:?}");
                prop_assert_eq!(&back, &data);
                let mut want = before.clone();
                want[off..off + len].copy_from_slice(&data);
                prop_assert_eq!(after, want);
            } else {
                let oob = |r: &Result<()>| matches!(r, Err(Error::OutOfBounds { side: Side::Local, offset: o, seg_size, .. }) if *o == offset && *seg_size == size);
                prop_assert!(oob(&written), "{written:?}");
                prop_assert!(oob(&read), "{read:?}");
                prop_assert_eq!(after, before);
                prop_assert!(back.iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn a_wrapping_size_is_refused_by_every_constructor_before_anything_is_mapped() {
        for size in [
            u64::MAX,
            u64::MAX - 100,
            u64::MAX - 4095,
            SEGMENT_SIZE_CEILING + 1,
        ] {
            let spin = std::time::Duration::ZERO;
            let host = LocalSegment::alloc_host(SegId(1), size, 4, spin);
            assert!(
                matches!(host, Err(Error::SegmentTooLarge { size: s, .. }) if s == size),
                "{host:?}"
            );
            let gpu =
                LocalSegment::alloc_gpu(SegId(1), size, 0, 4, spin, NotificationPlacement::Device);
            assert!(
                matches!(gpu, Err(Error::SegmentTooLarge { size: s, .. }) if s == size),
                "{gpu:?}"
            );
            let mut byte = 0u8;
            // SAFETY: refused before the pointer is used.
            let bound = unsafe { LocalSegment::bind(SegId(1), &mut byte, size, None, 4, spin) };
            assert!(
                matches!(bound, Err(Error::SegmentTooLarge { size: s, .. }) if s == size),
                "{bound:?}"
            );
        }
    }
}
