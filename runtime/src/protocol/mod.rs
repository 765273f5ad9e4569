//! Protocols: the one place that turns a checked call into a path.
//!
//! The calls (`ops.rs`, `lists.rs`, `atomics.rs`, the GPU path) check
//! their input and then hand the request here, where it is matched with
//! what the target's transport offers
//! ([`Capabilities`](crate::transport::Capabilities)) and what the queue
//! has in flight, as UCX's protocol layer picks among its transports'
//! short, buffered and zero-copy operations:
//! - short (`put_short`, `notify_short`, inlined into the call: a copy and
//!   a store into host memory mapped here, no virtual call, no `Arc`
//!   clone; the tables are peeked, not loaded);
//! - routed (`put_routed`, `notify_routed`, `get_routed`): the owner runs
//!   the copy into its GPU segment (`owner_route` decides,
//!   `gpu/owner_copy.rs` runs it), the queue's GPU stream, the assisted
//!   copy of a large write (`protocol/assisted_copy.rs`), or the
//!   transport's own `put` and `notify`;
//! - network (`put_network`): a transport whose requests complete later
//!   sends from where the bytes lie when it would rather
//!   (`Capabilities::in_place_from`), else copies them.
//!
//! [`lookup_remote`] and [`check_notification`] are the checks of a
//! remote end that every path shares.

pub(crate) mod assisted_copy;

use crate::base::Base;
use crate::gpu::Gpu;
use crate::model::bounds::fits;
use crate::model::error::Result;
use crate::model::ids::{NotifyId, Queue, Rank, SegId};
use crate::model::stats::{Counter, Op};
use crate::queue::QueueState;
use crate::segments::LocalSegment;
use crate::transport::tables::{RemoteEntry, Tables};
use crate::transport::{HostDirect, RemoteEnd, RemoteSegment, Via};
use std::sync::Arc;

/// The protocol layer of a rank: what it needs to choose a path and run
/// it (the base, the GPU path, the queues a request is posted on, the
/// smallest write copied with the target's help).
#[derive(Debug)]
pub(crate) struct Protocol {
    pub base: Arc<Base>,
    pub gpu: Arc<Gpu>,
    /// The communication queues (`queue.rs`).
    pub queues: Vec<QueueState>,
    /// Smallest same-host write copied with the target's help
    /// (`Config::effective_copy_assist_min`; `u64::MAX`: none).
    pub copy_assist_min: u64,
}

impl Protocol {
    /// Moves checked data (then sets a notification) on the path its ends
    /// and the queue call for:
    /// - host memory into a same-host peer's GPU segment: the owner runs
    ///   the copy (`gpu/owner_copy.rs`), unless the queue's own stream has
    ///   work in flight that the owner's copy must not overtake;
    /// - either end in GPU memory, or GPU work in flight on the queue
    ///   (which a CPU copy or store must not overtake): the queue's stream;
    /// - host memory at both ends, mapped here: a copy (checked first, it
    ///   is the common case), shared with the target when it is large and
    ///   the target waits for it (`protocol/assisted_copy.rs`);
    /// - else a copy through the transport.
    pub(crate) fn put_routed(
        &self,
        q: &QueueState,
        local: &LocalSegment,
        local_offset: u64,
        to: RemoteEnd<'_>,
        size: u64,
        notify: Option<(u32, u32)>,
    ) -> Result<()> {
        let r = to.segment;
        if let Some(direct) = host_direct(q, local, r) {
            if size >= self.copy_assist_min {
                if let Some(done) = assisted_copy::put_assisted(
                    &self.base,
                    local,
                    local_offset,
                    to,
                    direct,
                    size,
                    notify,
                ) {
                    return done;
                }
            }
            // SAFETY: the caller checked local_offset + size against the
            // local segment and to.offset + size against the remote one,
            // whose mapping lives as long as `r`.
            let src = unsafe { local.data().add(local_offset as usize) };
            // SAFETY: as just said.
            return unsafe { direct.put(src, to.offset, size as usize, notify) }
                .map_err(crate::model::error::notify_error);
        }
        if r.capabilities().completes_later() {
            return self.put_network(q, local, local_offset, to, size, notify);
        }
        if let Some(inbox) = self.owner_route(q, local, to) {
            return self.gpu.owner_copies.owner_put(
                &q.gpu,
                to.rank,
                inbox,
                local.id,
                local_offset,
                to.seg,
                to.offset,
                size,
                notify,
            );
        }
        // A notification must not overtake copies the owner still runs.
        let (notify, after) = match notify {
            Some(n) if q.gpu.owner_pending_to(to.rank) => (None, Some(n)),
            n => (n, None),
        };
        if local.is_gpu() || r.capabilities().gpu || q.gpu.pending() {
            self.gpu
                .gpu_put(&q.gpu, local, local_offset, r, to.offset, size, notify)?;
        } else {
            // SAFETY: local_offset + size was checked against the local
            // segment, which the caller's table snapshot keeps alive.
            let src = unsafe { local.data().add(local_offset as usize) };
            r.put(to.offset, src, size as usize, Via::queue(q.posted()))?;
            if let Some((id, value)) = notify {
                r.notify(id, value, Via::queue(q.posted()))?;
            }
        }
        match after {
            Some((id, value)) => self
                .gpu
                .owner_copies
                .owner_notify(&q.gpu, to.rank, None, to.seg, id, value),
            None => Ok(()),
        }
    }

