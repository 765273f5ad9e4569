//! The libfabric objects, each an owning handle whose `Drop` closes it.
//!
//! Ownership ties them together as rust-ibverbs ties its objects with
//! lifetimes, but with `Arc`s (as the verbs transport does), because the
//! runtime keeps them in shared tables: a [`Domain`] holds its
//! [`Fabric`], a [`CompletionQueue`] and an [`AddressVector`] their
//! domain, an [`Endpoint`] its domain, queue and address vector, so
//! libfabric's rule (close an object before the objects it was opened
//! from) holds whatever order the handles are dropped in.

use super::error::{check, is_again, strerror, FabricError, Result};
use super::info::{Attributes, Info};
use gaspi_libfabric_sys as sys;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::os::fd::RawFd;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Closes a libfabric object.
///
/// # Safety
/// `fid` must be an open object, closed by no one else.
unsafe fn close(what: &str, fid: *mut sys::fid) {
    // SAFETY: the caller's contract.
    let rc = unsafe { sys::fi_close(fid) };
    if rc != 0 {
        tracing::warn!("fi_close of the {what}: {}", strerror(-rc));
    }
}

/// An opened fabric (`fi_fabric`): the provider's top object.
#[derive(Debug)]
pub(crate) struct Fabric {
    ptr: *mut sys::fid_fabric,
    info: Info,
}

// SAFETY: opened with FI_THREAD_SAFE (info.rs): libfabric serialises
// concurrent calls on its objects itself.
unsafe impl Send for Fabric {}
// SAFETY: as above.
unsafe impl Sync for Fabric {}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: opened in `open`, closed only here, after every object
        // opened from it (they hold an Arc of it).
        unsafe { close("fabric", &mut (*self.ptr).fid) };
    }
}

impl Fabric {
    /// Opens the fabric of a chosen provider entry.
    pub(crate) fn open(info: Info) -> Result<Arc<Fabric>> {
        let mut ptr = ptr::null_mut();
        // SAFETY: the entry's fabric attributes are valid; `ptr` receives
        // the new object.
        let rc = unsafe { sys::fi_fabric((*info.raw()).fabric_attr, &mut ptr, ptr::null_mut()) };
        check("fi_fabric", rc as isize)?;
        tracing::debug!(
            provider = %info.attributes().provider,
            fabric = %info.attributes().fabric,
            "libfabric fabric opened"
        );
        Ok(Arc::new(Fabric { ptr, info }))
    }

    /// What the provider offers.
    pub(crate) fn attributes(&self) -> &Attributes {
        self.info.attributes()
    }
}

/// A domain (`fi_domain`): one NIC or interface; memory is registered
/// with it.
#[derive(Debug)]
pub(crate) struct Domain {
    ptr: *mut sys::fid_domain,
    fabric: Arc<Fabric>,
    /// Next key asked for where the provider does not choose keys
    /// (no `FI_MR_PROV_KEY`): keys must be unique per domain.
    next_key: AtomicU64,
}

// SAFETY: FI_THREAD_SAFE, see Fabric.
unsafe impl Send for Domain {}
// SAFETY: as above.
unsafe impl Sync for Domain {}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: opened in `open`; everything opened from it holds an
        // Arc of it, so it is closed last of them.
        unsafe { close("domain", &mut (*self.ptr).fid) };
    }
}

impl Domain {
    /// Opens the domain of the fabric's entry.
    pub(crate) fn open(fabric: &Arc<Fabric>) -> Result<Arc<Domain>> {
        let mut ptr = ptr::null_mut();
        // SAFETY: an open fabric and its own entry.
        let rc =
            unsafe { sys::fi_domain(fabric.ptr, fabric.info.raw(), &mut ptr, ptr::null_mut()) };
        check("fi_domain", rc as isize)?;
        Ok(Arc::new(Domain {
            ptr,
            fabric: fabric.clone(),
            next_key: AtomicU64::new(1),
        }))
    }

