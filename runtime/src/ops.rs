//! The GASPI calls: segments, one-sided communication, notifications,
//! queues, barrier. Every call checks all of its input before it sends or
//! writes anything; transports are reached only with valid arguments.

use crate::context::{Gaspi, Inner};
use crate::model::config::NotificationPlacement;
use crate::model::error::{Error, Result, Side};
use crate::model::ids::{Group, Memory, NotifyId, Queue, Rank, SegId, Timeout};
use crate::model::stats::{Counter, Op};
use crate::net::frame::Message;
use crate::protocol::PutRequest;
use crate::segments::{LocalSegment, Segment};
use crate::transport::tables::{check_notification, lookup_remote};
use crate::transport::{RemoteEnd, RemoteSegment};
use std::sync::Arc;

impl From<&Segment> for SegId {
    fn from(s: &Segment) -> SegId {
        s.id()
    }
}

impl Inner {
    pub(crate) fn check_queue(&self, queue: Queue) -> Result<&crate::queue::QueueState> {
        self.protocol
            .queues
            .get(queue.0 as usize)
            .filter(|q| q.created.load(std::sync::atomic::Ordering::Relaxed))
            .ok_or(Error::BadQueue {
                queue,
                count: self.base.config.queue_num,
            })
    }
}

impl Gaspi {
    // ----- segments -----

    fn check_free(&self, seg: SegId) -> Result<()> {
        self.inner.base.check_seg_id(seg)?;
        if self.inner.base.tables.load().local[seg.0 as usize].is_some() {
            return Err(Error::SegmentExists { seg });
        }
        Ok(())
    }

    /// Allocates a segment of `size` bytes on this rank, not yet registered
    /// with anybody. Its memory is zero.
    pub fn segment_alloc(&self, seg: SegId, size: u64, memory: Memory) -> Result<Segment> {
        let inner = &self.inner;
        self.check_free(seg)?;
        inner.base.check_segment_size(size)?;
        let s = match memory {
            Memory::Host => LocalSegment::alloc_host(
                seg,
                size,
                inner.base.config.notification_num,
                inner.base.config.effective_spin(),
            )?,
            Memory::Gpu(device) => {
                let s = LocalSegment::alloc_gpu(
                    seg,
                    size,
                    device,
                    inner.base.config.notification_num,
                    inner.base.config.effective_spin(),
                    inner.base.config.gpu_notifications,
                )?;
                tracing::info!(
                    "{seg} in the memory of GPU {device}; notification words {}",
                    inner.base.config.gpu_notifications
                );
                self.gpu_segment_setup(s, device)?
            }
        };
        self.install(s)
    }

    /// What every GPU segment of this rank gets before it is installed.
    fn gpu_segment_setup(&self, mut s: LocalSegment, device: u32) -> Result<LocalSegment> {
        let inner = &self.inner;
        // The first GPU segment's device carries this rank's copies
        // unless the config names another.
        let home = *inner
            .gpu
            .home
            .get_or_init(|| inner.base.config.gpu_device.unwrap_or(device));
        // CPU ranks' copies into it run in this process (see
        // gpu/owner_copy.rs): the inbox rides in the descriptor.
        if inner.base.config.gpu_owner_copies && inner.base.size > 1 {
            s.descriptor.inbox = Some(inner.gpu.owner_copies.owner_inbox(home)?);
        }
        Ok(s)
    }

    /// Makes device memory the user allocated (`cudaMalloc`, `cuMemAlloc`)
    /// a GPU segment of `size` bytes at `device_ptr`, not yet registered:
    /// the same as a segment of [`Memory::Gpu`] for peers and kernels, on
    /// the device the memory belongs to, except that its notification words
    /// are always host-mapped and the runtime never frees the memory.
    ///
    /// Fails with [`Error::Gpu`] and nothing changed when there is no CUDA
    /// driver, when `device_ptr` is not device memory of this process
    /// (host or managed memory: bind it with [`Gaspi::segment_bind`]), when
    /// `device_ptr + size` runs past its allocation, or when the driver
    /// cannot export the allocation (memory from `cudaMallocAsync` pools or
    /// `cuMemCreate` has no legacy IPC handle).
    ///
    /// # Safety
    /// The memory must stay allocated until the segment is deleted and
    /// every [`Segment`] handle to it is dropped: peers write into it at
    /// any time.
    pub unsafe fn segment_bind_gpu(
        &self,
        seg: SegId,
        device_ptr: u64,
        size: u64,
    ) -> Result<Segment> {
        self.check_free(seg)?;
        self.inner.base.check_segment_size(size)?;
        let config = &self.inner.base.config;
        // SAFETY: forwarded from this function's contract.
        let s = unsafe {
            LocalSegment::bind_gpu(
                seg,
                device_ptr,
                size,
                config.notification_num,
                config.effective_spin(),
            )?
        };
        let device = s.device().unwrap_or_default();
        tracing::info!(
            "{seg} bound to {size} bytes of user memory of GPU {device}; \
             notification words host-mapped"
        );
        let s = self.gpu_segment_setup(s, device)?;
        self.install(s)
    }

