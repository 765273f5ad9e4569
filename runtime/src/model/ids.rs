//! Small value types of the API: ranks, ids, queues, timeouts, memory kinds.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{Duration, Instant};

/// A process of the job, `0..size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Rank(pub u32);

/// A segment id, `0..segment_max` (255 by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SegId(pub u8);

/// A notification id within a segment, `0..notification_num`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NotifyId(pub u32);

/// A communication queue, `0..queue_num`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Queue(pub u32);

/// A group of ranks; [`Group::ALL`] holds every rank of the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Group(pub u32);

impl Group {
    /// The group of all ranks, committed at init.
    pub const ALL: Group = Group(0);
}

macro_rules! display_as {
    ($t:ty, $fmt:literal) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, $fmt, self.0)
            }
        }
    };
}
display_as!(Rank, "rank {}");
display_as!(SegId, "segment {}");
display_as!(NotifyId, "notification {}");
display_as!(Queue, "queue {}");
display_as!(Group, "group {}");

/// How long a blocking call may wait.
///
/// Every blocking call takes one. When it runs out, the call returns
/// [`crate::Error::Timeout`], which is not a failure: the operation may be
/// called again (collectives resume where they stopped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// Wait as long as it takes (a dead peer still ends the wait with an error).
    Block,
    /// Do not wait: check once and return.
    Test,
    /// Wait at most this many milliseconds.
    Ms(u64),
}

impl Timeout {
    /// The instant after which the call gives up, `None` for `Block`.
    pub fn deadline(self) -> Option<Instant> {
        match self {
            Timeout::Block => None,
            Timeout::Test => Some(Instant::now()),
            Timeout::Ms(ms) => Some(Instant::now() + Duration::from_millis(ms)),
        }
    }
}

impl From<Duration> for Timeout {
    fn from(d: Duration) -> Self {
        Timeout::Ms(d.as_millis() as u64)
    }
}

/// Where a segment's memory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Memory {
    /// Host memory, shared with same-host peers.
    Host,
    /// Memory of the CUDA device with this ordinal.
    Gpu(u32),
}

/// Health of a rank as this rank sees it: the error-state vector's entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RankState {
    /// Reachable, or not known to be otherwise.
    Healthy,
    /// Ended the job in order (`term`); calls that need it fail.
    Terminated,
    /// Died or became unreachable: a closed connection or a dead process.
    Corrupt,
}

/// A read-modify-write on a u64 of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) enum AtomicOp {
    /// Add (wrapping).
    FetchAdd(u64),
    /// Store `new` if the word equals `comparator`.
    CompareSwap { comparator: u64, new: u64 },
}

impl AtomicOp {
    /// Applies the operation to `word` (sequentially consistent) and
    /// returns the old value.
    pub fn apply(self, word: &std::sync::atomic::AtomicU64) -> u64 {
        use std::sync::atomic::Ordering::SeqCst;
        match self {
            AtomicOp::FetchAdd(v) => word.fetch_add(v, SeqCst),
            AtomicOp::CompareSwap { comparator, new } => {
                match word.compare_exchange(comparator, new, SeqCst, SeqCst) {
                    Ok(old) | Err(old) => old,
                }
            }
        }
    }
}