    /// What the provider offers.
    pub(crate) fn attributes(&self) -> &Attributes {
        self.fabric.attributes()
    }

    pub(super) fn raw(&self) -> *mut sys::fid_domain {
        self.ptr
    }

    pub(super) fn fresh_key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }
}

/// A peer as the endpoint addresses it: its `fi_addr_t` in the address
/// vector, and its rank (carried into completions and errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Peer {
    pub(super) addr: sys::fi_addr_t,
    /// The rank it was inserted as.
    pub rank: u32,
}

/// An address vector (`fi_av_open`, `FI_AV_TABLE`): peers' endpoint
/// addresses, inserted once each.
#[derive(Debug)]
pub(crate) struct AddressVector {
    ptr: *mut sys::fid_av,
    _domain: Arc<Domain>,
}

// SAFETY: FI_THREAD_SAFE, see Fabric.
unsafe impl Send for AddressVector {}
// SAFETY: as above.
unsafe impl Sync for AddressVector {}

impl Drop for AddressVector {
    fn drop(&mut self) {
        // SAFETY: opened in `open`; endpoints bound to it hold an Arc of it.
        unsafe { close("address vector", &mut (*self.ptr).fid) };
    }
}

impl AddressVector {
    /// Opens one sized for `peers` addresses (a hint; it grows).
    pub(crate) fn open(domain: &Arc<Domain>, peers: usize) -> Result<Arc<AddressVector>> {
        let mut attr = sys::fi_av_attr {
            type_: sys::FI_AV_TABLE,
            count: peers,
            ..Default::default()
        };
        let mut ptr = ptr::null_mut();
        // SAFETY: an open domain, a valid attribute struct.
        let rc = unsafe { sys::fi_av_open(domain.ptr, &mut attr, &mut ptr, ptr::null_mut()) };
        check("fi_av_open", rc as isize)?;
        Ok(Arc::new(AddressVector {
            ptr,
            _domain: domain.clone(),
        }))
    }

    /// Inserts the endpoint address `address` (from [`Endpoint::address`]
    /// on the peer, exchanged through the bootstrap) of rank `rank`.
    pub(crate) fn insert(&self, address: &[u8], rank: u32) -> Result<Peer> {
        let mut addr: sys::fi_addr_t = sys::FI_ADDR_NOTAVAIL;
        // SAFETY: `address` holds one provider address (its format is the
        // provider's own; a malformed one gets an error or count 0),
        // `addr` receives one fi_addr_t.
        let rc = unsafe {
            sys::fi_av_insert(
                self.ptr,
                address.as_ptr().cast(),
                1,
                &mut addr,
                0,
                ptr::null_mut(),
            )
        };
        if check("fi_av_insert", rc as isize)? != 1 || addr == sys::FI_ADDR_NOTAVAIL {
            return Err(FabricError::Invalid(format!(
                "fi_av_insert: the address of rank {rank} ({} bytes) was not accepted",
                address.len()
            )));
        }
        Ok(Peer { addr, rank })
    }
}

/// What an operation's completion is reported as: the peer's rank and the
/// caller's id (the runtime's request table index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Token {
    /// The rank the operation went to.
    pub peer: u32,
    /// The caller's id.
    pub id: u32,
}

/// A notification held back until the writes before it to its peer are
/// delivered (DeliveryComplete only).
#[derive(Debug)]
pub(super) struct Deferred {
    pub(super) peer: Peer,
    pub(super) addr: u64,
    pub(super) key: u64,
    pub(super) value: u32,
    pub(super) id: u32,
}

/// Per-peer DeliveryComplete bookkeeping.
#[derive(Debug, Default)]
pub(super) struct PeerOrder {
    /// Writes posted and not yet completed.
    pub(super) outstanding: u64,
    /// Notifications waiting for `outstanding` to reach 0, in order.
    pub(super) deferred: VecDeque<Deferred>,
}

