//! Host-driven calls on the GPU path (see the module docs of `gpu/`): the
//! copies and notifications a CPU thread enqueues on its queue's stream,
//! reads, and the local completion of a queue's GPU work.

use super::copy_batch;
use super::owner_copy::OwnerCopies;
use super::queue_stream::QueueStream;
use crate::base::Base;
use crate::model::error::{Error, Result};
use crate::segments::LocalSegment;
use crate::transport::{GpuView, RemoteSegment};
use gaspi_segments::gpu::{self, DevicePtr, GpuContext, GpuMemory, GpuStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::OnceLock;

/// The GPU path of a rank: the device its copies run on, and the copies
/// that owners run for it and it runs for them (see [`owner_copy`]).
#[derive(Debug)]
pub(crate) struct Gpu {
    pub base: Arc<Base>,
    /// The device whose streams carry GPU copies. Shared with the
    /// transports: a peer's GPU memory is opened, on first use, in the
    /// context of the home device as it is then.
    pub home: Arc<OnceLock<u32>>,
    /// This rank's inbox and its lanes into peers' (see `owner_copy.rs`).
    pub owner_copies: OwnerCopies,
    /// Pinned chunks and the pipeline through which GPU memory leaves
    /// over a network transport (`network_staging.rs`).
    pub network_staging: super::network_staging::NetworkStaging,
}

impl Gpu {
    /// The GPU path of the rank that `base` describes; nothing opened yet.
    pub fn new(base: Arc<Base>) -> Gpu {
        Gpu {
            owner_copies: OwnerCopies::new(base.clone()),
            base,
            home: Default::default(),
            network_staging: Default::default(),
        }
    }

    /// The device whose streams carry this rank's GPU copies.
    pub(crate) fn home_device(&self) -> u32 {
        *self
            .home
            .get_or_init(|| self.base.config.gpu_device.unwrap_or(0))
    }

    fn queue_stream<'q>(&self, qs: &'q QueueStream) -> Result<&'q GpuStream> {
        if let Some(s) = qs.stream.get() {
            return Ok(s);
        }
        let s = GpuStream::new(self.home_device())?;
        // Two threads may race to create it: one wins, the other's is dropped.
        let _ = qs.stream.set(s);
        Ok(qs.stream.get().expect("set just above"))
    }

    /// The queue's stream with its gathered writes launched on it: what is
    /// enqueued on it next, or waited for, comes after them.
    fn flushed_stream<'q>(&self, qs: &'q QueueStream) -> Result<&'q GpuStream> {
        let stream = self.queue_stream(qs)?;
        flush_batch(qs, stream)?;
        Ok(stream)
    }

    /// `write` / `write_notify` through the GPU path. Arguments are checked.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gpu_put(
        &self,
        qs: &QueueStream,
        local: &LocalSegment,
        local_offset: u64,
        r: &dyn RemoteSegment,
        remote_offset: u64,
        size: u64,
        notify: Option<(u32, u32)>,
    ) -> Result<()> {
        let home = self.home_device();
        let stream = self.queue_stream(qs)?;
        let view = r.gpu_view(home)?;
        let src = local.unified_ptr(local_offset, home, self.base.config.pin_host_segments);
        let len = usize::try_from(size).map_err(|_| Error::TooLarge {
            size,
            max: self.base.config.transfer_size_max,
        })?;
        match view.data {
            // SAFETY: both ranges were bounds-checked by the caller; the
            // segments stay alive until the copy ran: a segment's memory is
            // freed only when its last handle is gone, and `wait` (or the
            // owner's delete, which waits for every peer to forget it) comes
            // first by the API's contract, as for any posted GASPI request.
            Some(dst) => {
                let dst = remote_address(dst, remote_offset)?;
                // A write joins the batch only behind other GPU work of the
                // queue: the first of a window (and a lone write_notify)
                // starts on the copy engine at once, which answers sooner
                // than a launch (see copy_batch).
                let write = (dst, src, len);
                let batched = copy_batch::suits(&self.base.config, len, dst, src)
                    && local.device() == Some(home)
                    && kernel_reaches(&view, home)
                    && gather(qs, stream, notify.is_some(), None, write)?;
                // Without the kernel, a write from one GPU's memory into
                // another GPU's posted while the stream still runs earlier
                // work of the queue joins the copy engine's batch: it could
                // not start before that work ends anyway (see copy_batch).
                let engine_max = self.base.config.gpu_engine_batch;
                let batched = batched
                    || (engine_max > 0
                        && self.base.config.gpu_batch_min == 0
                        && local.device().is_some()
                        && view.device.is_some()
                        && local.device() != view.device
                        && gather(qs, stream, notify.is_some(), Some(engine_max), write)?);
                if !batched {
                    flush_batch(qs, stream)?;
                    // SAFETY: as just said.
                    unsafe { gpu::copy_unified(stream, dst, src, len)? }
                }
            }
            None => {
                flush_batch(qs, stream)?;
                let mut bounce = vec![0u8; len];
                // SAFETY: `bounce` lives until after the synchronize below.
                unsafe { gpu::copy_unified(stream, bounce.as_mut_ptr() as u64, src, len)? };
                gpu::synchronize(stream)?;
                r.put(
                    remote_offset,
                    bounce.as_ptr(),
                    len,
                    crate::transport::Via::INTERNAL,
                )?;
            }
        }
        qs.pending.store(true, Ordering::Relaxed);
        match notify {
            Some((id, value)) => self.stream_notify(qs, stream, &view, id, value),
            None => Ok(()),
        }
    }

    /// A notification in stream order after the queue's GPU work.
    pub(crate) fn gpu_notify(
        &self,
        qs: &QueueStream,
        r: &dyn RemoteSegment,
        id: u32,
        value: u32,
    ) -> Result<()> {
        let view = r.gpu_view(self.home_device())?;
        let stream = self.flushed_stream(qs)?;
        self.stream_notify(qs, stream, &view, id, value)?;
        // The store is stream work like a copy: `wait` (and the ring
        // server's batch end) must synchronise for it, or it could land
        // after them (a batch of notifies alone was reported served
        // before its values were stored).
        qs.pending.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Sets notification `id` of `view` on `stream`, after its earlier work.
    ///
    /// Stream memory operations reach host memory and this process's own
    /// GPU memory, but the driver refuses them on another process's GPU
    /// memory opened with CUDA IPC (the `device` placement of a peer's
    /// words). There the stream writes the value into a relay word of its
    /// own device and copies those 4 bytes to the peer: both in stream
    /// order, so one relay word per stream is enough, and the copy lands
    /// after the data as the write would.
    fn stream_notify(
        &self,
        qs: &QueueStream,
        stream: &GpuStream,
        view: &GpuView,
        id: u32,
        value: u32,
    ) -> Result<()> {
        let word = view.notifications + 4 * id as u64;
        if !view.words_in_peer_gpu {
            // SAFETY: the id was checked against the area, which stays
            // mapped and registered while its remote segment lives (see
            // gpu_put).
            unsafe { gpu::stream_write_u32(stream, word, value)? };
            return Ok(());
        }
        // Held until both are enqueued: another thread's relay on this
        // stream must not overwrite the word between them.
        let mut relay = qs.relay.lock().unwrap_or_else(|p| p.into_inner());
        if relay.is_none() {
            *relay = Some(GpuMemory::alloc(self.home_device(), 4)?);
        }
        let relay = relay.as_ref().expect("set just above");
        // SAFETY: the relay word is this queue's GPU memory, alive as long
        // as the queue; the peer's word lies in its IPC mapping, alive while
        // the remote segment lives (see gpu_put); both run in stream order.
        unsafe {
            gpu::stream_write_u32(stream, relay.device_ptr(), value)?;
            gpu::copy_unified(stream, word, relay.device_ptr(), 4)?;
        }
        Ok(())
    }

    /// `read` through the GPU path; complete when it returns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gpu_get(
        &self,
        qs: &QueueStream,
        local: &LocalSegment,
        local_offset: u64,
        r: &dyn RemoteSegment,
        remote_offset: u64,
        size: u64,
    ) -> Result<()> {
        let home = self.home_device();
        let stream = self.flushed_stream(qs)?;
        let view = r.gpu_view(home)?;
        let dst = local.unified_ptr(local_offset, home, self.base.config.pin_host_segments);
        let len = usize::try_from(size).map_err(|_| Error::TooLarge {
            size,
            max: self.base.config.transfer_size_max,
        })?;
        match view.data {
            // SAFETY: both ranges checked by the caller and alive until the
            // synchronize below.
            Some(src) => {
                let src = remote_address(src, remote_offset)?;
                // SAFETY: as just said.
                unsafe { gpu::copy_unified(stream, dst, src, len)? }
            }
            None => {
                let mut bounce = vec![0u8; len];
                r.get(remote_offset, bounce.as_mut_ptr(), len)?;
                // SAFETY: `bounce` lives until after the synchronize below.
                unsafe { gpu::copy_unified(stream, dst, bounce.as_ptr() as u64, len)? };
                gpu::synchronize(stream)?;
                return Ok(());
            }
        }
        Ok(gpu::synchronize(stream)?)
    }

    /// Local completion of the queue's GPU work: its stream, then what
    /// owners execute for it (until `deadline`).
    pub(crate) fn gpu_wait(
        &self,
        qs: &QueueStream,
        deadline: Option<std::time::Instant>,
    ) -> Result<()> {
        self.owner_copies.owner_wait(qs, deadline)?;
        // Load first: the swap is a locked read-modify-write, and host-only
        // queues never have GPU work pending.
        if qs.pending.load(Ordering::Relaxed) && qs.pending.swap(false, Ordering::Relaxed) {
            if let Some(stream) = qs.stream.get() {
                flush_batch(qs, stream)?;
                gpu::synchronize(stream)?;
            }
        }
        Ok(())
    }
}

