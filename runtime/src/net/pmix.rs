//! The PMIx bootstrap: rank, size and endpoints from the PMIx server that
//! started the process (Open MPI's `mpirun`, `srun --mpi=pmix`, PRRTE,
//! Flux), so that start-up passes nothing through rank 0
//! (docs/decisions/0084-pmix-bootstrap.md).
//!
//! [`Session`] is the one safe, thin layer over `gaspi-pmix-sys`: it owns
//! the PMIx client from `PMIx_Init` to `PMIx_Finalize` and turns each call
//! into a `Result`. What the runtime does with it:
//!
//! - rank and size: `PMIx_Init` names the process (namespace, rank); the
//!   job's size is `PMIX_JOB_SIZE` (else `PMIX_UNIV_SIZE`) of the
//!   namespace, the ranks on this host `PMIX_LOCAL_SIZE` / `PMIX_LOCAL_RANK`;
//! - every rank `PMIx_Put`s its endpoint (`PMIX_GLOBAL`) and commits;
//!   rank 0 also the job key unless `GASPI_JOB_KEY` set one ([`JOB_KEY`]);
//! - a peer's endpoint is fetched the first time it is needed with
//!   `PMIx_Get` of the peer's key (direct modex: the local PMIx server asks
//!   the peer's server, which answers once the peer has committed), through
//!   [`PmixEndpoints`], which [`crate::net::peers::Peers`] asks as it asks
//!   rank 0's directory under our own rendezvous;
//! - no fence at start-up: the start barrier stays the start-up tree's
//!   (`rendezvous::finish_start`), over connections to the parent whose
//!   endpoint came from `PMIx_Get`;
//! - `PMIx_Finalize` when the rank terminates ([`Session::finalize`]).
//!
//! A `Get` for a key the peer has not committed yet waits in the server
//! for up to `PMIX_TIMEOUT` seconds; a server that answers "not found" or
//! "timed out" before the caller's deadline (Open MPI 4.1's does both for
//! a peer that commits late) is asked again after a short nap.

use super::rendezvous::{Endpoint, EndpointSource};
use crate::model::error::{Error, Result};
use gaspi_pmix_sys as sys;
use std::ffi::{c_char, CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The key under which each rank puts its endpoint.
pub(crate) const ENDPOINT: &str = "gaspi.endpoint";

/// The key under which rank 0 puts the job key (when `GASPI_JOB_KEY` gave
/// none).
pub(crate) const JOB_KEY: &str = "gaspi.jobkey";

/// The PMIx status `rc` as an error of `what`, with PMIx's own words.
fn failed(what: &str, rc: sys::pmix_status_t) -> Error {
    // SAFETY: PMIx_Error_string returns a pointer to a static string for
    // every status (an "UNKNOWN" one for codes it does not know).
    let text = unsafe { CStr::from_ptr(sys::PMIx_Error_string(rc)) };
    Error::Bootstrap(format!("{what}: {} ({rc})", text.to_string_lossy()))
}

fn check(what: &str, rc: sys::pmix_status_t) -> Result<()> {
    match rc == sys::PMIX_SUCCESS as sys::pmix_status_t {
        true => Ok(()),
        false => Err(failed(what, rc)),
    }
}

/// A key as C wants it (PMIx keys are short ASCII names).
fn c_key(key: &str) -> Result<CString> {
    if key.len() >= sys::PMIX_MAX_KEYLEN as usize {
        return Err(Error::Protocol(format!("PMIx key {key:?} is too long")));
    }
    CString::new(key).map_err(|_| Error::Protocol(format!("PMIx key {key:?} holds a NUL")))
}

/// A value `PMIx_Get` returned, released (`PMIx_Value_destruct`, then the
/// allocation freed) when dropped.
struct Value(*mut sys::pmix_value_t);

impl Drop for Value {
    fn drop(&mut self) {
        // SAFETY: the pointer came from a successful PMIx_Get, which
        // allocated it with malloc and gave its ownership to the caller;
        // it is released once, here (PMIX_VALUE_RELEASE does the same).
        unsafe {
            sys::PMIx_Value_destruct(self.0);
            libc::free(self.0.cast());
        }
    }
}

impl Value {
    fn kind(&self) -> sys::pmix_data_type_t {
        // SAFETY: a value PMIx_Get returned is initialized.
        unsafe { (*self.0).type_ }
    }

    /// The value as a number, if it holds an unsigned integer type.
    fn as_u32(&self) -> Option<u32> {
        // SAFETY: the union member read is the one `type_` names.
        unsafe {
            match self.kind() as u32 {
                sys::PMIX_UINT32 => Some((*self.0).data.uint32),
                sys::PMIX_UINT16 => Some((*self.0).data.uint16 as u32),
                _ => None,
            }
        }
    }

    /// The value's bytes, if it holds a byte object.
    fn bytes(&self) -> Option<Vec<u8>> {
        if self.kind() as u32 != sys::PMIX_BYTE_OBJECT {
            return None;
        }
        // SAFETY: the union member read is the one `type_` names; PMIx
        // keeps `size` bytes at `bytes` (none when null) while the value
        // lives.
        unsafe {
            let bo = (*self.0).data.bo;
            if bo.bytes.is_null() || bo.size == 0 {
                return Some(Vec::new());
            }
            Some(std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size).to_vec())
        }
    }
}

