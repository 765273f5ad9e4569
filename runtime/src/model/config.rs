//! Configuration: GPI-2's defaults, overridable from the environment and a builder.
//!
//! `Config::from_env()` reads two things: how this process was launched
//! ([`LaunchInfo`], read by the `gaspi-launch` crate: `gaspi-run`, Slurm,
//! Open MPI, PMI or nothing) and tuning variables (`GASPI_QUEUE_NUM`, ...).
//! The builder methods override both.

use crate::model::error::{Error, Result};
use gaspi_launch::LaunchInfo;
use std::time::Duration;

/// Spin budget of waiters when every rank of the host has a core of its own.
pub const LONG_SPIN: Duration = Duration::from_millis(2);
/// Spin budget of waiters on an oversubscribed host.
pub const SHORT_SPIN: Duration = Duration::from_micros(20);

/// Smallest same-host write that a waiting target helps copy, by default
/// (see [`Config::copy_assist_min`]).
pub const DEFAULT_COPY_ASSIST_MIN: u64 = 128 << 10;
/// The largest write between GPU memories gathered into one copy kernel
/// by default ([`Config::gpu_batch_max`]): 8 MiB.
pub const DEFAULT_GPU_BATCH_MAX: u64 = 8 << 20;
/// The most bytes of writes between two GPUs held back behind a busy
/// queue stream for one `cuMemcpyBatchAsync`, by default
/// ([`Config::gpu_engine_batch`]): 16 MiB.
pub const DEFAULT_GPU_ENGINE_BATCH: u64 = 16 << 20;

/// Most elements of an allreduce by default (GPI-2's default
/// `allreduce_elem_max`; see [`crate::Config::allreduce_elem_max`]).
pub const ALLREDUCE_ELEM_MAX: usize = 255;
/// Most bytes of an allreduce's buffer by default (255 doubles): 8 times
/// the configured `allreduce_elem_max`.
pub const ALLREDUCE_BYTES_MAX: usize = 255 * 8;
/// The largest [`Config::allreduce_elem_max`]: 8192 elements (64 KiB of
/// 8-byte elements per allreduce slot). The C interface runs larger
/// allreduces in pieces of this size.
pub const ALLREDUCE_ELEM_LIMIT: u32 = 8192;

/// Largest segment by default (see [`Config::segment_size_max`]): 1 TiB.
///
/// A fixed value rather than this host's physical memory, so that every
/// rank of a job (on whichever host) accepts and refuses the same sizes,
/// and `segment_create` cannot succeed on some members and fail on
/// others. 1 TiB is more than any single GPU's memory and the physical
/// memory of nearly every node, and far below [`SEGMENT_SIZE_CEILING`],
/// so page rounding and the notification area that follows the data can
/// never overflow. Larger (sparse, over-committed) host segments can be
/// allowed with `GASPI_SEGMENT_SIZE_MAX`.
pub const DEFAULT_SEGMENT_SIZE_MAX: u64 = 1 << 40;

/// The largest value [`Config::segment_size_max`] may take: 2^56 bytes
/// (64 PiB), the user address space of 64-bit Linux with 5-level paging.
/// No segment larger than this can ever be mapped, and below it every
/// size computation of a segment (page and GPU-page rounding, the
/// notification area after the data, `offset + size`) stays far from
/// `u64::MAX` and `isize::MAX`.
pub const SEGMENT_SIZE_CEILING: u64 = 1 << 56;

