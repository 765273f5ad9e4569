//! Same-host transport: the peer's segment is mapped into this process.
//!
//! A `put` is a `memcpy` into the mapping (or one `process_vm_writev` for
//! memory the peer bound with `segment_bind`), complete when it returns. A
//! `notify` is a release store into the mapped notification word, so it is
//! visible only after the data: the target's acquire load in `waitsome`
//! pairs with it. The target takes no part in either, except that a
//! target which is waiting anyway may take chunks of a large copy
//! (`assisted_copy.rs`, decision 0014).

use super::{Capabilities, GpuView, HostDirect, RemoteSegment, Transport};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use gaspi_notify::{NotificationArea, WakeMode, HEADER_BYTES};
use gaspi_segments::gpu::{GpuError, HostRegistration};
use gaspi_segments::{MemoryDescriptor, PeerMapping, ProcessMemory};
use std::sync::{Arc, OnceLock};

/// The shared-memory transport (stateless: all state is in the mappings).
#[derive(Debug, Default)]
pub(crate) struct SharedMemoryTransport;

#[derive(Debug)]
enum Data {
    /// The peer's memfd mapped here; data starts at `ptr`.
    Mapped { ptr: *mut u8 },
    /// The peer's own memory, reached by cross-memory attach.
    Process(ProcessMemory),
}

#[derive(Debug)]
struct SharedMemorySegment {
    size: u64,
    /// The owner's [`SegmentDescriptor::instance`].
    instance: u64,
    data: Data,
    notifications: NotificationArea,
    /// Which mapping holds the notification area, and where.
    notifications_at: (usize, usize),
    /// The mappings registered with CUDA, on the first GPU use; dropped
    /// (unregistered) before the mappings.
    registrations: OnceLock<std::result::Result<Vec<HostRegistration>, GpuError>>,
    /// Keeps the mappings that `data` and `notifications` point into alive.
    mappings: Vec<PeerMapping>,
}

// SAFETY: the raw pointer points into a mapping owned by `mappings`, which
// lives as long as the struct; all accesses are bounds-checked copies or
// atomic notification operations, valid from any thread.
unsafe impl Send for SharedMemorySegment {}
// SAFETY: see Send; there is no interior mutable state besides the mapping.
unsafe impl Sync for SharedMemorySegment {}

impl Transport for SharedMemoryTransport {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn attach(
        &self,
        _owner: Rank,
        _seg: u8,
        desc: &SegmentDescriptor,
        home: &Arc<OnceLock<u32>>,
    ) -> Result<Box<dyn RemoteSegment>> {
        desc.validate()?;
        let mut mappings = Vec::new();
        let data = match &desc.data {
            d @ MemoryDescriptor::SharedFd { .. } => {
                let m = PeerMapping::open(d)?;
                // SAFETY: data_offset + size lies within the descriptor's
                // length (validate, above), and PeerMapping checked the file
                // is at least as long as the descriptor says.
                let ptr = unsafe { m.as_ptr().add(desc.data_offset as usize) };
                mappings.push(m);
                Data::Mapped { ptr }
            }
            d @ MemoryDescriptor::Process { .. } => Data::Process(ProcessMemory::open(d)?),
            MemoryDescriptor::GpuIpc { .. } => return super::cuda_ipc::attach(desc, home),
        };
        let index = if desc.notifications == desc.data && !mappings.is_empty() {
            0
        } else {
            mappings.push(PeerMapping::open(&desc.notifications)?);
            mappings.len() - 1
        };
        let base = mappings[index].as_ptr();
        // SAFETY: bytes_for(notification_count) bytes at notifications_offset
        // lie within the descriptor's length (validate, above), which this
        // mapping has, and it lives in `mappings` as long as the area.
        let notifications = unsafe {
            NotificationArea::from_raw(
                base.add(desc.notifications_offset as usize),
                desc.notification_count,
                WakeMode::Futex,
            )
        };
        Ok(Box::new(SharedMemorySegment {
            size: desc.size,
            instance: desc.instance,
            data,
            notifications,
            notifications_at: (index, desc.notifications_offset as usize),
            registrations: OnceLock::new(),
            mappings,
        }))
    }
}

