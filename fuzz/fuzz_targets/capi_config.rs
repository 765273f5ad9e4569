//! Fuzz target `capi_config`: the checks are `runtime/capi/tests/fuzz/config.rs`'s
//! (decision 0088), shared with the corpus replay test there.
#![no_main]
#[path = "../../runtime/capi/tests/fuzz/config.rs"]
mod config;
libfuzzer_sys::fuzz_target!(|data: &[u8]| config::capi_config(data));
