//! Fuzz target `passive`: the checks are `gaspi::fuzzing::passive`'s.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gaspi::fuzzing::passive(data));
