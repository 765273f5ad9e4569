//! Raw bindings to libfabric (OpenFabrics Interfaces), as bindgen writes
//! them from the system's headers (`rdma/fabric.h`, `fi_domain.h`,
//! `fi_endpoint.h`, `fi_cm.h`, `fi_rma.h`, `fi_atomic.h`, `fi_eq.h`,
//! `fi_errno.h`; libfabric >= 1.17, found through pkg-config).
//!
//! This is the bottom layer only: every item is the C one, `unsafe` to
//! call, with C's types. The runtime wraps it once
//! (`gaspi::transport::libfabric`) into `Result`-returning calls and
//! owning handles; nothing else should use this crate directly.
//!
//! libfabric's data-path and object calls (`fi_fabric`, `fi_domain`,
//! `fi_write`, `fi_cq_read`, `fi_close`, ...) are `static inline`
//! functions of the headers that call through an operations table; the
//! build compiles a C shim with one exported wrapper per such function
//! (bindgen's `wrap_static_fns`), and the declarations here call those
//! wrappers under the C names.
//!
//! Everything is behind the feature `link`: without it the crate is empty
//! and needs nothing to build, so that the workspace builds with nothing
//! but cargo (docs/decisions/0045-libfabric-binding.md).

#![cfg_attr(
    feature = "link",
    allow(
        non_upper_case_globals,
        non_camel_case_types,
        non_snake_case,
        dead_code,
        clippy::all,
        missing_docs,
        rustdoc::all
    )
)]

#[cfg(feature = "link")]
include!(concat!(env!("OUT_DIR"), "/bindings.rs"));

/// The version this binding was written for: calls pass it to
/// `fi_getinfo`, which then gives the 1.17 semantics (and struct layouts)
/// whatever newer library is installed.
#[cfg(feature = "link")]
pub const FI_VERSION_1_17: u32 = (1 << 16) | 17;

/// `FI_ADDR_NOTAVAIL` (`((uint64_t) -1)`, a cast bindgen does not read):
/// no address.
#[cfg(feature = "link")]
pub const FI_ADDR_NOTAVAIL: fi_addr_t = u64::MAX;

/// `FI_KEY_NOTAVAIL` (`((uint64_t) -1)`): `fi_mr_key` has no 64-bit key.
#[cfg(feature = "link")]
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;
