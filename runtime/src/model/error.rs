//! The one error type of the runtime.
//!
//! Each variant says what was wrong in words a user can act on, and carries
//! the values involved. Input errors are detected before anything is sent or
//! written anywhere. [`Error::Timeout`] is the distinct "not yet" outcome of
//! blocking calls, not a failure.

use crate::model::ids::{Group, NotifyId, Queue, Rank, SegId};

/// Which side of a transfer a bound refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// the calling rank's segment
    Local,
    /// the target rank's segment
    Remote,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Local => "local",
            Side::Remote => "remote",
        })
    }
}

/// Errors of the GASPI runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The call did not complete within its [`crate::Timeout`]; it may be repeated.
    #[error("timed out in {op}{}", peer.map(|r| format!(" (waiting for {r})")).unwrap_or_default())]
    Timeout {
        /// the call that timed out
        op: &'static str,
        /// the rank it was waiting for, where one alone held it up (a
        /// connection made on first use, a read's or an atomic's answer);
        /// `None` for waits on the local side or on many ranks
        peer: Option<Rank>,
    },
    /// The runtime is not initialised (or was terminated).
    #[error("the GASPI runtime is not initialised")]
    NotInitialized,
    /// A segment id at or above the configured maximum.
    #[error("{seg} is out of range: ids go up to {max} (exclusive)")]
    SegmentIdOutOfRange {
        /// the id
        seg: SegId,
        /// the maximum number of segments
        max: u32,
    },
    /// The segment does not exist (or was deleted) on that rank, or was not registered with us.
    #[error(
        "{seg} of {rank} is unknown here (not created, deleted, or not registered with this rank)"
    )]
    UnknownSegment {
        /// owner
        rank: Rank,
        /// id
        seg: SegId,
    },
    /// A segment with this id already exists.
    #[error("{seg} already exists on this rank")]
    SegmentExists {
        /// id
        seg: SegId,
    },
    /// Offset plus size lies beyond the segment.
    #[error("{side} {seg} of {rank}: bytes {offset}..{end} are out of bounds (the segment has {seg_size} bytes)")]
    OutOfBounds {
        /// local or remote
        side: Side,
        /// owner
        rank: Rank,
        /// id
        seg: SegId,
        /// first byte
        offset: u64,
        /// one past the last byte
        end: u64,
        /// the segment's size
        seg_size: u64,
    },
    /// A notification id outside the segment's notification words.
    #[error(
        "{id} (range of {num}) is out of range for {seg} of {rank}: it has {count} notifications"
    )]
    NotifyIdOutOfRange {
        /// owner
        rank: Rank,
        /// segment
        seg: SegId,
        /// first id
        id: NotifyId,
        /// number of ids asked for
        num: u32,
        /// notifications of the segment
        count: u32,
    },
    /// Notification value 0, which means "not set".
    #[error("notification value 0 is not allowed (0 means 'not notified')")]
    NotifyValueZero,
    /// A rank outside the job.
    #[error("{rank} does not exist: the job has {size} ranks")]
    BadRank {
        /// the rank
        rank: Rank,
        /// job size
        size: u32,
    },
    /// A queue that does not exist.
    #[error("{queue} does not exist: {count} queues are in use")]
    BadQueue {
        /// the queue
        queue: Queue,
        /// number of queues
        count: u32,
    },
    /// The queue holds as many requests as its depth allows; `wait` on it first.
    #[error("{queue} is full ({depth} requests posted since the last wait)")]
    QueueFull {
        /// the queue
        queue: Queue,
        /// its depth
        depth: u32,
    },
    /// A size of 0 where it is not allowed.
    #[error("size 0 is not allowed for {what}")]
    ZeroSize {
        /// what had size 0
        what: &'static str,
    },
    /// A segment larger than the configured maximum
    /// ([`Config::segment_size_max`](crate::Config::segment_size_max)), or
    /// than the address space can hold ([`crate::SEGMENT_SIZE_CEILING`]);
    /// refused before anything is mapped or sent to peers.
    #[error("a segment of {size} bytes exceeds the maximum segment size of {max} bytes")]
    SegmentTooLarge {
        /// the size asked for
        size: u64,
        /// the maximum
        max: u64,
    },
    /// A transfer larger than the configured maximum.
    #[error("{size} bytes exceed the maximum transfer size of {max} bytes")]
    TooLarge {
        /// asked
        size: u64,
        /// maximum
        max: u64,
    },
    /// The peer died or became unreachable.
    #[error("{rank} is dead or unreachable")]
    PeerDead {
        /// the peer
        rank: Rank,
    },
    /// The peer ended the job in order.
    #[error("{rank} has terminated")]
    PeerTerminated {
        /// the peer
        rank: Rank,
    },
    /// No transport reaches the peer from here.
    #[error("no transport reaches {rank}: {reason}")]
    NoTransport {
        /// the peer
        rank: Rank,
        /// why
        reason: String,
    },
    /// A group that does not exist or is not committed.
    #[error("{group} is unknown or not committed")]
    BadGroup {
        /// the group
        group: Group,
    },
    /// The calling rank is not a member of the group.
    #[error("this rank is not a member of {group}")]
    NotGroupMember {
        /// the group
        group: Group,
    },
    /// A list operation or a collective with more elements than allowed.
    #[error("{what} has {count} elements; at most {max} are allowed")]
    TooManyElements {
        /// what was too long ("a list", "an allreduce")
        what: &'static str,
        /// elements asked for
        count: usize,
        /// the limit
        max: u32,
    },
    /// An atomic operation on an offset that is not 8-byte aligned.
    #[error("atomic operations need an 8-byte aligned offset; {offset} is not")]
    Unaligned {
        /// the offset asked for
        offset: u64,
    },
    /// Every queue id is in use (`queue_create`).
    #[error("all {max} queues exist already")]
    NoFreeQueue {
        /// the maximum number of queues
        max: u32,
    },
    /// A queue that still holds requests cannot be deleted.
    #[error("{queue} still holds {posted} requests: wait on it or purge it first")]
    QueueBusy {
        /// the queue
        queue: Queue,
        /// requests posted since its last wait
        posted: u32,
    },
    /// Every group id is in use (`group_create`).
    #[error("all {max} groups exist already (Group::ALL included)")]
    NoFreeGroup {
        /// the maximum number of groups
        max: u32,
    },
    /// A committed group (or `Group::ALL`) cannot be changed.
    #[error("{group} is committed (or is Group::ALL) and cannot be changed")]
    GroupCommitted {
        /// the group
        group: Group,
    },
    /// The rank is already a member of the group.
    #[error("{rank} is already a member of {group}")]
    AlreadyMember {
        /// the group
        group: Group,
        /// the rank
        rank: Rank,
    },
    /// Members of a group being committed disagree about its members.
    #[error("{rank} has a different member list for {group}")]
    GroupMismatch {
        /// the group
        group: Group,
        /// the member whose list differs
        rank: Rank,
    },
    /// Another collective is in progress on the group (it returned `Timeout`
    /// and has not been completed), or the call differs from the one that is.
    #[error(
        "{group} has an unfinished {running}; call it again (same arguments) to complete it first"
    )]
    CollectiveInProgress {
        /// the group
        group: Group,
        /// the collective in progress
        running: &'static str,
    },
    /// The send and receive buffers of a collective differ in length.
    #[error("the send buffer has {send} elements but the receive buffer {recv}")]
    LengthMismatch {
        /// elements to send
        send: usize,
        /// elements to receive
        recv: usize,
    },
    /// A passive message of a size outside 1..=65535 bytes.
    #[error("passive messages carry 1 to {max} bytes, not {size}")]
    PassiveSize {
        /// the size asked for
        size: u64,
        /// the maximum
        max: u64,
    },
    /// A configuration value out of range or unreadable.
    #[error("configuration: {0}")]
    Config(String),
    /// Starting the job failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// The RDMA verbs transport could not be set up (no device, a port
    /// down, a verbs call refused).
    #[error("RDMA verbs: {0}")]
    Verbs(String),
    /// The libfabric transport could not be set up (no provider, the one
    /// named missing, a libfabric call refused).
    #[error("libfabric: {0}")]
    Libfabric(String),
    /// A request to the peer completed with an error on the RDMA fabric;
    /// the peer is marked corrupt.
    #[error("a request to {rank} failed on the RDMA fabric ({reason}); {rank} is marked corrupt")]
    RdmaFailed {
        /// the peer
        rank: Rank,
        /// the completion status
        reason: String,
    },
    /// A peer sent something that does not follow the protocol.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The peer refused a request.
    #[error("{rank} refused the request: {reason}")]
    Refused {
        /// the peer
        rank: Rank,
        /// its reason
        reason: String,
    },
    /// A system call or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// what was being done
        what: String,
        /// the cause
        #[source]
        source: std::io::Error,
    },
    /// Segment memory could not be provided or reached.
    #[error(transparent)]
    Segment(#[from] gaspi_segments::SegmentError),
    /// The GPU layer failed, or this host has no usable CUDA driver
    /// ([`GpuError::NoDriver`](gaspi_segments::gpu::GpuError::NoDriver)).
    #[error(transparent)]
    Gpu(#[from] gaspi_segments::gpu::GpuError),
    /// The owner of a GPU segment refused to run a copy posted into its inbox.
    #[error("{rank} could not run a copy into its GPU segment: {reason}")]
    OwnerCopyFailed {
        /// the owner
        rank: Rank,
        /// why
        reason: &'static str,
    },
    /// The owner of a GPU segment has not taken the copies this process
    /// posted into its inbox (it is stopped or starved): nothing was
    /// posted; `wait` on the queue, then repeat the call.
    #[error("{rank} has not taken the last {entries} copies posted into its GPU segments; wait on the queue and retry")]
    InboxFull {
        /// the owner
        rank: Rank,
        /// requests its inbox lane holds
        entries: u32,
    },
    /// A GPU segment's memory was asked for as a CPU slice.
    #[error("{seg} lives in the memory of GPU {device}: the CPU cannot view it as a slice (use Segment::read/write or a kernel)")]
    GpuSegmentNotHostAccessible {
        /// the segment
        seg: SegId,
        /// its device
        device: u32,
    },
    /// A GPU request ring was asked for with a capacity it cannot have.
    #[error("GPU request ring: {0}")]
    Ring(#[from] gaspi_gpu_kernels::RingError),
}

impl Error {
    /// True for the "not yet" outcome of a blocking call.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// The rank this error names as dead or terminated, if any.
    pub fn failed_rank(&self) -> Option<Rank> {
        match self {
            Error::PeerDead { rank } | Error::PeerTerminated { rank } => Some(*rank),
            _ => None,
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// The launch crate's errors are the runtime's of the same name: a bad
/// launch environment is [`Error::Config`] wherever it was found.
impl From<gaspi_launch::Error> for Error {
    fn from(e: gaspi_launch::Error) -> Self {
        match e {
            gaspi_launch::Error::Config(m) => Error::Config(m),
            gaspi_launch::Error::Bootstrap(m) => Error::Bootstrap(m),
            gaspi_launch::Error::Io { what, source } => Error::Io { what, source },
            other => Error::Bootstrap(other.to_string()),
        }
    }
}

/// Result of runtime calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A notification the caller checked was refused anyway: a bug, reported.
#[cold]
pub(crate) fn notify_error(e: gaspi_notify::NotifyError) -> Error {
    Error::Protocol(e.to_string())
}

/// How long a wait loop may sleep before it looks again: at most `max`,
/// never past `deadline`; `Err(Timeout { op })` once the deadline has
/// passed. Every blocking loop of the runtime naps through this, so none
/// overshoots its timeout by more than one wake-up.
pub(crate) fn nap(
    deadline: Option<std::time::Instant>,
    max: std::time::Duration,
    op: &'static str,
) -> Result<std::time::Duration> {
    match deadline {
        None => Ok(max),
        Some(d) => match d.checked_duration_since(std::time::Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left.min(max)),
            _ => Err(Error::Timeout { op, peer: None }),
        },
    }
}
