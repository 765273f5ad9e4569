//! Registered memory: what peers may write into and read from, and the
//! local buffers operations send from or land in.
//!
//! The registration modes a provider may require (`FI_MR_*`, reported by
//! `fi_getinfo` in the entry's `mr_mode`) are handled here once:
//! - `FI_MR_PROV_KEY`: the provider picks the key (read back with
//!   `fi_mr_key`); otherwise the layer asks for a key unique in the domain.
//! - `FI_MR_VIRT_ADDR`: peers address the memory by its virtual address;
//!   otherwise by the offset from the registration's start. Either way
//!   [`RemoteMemory::base`] is what offset 0 is called remotely.
//! - `FI_MR_ENDPOINT`: the registration is bound to the endpoint and
//!   enabled before use (`fi_mr_bind`, `fi_mr_enable`); registration goes
//!   through the endpoint for every provider, so this needs nothing of the
//!   caller.
//! - `FI_MR_LOCAL`: local buffers of operations must be registered too and
//!   their descriptor (`fi_mr_desc`) passed: operations take
//!   [`LocalSlice`]s of registered memory, always.
//! - `FI_MR_ALLOCATED`: only allocated (mapped) memory may be registered,
//!   which is all the runtime registers.

use super::error::{check, FabricError, Result};
use super::objects::Endpoint;
use gaspi_libfabric_sys as sys;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::sync::Arc;

/// Page-aligned, zeroed memory of our own (an anonymous mapping), for
/// buffers the runtime allocates itself (staging, atomic results) and for
/// tests and benchmarks. Peers and the NIC may write into it while it is
/// registered, so it is only ever reached through raw pointers and
/// atomics, never through Rust references to its bytes.
#[derive(Debug)]
pub(crate) struct LocalMemory {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: plain memory owned by this value; concurrent access is through
// raw pointers and atomics only.
unsafe impl Send for LocalMemory {}
// SAFETY: as above.
unsafe impl Sync for LocalMemory {}

impl Drop for LocalMemory {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length; registrations borrow
        // `self`, so none is left.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

impl LocalMemory {
    /// Maps `len` bytes (rounded up to a page; at least one).
    pub(crate) fn new(len: usize) -> Result<LocalMemory> {
        let len = len.max(1).div_ceil(4096) * 4096;
        // SAFETY: a fresh private anonymous mapping; checked below.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(FabricError::Invalid(format!(
                "mmap of {len} bytes: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(LocalMemory {
            ptr: NonNull::new(p.cast()).expect("mmap returned null"),
            len,
        })
    }

