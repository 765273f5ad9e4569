//! Owner-executed copies: a CPU rank's writes into a same-host peer's GPU
//! segment, carried out by the owner's process.
//!
//! # Why
//!
//! A CPU rank can reach a peer's GPU segment itself: open it with CUDA IPC
//! and copy on a stream of its own (the writer-executed path in
//! [`super`]). But that stream lives in the *writer's* CUDA context, and
//! without MPS a GPU runs the contexts of different processes by time
//! slices: while the owner's persistent kernel occupies the GPU, the
//! writer's copy waits for a slice, measured at about 2.3 ms per copy on
//! an H100 (issue 4). The fix is for the owner's process, whose context the
//! kernel shares, to run the copy: a copy engine runs beside a kernel of
//! the same context at once. It also means a CPU-only rank never creates a
//! CUDA context at all, and it is the shape a network transport's progress
//! engine will have (bytes arrive, the owner copies them into its GPU).
//!
//! # How
//!
//! Every rank that owns GPU segments creates one *inbox*: a memfd with one
//! lane per peer, published in its GPU segments' descriptors. A lane is a
//! single-producer ring of 64-byte requests (put, get, notify), written by
//! that peer (serialised by a lock in the peer's process) and served by a
//! thread of the owner (`gaspi-inbox-N`). The owner maps the writer's host
//! segment anyway (same-host transport), so a put is zero-copy: one
//! `cuMemcpyAsync` from the writer's segment, registered with CUDA in the
//! owner's context, into the GPU segment, on a stream per lane (so a peer's
//! requests stay in order), then the notification with
//! `cuStreamWriteValue32`, then the lane's `completed` word, also written
//! by the stream. The writer's `wait` returns when `completed` has reached
//! its last request: only then may it reuse its source buffer.
//!
//! The server spins a little after work (`Config::spin`), then sleeps on a
//! futex that writers wake: an idle inbox costs nothing. A writer whose
//! owner dies gets an error naming it from `wait` (the progress engine
//! marks the rank), never a hang.

use super::queue_stream::QueueStream;
use crate::base::Base;
use crate::model::error::{Error, Result};
use crate::model::ids::{Rank, SegId};
use crate::transport::tables::lookup_remote;
use gaspi_segments::gpu::{self, DevicePtr, GpuStream, HostRegistration};
use gaspi_segments::{MemoryDescriptor, PeerMapping, SharedMemory};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Requests a lane holds before a writer has to wait for the owner.
const LANE_ENTRIES: u32 = 256;
/// Longest a writer waits for room in a full lane: a running owner takes
/// a request within microseconds, so this is only ever reached when the
/// owner is stopped or starved, and then the writer gets `InboxFull`.
const LANE_FULL_WAIT: Duration = Duration::from_millis(20);
const ENTRY_BYTES: usize = 64;
/// head (written by the writer), tail (owner), the completed words of the
/// lane's streams (owner's streams), failure code (owner).
const LANE_HEADER: usize = 256;
const HEAD: usize = 0;
const TAIL: usize = 64;
const COMPLETED: usize = 128;
const FAILED: usize = 192;
/// Streams per lane: a writer's queue q runs on stream q % LANE_STREAMS, so
/// requests of different queues overlap, those of one queue stay in order.
const LANE_STREAMS: usize = 16;
const _: () = assert!(COMPLETED + 4 * LANE_STREAMS <= FAILED);
const LANE_BYTES: usize = LANE_HEADER + LANE_ENTRIES as usize * ENTRY_BYTES;
/// Why a lane could not be mapped when the owner's process has ended (the
/// inbox is opened through the owner's descriptors: decision 0028).
const OWNER_GONE: &str = "its process has ended";

/// The inbox's futex word (1 while the server sleeps), then the lanes.
const INBOX_HEADER: usize = 256;

/// What a request asks the owner to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Kind {
    /// Copy from the writer's segment into the owner's, then notify.
    Put = 1,
    /// Copy from the owner's segment into the writer's.
    Get = 2,
    /// Only the notification, after the lane's earlier requests.
    Notify = 3,
}