/// Limits and settings of a job.
///
/// ```
/// use gaspi::Config;
/// let config = Config::default().queue_num(4).notification_num(1024);
/// assert_eq!(config.queue_num, 4);
/// assert_eq!(config.segment_max, 255);
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// Number of segment ids (ids are `0..segment_max`); at most 255.
    pub segment_max: u32,
    /// Notification words per segment.
    pub notification_num: u32,
    /// Queues created at init.
    pub queue_num: u32,
    /// Most queues that may exist.
    pub queue_max: u32,
    /// Requests a queue holds before `wait` must be called.
    pub queue_size_max: u32,
    /// Largest single transfer in bytes.
    pub transfer_size_max: u64,
    /// Largest segment in bytes (`GASPI_SEGMENT_SIZE_MAX`): larger sizes
    /// are refused with [`Error::SegmentTooLarge`] before anything is
    /// mapped or sent; [`DEFAULT_SEGMENT_SIZE_MAX`] (1 TiB) by default, at
    /// most [`SEGMENT_SIZE_CEILING`].
    pub segment_size_max: u64,
    /// Most elements of a list operation.
    pub rw_list_elem_max: u32,
    /// Most groups (`Group::ALL` included); at most 256.
    pub group_max: u32,
    /// Most elements of an allreduce (of 8-byte elements: an allreduce
    /// moves at most 8 times this many bytes), as GPI-2's
    /// `allreduce_elem_max`: [`crate::ALLREDUCE_ELEM_MAX`] (255) by
    /// default, at most [`ALLREDUCE_ELEM_LIMIT`]. Every rank keeps
    /// `group_max * (ranks + 1)` slots of this many 8-byte elements in its
    /// system segment (sparse memory: touched only by the allreduces that
    /// run; but registered with an RDMA device as a whole).
    pub allreduce_elem_max: u32,
    /// How long init waits for the other ranks.
    pub init_timeout: Duration,
    /// How long a waiter spins before it sleeps; `None` chooses by load:
    /// [`LONG_SPIN`] when this host's ranks fit its cores (a spinning waiter
    /// then steals nobody's core and wakes fastest), [`SHORT_SPIN`] when the
    /// host is oversubscribed (spinning would starve the writer it waits for).
    pub spin: Option<Duration>,
    /// How this process was launched.
    pub launch: LaunchInfo,
    /// Ranks to start when the program runs without a launcher (see
    /// [`Config::standalone_ranks`]).
    pub standalone_ranks: u32,
    /// The GPU whose streams carry this rank's GPU copies; `None`: the
    /// device of its first GPU segment, or device 0 (`GASPI_GPU_DEVICE`).
    pub gpu_device: Option<u32>,
    /// Page-lock (register with CUDA) a host segment the first time a GPU
    /// copy reads or writes it, so copies run at full DMA speed and are
    /// truly asynchronous (`GASPI_PIN_HOST_SEGMENTS=0` to turn off).
    pub pin_host_segments: bool,
    /// Let the owner of a same-host GPU segment run the copies a CPU rank
    /// posts into it (`gpu/owner_copy.rs`), instead of the writer's own
    /// CUDA stream, which would time-slice the GPU with the owner's kernels
    /// (`GASPI_GPU_OWNER_COPIES=0` to turn off).
    pub gpu_owner_copies: bool,
    /// Where the notification words of this rank's GPU segments live
    /// (`GASPI_GPU_NOTIFICATIONS=host-mapped|device|gdrcopy`).
    pub gpu_notifications: NotificationPlacement,
    /// Writes of at least this many bytes into a same-host rank's host
    /// segment are copied by the writer and, while it waits (spins) for
    /// a notification or in a barrier, by the target too (a
    /// target-assisted copy; `runtime/src/protocol/assisted_copy.rs`).
    /// `None` chooses by load: `DEFAULT_COPY_ASSIST_MIN` (128 KiB) when this host's
    /// ranks fit its cores, never on an oversubscribed host (a helper there
    /// would take the core of a rank that computes). `Some(0)`: never.
    /// `GASPI_COPY_ASSIST_MIN` (bytes; 0 turns it off).
    pub copy_assist_min: Option<u64>,
    /// Writes between GPU memories of `gpu_batch_min..=gpu_batch_max`
    /// bytes posted behind other GPU work of their queue are gathered into
    /// one copy kernel per window instead of the copy engine
    /// (`runtime/src/gpu/copy_batch.rs`, decision 0046).
    /// `GASPI_GPU_BATCH_MIN` (bytes); 0, the default, turns it off: the
    /// kernel needs a free multiprocessor on the writer's GPU.
    pub gpu_batch_min: u64,
    /// The largest write gathered (`GASPI_GPU_BATCH_MAX`, bytes; default
    /// 8 MiB: from 16 MiB the copy engine is as fast). Below 4 GiB, and
    /// not below `gpu_batch_min` while gathering is on.
    pub gpu_batch_max: u64,
    /// Writes from one GPU's memory into another GPU's posted while their
    /// queue's stream is still busy with earlier work are gathered and
    /// handed to the copy engine as one `cuMemcpyBatchAsync` at the
    /// queue's next notification, read or `wait`, or once this many bytes
    /// are gathered (`runtime/src/gpu/copy_batch.rs`, decision 0054). No
    /// multiprocessor is needed, so it is on by default (16 MiB) while the
    /// copy kernel ([`Config::gpu_batch_min`]) is off.
    /// `GASPI_GPU_ENGINE_BATCH` (bytes); 0 turns it off: every write its
    /// own `cuMemcpyAsync`.
    pub gpu_engine_batch: u64,
    /// How peers are reached (`GASPI_TRANSPORT=auto|tcp`): `Auto` takes
    /// shared memory for ranks on this host and TCP for the others; `Tcp`
    /// takes TCP for every other rank, even on this host (to test or
    /// measure the network path on one machine).
    pub transport: TransportChoice,
    /// The RDMA device (and port) to use (`GASPI_NET_DEVICE=name[:port]`,
    /// or a comma-separated list from which rank `r` takes entry
    /// `r % len`); `None`: the first device, port 1. Under
    /// `GASPI_TRANSPORT=libfabric` the entry's name is the libfabric
    /// domain (`cxi0`, `rxe0`, an interface for `tcp;ofi_rxm`).
    pub net_device: Option<String>,
    /// The GID index RoCE traffic uses (`GASPI_NET_GID_INDEX`); `None`:
    /// the first RoCE v2 GID, preferring an IPv4-mapped one.
    pub net_gid_index: Option<u8>,
    /// Whether remote atomics over RDMA are NIC atomics
    /// (`GASPI_NET_ATOMICS=nic`) rather than applied by the owner
    /// (`owner`, the default: exact whatever else touches the word).
    pub net_atomics_nic: bool,
    /// The libfabric provider (`GASPI_NET_PROVIDER`, e.g. `tcp;ofi_rxm`,
    /// `verbs;ofi_rxm`, `cxi`, `efa`); `None`: the best one offered.
    pub net_provider: Option<String>,
    /// At most how many bytes of remote CQ data libfabric notifications
    /// ride on (`GASPI_NET_CQ_DATA=0|4|8`, decision 0052); `None`: what
    /// the provider offers. 4 packs them as `verbs;ofi_rxm` and `efa` do
    /// on any provider, 0 writes every word apart. The same on every rank.
    pub net_cq_data: Option<u8>,
    /// How long a peer's host may leave this rank's traffic unanswered
    /// (no acknowledgement of data or heartbeats sent) before the peer is
    /// declared dead (`GASPI_PEER_TIMEOUT_MS`, default
    /// [`DEFAULT_PEER_TIMEOUT`], at least 1 s). The answers come from the
    /// peer's kernel, not its process: a stopped or busy rank is never
    /// declared dead by it, only a host that is gone or cut off (decision
    /// 0018). Measured from the moment the host went silent, whatever the
    /// connection did before: death is declared no earlier than this after
    /// a cut and about 1.2 times it at most; a shorter partition costs only
    /// timeouts (decision 0033). Connection attempts to a peer (made on
    /// first use) that nobody answers are repeated for as long, within the
    /// call's own timeout (decision 0056).
    pub peer_timeout: Duration,
    /// Largest job whose ranks get the whole endpoint table at start-up
    /// (`GASPI_ENDPOINTS_EAGER_MAX`, default 16): in larger jobs each rank
    /// fetches a peer's endpoint from rank 0 on first use, and maps a
    /// same-host peer's system segment on first use (decision 0065).
    pub endpoints_eager_max: u32,
    /// Children per rank of the start-up tree over which the start barrier
    /// and news of deaths travel (`GASPI_STARTUP_FANOUT`, default 16, at
    /// least 1): rank 0 holds this many control connections at start, not
    /// one per rank (decision 0065).
    pub startup_fanout: u32,
}

