//! `read_notify` and the list variants of write and read.
//!
//! A list call moves several (local, remote) ranges between this rank and
//! one peer as one request. Like every call, it checks all of its input
//! first: every element's segments, bounds and size, the notification, the
//! queue's room for all of it. Only then is the first byte moved, so a bad
//! element in the middle of a list leaves nothing half-written anywhere.
//! The notification of `write_list_notify` is set after every element's
//! data, so a waiter that sees it may read all of them. An element of size
//! 0 is checked like any other and moves nothing (decision 0030).

use crate::context::Gaspi;
use crate::model::error::{Error, Result, Side};
use crate::model::ids::{NotifyId, Queue, Rank, SegId};
use crate::model::stats::Op;
use crate::segments::LocalSegment;
use crate::transport::tables::Tables;
use crate::transport::tables::{check_notification, lookup_remote};
use crate::transport::RemoteEnd;
use crate::transport::{RemoteSegment, Via};

/// One element of a list operation: `size` bytes between a local range and
/// a remote range (of the rank the list call names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListElem {
    /// Segment of this rank.
    pub local_seg: SegId,
    /// Byte offset in `local_seg`.
    pub local_offset: u64,
    /// Segment of the peer.
    pub remote_seg: SegId,
    /// Byte offset in `remote_seg`.
    pub remote_offset: u64,
    /// Bytes to move.
    pub size: u64,
}

impl ListElem {
    /// An element moving `size` bytes between `local_seg`@`local_offset` and
    /// `remote_seg`@`remote_offset`.
    pub fn new(
        local_seg: SegId,
        local_offset: u64,
        remote_seg: SegId,
        remote_offset: u64,
        size: u64,
    ) -> ListElem {
        ListElem {
            local_seg,
            local_offset,
            remote_seg,
            remote_offset,
            size,
        }
    }
}

/// Direction of a list transfer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Write,
    Read,
}

/// One validated element: where the bytes are on both sides.
struct Resolved<'t> {
    segment: &'t LocalSegment,
    local_offset: u64,
    remote: &'t dyn RemoteSegment,
    remote_seg: SegId,
    remote_offset: u64,
    size: usize,
}

impl Gaspi {
    /// Posts a read of `size` bytes from `remote_seg` of `rank` into
    /// `local_seg`, then sets notification `notification` of `local_seg`
    /// (this rank's) to 1 once the data has landed.
    #[allow(clippy::too_many_arguments)] // GASPI's signature, argument for argument
    pub fn read_notify(
        &self,
        local_seg: impl Into<SegId>,
        local_offset: u64,
        rank: Rank,
        remote_seg: SegId,
        remote_offset: u64,
        size: u64,
        notification: NotifyId,
        queue: Queue,
    ) -> Result<()> {
        let elem = ListElem::new(
            local_seg.into(),
            local_offset,
            remote_seg,
            remote_offset,
            size,
        );
        self.list(
            Dir::Read,
            std::slice::from_ref(&elem),
            rank,
            Some((elem.local_seg, notification, 1)),
            queue,
            Op::ReadNotify,
        )
    }

    /// Posts the writes of every element of `elems` to `rank` on `queue`.
    pub fn write_list(&self, elems: &[ListElem], rank: Rank, queue: Queue) -> Result<()> {
        self.list(Dir::Write, elems, rank, None, queue, Op::WriteList)
    }

    /// Posts the reads of every element of `elems` from `rank` on `queue`.
    pub fn read_list(&self, elems: &[ListElem], rank: Rank, queue: Queue) -> Result<()> {
        self.list(Dir::Read, elems, rank, None, queue, Op::ReadList)
    }

    /// Posts the writes of every element, then notification `notification`
    /// of `value` on segment `notify_seg` of `rank`, visible only after the
    /// data of all elements.
    pub fn write_list_notify(
        &self,
        elems: &[ListElem],
        rank: Rank,
        notify_seg: SegId,
        notification: NotifyId,
        value: u32,
        queue: Queue,
    ) -> Result<()> {
        self.list(
            Dir::Write,
            elems,
            rank,
            Some((notify_seg, notification, value)),
            queue,
            Op::WriteListNotify,
        )
    }

    /// Posts the reads of every element, then sets notification
    /// `notification` of local segment `notify_seg` to 1 once all the data
    /// has landed.
    pub fn read_list_notify(
        &self,
        elems: &[ListElem],
        rank: Rank,
        notify_seg: SegId,
        notification: NotifyId,
        queue: Queue,
    ) -> Result<()> {
        self.list(
            Dir::Read,
            elems,
            rank,
            Some((notify_seg, notification, 1)),
            queue,
            Op::ReadListNotify,
        )
    }