/// One request, as laid out in the lane (64 bytes).
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct Entry {
    kind: u32,
    /// The lane's request number (head after publishing it).
    seq: u32,
    /// The writer's segment (source of a put, target of a get).
    peer_seg: u32,
    /// The owner's segment.
    owner_seg: u32,
    peer_offset: u64,
    owner_offset: u64,
    len: u64,
    /// Notification on the owner's segment; value 0: none.
    notify_id: u32,
    notify_value: u32,
    /// The writer's queue: picks the stream and the completed word.
    queue: u32,
    _pad: [u32; 3],
}

const _: () = assert!(std::mem::size_of::<Entry>() == ENTRY_BYTES);

/// Why an owner refused a request (the lane's failure word; 0: none).
fn failure_reason(code: u32) -> &'static str {
    match code {
        1 => "the writer's segment is not registered with the owner, or not in shared memory",
        2 => "the owner's segment is gone",
        3 => "a CUDA call of the owner failed",
        4 => "a malformed request",
        _ => "an unknown failure",
    }
}

/// A lane of some inbox, seen through a pointer to its first byte.
#[derive(Clone, Copy)]
struct Lane(*mut u8);

impl Lane {
    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: `at` is one of the header offsets, 4-byte aligned inside
        // the lane, which lies in a mapping its holder keeps alive; the word
        // is shared between processes, hence atomic access only.
        unsafe { &*(self.0.add(at) as *const AtomicU32) }
    }
    fn entry(&self, seq: u32) -> *mut Entry {
        let slot = (seq.wrapping_sub(1) % LANE_ENTRIES) as usize;
        // SAFETY: slot < LANE_ENTRIES, so the entry lies inside the lane.
        unsafe { self.0.add(LANE_HEADER + slot * ENTRY_BYTES) as *mut Entry }
    }
}

/// `a` is at or after `b` in wrapping sequence order.
fn reached(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) as i32 >= 0
}

/// This rank's side of owner-executed copies: its inbox (once it owns a
/// GPU segment) and its lanes into peers' inboxes.
#[derive(Debug)]
pub(crate) struct OwnerCopies {
    base: Arc<Base>,
    server: OnceLock<InboxServer>,
    lanes: Vec<OnceLock<std::result::Result<Arc<WriterLane>, String>>>,
}

impl OwnerCopies {
    pub fn new(base: Arc<Base>) -> OwnerCopies {
        let ranks = base.size;
        OwnerCopies {
            base,
            server: OnceLock::new(),
            lanes: (0..ranks).map(|_| OnceLock::new()).collect(),
        }
    }
}

/// The owner's inbox and the thread serving it.
#[derive(Debug)]
struct InboxServer {
    descriptor: MemoryDescriptor,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A writer's lane into one owner's inbox.
#[derive(Debug)]
pub(crate) struct WriterLane {
    lane: *mut u8,
    doorbell: *const AtomicU32,
    /// Serialises this process's producers (the lane has one producer).
    post: Mutex<()>,
    _mapping: PeerMapping,
}

// SAFETY: the pointers point into `_mapping`, owned by the struct; the
// words are atomics and entries are written under `post` before the head
// store publishes them.
unsafe impl Send for WriterLane {}
// SAFETY: see Send.
unsafe impl Sync for WriterLane {}

impl WriterLane {
    fn lane(&self) -> Lane {
        Lane(self.lane)
    }

    /// Publishes a request; returns its seq. While the lane is full it
    /// waits at most [`LANE_FULL_WAIT`] for the owner to take a request,
    /// then fails with `InboxFull`, having posted nothing: a stopped owner
    /// must not hold a writer (`write` has no timeout to keep).
    fn post(&self, base: &Base, owner: Rank, mut e: Entry) -> Result<u32> {
        let _g = self.post.lock().unwrap_or_else(|p| p.into_inner());
        let lane = self.lane();
        let head = lane.word(HEAD).load(Ordering::Relaxed);
        let mut nap = Duration::from_micros(5);
        let give_up = Instant::now() + LANE_FULL_WAIT;
        while head.wrapping_sub(lane.word(TAIL).load(Ordering::Acquire)) >= LANE_ENTRIES {
            base.peers.peer_ok(owner)?;
            if Instant::now() >= give_up {
                return Err(Error::InboxFull {
                    rank: owner,
                    entries: LANE_ENTRIES,
                });
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_micros(500));
        }
        let seq = head.wrapping_add(1);
        e.seq = seq;
        // SAFETY: the slot of `seq` is free (the owner took every request
        // up to `tail`, checked above) and only this producer writes it.
        unsafe { lane.entry(seq).write_volatile(e) };
        lane.word(HEAD).store(seq, Ordering::SeqCst);
        // SAFETY: the doorbell lies in the mapping the struct owns.
        let bell = unsafe { &*self.doorbell };
        if bell.load(Ordering::SeqCst) != 0 {
            bell.store(0, Ordering::SeqCst);
            gaspi_notify::futex::wake_all(bell);
        }
        Ok(seq)
    }

