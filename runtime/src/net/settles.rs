//! Answers per queue that a target owes an origin, gathered and sent as
//! few frames as possible.
//!
//! A target answers the requests of one peer's connection that it applied
//! in one read with one `Settled` frame per queue instead of one per
//! request ([`Settles`]); a waiter that applied them leaves them in the
//! peer's [`SettleStash`], and they ride in front of the next frame sent
//! to that peer (`peers.rs`). The answers to small reads applied in the
//! same read (already encoded: the bytes and their empty `Data`) are
//! gathered beside them and go in the same system call. The frames are the network layer's
//! (`frame.rs`); which requests they settle is the transport's business.

/// Queues a rank may have (`Config::queue_max` is at most this): the
/// queue ids a `Settled` answer can name.
const QUEUES: usize = 16;

/// Requests of one peer applied in one read of its connection, to answer
/// with one `Settled` per queue instead of one per request. Counted and
/// encoded on the stack: this is on the path of every write over TCP.
#[derive(Debug, Default)]
pub(crate) struct Settles {
    counts: [u32; QUEUES],
    /// Bit `q` set: `counts[q]` holds answers.
    queues: u16,
    /// Encoded answers to small reads, in the order they were served
    /// (empty and unallocated where the read held none). Never stashed:
    /// they carry data the reader waits for.
    reads: Vec<u8>,
}

/// The `Settled` frames of a [`Settles`], one after the other.
#[derive(Debug)]
pub(crate) struct SettleFrames {
    bytes: [u8; QUEUES * super::frame::SETTLED_FRAME],
    len: usize,
}

impl std::ops::Deref for SettleFrames {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Settles {
    pub(crate) fn add(&mut self, queue: u8) {
        self.count(queue, 1);
    }

    fn count(&mut self, queue: u8, n: u32) {
        let q = queue as usize;
        if q >= QUEUES {
            // No rank posts on such a queue: a peer's bug, which only
            // costs it the answer.
            tracing::warn!("a request names queue {queue}, which no rank has; not answered");
            return;
        }
        self.counts[q] = self.counts[q].wrapping_add(n);
        self.queues |= 1 << q;
    }

    /// No `Settled` answer gathered (read answers aside).
    pub(crate) fn is_empty(&self) -> bool {
        self.queues == 0
    }

    /// Appends the encoded answer to a small read, made of `parts`;
    /// returns the bytes of read answers now gathered.
    pub(crate) fn push_read(&mut self, parts: &[&[u8]]) -> usize {
        for p in parts {
            self.reads.extend_from_slice(p);
        }
        self.reads.len()
    }

    /// The read answers gathered so far, taken.
    pub(crate) fn take_reads(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.reads)
    }

    /// The answers gathered so far as encoded frames, taken.
    pub(crate) fn take_frames(&mut self) -> SettleFrames {
        let mut frames = SettleFrames {
            bytes: [0; QUEUES * super::frame::SETTLED_FRAME],
            len: 0,
        };
        while self.queues != 0 {
            let q = self.queues.trailing_zeros() as usize;
            self.queues &= !(1 << q);
            let frame = super::frame::encode_settled(q as u8, std::mem::take(&mut self.counts[q]));
            frames.bytes[frames.len..frames.len + frame.len()].copy_from_slice(&frame);
            frames.len += frame.len();
        }
        frames
    }

    /// Moves every answer of `more` into `self`.
    pub(crate) fn absorb(&mut self, more: &mut Settles) {
        while more.queues != 0 {
            let q = more.queues.trailing_zeros() as usize;
            more.queues &= !(1 << q);
            self.count(q as u8, std::mem::take(&mut more.counts[q]));
        }
    }
}

/// Answers owed to one peer for requests a waiter applied
/// (`waiter_progress.rs`). A waiter's thread is about to return to the
/// application, which in a ping-pong sends to the same peer at once: the
/// answers ride on that frame ([`super::peers::Peers::send_frame_by`])
/// instead of costing a system call of their own on the waiter's way out.
/// The progress engine sends what nobody took within its nap.
#[derive(Debug, Default)]
pub(crate) struct SettleStash {
    owed: std::sync::atomic::AtomicBool,
    settles: std::sync::Mutex<Settles>,
}

impl SettleStash {
    /// Moves `more` in.
    pub(crate) fn add(&self, more: &mut Settles) {
        let mut settles = self.settles.lock().unwrap_or_else(|e| e.into_inner());
        settles.absorb(more);
        self.owed.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The owed answers as encoded frames, taken (`None`: nothing owed).
    pub(crate) fn take_frames(&self) -> Option<SettleFrames> {
        if !self.owed.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let frames = {
            let mut settles = self.settles.lock().unwrap_or_else(|e| e.into_inner());
            self.owed.store(false, std::sync::atomic::Ordering::Release);
            settles.take_frames()
        };
        (!frames.is_empty()).then_some(frames)
    }
}