/// This process's PMIx client, from `PMIx_Init` to `PMIx_Finalize`.
pub(crate) struct Session {
    /// This process as PMIx names it (namespace and rank).
    me: sys::pmix_proc_t,
    /// This rank.
    pub rank: u32,
    /// Ranks in the job (`PMIX_JOB_SIZE`, else `PMIX_UNIV_SIZE`).
    pub size: u32,
    /// Rank among the job's ranks on this host (`PMIX_LOCAL_RANK`).
    pub local_rank: Option<u32>,
    /// The job's ranks on this host (`PMIX_LOCAL_SIZE`).
    pub local_size: Option<u32>,
    finalized: AtomicBool,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("namespace", &self.namespace())
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

// SAFETY: the PMIx client library is thread safe: every call hands its
// work to the library's own progress thread and waits for the answer, so
// calls from several threads at once are allowed (PMIx standard, chapter
// "Thread safety"); `me` is plain data, only read after `init`.
unsafe impl Send for Session {}
// SAFETY: as for Send: shared calls go through the library's progress
// thread; the only mutable state here is an atomic.
unsafe impl Sync for Session {}

impl Session {
    /// Connects to the PMIx server that started this process and reads
    /// rank, size and the local figures.
    pub fn init() -> Result<Arc<Session>> {
        let mut me = sys::pmix_proc_t::default();
        // SAFETY: `me` is a writable pmix_proc_t; no info array is passed.
        check("PMIx_Init", unsafe {
            sys::PMIx_Init(&mut me, std::ptr::null_mut(), 0)
        })?;
        let mut session = Session {
            me,
            rank: me.rank,
            size: 0,
            local_rank: None,
            local_size: None,
            finalized: AtomicBool::new(false),
        };
        let job = session.proc_of(sys::PMIX_RANK_WILDCARD);
        let size = session
            .get_now(&job, key_of(sys::PMIX_JOB_SIZE))
            .ok()
            .and_then(|v| v.as_u32())
            .or_else(|| {
                session
                    .get_now(&job, key_of(sys::PMIX_UNIV_SIZE))
                    .ok()
                    .and_then(|v| v.as_u32())
            });
        session.size = size.ok_or_else(|| {
            Error::Bootstrap(
                "the PMIx server tells neither the job size (pmix.job.size) nor the \
                 universe size (pmix.univ.size)"
                    .into(),
            )
        })?;
        if session.rank >= session.size {
            return Err(Error::Bootstrap(format!(
                "PMIx names this process rank {} of a job of {}",
                session.rank, session.size
            )));
        }
        session.local_size = session
            .get_now(&job, key_of(sys::PMIX_LOCAL_SIZE))
            .ok()
            .and_then(|v| v.as_u32());
        session.local_rank = session
            .get_now(&session.me, key_of(sys::PMIX_LOCAL_RANK))
            .ok()
            .and_then(|v| v.as_u32());
        tracing::debug!(
            "PMIx {}: rank {} of {} (namespace {})",
            version(),
            session.rank,
            session.size,
            session.namespace()
        );
        Ok(Arc::new(session))
    }

