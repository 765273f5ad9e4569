//! Fuzz target `capi_calls`: the checks are `runtime/capi/tests/fuzz/calls.rs`'s
//! (decision 0088), shared with the corpus replay test there.
#![no_main]
#[path = "../../runtime/capi/tests/fuzz/calls.rs"]
mod calls;
libfuzzer_sys::fuzz_target!(|data: &[u8]| calls::capi_calls(data));
