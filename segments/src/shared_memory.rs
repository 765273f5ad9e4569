//! Host memory in a memfd, shared with same-host peers by mapping.

use crate::{HostId, MemoryDescriptor, SegmentError};
use memmap2::{MmapOptions, MmapRaw};
use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};

/// A block of host memory that same-host peers can map.
///
/// The pages are zero when created. The memory stays valid as long as this
/// value or any [`PeerMapping`] of it (in any process) exists.
#[derive(Debug)]
pub struct SharedMemory {
    file: File,
    map: MmapRaw,
    len: usize,
    /// This host, for the descriptor (read when created).
    host: HostId,
}

impl SharedMemory {
    /// Creates `len` bytes of zeroed shared memory; `name` shows up in
    /// `/proc/<pid>/fd` and `/proc/<pid>/maps` to help debugging.
    pub fn create(name: &str, len: usize) -> Result<SharedMemory, SegmentError> {
        let len = crate::mappable_len(len as u64)?;
        let host = HostId::current()?;
        let cname = std::ffi::CString::new(format!("gaspi-{name}")).unwrap_or_default();
        let fd: OwnedFd =
            nix::sys::memfd::memfd_create(cname.as_c_str(), nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
                .map_err(|e| SegmentError::os("memfd_create", e))?;
        let file = File::from(fd);
        file.set_len(len as u64).map_err(|e| {
            SegmentError::os(
                format!("sizing shared memory to {len} bytes"),
                nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            )
        })?;
        let map = MmapOptions::new().len(len).map_raw(&file).map_err(|e| {
            SegmentError::os(
                format!("mapping {len} bytes of shared memory"),
                nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            )
        })?;
        Ok(SharedMemory {
            file,
            map,
            len,
            host,
        })
    }

    /// Start of the memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a zero size is refused at creation.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// What a same-host peer needs to map this memory.
    pub fn descriptor(&self) -> MemoryDescriptor {
        MemoryDescriptor::SharedFd {
            host: self.host.clone(),
            pid: std::process::id(),
            fd: self.file.as_raw_fd(),
            len: self.len as u64,
        }
    }
}

/// A peer's [`SharedMemory`] mapped into this process.
#[derive(Debug)]
pub struct PeerMapping {
    map: MmapRaw,
    len: usize,
}

impl PeerMapping {
    /// Maps the memory a peer described. Fails if the peer is on another
    /// host, is gone ([`SegmentError::OwnerGone`]: the memory is opened
    /// through the owner's descriptor table, so the owner must be alive
    /// while this runs; the runtime arranges that, see decision 0028), or
    /// the descriptor is not of a mappable kind.
    pub fn open(desc: &MemoryDescriptor) -> Result<PeerMapping, SegmentError> {
        let MemoryDescriptor::SharedFd { host, pid, fd, len } = desc else {
            return Err(SegmentError::NotMappable("non-memfd"));
        };
        let here = HostId::current()?;
        if *host != here {
            return Err(SegmentError::OtherHost {
                owner: host.0.clone(),
                here: here.0,
            });
        }
        let path = format!("/proc/{pid}/fd/{fd}");
        let raw = nix::fcntl::open(
            path.as_str(),
            nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(|e| match e {
            nix::Error::ENOENT | nix::Error::ESRCH if owner_ending(*pid) => {
                SegmentError::OwnerGone { pid: *pid }
            }
            e => SegmentError::os(format!("opening peer memory {path}"), e),
        })?;
        let file = File::from(raw);
        // The descriptor number could have been reused by the peer for some
        // other file; check that what we opened is at least as large.
        crate::mappable_len(*len)?;
        let actual = file.metadata().map(|m| m.len()).unwrap_or(0);
        if actual < *len {
            return Err(SegmentError::os(
                format!("peer memory {path} has {actual} bytes, expected {len}"),
                nix::Error::EINVAL,
            ));
        }
        let len = crate::mappable_len(*len)?;
        let map = MmapOptions::new().len(len).map_raw(&file).map_err(|e| {
            SegmentError::os(
                format!("mapping peer memory {path}"),
                nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
            )
        })?;
        // The file can be closed: the mapping keeps the memory alive.
        drop(file);
        Ok(PeerMapping { map, len })
    }

    /// Start of the mapped memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false for a successfully opened mapping.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Whether process `pid`, whose descriptor could not be found, has ended
/// or is ending. A process closes its descriptors on its way out before it
/// becomes a zombie, so a running one is given a moment (up to 50 ms, on
/// this error path only) to show that it is exiting; one that still runs
/// then merely lacks the descriptor (it deleted the memory).
fn owner_ending(pid: u32) -> bool {
    for _ in 0..10 {
        if !process_running(pid) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    !process_running(pid)
}

/// Whether process `pid` still runs: it exists and is not a zombie (a
/// zombie has closed every descriptor already).
fn process_running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_mapping_sees_the_owners_bytes_and_the_owner_sees_the_peers() {
        let shm = SharedMemory::create("test", 8192).unwrap();
        let peer = PeerMapping::open(&shm.descriptor()).unwrap();
        // SAFETY: both mappings are 8192 bytes long and alive here.
        unsafe {
            *shm.as_ptr().add(100) = 42;
            assert_eq!(*peer.as_ptr().add(100), 42);
            *peer.as_ptr().add(8191) = 7;
            assert_eq!(*shm.as_ptr().add(8191), 7);
        }
    }

    #[test]
    fn memory_of_an_ended_process_is_reported_as_its_owner_gone() {
        // A child that creates nothing: its pid, once reaped, names no
        // process, as a peer's does after it ended.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let shm = SharedMemory::create("gone", 4096).unwrap();
        let mut d = shm.descriptor();
        if let MemoryDescriptor::SharedFd { pid: p, .. } = &mut d {
            *p = pid;
        }
        match PeerMapping::open(&d) {
            Err(SegmentError::OwnerGone { pid: p }) => assert_eq!(p, pid),
            other => panic!("{other:?}"),
        }
        // A live owner without that descriptor is no owner gone.
        if let MemoryDescriptor::SharedFd { pid: p, fd, .. } = &mut d {
            *p = std::process::id();
            *fd = 1 << 20;
        }
        assert!(matches!(
            PeerMapping::open(&d),
            Err(SegmentError::Os { .. })
        ));
    }

    #[test]
    fn zero_size_is_refused() {
        assert!(matches!(
            SharedMemory::create("zero", 0),
            Err(SegmentError::ZeroSize)
        ));
    }

    #[test]
    fn lengths_beyond_the_address_space_are_refused_before_mapping() {
        for len in [1usize << 63, usize::MAX, usize::MAX - 4095] {
            assert!(
                matches!(SharedMemory::create("huge", len), Err(SegmentError::TooLarge { len: l }) if l == len as u64),
                "{len}"
            );
        }
        let shm = SharedMemory::create("peer-huge", 4096).unwrap();
        let mut d = shm.descriptor();
        if let MemoryDescriptor::SharedFd { len, .. } = &mut d {
            *len = u64::MAX - 100;
        }
        assert!(matches!(
            PeerMapping::open(&d),
            Err(SegmentError::TooLarge { .. })
        ));
    }

    #[test]
    fn a_descriptor_of_another_host_is_refused() {
        let shm = SharedMemory::create("other", 4096).unwrap();
        let mut d = shm.descriptor();
        if let MemoryDescriptor::SharedFd { host, .. } = &mut d {
            host.0.push_str("-elsewhere");
        }
        assert!(matches!(
            PeerMapping::open(&d),
            Err(SegmentError::OtherHost { .. })
        ));
    }
}
