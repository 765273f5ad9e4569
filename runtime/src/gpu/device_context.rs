//! What a kernel needs to make GASPI calls itself: segment tables in device
//! memory, and a request ring served by a thread of this rank.
//!
//! A [`DeviceContext`] is a snapshot: built from the segments this rank owns
//! and the segments peers registered with it *at the time of the call*. A
//! segment created later needs a new context (and a new launch), exactly as
//! a kernel argument would. The context keeps every segment it describes
//! alive, so a kernel never writes into freed memory while the context
//! exists; drop it only after the kernels that use it have finished.
//!
//! Routes. For each `(rank, segment)` the table holds the device-visible
//! addresses of the data and of notification word 0 when the kernel's GPU
//! can store into both: segments of its own GPU, a peer GPU's segment opened
//! with CUDA IPC once peer access between the two GPUs is enabled, and host
//! segments of this host (registered with CUDA). Otherwise the entry keeps
//! only the shape (size, notification count), and the device API posts the
//! request into the ring; [`DeviceContextOptions::force_ring`] makes every
//! remote entry so, to exercise (and measure) that path.
//!
//! The ring server. Kernels cannot wake a thread, so the server polls the
//! ring: it spins for the rank's spin budget after its last request, then
//! naps with a growing interval (up to 1 ms). It carries out each request
//! through the same checked GPU path as a host-driven `write_notify`
//! (copy on its own stream, notification in stream order), synchronises
//! the stream after a batch, and then advances the ring's `completed`
//! counter, which `gaspi_ring_quiet` on the device waits for. A small
//! write to a rank on another host arrives *inline*: the kernel copied its
//! bytes into the ring's payload area (host-mapped), and the server sends
//! them from there, with no copy out of GPU memory (decision 0093). The mio
//! progress engine cannot serve the ring itself: it sleeps in `epoll`,
//! which a GPU store cannot interrupt (decision 0010).

use super::host_driven::Gpu;
use super::network_staging::StagedPut;
use super::queue_stream::QueueStream;
use crate::model::error::{Error, Result, Side};
use crate::model::ids::{NotifyId, Rank, SegId};
use crate::segments::LocalSegment;
use crate::transport::tables::Tables;
use crate::transport::tables::{check_notification, lookup_remote};
use crate::transport::{RemoteSegment, Via};
use gaspi_gpu_kernels::{
    DeviceCtx, Request, RequestOp, RequestRing, SegmentDesc, SEGMENT_RING_INLINE,
};
use gaspi_segments::gpu::{self, GpuContext, GpuMemory, PinnedHostMemory};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a [`DeviceContext`] is built.
#[derive(Debug, Clone, Copy)]
pub struct DeviceContextOptions {
    /// Slots of the request ring (a power of two, 32 to 2^20); 0 for no
    /// ring (then kernels can only reach directly mapped targets). The
    /// default, 256, is the most the server takes in one batch: the ring
    /// mostly carries requests to ranks on other hosts (on one host a GPU
    /// usually maps every segment), whose sending, not the ring, limits
    /// the rate (a flood over TCP: 0.26 M requests/s through 512 slots).
    pub ring_capacity: u32,
    /// Route every request to another rank through the ring, even where
    /// the GPU could store directly.
    pub force_ring: bool,
    /// Bytes a write to a rank on another host may carry in the ring
    /// itself (a multiple of 128 up to 64 KiB; 0: none): the kernel copies
    /// them into pinned memory and the server sends them from there
    /// instead of copying them out of GPU memory first (one thread's
    /// `write_notify` only up to 4 KiB: alone it copies slower than the
    /// copy engine beyond that). Where some route crosses a network, the
    /// ring's pinned memory grows by `ring_capacity` times this: 16 MiB by
    /// default. (With 1,024 slots of 64 KiB, 4 KiB writes took up to 1.4x
    /// longer: the GPU's stores spread over 64 MiB of host memory.)
    pub ring_inline_max: u32,
}

impl Default for DeviceContextOptions {
    fn default() -> Self {
        DeviceContextOptions {
            ring_capacity: 256,
            force_ring: false,
            ring_inline_max: 64 << 10,
        }
    }
}

