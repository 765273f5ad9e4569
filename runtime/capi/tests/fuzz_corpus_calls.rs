//! Replays the committed corpus of fuzz target `capi_calls` through its
//! checks (`fuzz/calls.rs`, decision 0088). Its own process: the checks
//! start a one-rank runtime through `gaspi_proc_init` and keep it.

#[path = "fuzz/calls.rs"]
mod calls;
#[path = "fuzz/replay.rs"]
mod replay;

#[test]
fn the_capi_calls_corpus_keeps_its_invariants() {
    replay::replay("capi_calls", calls::capi_calls);
}