    /// The owner's inbox when a transfer between `local` and the remote
    /// end should be run by the owner: the remote segment is a same-host
    /// peer's GPU segment with an inbox, `local` is host shared memory
    /// registered with (so mapped by) that peer, the config allows it, and
    /// the queue's own stream has no work in flight that the owner's copy
    /// could overtake.
    pub(crate) fn owner_route<'a>(
        &self,
        q: &QueueState,
        local: &LocalSegment,
        end: RemoteEnd<'a>,
    ) -> Option<&'a gaspi_segments::MemoryDescriptor> {
        let r = end.segment;
        if !r.capabilities().gpu || local.is_gpu() || q.gpu.pending() || end.rank == self.base.rank
        {
            return None;
        }
        let inbox = r.owner_inbox()?;
        (self.base.config.gpu_owner_copies && local.is_shared_memory() && local.known_by(end.rank))
            .then_some(inbox)
    }

    /// A put to a segment reached over the network: the transport sends
    /// the bytes (through pinned chunks, pipelined, when they are in GPU
    /// memory; from
    /// where they lie when it would rather, `Capabilities::in_place_from`)
    /// and orders the notification after them. Requests to other targets
    /// on the same queue need no order with it.
    fn put_network(
        &self,
        q: &QueueState,
        local: &LocalSegment,
        local_offset: u64,
        to: RemoteEnd<'_>,
        size: u64,
        notify: Option<(u32, u32)>,
    ) -> Result<()> {
        let r = to.segment;
        if local.is_gpu() {
            // Through pinned chunks, copied out while earlier ones are on
            // the wire (`gpu/network_staging.rs`).
            return self.gpu.network_staging.put(
                local,
                local_offset,
                r,
                to.offset,
                size,
                notify,
                Via::queue(q.posted()),
            );
        }
        // SAFETY: local_offset + size was checked against the local
        // segment, which the caller's table snapshot keeps alive.
        let src = unsafe { local.data().add(local_offset as usize) };
        // Sent from the segment, which stays mapped (the Arc) until the
        // transport is done with it, where the transport would rather:
        // GASPI's caller leaves a write's source as it is until `wait`.
        // The segment must be the very one of the caller's snapshot, not
        // one made since.
        let keep = r
            .capabilities()
            .in_place_from
            .filter(|&min| size >= min)
            .and_then(|_| self.base.tables.load().local[local.id.0 as usize].clone())
            .filter(|seg| std::ptr::eq(&**seg, local));
        match keep {
            Some(seg) => {
                let keep: crate::net::connection::Keep = seg;
                r.put_notify_in_place(
                    to.offset,
                    src,
                    size as usize,
                    notify,
                    Via::queue(q.posted()),
                    &keep,
                )
            }
            None => r.put_notify(
                to.offset,
                src,
                size as usize,
                notify,
                Via::queue(q.posted()),
            ),
        }
    }

    /// Sets a checked notification: through the owner's inbox when the
    /// owner still runs copies of this queue, in stream order when the
    /// queue has GPU work in flight, else with a store through the transport.
    pub(crate) fn notify_routed(
        &self,
        q: &QueueState,
        to: RemoteEnd<'_>,
        id: u32,
        value: u32,
    ) -> Result<()> {
        if let Some(direct) = q.gpu.idle().then(|| to.segment.host_direct()).flatten() {
            return direct
                .notifications
                .set(id, value)
                .map_err(crate::model::error::notify_error);
        }
        if to.segment.capabilities().completes_later() {
            return to.segment.notify(id, value, Via::queue(q.posted()));
        }
        if q.gpu.owner_pending_to(to.rank) {
            self.gpu
                .owner_copies
                .owner_notify(&q.gpu, to.rank, None, to.seg, id, value)
        } else if q.gpu.pending() {
            self.gpu.gpu_notify(&q.gpu, to.segment, id, value)
        } else if to.segment.capabilities().words_in_gpu_memory {
            // No CPU store reaches the word: the owner's inbox thread or
            // this rank's queue stream writes it.
            match to.segment.owner_inbox() {
                Some(inbox) if self.base.config.gpu_owner_copies && to.rank != self.base.rank => {
                    self.gpu.owner_copies.owner_notify(
                        &q.gpu,
                        to.rank,
                        Some(inbox),
                        to.seg,
                        id,
                        value,
                    )
                }
                _ => self.gpu.gpu_notify(&q.gpu, to.segment, id, value),
            }
        } else {
            to.segment.notify(id, value, Via::queue(q.posted()))
        }
    }

    /// Reads checked data on the path its ends and the queue call for (as
    /// `put_routed`); the data is in place when it returns.
    pub(crate) fn get_routed(
        &self,
        q: &QueueState,
        local: &LocalSegment,
        local_offset: u64,
        from: RemoteEnd<'_>,
        size: u64,
    ) -> Result<()> {
        let r = from.segment;
        if r.capabilities().completes_later() {
            // The data lands after the call (copied in by the progress
            // engine, into GPU memory too): the transport keeps the local
            // segment alive until then.
            let into = self.base.local_segment(local.id)?;
            return r.post_get(
                from.offset,
                &into,
                local_offset,
                size as usize,
                Via::queue(q.posted()),
            );
        }
        if let Some(inbox) = self.owner_route(q, local, from) {
            return self.gpu.owner_copies.owner_get(
                &q.gpu,
                from.rank,
                inbox,
                local.id,
                local_offset,
                from.seg,
                from.offset,
                size,
            );
        }
        if local.is_gpu() || r.capabilities().gpu || q.gpu.pending() {
            return self
                .gpu
                .gpu_get(&q.gpu, local, local_offset, r, from.offset, size);
        }
        // SAFETY: local_offset + size was checked against the local segment.
        let dst = unsafe { local.data().add(local_offset as usize) };
        r.get(from.offset, dst, size as usize)
    }
}