    /// The job's namespace.
    pub fn namespace(&self) -> String {
        // SAFETY: PMIx_Init wrote a NUL-terminated name into `nspace`,
        // whose last byte stays NUL (PMIX_MAX_NSLEN + 1 bytes).
        unsafe { CStr::from_ptr(self.me.nspace.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Rank `rank` of this job (or the job itself: `PMIX_RANK_WILDCARD`).
    fn proc_of(&self, rank: u32) -> sys::pmix_proc_t {
        let mut p = self.me;
        p.rank = rank;
        p
    }

    fn live(&self) -> Result<()> {
        match self.finalized.load(Ordering::Acquire) {
            false => Ok(()),
            true => Err(Error::Bootstrap(
                "the PMIx session has ended (the rank terminates)".into(),
            )),
        }
    }

    /// `PMIx_Get` of `key` of `proc`, asking once, with `timeout_s` as
    /// the server's `PMIX_TIMEOUT` (0: no attribute).
    fn get_once(
        &self,
        proc: &sys::pmix_proc_t,
        key: &CStr,
        timeout_s: i32,
    ) -> std::result::Result<Value, sys::pmix_status_t> {
        let mut info = sys::pmix_info_t::default();
        let mut ninfo = 0;
        if timeout_s > 0 {
            // SAFETY: `info` is a writable pmix_info_t; the key is a
            // NUL-terminated string; the data an int of type PMIX_INT,
            // copied in (nothing on the heap to release for an int).
            let rc = unsafe {
                sys::PMIx_Info_load(
                    &mut info,
                    sys::PMIX_TIMEOUT.as_ptr().cast::<c_char>(),
                    (&timeout_s as *const i32).cast(),
                    sys::PMIX_INT as sys::pmix_data_type_t,
                )
            };
            if rc == sys::PMIX_SUCCESS as sys::pmix_status_t {
                ninfo = 1;
            }
        }
        let mut out: *mut sys::pmix_value_t = std::ptr::null_mut();
        // SAFETY: `proc` and `key` are valid for the call; `info` holds
        // `ninfo` initialized entries; `out` is written on success with a
        // value this side owns (released by `Value`).
        let rc = unsafe {
            sys::PMIx_Get(
                proc,
                key.as_ptr(),
                match ninfo {
                    0 => std::ptr::null(),
                    _ => &info,
                },
                ninfo,
                &mut out,
            )
        };
        match (rc == sys::PMIX_SUCCESS as sys::pmix_status_t, out.is_null()) {
            (true, false) => Ok(Value(out)),
            (true, true) => Err(sys::PMIX_ERR_NOT_FOUND),
            _ => Err(rc),
        }
    }

    /// `PMIx_Get` of something the server knows already (job data).
    fn get_now(&self, proc: &sys::pmix_proc_t, key: &CStr) -> Result<Value> {
        self.live()?;
        self.get_once(proc, key, 0)
            .map_err(|rc| failed(&format!("PMIx_Get {}", key.to_string_lossy()), rc))
    }

    /// Puts `bytes` under `key`, for every rank of the job (`PMIX_GLOBAL`);
    /// the others see it after [`Self::commit`].
    pub fn put_bytes(&self, key: &str, bytes: &[u8]) -> Result<()> {
        self.live()?;
        let key = c_key(key)?;
        let mut value = sys::pmix_value_t {
            type_: sys::PMIX_BYTE_OBJECT as sys::pmix_data_type_t,
            ..Default::default()
        };
        value.data.bo = sys::pmix_byte_object_t {
            bytes: bytes.as_ptr().cast_mut().cast(),
            size: bytes.len(),
        };
        // SAFETY: `key` is NUL-terminated; `value` is a byte object
        // pointing at `bytes`, alive across the call; PMIx_Put copies the
        // value (it never writes through the pointer nor keeps it).
        check(&format!("PMIx_Put {}", key.to_string_lossy()), unsafe {
            sys::PMIx_Put(
                sys::PMIX_GLOBAL as sys::pmix_scope_t,
                key.as_ptr(),
                &mut value,
            )
        })
    }

    /// Makes what this process put visible to the others.
    pub fn commit(&self) -> Result<()> {
        self.live()?;
        // SAFETY: no arguments; the client is initialized.
        check("PMIx_Commit", unsafe { sys::PMIx_Commit() })
    }

    /// The bytes rank `rank` put under `key`, waiting for it to commit
    /// them until `deadline`.
    pub fn get_bytes(&self, rank: u32, key: &str, deadline: Instant) -> Result<Vec<u8>> {
        self.live()?;
        let ckey = c_key(key)?;
        let proc = self.proc_of(rank);
        let mut nap = Duration::from_millis(2);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // Whole seconds, at least one (PMIX_TIMEOUT 0 means forever).
            let timeout_s = left.as_secs().clamp(1, i32::MAX as u64) as i32;
            let rc = match self.get_once(&proc, &ckey, timeout_s) {
                Ok(v) => {
                    return v.bytes().ok_or_else(|| {
                        Error::Bootstrap(format!(
                            "rank {rank}'s {key} in PMIx is not a byte object (type {})",
                            v.kind()
                        ))
                    })
                }
                Err(rc) => rc,
            };
            let retry = rc == sys::PMIX_ERR_NOT_FOUND || rc == sys::PMIX_ERR_TIMEOUT;
            if !retry || Instant::now() + nap >= deadline {
                return Err(failed(
                    &format!("PMIx_Get of rank {rank}'s {key} (it has not put it?)"),
                    rc,
                ));
            }
            tracing::debug!(
                "PMIx_Get of rank {rank}'s {key}: {} ({rc}); asking again in {nap:?}",
                // SAFETY: a static string for every status.
                unsafe { CStr::from_ptr(sys::PMIx_Error_string(rc)) }.to_string_lossy()
            );
            self.live()?;
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(100));
        }
    }

    /// Ends the PMIx session (once; later calls of any kind fail). The
    /// server sees the rank finish in order.
    pub fn finalize(&self) {
        if self.finalized.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: the client was initialized by `init` and is finalized
        // once (the flag above); no info array is passed.
        let rc = unsafe { sys::PMIx_Finalize(std::ptr::null(), 0) };
        if rc != sys::PMIX_SUCCESS as sys::pmix_status_t {
            tracing::warn!("{}", failed("PMIx_Finalize", rc));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.finalize();
    }
}

/// A PMIx attribute name (`PMIX_JOB_SIZE`, ...) as a C string.
fn key_of(name: &'static [u8]) -> &'static CStr {
    CStr::from_bytes_with_nul(name).expect("bindgen keeps the attribute's NUL")
}

/// The PMIx library's version string.
pub(crate) fn version() -> String {
    // SAFETY: PMIx_Get_version returns a pointer to a static string.
    unsafe { CStr::from_ptr(sys::PMIx_Get_version()) }
        .to_string_lossy()
        .into_owned()
}

/// Peers' endpoints from PMIx, fetched on first use (`PMIx_Get` of the
/// peer's [`ENDPOINT`]).
#[derive(Debug, Clone)]
pub(crate) struct PmixEndpoints {
    /// The session.
    pub session: Arc<Session>,
}

impl PmixEndpoints {
    /// The endpoint rank `rank` put, waiting for it until `deadline`.
    pub fn endpoint(&self, rank: u32, deadline: Instant) -> Result<Endpoint> {
        let bytes = self.session.get_bytes(rank, ENDPOINT, deadline)?;
        let ep: Endpoint = crate::net::frame::decode(&bytes)?;
        if ep.rank != rank {
            return Err(Error::Bootstrap(format!(
                "PMIx holds rank {}'s endpoint under rank {rank}",
                ep.rank
            )));
        }
        Ok(ep)
    }

    /// Puts this rank's endpoint and commits it.
    pub fn publish(&self, me: &Endpoint) -> Result<()> {
        let bytes = crate::net::frame::encode_body(me)?;
        self.session.put_bytes(ENDPOINT, &bytes)?;
        self.session.commit()
    }
}

impl EndpointSource for PmixEndpoints {
    fn lookup(&self, ranks: &[u32], timeout: Duration) -> Result<Vec<Endpoint>> {
        let deadline = Instant::now() + timeout;
        ranks.iter().map(|&r| self.endpoint(r, deadline)).collect()
    }
}

/// Starts the PMIx bootstrap for a process launched under a PMIx server
/// (`gaspi_launch::Launcher::Pmix`): `PMIx_Init`, then rank, size and the
/// local figures of `info` from PMIx, and the job key unless
/// `GASPI_JOB_KEY` gave one: rank 0 makes one and puts it
/// ([`JOB_KEY`]), every other rank fetches it from PMIx (waiting for rank
/// 0 to commit it, until `deadline`). The PMIx server is the user's own
/// and serves this job's processes, as the user's key file would.
pub(crate) fn start(
    info: &mut gaspi_launch::LaunchInfo,
    deadline: Instant,
) -> Result<PmixEndpoints> {
    let session = Session::init()?;
    info.rank = session.rank;
    info.size = session.size;
    info.local_rank = session.local_rank.unwrap_or(info.local_rank);
    info.local_size = session
        .local_size
        .unwrap_or(info.local_size)
        .clamp(1, session.size);
    if info.job_key.is_empty() {
        info.job_key = match session.rank {
            0 => {
                let key: [u8; 32] = rand::random();
                let hex: Vec<u8> = key
                    .iter()
                    .flat_map(|b| format!("{b:02x}").into_bytes())
                    .collect();
                session.put_bytes(JOB_KEY, &hex)?;
                session.commit()?;
                hex
            }
            _ => session.get_bytes(0, JOB_KEY, deadline).map_err(|e| {
                Error::Bootstrap(format!("the job key from rank 0 through PMIx: {e}"))
            })?,
        };
    }
    Ok(PmixEndpoints { session })
}