/// Default of [`Config::peer_timeout`]: 90 s, far above any timeout a
/// program or test gives a call, so only a host that is really gone trips
/// it.
pub const DEFAULT_PEER_TIMEOUT: Duration = Duration::from_secs(90);

/// Which transport reaches the other ranks (see [`Config::transport`]).
///
/// ```
/// use gaspi::TransportChoice;
/// assert_eq!("tcp".parse::<TransportChoice>()?, TransportChoice::Tcp);
/// assert!("carrier-pigeon".parse::<TransportChoice>().is_err());
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TransportChoice {
    /// Shared memory on this host, TCP to other hosts.
    #[default]
    Auto,
    /// TCP to every other rank.
    Tcp,
    /// RDMA verbs to every other rank, even on this host (needs the
    /// `verbs` feature and an RDMA device on every rank; init fails
    /// otherwise, naming what is missing).
    Verbs,
    /// libfabric to every other rank, even on this host (needs the
    /// `libfabric` feature and a provider with RMA on every rank).
    Libfabric,
}

impl std::str::FromStr for TransportChoice {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "auto" | "" => Ok(TransportChoice::Auto),
            "tcp" => Ok(TransportChoice::Tcp),
            "verbs" => Ok(TransportChoice::Verbs),
            "libfabric" => Ok(TransportChoice::Libfabric),
            other => Err(Error::Config(format!(
                "GASPI_TRANSPORT={other:?}: expected auto, tcp, verbs or libfabric"
            ))),
        }
    }
}

