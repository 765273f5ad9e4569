//! Fuzz target `descriptor`: the checks are `gaspi::fuzzing::descriptor`'s.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gaspi::fuzzing::descriptor(data));
