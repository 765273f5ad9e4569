//! Collectives, built on the runtime's own one-sided notifications.
//!
//! Every rank has an internal *system segment* whose notification words
//! carry the collectives' signals; peers map it at start-up like any other
//! segment. A collective is therefore a pattern of `notify` calls through
//! the same transports as user traffic: whatever transport reaches a peer
//! carries its barrier too, and a waiter sleeps on the futex of its own
//! system segment rather than polling a socket.
//!
//! Collectives are resumable: a call that returns `Timeout` records how far
//! it got in the group's state, and the next call continues from there.

pub(crate) mod allreduce;
pub(crate) mod barrier;

use crate::base::Base;
use crate::model::error::Error;
use crate::model::ids::Rank;

/// How long a failing collective waits for the progress engine to read
/// every connection (it never blocks: milliseconds).
const SWEEP_BOUND: std::time::Duration = std::time::Duration::from_millis(500);

/// The error a collective that failed over a gone rank returns: the
/// member found dead first, if any (decision 0018), else `e`.
///
/// A call can learn of a rank's end before the death that caused it: a
/// send to a survivor that terminated because of the death fails, or its
/// orderly end is marked, while the news of the death it passed on before
/// its goodbye still lies unread in this rank's sockets. So when no member
/// is known dead yet, the progress engine first reads every connection
/// (`progress::Sweeps`) and decides every end it finds.
pub(crate) fn first_failure(base: &Base, members: &[Rank], e: Error) -> Error {
    if !matches!(e, Error::PeerDead { .. } | Error::PeerTerminated { .. }) {
        return e;
    }
    if let Some(dead) = base.peers.collective_failure(members, &[]) {
        return dead;
    }
    base.peers.sweep(SWEEP_BOUND);
    base.peers.collective_failure(members, &[]).unwrap_or(e)
}
