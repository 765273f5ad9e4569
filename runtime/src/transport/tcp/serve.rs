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

use super::gpu_apply::{Finished, GpuApply, Then};
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
    /// The apply streams of this rank's GPU segments (`gpu_apply.rs`).
    fn gpu_apply(&self) -> &Arc<GpuApply>;
}

/// Acts on requests the GPU apply streams finished: answers them, wakes
/// the CPU waiters of the words they set.
pub(crate) fn act_on(inner: &impl TcpHost, finished: &mut Vec<Finished>) {
    // One `Settled` frame per peer for all it is owed.
    let mut owed: Vec<(Rank, Settles)> = Vec::new();
    for f in finished.drain(..) {
        match f.then {
            Then::Settle { from, queue, wake } => {
                if wake {
                    f.segment.notifications.signal();
                }
                if let Some(q) = queue {
                    match owed.iter_mut().find(|(r, _)| *r == from) {
                        Some((_, s)) => s.add(q),
                        None => {
                            let mut s = Settles::default();
                            s.add(q);
                            owed.push((from, s));
                        }
                    }
                }
            }
            Then::Reply { from, token, .. } => {
                let bytes = f.data.unwrap_or_default();
                let _ = inner.peers().send(
                    from,
                    &Message::Data {
                        token,
                        result: Ok(serde_bytes::ByteBuf::from(bytes)),
                    },
                );
            }
            Then::Local {
                owner,
                queue,
                notify,
            } => {
                let failure = notify.and_then(|(id, value)| {
                    set_local_word(&f.segment, id, value)
                        .err()
                        .map(|e| Error::Refused {
                            rank: inner.rank(),
                            reason: format!("setting the read notification: {e}"),
                        })
                });
                settle_local(inner, owner, queue, failure);
            }
            Then::Nothing => {}
        }
    }
    for (from, mut s) in owed {
        s.flush(inner, from);
    }
}

/// Answers what the GPU apply streams finished (one load when nothing is
/// in flight): called by whoever reads connections.
pub(crate) fn complete_gpu_applies(inner: &impl TcpHost) {
    if !inner.gpu_apply().pending() {
        return;
    }
    let Some(mut acting) = inner.gpu_apply().try_acting() else {
        return; // another thread is at it
    };
    inner.gpu_apply().finished(&mut acting.out);
    act_on(inner, &mut acting.out);
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
        let reads = self.take_reads();
        if self.is_empty() && reads.is_empty() {
            return;
        }
        let frames = self.take_frames();
        let _ = inner
            .peers()
            .send_parts_by(from, &[&frames, &reads], Urgency::Now, "settle", None);
    }

    /// Leaves the answers gathered so far in `from`'s [`SettleStash`]
    /// (a waiter: the next frame to `from` or the engine takes them).
    fn stash(&mut self, inner: &impl TcpHost, from: Rank) {
        // Read answers carry data someone waits for: sent now.
        send_reads(inner, from, self);
        if self.is_empty() {
            return;
        }
        inner.peers()[from].settle_stash.add(self);
        inner.owed_answers();
    }
}

/// Sends the read answers gathered in `settles` now (before an answer
/// that must follow them: a fence's, a read's not gathered).
fn send_reads(inner: &impl TcpHost, from: Rank, settles: &mut Settles) {
    let reads = settles.take_reads();
    if !reads.is_empty() {
        let _ = inner
            .peers()
            .send_parts_by(from, &[&reads], Urgency::Now, "read answer", None);
    }
}

/// Read answers gathered past this many bytes are sent at once.
const READS_GATHERED_MAX: usize = 256 << 10;

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
    let mut acting = None;
    let outcome = (|| {
        let s = own_segment(inner, seg)?;
        check_put(&*s, put)?;
        if let Some(local) = s.own_gpu() {
            // Enqueued on the GPU apply stream, answered when it ran.
            let then = Then::Settle {
                from,
                queue,
                wake: notify.is_some(),
            };
            let a = acting.insert(inner.gpu_apply().acting());
            let queued = inner
                .gpu_apply()
                .put(local, offset, data, notify, then, &mut a.out)
                .map_err(|e| e.to_string())?;
            if queued {
                return Ok(true);
            }
        }
        s.put(offset, data.as_ptr(), data.len(), Via::INTERNAL)
            .map_err(|e| e.to_string())?;
        if let Some((id, value)) = notify {
            s.notify(id, value, Via::INTERNAL)
                .map_err(|e| e.to_string())?;
        }
        Ok(false)
    })();
    if let Some(mut a) = acting {
        act_on(inner, &mut a.out);
    }
    match outcome {
        Ok(true) => {}
        other => settle(inner, from, queue, other.map(|_| ()), "write", settles),
    }
}