    /// Publishes a new local segment, unless its id was taken meanwhile.
    fn install(&self, mut s: LocalSegment) -> Result<Segment> {
        let inner = &self.inner;
        if let Some(work) = &inner.wait_work {
            s.notifications.set_spin_work(work.clone());
        }
        for t in &inner.network {
            t.register(&mut s)?;
        }
        let seg = s.id;
        // A rank reaches its own segments through the same path as a peer's.
        let me = inner.base.rank;
        let transport = inner
            .base
            .transport(me)?
            .cloned()
            .expect("a rank always reaches itself");
        let s = Arc::new(s);
        let own: Box<dyn RemoteSegment> = if s.is_gpu() {
            Box::new(crate::transport::cuda_ipc::OwnGpuSegment(s.clone()))
        } else {
            transport.attach(me, seg.0, &s.descriptor, &inner.gpu.home)?
        };
        inner.base.tables.update(|t| {
            if t.local(seg.0 as usize).is_some() {
                return Err(Error::SegmentExists { seg });
            }
            t.set_local(seg.0 as usize, Some(s.clone()));
            t.set_remote(me.0 as usize, seg.0 as usize, Some(own.into()));
            Ok(())
        })?;
        tracing::debug!("created {seg} of {} bytes", s.size);
        Ok(Segment { inner: s, rank: me })
    }

    /// Makes memory the user already has a segment (not yet registered).
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `size` bytes until the
    /// segment is deleted and every [`Segment`] handle to it is dropped, and
    /// must not be freed or reused meanwhile: peers write into it at any time.
    pub unsafe fn segment_bind(&self, seg: SegId, ptr: *mut u8, size: u64) -> Result<Segment> {
        self.check_free(seg)?;
        self.inner.base.check_segment_size(size)?;
        let config = &self.inner.base.config;
        // SAFETY: forwarded from this function's contract.
        let s = unsafe {
            LocalSegment::bind(
                seg,
                ptr,
                size,
                None,
                config.notification_num,
                config.effective_spin(),
            )?
        };
        self.install(s)
    }

    /// Makes a buffer the segment's memory; the runtime keeps it until the
    /// segment and every handle to it are gone. Safe form of `segment_bind`.
    pub fn segment_bind_buffer(&self, seg: SegId, mut buffer: Box<[u8]>) -> Result<Segment> {
        self.check_free(seg)?;
        let len = buffer.len() as u64;
        self.inner.base.check_segment_size(len)?;
        let config = &self.inner.base.config;
        let ptr = buffer.as_mut_ptr();
        // SAFETY: the heap buffer is moved into the segment, which keeps it
        // alive (and unmoved: a Box's heap allocation never moves) for as
        // long as the segment exists.
        let s = unsafe {
            LocalSegment::bind(
                seg,
                ptr,
                len,
                Some(buffer),
                config.notification_num,
                config.effective_spin(),
            )?
        };
        self.install(s)
    }

    /// Makes the segment `seg` of this rank reachable by `rank`.
    pub fn segment_register(&self, seg: SegId, rank: Rank, timeout: Timeout) -> Result<()> {
        let s = self.inner.base.local_segment(seg)?;
        self.inner.base.peers.check_rank(rank)?;
        self.register_with(&s, &[rank], timeout)
    }

