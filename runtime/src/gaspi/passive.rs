//! Passive messages: the calls (see `passive.rs` for the inbox and the
//! semantics).

use crate::context::Gaspi;
use crate::model::error::{Error, Result, Side};
use crate::model::ids::{Rank, SegId, Timeout};
use crate::model::stats::{Counter, Op};
use crate::net::frame::Message;
use crate::passive::PASSIVE_MAX;
use std::time::{Duration, Instant};

impl Gaspi {
    /// Sends `size` bytes (1 to 65,535) from local segment `seg` at `offset`
    /// to `rank`, which takes them with [`Gaspi::passive_receive`]. Returns
    /// once the message is handed to the connection. When `rank` has not
    /// read what it was sent (it is stopped or slow) and its connection's
    /// outbox is full, the call waits for room until `timeout` and then
    /// fails with [`Error::Timeout`], having sent nothing: it may be
    /// repeated. A slow rank is never reported dead.
    pub fn passive_send(
        &self,
        seg: SegId,
        offset: u64,
        rank: Rank,
        size: u64,
        timeout: Timeout,
    ) -> Result<()> {
        let inner = &*self.inner;
        if size == 0 || size > PASSIVE_MAX {
            return Err(Error::PassiveSize {
                size,
                max: PASSIVE_MAX,
            });
        }
        inner.base.peers.check_rank(rank)?;
        inner.base.peers.peer_ok(rank)?;
        let data = inner.base.with_local(seg, |s, _| {
            s.check(Side::Local, inner.base.rank, offset, size)?;
            let mut data = vec![0u8; size as usize];
            s.copy_out(offset, &mut data)?;
            Ok(data)
        })?;
        if rank == inner.base.rank {
            // The size was checked above: the inbox takes it.
            inner.passive.push(rank, data).map_err(Error::Protocol)?;
        } else {
            inner.base.peers.send_by(
                rank,
                &Message::Passive { data },
                crate::net::connection::Urgency::Within(timeout.deadline()),
                "passive_send",
            )?;
        }
        inner
            .base
            .stats
            .call(Op::PassiveSend, Counter::BytesWritten, size);
        Ok(())
    }

    /// Waits for the oldest passive message, copies it into local segment
    /// `seg` at `offset` and returns its sender and size. A message that
    /// does not fit there is left queued and the call fails with
    /// `OutOfBounds`.
    pub fn passive_receive(
        &self,
        seg: SegId,
        offset: u64,
        timeout: Timeout,
    ) -> Result<(Rank, u64)> {
        let inner = &*self.inner;
        let deadline = timeout.deadline();
        // Check the segment before waiting.
        inner
            .base
            .with_local(seg, |s, _| s.check(Side::Local, inner.base.rank, offset, 1))?;
        let t = Instant::now();
        let mut queue = inner
            .passive
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (from, data) = loop {
            if let Some(m) = queue.pop_front() {
                break m;
            }
            let nap = match crate::model::error::nap(
                deadline,
                Duration::from_millis(100),
                "passive_receive",
            ) {
                Ok(nap) => nap,
                Err(e) => {
                    drop(queue);
                    inner.base.stats.waited(t.elapsed());
                    return Err(e);
                }
            };
            queue = inner
                .passive
                .cv
                .wait_timeout(queue, nap)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        };
        inner.base.stats.waited(t.elapsed());
        let size = data.len() as u64;
        let copied = inner.base.with_local(seg, |s, _| {
            s.check(Side::Local, inner.base.rank, offset, size)?;
            s.copy_in(offset, &data)
        });
        if let Err(e) = copied {
            queue.push_front((from, data));
            return Err(e);
        }
        drop(queue);
        inner
            .base
            .stats
            .call(Op::PassiveReceive, Counter::BytesRead, size);
        Ok((from, size))
    }
}
