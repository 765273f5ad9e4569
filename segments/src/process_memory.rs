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
    pub fn describe_own(addr: *const u8, len: usize) -> MemoryDescriptor {
        MemoryDescriptor::Process {
            host: HostId::current(),
            pid: std::process::id(),
            addr: addr as u64,
            len: len as u64,
        }
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
        let here = HostId::current();
        if *host != here {
            return Err(SegmentError::OtherHost {
                owner: host.0.clone(),
                here: here.0,
            });
        }
        Ok(ProcessMemory {
            pid: Pid::from_raw(*pid as i32),
            addr: *addr as usize,
            len: *len as usize,
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

    /// Copies `data` to `offset` of the region. The caller has checked bounds.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<(), SegmentError> {
        debug_assert!(offset + data.len() <= self.len);
        let mut done = 0;
        while done < data.len() {
            let remote = [RemoteIoVec {
                base: self.addr + offset + done,
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

    /// Copies from `offset` of the region into `out`. The caller has checked bounds.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<(), SegmentError> {
        debug_assert!(offset + out.len() <= self.len);
        let mut done = 0;
        while done < out.len() {
            let remote = [RemoteIoVec {
                base: self.addr + offset + done,
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
            ProcessMemory::open(&ProcessMemory::describe_own(buf.as_ptr(), buf.len())).unwrap();
        pm.write(10, b"hello").unwrap();
        let mut back = [0u8; 5];
        pm.read(10, &mut back).unwrap();
        assert_eq!(&back, b"hello");
        assert_eq!(&buf[10..15], b"hello");
        buf[0] = 1;
    }
}
