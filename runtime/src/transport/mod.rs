//! Transports: how bytes and notifications reach a peer's segment.
//!
//! One trait, one folder per transport, chosen per pair of ranks at init.
//! A [`Transport`] turns the [`SegmentDescriptor`] a peer registered into a
//! [`RemoteSegment`], and a remote segment knows how to put, get and notify
//! on its transport. What to check (bounds, ids, values, ranks, queues) and
//! in which order to do things (data, then notification) is decided once,
//! above the transports, in the runtime's calls.
//!
//! Today: [`shared_memory`] for ranks on the same host, which reaches a
//! peer's GPU segments through [`cuda_ipc`] and copies large writes with
//! the help of a waiting target through [`assisted_copy`]; and [`tcp`] for
//! ranks on other hosts (or every peer, with `GASPI_TRANSPORT=tcp`), whose
//! requests the target's progress engine applies. The same-host ones also
//! hand out a [`GpuView`]: the unified addresses a GPU copy or a kernel
//! uses, the seam through which the GPU path (`crate::gpu`) reaches any
//! target. The network transport answers `gpu_view` with `data: None`, and
//! the GPU path then stages through host memory, as it does for bound
//! memory.
//!
//! # Posted now, complete later
//!
//! Every request is posted [`Via`] the queue it belongs to (or none: the
//! runtime's own collectives, which complete by their own notifications).
//! A transport whose requests complete when the call returns (shared
//! memory) ignores it. One whose requests complete later (TCP) counts each
//! request against its queue and target in [`outstanding::Outstanding`]
//! when it posts it and settles it when the target reports it applied (or
//! failed: the failure is kept, naming the target, for the next `wait`).
//! `wait(queue)` then waits for exactly what was posted on that queue. The transport's
//! contract on order: a `notify` is applied after every `put` posted
//! before it to the same rank, and a read's local notification is set
//! after the data of every read posted before it to the same rank.

#[cfg(any(feature = "verbs", feature = "libfabric"))]
pub(crate) mod completions;
pub(crate) mod cuda_ipc;
#[cfg(feature = "libfabric")]
pub(crate) mod libfabric;
// The libfabric transport, in the layer's folder but declared here: the
// benchmark program compiles the layer's `mod.rs` into itself (decision
// 0045), where the runtime's types are not.
#[cfg(feature = "libfabric")]
#[path = "libfabric/transport.rs"]
pub(crate) mod libfabric_transport;
pub(crate) mod outstanding;
pub(crate) mod registry;
pub(crate) mod shared_memory;
pub(crate) mod tables;
pub(crate) mod tcp;
#[cfg(feature = "verbs")]
pub(crate) mod verbs;

use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::Result;
use crate::model::ids::{Rank, SegId};
use gaspi_segments::gpu::DevicePtr;
use std::sync::{Arc, OnceLock};

/// Where a GPU copy or a kernel finds a remote segment, in this process's
/// unified address space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuView {
    /// Data byte 0; `None` when the memory cannot be mapped here (another
    /// process's bound memory): then copies are staged through the host.
    pub data: Option<DevicePtr>,
    /// The device of a GPU segment's data.
    pub device: Option<u32>,
    /// Notification word 0 (host memory registered with CUDA, or GPU
    /// memory under the `device` placement).
    pub notifications: DevicePtr,
    /// Whether the words are in another process's GPU memory (opened with
    /// CUDA IPC), where stream memory operations cannot write: the GPU
    /// path then relays the value through a word of its own GPU memory.
    pub words_in_peer_gpu: bool,
    /// For another process's GPU memory: the device in whose context this
    /// process opened it. Copies take it from any context; a kernel only
    /// from a device of that context.
    pub mapped_in: Option<u32>,
}

/// When the requests to a remote segment are complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Completion {
    /// When the call returns: the data and the words were stored.
    Now,
    /// After the call returns, by the next `wait` on the request's queue
    /// (see [`Via`]).
    Later,
}

