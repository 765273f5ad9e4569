//! Communication queues: where one-sided requests are posted and completed.
//!
//! A queue counts the requests posted since its last `wait` (one per call,
//! one per element of a list: a notification is part of the request it
//! follows, decision 0030; GPI-2 counts it apart) and refuses new ones at its depth
//! with `QueueFull`. It also remembers which ranks it sent to, so that `wait`
//! can report a request whose target died. On the shared-memory transport a
//! request is complete when its post returns; `wait` then only settles the
//! books. Asynchronous transports keep their completion counters here too.

use crate::model::error::{Error, Result};
use crate::model::ids::{Queue, Rank};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// One queue's counters.
#[derive(Debug)]
pub(crate) struct QueueState {
    pub created: AtomicBool,
    posted: AtomicU32,
    /// Bit per rank: targets of requests since the last wait.
    targets: Vec<AtomicU64>,
    /// The queue's CUDA stream and GPU work in flight (see `gpu/`).
    pub gpu: crate::gpu::QueueStream,
    /// Requests of transports that complete later (TCP), not yet settled.
    pub outstanding: std::sync::Arc<crate::transport::outstanding::Outstanding>,
    /// This queue's number.
    pub index: u32,
}

impl QueueState {
    /// What a request posted on this queue tells its transport: where to
    /// count it until it completes (see [`crate::transport::Via`]).
    #[inline]
    pub fn posted(&self) -> crate::transport::PostedOn<'_> {
        crate::transport::PostedOn {
            outstanding: &self.outstanding,
            index: self.index,
        }
    }

    pub fn new(index: u32, ranks: u32, created: bool) -> QueueState {
        QueueState {
            created: AtomicBool::new(created),
            posted: AtomicU32::new(0),
            targets: (0..ranks.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            gpu: crate::gpu::QueueStream::new(index),
            outstanding: Default::default(),
            index,
        }
    }

    /// Reserves `entries` slots for a request to `rank`, or refuses at `depth`.
    pub fn reserve(&self, queue: Queue, entries: u32, depth: u32) -> Result<()> {
        if self.try_reserve(entries, depth) {
            Ok(())
        } else {
            Err(Error::QueueFull { queue, depth })
        }
    }

    /// [`Self::reserve`] as a yes or no, for the short path.
    #[inline(always)]
    pub fn try_reserve(&self, entries: u32, depth: u32) -> bool {
        // One read-modify-write on the fast path; undo it when over depth.
        let before = self.posted.fetch_add(entries, Ordering::Relaxed);
        if before + entries > depth {
            self.posted.fetch_sub(entries, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Gives back slots reserved for a request that failed before it was sent.
    pub fn unreserve(&self, entries: u32) {
        self.posted.fetch_sub(entries, Ordering::Relaxed);
    }

    /// Notes that a request went to `rank`.
    #[inline(always)]
    pub fn touch(&self, rank: Rank) {
        let (w, b) = (rank.0 as usize / 64, rank.0 % 64);
        // Skip the read-modify-write when the bit is set already (the common
        // case in a loop of writes to one peer).
        if self.targets[w].load(Ordering::Relaxed) & (1 << b) == 0 {
            self.targets[w].fetch_or(1 << b, Ordering::Relaxed);
        }
    }

    /// Requests posted since the last wait.
    pub fn size(&self) -> u32 {
        self.posted.load(Ordering::Relaxed)
    }

    /// Empties the queue and returns the ranks it had sent to, lowest
    /// first. Allocation-free: `wait` calls it after every batch.
    pub fn drain(&self) -> Targets {
        let words = self
            .targets
            .iter()
            .map(|word| {
                // Skip the read-modify-write of words with no bit set.
                if word.load(Ordering::Relaxed) == 0 {
                    0
                } else {
                    word.swap(0, Ordering::Relaxed)
                }
            })
            .collect::<TargetWords>();
        self.posted.store(0, Ordering::Relaxed);
        Targets { words, word: 0 }
    }
}

/// Bits of the target words taken by [`QueueState::drain`]: one inline
/// word covers jobs of up to 64 ranks without a heap allocation.
type TargetWords = smallvec::SmallVec<[u64; 1]>;

/// The ranks a drained queue had sent to, as an iterator.
pub(crate) struct Targets {
    words: TargetWords,
    word: usize,
}

impl Iterator for Targets {
    type Item = Rank;

    fn next(&mut self) -> Option<Rank> {
        while let Some(bits) = self.words.get_mut(self.word) {
            if *bits != 0 {
                let b = bits.trailing_zeros();
                *bits &= *bits - 1;
                return Some(Rank(self.word as u32 * 64 + b));
            }
            self.word += 1;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_refuses_at_its_depth_and_wait_frees_it() {
        let q = QueueState::new(0, 100, true);
        q.reserve(Queue(0), 2, 3).unwrap();
        q.touch(Rank(70));
        q.touch(Rank(1));
        assert!(matches!(
            q.reserve(Queue(0), 2, 3),
            Err(Error::QueueFull { depth: 3, .. })
        ));
        q.reserve(Queue(0), 1, 3).unwrap();
        assert_eq!(q.size(), 3);
        assert_eq!(q.drain().collect::<Vec<_>>(), vec![Rank(1), Rank(70)]);
        assert_eq!(q.size(), 0);
        q.reserve(Queue(0), 3, 3).unwrap();
    }
}
