//! The layer's errors, and the one place a libfabric return code becomes
//! a `Result` (the "result" layer of cudarc's raw / result / safe split).

use gaspi_libfabric_sys as sys;
use std::ffi::CStr;
use std::time::Duration;

/// What went wrong in a libfabric call or operation.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum FabricError {
    /// A libfabric call returned an error code.
    #[error("{call}: {message} (libfabric error {code})")]
    Call {
        /// The libfabric function.
        call: &'static str,
        /// Its (positive) `FI_E*` / errno code.
        code: i32,
        /// `fi_strerror`'s text.
        message: String,
    },
    /// No provider offers what was asked (or the one named is missing).
    #[error("no libfabric provider {wanted}: {reason}")]
    NoProvider {
        /// What was asked for, in words.
        wanted: String,
        /// Why not.
        reason: String,
    },
    /// The provider lacks something this operation needs.
    #[error("the libfabric provider {provider} offers no {what}")]
    Unsupported {
        /// The provider's name.
        provider: String,
        /// What it lacks.
        what: &'static str,
    },
    /// Bad arguments (out of bounds, too large, misaligned): nothing was
    /// posted.
    #[error("{0}")]
    Invalid(String),
    /// An operation to `peer` completed with an error (a completion
    /// queue's error entry), or could not be posted to it.
    #[error("rank {peer}: {message} (libfabric error {code}, provider error {prov_errno})")]
    Peer {
        /// The rank the operation went to.
        peer: u32,
        /// The `FI_E*` code of the entry.
        code: i32,
        /// The provider's own error number.
        prov_errno: i32,
        /// `fi_cq_strerror`'s text.
        message: String,
    },
    /// The endpoint stayed full (`-FI_EAGAIN`) for `timeout` while posting
    /// to `peer`, though its completions were read meanwhile.
    #[error("rank {peer}: could not post {what} within {timeout:?} (the endpoint stayed full)")]
    Timeout {
        /// The rank the operation went to.
        peer: u32,
        /// The operation.
        what: &'static str,
        /// How long it was tried.
        timeout: Duration,
    },
}

/// The layer's `Result`.
pub(crate) type Result<T> = std::result::Result<T, FabricError>;

/// `fi_strerror` of a positive code.
pub(crate) fn strerror(code: i32) -> String {
    // SAFETY: fi_strerror returns a pointer to a static string for any
    // code (an "Unknown error" text for ones it does not know).
    unsafe { CStr::from_ptr(sys::fi_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

/// Turns a libfabric return value (0 or a count on success, `-FI_E*` on
/// failure) into a `Result` carrying the count.
pub(crate) fn check(call: &'static str, rc: isize) -> Result<usize> {
    if rc >= 0 {
        Ok(rc as usize)
    } else {
        let code = (-rc) as i32;
        Err(FabricError::Call {
            call,
            code,
            message: strerror(code),
        })
    }
}

/// Whether `rc` is `-FI_EAGAIN`: try again after reading completions.
pub(crate) fn is_again(rc: isize) -> bool {
    rc == -(sys::FI_EAGAIN as isize)
}