/// Gathers `write` (destination, source, bytes) into `qs`'s batch if the
/// batch holds writes already, or if no notification rides on it and the
/// queue has GPU work in flight (for the copy engine's batch, `engine_max`
/// bytes at most: work still running on `stream`); launches the batch once
/// full or when a notification follows. True when the write was gathered.
fn gather(
    qs: &QueueStream,
    stream: &GpuStream,
    notify: bool,
    engine_max: Option<u64>,
    (dst, src, len): (DevicePtr, DevicePtr, usize),
) -> Result<bool> {
    let mut batch = qs.batch.lock().unwrap_or_else(|p| p.into_inner());
    let join = !batch.is_empty()
        || (!notify && qs.pending() && (engine_max.is_none() || !gpu::is_idle(stream)?));
    if join {
        match engine_max {
            Some(_) => batch.push_engine(dst, src, len),
            None => batch.push(dst, src, len),
        }
        if batch.full(engine_max.unwrap_or(u64::MAX)) || notify {
            batch.launch(stream)?;
        }
    }
    Ok(join)
}

/// Launches the writes `qs` gathered, if any, on its `stream`.
fn flush_batch(qs: &QueueStream, stream: &GpuStream) -> Result<()> {
    let mut batch = qs.batch.lock().unwrap_or_else(|p| p.into_inner());
    if batch.is_empty() {
        return Ok(());
    }
    batch.launch(stream)
}