/// Checks a peer's `Put` against this rank's segment `s`: its bytes
/// inside the segment, its notification a word of it with a value not 0.
/// What passes may be applied; what fails changes nothing (`fuzz/`'s
/// `tcp_put` target checks both).
pub(crate) fn check_put(s: &dyn RemoteSegment, put: &PutRef<'_>) -> Outcome {
    check_range(s, put.seg, put.offset, put.data.len() as u64)?;
    if let Some((id, value)) = put.notify {
        check_word(s, put.seg, id, value)?;
    }
    Ok(())
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
    let mut acting = None;
    let outcome = (|| {
        let s = own_segment(inner, seg)?;
        check_word(&*s, seg, id, value)?;
        if let Some(local) = s.own_gpu() {
            // Behind the writes still in flight on the apply stream.
            let then = Then::Settle {
                from,
                queue,
                wake: true,
            };
            let a = acting.insert(inner.gpu_apply().acting());
            let queued = inner
                .gpu_apply()
                .notify(local, id, value, then, &mut a.out)
                .map_err(|e| e.to_string())?;
            if queued {
                return Ok(true);
            }
        }
        s.notify(id, value, Via::INTERNAL)
            .map_err(|e| e.to_string())
            .map(|()| false)
    })();
    if let Some(mut a) = acting {
        act_on(inner, &mut a.out);
    }
    match outcome {
        Ok(true) => {}
        other => settle(
            inner,
            from,
            queue,
            other.map(|_| ()),
            "notification",
            settles,
        ),
    }
}

/// A peer's `Get`: answered with the bytes or the reason; with `into`, a
/// read of host memory is answered with a `Put` of the bytes into the
/// reader's segment, sent from where they lie (the reader reads it
/// straight into place), then a `Data` with no bytes. A small such answer
/// is gathered in `settles` and goes with the other answers of this read
/// of the connection (one system call for a window of reads, as for a
/// window of writes); every other answer goes now, after those gathered.
#[allow(clippy::too_many_arguments)]
pub(crate) fn get(
    inner: &impl TcpHost,
    from: Rank,
    token: u64,
    seg: u8,
    offset: u64,
    len: u64,
    into: Option<(u8, u64)>,
    settles: &mut Settles,
) {
    if let Some((into_seg, into_offset)) = into {
        if len > 0
            && len <= super::PIECE as u64
            && get_as_put(
                inner,
                from,
                token,
                (seg, offset, len),
                (into_seg, into_offset),
                settles,
            )
        {
            return;
        }
    }
    send_reads(inner, from, settles);
    let mut acting = None;
    let result = (|| {
        let s = own_segment(inner, seg)?;
        check_range(&*s, seg, offset, len)?;
        if len > super::PIECE as u64 {
            return Err(format!("a read of {len} bytes in one request"));
        }
        if let Some(local) = s.own_gpu() {
            // Copied out on the apply stream after the writes before it;
            // answered when it ran.
            let a = acting.insert(inner.gpu_apply().acting());
            let queued = inner
                .gpu_apply()
                .get(local, offset, len as usize, from, token, &mut a.out)
                .map_err(|e| e.to_string())?;
            if queued {
                return Ok(None);
            }
        }
        let mut bytes = vec![0u8; len as usize];
        s.get(offset, bytes.as_mut_ptr(), bytes.len())
            .map_err(|e| e.to_string())?;
        Ok(Some(serde_bytes::ByteBuf::from(bytes)))
    })();
    if let Some(mut a) = acting {
        act_on(inner, &mut a.out);
    }
    let result = match result {
        Ok(None) => return,
        Ok(Some(bytes)) => Ok(bytes),
        Err(e) => Err(e),
    };
    let _ = inner.peers().send(from, &Message::Data { token, result });
}