    /// Waits until the owner completed request `seq`, or fails naming it.
    fn wait_for(
        &self,
        base: &Base,
        owner: Rank,
        queue: u32,
        seq: u32,
        deadline: Option<Instant>,
    ) -> Result<()> {
        let lane = self.lane();
        let completed = COMPLETED + 4 * (queue as usize % LANE_STREAMS);
        let start = Instant::now();
        let mut nap = Duration::from_micros(2);
        loop {
            let failed = lane.word(FAILED).load(Ordering::Acquire);
            if failed != 0 {
                return Err(Error::OwnerCopyFailed {
                    rank: owner,
                    reason: failure_reason(failed),
                });
            }
            if reached(lane.word(completed).load(Ordering::Acquire), seq) {
                return Ok(());
            }
            base.peers.peer_ok(owner)?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error::Timeout {
                    op: "wait",
                    peer: None,
                });
            }
            // The owner's GPU writes `completed`: nobody wakes us. Spin
            // briefly (copies of a few KiB take microseconds), then yield
            // for up to 2 ms (a window of MiB copies: a nap overshoots by
            // the timer slack, ~50 us, which cost 4 MiB writes 12% of their
            // bandwidth, gaspi-bench host-gpu-bw), then nap.
            let waited = start.elapsed();
            if waited < Duration::from_micros(50) {
                std::hint::spin_loop();
            } else if waited < Duration::from_millis(2) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_micros(200));
            }
        }
    }
}

