//! A GASPI-style PGAS runtime: one-sided communication into global segments.
//!
//! A job is N ranks (processes). Each rank creates *segments*, blocks of
//! memory that the other ranks write into and read from without the owner
//! taking part. Each segment carries *notification words*: `write_notify`
//! puts data into a peer's segment and then sets a word there; the peer
//! learns of it with `notify_waitsome` and clears it with `notify_reset`.
//! The data is always visible before the word that announces it.
//!
//! How the crate is put together:
//! - `bootstrap`: the authenticated rendezvous at rank 0 and the mesh of
//!   control connections, from the launch environment that the
//!   `gaspi-launch` crate reads ([`LaunchInfo`]: gaspi-run, Slurm, Open
//!   MPI, PMI).
//! - `transport`: one trait, one module per way of reaching a peer
//!   (shared memory and CUDA IPC on one host; TCP and RDMA verbs between
//!   hosts); chosen per pair of ranks at init.
//! - `progress`: the progress engine thread serving what cannot be
//!   one-sided, and noticing peers that die.
//! - `ops`, `queue`, `collectives`: the GASPI calls, checked once above the
//!   transports.
//!
//! Memory and notification words themselves live in the sibling crates
//! `gaspi-segments` and `gaspi-notify`; the launchers (`gaspi-run`,
//! `gaspi_run`, self-launch) in `gaspi-launch`. The library installs no
//! log subscriber: a program that wants the runtime's `tracing` output
//! installs one, e.g. `gaspi_launch::init_logging()` (feature `logging`),
//! which reads `GASPI_LOG`.
//!
//! ```no_run
//! use gaspi::{Config, Gaspi, Group, Memory, NotifyId, Queue, Rank, SegId, Timeout};
//! let gaspi = Gaspi::init(Config::from_env()?)?;
//! let seg = gaspi.segment_create(SegId(0), 1 << 20, Memory::Host, Group::ALL, Timeout::Block)?;
//! let next = Rank((gaspi.rank().0 + 1) % gaspi.size());
//! gaspi.write_notify(&seg, 0, next, SegId(0), 0, 4096, NotifyId(7), 1, Queue(0))?;
//! gaspi.wait(Queue(0), Timeout::Block)?;
//! let id = gaspi.notify_waitsome(SegId(0), NotifyId(0), 64, Timeout::Ms(1000))?;
//! let value = gaspi.notify_reset(SegId(0), id)?;
//! # Ok::<(), gaspi::Error>(())
//! ```

mod atomics;
mod base;
mod collectives;
mod context;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod gaspi;
pub mod gpu;
mod groups;
mod lists;
mod model;
mod net;
mod ops;
mod passive;
mod progress;
mod protocol;
mod queue;
mod segments;
mod transport;
mod waiter_progress;

// `Gaspi::init`'s self-launch and lifeline (`crate::launcher::relaunch_self`,
// `crate::launcher::adopt_lifeline`) come from the launch crate.
use gaspi_launch as launcher;

pub use collectives::allreduce::{ReduceOp, Reducible, ALLREDUCE_BYTES_MAX, ALLREDUCE_ELEM_MAX};
pub use context::{Gaspi, StartupStats};
/// The device-side API's Rust half (kernel argument, ring, NVRTC), for
/// programs that launch their own kernels.
pub use gaspi_gpu_kernels as kernels;
/// How this process was launched ([`Config::launch`]), from the
/// `gaspi-launch` crate.
pub use gaspi_launch::{LaunchInfo, Launcher};
/// The gdrcopy binding behind [`NotificationPlacement::Gdrcopy`]; its
/// [`gdrcopy_available`](gdrcopy::gdrcopy_available) says whether this host
/// can use it, and if not why.
pub use gaspi_notify::gdrcopy;
/// GPU contexts, memory and streams (`gaspi-segments`' GPU layer).
pub use gaspi_segments::gpu as cuda;
pub use lists::ListElem;
pub use model::config::{
    Config, NotificationPlacement, TransportChoice, ALLREDUCE_ELEM_LIMIT, DEFAULT_PEER_TIMEOUT,
    DEFAULT_SEGMENT_SIZE_MAX, LONG_SPIN, SEGMENT_SIZE_CEILING, SHORT_SPIN,
};
pub use model::descriptor::{SegmentDescriptor, TransportKey};
pub use model::error::{Error, Result, Side};
pub use model::ids::{Group, Memory, NotifyId, Queue, Rank, RankState, SegId, Timeout};
pub use model::stats::Statistics;
pub use passive::PASSIVE_MAX;
pub use segments::Segment;

/// The network transports of this build (its cargo features `verbs` and
/// `libfabric`), preferred first: the names `GASPI_TRANSPORT` takes besides
/// `auto` and `tcp`, each also the name of the feature that builds it.
/// Empty in a build with neither.
pub fn network_transports() -> impl Iterator<Item = &'static str> {
    transport::registry::NETWORK.iter().map(|(name, _)| *name)
}
