//! Same-host GPU segments: the peer's GPU memory opened with CUDA IPC.
//!
//! The data of a peer's GPU segment is mapped into this process with
//! `cuIpcOpenMemHandle`, in the context of this rank's own GPU when it has
//! one (lazy peer access: its kernels reach the memory over NVLink or PCIe
//! peer-to-peer), else of the owner's device. Its notification words are
//! host memory (a memfd), mapped and set like a host segment's.
//!
//! The CPU cannot store into GPU memory, so `put` and `get` here are copies
//! on a stream of this segment, synchronised before they return: the
//! blocking fallback for callers outside the GPU path. The runtime's calls
//! take the asynchronous route instead (`crate::gpu`: copy on the queue's
//! stream, the notification written by the same stream after it).
//!
//! A rank's own GPU segments are reached through [`OwnGpuSegment`]: the
//! driver refuses to open an IPC handle in the process that exported it.

use super::{Capabilities, GpuView, RemoteSegment};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::segments::LocalSegment;
use gaspi_notify::{NotificationArea, WakeMode, HEADER_BYTES};
use gaspi_segments::gpu::{self, DevicePtr, GpuError, GpuIpcMapping, GpuStream, HostRegistration};
use gaspi_segments::{MemoryDescriptor, PeerMapping};
use std::sync::{Arc, OnceLock};

/// A same-host peer's GPU segment.
#[derive(Debug)]
struct CudaIpcSegment {
    size: u64,
    device: u32,
    handle: [u8; 64],
    ipc_offset: u64,
    /// This rank's GPU, once it has one: the handle is opened in its
    /// context when first needed (else in the owner's device's). Read
    /// then, not at attach time: a peer's segment may arrive before this
    /// rank made its own first GPU segment.
    home: Arc<OnceLock<u32>>,
    /// The data opened with CUDA IPC and a stream for the blocking
    /// `put`/`get` fallback, made on first use: a CPU rank whose copies
    /// the owner runs (`gpu/owner_copy.rs`) never creates a CUDA context.
    opened: OnceLock<std::result::Result<(GpuIpcMapping, GpuStream), GpuError>>,
    /// The owner's inbox, if it published one.
    inbox: Option<MemoryDescriptor>,
    /// Where the notification words start in the data's allocation (the
    /// `device` placement), from the data's first byte.
    device_words_offset: Option<u64>,
    notifications: NotificationArea,
    notifications_offset: usize,
    /// Dropped (unregistered) before `mapping`.
    registration: OnceLock<std::result::Result<HostRegistration, GpuError>>,
    /// Whether peer access from the home device to `device` is on (tried
    /// once; without it the driver stages copies through the host).
    peer_access: OnceLock<bool>,
    mapping: PeerMapping,
}

// SAFETY: the notification area points into `mapping`, owned by the struct;
// GPU addresses are plain integers; all accesses are copies through the
// driver or atomic notification operations, valid from any thread.
unsafe impl Send for CudaIpcSegment {}
// SAFETY: see Send.
unsafe impl Sync for CudaIpcSegment {}

