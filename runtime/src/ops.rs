//! The GASPI calls: segments, one-sided communication, notifications,
//! queues, barrier. Every call checks all of its input before it sends or
//! writes anything; transports are reached only with valid arguments.

use crate::context::{Gaspi, Inner};
use crate::error::{Error, Result, Side};
use crate::segment::{check_bounds, LocalSegment, Segment};
use crate::transport::RemoteSegment;
use crate::types::{Group, Memory, NotifyId, Queue, Rank, SegId, Timeout};
use crate::wire::Message;
use std::sync::{Arc, RwLockReadGuard};

impl From<&Segment> for SegId {
    fn from(s: &Segment) -> SegId {
        s.id()
    }
}

type RemoteTable<'a> = RwLockReadGuard<'a, Vec<Option<Box<dyn RemoteSegment>>>>;

impl Inner {
    fn check_seg_id(&self, seg: SegId) -> Result<()> {
        if seg.0 as u32 >= self.config.segment_max {
            return Err(Error::SegmentIdOutOfRange {
                seg,
                max: self.config.segment_max,
            });
        }
        Ok(())
    }

    pub(crate) fn local_segment(&self, seg: SegId) -> Result<Arc<LocalSegment>> {
        self.check_seg_id(seg)?;
        self.local.read().unwrap_or_else(|e| e.into_inner())[seg.0 as usize]
            .clone()
            .ok_or(Error::UnknownSegment {
                rank: self.rank,
                seg,
            })
    }

    /// Runs `f` on local segment `seg` under the table's read lock: the
    /// hot-path form of [`Inner::local_segment`], without reference counting.
    pub(crate) fn with_local<R>(
        &self,
        seg: SegId,
        f: impl FnOnce(&LocalSegment) -> Result<R>,
    ) -> Result<R> {
        self.check_seg_id(seg)?;
        let local = self.local.read().unwrap_or_else(|e| e.into_inner());
        let s = local[seg.0 as usize]
            .as_deref()
            .ok_or(Error::UnknownSegment {
                rank: self.rank,
                seg,
            })?;
        f(s)
    }

    fn check_queue(&self, queue: Queue) -> Result<&crate::queue::QueueState> {
        self.queues
            .get(queue.0 as usize)
            .filter(|q| q.created.load(std::sync::atomic::Ordering::Relaxed))
            .ok_or(Error::BadQueue {
                queue,
                count: self.config.queue_num,
            })
    }

    fn check_size(&self, size: u64) -> Result<()> {
        if size == 0 {
            return Err(Error::ZeroSize { what: "a transfer" });
        }
        if size > self.config.transfer_size_max {
            return Err(Error::TooLarge {
                size,
                max: self.config.transfer_size_max,
            });
        }
        Ok(())
    }

    /// The remote table of `rank`, after checking the rank and its health.
    fn remote_table(&self, rank: Rank) -> Result<RemoteTable<'_>> {
        self.check_rank(rank)?;
        self.peer_ok(rank)?;
        if self.peers[rank.0 as usize].transport.is_none() {
            return Err(Error::NoTransport {
                rank,
                reason: "it is on another host and no network transport is available yet".into(),
            });
        }
        Ok(self.remote[rank.0 as usize]
            .read()
            .unwrap_or_else(|e| e.into_inner()))
    }
}

/// Looks up a remote segment in a locked table and checks a byte range.
fn lookup_remote<'t>(
    table: &'t RemoteTable<'_>,
    rank: Rank,
    seg: SegId,
    offset: u64,
    size: u64,
    max: u32,
) -> Result<&'t dyn RemoteSegment> {
    if seg.0 as u32 >= max {
        return Err(Error::SegmentIdOutOfRange { seg, max });
    }
    let r = table[seg.0 as usize]
        .as_deref()
        .ok_or(Error::UnknownSegment { rank, seg })?;
    check_bounds(Side::Remote, rank, seg, offset, size, r.size())?;
    Ok(r)
}

