//! Fuzz target `rendezvous`: the checks are `gaspi::fuzzing::rendezvous`'s.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gaspi::fuzzing::rendezvous(data));
