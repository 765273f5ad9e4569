//! Fuzz target `tcp_put`: the checks are `gaspi::fuzzing::tcp_put`'s.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gaspi::fuzzing::tcp_put(data));