/// The layer's state of one endpoint.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Completions read while retrying a post, handed out by `poll`.
    pub(super) backlog: Mutex<Vec<Event>>,
    /// Held while completions are read and put in order (the backlog
    /// first), except under [`super::NotifyOrder::DeliveryComplete`],
    /// where reading may post held-back words: events come out of
    /// [`super::Endpoint::poll`] in the queue's order, whichever threads
    /// read it (notifications carried as remote CQ data are set in that
    /// order).
    pub(super) reading: Mutex<()>,
    /// By rank; used with [`NotifyOrder::DeliveryComplete`] only.
    pub(super) peers: Mutex<HashMap<u32, PeerOrder>>,
}

/// One completion read from a completion queue: the operation's token,
/// or the error it completed with.
#[derive(Debug, Clone)]
pub(crate) enum Event {
    /// The operation completed: for a write, its source may be reused
    /// (and with [`super::NotifyOrder::DeliveryComplete`], the data is in
    /// the target's memory); for a read or an atomic, the result is here.
    Done(Token),
    /// The operation failed; the error names the peer.
    Failed(Token, FabricError),
    /// A peer's [`Endpoint::write_with_data`] landed here: its data is in
    /// this process's memory, and `data` is the 64 bits it carried (the
    /// runtime's encoding of the notification to set).
    Remote(u64),
}

/// A completion queue (`fi_cq_open`, `FI_CQ_FORMAT_DATA`) with, where
/// the provider gives one, a file descriptor to wait on (`FI_WAIT_FD`).
#[derive(Debug)]
pub(crate) struct CompletionQueue {
    ptr: *mut sys::fid_cq,
    domain: Arc<Domain>,
    fd: Option<RawFd>,
}

// SAFETY: FI_THREAD_SAFE, see Fabric.
unsafe impl Send for CompletionQueue {}
// SAFETY: as above.
unsafe impl Sync for CompletionQueue {}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: opened in `open`; endpoints bound to it hold an Arc of it.
        unsafe { close("completion queue", &mut (*self.ptr).fid) };
    }
}

/// A raw completion as `fi_cq_read` returns it.
pub(super) enum Raw {
    Done(*mut c_void),
    Failed(*mut c_void, FabricError),
    Remote(u64),
}

/// Placeholder rank of a completion error before the endpoint names it.
pub(super) const UNKNOWN_RANK: u32 = u32::MAX;

impl CompletionQueue {
    /// Opens one of `size` entries (0: the provider's default), with a
    /// wait file descriptor if the provider offers one, else polled only.
    pub(crate) fn open(domain: &Arc<Domain>, size: usize) -> Result<Arc<CompletionQueue>> {
        let open = |wait_obj| -> Result<*mut sys::fid_cq> {
            let mut attr = sys::fi_cq_attr {
                size,
                format: sys::FI_CQ_FORMAT_DATA,
                wait_obj,
                ..Default::default()
            };
            let mut ptr = ptr::null_mut();
            // SAFETY: an open domain, a valid attribute struct.
            let rc = unsafe { sys::fi_cq_open(domain.ptr, &mut attr, &mut ptr, ptr::null_mut()) };
            check("fi_cq_open", rc as isize)?;
            Ok(ptr)
        };
        let (ptr, fd) = match open(sys::FI_WAIT_FD) {
            Ok(ptr) => {
                let mut fd: RawFd = -1;
                // SAFETY: an open CQ with an FD wait object; `fd` receives it.
                let rc = unsafe {
                    sys::fi_control(
                        &mut (*ptr).fid,
                        sys::FI_GETWAIT as i32,
                        (&mut fd as *mut RawFd).cast(),
                    )
                };
                (ptr, (rc == 0 && fd >= 0).then_some(fd))
            }
            Err(e) => {
                tracing::debug!("no FI_WAIT_FD completion queue ({e}); it is polled");
                (open(sys::FI_WAIT_NONE)?, None)
            }
        };
        Ok(Arc::new(CompletionQueue {
            ptr,
            domain: domain.clone(),
            fd,
        }))
    }

