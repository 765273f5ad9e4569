//! TCP transport: requests sent to the target's progress engine, which
//! applies them to its own segments.
//!
//! For ranks on other hosts (and for every peer under
//! `GASPI_TRANSPORT=tcp`), as GPI-2's Ethernet device does it: nothing of
//! the target's memory is mapped here, so every request is a frame on the
//! authenticated control connection to the target (`wire::Message::Put`,
//! `Notify`, `Get`, `Fence`) and the target's progress engine, which reads
//! that connection anyway, applies it ([`serve`]) with the same bounds
//! checks as any call, through its own view of its own segment (so a GPU
//! segment gets a copy and then its notification in order).
//!
//! Why the control connection and not a second socket per pair: it is
//! already authenticated, already watched by the engine's `epoll`, and one
//! TCP stream per pair gives the ordering contract for free. A `notify`
//! sent after writes to the same rank is applied after them; a read's
//! local notification rides on a `Fence` whose answer comes after the data
//! of every `Get` before it. Connections are made on first use (decision
//! 0022).
//!
//! Who reads: the engine, or a thread of the target that is waiting for
//! something and reads the connection itself meanwhile
//! (`waiter_progress.rs`, decision 0026); both handle frames the same way.
//!
//! Completion: a `put` sends its head and its data where they lie with one
//! system call and copies into the connection's outbox only what the
//! socket did not take, so the caller's buffer is free when it returns;
//! the target answers `Settled` once it has applied the request (with its
//! next frame to us, when a waiter applied it), and `wait` on the queue
//! waits for those answers (remote completion, like an RDMA write's
//! completion: after `wait` and a barrier, a target sees the data). The
//! target reads a large write's data straight into the segment
//! (`serve::DirectPut`). A `Get` is answered with the data, which is
//! copied into the local segment before the request is settled. Payloads
//! are cut into pieces of [`PIECE`] bytes, each its own request.
//!
//! Backpressure: a request waits for room in the outbox of a peer that does
//! not read (`net/connection.rs`) for as long as the peer lives; writes have no
//! timeout to keep. A dead peer fails it at once, naming the peer.

pub(crate) mod gpu_apply;
pub(crate) mod serve;

use super::{Capabilities, Completion, GpuView, RemoteSegment, Transport, Via};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use crate::net::connection::{Keep, Urgency};
use crate::net::frame::Message;
use crate::net::peers::Peers;
use crate::segments::LocalSegment;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Smallest write sent from its source segment (decision 0027).
const IN_PLACE_MIN: u64 = 64 * 1024;

/// Largest payload of one `Put` or `Data` frame: larger transfers are cut
/// into pieces of this size (a quarter of the largest frame accepted).
pub(crate) const PIECE: usize = 4 << 20;

/// The TCP transport; bound to the rank's peers once they exist.
#[derive(Debug, Default)]
pub(crate) struct TcpTransport {
    peers: OnceLock<Weak<Peers>>,
    posted_reads: Arc<PostedReads>,
}

impl TcpTransport {
    /// Gives the transport the peers through which it sends.
    pub fn bind(&self, peers: Weak<Peers>) {
        let _ = self.peers.set(peers);
    }

    /// The reads posted through this transport, awaiting their data
    /// (their answers are applied by `serve.rs`).
    pub fn posted_reads(&self) -> Arc<PostedReads> {
        self.posted_reads.clone()
    }
}

/// What a TCP segment sends through: the peers and the posted reads.
struct Link {
    peers: Arc<Peers>,
    posted_reads: Arc<PostedReads>,
}

impl Transport for TcpTransport {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn attach(
        &self,
        owner: Rank,
        seg: u8,
        desc: &SegmentDescriptor,
        _home: &Arc<OnceLock<u32>>,
    ) -> Result<Box<dyn RemoteSegment>> {
        let peers = self
            .peers
            .get()
            .cloned()
            .ok_or_else(|| Error::Protocol("the TCP transport is not bound yet".into()))?;
        Ok(Box::new(TcpSegment {
            owner,
            seg,
            size: desc.size,
            count: desc.notification_count,
            instance: desc.instance,
            peers,
            posted_reads: self.posted_reads.clone(),
        }))
    }
}

/// A peer's segment reached over TCP: its size and id, nothing mapped.
#[derive(Debug)]
struct TcpSegment {
    owner: Rank,
    seg: u8,
    size: u64,
    count: u32,
    instance: u64,
    peers: Weak<Peers>,
    posted_reads: Arc<PostedReads>,
}

impl TcpSegment {
    fn inner(&self) -> Result<Link> {
        Ok(Link {
            peers: self.peers.upgrade().ok_or(Error::NotInitialized)?,
            posted_reads: self.posted_reads.clone(),
        })
    }

    /// Sends one request counted on `via`'s queue (settled by the answer).
    fn send_counted(
        &self,
        inner: &Link,
        msg: &Message,
        via: Via<'_>,
        op: &'static str,
    ) -> Result<()> {
        self.send_frame_counted(inner, &[&crate::net::frame::encode(msg)?], via, op, None)
    }