/// Counters of the ring server, shared with it.
#[derive(Debug, Default)]
struct RingStats {
    served: AtomicU64,
    inline: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
    batches: AtomicU64,
    naps: AtomicU64,
    /// Nanoseconds spent issuing requests, waiting for their completion,
    /// and asleep.
    issuing_ns: AtomicU64,
    completing_ns: AtomicU64,
    napping_ns: AtomicU64,
}

/// Where the ring server's time went, for finding out why a kernel's
/// ring requests are slow ([`DeviceContext::ring_activity`]).
///
/// `issuing` is the time spent handing requests to the driver (copies,
/// stream writes), `completing` the time waiting for them to finish before
/// the ring's completion counter moves, `napping` the time asleep with an
/// empty ring. A kernel that floods the ring should see few naps and
/// batches close to the ring's capacity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingActivity {
    /// Requests carried out.
    pub served: u64,
    /// Of those, writes whose bytes came in the ring (inline).
    pub inline: u64,
    /// Rounds of taking requests then waiting for them.
    pub batches: u64,
    /// Times the server slept because the ring stayed empty.
    pub naps: u64,
    /// Time spent issuing requests.
    pub issuing: Duration,
    /// Time spent waiting for issued requests to complete.
    pub completing: Duration,
    /// Time spent asleep.
    pub napping: Duration,
}

#[derive(Debug)]
struct RingService {
    stop: Arc<AtomicBool>,
    stats: Arc<RingStats>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Ring memory (host-mapped) and the producers' counter (device).
    _memory: PinnedHostMemory,
    _producer: GpuMemory,
}

/// The kernel-side view of this rank's GASPI world; see the module docs.
///
/// ```no_run
/// # fn f(gaspi: &gaspi::Gaspi) -> gaspi::Result<()> {
/// let dctx = gaspi.device_context(0)?;
/// let arg: gaspi::kernels::DeviceCtx = dctx.kernel_arg();
/// // launch a kernel that includes gaspi_device.cuh with `arg` by value
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct DeviceContext {
    device: u32,
    ctx: GpuContext,
    arg: DeviceCtx,
    direct_routes: u32,
    ring: Option<RingService>,
    _tables_memory: GpuMemory,
    /// Keeps every described segment (and its mappings) alive.
    _snapshot: Tables,
}

impl DeviceContext {
    /// The argument to pass, by value, to kernels (`gaspi_device_ctx`).
    pub fn kernel_arg(&self) -> DeviceCtx {
        self.arg
    }

    /// The device the context was built for.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// The device's context (load modules and launch kernels with
    /// `gpu_context().cuda()`).
    pub fn gpu_context(&self) -> &GpuContext {
        &self.ctx
    }

    /// How many `(rank, segment)` entries the GPU can store into directly.
    pub fn direct_routes(&self) -> u32 {
        self.direct_routes
    }

    /// Ring requests carried out so far.
    pub fn ring_served(&self) -> u64 {
        self.ring
            .as_ref()
            .map_or(0, |r| r.stats.served.load(Ordering::Acquire))
    }

    /// Where the ring server's time went so far (all zero without a ring).
    pub fn ring_activity(&self) -> RingActivity {
        let Some(r) = &self.ring else {
            return RingActivity::default();
        };
        let ns = |c: &AtomicU64| Duration::from_nanos(c.load(Ordering::Acquire));
        RingActivity {
            served: r.stats.served.load(Ordering::Acquire),
            inline: r.stats.inline.load(Ordering::Acquire),
            batches: r.stats.batches.load(Ordering::Acquire),
            naps: r.stats.naps.load(Ordering::Acquire),
            issuing: ns(&r.stats.issuing_ns),
            completing: ns(&r.stats.completing_ns),
            napping: ns(&r.stats.napping_ns),
        }
    }

