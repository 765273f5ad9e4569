//! The memory behind GASPI segments, and how a peer reaches it.
//!
//! A segment is a block of memory that every rank of a group may write into
//! and read from without the owner taking part. This crate owns the question
//! "what memory, and how does another process get at it?", and nothing else:
//! it knows no transports, queues or notifications.
//!
//! - [`SharedMemory`]: host memory in an anonymous `memfd`, mapped shared.
//!   A same-host peer opens the owner's descriptor through
//!   `/proc/<pid>/fd/<fd>` and maps the very same pages ([`PeerMapping`]), so
//!   a write is a plain memory copy. A memfd has no name in any file system:
//!   when the last process that maps it exits, however it exits, the kernel
//!   frees it. No shared-memory file can be left behind.
//! - [`ProcessMemory`]: memory the user already had (`segment_bind`) and
//!   that cannot be re-mapped by another process; a same-host peer copies
//!   into it with cross-memory attach (`process_vm_writev`), still without
//!   the owner's involvement.
//! - [`gpu`]: GPU memory through the CUDA driver, loaded at run time.
//!
//! [`MemoryDescriptor`] is what a peer needs to reach a region; it is plain
//! data (serde) that the runtime ships during segment registration.

pub mod gpu;
mod process_memory;
mod shared_memory;

pub use process_memory::ProcessMemory;
pub use shared_memory::{PeerMapping, SharedMemory};

use serde::{Deserialize, Serialize};

/// Errors of segment memory.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Os {
        /// what was being done
        what: String,
        /// the error number
        #[source]
        source: nix::Error,
    },
    /// A region of size 0 was asked for.
    #[error("a segment of size 0 is not allowed")]
    ZeroSize,
    /// A region too large for this address space (its length, or its end
    /// address, would not fit in `isize` / wrap).
    #[error("a region of {len} bytes cannot be mapped here")]
    TooLarge {
        /// the length asked for
        len: u64,
    },
    /// A copy outside the region (a peer's bounds were not checked).
    #[error("bytes {offset}..{offset}+{len} lie outside a region of {size} bytes")]
    OutOfRange {
        /// first byte
        offset: u64,
        /// bytes
        len: u64,
        /// the region's length
        size: u64,
    },
    /// The descriptor names memory on another host.
    #[error("memory of host {owner} cannot be mapped on host {here}")]
    OtherHost {
        /// host of the owner
        owner: String,
        /// this host
        here: String,
    },
    /// The process that owns the memory has ended (or is ending): its
    /// descriptors are gone, so the memory can no longer be opened. Not a
    /// fault of the memory: the caller names the owner as gone.
    #[error("the owner of the memory, process {pid}, has ended")]
    OwnerGone {
        /// owner process
        pid: u32,
    },
    /// The kind of memory has no way to be reached from here.
    #[error("memory descriptor of kind {0} cannot be mapped by a peer")]
    NotMappable(&'static str),
    /// GPU memory could not be provided.
    #[error(transparent)]
    Gpu(#[from] gpu::GpuError),
}

/// Whether `offset..offset + len` lies within `size` bytes, without
/// overflow.
pub fn range_fits(offset: u64, len: u64, size: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= size)
}

/// A region length from a descriptor as a mappable `usize`: not 0 and at
/// most `isize::MAX` (what the kernel and Rust's pointers can address).
pub fn mappable_len(len: u64) -> Result<usize, SegmentError> {
    if len == 0 {
        return Err(SegmentError::ZeroSize);
    }
    usize::try_from(len)
        .ok()
        .filter(|&l| isize::try_from(l).is_ok())
        .ok_or(SegmentError::TooLarge { len })
}

impl SegmentError {
    pub(crate) fn os(what: impl Into<String>, source: nix::Error) -> Self {
        SegmentError::Os {
            what: what.into(),
            source,
        }
    }

    /// An I/O error of the standard library, as an [`SegmentError::Os`].
    pub(crate) fn io(what: impl Into<String>, e: std::io::Error) -> Self {
        let errno = e.raw_os_error().unwrap_or(libc::EIO);
        SegmentError::os(what, nix::Error::from_raw(errno))
    }
}

/// Identity of a host: same host means same-host shared memory works.
///
/// It combines the kernel's boot id with the network namespace, so that
/// ranks in different network namespaces (the multi-host tests) count as
/// different hosts. `GASPI_HOST_ID` overrides it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct HostId(pub String);

impl HostId {
    /// The identity of the host this process runs on, read once per
    /// process (later calls open nothing, so they work however many
    /// descriptors the process holds).
    ///
    /// An error reading the boot id or the namespace is reported as it is
    /// (`EMFILE` when the process is out of descriptors): taking something
    /// else for the identity would make two ranks of one host look like
    /// two hosts. Only where `/proc` has no boot id at all (not Linux, or a
    /// `/proc` without it) does the host name stand in for it.
    pub fn current() -> Result<HostId, SegmentError> {
        static HERE: std::sync::OnceLock<HostId> = std::sync::OnceLock::new();
        if let Some(h) = HERE.get() {
            return Ok(h.clone());
        }
        let id = Self::read()?;
        Ok(HERE.get_or_init(|| id).clone())
    }

    fn read() -> Result<HostId, SegmentError> {
        if let Ok(id) = std::env::var("GASPI_HOST_ID") {
            return Ok(HostId(id));
        }
        const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
        let boot = match std::fs::read_to_string(BOOT_ID) {
            Ok(s) => s.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .map_err(|e| SegmentError::os("no boot id, and no host name", e))?,
            Err(e) => return Err(SegmentError::io(format!("reading {BOOT_ID}"), e)),
        };
        let netns = match std::fs::read_link("/proc/self/ns/net") {
            Ok(p) => p.to_string_lossy().into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(SegmentError::io(
                    "reading this process's network namespace (/proc/self/ns/net)",
                    e,
                ))
            }
        };
        Ok(HostId(format!("{boot}/{netns}")))
    }
}

impl std::fmt::Display for HostId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a peer needs to reach a region of memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemoryDescriptor {
    /// A memfd of process `pid`, open as descriptor `fd` there.
    SharedFd {
        /// host of the owner
        host: HostId,
        /// owner process
        pid: u32,
        /// descriptor number in the owner
        fd: i32,
        /// length in bytes
        len: u64,
    },
    /// Plain memory of process `pid` at `addr`, reachable with cross-memory attach.
    Process {
        /// host of the owner
        host: HostId,
        /// owner process
        pid: u32,
        /// address in the owner
        addr: u64,
        /// length in bytes
        len: u64,
    },
    /// GPU memory exported with a CUDA IPC handle.
    GpuIpc {
        /// host of the owner
        host: HostId,
        /// owner process
        pid: u32,
        /// CUDA device ordinal in the owner
        device: u32,
        /// the `CUipcMemHandle` bytes
        handle: Vec<u8>,
        /// where the region starts inside the allocation the handle names
        offset: u64,
        /// length in bytes
        len: u64,
    },
}

impl MemoryDescriptor {
    /// Length of the region in bytes.
    pub fn len(&self) -> u64 {
        match self {
            MemoryDescriptor::SharedFd { len, .. }
            | MemoryDescriptor::Process { len, .. }
            | MemoryDescriptor::GpuIpc { len, .. } => *len,
        }
    }

    /// True for a zero-length region (never produced by this crate).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Host of the owner.
    pub fn host(&self) -> &HostId {
        match self {
            MemoryDescriptor::SharedFd { host, .. }
            | MemoryDescriptor::Process { host, .. }
            | MemoryDescriptor::GpuIpc { host, .. } => host,
        }
    }
}
