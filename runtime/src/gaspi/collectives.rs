//! Collectives: the calls (`allreduce`, `allreduce_user`; `barrier` is
//! with the other waits in `ops.rs`). The algorithms are in
//! `collectives/`, which works with the base and the group table only.

use crate::collectives::allreduce::{allreduce, ReduceOp, Reducible};
use crate::groups::Signature;
use crate::model::error::{Error, Result};
use crate::model::ids::{Group, Timeout};

impl crate::Gaspi {
    /// Reduces `send` of every member of `group` element-wise with `op` and
    /// gives every member the result in `recv` (at most
    /// [`Config::allreduce_elem_max`](crate::Config::allreduce_elem_max)
    /// elements, 255 by default). The
    /// reduction runs in member order on the group's first member, so float
    /// results equal the sequential reduction in that order on every member.
    /// After a `Timeout`, calling it again with the same arguments resumes it.
    pub fn allreduce<T: Reducible>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: ReduceOp,
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Error::LengthMismatch {
                send: send.len(),
                recv: recv.len(),
            });
        }
        let sig = Signature {
            op: op as u8,
            ty: T::TYPE_ID,
            elem_size: std::mem::size_of::<T>(),
            count: send.len(),
        };
        let reduce = |acc: &mut [u8], x: &[u8]| {
            // Both are 8-byte aligned (an accumulator of u64s, a slot of the
            // page-aligned system segment) and whole elements long.
            T::reduce(op, bytemuck::cast_slice_mut(acc), bytemuck::cast_slice(x));
        };
        self.timed_allreduce(
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
            sig,
            &reduce,
            group,
            timeout,
        )
    }

    /// Allreduce with a user reduction: `send` and `recv` hold
    /// `send.len() / elem_size` elements of `elem_size` bytes (at most
    /// [`Config::allreduce_elem_max`](crate::Config::allreduce_elem_max)
    /// elements and 8 times as many bytes: 255 and 2040 by default);
    /// `reduce(acc, other)` must combine `other`
    /// into `acc` (both whole buffers, 8-byte aligned). It is applied on the
    /// group's first member in member order.
    pub fn allreduce_user(
        &self,
        send: &[u8],
        recv: &mut [u8],
        elem_size: usize,
        reduce: &dyn Fn(&mut [u8], &[u8]),
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        if elem_size == 0 {
            return Err(Error::ZeroSize {
                what: "an allreduce element",
            });
        }
        let sig = Signature {
            op: 255,
            ty: 0,
            elem_size,
            count: send.len() / elem_size,
        };
        if !send.len().is_multiple_of(elem_size) || send.len() != recv.len() {
            return Err(Error::LengthMismatch {
                send: send.len(),
                recv: recv.len(),
            });
        }
        self.timed_allreduce(send, recv, sig, reduce, group, timeout)
    }

    fn timed_allreduce(
        &self,
        send: &[u8],
        recv: &mut [u8],
        sig: Signature,
        reduce: &dyn Fn(&mut [u8], &[u8]),
        group: Group,
        timeout: Timeout,
    ) -> Result<()> {
        let stats = &self.inner.base.stats;
        stats.call(
            crate::model::stats::Op::Allreduce,
            crate::model::stats::Counter::None,
            0,
        );
        let t = std::time::Instant::now();
        let r = allreduce(
            &self.inner.base,
            &self.inner.groups,
            send,
            recv,
            sig,
            reduce,
            group,
            timeout,
        );
        stats.waited(t.elapsed());
        r
    }
}