impl OwnerCopies {
    /// The inbox descriptor to publish in this rank's GPU segments,
    /// creating the inbox and starting its server on the first call.
    pub(crate) fn owner_inbox(&self, home: u32) -> Result<MemoryDescriptor> {
        if let Some(s) = self.server.get() {
            return Ok(s.descriptor.clone());
        }
        let len = INBOX_HEADER + self.base.size as usize * LANE_BYTES;
        let memory = SharedMemory::create(&format!("gaspi-inbox-{}", self.base.rank.0), len)?;
        // SAFETY: the memfd mapping moves into the server thread, which
        // drops this registration before the mapping (declaration order in
        // `serve_inbox`'s frame: registration is declared after memory).
        let registration = unsafe { HostRegistration::register(home, memory.as_ptr(), len)? };
        let descriptor = memory.descriptor();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (base, stop) = (self.base.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("gaspi-inbox-{}", self.base.rank.0))
                .spawn(move || serve_inbox(&base, memory, registration, home, &stop))
                .map_err(|e| Error::io("starting the inbox server", e))?
        };
        let server = InboxServer {
            descriptor,
            stop,
            thread: Mutex::new(Some(thread)),
        };
        if let Err(server) = self.server.set(server) {
            // Another thread of this rank won the race: retire ours.
            server.stop.store(true, Ordering::Release);
            if let Some(t) = server
                .thread
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                let _ = t.join();
            }
        }
        tracing::debug!(
            rank = self.base.rank.0,
            "inbox for owner-executed copies started"
        );
        Ok(self.server.get().expect("set above").descriptor.clone())
    }

    /// Stops the inbox server (at `term`): peers' copies are no longer served.
    pub(crate) fn stop_owner_inbox(&self) {
        if let Some(s) = self.server.get() {
            s.stop.store(true, Ordering::Release);
            if let Some(t) = s.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = t.join();
            }
        }
    }

    /// This rank's lane into `owner`'s inbox, mapped on first use.
    fn writer_lane(&self, owner: Rank, inbox: &MemoryDescriptor) -> Result<Arc<WriterLane>> {
        let got = self.lanes[owner.0 as usize].get_or_init(|| {
            let mapping = PeerMapping::open(inbox).map_err(|e| match e {
                gaspi_segments::SegmentError::OwnerGone { .. } => OWNER_GONE.to_string(),
                e => e.to_string(),
            })?;
            if mapping.len() < INBOX_HEADER + self.base.size as usize * LANE_BYTES {
                return Err(format!("the inbox of {owner} is too small"));
            }
            let base = mapping.as_ptr();
            // SAFETY: the length was checked just above: the doorbell and
            // this rank's lane lie inside the mapping, owned by the lane.
            let (doorbell, lane) = unsafe {
                (
                    base as *const AtomicU32,
                    base.add(INBOX_HEADER + self.base.rank.0 as usize * LANE_BYTES),
                )
            };
            Ok(Arc::new(WriterLane {
                lane,
                doorbell,
                post: Mutex::new(()),
                _mapping: mapping,
            }))
        });
        got.clone().map_err(|reason| {
            if reason == OWNER_GONE {
                // It ended: name it as gone, as every call does (0028).
                return self
                    .base
                    .peers
                    .peer_ok(owner)
                    .err()
                    .unwrap_or(Error::PeerDead { rank: owner });
            }
            tracing::warn!("mapping the inbox of {owner}: {reason}");
            Error::OwnerCopyFailed {
                rank: owner,
                reason: "its inbox cannot be mapped",
            }
        })
    }

    /// Builds and publishes one request on `lane`; returns its seq.
    /// `peer` is this rank's (segment, offset), `own` the owner's.
    #[allow(clippy::too_many_arguments)]
    fn owner_post(
        &self,
        qs: &QueueStream,
        owner: Rank,
        lane: &WriterLane,
        kind: Kind,
        peer: (SegId, u64),
        own: (SegId, u64),
        len: u64,
        notify: Option<(u32, u32)>,
    ) -> Result<u32> {
        if kind != Kind::Notify {
            self.base.stats.call(
                crate::model::stats::Op::OwnerCopy,
                crate::model::stats::Counter::None,
                0,
            );
        }
        let (notify_id, notify_value) = notify.unwrap_or((0, 0));
        lane.post(
            &self.base,
            owner,
            Entry {
                kind: kind as u32,
                seq: 0,
                peer_seg: peer.0 .0 as u32,
                owner_seg: own.0 .0 as u32,
                peer_offset: peer.1,
                owner_offset: own.1,
                len,
                notify_id,
                notify_value,
                queue: qs.index,
                _pad: [0; 3],
            },
        )
    }

    /// Posts a put (with an optional notification) for the owner to run.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn owner_put(
        &self,
        qs: &QueueStream,
        owner: Rank,
        inbox: &MemoryDescriptor,
        local: SegId,
        local_offset: u64,
        remote: SegId,
        remote_offset: u64,
        size: u64,
        notify: Option<(u32, u32)>,
    ) -> Result<()> {
        let lane = self.writer_lane(owner, inbox)?;
        let (peer, own) = ((local, local_offset), (remote, remote_offset));
        let seq = self.owner_post(qs, owner, &lane, Kind::Put, peer, own, size, notify)?;
        qs.owner_posted(owner, seq);
        Ok(())
    }

    /// Posts a notification that the owner sets after the lane's earlier
    /// requests (the ordering of a `notify` after writes on one queue), or
    /// on its own when the words are out of a CPU store's reach (the
    /// `device` placement). `inbox`: the owner's, when the lane may not be
    /// mapped yet; `None` when requests to `owner` are outstanding.
    pub(crate) fn owner_notify(
        &self,
        qs: &QueueStream,
        owner: Rank,
        inbox: Option<&MemoryDescriptor>,
        remote: SegId,
        id: u32,
        value: u32,
    ) -> Result<()> {
        let lane = match inbox {
            Some(inbox) => self.writer_lane(owner, inbox)?,
            None => match self.lanes[owner.0 as usize].get() {
                Some(Ok(lane)) => lane.clone(),
                _ => {
                    return Err(Error::OwnerCopyFailed {
                        rank: owner,
                        reason: "its inbox cannot be mapped",
                    })
                }
            },
        };
        let (peer, own, notify) = ((SegId(0), 0), (remote, 0), Some((id, value)));
        let seq = self.owner_post(qs, owner, &lane, Kind::Notify, peer, own, 0, notify)?;
        qs.owner_posted(owner, seq);
        Ok(())
    }

    /// A read the owner runs; complete (data in place) when it returns.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn owner_get(
        &self,
        qs: &QueueStream,
        owner: Rank,
        inbox: &MemoryDescriptor,
        local: SegId,
        local_offset: u64,
        remote: SegId,
        remote_offset: u64,
        size: u64,
    ) -> Result<()> {
        let lane = self.writer_lane(owner, inbox)?;
        let (peer, own) = ((local, local_offset), (remote, remote_offset));
        let seq = self.owner_post(qs, owner, &lane, Kind::Get, peer, own, size, None)?;
        lane.wait_for(&self.base, owner, qs.index, seq, None)
    }

    /// Local completion of the queue's owner-executed requests.
    pub(crate) fn owner_wait(&self, qs: &QueueStream, deadline: Option<Instant>) -> Result<()> {
        for (owner, seq) in qs.owner_outstanding() {
            let Some(Ok(lane)) = self.lanes[owner.0 as usize].get() else {
                continue;
            };
            lane.wait_for(&self.base, owner, qs.index, seq, deadline)?;
            qs.owner_done(owner, seq);
        }
        Ok(())
    }
}