/// Whether a kernel on `home` may store into the GPU memory `view`
/// describes: memory of `home` itself, or of a device `home` has peer
/// access to (enabled here, once per pair), opened in `home`'s context.
fn kernel_reaches(view: &GpuView, home: u32) -> bool {
    static PEERS: Mutex<Vec<(u32, u32, bool)>> = Mutex::new(Vec::new());
    let Some(owner) = view.device else {
        return false;
    };
    if view.mapped_in.is_some_and(|d| d != home) {
        return false;
    }
    if owner == home {
        return true;
    }
    let mut peers = PEERS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&(_, _, ok)) = peers.iter().find(|(a, b, _)| (*a, *b) == (home, owner)) {
        return ok;
    }
    let ok = (|| -> Result<bool> {
        let (a, b) = (GpuContext::new(home)?, GpuContext::new(owner)?);
        if !a.can_access_peer(&b)? {
            return Ok(false);
        }
        gpu::enable_peer_access(&a, &b)?;
        Ok(true)
    })()
    .unwrap_or(false);
    peers.push((home, owner, ok));
    ok
}

/// The device address `offset` bytes into a peer's GPU data at `base`
/// (the range was checked against the segment; an address that would
/// still wrap is refused rather than computed).
fn remote_address(base: DevicePtr, offset: u64) -> Result<DevicePtr> {
    base.checked_add(offset).ok_or_else(|| {
        Error::Gpu(gpu::GpuError::InvalidArgument(format!(
            "offset {offset} past device address {base:#x}"
        )))
    })
}
