//! The GPU side of one GASPI queue: its CUDA stream (created on first use
//! on the rank's home device), whether GPU work is in flight on it, and
//! the owner-run requests it posted, so that `wait` completes them all.

use crate::model::ids::Rank;
use gaspi_segments::gpu::{GpuMemory, GpuStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// The GPU side of one queue: its stream, whether work is in flight, and
/// the owner-executed requests it posted (see `owner_copy.rs`).
#[derive(Debug, Default)]
pub(crate) struct QueueStream {
    /// The queue's number (owners run its requests on a stream of their own
    /// for it, see `owner_copy`).
    pub index: u32,
    pub(crate) stream: OnceLock<GpuStream>,
    /// A word of GPU memory on the home device through which the stream
    /// relays notifications into a peer GPU's memory (see `stream_notify`);
    /// locked while a relay's two operations are enqueued.
    pub(crate) relay: Mutex<Option<GpuMemory>>,
    /// Writes between GPU memories gathered for one copy kernel, launched
    /// before anything else uses the stream (see `copy_batch.rs`).
    pub(crate) batch: Mutex<super::copy_batch::Batch>,
    pub(crate) pending: AtomicBool,
    /// Whether `owners` is non-empty (checked without the lock).
    pub(crate) owner_pending: AtomicBool,
    /// Per owner, the last request posted into its inbox.
    pub(crate) owners: Mutex<Vec<(Rank, u32)>>,
}

impl QueueStream {
    pub fn new(index: u32) -> QueueStream {
        QueueStream {
            index,
            ..Default::default()
        }
    }

    /// Whether GPU work was posted since the last `wait`.
    #[inline]
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::Relaxed)
    }

    /// Neither copies on the stream nor requests to an owner in flight:
    /// host-to-host requests may take the short path.
    #[inline(always)]
    pub fn idle(&self) -> bool {
        !self.pending.load(Ordering::Relaxed) && !self.owner_pending.load(Ordering::Relaxed)
    }

    /// Whether requests to `owner` that it executes are outstanding: a
    /// later notification to it must then go through its inbox too.
    #[inline]
    pub fn owner_pending_to(&self, owner: Rank) -> bool {
        self.owner_pending.load(Ordering::Relaxed)
            && self.lock_owners().iter().any(|&(r, _)| r == owner)
    }

    pub(crate) fn lock_owners(&self) -> std::sync::MutexGuard<'_, Vec<(Rank, u32)>> {
        self.owners.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn owner_posted(&self, owner: Rank, seq: u32) {
        let mut v = self.lock_owners();
        match v.iter_mut().find(|(r, _)| *r == owner) {
            Some(e) => e.1 = seq,
            None => v.push((owner, seq)),
        }
        self.owner_pending.store(true, Ordering::Relaxed);
    }

    pub(crate) fn owner_outstanding(&self) -> Vec<(Rank, u32)> {
        if !self.owner_pending.load(Ordering::Relaxed) {
            return Vec::new();
        }
        self.lock_owners().clone()
    }

    pub(crate) fn owner_done(&self, owner: Rank, seq: u32) {
        let mut v = self.lock_owners();
        v.retain(|&(r, s)| !(r == owner && s == seq));
        self.owner_pending.store(!v.is_empty(), Ordering::Relaxed);
    }
}
