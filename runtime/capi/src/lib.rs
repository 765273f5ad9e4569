//! GPI-2 1.6's C interface over the `gaspi` runtime: `libGPI2.so` and
//! `libGPI2.a` with the headers `include/GASPI.h`, `GASPI_types.h` and
//! `GASPI_Ext.h`, so that a GASPI program written in C, C++ or Fortran for
//! GPI-2 links against this runtime with no source change.
//!
//! How it is shaped, and why:
//! - GASPI is a process-global API (`gaspi_proc_init` .. `gaspi_proc_term`),
//!   the Rust API a value ([`gaspi::Gaspi`], `Send + Sync`). The value lives
//!   in one process-global `RwLock<Option<Runtime>>`: every call takes the
//!   read lock for its duration (many threads call at once, as GASPI allows),
//!   `gaspi_proc_init` and `gaspi_proc_term` take the write lock. A call
//!   blocked in another thread makes `gaspi_proc_term` return
//!   `GASPI_TIMEOUT` when its timeout runs out, never a use after free.
//! - Every exported function runs inside `entry`, which catches panics
//!   (a panic never unwinds into C: it becomes `GASPI_ERROR` with a
//!   `tracing` error naming the call) and turns [`gaspi::Error`] into
//!   GPI-2's return codes ([`code_of`]).
//! - Pointer arguments are checked for null before use
//!   (`GASPI_ERR_NULLPTR`). Beyond that, the C caller's promise is the
//!   one GASPI.h states: a non-null pointer is valid for the access the
//!   call describes (an out value, or `num` entries of a list).
//! - The variadic `gaspi_printf` family is C (`src/printf.c`, built by
//!   `build.rs`); `printf.rs` exports it through jumps.
//!
//! The modules follow GASPI.h's families: `process` (configuration, start,
//! information, errors, statistics, time), `comm` (segments, one-sided
//! calls, notifications, atomics, passive messages, queues), `collectives`
//! (groups, barrier, allreduce), `ext` (GASPI_Ext.h's extras), `threads`
//! (GASPI_Threads.h).

// The library is named GPI2 (libGPI2.so), like GPI-2's, and the C types
// keep their C names.
#![allow(non_snake_case, non_camel_case_types)]
// The extern functions are called from C; their contract is GASPI.h's,
// stated once above and in the header, not on each function.
#![allow(clippy::missing_safety_doc)]

mod collectives;
mod comm;
mod ext;
mod pgaspi;
mod printf;
mod process;
mod threads;
pub mod types;

// The exported functions of segments, communication and the process, for
// Rust callers of the rlib: the fuzz targets `capi_*` and this crate's
// tests (decision 0088). Their documentation is GASPI.h's, hence hidden.
#[doc(hidden)]
pub use comm::*;
#[doc(hidden)]
pub use process::*;

use gaspi::{Error, Gaspi, Side, Timeout};
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, PoisonError, RwLock};
pub use types::*;

/// The running job of this process, between `gaspi_proc_init` and
/// `gaspi_proc_term`.
pub(crate) struct Runtime {
    pub(crate) gaspi: Gaspi,
    /// `gaspi_config_t::allreduce_elem_max` as configured: the most
    /// elements of `gaspi_allreduce` (larger than the runtime's single
    /// allreduce, it runs in pieces: `collectives.rs`).
    pub(crate) allreduce_elem_max: u32,
    /// Device contexts handed out by `gaspi_device_context`, kept alive
    /// (their request rings served) until `gaspi_proc_term`.
    pub(crate) devices: Mutex<Vec<gaspi::gpu::DeviceContext>>,
}

/// The process-global context of the C interface.
pub(crate) static RUNTIME: RwLock<Option<Runtime>> = RwLock::new(None);

/// A GASPI return code other than `GASPI_SUCCESS`, carried through `?`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Code(pub(crate) gaspi_return_t);

impl From<Error> for Code {
    fn from(e: Error) -> Code {
        let code = code_of(&e);
        if let Error::OutOfBounds {
            side: Side::Local,
            seg,
            offset,
            end,
            seg_size,
            ..
        } = e
        {
            // Said at the default level: code ported from GPI-2's release
            // build, which does not check local offsets, meets it here
            // first (decision 0060).
            tracing::warn!("{}", local_offset_outside(seg, offset, end, seg_size));
        } else if code != GASPI_TIMEOUT {
            tracing::debug!("GASPI call failed: {e} (code {code})");
        }
        Code(code)
    }
}