/// Sends the `len` bytes at `offset` of host segment `seg` to `from` as a
/// `Put` into its segment `into_seg` at `into_offset`, from where they lie
/// (the segment kept mapped until sent), and the empty `Data` answer to
/// `token` behind it; false when the segment is not
/// host memory mapped here or the range is wrong (the caller answers the
/// usual way, which reports it). A small answer is copied into `settles`
/// (sent with this read's other answers); a large one's bytes are sent now
/// and its `Data` gathered the same way.
fn get_as_put(
    inner: &impl TcpHost,
    from: Rank,
    token: u64,
    (seg, offset, len): (u8, u64, u64),
    (into_seg, into_offset): (u8, u64),
    settles: &mut Settles,
) -> bool {
    let Ok(s) = own_segment(inner, seg) else {
        return false;
    };
    if check_range(&*s, seg, offset, len).is_err() {
        return false;
    }
    let Some(direct) = s.host_direct() else {
        return false;
    };
    // SAFETY: offset + len lies in the segment (checked), mapped here
    // while `s` lives; the Arc lent with the frame keeps it so until sent.
    let bytes =
        unsafe { std::slice::from_raw_parts(direct.data.add(offset as usize), len as usize) };
    let (head, n) =
        crate::net::frame::encode_put_head(None, into_seg, into_offset, len as usize, None);
    let answer = Message::Data {
        token,
        result: Ok(serde_bytes::ByteBuf::new()),
    };
    let Ok(answer) = crate::net::frame::encode(&answer) else {
        return false;
    };
    let peers = inner.peers();
    if len < DIRECT_MIN as u64 {
        // Small: the write and its answer gathered with this read's other
        // answers (copied, as the socket would copy what it does not take
        // of any small frame), sent in one system call at its end.
        if settles.push_read(&[&head[..n], bytes, &answer]) >= READS_GATHERED_MAX {
            send_reads(inner, from, settles);
        }
        return true;
    }
    // Large: the bytes lent from the segment (`lent` covers the last part
    // only), sent now; the answer behind them gathered with this read's
    // other answers (one system call per read of the connection, not one
    // per read request). The answers gathered before go after these
    // bytes: reads complete in any order, only a fence's answer must
    // follow them all.
    let keep: crate::net::connection::Keep = Arc::new(s.clone());
    if peers
        .send_parts_by(
            from,
            &[&head[..n], bytes],
            Urgency::Now,
            "read answer",
            Some(&keep),
        )
        .is_err()
    {
        return false;
    }
    if settles.push_read(&[&answer]) >= READS_GATHERED_MAX {
        send_reads(inner, from, settles);
    }
    true
}

/// A peer's `Fence`: answered after everything it sent before (reads of
/// GPU segments still in flight on an apply stream are answered first).
pub(crate) fn fence(inner: &impl TcpHost, from: Rank, token: u64, settles: &mut Settles) {
    // After the answers to the reads before it.
    send_reads(inner, from, settles);
    // The turn is held through the answer: no read's data taken as
    // finished by another thread is still unsent when it goes.
    let _acting = inner.gpu_apply().pending().then(|| {
        let mut acting = inner.gpu_apply().acting();
        let drained = inner.gpu_apply().drain_all(&mut acting.out);
        act_on(inner, &mut acting.out);
        if let Err(e) = drained {
            tracing::warn!("draining the GPU apply streams before {from}'s fence: {e}");
        }
        acting
    });
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
            if len > 0 && result.as_ref().is_ok_and(|b| b.is_empty()) {
                // The bytes came as a `Put` into place before this answer
                // (`get_as_put`); into GPU memory, they may still be on
                // the apply stream.
                if into.is_gpu() {
                    let mut acting = inner.gpu_apply().acting();
                    let then = Then::Local {
                        owner,
                        queue: Some(queue),
                        notify: None,
                    };
                    let queued = inner.gpu_apply().after(&into, then, &mut acting.out);
                    act_on(inner, &mut acting.out);
                    drop(acting);
                    if let Ok(true) = queued {
                        return;
                    }
                }
                settle_local(inner, owner, Some(queue), None);
                return;
            }
            if into.is_gpu() {
                if let Ok(bytes) = &result {
                    if bytes.len() == len {
                        // Into GPU memory on the apply stream; settled
                        // when it ran.
                        let mut acting = inner.gpu_apply().acting();
                        let then = Then::Local {
                            owner,
                            queue: Some(queue),
                            notify: None,
                        };
                        let queued = inner.gpu_apply().put(
                            &into,
                            offset,
                            bytes,
                            None,
                            then,
                            &mut acting.out,
                        );
                        act_on(inner, &mut acting.out);
                        drop(acting);
                        match queued {
                            Ok(true) => return,
                            Ok(false) => {}
                            Err(e) => {
                                let failure = Some(Error::Refused {
                                    rank: owner,
                                    reason: format!("copying the data in: {e}"),
                                });
                                settle_local(inner, owner, Some(queue), failure);
                                return;
                            }
                        }
                    }
                }
            }
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
    if seg.is_gpu() {
        // After the reads' data still in flight on the apply stream.
        let mut acting = inner.gpu_apply().acting();
        let then = Then::Local {
            owner,
            queue,
            notify: Some((id, value)),
        };
        let queued = inner.gpu_apply().after(&seg, then, &mut acting.out);
        act_on(inner, &mut acting.out);
        drop(acting);
        if let Ok(true) = queued {
            return true;
        }
    }
    let failure = set_local_word(&seg, id, value)
        .err()
        .map(|e| Error::Refused {
            rank: inner.rank(),
            reason: format!("setting the read notification: {e}"),
        });
    settle_local(inner, owner, queue, failure);
    true
}

