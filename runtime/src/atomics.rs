//! The state the atomics keep between calls: requests whose call returned
//! `Timeout` after sending them, for an identical call to adopt (decision
//! 0029). The calls and their semantics are the front's
//! (`gaspi/atomics.rs`).

use crate::model::ids::{AtomicOp, Rank, SegId};
use std::sync::Mutex;

/// The most atomic requests kept for an identical call to adopt.
pub(crate) const MAX_ABANDONED: usize = 1024;

/// What an atomic request asked: an identical call adopts it.
pub(crate) type AtomicKey = (Rank, SegId, u64, AtomicOp);

/// Atomic requests whose call returned `Timeout` after sending them,
/// oldest first, with their tokens (their reply rooms stay in place).
#[derive(Debug, Default)]
pub(crate) struct AbandonedAtomics(Mutex<Vec<(AtomicKey, u64)>>);

impl AbandonedAtomics {
    /// Takes the oldest request that asked for `key`, if any.
    pub(crate) fn adopt(&self, key: &AtomicKey) -> Option<u64> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let at = v.iter().position(|(k, _)| k == key)?;
        Some(v.remove(at).1)
    }

    /// Keeps `token` for an identical call; returns the token of a
    /// request dropped to make room, whose reply room is to be freed.
    pub(crate) fn abandon(&self, key: AtomicKey, token: u64) -> Option<u64> {
        let mut v = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let dropped = (v.len() >= MAX_ABANDONED).then(|| v.remove(0).1);
        v.push((key, token));
        dropped
    }
}
