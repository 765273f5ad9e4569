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
// Feature `loom`: the model checker's types, for the model at the end
// (decision 0078); the runtime's other code does not run under it.
#[cfg(feature = "loom")]
use loom::sync::{
    atomic::{AtomicBool, AtomicU32, Ordering},
    Condvar, Mutex,
};
#[cfg(not(feature = "loom"))]
use std::sync::{
    atomic::{AtomicBool, AtomicU32, Ordering},
    Condvar, Mutex,
};

/// Requests posted on one queue through a transport that completes them
/// after the call (see `transport/mod.rs`), per target, and the first
/// failure a target reported since the last `wait`.
#[derive(Debug, Default)]
pub(crate) struct Outstanding {
    /// Whether `state` holds anything (requests or a failure): lets `wait`
    /// on a queue that never used such a transport skip the lock, which
    /// the shared-memory round trip would feel.
    busy: AtomicBool,
    state: Mutex<OutstandingState>,
    cv: Condvar,
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

/// loom models of a queue's request counting and completion: the real
/// `Outstanding` under the model checker (`cargo test --release -p gaspi
/// --features loom --lib loom`). loom's `wait_timeout` never times out,
/// so a wake-up lost between a settlement and a sleeping `wait` shows as
/// a deadlock.
#[cfg(feature = "loom")]
#[cfg(test)]
mod loom_models {
    use super::*;
    use loom::sync::Arc;

    fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            f()
        });
        println!(
            "loom {name}: {} interleavings (preemption bound 3)",
            runs.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    /// Requests to two targets, settled by two threads (one with a
    /// failure) while the poster waits: the wait returns once both are
    /// settled, reports the failure once, and leaves the queue idle.
    #[test]
    fn loom_a_wait_returns_once_every_request_is_settled() {
        model("queue: 2 settlers, 1 waiter", || {
            let o = Arc::new(Outstanding::default());
            o.add(Rank(1), 1);
            o.add(Rank(2), 1);
            let settlers: Vec<_> = [(1u32, false), (2, true)]
                .into_iter()
                .map(|(r, fail)| {
                    let o = o.clone();
                    loom::thread::spawn(move || {
                        let failure = fail.then(|| Error::Protocol("refused".into()));
                        o.settle(Rank(r), 1, failure);
                    })
                })
                .collect();
            let got = o.wait(None, |_| None);
            assert!(matches!(got, Err(Error::Protocol(_))), "{got:?}");
            for s in settlers {
                s.join().unwrap();
            }
            assert!(!o.is_busy(), "settled and reported: idle");
            assert!(
                o.wait(None, |_| None).is_ok(),
                "the failure is reported once"
            );
        });
    }

    /// A request counted before it is sent, answered before the poster
    /// runs again, and a second one posted meanwhile: the count never
    /// goes below what is outstanding and the last wait sees none.
    #[test]
    fn loom_an_answer_before_the_next_post_is_counted_right() {
        model("queue: post, answer, post again", || {
            let o = Arc::new(Outstanding::default());
            let sent = Arc::new(AtomicU32::new(0));
            o.add(Rank(1), 1);
            sent.store(1, Ordering::Release);
            let (o2, s2) = (o.clone(), sent.clone());
            let target = loom::thread::spawn(move || {
                let mut answered = 0;
                while answered < 2 {
                    let n = s2.load(Ordering::Acquire);
                    if n > answered {
                        o2.settle(Rank(1), 1, None);
                        answered += 1;
                    } else {
                        loom::thread::yield_now();
                    }
                }
            });
            o.add(Rank(1), 1);
            sent.store(2, Ordering::Release);
            assert!(o.wait(None, |_| None).is_ok());
            target.join().unwrap();
            assert!(!o.is_busy());
        });
    }
}
