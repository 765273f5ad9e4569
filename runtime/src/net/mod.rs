//! The network layer: frames, connections, the job's rendezvous.
//!
//! Everything here moves bytes between ranks and knows nothing of GASPI's
//! calls: [`frame`] cuts a byte stream into length-prefixed frames,
//! [`connection`] writes whole frames to a peer (an outbox for what the
//! socket does not take at once, `sendmsg` of a frame in pieces, a
//! deadline per write), [`auth`] and [`handshake`] prove the job key on
//! every connection, and [`rendezvous`] meets the other ranks at start-up
//! and connects pairs on first use (`pmix`, in a build with the feature
//! `pmix`: the same through a PMIx server). What a frame means is decided by the
//! layer that owns it, above.

pub(crate) mod auth;
pub(crate) mod connection;
pub(crate) mod frame;
pub(crate) mod handshake;
pub(crate) mod log_tally;
pub(crate) mod peers;
#[cfg(feature = "pmix")]
pub(crate) mod pmix;
pub(crate) mod reader;
pub(crate) mod rendezvous;
pub(crate) mod settles;