fn check_notification(
    r: &dyn RemoteSegment,
    rank: Rank,
    seg: SegId,
    id: NotifyId,
    value: u32,
) -> Result<()> {
    if id.0 >= r.notification_count() {
        return Err(Error::NotifyIdOutOfRange {
            rank,
            seg,
            id,
            num: 1,
            count: r.notification_count(),
        });
    }
    if value == 0 {
        return Err(Error::NotifyValueZero);
    }
    Ok(())
}

impl Gaspi {
    // ----- segments -----

    /// Allocates a segment of `size` bytes on this rank, not yet registered
    /// with anybody. Its memory is zero.
    pub fn segment_alloc(&self, seg: SegId, size: u64, memory: Memory) -> Result<Segment> {
        let inner = &self.inner;
        inner.check_seg_id(seg)?;
        let mut local = inner.local.write().unwrap_or_else(|e| e.into_inner());
        if local[seg.0 as usize].is_some() {
            return Err(Error::SegmentExists { seg });
        }
        let s = match memory {
            Memory::Host => LocalSegment::alloc_host(
                seg,
                size as usize,
                inner.config.notification_num,
                inner.config.effective_spin(),
            )?,
            Memory::Gpu(device) => {
                return Err(Error::Segment(gaspi_segments::SegmentError::Gpu(
                    gaspi_segments::gpu::GpuError::NoDriver {
                        reason: format!(
                            "GPU segments (device {device}) are not supported by this build yet"
                        ),
                    },
                )))
            }
        };
        self.install(&mut local, s)
    }

    fn install(
        &self,
        local: &mut std::sync::RwLockWriteGuard<'_, Vec<Option<Arc<LocalSegment>>>>,
        s: LocalSegment,
    ) -> Result<Segment> {
        let inner = &self.inner;
        let seg = s.id;
        // A rank reaches its own segments through the same path as a peer's.
        let me = inner.rank;
        let transport = inner.peers[me.0 as usize]
            .transport
            .clone()
            .expect("a rank always reaches itself");
        let own = transport.attach(me, &s.descriptor)?;
        let s = Arc::new(s);
        local[seg.0 as usize] = Some(s.clone());
        inner.remote[me.0 as usize]
            .write()
            .unwrap_or_else(|e| e.into_inner())[seg.0 as usize] = Some(own);
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
        self.inner.check_seg_id(seg)?;
        let mut local = self.inner.local.write().unwrap_or_else(|e| e.into_inner());
        if local[seg.0 as usize].is_some() {
            return Err(Error::SegmentExists { seg });
        }
        // SAFETY: forwarded from this function's contract.
        let s = unsafe {
            LocalSegment::bind(
                seg,
                ptr,
                size as usize,
                None,
                self.inner.config.notification_num,
                self.inner.config.effective_spin(),
            )?
        };
        self.install(&mut local, s)
    }

    /// Makes a buffer the segment's memory; the runtime keeps it until the
    /// segment and every handle to it are gone. Safe form of `segment_bind`.
    pub fn segment_bind_buffer(&self, seg: SegId, mut buffer: Box<[u8]>) -> Result<Segment> {
        self.inner.check_seg_id(seg)?;
        let mut local = self.inner.local.write().unwrap_or_else(|e| e.into_inner());
        if local[seg.0 as usize].is_some() {
            return Err(Error::SegmentExists { seg });
        }
        let (ptr, len) = (buffer.as_mut_ptr(), buffer.len());
        // SAFETY: the heap buffer is moved into the segment, which keeps it
        // alive (and unmoved: a Box's heap allocation never moves) for as long
        // as the segment exists.
        let s = unsafe {
            LocalSegment::bind(
                seg,
                ptr,
                len,
                Some(buffer),
                self.inner.config.notification_num,
                self.inner.config.effective_spin(),
            )?
        };
        self.install(&mut local, s)
    }

    /// Makes the segment `seg` of this rank reachable by `rank`.
    pub fn segment_register(&self, seg: SegId, rank: Rank, timeout: Timeout) -> Result<()> {
        let s = self.inner.local_segment(seg)?;
        self.inner.check_rank(rank)?;
        self.register_with(&s, &[rank], timeout)
    }