/// Sets notification `id` of this rank's segment `seg` where its waiters
/// look: the words in GPU memory when it has them (a stream write), else
/// the area's (a store and a wake).
fn set_local_word(
    seg: &crate::segments::LocalSegment,
    id: u32,
    value: u32,
) -> std::result::Result<(), String> {
    match &seg.device_words {
        Some(words) => {
            seg.notifications
                .check_set(id, value)
                .map_err(|e| e.to_string())?;
            words.set(id, value).map_err(|e| e.to_string())
        }
        None => seg.notifications.set(id, value).map_err(|e| e.to_string()),
    }
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

/// A peer's large `Put` into a segment of this rank, whose data is being
/// read from the socket straight into place: into the segment when it is
/// host memory mapped here (the copy from a frame buffer into the
/// segment, a memory pass over every byte that kept the reader from the
/// socket meanwhile, is not made), into the pinned staging of the GPU
/// apply stream when it is GPU memory, handed to the copy engine chunk by
/// chunk while the rest arrives (`gpu_apply.rs`). Everything is checked
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
    /// Into a GPU segment: the staging and its pipeline.
    gpu: Option<super::gpu_apply::DirectGpu>,
}

// SAFETY: `at` points into the data of `segment`'s mapping, which the Arc
// keeps mapped, or into the staging `gpu` holds reserved; only the holder
// of the connection's read state (one thread at a time, behind its mutex)
// writes through it.
unsafe impl Send for DirectPut {}

impl DirectPut {
    /// A direct read of the `Put` whose head is `head` and of whose data
    /// `have` (at most `head.len` bytes) arrived already; `None` when the
    /// write is small, or refused (then it goes the buffered way, which
    /// answers the refusal), or into memory neither mapped here nor a GPU
    /// segment of this rank.
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
        let (data, mut gpu) = match segment.host_direct() {
            Some(direct) => {
                // SAFETY: offset + len lies within the segment (checked
                // above), mapped here for its size while `segment` lives.
                (unsafe { direct.data.add(head.offset as usize) }, None)
            }
            None => {
                let local = segment.own_gpu()?;
                let mut acting = inner.gpu_apply().acting();
                let d =
                    inner
                        .gpu_apply()
                        .start_direct(local, head.offset, head.len, &mut acting.out);
                act_on(inner, &mut acting.out);
                drop(acting);
                let d = d?;
                (d.staging(), Some(d))
            }
        };
        // SAFETY: `data` is valid for head.len bytes (the segment's range
        // or the staging reserved for them); `have` is another buffer
        // (the connection's frame buffer), at most head.len bytes.
        let at = unsafe {
            std::ptr::copy_nonoverlapping(have.as_ptr(), data, have.len());
            data.add(have.len())
        };
        if let Some(g) = &mut gpu {
            g.arrived(have.len()).ok()?;
        }
        Some(DirectPut {
            head,
            at,
            left: head.len - have.len(),
            segment,
            gpu,
        })
    }

    /// The data is in: sets the notification, if any, and answers the
    /// write.
    pub(crate) fn finish(mut self, inner: &impl TcpHost, from: Rank, settles: &mut Settles) {
        debug_assert_eq!(self.left, 0);
        if let Some(g) = self.gpu.take() {
            let then = Then::Settle {
                from,
                queue: self.head.queue,
                wake: self.head.notify.is_some(),
            };
            if let Err(e) = g.finish(self.head.notify, then) {
                settle(
                    inner,
                    from,
                    self.head.queue,
                    Err(e.to_string()),
                    "write",
                    settles,
                );
            }
            return;
        }
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

    /// Reads what `socket` has of the data into place.
    fn read_from(&mut self, socket: &std::net::TcpStream) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        // SAFETY: `at` is valid for writes of `left` bytes (start() and the
        // updates below keep it inside the checked range of the mapped
        // segment, or of the reserved staging); read(2) writes at most that
        // many. Raw memory, not a Rust reference: other processes may
        // access the segment.
        let n = unsafe { libc::read(socket.as_raw_fd(), self.at.cast(), self.left) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        // SAFETY: n <= left, so `at` stays within the range.
        self.at = unsafe { self.at.add(n) };
        self.left -= n;
        if let Some(g) = &mut self.gpu {
            g.arrived(self.head.len - self.left)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        Ok(n)
    }
}
