//! Fuzz target `frames`: the checks are `gaspi::fuzzing::frames`'s.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gaspi::fuzzing::frames(data));