/// Opens a peer's GPU segment.
///
/// The handle is opened in the context of `home` (this rank's GPU) when
/// there is one, with lazy peer access: kernels of that GPU can then store
/// into it over NVLink or PCIe. Otherwise in the owner's device's context.
pub(crate) fn attach(
    desc: &SegmentDescriptor,
    home: &Arc<OnceLock<u32>>,
) -> Result<Box<dyn RemoteSegment>> {
    desc.validate()?;
    let MemoryDescriptor::GpuIpc {
        device,
        handle,
        offset,
        ..
    } = &desc.data
    else {
        return Err(Error::Protocol(
            "cuda_ipc::attach of a non-GPU segment".into(),
        ));
    };
    let handle: [u8; 64] = handle
        .as_slice()
        .try_into()
        .map_err(|_| Error::Protocol(format!("a CUDA IPC handle of {} bytes", handle.len())))?;
    let mapping = PeerMapping::open(&desc.notifications)?;
    let notifications_offset = usize::try_from(desc.notifications_offset)
        .map_err(|_| Error::Protocol("the notification area lies outside its mapping".into()))?;
    let area_end =
        notifications_offset.checked_add(NotificationArea::bytes_for(desc.notification_count));
    if area_end.is_none_or(|end| end > mapping.len()) {
        return Err(Error::Protocol(
            "the notification area lies outside its mapping".into(),
        ));
    }
    // SAFETY: the owner laid out bytes_for(count) bytes at the offset within
    // the memfd (checked against the mapping's length just above), and the
    // mapping lives as long as the area (same struct).
    let notifications = unsafe {
        NotificationArea::from_raw(
            mapping.as_ptr().add(notifications_offset),
            desc.notification_count,
            WakeMode::Futex,
        )
    };
    tracing::debug!(device, size = desc.size, "opened a peer's GPU segment");
    Ok(Box::new(CudaIpcSegment {
        size: desc.size,
        device: *device,
        handle,
        ipc_offset: offset
            .checked_add(desc.data_offset)
            .ok_or_else(|| Error::Protocol("a GPU segment's offset wraps".into()))?,
        home: home.clone(),
        opened: OnceLock::new(),
        inbox: desc.inbox.clone(),
        device_words_offset: desc.device_words_offset,
        notifications,
        notifications_offset,
        registration: OnceLock::new(),
        peer_access: OnceLock::new(),
        mapping,
    }))
}

impl CudaIpcSegment {
    /// The data mapping and the fallback stream, opened on first use.
    fn opened(&self) -> Result<&(GpuIpcMapping, GpuStream)> {
        self.opened
            .get_or_init(|| {
                // With the words in the allocation, map them too.
                // In range: validate() checked the words against the data.
                let len = match self.device_words_offset {
                    Some(at) => at.saturating_add(4 * u64::from(self.notifications.count())),
                    None => self.size,
                };
                let len = usize::try_from(len).map_err(|_| {
                    gpu::GpuError::InvalidArgument(format!("{len} bytes of a peer's GPU segment"))
                })?;
                let open_in = self.home.get().copied().unwrap_or(self.device);
                let data = GpuIpcMapping::open(open_in, &self.handle, self.ipc_offset, len)?;
                Ok((data, GpuStream::new(self.device)?))
            })
            .as_ref()
            .map_err(|e| Error::Gpu(e.clone()))
    }
}