    fn register_with(&self, s: &LocalSegment, ranks: &[Rank], timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        for &r in ranks {
            if r == self.inner.base.rank {
                continue;
            }
            let desc = s.descriptor.clone();
            let seg = s.id.0;
            self.inner.base.peers.request(
                r,
                move |token| Message::Register {
                    token,
                    seg,
                    desc: Box::new(desc),
                },
                deadline,
                "segment_register",
            )?;
            s.note_known_by(r);
        }
        Ok(())
    }

    /// Allocates a segment, registers it with every member of `group` and
    /// waits at a barrier of the group, so that on return every member can
    /// write into every member's segment `seg`.
    pub fn segment_create(
        &self,
        seg: SegId,
        size: u64,
        memory: Memory,
        group: Group,
        timeout: Timeout,
    ) -> Result<Segment> {
        let members = self
            .inner
            .groups
            .with_committed(group, self.inner.base.rank, |g| g.members.clone())?;
        let s = self.segment_alloc(seg, size, memory)?;
        self.register_and_barrier(s, &members, group, timeout)
    }

    /// `segment_bind_buffer` plus registration with `group` and a barrier
    /// (GASPI's `segment_use`).
    pub fn segment_use(
        &self,
        seg: SegId,
        buffer: Box<[u8]>,
        group: Group,
        timeout: Timeout,
    ) -> Result<Segment> {
        let members = self
            .inner
            .groups
            .with_committed(group, self.inner.base.rank, |g| g.members.clone())?;
        let s = self.segment_bind_buffer(seg, buffer)?;
        self.register_and_barrier(s, &members, group, timeout)
    }

    fn register_and_barrier(
        &self,
        s: Segment,
        members: &[Rank],
        group: Group,
        timeout: Timeout,
    ) -> Result<Segment> {
        let done = self
            .register_with(&s.inner, members, timeout)
            .and_then(|_| self.barrier(group, timeout));
        match done {
            Ok(()) => Ok(s),
            Err(e) => {
                // Leave nothing half-made behind, without waiting: the
                // deadline has passed, or a peer failed. The peers forget
                // the segment when they read the message; a peer that
                // mapped it meanwhile keeps a mapping of memory that stays
                // valid until the last mapping goes, so nothing unsafe can
                // happen in between, and a later create of the same id
                // reaches each peer after this message, on the same
                // connection.
                self.discard(s.id());
                Err(e)
            }
        }
    }