    /// Ring requests refused (bad arguments from a kernel, dead target);
    /// with the last reason.
    pub fn ring_errors(&self) -> (u64, Option<String>) {
        match &self.ring {
            None => (0, None),
            Some(r) => (
                r.stats.errors.load(Ordering::Acquire),
                r.stats
                    .last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone(),
            ),
        }
    }
}

impl Drop for DeviceContext {
    fn drop(&mut self) {
        if let Some(ring) = &mut self.ring {
            ring.stop.store(true, Ordering::Release);
            if let Some(t) = ring.thread.take() {
                let _ = t.join();
            }
        }
    }
}

const DESC: usize = std::mem::size_of::<SegmentDesc>();

impl Gpu {
    pub(crate) fn device_context(
        self: &Arc<Self>,
        device: u32,
        options: DeviceContextOptions,
    ) -> Result<DeviceContext> {
        // A bad payload size is refused whether or not a route would use it.
        let inline_max = options.ring_inline_max;
        if inline_max > gaspi_gpu_kernels::ring::RING_INLINE_LIMIT
            || !(inline_max as usize).is_multiple_of(gaspi_gpu_kernels::ring::RING_LINE)
        {
            return Err(gaspi_gpu_kernels::RingError::BadInline(inline_max).into());
        }
        let ctx = GpuContext::new(device)?;
        let snapshot: Tables = (*self.base.tables.load()).clone();
        let nseg = self.base.config.segment_max as usize;
        let nranks = self.base.size as usize;
        let mut descs = vec![SegmentDesc::default(); nseg * (1 + nranks)];
        for (i, s) in snapshot.local.iter().enumerate().take(nseg) {
            if let Some(s) = s {
                let (data, words) = s.kernel_view(device)?;
                descs[i] = SegmentDesc::direct(data, s.size as u64, words, s.notifications.count());
            }
        }
        let mut direct_routes = 0;
        for rank in 0..nranks {
            for seg in 0..nseg {
                let Some(r) = snapshot.remote[rank][seg].as_deref() else {
                    continue;
                };
                let mut shape = SegmentDesc::via_ring(r.size(), r.notification_count());
                if r.capabilities().completes_later() && options.ring_inline_max > 0 {
                    // Over a network transport: the server sends from
                    // host memory anyway, so small writes come inline.
                    shape = shape.with_flags(SEGMENT_RING_INLINE);
                }
                let forced = options.force_ring && rank as u32 != self.base.rank.0;
                let desc = if forced {
                    shape
                } else {
                    match self.kernel_route(&ctx, r) {
                        Ok(Some(d)) => {
                            direct_routes += 1;
                            d
                        }
                        Ok(None) => shape,
                        Err(e) => {
                            tracing::debug!(
                                "{} of rank {rank} via the ring: {e}",
                                SegId(seg as u8)
                            );
                            shape
                        }
                    }
                };
                descs[(1 + rank) * nseg + seg] = desc;
            }
        }
        let tables_memory = GpuMemory::alloc(device, descs.len() * DESC)?;
        let stream = gpu::GpuStream::new(device)?;
        // SAFETY: the allocation holds descs.len() descriptors; `descs`
        // outlives the synchronize below.
        unsafe {
            gpu::copy_unified(
                &stream,
                tables_memory.device_ptr(),
                descs.as_ptr() as u64,
                descs.len() * DESC,
            )?
        };
        gpu::synchronize(&stream)?;
        let base = tables_memory.device_ptr();
        let mut arg = DeviceCtx {
            rank: self.base.rank.0,
            nranks: nranks as u32,
            nsegments: nseg as u32,
            ring_capacity: 0,
            local: base,
            remote: base + (nseg * DESC) as u64,
            ring: 0,
            ring_producer: 0,
            ..DeviceCtx::default()
        };
        arg.fill_inline(&descs);
        let ring = if options.ring_capacity == 0 {
            None
        } else {
            // Payloads only where some route crosses a network: a job on
            // one host pins nothing for them.
            let network = descs.iter().any(|d| d.flags & SEGMENT_RING_INLINE != 0);
            let capacity = options.ring_capacity;
            let inline_max = if network { options.ring_inline_max } else { 0 };
            let memory = PinnedHostMemory::alloc(
                device,
                RequestRing::bytes_with_payload(capacity, inline_max),
            )?;
            // A fresh cuMemAlloc is zeroed: the producers' counter starts at 0.
            let producer = GpuMemory::alloc(device, RequestRing::PRODUCER_BYTES)?;
            // SAFETY: the pinned memory holds bytes_with_payload(capacity,
            // inline_max) bytes and lives in the RingService next to the
            // consumer; no kernel can post before this context is handed out.
            let consumer =
                unsafe { RequestRing::init_with_payload(memory.host_ptr(), capacity, inline_max)? };
            arg.ring_capacity = capacity;
            arg.ring = memory.device_ptr();
            arg.ring_producer = producer.device_ptr();
            if inline_max > 0 {
                arg.ring_payload = memory.device_ptr() + RequestRing::bytes_for(capacity) as u64;
                arg.ring_inline_max = inline_max;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let stats = Arc::new(RingStats::default());
            let thread = {
                let (inner, stop, stats) = (self.clone(), stop.clone(), stats.clone());
                std::thread::Builder::new()
                    .name(format!("gaspi-ring-{}", self.base.rank.0))
                    .spawn(move || serve_ring(&inner, consumer, &stop, &stats))
                    .map_err(|e| Error::io("starting the GPU ring server", e))?
            };
            Some(RingService {
                stop,
                stats,
                thread: Some(thread),
                _memory: memory,
                _producer: producer,
            })
        };
        tracing::debug!(
            device,
            direct_routes,
            ring = options.ring_capacity,
            "device context built"
        );
        Ok(DeviceContext {
            device,
            ctx,
            arg,
            direct_routes,
            ring,
            _tables_memory: tables_memory,
            _snapshot: snapshot,
        })
    }

    /// The direct route of a kernel on `ctx`'s device to `r`, if it has one.
    fn kernel_route(
        &self,
        ctx: &GpuContext,
        r: &dyn crate::transport::RemoteSegment,
    ) -> Result<Option<SegmentDesc>> {
        let view = r.gpu_view(ctx.device())?;
        let Some(data) = view.data else {
            return Ok(None);
        };
        if view.mapped_in.is_some_and(|d| d != ctx.device()) {
            // Opened (by a copy) before this rank had a GPU of its own, in
            // another device's context: the kernel goes through the ring.
            return Ok(None);
        }
        if let Some(owner) = view.device {
            if owner != ctx.device() {
                let peer = GpuContext::new(owner)?;
                if !ctx.can_access_peer(&peer)? {
                    return Ok(None);
                }
                gpu::enable_peer_access(ctx, &peer)?;
            }
        }
        Ok(Some(SegmentDesc::direct(
            data,
            r.size(),
            view.notifications,
            r.notification_count(),
        )))
    }

    /// The checked ends of a ring `write` / `write_notify`: the local
    /// segment, the remote one, the notification (of a `write_notify`).
    fn checked_write<'t>(&self, tables: &'t Tables, req: &Request) -> Result<CheckedWrite<'t>> {
        let rank = Rank(req.target_rank);
        self.base.check_peer(rank)?;
        let remote_seg = ring_seg(req.remote_segment)?;
        let max = self.base.config.segment_max;
        let local_seg = ring_seg(req.local_segment)?;
        // 0 moves nothing but delivers the notification (decision 0030),
        // as the device calls that write directly do.
        self.base.check_transfer_size(req.size)?;
        self.base.check_seg_id(local_seg)?;
        let local = tables.local[local_seg.0 as usize]
            .as_deref()
            .ok_or(Error::UnknownSegment {
                rank: self.base.rank,
                seg: local_seg,
            })?;
        local.check(Side::Local, self.base.rank, req.local_offset, req.size)?;
        let r = lookup_remote(tables, rank, remote_seg, req.remote_offset, req.size, max)?;
        let notification = match req.op {
            RequestOp::WriteNotify => {
                let id = NotifyId(req.notification_id);
                check_notification(r, rank, remote_seg, id, req.value)?;
                Some((req.notification_id, req.value))
            }
            _ => None,
        };
        Ok((local, r, notification))
    }

    /// Phase one of a batch of ring requests: a write from a GPU segment to
    /// a rank on another host has its first chunks copied out now, so the
    /// copies of every such write of the batch run while earlier ones are
    /// sent (phase two, in the ring's order: [`Self::serve_request`] or
    /// [`StagedPut::send`]). `None`: the request is served whole in phase
    /// two (other paths, and any refusal, which it reports).
    fn stage_remote<'t>(
        &self,
        tables: &'t Tables,
        req: &Request,
    ) -> Option<(StagedPut, &'t dyn RemoteSegment)> {
        if !matches!(req.op, RequestOp::WriteNotify | RequestOp::Write) || req.claims_inline() {
            return None;
        }
        let (local, r, notification) = self.checked_write(tables, req).ok()?;
        if !r.capabilities().completes_later() || !local.is_gpu() {
            return None;
        }
        let staged = self
            .network_staging
            .stage(
                local,
                req.local_offset,
                req.remote_offset,
                req.size,
                notification,
            )
            .ok()?;
        Some((staged, r))
    }

    /// Carries out one ring request, checked like a host call. `payload`
    /// holds the bytes of the batch's inline requests
    /// ([`RequestRing::try_pop_into`]).
    fn serve_request(&self, qs: &QueueStream, req: &Request, payload: &Payload) -> Result<()> {
        let rank = Rank(req.target_rank);
        let tables = self.base.tables.load();
        match req.op {
            RequestOp::WriteNotify | RequestOp::Write if req.claims_inline() => {
                // Checked as any write (the kernel read a source range it
                // had checked itself; a request that breaks the rules is
                // refused whole, whatever it carried).
                let (_, r, notification) = self.checked_write(&tables, req)?;
                let bytes = req
                    .inline_at
                    .and_then(|at| payload.bytes.get(at..at + req.size as usize))
                    .ok_or_else(|| {
                        Error::Protocol(format!(
                            "a kernel posted a write of {} bytes inline, more than the ring \
                             carries ({} a request)",
                            req.size, payload.inline_max
                        ))
                    })?;
                // Any route takes bytes from host memory; the transports
                // copy or send them before returning.
                r.put_notify(
                    req.remote_offset,
                    bytes.as_ptr(),
                    bytes.len(),
                    notification,
                    Via::INTERNAL,
                )
            }
            RequestOp::WriteNotify | RequestOp::Write => {
                let (local, r, notification) = self.checked_write(&tables, req)?;
                let (offset, size) = (req.remote_offset, req.size);
                if r.capabilities().completes_later() {
                    // A rank on another host: the data goes out through
                    // the pinned chunks and the network transport
                    // (pipelined, nothing allocated per request), the
                    // notification on its last frame.
                    if local.is_gpu() {
                        return self.network_staging.put(
                            local,
                            req.local_offset,
                            r,
                            offset,
                            size,
                            notification,
                            Via::INTERNAL,
                        );
                    }
                    let mut staged = vec![0u8; size as usize];
                    local.copy_out(req.local_offset, &mut staged)?;
                    return r.put_notify(
                        offset,
                        staged.as_ptr(),
                        staged.len(),
                        notification,
                        Via::INTERNAL,
                    );
                }
                self.gpu_put(
                    qs,
                    local,
                    req.local_offset,
                    r,
                    req.remote_offset,
                    req.size,
                    notification,
                )
            }
            RequestOp::Notify => {
                self.base.check_peer(rank)?;
                let remote_seg = ring_seg(req.remote_segment)?;
                let max = self.base.config.segment_max;
                let r = lookup_remote(&tables, rank, remote_seg, 0, 0, max)?;
                let id = NotifyId(req.notification_id);
                check_notification(r, rank, remote_seg, id, req.value)?;
                if r.capabilities().completes_later() {
                    return r.notify(req.notification_id, req.value, Via::INTERNAL);
                }
                self.gpu_notify(qs, r, req.notification_id, req.value)
            }
            RequestOp::Unknown(code) => Err(Error::Protocol(format!(
                "a kernel posted a ring request with unknown operation {code}"
            ))),
        }
    }
}