/// The log line of a local offset outside its segment: which offset, how
/// far outside which segment, and why GPI-2 code may have passed it.
fn local_offset_outside(seg: gaspi::SegId, offset: u64, end: u64, seg_size: u64) -> String {
    let size = end.wrapping_sub(offset);
    // An address difference below the segment's start reads as a huge
    // unsigned offset: say it as the negative number it was.
    let place = if offset > i64::MAX as u64 {
        format!(
            "local offset {} ({offset:#x}) lies {} bytes before the start of {seg}",
            offset as i64,
            (offset as i64).unsigned_abs()
        )
    } else if offset >= seg_size {
        format!(
            "local offset {offset} ({offset:#x}) lies {} bytes past the end of {seg}",
            offset - seg_size
        )
    } else {
        format!(
            "local offset {offset} with size {size} ends {} bytes past the end of {seg}",
            end - seg_size
        )
    };
    format!(
        "{place} ({seg_size} bytes): refused with GASPI_ERR_INV_LOC_OFF. A local offset \
         must lie inside the local segment; GPI-2's debug library (libGPI2-dbg) refuses \
         it too, only its release build leaves it unchecked. Code that passes an \
         address difference such as (char*)&variable - segment_base should copy the \
         data into the segment (gaspi_segment_ptr) and pass its offset there \
         (docs/decisions/0060-local-offsets-outside-the-segment.md)"
    )
}

/// The result of a call's body.
pub(crate) type Ret = Result<(), Code>;

/// GPI-2 1.6's return code for a runtime error: the specific `GASPI_ERR_*`
/// where GPI-2 has one for the same fault, `GASPI_ERROR` otherwise (a dead
/// or terminated peer among them, as in GPI-2).
pub fn code_of(e: &Error) -> gaspi_return_t {
    match e {
        Error::Timeout { .. } => GASPI_TIMEOUT,
        Error::NotInitialized => GASPI_ERR_NOINIT,
        Error::SegmentIdOutOfRange { .. } | Error::UnknownSegment { .. } => GASPI_ERR_INV_SEG,
        Error::SegmentExists { .. } => GASPI_ERR_INV_SEG,
        Error::OutOfBounds {
            side: Side::Local, ..
        } => GASPI_ERR_INV_LOC_OFF,
        Error::OutOfBounds {
            side: Side::Remote, ..
        } => GASPI_ERR_INV_REM_OFF,
        Error::NotifyIdOutOfRange { .. } => GASPI_ERR_INV_NOTIF_ID,
        Error::NotifyValueZero => GASPI_ERR_INV_NOTIF_VAL,
        Error::BadRank { .. } => GASPI_ERR_INV_RANK,
        Error::BadQueue { .. } => GASPI_ERR_INV_QUEUE,
        Error::QueueFull { .. } => GASPI_QUEUE_FULL,
        Error::ZeroSize { what } if what.contains("segment") => GASPI_ERR_INV_SEGSIZE,
        Error::ZeroSize { .. } | Error::TooLarge { .. } => GASPI_ERR_INV_COMMSIZE,
        Error::SegmentTooLarge { .. } => GASPI_ERR_INV_SEGSIZE,
        Error::BadGroup { .. } | Error::NotGroupMember { .. } => GASPI_ERR_INV_GROUP,
        Error::GroupCommitted { .. } | Error::AlreadyMember { .. } => GASPI_ERR_INV_GROUP,
        Error::TooManyElements { .. } | Error::LengthMismatch { .. } => GASPI_ERR_INV_NUM,
        Error::Unaligned { .. } => GASPI_ERR_UNALIGN_OFF,
        Error::NoFreeGroup { .. } => GASPI_ERR_MANY_GRP,
        Error::NoFreeQueue { .. } => GASPI_ERR_INV_QUEUE,
        Error::CollectiveInProgress { .. } => GASPI_ERR_ACTIVE_COLL,
        Error::PassiveSize { .. } => GASPI_ERR_INV_COMMSIZE,
        Error::Config(_) => GASPI_ERR_CONFIG,
        Error::Bootstrap(_) => GASPI_ERR_SN,
        Error::Gpu(_) => GASPI_ERR_DEVICE,
        _ => GASPI_ERROR,
    }
}