/// What a remote segment's transport offers, as one value the paths above
/// the seam choose from (UCX's `uct_iface_attr`), instead of one question
/// per property. A transport declares it per segment
/// ([`RemoteSegment::capabilities`]); it does not change while the segment
/// is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capabilities {
    /// When requests complete.
    pub completion: Completion,
    /// The smallest write this transport sends from where it lies, given
    /// what keeps that memory mapped
    /// ([`RemoteSegment::put_notify_in_place`]), rather than copied;
    /// `None`: it always copies (or stores at once).
    pub in_place_from: Option<u64>,
    /// The data lives in GPU memory: `put`/`get` go through the GPU path,
    /// and `notify` after its copies in stream order.
    pub gpu: bool,
    /// The notification words live in GPU memory (the `device`
    /// placement): `notify` is then a blocking stream write, and the
    /// runtime's calls take the stream or the owner's inbox instead.
    pub words_in_gpu_memory: bool,
}

impl Capabilities {
    /// Host memory whose requests complete in the call, sent by copies.
    pub const HOST: Capabilities = Capabilities {
        completion: Completion::Now,
        in_place_from: None,
        gpu: false,
        words_in_gpu_memory: false,
    };

    /// Whether requests complete after the call returns (at `wait`).
    #[inline]
    pub fn completes_later(&self) -> bool {
        self.completion == Completion::Later
    }
}

/// What a posted request belongs to: the queue it was posted on (its
/// completion is counted there), or nothing (the runtime's own traffic).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Via<'a> {
    /// The queue's count of requests that complete later, `None` for
    /// internal traffic.
    pub queue: Option<PostedOn<'a>>,
}

/// The queue a request was posted on, as a transport sees it: where to
/// count the request until it completes, and the queue's number (which
/// travels with the request to the target).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PostedOn<'a> {
    pub outstanding: &'a outstanding::Outstanding,
    pub index: u32,
}

impl<'a> Via<'a> {
    /// Internal traffic: collectives and staging, completed by other means.
    pub const INTERNAL: Via<'static> = Via { queue: None };

    /// A request posted on the queue `q` describes
    /// (`crate::queue::QueueState::posted`).
    #[inline]
    pub fn queue(q: PostedOn<'a>) -> Via<'a> {
        Via { queue: Some(q) }
    }
}

/// The checked remote end of a call: owner, segment id, the segment as the
/// transport reaches it, and the offset into it.
#[derive(Clone, Copy)]
pub(crate) struct RemoteEnd<'a> {
    pub rank: Rank,
    pub seg: SegId,
    pub segment: &'a dyn RemoteSegment,
    pub offset: u64,
}

/// A way to reach the segments of one peer.
pub(crate) trait Transport: Send + Sync + std::fmt::Debug {
    /// Short name for logs and benchmark records.
    fn name(&self) -> &'static str;
    /// The provider underneath, for a transport that runs over one chosen
    /// at start-up (libfabric's `cxi`, `efa`, `tcp;ofi_rxm`, ...).
    fn provider(&self) -> Option<&str> {
        None
    }
    /// Makes the segment a peer registered reachable from here. `home` is
    /// this rank's GPU once it has one: a peer's GPU memory is opened (on
    /// first use, when `home` is known if it ever will be) in its context,
    /// so this rank's kernels can store into it.
    fn attach(
        &self,
        owner: Rank,
        seg: u8,
        desc: &SegmentDescriptor,
        home: &Arc<OnceLock<u32>>,
    ) -> Result<Box<dyn RemoteSegment>>;
}

/// A remote segment as memory this process reaches with plain loads and
/// stores: its data mapped here, its notification words in host memory.
///
/// The runtime's short path (`Protocol::put_routed`) copies and stores through
/// it directly instead of through the trait's `put` and `notify`, the way
/// UCX's short protocols skip the generic one: on a shared-memory
/// ping-pong every indirect call is a visible part of the round trip.
#[derive(Clone, Copy)]
pub(crate) struct HostDirect<'a> {
    /// First data byte, mapped in this process for [`RemoteSegment::size`] bytes.
    pub data: *mut u8,
    /// The segment's notification words.
    pub notifications: &'a gaspi_notify::NotificationArea,
}