/// Where the notification words of a GPU segment live.
///
/// Each placement makes one side's accesses cheap and the other's dear: a
/// word is fast to poll where it lives, and the writer pays for reaching
/// it.
///
/// ```
/// use gaspi::{Config, NotificationPlacement};
/// let c = Config::default().gpu_notifications(NotificationPlacement::Device);
/// assert_eq!(c.gpu_notifications.to_string(), "device");
/// let parsed: NotificationPlacement = "host-mapped".parse()?;
/// assert_eq!(parsed, NotificationPlacement::HostMapped);
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NotificationPlacement {
    /// Pinned host memory mapped into the GPU (the default; works on every
    /// machine): CPU writers set a word with a plain store, kernels poll it
    /// across PCIe (about a microsecond per look).
    #[default]
    HostMapped,
    /// GPU memory next to the segment's data: kernels of the owner poll
    /// their own memory and kernels of a peer GPU store into it over
    /// NVLink or PCIe peer-to-peer, the fastest for GPU-to-GPU traffic.
    /// CPU writers reach it through stream memory operations
    /// (`cuStreamWriteValue32`, microseconds), and the owner's CPU waits
    /// by polling it with copies and resets it with a one-thread kernel:
    /// choose it when kernels, not CPU threads, wait.
    Device,
    /// GPU memory, as [`Device`](Self::Device), and also mapped into the
    /// owner's process through gdrcopy (`libgdrapi.so.2` and the `gdrdrv`
    /// driver, `/dev/gdrdrv`): the owner's CPU polls the words with plain
    /// loads across the BAR instead of copies, and sets them (its own
    /// notifications, and those its inbox thread serves for CPU peers when
    /// no copy is pending) with a store instead of a stream operation.
    /// Where gdrcopy is missing, a segment falls back to
    /// [`HostMapped`](Self::HostMapped) with a warning that says why, and
    /// [`Gaspi::segment_notification_placement`](crate::Gaspi::segment_notification_placement)
    /// reports the placement actually used.
    Gdrcopy,
}

impl std::fmt::Display for NotificationPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NotificationPlacement::HostMapped => "host-mapped",
            NotificationPlacement::Device => "device",
            NotificationPlacement::Gdrcopy => "gdrcopy",
        })
    }
}

