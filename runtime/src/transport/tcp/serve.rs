//! Both ends of the TCP transport inside the progress engine: applying a
//! peer's requests to this rank's segments, and taking the answers to this
//! rank's own requests.
//!
//! A request is applied through this rank's own view of its segment (the
//! entry `tables.remote[me][seg]` every segment gets at creation, the
//! system segment included), so host and GPU segments, and every
//! placement of notification words, take the same path as a rank writing
//! to itself. Everything a peer sends is checked here again (segment,
//! bounds, notification id and value) before a byte moves: a buggy or
//! hostile peer cannot write outside a segment. A refused request is
//! answered with its reason, which the sender's next `wait` on that queue
//! returns as `Error::Refused` naming this rank.

use super::PostedRead;
use super::PostedReads;
use crate::model::error::Error;
use crate::model::ids::Rank;
use crate::net::connection::Urgency;
use crate::net::frame::Message;
use crate::net::frame::PutRef;
use crate::net::peers::Peers;
use crate::transport::outstanding::Outstanding;
use crate::transport::tables::SegmentTables;
use crate::transport::{RemoteSegment, Via};
use std::sync::Arc;

/// What the target side reads of its rank: implemented by the front for
/// the rank's context, so that this file names nothing above the
/// transports.
pub(crate) trait TcpHost {
    /// This rank.
    fn rank(&self) -> Rank;
    /// The other ranks (answers go to them).
    fn peers(&self) -> &Peers;
    /// This rank's segment tables (requests are applied through them).
    fn tables(&self) -> &SegmentTables;
    /// Reads this rank posted, awaiting their data.
    fn posted_reads(&self) -> &PostedReads;
    /// The count of requests that complete later of queue `queue`.
    fn outstanding(&self, queue: usize) -> Option<&Outstanding>;
    /// A waiter left answers owed to a peer in its stash: the progress
    /// engine is to send them if nobody else does.
    fn owed_answers(&self);
}

type Outcome<T = ()> = std::result::Result<T, String>;

/// This rank's own view of its segment `seg`, or why there is none.
fn own_segment(inner: &impl TcpHost, seg: u8) -> Outcome<Arc<dyn RemoteSegment>> {
    inner.tables().load().remote[inner.rank().0 as usize][seg as usize]
        .as_ref()
        .map(|e| e.segment().clone())
        .ok_or_else(|| format!("segment {seg} of {} does not exist", inner.rank()))
}

fn check_range(s: &dyn RemoteSegment, seg: u8, offset: u64, len: u64) -> Outcome {
    match offset.checked_add(len) {
        Some(end) if end <= s.size() => Ok(()),
        _ => Err(format!(
            "bytes {offset}..+{len} lie outside segment {seg} ({} bytes)",
            s.size()
        )),
    }
}

fn check_word(s: &dyn RemoteSegment, seg: u8, id: u32, value: u32) -> Outcome {
    if value == 0 {
        return Err("notification value 0".into());
    }
    if id >= s.notification_count() {
        return Err(format!(
            "notification {id} is outside segment {seg} ({} words)",
            s.notification_count()
        ));
    }
    Ok(())
}

pub(crate) use crate::net::settles::Settles;

/// Where the TCP target's gathered answers go.
pub(crate) trait SettlesOut {
    /// Sends the answers gathered so far to `from` (the progress engine).
    fn flush(&mut self, inner: &impl TcpHost, from: Rank);
    /// Leaves them in `from`'s stash (a waiter).
    fn stash(&mut self, inner: &impl TcpHost, from: Rank);
}

impl SettlesOut for Settles {
    /// Sends the answers gathered so far to `from` (the progress engine).
    fn flush(&mut self, inner: &impl TcpHost, from: Rank) {
        if self.is_empty() {
            return;
        }
        let frames = self.take_frames();
        let _ = inner
            .peers()
            .send_frame_by(from, &frames, Urgency::Now, "settle");
    }

