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