/// One `write` or `write_notify` as the caller gave it, unchecked. `Copy`:
/// the inlined short path keeps its fields in registers, and the
/// out-of-line general path takes it in one piece.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PutRequest {
    pub local_seg: SegId,
    pub local_offset: u64,
    pub rank: Rank,
    pub remote_seg: SegId,
    pub remote_offset: u64,
    pub size: u64,
    /// The notification id and value of a `write_notify`.
    pub notify: Option<(NotifyId, u32)>,
    pub queue: Queue,
}

impl Protocol {
    /// The short path of a request (UCX's "short" protocol): the target is
    /// host memory this process maps, and the queue has no GPU work in
    /// flight that the request must follow. Everything here is inlined
    /// into the caller: no call but the copy, no virtual call, no closure
    /// environment on the stack, and no store but the request's own bytes
    /// and counters (see `transport/tables.rs` for why stores and loads
    /// after a copy matter). Its checks only choose between the paths: any
    /// `false` comes before anything changed, and the general path then
    /// runs the same request again, routes what is not short and reports
    /// with a typed error what is wrong.
    ///
    /// # Safety
    /// The caller must not load the segment tables (nor call anything that
    /// does) while it uses the returned tables and entries (see
    /// [`crate::transport::tables::SegmentTables::peek`]).
    #[inline(always)]
    unsafe fn short_target(
        &self,
        queue: Queue,
        rank: Rank,
        remote_seg: SegId,
    ) -> Option<(&QueueState, &Tables, &RemoteEntry, HostDirect<'_>)> {
        let q = self.queues.get(queue.0 as usize)?;
        if !q.created.load(std::sync::atomic::Ordering::Relaxed)
            || !q.gpu.idle()
            || remote_seg.0 as u32 >= self.base.config.segment_max
            || !self.base.peers.peer_healthy(rank)
        {
            return None;
        }
        // SAFETY: the caller's contract.
        let tables = unsafe { self.base.tables.peek() }?;
        let remote = tables
            .remote
            .get(rank.0 as usize)?
            .get(remote_seg.0 as usize)?
            .as_ref()?;
        let direct = remote.host()?;
        Some((q, tables, remote, direct))
    }