/// The inbox server's loop (see the module docs).
fn serve_inbox(
    base: &Base,
    memory: SharedMemory,
    registration: HostRegistration,
    home: u32,
    stop: &AtomicBool,
) {
    let mapped = memory.as_ptr();
    let lanes: Vec<Lane> = (0..base.size as usize)
        // SAFETY: the memfd holds INBOX_HEADER + size lanes (owner_inbox).
        .map(|r| Lane(unsafe { mapped.add(INBOX_HEADER + r * LANE_BYTES) }))
        .collect();
    // SAFETY: word 0 of the memfd, 4-byte aligned, lives as long as `memory`.
    let doorbell = unsafe { &*(mapped as *const AtomicU32) };
    let device_base = registration.device_ptr();
    let mut streams: Vec<Vec<Option<GpuStream>>> = (0..base.size)
        .map(|_| (0..LANE_STREAMS).map(|_| None).collect())
        .collect();
    let spin = base.config.effective_spin();
    let mut last_work = Instant::now();
    while !stop.load(Ordering::Acquire) {
        let mut worked = false;
        for (r, lane) in lanes.iter().enumerate() {
            if r == base.rank.0 as usize {
                continue;
            }
            let mut taken = 0;
            loop {
                let tail = lane.word(TAIL).load(Ordering::Relaxed);
                if lane.word(HEAD).load(Ordering::Acquire) == tail || taken == 64 {
                    break;
                }
                let seq = tail.wrapping_add(1);
                // SAFETY: the writer published `seq` (head moved past it
                // with a release store, acquired above) and does not touch
                // the slot again until tail passes it.
                let e = unsafe { lane.entry(seq).read_volatile() };
                let q = e.queue as usize % LANE_STREAMS;
                let completed =
                    device_base + (INBOX_HEADER + r * LANE_BYTES + COMPLETED + 4 * q) as u64;
                if streams[r][q].is_none() {
                    match GpuStream::new(home) {
                        Ok(s) => streams[r][q] = Some(s),
                        Err(err) => tracing::warn!("inbox stream for {}: {err}", Rank(r as u32)),
                    }
                }
                let stream = streams[r][q].as_ref();
                let outcome = match stream {
                    Some(s) => serve_entry(base, Rank(r as u32), s, &e, completed, home),
                    None => Err(3),
                };
                if let Err(code) = outcome {
                    lane.word(FAILED).store(code, Ordering::Release);
                }
                lane.word(TAIL).store(seq, Ordering::Release);
                taken += 1;
                worked = true;
            }
        }
        if worked {
            last_work = Instant::now();
            continue;
        }
        if last_work.elapsed() < spin {
            std::hint::spin_loop();
            continue;
        }
        doorbell.store(1, Ordering::SeqCst);
        let pending = lanes
            .iter()
            .any(|l| l.word(HEAD).load(Ordering::SeqCst) != l.word(TAIL).load(Ordering::Relaxed));
        if !pending {
            // Bounded, so that `stop` is seen without a wake-up.
            gaspi_notify::futex::wait(doorbell, 1, Duration::from_millis(20));
        }
        doorbell.store(0, Ordering::SeqCst);
    }
    // In-flight copies still write `completed` into the registration.
    for s in streams.iter().flatten().flatten() {
        let _ = gpu::synchronize(s);
    }
    drop(streams);
    drop(registration);
    drop(memory);
}