impl std::str::FromStr for NotificationPlacement {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.trim() {
            "host-mapped" | "host" => Ok(NotificationPlacement::HostMapped),
            "device" => Ok(NotificationPlacement::Device),
            "gdrcopy" => Ok(NotificationPlacement::Gdrcopy),
            other => Err(Error::Config(format!(
                "GASPI_GPU_NOTIFICATIONS={other:?}: expected host-mapped, device or gdrcopy"
            ))),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            segment_max: 255,
            notification_num: 65_536,
            queue_num: 8,
            queue_max: 16,
            queue_size_max: 1024,
            transfer_size_max: 1 << 30,
            segment_size_max: DEFAULT_SEGMENT_SIZE_MAX,
            rw_list_elem_max: 255,
            group_max: 32,
            allreduce_elem_max: ALLREDUCE_ELEM_MAX as u32,
            init_timeout: Duration::from_secs(60),
            spin: None,
            launch: LaunchInfo::standalone(),
            standalone_ranks: 1,
            gpu_device: None,
            pin_host_segments: true,
            gpu_owner_copies: true,
            gpu_notifications: NotificationPlacement::HostMapped,
            copy_assist_min: None,
            gpu_batch_min: 0,
            gpu_batch_max: DEFAULT_GPU_BATCH_MAX,
            gpu_engine_batch: DEFAULT_GPU_ENGINE_BATCH,
            transport: TransportChoice::Auto,
            net_device: None,
            net_gid_index: None,
            net_atomics_nic: false,
            net_provider: None,
            net_cq_data: None,
            peer_timeout: DEFAULT_PEER_TIMEOUT,
            endpoints_eager_max: 16,
            startup_fanout: 16,
        }
    }
}

fn env_u64(name: &str) -> Result<Option<u64>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .map(Some)
            .map_err(|_| Error::Config(format!("{name}={v:?} is not a non-negative integer"))),
        Err(_) => Ok(None),
    }
}

/// A `u32` setting: a value beyond `u32::MAX` is refused, not truncated.
fn env_u32(name: &str) -> Result<Option<u32>> {
    env_u64(name)?
        .map(|v| {
            u32::try_from(v).map_err(|_| Error::Config(format!("{name}={v} is above {}", u32::MAX)))
        })
        .transpose()
}

/// Rank `rank`'s entry of a `GASPI_NET_DEVICE` value (entry `rank % len`
/// of a comma-separated list, trimmed), as its device name and the port
/// written after a `:`, if any; `None` when unset or empty. The verbs
/// transport opens that device and port, the libfabric transport that
/// domain.
#[cfg(any(feature = "verbs", feature = "libfabric"))]
pub(crate) fn net_device_entry(spec: Option<&str>, rank: u32) -> Option<(&str, Option<&str>)> {
    let spec = spec.map(str::trim).filter(|s| !s.is_empty())?;
    let entries: Vec<&str> = spec.split(',').map(str::trim).collect();
    let entry = entries[rank as usize % entries.len()];
    Some(match entry.split_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (entry, None),
    })
}