/// GASPI's timeout in milliseconds as the runtime's [`Timeout`].
pub fn timeout_of(ms: gaspi_timeout_t) -> Timeout {
    match ms {
        GASPI_BLOCK => Timeout::Block,
        GASPI_TEST => Timeout::Test,
        ms => Timeout::Ms(ms),
    }
}

/// Runs the body of the exported function `name`: a panic becomes
/// `GASPI_ERROR` (logged), an error its code.
pub(crate) fn entry(name: &'static str, body: impl FnOnce() -> Ret) -> gaspi_return_t {
    match std::panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => GASPI_SUCCESS,
        Ok(Err(Code(code))) => code,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!("{name}: panic caught at the C boundary: {why}");
            GASPI_ERROR
        }
    }
}

/// [`entry`] for calls that need the running job: `GASPI_ERR_NOINIT`
/// before `gaspi_proc_init` and after `gaspi_proc_term`.
pub(crate) fn call(name: &'static str, body: impl FnOnce(&Runtime) -> Ret) -> gaspi_return_t {
    entry(name, || {
        let slot = RUNTIME.read().unwrap_or_else(PoisonError::into_inner);
        let rt = slot.as_ref().ok_or(Code(GASPI_ERR_NOINIT))?;
        body(rt)
    })
}

/// Checks that a pointer argument is not null.
pub(crate) fn non_null<T>(p: *const T) -> Ret {
    if p.is_null() {
        Err(Code(GASPI_ERR_NULLPTR))
    } else {
        Ok(())
    }
}

/// Stores `value` through the out argument `p` of an exported call.
///
/// Only for out arguments of the C interface, whose caller promises (by
/// GASPI.h's contract) that a non-null `p` points to writable memory for
/// one `T`; null is refused here.
pub(crate) fn put<T>(p: *mut T, value: T) -> Ret {
    non_null(p)?;
    // SAFETY: `p` is not null, and by the C interface's contract a non-null
    // out argument is valid for writing one `T`; write_unaligned asks no
    // alignment of it.
    unsafe { p.write_unaligned(value) };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gaspi::{Queue, Rank, SegId};

    #[test]
    fn a_panic_becomes_gaspi_error_and_does_not_unwind() {
        assert_eq!(entry("test", || panic!("boom")), GASPI_ERROR);
        assert_eq!(
            entry("test", || Err(Code(GASPI_ERR_INV_SEG))),
            GASPI_ERR_INV_SEG
        );
        assert_eq!(entry("test", || Ok(())), GASPI_SUCCESS);
    }

    #[test]
    fn calls_before_init_get_noinit_and_null_out_pointers_nullptr() {
        assert_eq!(call("test", |_| Ok(())), GASPI_ERR_NOINIT);
        assert_eq!(
            put(std::ptr::null_mut::<u32>(), 1),
            Err(Code(GASPI_ERR_NULLPTR))
        );
        let mut x = 0u32;
        assert_eq!(put(&mut x, 7), Ok(()));
        assert_eq!(x, 7);
    }

    #[test]
    fn timeouts_map_block_test_and_milliseconds() {
        assert_eq!(timeout_of(GASPI_BLOCK), Timeout::Block);
        assert_eq!(timeout_of(GASPI_TEST), Timeout::Test);
        assert_eq!(timeout_of(250), Timeout::Ms(250));
    }

    #[test]
    fn runtime_errors_get_gpi2s_specific_codes() {
        let timeout = Error::Timeout {
            op: "wait",
            peer: None,
        };
        assert_eq!(code_of(&timeout), GASPI_TIMEOUT);
        let rank = Error::BadRank {
            rank: Rank(9),
            size: 2,
        };
        assert_eq!(code_of(&rank), GASPI_ERR_INV_RANK);
        let full = Error::QueueFull {
            queue: Queue(0),
            depth: 4,
        };
        assert_eq!(code_of(&full), GASPI_QUEUE_FULL);
        let seg = Error::SegmentIdOutOfRange {
            seg: SegId(255),
            max: 255,
        };
        assert_eq!(code_of(&seg), GASPI_ERR_INV_SEG);
        let dead = Error::PeerDead { rank: Rank(1) };
        assert_eq!(code_of(&dead), GASPI_ERROR);
        assert_eq!(code_of(&Error::NotifyValueZero), GASPI_ERR_INV_NOTIF_VAL);
    }
}