impl RemoteSegment for CudaIpcSegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            gpu: true,
            words_in_gpu_memory: self.device_words_offset.is_some(),
            ..Capabilities::HOST
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn notification_count(&self) -> u32 {
        self.notifications.count()
    }

    fn put(&self, offset: u64, src: *const u8, len: usize, _via: super::Via<'_>) -> Result<()> {
        let (data, stream) = self.opened()?;
        let dst = data.device_ptr() + offset;
        // SAFETY: the caller checked offset + len <= size and that `src` is
        // valid for `len` bytes; the copy is complete when the call returns.
        unsafe { gpu::copy_unified_blocking(stream, dst, src as DevicePtr, len)? };
        Ok(())
    }

    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        let (data, stream) = self.opened()?;
        let src = data.device_ptr() + offset;
        // SAFETY: as in put, with the roles swapped.
        unsafe { gpu::copy_unified_blocking(stream, dst as DevicePtr, src, len)? };
        Ok(())
    }

    fn notify(&self, id: u32, value: u32, _via: super::Via<'_>) -> Result<()> {
        let Some(at) = self.device_words_offset else {
            return self
                .notifications
                .set(id, value)
                .map_err(|e| Error::Protocol(e.to_string()));
        };
        self.notifications
            .check_set(id, value)
            .map_err(|e| Error::Protocol(e.to_string()))?;
        let (data, stream) = self.opened()?;
        // A copy, not a stream memory operation: the driver refuses those
        // on memory of another process (see `stream_notify` in gpu/).
        let word = data.device_ptr() + at + 4 * id as u64;
        // SAFETY: the id was checked against the count, and the mapping
        // covers the words (opened with them); `value` outlives the copy,
        // which is complete when the call returns.
        unsafe { gpu::copy_unified_blocking(stream, word, &value as *const u32 as DevicePtr, 4)? };
        Ok(())
    }

    fn atomic(&self, _offset: u64, _op: crate::model::ids::AtomicOp) -> Result<Option<u64>> {
        // No CPU atomic reaches GPU memory: the owner applies it.
        Ok(None)
    }

    fn owner_inbox(&self) -> Option<&MemoryDescriptor> {
        self.inbox.as_ref()
    }

    fn gpu_view(&self, home: u32) -> Result<GpuView> {
        let (data, _) = self.opened()?;
        let reg = self.registration.get_or_init(|| {
            // SAFETY: the mapping is owned by self and dropped after the
            // registration (field order); only this OnceLock registers it.
            unsafe { HostRegistration::register(home, self.mapping.as_ptr(), self.mapping.len()) }
        });
        let reg = reg.as_ref().map_err(|e| Error::Gpu(e.clone()))?;
        self.notifications.mark_silent_writer();
        if home != self.device {
            self.peer_access.get_or_init(|| {
                let on = gpu::GpuContext::new(home)
                    .and_then(|h| gpu::enable_peer_access(&h, &gpu::GpuContext::new(self.device)?));
                if let Err(e) = &on {
                    tracing::info!(
                        "copies from GPU {home} to GPU {} are staged: {e}",
                        self.device
                    );
                }
                on.is_ok()
            });
        }
        let notifications = match self.device_words_offset {
            Some(at) => data.device_ptr() + at,
            None => reg.device_ptr() + (self.notifications_offset + HEADER_BYTES) as u64,
        };
        Ok(GpuView {
            data: Some(data.device_ptr()),
            device: Some(self.device),
            notifications,
            words_in_peer_gpu: self.device_words_offset.is_some(),
            mapped_in: Some(data.context().device()),
        })
    }
}

/// One of this rank's own GPU segments, seen through the remote-segment
/// interface (a rank writes to itself the way it writes to peers).
#[derive(Debug)]
pub(crate) struct OwnGpuSegment(pub Arc<LocalSegment>);

impl RemoteSegment for OwnGpuSegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            gpu: true,
            words_in_gpu_memory: self.0.device_words.is_some(),
            ..Capabilities::HOST
        }
    }

    fn size(&self) -> u64 {
        self.0.size as u64
    }

    fn notification_count(&self) -> u32 {
        self.0.notifications.count()
    }

    fn put(&self, offset: u64, src: *const u8, len: usize, _via: super::Via<'_>) -> Result<()> {
        // SAFETY: the caller guarantees `src` is valid for `len` bytes.
        self.0
            .copy_in(offset, unsafe { std::slice::from_raw_parts(src, len) })
    }

    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        // SAFETY: the caller guarantees `dst` is valid for `len` bytes.
        self.0
            .copy_out(offset, unsafe { std::slice::from_raw_parts_mut(dst, len) })
    }

    fn notify(&self, id: u32, value: u32, _via: super::Via<'_>) -> Result<()> {
        let area = &self.0.notifications;
        match &self.0.device_words {
            Some(words) => {
                area.check_set(id, value)
                    .map_err(|e| Error::Protocol(e.to_string()))?;
                words.set(id, value)
            }
            None => area
                .set(id, value)
                .map_err(|e| Error::Protocol(e.to_string())),
        }
    }

    fn atomic(&self, _offset: u64, _op: crate::model::ids::AtomicOp) -> Result<Option<u64>> {
        Ok(None)
    }

    fn own_gpu(&self) -> Option<&Arc<LocalSegment>> {
        Some(&self.0)
    }

    fn gpu_view(&self, home: u32) -> Result<GpuView> {
        let (data, notifications) = self.0.kernel_view(home)?;
        Ok(GpuView {
            data: Some(data),
            device: self.0.device(),
            notifications,
            words_in_peer_gpu: false,
            mapped_in: None,
        })
    }
}
