//! Requests that complete after their call returns, counted per queue.
//!
//! A transport whose requests complete later (TCP, verbs) counts each one
//! here, against its queue and target, when it posts it, and settles it
//! when the target reports it applied (or failed: the failure is kept,
//! naming the target, for the next `wait`). `wait(queue)` then waits for
//! exactly what was posted on that queue. The queue (`crate::queue`) owns
//! one of these; the transports reach it through [`super::Via`], without
//! knowing the queue.

use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Requests posted on one queue through a transport that completes them
/// after the call (see `transport/mod.rs`), per target, and the first
/// failure a target reported since the last `wait`.
#[derive(Debug, Default)]
pub(crate) struct Outstanding {
    /// Whether `state` holds anything (requests or a failure): lets `wait`
    /// on a queue that never used such a transport skip the lock, which
    /// the shared-memory round trip would feel.
    busy: AtomicBool,
    state: std::sync::Mutex<OutstandingState>,
    cv: std::sync::Condvar,
    /// Threads asleep on `cv` (changed under `state`'s lock): a settlement
    /// wakes only when there are some, since a condition variable's
    /// notify is a system call even with nobody to wake, and a waiter that
    /// spins reading the connection (`waiter_progress.rs`) settles its own
    /// requests on the way.
    sleepers: AtomicU32,
}

#[derive(Debug, Default)]
struct OutstandingState {
    /// (target, requests not yet settled); few entries: a queue talks to
    /// few ranks at a time.
    pending: Vec<(Rank, u64)>,
    failure: Option<Error>,
}

impl Outstanding {
    /// Counts `n` requests posted to `rank` (before they are sent: the
    /// answer may come before the sender runs again).
    pub fn add(&self, rank: Rank, n: u64) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.busy.store(true, Ordering::Release);
        match s.pending.iter_mut().find(|(r, _)| *r == rank) {
            Some((_, c)) => *c += n,
            None => s.pending.push((rank, n)),
        }
    }

    /// Settles `n` requests to `rank`: applied, or failed with `failure`
    /// (kept, the first one, for `wait`).
    pub fn settle(&self, rank: Rank, n: u64, failure: Option<Error>) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = s.pending.iter().position(|(r, _)| *r == rank) {
            let c = &mut s.pending[i].1;
            *c = c.saturating_sub(n);
            if *c == 0 {
                s.pending.swap_remove(i);
            }
        }
        if let Some(f) = failure {
            s.failure.get_or_insert(f);
        }
        self.busy.store(
            !s.pending.is_empty() || s.failure.is_some(),
            Ordering::Release,
        );
        drop(s);
        // A sleeper counted itself under the lock before it slept, so after
        // our change under the same lock either it saw the change or we
        // see it counted here.
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            self.cv.notify_all();
        }
    }

    /// Whether requests are unsettled or a failure is kept.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Wakes waiters (a rank was found gone).
    pub fn wake(&self) {
        let _s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }

    /// Waits until every request is settled, then reports the first
    /// failure, if any. A target that is gone with requests unsettled
    /// fails the wait at once, naming it (`gone(rank)` says whether it is
    /// and how); past `deadline`, `Timeout`, with the requests still
    /// counted for the next wait.
    pub fn wait(
        &self,
        deadline: Option<std::time::Instant>,
        gone: impl Fn(Rank) -> Option<Error>,
    ) -> Result<()> {
        if !self.busy.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if s.pending.is_empty() {
                self.busy.store(false, Ordering::Release);
                return match s.failure.take() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
            }
            if let Some(e) = s.pending.iter().find_map(|&(r, _)| gone(r)) {
                // Those requests will never be settled: forget them.
                s.pending.clear();
                s.failure = None;
                self.busy.store(false, Ordering::Release);
                return Err(e);
            }
            let nap =
                crate::model::error::nap(deadline, std::time::Duration::from_millis(50), "wait")?;
            self.sleepers.fetch_add(1, Ordering::Relaxed);
            s = self
                .cv
                .wait_timeout(s, nap)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Forgets every request (purge).
    pub fn forget(&self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.pending.clear();
        s.failure = None;
        self.busy.store(false, Ordering::Release);
    }
}