    /// Deletes segment `seg` of this rank. Returns once every live peer has
    /// forgotten it, so after a following barrier no peer can reach it any
    /// more. The memory is freed once the last handle to it is dropped.
    ///
    /// Like GASPI's `gaspi_segment_delete` it takes no timeout: a peer that
    /// is stopped holds it until the peer runs again or is found dead.
    pub fn segment_delete(&self, seg: SegId) -> Result<()> {
        let inner = &self.inner;
        self.remove_local(seg)?;
        for r in 0..inner.base.size {
            // Only peers this rank is connected to can have been told of it.
            if r != inner.base.rank.0
                && inner.base.peers.connected(Rank(r))
                && inner.base.peers.peer_ok(Rank(r)).is_ok()
            {
                let seg = seg.0;
                let forgotten = inner.base.peers.request(
                    Rank(r),
                    move |token| Message::Unregister { token, seg },
                    None,
                    "segment_delete",
                );
                // A peer that died or left meanwhile cannot reach it anyway.
                match forgotten {
                    Ok(_) | Err(Error::PeerDead { .. } | Error::PeerTerminated { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// Takes `seg` out of this rank's tables (the first step of a delete).
    fn remove_local(&self, seg: SegId) -> Result<()> {
        let inner = &self.inner;
        inner.base.check_seg_id(seg)?;
        let removed = inner.base.tables.update(|t| {
            t.set_remote(inner.base.rank.0 as usize, seg.0 as usize, None);
            t.set_local(seg.0 as usize, None)
        });
        if removed.is_none() {
            return Err(Error::UnknownSegment {
                rank: inner.base.rank,
                seg,
            });
        }
        Ok(())
    }

    /// Deletes `seg` here and tells every live peer to forget it, without
    /// waiting for their answers: the clean-up of a create that failed,
    /// which must return within the caller's timeout whatever the peers do.
    fn discard(&self, seg: SegId) {
        let inner = &self.inner;
        if self.remove_local(seg).is_err() {
            return;
        }
        // Only peers this rank is connected to can have been told of it.
        for r in (0..inner.base.size)
            .filter(|&r| r != inner.base.rank.0 && inner.base.peers.connected(Rank(r)))
        {
            // Token 0 is never awaited: the answer is dropped on arrival.
            let forget = Message::Unregister {
                token: 0,
                seg: seg.0,
            };
            let _ = inner.base.peers.send(Rank(r), &forget);
        }
    }

    /// A handle to segment `seg` of this rank.
    pub fn segment(&self, seg: SegId) -> Result<Segment> {
        Ok(Segment {
            inner: self.inner.base.local_segment(seg)?,
            rank: self.inner.base.rank,
        })
    }

    /// Start of segment `seg`'s memory.
    pub fn segment_ptr(&self, seg: SegId) -> Result<*mut u8> {
        Ok(self.inner.base.local_segment(seg)?.data())
    }

    /// Size of segment `seg` in bytes.
    pub fn segment_size(&self, seg: SegId) -> Result<u64> {
        Ok(self.inner.base.local_segment(seg)?.size as u64)
    }

    /// Size in bytes of segment `seg` of `rank` (this rank's own, or a
    /// peer's that it registered with this rank or created in a group with
    /// it); [`Error::UnknownSegment`] while this rank does not know it.
    pub fn segment_size_of(&self, rank: Rank, seg: SegId) -> Result<u64> {
        self.inner.base.peers.check_rank(rank)?;
        if rank == self.inner.base.rank {
            return self.segment_size(seg);
        }
        self.inner.base.check_seg_id(seg)?;
        self.inner.base.tables.load().remote[rank.0 as usize][seg.0 as usize]
            .as_ref()
            .map(|r| r.size)
            .ok_or(Error::UnknownSegment { rank, seg })
    }

    /// Where the notification words of local segment `seg` live: in GPU
    /// memory for a GPU segment made under
    /// [`NotificationPlacement::Device`], also mapped into this process
    /// under [`NotificationPlacement::Gdrcopy`] (where gdrcopy is missing
    /// such a segment falls back and this says `HostMapped`), else in host
    /// memory (which kernels reach mapped, across PCIe).
    ///
    /// ```
    /// use gaspi::{Config, Gaspi, Memory, NotificationPlacement, SegId};
    /// let g = Gaspi::init(Config::default())?;
    /// g.segment_alloc(SegId(0), 4096, Memory::Host)?;
    /// assert_eq!(
    ///     g.segment_notification_placement(SegId(0))?,
    ///     NotificationPlacement::HostMapped
    /// );
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn segment_notification_placement(&self, seg: SegId) -> Result<NotificationPlacement> {
        Ok(match &self.inner.base.local_segment(seg)?.device_words {
            Some(words) if words.is_mapped() => NotificationPlacement::Gdrcopy,
            Some(_) => NotificationPlacement::Device,
            None => NotificationPlacement::HostMapped,
        })
    }

    /// Ids of this rank's segments, ascending.
    pub fn segment_list(&self) -> Vec<SegId> {
        self.inner
            .base
            .tables
            .load()
            .local
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| SegId(i as u8))
            .collect()
    }

    // ----- one-sided communication -----

    /// Posts a write of `size` bytes from `local_seg` at `local_offset` to
    /// `remote_seg` of `rank` at `remote_offset`, on `queue`.
    ///
    /// `size` may be 0 (as in GPI-2): every other argument is checked as
    /// for any size, the request counts on the queue, and nothing moves.
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    #[inline]
    pub fn write(
        &self,
        local_seg: impl Into<SegId>,
        local_offset: u64,
        rank: Rank,
        remote_seg: SegId,
        remote_offset: u64,
        size: u64,
        queue: Queue,
    ) -> Result<()> {
        self.put(PutRequest {
            local_seg: local_seg.into(),
            local_offset,
            rank,
            remote_seg,
            remote_offset,
            size,
            notify: None,
            queue,
        })
    }

    /// Posts a write and then a notification of `value` at `notification` of
    /// the same remote segment. The notification is never visible before
    /// the data. With `size` 0 only the notification is sent (in the order
    /// of `notify`).
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    #[inline]
    pub fn write_notify(
        &self,
        local_seg: impl Into<SegId>,
        local_offset: u64,
        rank: Rank,
        remote_seg: SegId,
        remote_offset: u64,
        size: u64,
        notification: NotifyId,
        value: u32,
        queue: Queue,
    ) -> Result<()> {
        self.put(PutRequest {
            local_seg: local_seg.into(),
            local_offset,
            rank,
            remote_seg,
            remote_offset,
            size,
            notify: Some((notification, value)),
            queue,
        })
    }

    /// `write` and `write_notify`: the short path inlined into the caller,
    /// everything else out of line.
    #[inline(always)]
    fn put(&self, req: PutRequest) -> Result<()> {
        if self.inner.protocol.put_short(req) {
            return Ok(());
        }
        self.put_general(&req)
    }

    /// `put` when the short path does not take the request: routes it by
    /// transport, or reports what is wrong with it. Cold and by reference,
    /// so the inlined callers keep the request in registers on their way
    /// to the short path (A/B, 30 alternating launches of 4 KiB write-bw:
    /// within 1% of the eight-argument form).
    #[cold]
    #[inline(never)]
    fn put_general(&self, req: &PutRequest) -> Result<()> {
        let (rank, remote_seg, size, notify) = (req.rank, req.remote_seg, req.size, req.notify);
        let inner = &*self.inner;
        let q = inner.check_queue(req.queue)?;
        inner.base.check_transfer_size(size)?;
        inner.base.check_peer(rank)?;
        inner.base.with_local(req.local_seg, |local, tables| {
            local.check(Side::Local, inner.base.rank, req.local_offset, size)?;
            let max = inner.base.config.segment_max;
            let r = lookup_remote(tables, rank, remote_seg, req.remote_offset, size, max)?;
            if let Some((id, value)) = notify {
                check_notification(r, rank, remote_seg, id, value)?;
            }
            // One request, its notification part of it (decision 0030).
            let entries = 1;
            q.reserve(req.queue, entries, inner.base.config.queue_size_max)?;
            let notify = notify.map(|(id, value)| (id.0, value));
            let to = RemoteEnd {
                rank,
                seg: remote_seg,
                segment: r,
                offset: req.remote_offset,
            };
            let sent = match notify {
                _ if size > 0 => {
                    inner
                        .protocol
                        .put_routed(q, local, req.local_offset, to, size, notify)
                }
                // Size 0: no data; the notification alone, in order.
                Some((id, value)) => inner.protocol.notify_routed(q, to, id, value),
                None => Ok(()),
            };
            if let Err(e) = sent {
                q.unreserve(entries);
                return Err(e);
            }
            q.touch(rank);
            let op = if notify.is_some() {
                Op::WriteNotify
            } else {
                Op::Write
            };
            inner.base.stats.call(op, Counter::BytesWritten, size);
            Ok(())
        })
    }

    /// Posts a read of `size` bytes from `remote_seg` of `rank` at
    /// `remote_offset` into `local_seg` at `local_offset`, on `queue`;
    /// `size` may be 0 (checked, nothing moves), as for [`Gaspi::write`].
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    pub fn read(
        &self,
        local_seg: impl Into<SegId>,
        local_offset: u64,
        rank: Rank,
        remote_seg: SegId,
        remote_offset: u64,
        size: u64,
        queue: Queue,
    ) -> Result<()> {
        let inner = &*self.inner;
        let local_seg = local_seg.into();
        let q = inner.check_queue(queue)?;
        inner.base.check_transfer_size(size)?;
        inner.base.check_peer(rank)?;
        inner.base.with_local(local_seg, |local, tables| {
            local.check(Side::Local, inner.base.rank, local_offset, size)?;
            let max = inner.base.config.segment_max;
            let r = lookup_remote(tables, rank, remote_seg, remote_offset, size, max)?;
            q.reserve(queue, 1, inner.base.config.queue_size_max)?;
            let from = RemoteEnd {
                rank,
                seg: remote_seg,
                segment: r,
                offset: remote_offset,
            };
            // Size 0 (allowed, as in GPI-2): nothing to move.
            let got = match size {
                0 => Ok(()),
                _ => inner
                    .protocol
                    .get_routed(q, local, local_offset, from, size),
            };
            if let Err(e) = got {
                q.unreserve(1);
                return Err(e);
            }
            q.touch(rank);
            inner.base.stats.call(Op::Read, Counter::BytesRead, size);
            Ok(())
        })
    }

    /// Posts a notification of `value` at `notification` of `remote_seg` of
    /// `rank`. It does not overtake writes posted before it on the same
    /// queue to the same rank.
    #[inline]
    pub fn notify(
        &self,
        rank: Rank,
        remote_seg: SegId,
        notification: NotifyId,
        value: u32,
        queue: Queue,
    ) -> Result<()> {
        if self
            .inner
            .protocol
            .notify_short(rank, remote_seg, notification, value, queue)
        {
            return Ok(());
        }
        self.notify_general(rank, remote_seg, notification, value, queue)
    }

    /// `notify` when the short path does not take it.
    #[inline(never)]
    fn notify_general(
        &self,
        rank: Rank,
        remote_seg: SegId,
        notification: NotifyId,
        value: u32,
        queue: Queue,
    ) -> Result<()> {
        let inner = &*self.inner;
        let q = inner.check_queue(queue)?;
        inner.base.check_peer(rank)?;
        let tables = inner.base.tables.load();
        let r = lookup_remote(
            &tables,
            rank,
            remote_seg,
            0,
            0,
            inner.base.config.segment_max,
        )?;
        check_notification(r, rank, remote_seg, notification, value)?;
        q.reserve(queue, 1, inner.base.config.queue_size_max)?;
        let to = RemoteEnd {
            rank,
            seg: remote_seg,
            segment: r,
            offset: 0,
        };
        let sent = inner.protocol.notify_routed(q, to, notification.0, value);
        if let Err(e) = sent {
            q.unreserve(1);
            return Err(e);
        }
        q.touch(rank);
        inner.base.stats.call(Op::Notify, Counter::None, 0);
        Ok(())
    }

    /// Waits until every request posted on `queue` is complete locally; fails
    /// naming a rank that died while it had requests on the queue.
    pub fn wait(&self, queue: Queue, timeout: Timeout) -> Result<()> {
        let q = self.inner.check_queue(queue)?;
        self.inner.base.stats.call(Op::Wait, Counter::None, 0);
        // Copies on the queue's CUDA stream complete here.
        self.inner.gpu.gpu_wait(&q.gpu, timeout.deadline())?;
        // Requests of transports that complete later (TCP): wait for their
        // targets' answers; a target gone with requests unanswered fails
        // the wait at once, naming it.
        // A TCP target's answers: read its connection here for the spin
        // budget before sleeping (`waiter_progress.rs`).
        // RDMA and libfabric requests complete when their completion queue
        // is read: read them here too, for the same spin budget as a wait
        // on a notification word, before sleeping on the completion
        // thread (which may look only every few hundred microseconds, and
        // whose wake-up costs as much as the completion itself).
        let network = || {
            for v in &self.inner.network {
                v.progress();
            }
        };
        if q.outstanding.is_busy() {
            let spin = self.inner.base.config.effective_spin();
            let start = std::time::Instant::now();
            self.inner
                .waiter_progress
                .spin_while(spin, timeout.deadline(), || {
                    network();
                    q.outstanding.is_busy()
                });
            // With no TCP peer to read, spin_while returns at once.
            let until = timeout
                .deadline()
                .map_or(start + spin, |d| d.min(start + spin));
            while !self.inner.network.is_empty()
                && q.outstanding.is_busy()
                && std::time::Instant::now() < until
            {
                network();
                std::hint::spin_loop();
            }
        }
        if timeout == Timeout::Test && q.outstanding.is_busy() {
            // A test makes progress too (the spin above has no time left).
            network();
        }
        q.outstanding
            .wait(timeout.deadline(), |r| {
                self.inner.base.peers.peer_ok(r).err()
            })
            .inspect_err(|e| {
                // Polled with GASPI_TEST in a loop: let a peer that shares
                // this core run (as a test on notification words does).
                if matches!(e, Error::Timeout { .. }) {
                    std::thread::yield_now();
                }
            })?;
        // Shared-memory requests complete when posted; what is left is to
        // report targets that died meanwhile. A target that terminated in
        // order had received them: that is no error.
        for r in q.drain() {
            if let Err(e @ Error::PeerDead { .. }) = self.inner.base.peers.peer_ok(r) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Requests posted on `queue` since its last `wait`.
    pub fn queue_size(&self, queue: Queue) -> Result<u32> {
        Ok(self.inner.check_queue(queue)?.size())
    }

    /// Number of queues in use.
    pub fn queue_num(&self) -> u32 {
        self.inner
            .protocol
            .queues
            .iter()
            .filter(|q| q.created.load(std::sync::atomic::Ordering::Relaxed))
            .count() as u32
    }

    // ----- notifications -----

    /// Waits until one of notifications `begin..begin+num` of local segment
    /// `seg` is non-zero and returns the first such id.
    pub fn notify_waitsome(
        &self,
        seg: SegId,
        begin: NotifyId,
        num: u32,
        timeout: Timeout,
    ) -> Result<NotifyId> {
        let out_of_range = |count| Error::NotifyIdOutOfRange {
            rank: self.inner.base.rank,
            seg,
            id: begin,
            num,
            count,
        };
        let stats = &self.inner.base.stats;
        // The whole call runs on one table snapshot: it keeps the segment
        // alive while we wait (a concurrent delete only unpublishes it)
        // without touching a reference count on the way back.
        self.inner.base.with_local(seg, |s, _| {
            let area = &s.notifications;
            area.check_range(begin.0, num)
                .map_err(|_| out_of_range(area.count()))?;
            stats.call(Op::NotifyWaitsome, Counter::None, 0);
            let (found, waited) = match &s.device_words {
                Some(words) => {
                    if let Some(id) = words.scan(begin.0, num)? {
                        return Ok(NotifyId(id));
                    }
                    let t = std::time::Instant::now();
                    (words.wait(begin.0, num, timeout.deadline())?, t.elapsed())
                }
                // No clock read of our own on the way back: the wait's
                // readings account for the time (see wait_until_timed).
                None => area
                    .waitsome_timed(begin.0, num, timeout.deadline())
                    .map_err(|_| out_of_range(area.count()))?,
            };
            if !waited.is_zero() {
                stats.waited(waited);
            }
            match found {
                Some(id) => Ok(NotifyId(id)),
                None => Err(Error::Timeout {
                    op: "notify_waitsome",
                    peer: None,
                }),
            }
        })
    }

    /// Atomically reads and clears notification `id` of local segment `seg`;
    /// returns the value it had (0 if it was not set).
    pub fn notify_reset(&self, seg: SegId, id: NotifyId) -> Result<u32> {
        self.inner.base.with_local(seg, |s, _| {
            let out_of_range = || Error::NotifyIdOutOfRange {
                rank: self.inner.base.rank,
                seg,
                id,
                num: 1,
                count: s.notifications.count(),
            };
            match &s.device_words {
                Some(words) => {
                    s.notifications
                        .check_range(id.0, 1)
                        .map_err(|_| out_of_range())?;
                    words.reset(id.0)
                }
                None => s.notifications.reset(id.0).map_err(|_| out_of_range()),
            }
        })
    }

    // ----- GPU kernels -----

    /// What kernels on GPU `device` need to wait for notifications and send
    /// with `write_notify` themselves (`gaspi_device.cuh`), with a request
    /// ring of 1024 slots; see [`DeviceContext`](crate::gpu::DeviceContext).
    pub fn device_context(&self, device: u32) -> Result<crate::gpu::DeviceContext> {
        self.inner
            .gpu
            .device_context(device, crate::gpu::DeviceContextOptions::default())
    }

    /// [`Gaspi::device_context`] with explicit options.
    pub fn device_context_with(
        &self,
        device: u32,
        options: crate::gpu::DeviceContextOptions,
    ) -> Result<crate::gpu::DeviceContext> {
        self.inner.gpu.device_context(device, options)
    }

    // ----- collectives -----

    /// Waits until every member of `group` has called `barrier`. After a
    /// `Timeout`, calling it again resumes the same barrier.
    pub fn barrier(&self, group: Group, timeout: Timeout) -> Result<()> {
        let stats = &self.inner.base.stats;
        stats.call(Op::Barrier, Counter::None, 0);
        let t = std::time::Instant::now();
        let r = crate::collectives::barrier::barrier(
            &self.inner.base,
            &self.inner.groups,
            group,
            timeout,
        );
        stats.waited(t.elapsed());
        r
    }
}