    /// The file descriptor that becomes readable when completions (or,
    /// with manual progress, incoming data to progress) may be there:
    /// for an epoll set. Before sleeping on it call [`Self::try_wait`].
    pub(crate) fn wait_fd(&self) -> Option<RawFd> {
        self.fd
    }

    /// Whether it is safe to sleep on [`Self::wait_fd`] now (`fi_trywait`);
    /// `false`: read the queue first (something is pending).
    pub(crate) fn try_wait(&self) -> bool {
        // SAFETY: the CQ's fid is valid while `self` is; the one-element
        // array `fid` lives through the call.
        unsafe {
            let mut fid: *mut sys::fid = &mut (*self.ptr).fid;
            sys::fi_trywait(self.domain.fabric.ptr, &mut fid, 1) == 0
        }
    }

    /// Sleeps until the wait descriptor is readable or `timeout` passes
    /// (returns at once if [`Self::try_wait`] says something is pending;
    /// without a descriptor, yields once). The caller then reads.
    pub(crate) fn wait(&self, timeout: Duration) {
        match self.fd {
            Some(fd) if self.try_wait() => {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
                // SAFETY: one valid pollfd; poll only writes `revents`.
                unsafe { libc::poll(&mut pfd, 1, ms) };
            }
            Some(_) => {}
            None => std::thread::yield_now(),
        }
    }

    /// Reads up to `max` completions into `out` (returns how many; 0 when
    /// none). With manual progress this is also what moves data, at the
    /// target too.
    pub(super) fn read_raw(&self, out: &mut Vec<Raw>, max: usize) -> Result<usize> {
        const BATCH: usize = 32;
        let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
        let want = max.min(BATCH);
        // SAFETY: room for `want` entries of the CQ's format (DATA).
        let rc = unsafe { sys::fi_cq_read(self.ptr, entries.as_mut_ptr().cast(), want) };
        if rc >= 0 {
            let n = rc as usize;
            out.extend(entries[..n].iter().map(|e| {
                if e.flags & sys::FI_REMOTE_CQ_DATA as u64 != 0 {
                    Raw::Remote(e.data)
                } else {
                    Raw::Done(e.op_context)
                }
            }));
            return Ok(n);
        }
        if is_again(rc) {
            return Ok(0);
        }
        if rc != -(sys::FI_EAVAIL as isize) {
            check("fi_cq_read", rc)?;
        }
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: one error entry; err_data left null (version >= 1.5: the
        // provider then keeps its own buffer).
        let rc = unsafe { sys::fi_cq_readerr(self.ptr, &mut err, 0) };
        if is_again(rc) {
            return Ok(0);
        }
        check("fi_cq_readerr", rc)?;
        // SAFETY: fi_cq_strerror returns a NUL-terminated string (the
        // provider's, or a static one) valid until the next call.
        let message = unsafe {
            let p = sys::fi_cq_strerror(self.ptr, err.prov_errno, err.err_data, ptr::null_mut(), 0);
            if p.is_null() {
                strerror(err.err)
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        out.push(Raw::Failed(
            err.op_context,
            FabricError::Peer {
                peer: UNKNOWN_RANK,
                code: err.err,
                prov_errno: err.prov_errno,
                message,
            },
        ));
        Ok(1)
    }
}

/// An endpoint (`fi_endpoint`, `FI_EP_RDM`): reliable, unconnected, one
/// per process (per domain) reaching every peer in its address vector.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(super) ptr: *mut sys::fid_ep,
    pub(super) domain: Arc<Domain>,
    pub(super) cq: Arc<CompletionQueue>,
    pub(super) _av: Arc<AddressVector>,
    /// Whether fetch-add and compare-swap on u64 are valid here.
    pub(super) atomics: bool,
    /// Per-peer ordering state (DeliveryComplete) and completions read
    /// while retrying a full endpoint.
    pub(super) state: State,
}

// SAFETY: FI_THREAD_SAFE, see Fabric; the layer's own state is behind
// mutexes.
unsafe impl Send for Endpoint {}
// SAFETY: as above.
unsafe impl Sync for Endpoint {}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: opened in `open`; memory regions bound to it (FI_MR_ENDPOINT)
        // hold an Arc of it.
        unsafe { close("endpoint", &mut (*self.ptr).fid) };
    }
}

