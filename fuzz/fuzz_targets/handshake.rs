//! Fuzz target `handshake`: the checks are `gaspi::fuzzing::handshake`'s.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gaspi::fuzzing::handshake(data));