    fn register_with(&self, s: &LocalSegment, ranks: &[Rank], timeout: Timeout) -> Result<()> {
        let deadline = timeout.deadline();
        for &r in ranks {
            if r == self.inner.rank {
                continue;
            }
            let desc = s.descriptor.clone();
            let seg = s.id.0;
            self.inner.request(
                r,
                move |token| Message::Register { token, seg, desc },
                deadline,
                "segment_register",
            )?;
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
            .with_committed(group, self.inner.rank, |g| g.members.clone())?;
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
            .with_committed(group, self.inner.rank, |g| g.members.clone())?;
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
                // Leave nothing half-made behind.
                let _ = self.segment_delete(s.id());
                Err(e)
            }
        }
    }

    /// Deletes segment `seg` of this rank and tells the peers to forget it.
    /// The memory is freed once the last handle to it is dropped.
    pub fn segment_delete(&self, seg: SegId) -> Result<()> {
        self.inner.check_seg_id(seg)?;
        let removed =
            self.inner.local.write().unwrap_or_else(|e| e.into_inner())[seg.0 as usize].take();
        if removed.is_none() {
            return Err(Error::UnknownSegment {
                rank: self.inner.rank,
                seg,
            });
        }
        self.inner.detach(self.inner.rank, seg.0 as usize);
        for r in 0..self.inner.size {
            if r != self.inner.rank.0 && self.inner.peer_ok(Rank(r)).is_ok() {
                let _ = self
                    .inner
                    .send(Rank(r), &Message::Unregister { seg: seg.0 });
            }
        }
        Ok(())
    }

    /// A handle to segment `seg` of this rank.
    pub fn segment(&self, seg: SegId) -> Result<Segment> {
        Ok(Segment {
            inner: self.inner.local_segment(seg)?,
            rank: self.inner.rank,
        })
    }

    /// Start of segment `seg`'s memory.
    pub fn segment_ptr(&self, seg: SegId) -> Result<*mut u8> {
        Ok(self.inner.local_segment(seg)?.data())
    }

    /// Size of segment `seg` in bytes.
    pub fn segment_size(&self, seg: SegId) -> Result<u64> {
        Ok(self.inner.local_segment(seg)?.size as u64)
    }

    /// Ids of this rank's segments, ascending.
    pub fn segment_list(&self) -> Vec<SegId> {
        self.inner
            .local
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(i, _)| SegId(i as u8))
            .collect()
    }

    // ----- one-sided communication -----

    /// Posts a write of `size` bytes from `local_seg` at `local_offset` to
    /// `remote_seg` of `rank` at `remote_offset`, on `queue`.
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
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
        self.put(
            local_seg.into(),
            local_offset,
            rank,
            remote_seg,
            remote_offset,
            size,
            None,
            queue,
        )
    }

    /// Posts a write and then a notification of `value` at `notification` of
    /// the same remote segment. The notification is never visible before
    /// the data.
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
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
        self.put(
            local_seg.into(),
            local_offset,
            rank,
            remote_seg,
            remote_offset,
            size,
            Some((notification, value)),
            queue,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn put(
        &self,
        local_seg: SegId,
        local_offset: u64,
        rank: Rank,
        remote_seg: SegId,
        remote_offset: u64,
        size: u64,
        notify: Option<(NotifyId, u32)>,
        queue: Queue,
    ) -> Result<()> {
        let inner = &*self.inner;
        let q = inner.check_queue(queue)?;
        inner.check_size(size)?;
        let local = inner.local_segment(local_seg)?;
        local.check(Side::Local, inner.rank, local_offset, size)?;
        let table = inner.remote_table(rank)?;
        let r = lookup_remote(
            &table,
            rank,
            remote_seg,
            remote_offset,
            size,
            inner.config.segment_max,
        )?;
        if let Some((id, value)) = notify {
            check_notification(r, rank, remote_seg, id, value)?;
        }
        let entries = 1 + notify.is_some() as u32;
        q.reserve(queue, entries, inner.config.queue_size_max)?;
        // SAFETY: local_offset + size was checked against the local segment,
        // which `local` keeps alive.
        let src = unsafe { local.data().add(local_offset as usize) };
        let sent = r
            .put(remote_offset, src, size as usize)
            .and_then(|_| match notify {
                Some((id, value)) => r.notify(id.0, value),
                None => Ok(()),
            });
        if let Err(e) = sent {
            q.unreserve(entries);
            return Err(e);
        }
        q.touch(rank);
        Ok(())
    }

    /// Posts a read of `size` bytes from `remote_seg` of `rank` at
    /// `remote_offset` into `local_seg` at `local_offset`, on `queue`.
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
        inner.check_size(size)?;
        let local = inner.local_segment(local_seg)?;
        local.check(Side::Local, inner.rank, local_offset, size)?;
        let table = inner.remote_table(rank)?;
        let r = lookup_remote(
            &table,
            rank,
            remote_seg,
            remote_offset,
            size,
            inner.config.segment_max,
        )?;
        q.reserve(queue, 1, inner.config.queue_size_max)?;
        // SAFETY: local_offset + size was checked against the local segment.
        let dst = unsafe { local.data().add(local_offset as usize) };
        if let Err(e) = r.get(remote_offset, dst, size as usize) {
            q.unreserve(1);
            return Err(e);
        }
        q.touch(rank);
        Ok(())
    }

    /// Posts a notification of `value` at `notification` of `remote_seg` of
    /// `rank`. It does not overtake writes posted before it on the same
    /// queue to the same rank.
    pub fn notify(
        &self,
        rank: Rank,
        remote_seg: SegId,
        notification: NotifyId,
        value: u32,
        queue: Queue,
    ) -> Result<()> {
        let inner = &*self.inner;
        let q = inner.check_queue(queue)?;
        let table = inner.remote_table(rank)?;
        let r = lookup_remote(&table, rank, remote_seg, 0, 0, inner.config.segment_max)?;
        check_notification(r, rank, remote_seg, notification, value)?;
        q.reserve(queue, 1, inner.config.queue_size_max)?;
        if let Err(e) = r.notify(notification.0, value) {
            q.unreserve(1);
            return Err(e);
        }
        q.touch(rank);
        Ok(())
    }

    /// Waits until every request posted on `queue` is complete locally; fails
    /// naming a rank that died while it had requests on the queue.
    pub fn wait(&self, queue: Queue, _timeout: Timeout) -> Result<()> {
        let q = self.inner.check_queue(queue)?;
        // Shared-memory requests complete when posted; what is left is to
        // report targets that died meanwhile.
        for r in q.drain() {
            self.inner.peer_ok(r)?;
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
            rank: self.inner.rank,
            seg,
            id: begin,
            num,
            count,
        };
        // Fast path: one scan under the table's read lock.
        let found = self.inner.with_local(seg, |s| {
            let area = &s.notifications;
            area.check_range(begin.0, num)
                .map_err(|_| out_of_range(area.count()))?;
            Ok(area.scan(begin.0, num))
        })?;
        if let Some(id) = found {
            return Ok(NotifyId(id));
        }
        // Slow path: hold the segment itself while waiting, not the lock.
        let s = self.inner.local_segment(seg)?;
        let area = &s.notifications;
        match area.wait_until(timeout.deadline(), || area.scan(begin.0, num)) {
            Some(id) => Ok(NotifyId(id)),
            None => Err(Error::Timeout {
                op: "notify_waitsome",
            }),
        }
    }

    /// Atomically reads and clears notification `id` of local segment `seg`;
    /// returns the value it had (0 if it was not set).
    pub fn notify_reset(&self, seg: SegId, id: NotifyId) -> Result<u32> {
        self.inner.with_local(seg, |s| {
            s.notifications
                .reset(id.0)
                .map_err(|_| Error::NotifyIdOutOfRange {
                    rank: self.inner.rank,
                    seg,
                    id,
                    num: 1,
                    count: s.notifications.count(),
                })
        })
    }

    // ----- collectives -----

    /// Waits until every member of `group` has called `barrier`. After a
    /// `Timeout`, calling it again resumes the same barrier.
    pub fn barrier(&self, group: Group, timeout: Timeout) -> Result<()> {
        crate::collectives::barrier::barrier(&self.inner, group, timeout)
    }
}