    /// Checks everything, then moves every element, then notifies.
    fn list(
        &self,
        dir: Dir,
        elems: &[ListElem],
        rank: Rank,
        notify: Option<(SegId, NotifyId, u32)>,
        queue: Queue,
        op: Op,
    ) -> Result<()> {
        let inner = &*self.inner;
        let q = inner.check_queue(queue)?;
        if elems.is_empty() {
            return Err(Error::ZeroSize { what: "a list" });
        }
        let max = inner.base.config.rw_list_elem_max;
        if elems.len() > max as usize {
            return Err(Error::TooManyElements {
                what: "a list",
                count: elems.len(),
                max,
            });
        }
        inner.base.check_peer(rank)?;
        let tables = inner.base.tables.load();
        // Pass 1: check every element and the notification; nothing moves.
        for e in elems {
            resolve(inner, &tables, e, rank)?;
        }
        // The notification's target: a peer's segment for writes, one of
        // ours for reads (the data lands here).
        let notify_target: Option<(RemoteEnd, u32, u32)> = match notify {
            None => None,
            Some((seg, id, value)) => {
                let (target, owner) = match dir {
                    Dir::Write => (rank, rank),
                    Dir::Read => (inner.base.rank, inner.base.rank),
                };
                inner.base.check_seg_id(seg)?;
                let r = lookup_remote(&tables, target, seg, 0, 0, inner.base.config.segment_max)?;
                check_notification(r, owner, seg, id, value)?;
                let to = RemoteEnd {
                    rank: target,
                    seg,
                    segment: r,
                    offset: 0,
                };
                Some((to, id.0, value))
            }
        };
        // One request per element; a notification is part of the call
        // (decision 0030).
        let entries = elems.len() as u32;
        q.reserve(queue, entries, inner.base.config.queue_size_max)?;
        let first_remote = resolve(inner, &tables, &elems[0], rank)?.remote;
        let reads_complete_later = first_remote.capabilities().completes_later();
        // Pass 2: move the data, element by element, then notify.
        let moved = (|| {
            let mut bytes = 0u64;
            for e in elems {
                let r = resolve(inner, &tables, e, rank)?;
                let size = r.size as u64;
                if size == 0 {
                    // Allowed, as in GPI-2: checked, nothing to move.
                    continue;
                }
                let (seg, off) = (r.segment, r.local_offset);
                let end = RemoteEnd {
                    rank,
                    seg: r.remote_seg,
                    segment: r.remote,
                    offset: r.remote_offset,
                };
                match dir {
                    Dir::Write => inner.protocol.put_routed(q, seg, off, end, size, None)?,
                    Dir::Read => inner.protocol.get_routed(q, seg, off, end, size)?,
                }
                bytes += size;
            }
            match notify_target {
                // Reads from a peer whose answers come later: the local
                // notification waits for the answer to a fence sent after
                // them (the transport's ordering contract).
                Some((to, id, value)) if dir == Dir::Read && reads_complete_later => {
                    let seg = inner.base.local_segment(to.seg)?;
                    first_remote.post_read_notify(&seg, id, value, Via::queue(q.posted()))?;
                }
                Some((to, id, value)) => inner.protocol.notify_routed(q, to, id, value)?,
                None => {}
            }
            Ok::<u64, Error>(bytes)
        })();
        match moved {
            Ok(bytes) => {
                q.touch(rank);
                let counter = match dir {
                    Dir::Write => crate::model::stats::Counter::BytesWritten,
                    Dir::Read => crate::model::stats::Counter::BytesRead,
                };
                inner.base.stats.call(op, counter, bytes);
                Ok(())
            }
            Err(e) => {
                q.unreserve(entries);
                Err(e)
            }
        }
    }
}

/// Checks one element against the tables of `tables`; returns its pointers.
fn resolve<'t>(
    inner: &crate::context::Inner,
    tables: &'t Tables,
    e: &ListElem,
    rank: Rank,
) -> Result<Resolved<'t>> {
    inner.base.check_transfer_size(e.size)?;
    inner.base.check_seg_id(e.local_seg)?;
    let local: &LocalSegment =
        tables.local[e.local_seg.0 as usize]
            .as_deref()
            .ok_or(Error::UnknownSegment {
                rank: inner.base.rank,
                seg: e.local_seg,
            })?;
    local.check(Side::Local, inner.base.rank, e.local_offset, e.size)?;
    let max = inner.base.config.segment_max;
    let remote = lookup_remote(tables, rank, e.remote_seg, e.remote_offset, e.size, max)?;
    Ok(Resolved {
        segment: local,
        local_offset: e.local_offset,
        remote,
        remote_seg: e.remote_seg,
        remote_offset: e.remote_offset,
        size: e.size as usize,
    })
}
