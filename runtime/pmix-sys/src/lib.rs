//! Raw bindings to the PMIx client library (OpenPMIx >= 4, found through
//! pkg-config), as bindgen writes them from `pmix.h`, allowlisting what
//! the runtime's PMIx bootstrap calls: `PMIx_Init`, `PMIx_Finalize`,
//! `PMIx_Put`, `PMIx_Commit`, `PMIx_Get`, `PMIx_Fence`, the value and info
//! helpers, and the types, attribute names (`PMIX_JOB_SIZE`, ...) and
//! status codes they need.
//!
//! This is the bottom layer only: every item is the C one, `unsafe` to
//! call, with C's types (a `pmix_value_t` carries a C union). The runtime
//! wraps it once (`gaspi::net::pmix`) into `Result`-returning calls and an
//! owning session; nothing else should use this crate directly.
//!
//! Everything is behind the feature `link`: without it the crate is empty
//! and needs nothing to build, so that the workspace builds with nothing
//! but cargo (docs/decisions/0084-pmix-bootstrap.md).

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