    /// Leaves the answers gathered so far in `from`'s [`SettleStash`]
    /// (a waiter: the next frame to `from` or the engine takes them).
    fn stash(&mut self, inner: &impl TcpHost, from: Rank) {
        if self.is_empty() {
            return;
        }
        inner.peers()[from].settle_stash.add(self);
        inner.owed_answers();
    }
}

/// Answers a request posted on `queue` (if any) with its outcome: counted
/// into `settles` when applied, at once (with its reason) when refused.
fn settle(
    inner: &impl TcpHost,
    from: Rank,
    queue: Option<u8>,
    outcome: Outcome,
    what: &str,
    settles: &mut Settles,
) {
    match (queue, outcome) {
        (Some(queue), Ok(())) => settles.add(queue),
        (Some(queue), Err(reason)) => {
            let _ = inner.peers().send(
                from,
                &Message::Settled {
                    queue,
                    count: 1,
                    failure: Some(reason),
                },
            );
        }
        (None, Err(reason)) => tracing::warn!("{from}'s {what} refused: {reason}"),
        (None, Ok(())) => {}
    }
}

/// A peer's `Put` (read in place from its frame).
pub(crate) fn put(inner: &impl TcpHost, from: Rank, put: &PutRef<'_>, settles: &mut Settles) {
    let PutRef {
        queue,
        seg,
        offset,
        data,
        notify,
    } = *put;
    let outcome = (|| {
        let s = own_segment(inner, seg)?;
        check_range(&*s, seg, offset, data.len() as u64)?;
        if let Some((id, value)) = notify {
            check_word(&*s, seg, id, value)?;
        }
        s.put(offset, data.as_ptr(), data.len(), Via::INTERNAL)
            .map_err(|e| e.to_string())?;
        if let Some((id, value)) = notify {
            s.notify(id, value, Via::INTERNAL)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })();
    settle(inner, from, queue, outcome, "write", settles);
}

/// A peer's `Notify`.
pub(crate) fn notify(
    inner: &impl TcpHost,
    from: Rank,
    queue: Option<u8>,
    seg: u8,
    id: u32,
    value: u32,
    settles: &mut Settles,
) {
    let outcome = (|| {
        let s = own_segment(inner, seg)?;
        check_word(&*s, seg, id, value)?;
        s.notify(id, value, Via::INTERNAL)
            .map_err(|e| e.to_string())
    })();
    settle(inner, from, queue, outcome, "notification", settles);
}

/// A peer's `Get`: answered with the bytes or the reason.
pub(crate) fn get(inner: &impl TcpHost, from: Rank, token: u64, seg: u8, offset: u64, len: u64) {
    let result = (|| {
        let s = own_segment(inner, seg)?;
        check_range(&*s, seg, offset, len)?;
        if len > super::PIECE as u64 {
            return Err(format!("a read of {len} bytes in one request"));
        }
        let mut bytes = vec![0u8; len as usize];
        s.get(offset, bytes.as_mut_ptr(), bytes.len())
            .map_err(|e| e.to_string())?;
        Ok(serde_bytes::ByteBuf::from(bytes))
    })();
    let _ = inner.peers().send(from, &Message::Data { token, result });
}

/// A peer's `Fence`: answered after everything it sent before.
pub(crate) fn fence(inner: &impl TcpHost, from: Rank, token: u64) {
    let _ = inner.peers().send(
        from,
        &Message::Reply {
            token,
            result: Ok(()),
        },
    );
}

/// The answer to one of this rank's `Get`s.
pub(crate) fn data(
    inner: &impl TcpHost,
    from: Rank,
    token: u64,
    result: std::result::Result<serde_bytes::ByteBuf, String>,
) {
    let Some(read) = inner.posted_reads().remove(token) else {
        return; // purged, or its owner was found gone meanwhile
    };
    match read {
        PostedRead::Buffer(_, slot) => slot.fill(result.map(|b| b.into_vec())),
        PostedRead::Into {
            owner,
            queue,
            into,
            offset,
            len,
        } => {
            let outcome = match result {
                Ok(bytes) if bytes.len() == len => into
                    .copy_in(offset, &bytes)
                    .map_err(|e| format!("copying the data in: {e}")),
                Ok(bytes) => Err(format!("{} bytes for a read of {len}", bytes.len())),
                Err(reason) => Err(reason),
            };
            let failure = outcome.err().map(|reason| Error::Refused {
                rank: owner,
                reason,
            });
            settle_local(inner, owner, Some(queue), failure);
        }
        PostedRead::Notify { .. } => {
            tracing::warn!("{from} answered a fence with data; ignored");
        }
    }
}

/// The answer to a `Fence` (a `Reply`); false when `token` was no fence.
pub(crate) fn fence_answered(inner: &impl TcpHost, token: u64) -> bool {
    let Some(PostedRead::Notify {
        owner,
        queue,
        seg,
        id,
        value,
    }) = inner.posted_reads().take_fence(token)
    else {
        return false;
    };
    let failure = seg
        .notifications
        .set(id, value)
        .err()
        .map(|e| Error::Refused {
            rank: inner.rank(),
            reason: format!("setting the read notification: {e}"),
        });
    settle_local(inner, owner, queue, failure);
    true
}

fn settle_local(inner: &impl TcpHost, owner: Rank, queue: Option<u32>, failure: Option<Error>) {
    if let Some(q) = queue.and_then(|q| inner.outstanding(q as usize)) {
        q.settle(owner, 1, failure);
    } else if let Some(e) = failure {
        tracing::warn!("{e}");
    }
}

/// A peer's answer to `count` requests this rank posted on `queue`.
pub(crate) fn settled(
    inner: &impl TcpHost,
    from: Rank,
    queue: u8,
    count: u32,
    failure: Option<String>,
) {
    let Some(q) = inner.outstanding(queue as usize) else {
        tracing::warn!("{from} settled requests of a queue {queue} that does not exist");
        return;
    };
    let failure = failure.map(|reason| Error::Refused { rank: from, reason });
    q.settle(from, count as u64, failure);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::Inner;
    use crate::{Config, Gaspi, Memory, SegId};

    /// What a buggy or hostile peer may send: writes past the end, offsets
    /// that wrap, notifications out of range or of value 0, segments that
    /// do not exist. Each is refused on the target and changes nothing; a
    /// good write lands.
    #[test]
    fn crafted_requests_are_refused_on_the_target_and_change_nothing() {
        let g = Gaspi::init(Config::default().notification_num(64)).unwrap();
        let seg = g.segment_alloc(SegId(1), 4096, Memory::Host).unwrap();
        let inner = &*g.inner;
        let me = inner.base.rank;
        // (offset, length, notification, segment)
        type Crafted = (u64, usize, Option<(u32, u32)>, u8);
        let bad: [Crafted; 6] = [
            (4090, 64, None, 1),
            (u64::MAX - 3, 8, None, 1),
            (4096, 1, None, 1),
            (0, 8, Some((64, 1)), 1),
            (0, 8, Some((3, 0)), 1),
            (0, 8, None, 7),
        ];
        let settles = &mut Settles::default();
        for (offset, len, notify, seg) in bad {
            let data = vec![0xAB; len];
            let p = PutRef {
                queue: None,
                seg,
                offset,
                data: &data,
                notify,
            };
            put(inner, me, &p, settles);
        }
        notify_fn(inner, me, 1, 64, 1);
        notify_fn(inner, me, 1, 3, 0);
        let data: Vec<u8> = seg.read_vec(0, 4096).unwrap();
        assert!(
            data.iter().all(|&b| b == 0),
            "a refused write changed the segment"
        );
        assert_eq!(g.notify_reset(SegId(1), crate::NotifyId(3)).unwrap(), 0);
        // A good request lands, data then notification.
        let good = PutRef {
            queue: None,
            seg: 1,
            offset: 4088,
            data: &[5; 8],
            notify: Some((3, 9)),
        };
        put(inner, me, &good, settles);
        assert_eq!(seg.read_vec::<u8>(4088, 8).unwrap(), vec![5; 8]);
        assert_eq!(g.notify_reset(SegId(1), crate::NotifyId(3)).unwrap(), 9);
    }

    fn notify_fn(inner: &Inner, from: Rank, seg: u8, id: u32, value: u32) {
        notify(inner, from, None, seg, id, value, &mut Settles::default());
    }
}

/// The reading side of one control connection (`net/reader.rs`), whose
/// large writes this transport reads straight into their segments.
pub(crate) type Connection = crate::net::reader::Connection<DirectPut>;

/// Smallest write whose data is read from the socket straight into the
/// segment rather than into the frame buffer first.
pub(crate) const DIRECT_MIN: usize = 64 * 1024;

/// A peer's large `Put` into a host segment of this rank, whose data is
/// being read from the socket straight into the segment: the copy from a
/// frame buffer into the segment, a memory pass over every byte that kept
/// the reader from the socket meanwhile, is not made. Everything is checked
/// from the frame's head before a byte lands, as for any write; the
/// notification is set once the data is all in.
#[derive(Debug)]
pub(crate) struct DirectPut {
    /// Keeps the mapping of the segment alive while bytes land in it.
    segment: Arc<dyn RemoteSegment>,
    head: crate::net::frame::PutHead,
    /// Next byte to read into, and how many are still to come.
    at: *mut u8,
    left: usize,
}

// SAFETY: `at` points into the data of `segment`'s mapping, which the Arc
// keeps mapped; only the holder of the connection's read state (one thread
// at a time, behind its mutex) writes through it.
unsafe impl Send for DirectPut {}

impl DirectPut {
    /// A direct read of the `Put` whose head is `head` and of whose data
    /// `have` (at most `head.len` bytes) arrived already; `None` when the
    /// write is small, or refused (then it goes the buffered way, which
    /// answers the refusal), or not into host memory mapped here.
    pub(crate) fn start(
        inner: &impl TcpHost,
        head: crate::net::frame::PutHead,
        have: &[u8],
    ) -> Option<DirectPut> {
        if head.len < DIRECT_MIN || have.len() > head.len {
            return None;
        }
        let segment = own_segment(inner, head.seg).ok()?;
        check_range(&*segment, head.seg, head.offset, head.len as u64).ok()?;
        if let Some((id, value)) = head.notify {
            check_word(&*segment, head.seg, id, value).ok()?;
        }
        let data = segment.host_direct()?.data;
        // SAFETY: offset + len lies within the segment (checked above),
        // which is mapped here for its size while `segment` lives; `have`
        // is another buffer (the connection's frame buffer).
        let at = unsafe {
            let dst = data.add(head.offset as usize);
            std::ptr::copy_nonoverlapping(have.as_ptr(), dst, have.len());
            dst.add(have.len())
        };
        Some(DirectPut {
            head,
            at,
            left: head.len - have.len(),
            segment,
        })
    }

    /// The data is in: sets the notification, if any, and answers the
    /// write.
    pub(crate) fn finish(self, inner: &impl TcpHost, from: Rank, settles: &mut Settles) {
        debug_assert_eq!(self.left, 0);
        let outcome = match self.head.notify {
            Some((id, value)) => self
                .segment
                .notify(id, value, Via::INTERNAL)
                .map_err(|e| e.to_string()),
            None => Ok(()),
        };
        settle(inner, from, self.head.queue, outcome, "write", settles);
    }
}

impl crate::net::reader::DirectRead for DirectPut {
    #[inline]
    fn left(&self) -> usize {
        self.left
    }

    /// Reads what `socket` has of the data into the segment.
    fn read_from(&mut self, socket: &std::net::TcpStream) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        // SAFETY: `at` is valid for writes of `left` bytes (start() and the
        // updates below keep it inside the checked range of the mapped
        // segment); read(2) writes at most that many. Raw memory, not a
        // Rust reference: other processes may access the segment.
        let n = unsafe { libc::read(socket.as_raw_fd(), self.at.cast(), self.left) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        // SAFETY: n <= left, so `at` stays within the range.
        self.at = unsafe { self.at.add(n) };
        self.left -= n;
        Ok(n)
    }
}