impl Config {
    /// Reads the launch environment and the `GASPI_*` tuning variables.
    pub fn from_env() -> Result<Config> {
        let mut c = Config {
            launch: LaunchInfo::from_env()?,
            ..Config::default()
        };
        if let Some(v) = env_u32("GASPI_SEGMENT_MAX")? {
            c.segment_max = v;
        }
        if let Some(v) = env_u32("GASPI_NOTIFICATION_NUM")? {
            c.notification_num = v;
        }
        if let Some(v) = env_u32("GASPI_QUEUE_NUM")? {
            c.queue_num = v;
        }
        if let Some(v) = env_u32("GASPI_QUEUE_SIZE_MAX")? {
            c.queue_size_max = v;
        }
        if let Some(v) = env_u64("GASPI_TRANSFER_SIZE_MAX")? {
            c.transfer_size_max = v;
        }
        if let Some(v) = env_u64("GASPI_SEGMENT_SIZE_MAX")? {
            c.segment_size_max = v;
        }
        if let Some(v) = env_u64("GASPI_INIT_TIMEOUT_MS")? {
            c.init_timeout = Duration::from_millis(v);
        }
        if let Some(v) = env_u64("GASPI_SPIN_US")? {
            c.spin = Some(Duration::from_micros(v));
        }
        if let Some(v) = env_u32("GASPI_GPU_DEVICE")? {
            c.gpu_device = Some(v);
        }
        if let Some(v) = env_u64("GASPI_PIN_HOST_SEGMENTS")? {
            c.pin_host_segments = v != 0;
        }
        if let Some(v) = env_u64("GASPI_GPU_OWNER_COPIES")? {
            c.gpu_owner_copies = v != 0;
        }
        if let Ok(v) = std::env::var("GASPI_GPU_NOTIFICATIONS") {
            c.gpu_notifications = v.parse()?;
        }
        if let Some(v) = env_u64("GASPI_COPY_ASSIST_MIN")? {
            c.copy_assist_min = Some(v);
        }
        if let Some(v) = env_u64("GASPI_GPU_BATCH_MIN")? {
            c.gpu_batch_min = v;
        }
        if let Some(v) = env_u64("GASPI_GPU_BATCH_MAX")? {
            c.gpu_batch_max = v;
        }
        if let Some(v) = env_u64("GASPI_GPU_ENGINE_BATCH")? {
            c.gpu_engine_batch = v;
        }
        if let Some(v) = env_u64("GASPI_PEER_TIMEOUT_MS")? {
            c.peer_timeout = Duration::from_millis(v);
        }
        if let Some(v) = env_u64("GASPI_ENDPOINTS_EAGER_MAX")? {
            c.endpoints_eager_max = v.min(u32::MAX as u64) as u32;
        }
        if let Some(v) = env_u64("GASPI_STARTUP_FANOUT")? {
            c.startup_fanout = v.clamp(1, u32::MAX as u64) as u32;
        }
        if let Ok(v) = std::env::var("GASPI_TRANSPORT") {
            c.transport = v.parse()?;
        }
        if let Ok(v) = std::env::var("GASPI_NET_DEVICE") {
            c.net_device = Some(v).filter(|v| !v.trim().is_empty());
        }
        if let Some(v) = env_u32("GASPI_NET_GID_INDEX")? {
            c.net_gid_index = Some(
                u8::try_from(v)
                    .map_err(|_| Error::Config(format!("GASPI_NET_GID_INDEX={v} is above 255")))?,
            );
        }
        if let Ok(v) = std::env::var("GASPI_NET_PROVIDER") {
            c.net_provider = Some(v.trim().to_string()).filter(|v| !v.is_empty());
        }
        if let Ok(v) = std::env::var("GASPI_NET_CQ_DATA") {
            c.net_cq_data = match v.trim() {
                "" | "auto" => None,
                "off" | "0" => Some(0),
                "4" => Some(4),
                "8" => Some(8),
                other => {
                    return Err(Error::Config(format!(
                        "GASPI_NET_CQ_DATA={other:?}: expected auto, 0, 4 or 8"
                    )))
                }
            };
        }
        if let Ok(v) = std::env::var("GASPI_NET_ATOMICS") {
            c.net_atomics_nic = match v.trim() {
                "nic" => true,
                "owner" | "" => false,
                other => {
                    return Err(Error::Config(format!(
                        "GASPI_NET_ATOMICS={other:?}: expected owner or nic"
                    )))
                }
            };
        }
        Ok(c)
    }

    /// Sets how long an unanswering host is given (see
    /// [`Config::peer_timeout`]).
    pub fn peer_timeout(mut self, t: Duration) -> Self {
        self.peer_timeout = t;
        self
    }

    /// Chooses how other ranks are reached (see [`Config::transport`]).
    pub fn transport(mut self, choice: TransportChoice) -> Self {
        self.transport = choice;
        self
    }

    /// Sets the range of writes between GPU memories gathered into one
    /// copy kernel (see [`Config::gpu_batch_min`]; `min` 0 turns it off).
    pub fn gpu_batch(mut self, min: u64, max: u64) -> Self {
        self.gpu_batch_min = min;
        self.gpu_batch_max = max;
        self
    }

    /// Sets how many bytes of writes between GPU memories may be gathered
    /// behind a busy queue stream for one copy-engine batch (see
    /// [`Config::gpu_engine_batch`]; 0 turns it off).
    pub fn gpu_engine_batch(mut self, bytes: u64) -> Self {
        self.gpu_engine_batch = bytes;
        self
    }