    /// [`Self::send_counted`] of a frame already encoded, in pieces (the
    /// last one `lent`: see `Peers::send_parts_by`).
    fn send_frame_counted(
        &self,
        inner: &Link,
        frame: &[&[u8]],
        via: Via<'_>,
        op: &'static str,
        lent: Option<&Keep>,
    ) -> Result<()> {
        if let Some(q) = via.queue {
            q.outstanding.add(self.owner, 1);
        }
        let sent = inner
            .peers
            .send_parts_by(self.owner, frame, Urgency::Within(None), op, lent);
        if let (Err(_), Some(q)) = (&sent, via.queue) {
            q.outstanding.settle(self.owner, 1, None);
        }
        sent
    }

    /// A write of `len` bytes at `src` to `offset`, then notification
    /// `notify`: `Put` frames of at most [`PIECE`] bytes, the notification
    /// on the last. The data goes from where it lies; what the socket
    /// does not take at once is copied into the connection's outbox, or,
    /// `lent`, left where it is until the socket takes it.
    fn send_put(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
        lent: Option<&Keep>,
    ) -> Result<()> {
        let inner = self.inner()?;
        // SAFETY: the caller guarantees `src` is valid for `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(src, len) };
        let pieces = len.div_ceil(PIECE).max(1);
        for (i, at) in (0..pieces).map(|i| (i, i * PIECE)) {
            let piece = &bytes[at..len.min(at + PIECE)];
            // The notification rides on the last piece: the target applies
            // the data, then sets it.
            let last = i + 1 == pieces;
            let (head, n) = crate::net::frame::encode_put_head(
                queue_index(via),
                self.seg,
                offset + at as u64,
                piece.len(),
                notify.filter(|_| last),
            );
            self.send_frame_counted(&inner, &[&head[..n], piece], via, "write", lent)?;
        }
        Ok(())
    }
}

fn queue_index(via: Via<'_>) -> Option<u8> {
    via.queue.map(|q| q.index as u8)
}

impl RemoteSegment for TcpSegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            completion: Completion::Later,
            // Below it the copy of what the socket does not take at once
            // costs less than finding what keeps the source mapped.
            in_place_from: Some(IN_PLACE_MIN),
            // Whatever memory it is in, the owner's engine copies into it:
            // from here it is reached like host memory of another host.
            ..Capabilities::HOST
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn notification_count(&self) -> u32 {
        self.count
    }

    fn instance(&self) -> u64 {
        self.instance
    }

    fn put(&self, offset: u64, src: *const u8, len: usize, via: Via<'_>) -> Result<()> {
        self.put_notify(offset, src, len, None, via)
    }

    fn put_notify(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
    ) -> Result<()> {
        self.send_put(offset, src, len, notify, via, None)
    }

    fn put_notify_in_place(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
        keep: &Keep,
    ) -> Result<()> {
        // Only a request that `wait` completes may leave its source in
        // place: internal traffic has no `wait`, so it is copied.
        let lent = via.queue.map(|_| keep);
        self.send_put(offset, src, len, notify, via, lent)
    }

    fn put_notify_lent(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
        keep: &Keep,
    ) -> Result<()> {
        // The caller's own buffer, kept by `keep` until sent: always lent.
        self.send_put(offset, src, len, notify, via, Some(keep))
    }

    fn notify(&self, id: u32, value: u32, via: Via<'_>) -> Result<()> {
        let inner = self.inner()?;
        let msg = Message::Notify {
            queue: queue_index(via),
            seg: self.seg,
            id,
            value,
        };
        self.send_counted(&inner, &msg, via, "notify")
    }

    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        let inner = self.inner()?;
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(PIECE);
            let slot = Arc::new(BufferSlot::default());
            let token = inner.peers.next_token();
            inner
                .posted_reads
                .insert(token, PostedRead::Buffer(self.owner, slot.clone()));
            let msg = Message::Get {
                token,
                seg: self.seg,
                offset: offset + at as u64,
                len: n as u64,
                into: None,
            };
            let got = inner
                .peers
                .send_by(self.owner, &msg, Urgency::Within(None), "read")
                .and_then(|_| slot.wait(&inner.peers, self.owner, n));
            inner.posted_reads.remove(token);
            let bytes = got?;
            // SAFETY: the caller guarantees `dst` is valid for `len` bytes;
            // `at + n <= len` and `bytes` has exactly `n` (checked by wait).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst.add(at), n) };
            at += n;
        }
        Ok(())
    }

    fn post_get(
        &self,
        offset: u64,
        into: &Arc<LocalSegment>,
        into_offset: u64,
        len: usize,
        via: Via<'_>,
    ) -> Result<()> {
        let Some(q) = via.queue else {
            // Nothing would wait for it: read now.
            // SAFETY: the caller checked the range against `into`.
            let dst = unsafe { into.data().add(into_offset as usize) };
            return self.get(offset, dst, len);
        };
        let inner = self.inner()?;
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(PIECE);
            let token = inner.peers.next_token();
            inner.posted_reads.insert(
                token,
                PostedRead::Into {
                    owner: self.owner,
                    queue: q.index,
                    into: into.clone(),
                    offset: into_offset + at as u64,
                    len: n,
                },
            );
            // Answered with a `Put` into `into`, read straight into place
            // (or with the bytes, where the owner would rather).
            let msg = Message::Get {
                token,
                seg: self.seg,
                offset: offset + at as u64,
                len: n as u64,
                into: Some((into.id.0, into_offset + at as u64)),
            };
            if let Err(e) = self.send_counted(&inner, &msg, via, "read") {
                inner.posted_reads.remove(token);
                return Err(e);
            }
            at += n;
        }
        Ok(())
    }

    fn post_read_notify(
        &self,
        seg: &Arc<LocalSegment>,
        id: u32,
        value: u32,
        via: Via<'_>,
    ) -> Result<()> {
        let inner = self.inner()?;
        let token = inner.peers.next_token();
        inner.posted_reads.insert(
            token,
            PostedRead::Notify {
                owner: self.owner,
                queue: via.queue.map(|q| q.index),
                seg: seg.clone(),
                id,
                value,
            },
        );
        let sent = self.send_counted(&inner, &Message::Fence { token }, via, "read_notify");
        if sent.is_err() {
            inner.posted_reads.remove(token);
        }
        sent
    }

    fn atomic(&self, _offset: u64, _op: crate::model::ids::AtomicOp) -> Result<Option<u64>> {
        // The owner applies it (`Message::Atomic`, see `atomics.rs`).
        Ok(None)
    }

    fn gpu_view(&self, _home: u32) -> Result<GpuView> {
        Err(Error::NoTransport {
            rank: self.owner,
            reason: "a GPU kernel cannot reach a segment on another host directly; \
                     its requests go through the CPU"
                .into(),
        })
    }
}