impl Endpoint {
    /// Opens an endpoint of the domain's entry, binds `cq` (transmit and
    /// receive completions) and `av`, and enables it.
    pub(crate) fn open(
        domain: &Arc<Domain>,
        cq: &Arc<CompletionQueue>,
        av: &Arc<AddressVector>,
    ) -> Result<Arc<Endpoint>> {
        let mut ptr = ptr::null_mut();
        // SAFETY: an open domain and its own entry.
        let rc = unsafe {
            sys::fi_endpoint(
                domain.ptr,
                domain.fabric.info.raw(),
                &mut ptr,
                ptr::null_mut(),
            )
        };
        check("fi_endpoint", rc as isize)?;
        // From here `ep` closes it on an error.
        let mut ep = Endpoint {
            ptr,
            domain: domain.clone(),
            cq: cq.clone(),
            _av: av.clone(),
            atomics: false,
            state: State::default(),
        };
        // SAFETY: open objects of the same domain.
        unsafe {
            check(
                "fi_ep_bind(cq)",
                sys::fi_ep_bind(
                    ptr,
                    &mut (*cq.ptr).fid,
                    (sys::FI_TRANSMIT | sys::FI_RECV) as u64,
                ) as isize,
            )?;
            check(
                "fi_ep_bind(av)",
                sys::fi_ep_bind(ptr, &mut (*av.ptr).fid, 0) as isize,
            )?;
            check("fi_enable", sys::fi_enable(ptr) as isize)?;
        }
        if domain.attributes().atomics {
            let valid = |op, compare: bool| {
                let mut count = 0usize;
                // SAFETY: an enabled endpoint; `count` receives a number.
                let rc = unsafe {
                    if compare {
                        sys::fi_compare_atomicvalid(ptr, sys::FI_UINT64, op, &mut count)
                    } else {
                        sys::fi_fetch_atomicvalid(ptr, sys::FI_UINT64, op, &mut count)
                    }
                };
                rc == 0 && count >= 1
            };
            ep.atomics = valid(sys::FI_SUM, false) && valid(sys::FI_CSWAP, true);
        }
        Ok(Arc::new(ep))
    }

    /// This endpoint's address, for peers to insert into their address
    /// vectors (`fi_getname`; the provider's own format).
    pub(crate) fn address(&self) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; 64];
        loop {
            let mut len = buf.len();
            // SAFETY: `buf` has room for `len` bytes; libfabric writes at
            // most that and sets `len` to the address's size.
            let rc =
                unsafe { sys::fi_getname(&mut (*self.ptr).fid, buf.as_mut_ptr().cast(), &mut len) };
            if rc == -(sys::FI_ETOOSMALL as i32) && len > buf.len() {
                buf.resize(len, 0);
                continue;
            }
            check("fi_getname", rc as isize)?;
            buf.truncate(len);
            return Ok(buf);
        }
    }

    /// What the provider offers.
    pub(crate) fn attributes(&self) -> &Attributes {
        self.domain.attributes()
    }

    /// Whether u64 fetch-add and compare-swap are offered.
    pub(crate) fn has_atomics(&self) -> bool {
        self.atomics
    }

    /// The completion queue (for its wait descriptor).
    pub(crate) fn completion_queue(&self) -> &Arc<CompletionQueue> {
        &self.cq
    }
}