    /// `write` / `write_notify` on the short path (see [`Self::short_target`]).
    #[inline(always)]
    pub(crate) fn put_short(&self, req: PutRequest) -> bool {
        let PutRequest {
            local_seg,
            local_offset,
            rank,
            remote_seg,
            remote_offset,
            size,
            notify,
            queue,
        } = req;
        if size == 0 || size > self.base.config.transfer_size_max || size >= self.copy_assist_min {
            return false;
        }
        // SAFETY: nothing below loads the tables: the checks, the copy, a
        // notification store and counters.
        let Some((q, tables, remote, direct)) =
            (unsafe { self.short_target(queue, rank, remote_seg) })
        else {
            return false;
        };
        let Some(Some(local)) = tables.local.get(local_seg.0 as usize) else {
            return false;
        };
        if local.is_gpu()
            || !fits(local_offset, size, local.size as u64)
            || !fits(remote_offset, size, remote.size)
            || notify.is_some_and(|(id, v)| id.0 >= remote.notification_count || v == 0)
        {
            return false;
        }
        // One request, its notification part of it (decision 0030).
        let entries = 1;
        if !q.try_reserve(entries, self.base.config.queue_size_max) {
            return false;
        }
        // SAFETY: both ranges were checked just above against the segments,
        // which the table snapshot keeps alive and mapped here (host memory
        // at both ends).
        let stored = unsafe {
            direct.put(
                local.data().add(local_offset as usize),
                remote_offset,
                size as usize,
                notify.map(|(id, value)| (id.0, value)),
            )
        };
        debug_assert!(stored.is_ok(), "id and value checked above");
        let op = if notify.is_some() {
            Op::WriteNotify
        } else {
            Op::Write
        };
        q.touch(rank);
        self.base.stats.call(op, Counter::BytesWritten, size);
        true
    }

    /// `notify` on the short path (see [`Self::short_target`]).
    #[inline(always)]
    pub(crate) fn notify_short(
        &self,
        rank: Rank,
        remote_seg: SegId,
        id: NotifyId,
        value: u32,
        queue: Queue,
    ) -> bool {
        // SAFETY: nothing below loads the tables: checks, one store, counters.
        let Some((q, _, remote, direct)) = (unsafe { self.short_target(queue, rank, remote_seg) })
        else {
            return false;
        };
        if id.0 >= remote.notification_count
            || value == 0
            || !q.try_reserve(1, self.base.config.queue_size_max)
        {
            return false;
        }
        let stored = direct.notifications.set(id.0, value);
        debug_assert!(stored.is_ok(), "checked above");
        q.touch(rank);
        self.base.stats.call(Op::Notify, Counter::None, 0);
        true
    }
}

/// The short path of a put: both ends host memory that this process maps,
/// and no GPU work of the queue in flight that a notification must follow.
#[inline]
fn host_direct<'a>(
    q: &QueueState,
    local: &LocalSegment,
    r: &'a dyn RemoteSegment,
) -> Option<crate::transport::HostDirect<'a>> {
    if local.is_gpu() || !q.gpu.idle() {
        return None;
    }
    r.host_direct()
}
