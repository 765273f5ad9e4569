//! The request table of the transports whose requests complete later on a
//! completion queue (verbs, libfabric): every posted request gets an id,
//! kept with its peer, its queue and what to do at its completion
//! ([`Then`]); a completion removes it, wakes a caller waiting on its
//! [`Slot`], settles its queue's [`Outstanding`] count and, when it
//! failed, marks the peer corrupt and fails the queue's next `wait` with
//! [`Error::RdmaFailed`] naming it.
//!
//! What stays with each transport: how it posts and polls, and what it
//! keeps alive for a request (`K`, e.g. a registered staging copy) or
//! tells about it (`X`, e.g. whether it is a read).

use crate::model::error::{Error, Result};
use crate::model::ids::{Rank, RankState};
use crate::net::peers::Peers;
use crate::segments::LocalSegment;
use crate::transport::outstanding::Outstanding;
use crate::transport::Via;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// What to do when a request completes; `K` is what a transport keeps
/// alive until the hardware is done with it (a registered staging copy).
#[derive(Debug)]
pub(crate) enum Then<K> {
    Nothing,
    /// Keep a staging copy registered until the provider is done with it.
    Keep(#[allow(dead_code)] K),
    /// Keep a local segment (a write's source, a read's destination)
    /// mapped and registered until then.
    Hold(#[allow(dead_code)] Arc<LocalSegment>),
    /// Wake a caller that waits for it.
    Wake(Arc<Slot>),
    /// Set a local notification once it succeeded (a `read_notify` whose
    /// value the hardware cannot write), keeping `_keep` until then.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    SetNotify {
        seg: Arc<LocalSegment>,
        id: u32,
        value: u32,
        _keep: K,
    },
}

/// One request in flight.
#[derive(Debug)]
pub(crate) struct Pending<K, X> {
    pub rank: Rank,
    pub queue: Option<u32>,
    /// What the transport notes about the request (libfabric: whether
    /// it is a read).
    #[cfg_attr(not(feature = "libfabric"), allow(dead_code))]
    pub extra: X,
    pub then: Then<K>,
}

/// The outcome of one request a caller waits for.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    done: Mutex<Option<std::result::Result<(), String>>>,
    cv: Condvar,
}

impl Slot {
    fn fill(&self, r: std::result::Result<(), String>) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
        self.cv.notify_all();
    }
}

/// What the requests are settled with, once the rank's state exists: the
/// peers (whether a peer is alive; a failed request marks it) and each
/// queue's count of outstanding requests.
#[derive(Debug)]
struct Bound {
    peers: Weak<Peers>,
    outstanding: Vec<Arc<Outstanding>>,
}

/// The requests of one transport in flight, by id.
#[derive(Debug)]
pub(crate) struct Requests<K, X> {
    pending: Mutex<HashMap<u64, Pending<K, X>>>,
    next_id: AtomicU64,
    /// Ids are taken modulo this (plus one): the width the hardware
    /// carries back.
    mask: u64,
    bound: OnceLock<Bound>,
}

impl<K, X> Requests<K, X> {
    /// An empty table whose ids fit `mask` (never 0).
    pub fn new(mask: u64) -> Requests<K, X> {
        Requests {
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            mask,
            bound: OnceLock::new(),
        }
    }

    /// Gives the table the rank's peers and queue counts (once).
    pub fn bind(&self, peers: Weak<Peers>, outstanding: Vec<Arc<Outstanding>>) {
        let _ = self.bound.set(Bound { peers, outstanding });
    }

    /// The rank's peers, once bound and while the rank lives.
    pub fn peers(&self) -> Result<Arc<Peers>> {
        self.bound
            .get()
            .and_then(|b| b.peers.upgrade())
            .ok_or(Error::NotInitialized)
    }