    /// Byte 0.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn check(&self, offset: usize, len: usize, align: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) || !offset.is_multiple_of(align)
        {
            return Err(FabricError::Invalid(format!(
                "{len} bytes at offset {offset} (aligned to {align}) do not fit {} bytes",
                self.len
            )));
        }
        Ok(())
    }

    /// Copies `src` to `offset`.
    pub(crate) fn write(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check(offset, src.len(), 1)?;
        // SAFETY: in bounds (checked); `src` cannot overlap our mapping
        // since no reference to it is ever handed out.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.as_ptr().add(offset), src.len()) };
        Ok(())
    }

    /// Copies `dst.len()` bytes at `offset` out.
    pub(crate) fn read(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check(offset, dst.len(), 1)?;
        // SAFETY: in bounds (checked); see `write`.
        unsafe { ptr::copy_nonoverlapping(self.as_ptr().add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// The u32 at `offset` (4-aligned) as an atomic: notification words.
    pub(crate) fn u32_at(&self, offset: usize) -> Result<&AtomicU32> {
        self.check(offset, 4, 4)?;
        // SAFETY: in bounds and aligned (checked); the mapping lives as
        // long as the returned reference; others write it only as a whole
        // word (a NIC's or a peer's 4-byte write).
        Ok(unsafe { &*self.as_ptr().add(offset).cast::<AtomicU32>() })
    }

    /// The u64 at `offset` (8-aligned) as an atomic: atomic targets and
    /// results.
    pub(crate) fn u64_at(&self, offset: usize) -> Result<&AtomicU64> {
        self.check(offset, 8, 8)?;
        // SAFETY: as in `u32_at`.
        Ok(unsafe { &*self.as_ptr().add(offset).cast::<AtomicU64>() })
    }
}

/// What a registration lets happen to the memory.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Access {
    /// Peers may write into it (RMA writes, atomics).
    pub remote_write: bool,
    /// Peers may read it.
    pub remote_read: bool,
}

impl Access {
    /// Local use and both remote directions: a segment.
    pub(crate) const ALL: Access = Access {
        remote_write: true,
        remote_read: true,
    };
    /// Local use only: a buffer operations send from or land in.
    pub(crate) const LOCAL: Access = Access {
        remote_write: false,
        remote_read: false,
    };

    fn flags(self) -> u64 {
        let mut f = (sys::FI_READ | sys::FI_WRITE) as u64;
        if self.remote_write {
            f |= sys::FI_REMOTE_WRITE as u64;
        }
        if self.remote_read {
            f |= sys::FI_REMOTE_READ as u64;
        }
        f
    }
}

/// A memory registration (`fi_mr_reg`), closed on drop. It borrows the
/// memory it registers for `'m` (or, from [`Self::register_raw`], the
/// caller promises the memory outlives it) and holds its endpoint (and so
/// its domain), so it can outlive neither.
#[derive(Debug)]
pub(crate) struct MemoryRegion<'m> {
    ptr: *mut sys::fid_mr,
    desc: *mut c_void,
    key: u64,
    addr: *mut u8,
    len: usize,
    remote_base: u64,
    _endpoint: Arc<Endpoint>,
    _memory: PhantomData<&'m LocalMemory>,
}

// SAFETY: the registration is an immutable provider object (FI_THREAD_SAFE
// domain); the memory it describes is reached through raw pointers only.
unsafe impl Send for MemoryRegion<'_> {}
// SAFETY: as above.
unsafe impl Sync for MemoryRegion<'_> {}

impl Drop for MemoryRegion<'_> {
    fn drop(&mut self) {
        // SAFETY: registered in `register_raw`, closed only here, before
        // the memory goes (the borrow or the caller's promise) and before
        // the endpoint and domain (held by Arc).
        let rc = unsafe { sys::fi_close(&mut (*self.ptr).fid) };
        if rc != 0 {
            tracing::warn!(
                "fi_close of a memory registration: {}",
                super::error::strerror(-rc)
            );
        }
    }
}