impl HostDirect<'_> {
    /// Copies `len` bytes from `src` to `offset`, then sets notification
    /// `id` to `value` if given (a release store, after the copy).
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes and `offset + len` must
    /// lie within the segment's data. The ranges may overlap (a rank writing
    /// into its own segment): the copy tolerates it.
    #[inline]
    pub unsafe fn put(
        &self,
        src: *const u8,
        offset: u64,
        len: usize,
        notify: Option<(u32, u32)>,
    ) -> std::result::Result<(), gaspi_notify::NotifyError> {
        // SAFETY: the caller's contract; the data is mapped here for the
        // segment's size as long as `self` borrows the segment.
        unsafe { std::ptr::copy(src, self.data.add(offset as usize), len) };
        match notify {
            Some((id, value)) => self.notifications.set(id, value),
            None => Ok(()),
        }
    }
}

/// A peer's segment, reachable through some transport.
///
/// Callers have checked offsets, sizes, ids and values; implementations may
/// assume valid arguments. `put` returns once the data is in place at the
/// target (shared memory) or, for asynchronous transports, once the bytes
/// are copied out of `src` (the caller may reuse it) and ordered before any
/// later `notify` to the same rank; `wait` on its queue then reports it
/// applied (see [`Via`]).
pub(crate) trait RemoteSegment: Send + Sync + std::fmt::Debug {
    /// What the transport offers for this segment.
    fn capabilities(&self) -> Capabilities;
    /// Bytes of data.
    fn size(&self) -> u64;
    /// Number of notification words.
    fn notification_count(&self) -> u32;
    /// Copies `len` bytes from local memory at `src` to `offset`.
    fn put(&self, offset: u64, src: *const u8, len: usize, via: Via<'_>) -> Result<()>;
    /// Copies `len` bytes from `offset` to local memory at `dst`; the data
    /// is there when it returns, on every transport (GPU staging uses it).
    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()>;
    /// Sets notification `id` to `value`, after everything put before.
    fn notify(&self, id: u32, value: u32, via: Via<'_>) -> Result<()>;
    /// `put`, then `notify` if given: one request where the transport can
    /// carry both (TCP: the notification rides on the data's last frame).
    fn put_notify(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
    ) -> Result<()> {
        self.put(offset, src, len, via)?;
        match notify {
            Some((id, value)) => self.notify(id, value, via),
            None => Ok(()),
        }
    }
    /// [`Self::put_notify`] of bytes that stay unchanged until the
    /// request completes (GASPI's rule for a write's source: until the
    /// `wait` on its queue), in memory that `keep` keeps mapped: a
    /// transport that sends later may send them from there instead of
    /// copying them first (TCP's zero-copy path, UCX's *zcopy*).
    fn put_notify_in_place(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
        keep: &crate::net::connection::Keep,
    ) -> Result<()> {
        let _ = keep;
        self.put_notify(offset, src, len, notify, via)
    }
    /// Reads `len` bytes at `offset` into local segment `into` at
    /// `into_offset` (both checked), complete when it returns or, where
    /// they complete later ([`Capabilities::completion`]), by the next
    /// `wait` on the queue.
    fn post_get(
        &self,
        offset: u64,
        into: &Arc<crate::segments::LocalSegment>,
        into_offset: u64,
        len: usize,
        _via: Via<'_>,
    ) -> Result<()> {
        // SAFETY: the caller checked into_offset + len against `into`,
        // which the Arc keeps alive and mapped for the copy.
        let dst = unsafe { into.data().add(into_offset as usize) };
        self.get(offset, dst, len)
    }
    /// Sets notification `id` of local segment `seg` to `value` once every
    /// read posted before to this segment's owner has landed: at once
    /// where reads complete in the call, else when the owner's answer to
    /// this request, which follows theirs, arrives.
    fn post_read_notify(
        &self,
        seg: &Arc<crate::segments::LocalSegment>,
        id: u32,
        value: u32,
        _via: Via<'_>,
    ) -> Result<()> {
        seg.notifications
            .set(id, value)
            .map_err(|e| crate::model::error::Error::Protocol(format!("read notification: {e}")))
    }
    /// Applies `op` to the u64 at `offset` (8-byte aligned and in bounds,
    /// checked by the caller) with a hardware atomic and returns its old
    /// value; `Ok(None)` when this transport cannot reach the word with one
    /// from here, and the owner must apply it (see `atomics.rs`).
    fn atomic(&self, offset: u64, op: crate::model::ids::AtomicOp) -> Result<Option<u64>>;
    /// The segment as host memory mapped here, when this transport reaches
    /// it that way (shared memory): then a put is a copy and a notify a
    /// store, with the same effect as `put` and `notify`.
    fn host_direct(&self) -> Option<HostDirect<'_>> {
        None
    }
    /// The unified addresses of the segment, registering its host memory
    /// with CUDA on first use (context of `home`); from then on GPU writers
    /// may store notifications silently, and the area says so.
    fn gpu_view(&self, home: u32) -> Result<GpuView>;
    /// The owner's inbox for copies it runs itself (its GPU segments on
    /// this host; see `gpu/owner_copy.rs`), if it published one.
    fn owner_inbox(&self) -> Option<&gaspi_segments::MemoryDescriptor> {
        None
    }
    /// [`SegmentDescriptor::instance`] of the segment, where the
    /// transport keeps it (0: unknown).
    fn instance(&self) -> u64 {
        0
    }
    /// This rank's own GPU segment behind this view, if it is one: a
    /// peer's request into it is applied on a stream
    /// (`tcp/gpu_apply.rs`) instead of through `put` and `notify`.
    fn own_gpu(&self) -> Option<&Arc<crate::segments::LocalSegment>> {
        None
    }
    /// [`Self::put_notify_in_place`] of bytes in a buffer of the caller's
    /// own that `keep` owns (a pinned staging chunk): a transport that
    /// sends later may always send from it, internal traffic included.
    fn put_notify_lent(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
        keep: &crate::net::connection::Keep,
    ) -> Result<()> {
        self.put_notify_in_place(offset, src, len, notify, via, keep)
    }
}

/// A transport between hosts that a pair uses in place of TCP (see
/// `registry.rs`).
pub(crate) trait NetworkTransport: Send + Sync + std::fmt::Debug {
    /// Its name, as `GASPI_TRANSPORT` and the logs say it.
    fn name(&self) -> &'static str;
    /// What peers need to connect to this rank, packed by the transport.
    fn endpoint(&self) -> Result<Vec<u8>>;
    /// Connects to `peer`, which published `theirs`; the transport that
    /// then reaches the peer's segments.
    fn connect(self: Arc<Self>, me: Rank, peer: Rank, theirs: &[u8]) -> Result<Arc<dyn Transport>>;
    /// Registers a host segment this rank creates, its keys put in the
    /// segment's descriptor (GPU segments are left alone).
    fn register(&self, seg: &mut crate::segments::LocalSegment) -> Result<()>;
    /// Gives the transport the rank's peers, each queue's count of
    /// requests that complete later, and the transport for segments it
    /// cannot reach itself (TCP); starts what it runs in the background.
    fn bind(
        &self,
        peers: std::sync::Weak<crate::net::peers::Peers>,
        outstanding: Vec<Arc<outstanding::Outstanding>>,
        fallback: Arc<dyn Transport>,
    ) -> Result<()>;
    /// Makes progress once (reads completions); a waiting thread calls it
    /// for a moment before it sleeps.
    fn progress(&self) {}
    /// Whether threads that spin on a notification word should call
    /// [`Self::progress`] (a provider that applies peers' writes only
    /// while this process reads its completion queue).
    fn progress_in_waits(&self) -> bool {
        false
    }
    /// Whether a thread that saw a notification word set should call
    /// [`Self::progress`] once more before its wait returns: where some
    /// words are written by the peer's provider and others set by this
    /// rank from completion events, the events of earlier notifications
    /// may still wait in the queue when a later word shows (libfabric's
    /// compact CQ data, decision 0052).
    fn settle_in_waits(&self) -> bool {
        false
    }
    /// At shutdown, before the goodbyes: makes sure what this rank wrote
    /// has landed at its targets (a peer told of the end must not find a
    /// notification of a last barrier still on its way), for at most
    /// `bound`.
    fn flush(&self, bound: std::time::Duration) {
        let _ = bound;
    }
}
