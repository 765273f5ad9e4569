//! Atomic operations on a u64 of a (remote) segment.
//!
//! `atomic_fetch_add` and `atomic_compare_swap` are atomic with respect to
//! every other atomic on the same word from any rank. Where the word is
//! mapped into this process (shared memory), the calling rank applies a
//! hardware atomic (`lock xadd`, `lock cmpxchg`) on the mapping: coherent
//! across processes because it is the same physical memory. Where it is not
//! (memory the owner bound with `segment_bind`, reached by cross-memory
//! attach, which copies and cannot be atomic), the request goes to the
//! owner's progress engine, which applies the same hardware atomic on its
//! own memory and replies with the old value. Both paths use the same
//! instruction on the same physical word, so they are atomic together.

use crate::context::{Gaspi, Inner};
use crate::error::{Error, Result, Side};
use crate::ops::lookup_remote;
use crate::stats::{Counter, Op};
use crate::types::{Rank, SegId, Timeout};
use crate::wire::{AtomicOp, Message};

impl Inner {
    /// Applies `op` on this rank's own segment (owner side): checked again
    /// here, a peer's request is never trusted.
    pub(crate) fn owner_atomic(&self, seg: SegId, offset: u64, op: AtomicOp) -> Result<u64> {
        self.with_local(seg, |s, _| {
            s.check(Side::Local, self.rank, offset, 8)?;
            if s.is_gpu() {
                if !offset.is_multiple_of(8) {
                    return Err(Error::Unaligned { offset });
                }
                return s.gpu_atomic(offset, op);
            }
            // SAFETY: offset + 8 <= size was checked just above.
            let p = unsafe { s.data().add(offset as usize) };
            if !offset.is_multiple_of(8) || !(p as usize).is_multiple_of(8) {
                return Err(Error::Unaligned { offset });
            }
            // SAFETY: p is 8-byte aligned, inside the segment, which the
            // table snapshot keeps alive; words used with atomics are only
            // touched through atomics (the API's contract).
            let word = unsafe { std::sync::atomic::AtomicU64::from_ptr(p.cast()) };
            Ok(op.apply(word))
        })
    }

    fn atomic(
        &self,
        seg: SegId,
        offset: u64,
        rank: Rank,
        op: AtomicOp,
        timeout: Timeout,
        name: &'static str,
    ) -> Result<u64> {
        self.check_peer(rank)?;
        if !offset.is_multiple_of(8) {
            return Err(Error::Unaligned { offset });
        }
        let direct = {
            let tables = self.tables.load();
            let r = lookup_remote(&tables, rank, seg, offset, 8, self.config.segment_max)?;
            r.atomic(offset, op)?
        };
        match direct {
            Some(old) => Ok(old),
            None if rank == self.rank => self.owner_atomic(seg, offset, op),
            None => {
                let t = std::time::Instant::now();
                let r = self.request_value(
                    rank,
                    |token| Message::Atomic {
                        token,
                        seg: seg.0,
                        offset,
                        op,
                    },
                    timeout.deadline(),
                    name,
                );
                self.stats.waited(t.elapsed());
                r
            }
        }
    }
}

impl Gaspi {
    /// Adds `value` (wrapping) to the u64 at `offset` of segment `seg` of
    /// `rank` and returns the value it had. `offset` must be 8-byte aligned.
    pub fn atomic_fetch_add(
        &self,
        seg: SegId,
        offset: u64,
        rank: Rank,
        value: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        let inner = &*self.inner;
        inner.stats.call(Op::AtomicFetchAdd, Counter::None, 0);
        inner.atomic(
            seg,
            offset,
            rank,
            AtomicOp::FetchAdd(value),
            timeout,
            "atomic_fetch_add",
        )
    }

    /// Stores `new` into the u64 at `offset` of segment `seg` of `rank` if
    /// it equals `comparator`; returns the value it had (equal to
    /// `comparator` exactly when the swap happened). `offset` must be
    /// 8-byte aligned.
    pub fn atomic_compare_swap(
        &self,
        seg: SegId,
        offset: u64,
        rank: Rank,
        comparator: u64,
        new: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        let inner = &*self.inner;
        inner.stats.call(Op::AtomicCompareSwap, Counter::None, 0);
        inner.atomic(
            seg,
            offset,
            rank,
            AtomicOp::CompareSwap { comparator, new },
            timeout,
            "atomic_compare_swap",
        )
    }
}
