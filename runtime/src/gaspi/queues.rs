//! Queues: the calls that create, delete and purge them (see `queue.rs`
//! for what a queue counts).

use crate::model::error::{Error, Result};
use crate::model::ids::Queue;
use std::sync::atomic::Ordering;

impl crate::Gaspi {
    /// Creates a queue and returns it: the lowest id not in use, up to
    /// `config.queue_max` queues in all.
    pub fn queue_create(&self) -> Result<Queue> {
        let inner = &self.inner;
        for (i, q) in inner.protocol.queues.iter().enumerate() {
            if q.created
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                q.drain();
                tracing::debug!("created queue {i}");
                return Ok(Queue(i as u32));
            }
        }
        Err(Error::NoFreeQueue {
            max: inner.base.config.queue_max,
        })
    }

    /// Deletes `queue`. It must be empty: `wait` on it (or purge it) first.
    pub fn queue_delete(&self, queue: Queue) -> Result<()> {
        let q = self.inner.check_queue(queue)?;
        let posted = q.size();
        if posted != 0 {
            return Err(Error::QueueBusy { queue, posted });
        }
        q.created.store(false, Ordering::Release);
        Ok(())
    }

    /// Drops the bookkeeping of every request posted on `queue` since its
    /// last `wait`, without reporting their targets' health. On the
    /// shared-memory transport the requests themselves are complete already.
    pub fn queue_purge(&self, queue: Queue, timeout: crate::Timeout) -> Result<()> {
        let q = self.inner.check_queue(queue)?;
        self.inner.gpu.gpu_wait(&q.gpu, timeout.deadline())?;
        q.outstanding.forget();
        q.drain();
        Ok(())
    }

    /// Most queues that may exist at once.
    pub fn queue_max(&self) -> u32 {
        self.inner.base.config.queue_max
    }
}