impl RemoteSegment for SharedMemorySegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities::HOST
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn notification_count(&self) -> u32 {
        self.notifications.count()
    }

    fn instance(&self) -> u64 {
        self.instance
    }

    fn put(&self, offset: u64, src: *const u8, len: usize, _via: super::Via<'_>) -> Result<()> {
        match &self.data {
            Data::Mapped { ptr } => {
                // SAFETY: the caller checked offset + len <= size; the mapping
                // is alive (self); `src` is valid for `len` bytes (caller).
                // The regions may only overlap when a rank writes into its own
                // segment from itself, so use the overlap-tolerant copy.
                unsafe { std::ptr::copy(src, ptr.add(offset as usize), len) };
                Ok(())
            }
            Data::Process(pm) => {
                // SAFETY: `src` is valid for `len` bytes (the caller's contract).
                let bytes = unsafe { std::slice::from_raw_parts(src, len) };
                Ok(pm.write(offset as usize, bytes)?)
            }
        }
    }

    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        match &self.data {
            Data::Mapped { ptr } => {
                // SAFETY: as in put, with source and destination swapped.
                unsafe { std::ptr::copy(ptr.add(offset as usize), dst, len) };
                Ok(())
            }
            Data::Process(pm) => {
                // SAFETY: `dst` is valid for `len` bytes (the caller's contract).
                let bytes = unsafe { std::slice::from_raw_parts_mut(dst, len) };
                Ok(pm.read(offset as usize, bytes)?)
            }
        }
    }

    fn atomic(&self, offset: u64, op: crate::model::ids::AtomicOp) -> Result<Option<u64>> {
        match &self.data {
            Data::Mapped { ptr } => {
                // SAFETY: the caller checked offset + 8 <= size and that
                // offset is 8-byte aligned; the mapping starts on a page
                // boundary (data_offset 0 in a memfd mapping), so the word
                // is aligned; it lives as long as self. Every rank touches
                // such words only through atomics (the API's contract for
                // words used with atomics), and AtomicU64 has u64's layout.
                let word = unsafe {
                    std::sync::atomic::AtomicU64::from_ptr(ptr.add(offset as usize).cast())
                };
                Ok(Some(op.apply(word)))
            }
            // Another process's private memory: no hardware atomic reaches it.
            Data::Process(_) => Ok(None),
        }
    }

    fn notify(&self, id: u32, value: u32, _via: super::Via<'_>) -> Result<()> {
        // The release store inside `set` orders it after the copies above.
        self.notifications
            .set(id, value)
            .map_err(|e| crate::model::error::Error::Protocol(e.to_string()))
    }

    fn host_direct(&self) -> Option<HostDirect<'_>> {
        match &self.data {
            Data::Mapped { ptr } => Some(HostDirect {
                data: *ptr,
                notifications: &self.notifications,
            }),
            Data::Process(_) => None,
        }
    }

    fn gpu_view(&self, home: u32) -> Result<GpuView> {
        let regs = self.registrations.get_or_init(|| {
            self.mappings
                .iter()
                .map(|m| {
                    // SAFETY: the mapping lives in `self.mappings`, dropped
                    // after `registrations` (field order), and this
                    // OnceLock is the only place that registers it.
                    unsafe { HostRegistration::register(home, m.as_ptr(), m.len()) }
                })
                .collect()
        });
        let regs = regs.as_ref().map_err(|e| Error::Gpu(e.clone()))?;
        self.notifications.mark_silent_writer();
        let (index, offset) = self.notifications_at;
        let data = match &self.data {
            Data::Mapped { ptr } => Some(
                regs[0].device_ptr() + (*ptr as usize - self.mappings[0].as_ptr() as usize) as u64,
            ),
            Data::Process(_) => None,
        };
        Ok(GpuView {
            data,
            device: None,
            notifications: regs[index].device_ptr() + (offset + HEADER_BYTES) as u64,
            words_in_peer_gpu: false,
            mapped_in: None,
        })
    }
}
