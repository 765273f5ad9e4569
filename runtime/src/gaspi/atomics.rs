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
//!
//! # A timeout, and the call repeated (decision 0029)
//!
//! A hardware atomic on a mapping completes within the call: it never
//! times out. A request to the owner (TCP, RDMA without NIC atomics, bound
//! memory) may: the call returns [`Error::Timeout`] when its timeout
//! passes before the owner's answer arrives, which over a network is
//! always the case for [`Timeout::Test`]. Such a request is either
//!
//! - *not sent* (no room on the connection, or not yet connected): it has
//!   no effect and is forgotten; or
//! - *sent*: it is applied by the owner exactly once whatever the caller
//!   does next, and this rank keeps it as *abandoned*. The next call of
//!   this rank with the same target rank, segment, offset, operation and
//!   operands does not send a new request: it *adopts* the oldest
//!   abandoned one, waits for its answer within its own timeout and
//!   returns the value it had (or times out again, leaving it abandoned).
//!
//! So the GASPI idiom "repeat while `Timeout`" applies the operation once
//! per call that succeeds, as on shared memory, and a loop of
//! `Timeout::Test` calls completes. A call that times out and is never
//! repeated still takes effect; its old value is lost. Each abandoned
//! request is adopted by one call only, so threads that repeat the same
//! operation still apply it once per successful call between them. At most
//! [`MAX_ABANDONED`](crate::atomics::MAX_ABANDONED) requests are kept; beyond that the oldest is dropped
//! (it still takes effect, and an identical call sends anew). A target
//! found dead ends every call that adopts one of its requests with
//! `PeerDead`.

use crate::context::{Gaspi, Inner};
use crate::model::error::{Error, Result, Side};
use crate::model::ids::AtomicOp;
use crate::model::ids::{Rank, SegId, Timeout};
use crate::model::stats::{Counter, Op};
use crate::net::connection::Urgency;
use crate::net::frame::Message;
use crate::transport::tables::lookup_remote;

impl Inner {
    /// Applies `op` on this rank's own segment (owner side): checked again
    /// here, a peer's request is never trusted.
    pub(crate) fn owner_atomic(&self, seg: SegId, offset: u64, op: AtomicOp) -> Result<u64> {
        self.base.with_local(seg, |s, _| {
            s.check(Side::Local, self.base.rank, offset, 8)?;
            if s.is_gpu() {
                if !offset.is_multiple_of(8) {
                    return Err(Error::Unaligned { offset });
                }
                // Peers' writes still in flight on the apply stream land
                // first: the atomic must not overtake them.
                if let Some(device) = s.device() {
                    let mut acting = self.gpu_apply.acting();
                    let drained = self.gpu_apply.drain(device, &mut acting.out);
                    crate::transport::tcp::serve::act_on(self, &mut acting.out);
                    drop(acting);
                    drained?;
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
        self.base.check_peer(rank)?;
        if !offset.is_multiple_of(8) {
            return Err(Error::Unaligned { offset });
        }
        let direct = {
            let tables = self.base.tables.load();
            let r = lookup_remote(&tables, rank, seg, offset, 8, self.base.config.segment_max)?;
            r.atomic(offset, op)?
        };
        match direct {
            Some(old) => Ok(old),
            None if rank == self.base.rank => self.owner_atomic(seg, offset, op),
            None => {
                let t = std::time::Instant::now();
                let r = self.atomic_request(rank, seg, offset, op, timeout, name);
                self.base.stats.waited(t.elapsed());
                r
            }
        }
    }

    /// An atomic applied by the owner `rank` on request, with the
    /// adoption rule of the module docs.
    fn atomic_request(
        &self,
        rank: Rank,
        seg: SegId,
        offset: u64,
        op: AtomicOp,
        timeout: Timeout,
        name: &'static str,
    ) -> Result<u64> {
        let deadline = timeout.deadline();
        let key = (rank, seg, offset, op);
        let token = match self.abandoned_atomics.adopt(&key) {
            Some(token) => token,
            None => {
                let token = self.base.peers.next_token();
                self.base.peers.expect_reply(token);
                let msg = Message::Atomic {
                    token,
                    seg: seg.0,
                    offset,
                    op,
                };
                // The whole frame or nothing: not sent, it has no effect.
                if let Err(e) = self
                    .base
                    .peers
                    .send_by(rank, &msg, Urgency::Within(deadline), name)
                {
                    self.base.peers.forget_reply(token);
                    return Err(e);
                }
                token
            }
        };
        match self.base.peers.await_reply(rank, token, deadline, name) {
            Err(e @ Error::Timeout { .. }) => {
                // Sent, so it will be applied: the next identical call
                // takes its answer instead of sending another.
                if let Some(dropped) = self.abandoned_atomics.abandon(key, token) {
                    self.base.peers.forget_reply(dropped);
                }
                Err(e)
            }
            r => {
                self.base.peers.forget_reply(token);
                r
            }
        }
    }
}

impl Gaspi {
    /// Adds `value` (wrapping) to the u64 at `offset` of segment `seg` of
    /// `rank` and returns the value it had. `offset` must be 8-byte aligned.
    ///
    /// # After `Timeout`
    ///
    /// Where the word is mapped here (shared memory) the call never times
    /// out. Where the owner applies it (over TCP, on bound memory), a call
    /// that returns [`Error::Timeout`] either had no effect (the request
    /// could not be sent in time) or sent the request, which the owner
    /// then applies exactly once. In the second case the request is kept,
    /// and the next call of this rank with the same `seg`, `offset`, `rank`
    /// and `value` *adopts* it rather than sending another: it returns
    /// that request's old value when the answer comes (or times out again
    /// and keeps it). So repeating the call while it returns `Timeout`, as
    /// GASPI programs do (`Timeout::Test` included), adds `value` once;
    /// a timed-out call that is never repeated still adds it. Up to 1024
    /// requests are kept (the oldest beyond, still applied, is no longer
    /// adopted); decision 0029.
    pub fn atomic_fetch_add(
        &self,
        seg: SegId,
        offset: u64,
        rank: Rank,
        value: u64,
        timeout: Timeout,
    ) -> Result<u64> {
        let inner = &*self.inner;
        inner.base.stats.call(Op::AtomicFetchAdd, Counter::None, 0);
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
    ///
    /// A call that returns [`Error::Timeout`] had no effect or will be
    /// applied exactly once, and the next call with the same `seg`,
    /// `offset`, `rank`, `comparator` and `new` adopts it, returning its
    /// old value, as for [`Gaspi::atomic_fetch_add`] (see there): a
    /// compare-and-swap loop that repeats the call while it times out
    /// swaps at most once per successful call.
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
        inner
            .base
            .stats
            .call(Op::AtomicCompareSwap, Counter::None, 0);
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