    /// Enters a request to `rank`, counted on `via`'s queue; returns its
    /// id. The caller posts it next, and calls [`Requests::unpost`] if
    /// that fails.
    pub fn insert(&self, rank: Rank, via: Via<'_>, extra: X, then: Then<K>) -> u64 {
        let mut request = Some(Pending {
            rank,
            queue: via.queue.map(|q| q.index),
            extra,
            then,
        });
        let id = loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed) & self.mask;
            if id == 0 {
                continue;
            }
            let mut pending = self.lock();
            if let Entry::Vacant(v) = pending.entry(id) {
                v.insert(request.take().expect("inserted once"));
                break id;
            }
        };
        if let Some(q) = via.queue {
            q.outstanding.add(rank, 1);
        }
        id
    }

    /// Takes back request `id`, which could not be posted (no completion
    /// will come for it), and uncounts it from `via`'s queue.
    pub fn unpost(&self, id: u64, rank: Rank, via: Via<'_>) -> Option<Pending<K, X>> {
        let p = self.lock().remove(&id);
        if let Some(q) = via.queue {
            q.outstanding.settle(rank, 1, None);
        }
        p
    }

    /// Gives the request `id` something to do (or keep) at its completion;
    /// if it completed already, `then` is dropped now.
    #[cfg_attr(not(feature = "libfabric"), allow(dead_code))]
    pub fn attach(&self, id: u64, then: Then<K>) {
        if let Some(p) = self.lock().get_mut(&id) {
            p.then = then;
        }
    }

    /// Request `id` completed (`failed`: the reason it did not): wakes its
    /// waiter or sets its notification, calls `before_settle` with it and
    /// the error it failed with, then settles its queue. A failure marks
    /// the peer corrupt. Returns the request's rank, or None for an id not
    /// in flight.
    pub fn complete(
        &self,
        id: u64,
        failed: Option<String>,
        before_settle: impl FnOnce(&Pending<K, X>, Option<&Error>),
    ) -> Option<Rank> {
        let p = self.lock().remove(&id)?;
        let failure = failed.map(|reason| self.fail(p.rank, reason));
        match &p.then {
            Then::Wake(slot) => slot.fill(match &failure {
                None => Ok(()),
                Some(e) => Err(e.to_string()),
            }),
            Then::SetNotify { seg, id, value, .. } if failure.is_none() => {
                let _ = seg.notifications.set(*id, *value);
            }
            _ => {}
        }
        before_settle(&p, failure.as_ref());
        self.settle(p.rank, p.queue, failure);
        Some(p.rank)
    }

    /// A request to `rank` failed with `reason`: marks the peer corrupt
    /// (saying so once) and returns the error its queue's `wait` fails with.
    pub fn fail(&self, rank: Rank, reason: String) -> Error {
        if let Ok(peers) = self.peers() {
            if peers.peer_ok(rank).is_ok() {
                tracing::warn!(
                    rank = rank.0,
                    "a request to {rank} failed ({reason}); marking it corrupt"
                );
            }
            peers.mark(rank, RankState::Corrupt);
        }
        Error::RdmaFailed { rank, reason }
    }

    /// Settles one request to `rank` on queue `queue` (if any).
    pub fn settle(&self, rank: Rank, queue: Option<u32>, failure: Option<Error>) {
        if let (Some(q), Some(b)) = (queue, self.bound.get()) {
            if let Some(o) = b.outstanding.get(q as usize) {
                o.settle(rank, 1, failure);
            }
        }
    }

    /// Waits for the request of `slot` to `rank`, calling `progress` to
    /// read completions, until it completes, the peer is seen gone (after
    /// one more look: it may have answered first) or `until` passes
    /// (failing as a timeout of `op`).
    pub fn wait(
        &self,
        rank: Rank,
        slot: &Slot,
        until: Option<Instant>,
        op: &'static str,
        progress: impl Fn(),
    ) -> Result<()> {
        let peers = self.peers()?;
        let mut done = slot.done.lock().unwrap_or_else(|e| e.into_inner());
        let mut last_look = false;
        loop {
            match done.take() {
                Some(Ok(())) => return Ok(()),
                Some(Err(reason)) => return Err(Error::RdmaFailed { rank, reason }),
                None => {}
            }
            if let Err(e) = peers.peer_ok(rank) {
                if last_look {
                    return Err(e);
                }
                last_look = true;
            }
            if until.is_some_and(|t| Instant::now() > t) {
                return Err(Error::Timeout {
                    op,
                    peer: Some(rank),
                });
            }
            drop(done);
            progress();
            done = slot.done.lock().unwrap_or_else(|e| e.into_inner());
            if done.is_none() {
                done = slot
                    .cv
                    .wait_timeout(done, Duration::from_millis(1))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Pending<K, X>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}