impl<'m> MemoryRegion<'m> {
    /// Registers memory of our own for `access`.
    pub(crate) fn register(
        endpoint: &Arc<Endpoint>,
        memory: &'m LocalMemory,
        access: Access,
    ) -> Result<MemoryRegion<'m>> {
        // SAFETY: `memory` outlives the registration (the borrow 'm) and
        // is reached through raw pointers only.
        unsafe { Self::register_raw(endpoint, memory.as_ptr(), memory.len(), access) }
    }

    /// Registers `len` bytes at `addr`: memory the runtime did not map
    /// through [`LocalMemory`] (a segment's memfd mapping, a user's bound
    /// memory).
    ///
    /// # Safety
    /// The memory must stay mapped until the registration is dropped, and
    /// while peers may write into it, this process must reach it only
    /// through raw pointers or atomics.
    pub(crate) unsafe fn register_raw(
        endpoint: &Arc<Endpoint>,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion<'m>> {
        if len == 0 {
            return Err(FabricError::Invalid("registering 0 bytes".into()));
        }
        let attrs = endpoint.attributes();
        let prov_key = attrs.mr(sys::FI_MR_PROV_KEY);
        let requested = if prov_key {
            0
        } else {
            endpoint.domain.fresh_key()
        };
        let mut mr = ptr::null_mut();
        // SAFETY: the caller's contract keeps [addr, addr+len) mapped.
        let rc = unsafe {
            sys::fi_mr_reg(
                endpoint.domain.raw(),
                addr.cast(),
                len,
                access.flags(),
                0,
                requested,
                0,
                &mut mr,
                ptr::null_mut(),
            )
        };
        check("fi_mr_reg", rc as isize)?;
        let mut region = MemoryRegion {
            ptr: mr,
            desc: ptr::null_mut(),
            key: requested,
            addr,
            len,
            remote_base: if attrs.mr(sys::FI_MR_VIRT_ADDR) {
                addr as u64
            } else {
                0
            },
            _endpoint: endpoint.clone(),
            _memory: PhantomData,
        };
        if attrs.mr(sys::FI_MR_ENDPOINT) {
            // SAFETY: an open registration and endpoint of one domain.
            unsafe {
                check(
                    "fi_mr_bind",
                    sys::fi_mr_bind(mr, &mut (*endpoint.ptr).fid, 0) as isize,
                )?;
                check("fi_mr_enable", sys::fi_mr_enable(mr) as isize)?;
            }
        }
        // SAFETY: an open (and, if needed, enabled) registration.
        unsafe {
            region.desc = sys::fi_mr_desc(mr);
            if prov_key {
                region.key = sys::fi_mr_key(mr);
                if region.key == sys::FI_KEY_NOTAVAIL {
                    return Err(FabricError::Invalid(
                        "fi_mr_key: the provider gave no key (FI_MR_RAW keys are not supported)"
                            .into(),
                    ));
                }
            }
        }
        Ok(region)
    }

    /// What peers need to reach it: to send them through the bootstrap.
    pub(crate) fn remote(&self) -> RemoteMemory {
        RemoteMemory {
            base: self.remote_base,
            len: self.len as u64,
            key: self.key,
        }
    }

    /// Byte 0 of the registered memory, in this process.
    pub(crate) fn addr(&self) -> *mut u8 {
        self.addr
    }

    /// Bytes registered.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// `len` bytes at `offset`, for an operation's local side.
    pub(crate) fn slice(&self, offset: usize, len: usize) -> Result<LocalSlice<'_>> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(FabricError::Invalid(format!(
                "local {len} bytes at offset {offset} do not fit the {} registered",
                self.len
            )));
        }
        Ok(LocalSlice {
            // SAFETY: in bounds (checked).
            ptr: unsafe { self.addr.add(offset) },
            len,
            desc: self.desc,
            _region: PhantomData,
        })
    }
}

/// Part of a registration, as an operation's local buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalSlice<'r> {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
    pub(super) desc: *mut c_void,
    _region: PhantomData<&'r ()>,
}

impl LocalSlice<'_> {
    /// Bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// A peer's registration as this side names it: sent through the
/// bootstrap as 24 bytes ([`Self::to_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RemoteMemory {
    /// What offset 0 is called at the peer (its virtual address under
    /// `FI_MR_VIRT_ADDR`, else 0).
    pub base: u64,
    /// Bytes registered.
    pub len: u64,
    /// The remote key.
    pub key: u64,
}

impl RemoteMemory {
    /// Little-endian `base`, `len`, `key`.
    pub(crate) fn to_bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.base.to_le_bytes());
        b[8..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..].copy_from_slice(&self.key.to_le_bytes());
        b
    }

    /// The inverse of [`Self::to_bytes`].
    pub(crate) fn from_bytes(b: &[u8; 24]) -> RemoteMemory {
        let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        RemoteMemory {
            base: word(0),
            len: word(8),
            key: word(16),
        }
    }

    /// The remote address of `len` bytes at `offset`, checked against the
    /// registration's size.
    pub(super) fn at(&self, offset: u64, len: usize) -> Result<u64> {
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.len)
        {
            return Err(FabricError::Invalid(format!(
                "remote {len} bytes at offset {offset} do not fit the peer's {} registered",
                self.len
            )));
        }
        Ok(self.base + offset)
    }
}
