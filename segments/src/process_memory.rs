//! Memory of another same-host process, reached by cross-memory attach.
//!
//! `segment_bind` lets users hand the runtime memory they already own. That
//! memory is ordinary private memory and cannot be mapped by a peer, but a
//! peer of the same user can copy into and out of it with
//! `process_vm_writev` / `process_vm_readv`: one system call, no involvement
//! of the owner, and the copy is complete when the call returns, so a
//! notification stored afterwards is ordered after the data.

use crate::{HostId, MemoryDescriptor, SegmentError};
use nix::sys::uio::{process_vm_readv, process_vm_writev, RemoteIoVec};
use nix::unistd::Pid;
use std::io::{IoSlice, IoSliceMut};

/// A region of another process on this host.
#[derive(Debug, Clone)]
pub struct ProcessMemory {
    pid: Pid,
    addr: usize,
    len: usize,
}

impl ProcessMemory {
    /// Describes memory of *this* process for peers (`segment_bind`).
    pub fn describe_own(addr: *const u8, len: usize) -> Result<MemoryDescriptor, SegmentError> {
        Ok(MemoryDescriptor::Process {
            host: HostId::current()?,
            pid: std::process::id(),
            addr: addr as u64,
            len: len as u64,
        })
    }

    /// Opens a peer's region from its descriptor.
    pub fn open(desc: &MemoryDescriptor) -> Result<ProcessMemory, SegmentError> {
        let MemoryDescriptor::Process {
            host,
            pid,
            addr,
            len,
        } = desc
        else {
            return Err(SegmentError::NotMappable("non-process"));
        };
        let here = HostId::current()?;
        if *host != here {
            return Err(SegmentError::OtherHost {
                owner: host.0.clone(),
                here: here.0,
            });
        }
        let len_usize = crate::mappable_len(*len)?;
        // The region must not wrap the address space.
        let addr = usize::try_from(*addr)
            .ok()
            .filter(|a| a.checked_add(len_usize).is_some())
            .ok_or(SegmentError::TooLarge { len: *len })?;
        let pid = i32::try_from(*pid)
            .map_err(|_| SegmentError::os(format!("process id {pid}"), nix::Error::EINVAL))?;
        Ok(ProcessMemory {
            pid: Pid::from_raw(pid),
            addr,
            len: len_usize,
        })
    }

    /// Length of the region.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of byte `offset`, after checking that `len` bytes from
    /// there lie in the region (no overflow).
    fn checked_base(&self, offset: usize, len: usize) -> Result<usize, SegmentError> {
        let out = || SegmentError::OutOfRange {
            offset: offset as u64,
            len: len as u64,
            size: self.len as u64,
        };
        if !crate::range_fits(offset as u64, len as u64, self.len as u64) {
            return Err(out());
        }
        // Cannot wrap: addr + self.len was checked at open.
        self.addr.checked_add(offset).ok_or_else(out)
    }

    /// Copies `data` to `offset` of the region; a range outside it is
    /// refused with [`SegmentError::OutOfRange`].
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), SegmentError> {
        let base = self.checked_base(offset, data.len())?;
        let mut done = 0;
        while done < data.len() {
            let remote = [RemoteIoVec {
                base: base + done,
                len: data.len() - done,
            }];
            let n = process_vm_writev(self.pid, &[IoSlice::new(&data[done..])], &remote)
                .map_err(|e| SegmentError::os(format!("writing into process {}", self.pid), e))?;
            if n == 0 {
                return Err(SegmentError::os(
                    "process_vm_writev wrote nothing",
                    nix::Error::EFAULT,
                ));
            }
            done += n;
        }
        Ok(())
    }

    /// Copies from `offset` of the region into `out`; a range outside it is
    /// refused with [`SegmentError::OutOfRange`].
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), SegmentError> {
        let base = self.checked_base(offset, out.len())?;
        let mut done = 0;
        while done < out.len() {
            let remote = [RemoteIoVec {
                base: base + done,
                len: out.len() - done,
            }];
            let n = process_vm_readv(self.pid, &mut [IoSliceMut::new(&mut out[done..])], &remote)
                .map_err(|e| {
                SegmentError::os(format!("reading from process {}", self.pid), e)
            })?;
            if n == 0 {
                return Err(SegmentError::os(
                    "process_vm_readv read nothing",
                    nix::Error::EFAULT,
                ));
            }
            done += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_reach_memory_described_by_its_owner() {
        // The "peer" is this very process: cross-memory attach works on self.
        let mut buf = vec![0u8; 4096];
        let pm =
            ProcessMemory::open(&ProcessMemory::describe_own(buf.as_ptr(), buf.len()).unwrap())
                .unwrap();
        pm.write(10, b"hello").unwrap();
        let mut back = [0u8; 5];
        pm.read(10, &mut back).unwrap();
        assert_eq!(&back, b"hello");
        assert_eq!(&buf[10..15], b"hello");
        buf[0] = 1;
    }

    #[test]
    fn ranges_outside_the_region_are_refused_and_change_nothing() {
        let buf = [5u8; 64];
        let pm =
            ProcessMemory::open(&ProcessMemory::describe_own(buf.as_ptr(), 64).unwrap()).unwrap();
        for (off, len) in [(60usize, 8usize), (64, 1), (usize::MAX, 1), (1, usize::MAX)] {
            let data = vec![9u8; len.min(8)];
            let r = if len > 8 {
                pm.checked_base(off, len).map(|_| ())
            } else {
                pm.write(off, &data)
            };
            assert!(
                matches!(r, Err(SegmentError::OutOfRange { .. })),
                "{off} {len}"
            );
        }
        assert!(buf.iter().all(|&b| b == 5));
        let wraps = MemoryDescriptor::Process {
            host: HostId::current().unwrap(),
            pid: std::process::id(),
            addr: u64::MAX - 10,
            len: 100,
        };
        assert!(matches!(
            ProcessMemory::open(&wraps),
            Err(SegmentError::TooLarge { .. })
        ));
    }
}