/// The bytes of a batch's inline requests, and the most one may carry.
struct Payload {
    bytes: Vec<u8>,
    inline_max: u32,
}

/// What [`Gpu::checked_write`] gives: the local segment, the remote one,
/// the notification.
type CheckedWrite<'t> = (&'t LocalSegment, &'t dyn RemoteSegment, Option<(u32, u32)>);

/// A segment id from a ring request (kernels may post anything).
fn ring_seg(v: u32) -> Result<SegId> {
    u8::try_from(v)
        .map(SegId)
        .map_err(|_| Error::Protocol(format!("a kernel posted a ring request for segment {v}")))
}

/// The ring server's loop (see the module docs).
fn serve_ring(inner: &Gpu, ring: RequestRing, stop: &AtomicBool, stats: &RingStats) {
    let qs = QueueStream::default();
    let spin = inner.base.config.effective_spin();
    let mut last_work = Instant::now();
    let mut nap = Duration::from_micros(10);
    let mut batch: Vec<Request> = Vec::with_capacity(256);
    let mut payload = Payload {
        bytes: Vec::new(),
        inline_max: ring.inline_max(),
    };
    let add = |counter: &AtomicU64, since: Instant| {
        counter.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    };
    while !stop.load(Ordering::Acquire) {
        let mut taken = 0u64;
        let mut through = 0u64;
        let issuing = Instant::now();
        batch.clear();
        payload.bytes.clear();
        while let Some(req) = ring.try_pop_into(&mut payload.bytes) {
            batch.push(req);
            if batch.len() == 256 {
                break;
            }
        }
        if !batch.is_empty() {
            // Phase one: the copies out of every write to another host,
            // so that they overlap each other and the sends of phase two.
            // At most the staging pool's worth ahead; the rest is served
            // whole in phase two.
            let tables = inner.base.tables.load();
            let mut budget = super::network_staging::POOL_MAX * super::network_staging::CHUNK;
            let mut staged: Vec<_> = batch
                .iter()
                .map(|req| {
                    let ahead = (req.size as usize)
                        .min(super::network_staging::DEPTH * super::network_staging::CHUNK);
                    if ahead > budget {
                        return None;
                    }
                    let s = inner.stage_remote(&tables, req);
                    if s.is_some() {
                        budget -= ahead;
                    }
                    s
                })
                .collect();
            // Phase two, in the ring's order.
            for (req, staged) in batch.iter().zip(staged.drain(..)) {
                let served = match staged {
                    Some((put, r)) => put.send(r, Via::INTERNAL),
                    None => inner.serve_request(&qs, req, &payload),
                };
                if req.claims_inline() && served.is_ok() {
                    stats.inline.fetch_add(1, Ordering::Relaxed);
                }
                if let Err(e) = served {
                    tracing::warn!(ticket = req.ticket, "GPU ring request refused: {e}");
                    stats.errors.fetch_add(1, Ordering::AcqRel);
                    *stats.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(e.to_string());
                }
                taken += 1;
                through = req.ticket + 1;
            }
        }
        if taken > 0 {
            add(&stats.issuing_ns, issuing);
            let completing = Instant::now();
            if let Err(e) = inner.gpu_wait(&qs, None) {
                tracing::error!("GPU ring server: {e}");
            }
            ring.complete_through(through);
            add(&stats.completing_ns, completing);
            stats.batches.fetch_add(1, Ordering::Relaxed);
            stats.served.fetch_add(taken, Ordering::AcqRel);
            last_work = Instant::now();
            nap = Duration::from_micros(10);
        } else if last_work.elapsed() < spin {
            std::hint::spin_loop();
        } else {
            let napping = Instant::now();
            std::thread::sleep(nap);
            add(&stats.napping_ns, napping);
            stats.naps.fetch_add(1, Ordering::Relaxed);
            nap = (nap * 2).min(Duration::from_millis(1));
        }
    }
}