    /// Sets the number of segment ids.
    pub fn segment_max(mut self, n: u32) -> Self {
        self.segment_max = n;
        self
    }
    /// Sets the most elements of an allreduce (see
    /// [`Config::allreduce_elem_max`]).
    ///
    /// ```
    /// use gaspi::{Config, ALLREDUCE_ELEM_LIMIT};
    /// assert_eq!(Config::default().allreduce_elem_max, 255);
    /// assert!(Config::default().allreduce_elem_max(4096).validate().is_ok());
    /// assert!(Config::default().allreduce_elem_max(ALLREDUCE_ELEM_LIMIT + 1).validate().is_err());
    /// ```
    pub fn allreduce_elem_max(mut self, n: u32) -> Self {
        self.allreduce_elem_max = n;
        self
    }
    /// Sets the notification words per segment.
    pub fn notification_num(mut self, n: u32) -> Self {
        self.notification_num = n;
        self
    }
    /// Sets the queues created at init.
    pub fn queue_num(mut self, n: u32) -> Self {
        self.queue_num = n;
        self
    }
    /// Sets the queue depth.
    pub fn queue_size_max(mut self, n: u32) -> Self {
        self.queue_size_max = n;
        self
    }
    /// Sets the largest transfer.
    pub fn transfer_size_max(mut self, n: u64) -> Self {
        self.transfer_size_max = n;
        self
    }
    /// Sets the largest segment in bytes (1..=[`SEGMENT_SIZE_CEILING`],
    /// checked at init).
    ///
    /// ```
    /// use gaspi::{Config, DEFAULT_SEGMENT_SIZE_MAX};
    /// assert_eq!(Config::default().segment_size_max, DEFAULT_SEGMENT_SIZE_MAX);
    /// let c = Config::default().segment_size_max(1 << 30);
    /// assert_eq!(c.segment_size_max, 1 << 30);
    /// assert!(Config::default().segment_size_max(0).validate().is_err());
    /// ```
    pub fn segment_size_max(mut self, n: u64) -> Self {
        self.segment_size_max = n;
        self
    }
    /// Sets how long init waits for the other ranks.
    pub fn init_timeout(mut self, d: Duration) -> Self {
        self.init_timeout = d;
        self
    }
    /// Sets the GPU whose streams carry this rank's GPU copies.
    pub fn gpu_device(mut self, device: u32) -> Self {
        self.gpu_device = Some(device);
        self
    }
    /// Sets whether host segments are page-locked on their first GPU copy.
    pub fn pin_host_segments(mut self, pin: bool) -> Self {
        self.pin_host_segments = pin;
        self
    }
    /// Sets whether owners of GPU segments run the copies CPU ranks post.
    pub fn gpu_owner_copies(mut self, on: bool) -> Self {
        self.gpu_owner_copies = on;
        self
    }
    /// Sets where the notification words of GPU segments live.
    pub fn gpu_notifications(mut self, placement: NotificationPlacement) -> Self {
        self.gpu_notifications = placement;
        self
    }
    /// Sets how long waiters spin before they sleep.
    pub fn spin(mut self, d: Duration) -> Self {
        self.spin = Some(d);
        self
    }
    /// Sets the smallest same-host write a waiting target helps copy; 0
    /// turns target-assisted copies off.
    ///
    /// ```
    /// use gaspi::Config;
    /// let off = Config::default().copy_assist_min(0);
    /// assert_eq!(off.effective_copy_assist_min(), None);
    /// let on = Config::default().copy_assist_min(1 << 20);
    /// assert_eq!(on.effective_copy_assist_min(), Some(1 << 20));
    /// ```
    pub fn copy_assist_min(mut self, bytes: u64) -> Self {
        self.copy_assist_min = Some(bytes);
        self
    }

    /// The smallest write copied with the target's help, if any is: the
    /// configured size, or by load as [`Config::copy_assist_min`] says.
    pub fn effective_copy_assist_min(&self) -> Option<u64> {
        match self.copy_assist_min {
            Some(0) => None,
            Some(n) => Some(n),
            None => (self.local_ranks_fit_cores()).then_some(DEFAULT_COPY_ASSIST_MIN),
        }
    }

    /// Whether every rank of this host can have a core of its own.
    fn local_ranks_fit_cores(&self) -> bool {
        self.local_threads_fit_cores(1)
    }

    /// Whether `per_rank` busy threads of every rank of this host fit its
    /// cores.
    pub(crate) fn local_threads_fit_cores(&self, per_rank: u32) -> bool {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        self.launch.local_size.saturating_mul(per_rank) <= cores
    }

    /// The spin budget in force: the configured one, or one chosen from the
    /// number of ranks on this host and the cores this process may use.
    pub fn effective_spin(&self) -> Duration {
        self.spin.unwrap_or_else(|| {
            if self.local_ranks_fit_cores() {
                LONG_SPIN
            } else {
                SHORT_SPIN
            }
        })
    }