/// Where the answer to a posted `Get` or `Fence` goes.
#[derive(Debug)]
pub(crate) enum PostedRead {
    /// Into local segment `into` at `offset`; settles one request of
    /// `queue` to `owner`.
    Into {
        owner: Rank,
        queue: u32,
        into: Arc<LocalSegment>,
        offset: u64,
        len: usize,
    },
    /// Into a buffer a caller waits on (a blocking `get`).
    Buffer(Rank, Arc<BufferSlot>),
    /// The answer to a `Fence`: set notification `id` of `seg`.
    Notify {
        owner: Rank,
        queue: Option<u32>,
        seg: Arc<LocalSegment>,
        id: u32,
        value: u32,
    },
}

impl PostedRead {
    fn owner(&self) -> Rank {
        match self {
            PostedRead::Into { owner, .. } | PostedRead::Notify { owner, .. } => *owner,
            PostedRead::Buffer(owner, _) => *owner,
        }
    }
}

/// Reads and fences posted and not yet answered, by token.
#[derive(Debug, Default)]
pub(crate) struct PostedReads {
    map: Mutex<HashMap<u64, PostedRead>>,
}

impl PostedReads {
    fn insert(&self, token: u64, read: PostedRead) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token, read);
    }

    /// Takes the fence posted under `token`, if it is one.
    pub fn take_fence(&self, token: u64) -> Option<PostedRead> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(&token) {
            Some(PostedRead::Notify { .. }) => map.remove(&token),
            _ => None,
        }
    }

    /// Takes the read posted under `token`, if any.
    pub fn remove(&self, token: u64) -> Option<PostedRead> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&token)
    }

    /// Drops everything posted to `rank` (found gone): the waits on their
    /// queues fail naming it, and the local segments are let go.
    pub fn forget_rank(&self, rank: Rank) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, r| r.owner() != rank);
    }
}

/// The answer of a blocking `get`, and the condition its caller sleeps on.
#[derive(Debug, Default)]
pub(crate) struct BufferSlot {
    data: Mutex<Option<std::result::Result<Vec<u8>, String>>>,
    cv: Condvar,
}

impl BufferSlot {
    /// Hands the answer to the waiting caller.
    pub fn fill(&self, result: std::result::Result<Vec<u8>, String>) {
        *self.data.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        self.cv.notify_all();
    }

    /// Waits for the answer of `owner` (`n` bytes), or for `owner` to be
    /// found gone.
    fn wait(&self, peers: &Peers, owner: Rank, n: usize) -> Result<Vec<u8>> {
        let mut data = self.data.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match data.take() {
                Some(Ok(bytes)) if bytes.len() == n => return Ok(bytes),
                Some(Ok(bytes)) => {
                    return Err(Error::Protocol(format!(
                        "{owner} answered a read of {n} bytes with {}",
                        bytes.len()
                    )))
                }
                Some(Err(reason)) => {
                    return Err(Error::Refused {
                        rank: owner,
                        reason,
                    })
                }
                None => {}
            }
            peers.peer_ok(owner)?;
            data = self
                .cv
                .wait_timeout(data, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
