//! The bottom layer: values and rules every other layer shares.
//!
//! Ranks and ids, errors, the configuration, bounds checks, the descriptor
//! of a segment (with each transport's remote key as opaque bytes) and the
//! statistics counters. Nothing here imports anything else of the crate, so
//! any layer may use it and it never pulls a layer in with it; what a
//! value means on the wire or to a transport is decided above.

pub(crate) mod bounds;
pub(crate) mod config;
pub(crate) mod descriptor;
pub(crate) mod error;
pub(crate) mod ids;
pub(crate) mod stats;