    /// When the program was started without a launcher, start `n` ranks of
    /// it on this host instead of running as a single rank.
    ///
    /// [`crate::Gaspi::init`] then acts as `gaspi-run -n n` for the current
    /// executable and arguments and exits the process with the job's exit
    /// code; it returns only in the launched ranks. Under a launcher this
    /// setting is ignored.
    pub fn standalone_ranks(mut self, n: u32) -> Self {
        self.standalone_ranks = n;
        self
    }

    /// Checks the limits against GASPI's and this implementation's bounds.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.segment_max == 0 || self.segment_max > 255 {
            return bad(format!("segment_max {} must be 1..=255", self.segment_max));
        }
        if self.notification_num == 0 || self.notification_num > 1 << 24 {
            return bad(format!(
                "notification_num {} must be 1..=16777216",
                self.notification_num
            ));
        }
        if self.queue_max == 0 || self.queue_max > 16 {
            return bad(format!("queue_max {} must be 1..=16", self.queue_max));
        }
        if self.queue_num == 0 || self.queue_num > self.queue_max {
            return bad(format!(
                "queue_num {} must be 1..={}",
                self.queue_num, self.queue_max
            ));
        }
        if self.queue_size_max == 0 {
            return bad("queue_size_max must be at least 1".into());
        }
        if self.transfer_size_max == 0 {
            return bad("transfer_size_max must be at least 1".into());
        }
        if self.segment_size_max == 0 || self.segment_size_max > SEGMENT_SIZE_CEILING {
            return bad(format!(
                "segment_size_max {} must be 1..={SEGMENT_SIZE_CEILING}",
                self.segment_size_max
            ));
        }
        if self.group_max == 0 || self.group_max > 256 {
            return bad(format!("group_max {} must be 1..=256", self.group_max));
        }
        if self.gpu_batch_max >= u64::from(u32::MAX) {
            return bad(format!(
                "gpu_batch_max (GASPI_GPU_BATCH_MAX) {} must be below {}",
                self.gpu_batch_max,
                u32::MAX
            ));
        }
        if self.gpu_batch_min > self.gpu_batch_max {
            return bad(format!(
                "gpu_batch_min (GASPI_GPU_BATCH_MIN) {} is above gpu_batch_max \
                 (GASPI_GPU_BATCH_MAX) {}: no write would be gathered",
                self.gpu_batch_min, self.gpu_batch_max
            ));
        }
        if self.allreduce_elem_max == 0 || self.allreduce_elem_max > ALLREDUCE_ELEM_LIMIT {
            return bad(format!(
                "allreduce_elem_max {} must be 1..={ALLREDUCE_ELEM_LIMIT}",
                self.allreduce_elem_max
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notification_placements_parse_and_print() {
        for p in [
            NotificationPlacement::HostMapped,
            NotificationPlacement::Device,
            NotificationPlacement::Gdrcopy,
        ] {
            assert_eq!(p.to_string().parse::<NotificationPlacement>().ok(), Some(p));
        }
        assert_eq!(
            " device ".parse::<NotificationPlacement>().ok(),
            Some(NotificationPlacement::Device)
        );
        let bad = "gpu".parse::<NotificationPlacement>().unwrap_err();
        assert!(
            bad.to_string().contains("host-mapped, device or gdrcopy"),
            "{bad}"
        );
        assert_eq!(
            Config::default().gpu_notifications,
            NotificationPlacement::HostMapped
        );
    }

    #[test]
    fn gpu_batch_range_is_checked() {
        let c = Config::default();
        assert_eq!((c.gpu_batch_min, c.gpu_batch_max), (0, 8 << 20));
        assert_eq!(c.gpu_engine_batch, 16 << 20);
        assert!(c.validate().is_ok());
        assert!(Config::default()
            .gpu_batch(65536, 8 << 20)
            .validate()
            .is_ok());
        // Off (min 0) with any maximum below 4 GiB.
        assert!(Config::default().gpu_batch(0, 0).validate().is_ok());
        let e = Config::default()
            .gpu_batch(16 << 20, 8 << 20)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("GASPI_GPU_BATCH_MIN"), "{e}");
        let e = Config::default()
            .gpu_batch(65536, 1 << 32)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("GASPI_GPU_BATCH_MAX"), "{e}");
    }
}