/// Runs one request on `stream`; the failure code on refusal.
fn serve_entry(
    base: &Base,
    writer: Rank,
    stream: &GpuStream,
    e: &Entry,
    completed: DevicePtr,
    home: u32,
) -> std::result::Result<(), u32> {
    let tables = base.tables.load();
    let seg = |v: u32| u8::try_from(v).map(SegId).map_err(|_| 4u32);
    let own_seg = seg(e.owner_seg)?;
    let own = tables
        .local
        .get(own_seg.0 as usize)
        .and_then(|s| s.as_deref())
        .ok_or(2u32)?;
    let cuda = |r: std::result::Result<(), gpu::GpuError>| {
        r.map_err(|err| {
            tracing::warn!("owner-executed copy for {writer}: {err}");
            3u32
        })
    };
    match e.kind {
        k if k == Kind::Put as u32 || k == Kind::Get as u32 => {
            if own
                .check(
                    crate::model::error::Side::Local,
                    base.rank,
                    e.owner_offset,
                    e.len,
                )
                .is_err()
            {
                return Err(4);
            }
            // Checked like any remote end; the writer checked it before
            // posting, so a refusal means the segment changed meanwhile.
            let max = base.config.segment_max;
            let peer = lookup_remote(&tables, writer, seg(e.peer_seg)?, e.peer_offset, e.len, max)
                .map_err(|err| match err {
                    Error::UnknownSegment { .. } => 1u32,
                    _ => 4u32,
                })?;
            let view = peer.gpu_view(home).map_err(|_| 3u32)?;
            let peer_ptr = view
                .data
                .ok_or(1u32)?
                .checked_add(e.peer_offset)
                .ok_or(4u32)?;
            let own_ptr = own.unified_ptr(e.owner_offset, home, true);
            let len = usize::try_from(e.len).map_err(|_| 4u32)?;
            // SAFETY: both ranges were checked just above against segments
            // that stay alive in `tables`' owners until delete, which (as
            // for any GASPI request) the writer orders after its `wait`,
            // and `wait` returns only after `completed` passed this request.
            if k == Kind::Put as u32 {
                cuda(unsafe { gpu::copy_unified(stream, own_ptr, peer_ptr, len) })?;
            } else {
                cuda(unsafe { gpu::copy_unified(stream, peer_ptr, own_ptr, len) })?;
            }
        }
        k if k == Kind::Notify as u32 => {}
        _ => return Err(4),
    }
    // The notification (if any) and the writer's completion word, in that
    // order, with one driver call: per request the thread makes two calls
    // (copy, writes) instead of three.
    let mut writes = [(completed, e.seq); 2];
    let mut n = 1;
    if e.notify_value != 0 {
        if own
            .notifications
            .check_set(e.notify_id, e.notify_value)
            .is_err()
        {
            return Err(4);
        }
        // A bare notification into words mapped through gdrcopy: a store
        // now, when the stream has nothing left that it could overtake
        // (the writer's completion word still goes in stream order).
        let stored = match own.device_words.as_ref() {
            Some(w) if w.is_mapped() && e.kind == Kind::Notify as u32 => {
                gpu::is_idle(stream).unwrap_or(false) && w.store(e.notify_id, e.notify_value)
            }
            _ => false,
        };
        if !stored {
            let (_, words) = own.kernel_view(home).map_err(|_| 3u32)?;
            own.notifications.mark_silent_writer();
            writes[0] = (words + 4 * e.notify_id as u64, e.notify_value);
            n = 2;
        }
    }
    // SAFETY: the notification id was checked against the area, registered
    // with CUDA for as long as the segment lives; `completed` is a word of
    // the registered inbox, alive until the server returns (after its
    // streams are dropped).
    cuda(unsafe { gpu::stream_write_u32s(stream, &writes[..n]) })
}
